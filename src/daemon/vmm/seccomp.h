/* seccomp.h -- the system-call denylist every jailed child (QEMU, space-memcvt) gets before exec */
#ifndef SPACE_SECCOMP_H
#define SPACE_SECCOMP_H

#include <stddef.h>

/* The calls a VMM or a stream converter never needs, by name: each fails
 * with EPERM under the filter. NULL-terminated. */
extern const char *const jail_denied_syscalls[];

/* How many names of jail_denied_syscalls the running architecture knows
 * (the others are skipped by the filter). For tests and the log. */
size_t jail_seccomp_known(void);

/* Installs the filter on the calling thread: the denylist fails with EPERM,
 * clone3 with ENOSYS (its flags cannot be inspected; libc falls back to
 * clone), clone with any namespace flag with EPERM, everything else is
 * allowed. Sets no_new_privs. Returns 0 or a negative errno. For a forked
 * child right before exec: it allocates, so never after a fork of a
 * multi-threaded process. */
int jail_seccomp_install(void);

#endif
