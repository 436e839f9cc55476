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

/* The filter: the denylist fails with EPERM, clone3 with ENOSYS (its flags
 * cannot be inspected; libc falls back to clone), clone with any namespace
 * flag with EPERM, everything else is allowed.
 * jail_seccomp_prepare compiles it (libseccomp, once; it allocates) in the
 * daemon, before fork; jail_seccomp_apply installs it on the calling thread
 * with two system calls (no_new_privs, then seccomp), nothing else: safe in
 * a child forked from the daemon's threads, right before exec.
 * jail_seccomp_install does both. Each returns 0 or a negative errno. */
int jail_seccomp_prepare(void);
int jail_seccomp_apply(void);
int jail_seccomp_install(void);

#endif
