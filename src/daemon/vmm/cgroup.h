/* cgroup.h -- a cgroup leaf per VM (memory, CPU and task limits), cgroup v2 or v1 */
#ifndef SPACE_CGROUP_H
#define SPACE_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <limits.h>

#include "err.h"

#define CGROUP_ROOT "/sys/fs/cgroup"
/* What QEMU takes beyond guest RAM (its code, TCG's translation cache, I/O
 * buffers, page tables): the memory limit is guest RAM plus this. */
#define CGROUP_QEMU_OVERHEAD_MIB 256
#define CGROUP_CPU_PERIOD_US 100000
/* vCPU threads, the I/O thread pool (up to 64 workers), RCU, main loop. */
#define CGROUP_PIDS_BASE 128

struct cgroup_limits {
	int64_t memory_bytes;
	int64_t cpu_quota_us;  /* per CGROUP_CPU_PERIOD_US */
	int pids_max;
};

/* The leaf directories of one VM: one per controller under v1 (memory, cpu,
 * pids), one under v2. */
#define CGROUP_CTRLS 3
struct vm_cgroup {
	bool v2;
	int n;
	char dir[CGROUP_CTRLS][PATH_MAX];
};

/* Limits for a VM of memory_mib and vcpus: RAM + overhead, vcpus whole cores. */
void cgroup_limits_for(int memory_mib, int vcpus, struct cgroup_limits *out);

/* The path of the calling process's cgroup for controller ctrl (v1; "memory"),
 * or its v2 path (ctrl NULL), from the text of /proc/self/cgroup. -1 if absent. */
int cgroup_self_path(const char *proc_cgroup, const char *ctrl, char *out, size_t len);

/* <mount><self>/<scope>/<id>, "//" collapsed; -1 if it does not fit or a
 * name is not a single path component. */
int cgroup_leaf_path(const char *mount, const char *self, const char *scope, const char *id, char *out,
		     size_t len);

/* The leaves of VM `id` under this process's own cgroup, scope "space-<tag>"
 * (nothing is created). */
int cgroup_paths(const char *scope, const char *id, struct vm_cgroup *cg, space_err *err);

/* Creates the leaves and writes the limits (an existing leaf is reused). */
int cgroup_create(const char *scope, const char *id, const struct cgroup_limits *l, struct vm_cgroup *cg,
		  space_err *err);

/* Removes the leaves (they must be empty: the VM is gone). Missing ones are fine. */
int cgroup_remove(const struct vm_cgroup *cg, space_err *err);

/* Removes every leaf of `scope` whose id keep() does not claim, and says how
 * many went. Leaves with a process left in them stay (EBUSY). */
int cgroup_clean_orphans(const char *scope, bool (*keep)(const char *id, void *arg), void *arg);

#endif
