/* tty.h -- the local terminal for `spacectl exec -t`: its size, raw mode, and
 * putting it back as it was on every way out */
#ifndef SPACE_CLI_TTY_H
#define SPACE_CLI_TTY_H

#include "err.h"

/* The window size of the terminal on fd.  0, or -1 when fd is no terminal
 * or the size is unknown (0 rows or columns). */
int tty_winsize(int fd, unsigned *rows, unsigned *cols);

/*
 * Put the terminal on fd in raw mode (cfmakeraw on a copy of its settings).
 * The first call saves the settings and, before changing anything, arranges
 * for tty_restore() to run at exit() and on the signals that end a process
 * by default and that spacectl does not otherwise handle (SIGQUIT, SIGABRT,
 * SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGSYS, SIGXCPU, SIGXFSZ); callers that
 * _exit() or handle SIGINT/SIGTERM/SIGHUP themselves call tty_restore() first.
 * Later calls (after a SIGCONT) apply raw mode again.  Returns 0 or -1 (e set).
 */
int tty_raw(int fd, space_err *e);

/* Put the saved settings back, if raw mode is on.  Idempotent and
 * async-signal-safe (tcsetattr and an atomic flag only). */
void tty_restore(void);

/* Whether raw mode is on now. */
int tty_is_raw(void);

/* The line end for messages printed while the terminal may be raw:
 * "\r\n" when it is (no output processing), "\n" otherwise. */
const char *tty_eol(void);

#endif
