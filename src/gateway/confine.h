/* confine.h -- what confines space-gw beyond its uid: the cgroup leaf it joins before anything
 * else (its memory and tasks count against the sandbox's limits), and the seccomp allowlist it
 * installs once set up, before it reads a guest byte (docs/design/egress.md "Confinement"). */
#ifndef SPACE_GW_CONFINE_H
#define SPACE_GW_CONFINE_H

#include "err.h"

/* Moves the process into each directory's cgroup.procs (one directory under cgroup v2, one
 * per controller under v1). The first failure is returned with the path. */
int gw_confine_cgroups(const char *const *dirs, int n, space_err *err);

/* Installs the allowlist: what a set-up gateway needs to relay (sockets of inet, inet6 and
 * unix only, epoll, files opened for writing only: the audit log), nothing else: no exec, no
 * new processes or threads, no ptrace, mounts or namespaces, no executable memory. A denied
 * call fails with EPERM. The sanitized build (ASan) also lets its runtime's leak checker stop
 * the process with ptrace of itself and read its own /proc files. Needs no_new_privs (or
 * CAP_SYS_ADMIN); irreversible. */
int gw_confine_seccomp(space_err *err);

#endif
