/* console.h -- capture of a VM's serial console into a size-bounded log file */
#ifndef SPACE_CONSOLE_H
#define SPACE_CONSOLE_H

#include <event2/event.h>
#include <stddef.h>

#include "err.h"

/* A guest can print forever: the log is kept under CONSOLE_MAX_BYTES by
 * rewriting it to its last CONSOLE_KEEP_BYTES whenever it grows past. */
#define CONSOLE_MAX_BYTES (2u << 20)
#define CONSOLE_KEEP_BYTES (1u << 20)

struct console;

/* Connects to QEMU's console socket (a chardev socket server) and appends
 * what it reads to log_path (created 0600 if missing). Output the guest
 * prints while nobody is connected (e.g. during a daemon restart) is dropped
 * by QEMU, never buffered. */
struct console *console_open(struct event_base *base, const char *sock_path, const char *log_path,
			     space_err *err);
/* Same over a connected fd (owned from now on) with explicit bounds. */
struct console *console_new(struct event_base *base, int fd, const char *log_path, size_t max,
			    size_t keep, space_err *err);
/* Reads, without blocking, what the socket still holds (before closing it
 * once QEMU is gone, so the last lines of a crash are kept). */
void console_drain(struct console *c);
void console_free(struct console *c);

#endif
