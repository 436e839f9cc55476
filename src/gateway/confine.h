/* confine.h -- what confines space-gw beyond its uid and its cgroup leaf (the daemon's: see
 * src/daemon/net/gw.c): the seccomp allowlist it installs once set up, before it reads a
 * guest byte (docs/design/egress.md "Confinement"). */
#ifndef SPACE_GW_CONFINE_H
#define SPACE_GW_CONFINE_H

#include "err.h"

/* Installs the allowlist: what a set-up gateway needs to relay (sockets of inet, inet6 and
 * unix only, epoll, files opened for writing only: the audit log), nothing else: no exec, no
 * new processes or threads, no ptrace, mounts or namespaces, no executable memory. A denied
 * call fails with EPERM. The sanitized build (ASan) also lets its runtime's leak checker stop
 * the process with ptrace of itself and read its own /proc files. Needs no_new_privs (or
 * CAP_SYS_ADMIN); irreversible. */
int gw_confine_seccomp(space_err *err);

#endif
