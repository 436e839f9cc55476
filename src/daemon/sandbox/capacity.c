/* capacity.c -- what the node can hold: a memory and a vCPU budget for the VMs that exist, and
 * tmpfs room for the snapshots clones map. A create, restore, start or fork that does not fit is
 * refused (429) rather than overcommitting the host until every VM faults. An api process sums
 * its nodes' rows instead (capacity_of_nodes). */
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "log.h"
#include "runtime.h"
#include "store/store.h"

/* Host memory kept for the daemon, the kernel and page cache. */
#define RESERVE_MIB 1024
/* What one QEMU costs beyond guest RAM: its heap, the TCG translation cache. */
#define VM_OVERHEAD_MIB 48
/* Idle sandboxes cost little CPU: vCPUs are overcommitted this much. */
#define VCPUS_PER_CORE 16

static int64_t host_memory_mib(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);

	return pages > 0 && page > 0 ? (int64_t)pages * page / (1024 * 1024) : 0;
}

void capacity_init(struct spaced *d)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	int64_t mem = host_memory_mib();

	d->memory_budget_mib = d->cfg.memory_budget_mib > 0 ? d->cfg.memory_budget_mib
							     : (int)(mem > 2 * RESERVE_MIB ? mem - RESERVE_MIB : mem / 2);
	d->vcpu_budget = d->cfg.vcpu_budget > 0 ? d->cfg.vcpu_budget
						: (int)(cores > 0 ? cores : 1) * VCPUS_PER_CORE;
	log_info("capacity: %d MiB and %d vCPUs for VMs (host: %lld MiB, %ld cores)", d->memory_budget_mib,
		 d->vcpu_budget, (long long)mem, cores);
}

static int64_t free_mib(const char *path)
{
	struct statvfs st;

	if (statvfs(path, &st) < 0)
		return -1;
	return (int64_t)st.f_bavail * (int64_t)st.f_frsize / (1024 * 1024);
}

void capacity_get(struct spaced *d, struct capacity *c)
{
	memset(c, 0, sizeof(*c));
	c->memory_budget_mib = d->memory_budget_mib;
	c->vcpu_budget = d->vcpu_budget;
	c->max_sandboxes = d->cfg.max_sandboxes;
	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next) {
		/* A VM exists (or is about to) in these states; deleting ones
		 * are on their way out. */
		if (!sb_state_has_vm(sb->rec.state) || sb->rec.state == SB_DELETING)
			continue;
		c->running++;
		c->vcpus_used += sb->rec.vcpus;
		c->memory_used_mib += sb->rec.memory_mib + VM_OVERHEAD_MIB;
	}
	c->tmpfs_free_mib = free_mib("/dev/shm");
}

int capacity_admit(struct spaced *d, int vcpus, int memory_mib, int count, space_err *err)
{
	struct capacity c;
	int need_mem = count * (memory_mib + VM_OVERHEAD_MIB), need_cpu = count * vcpus;

	capacity_get(d, &c);
	if (c.running + count > c.max_sandboxes)
		return err_set(err, EDQUOT, "at capacity: %d VMs exist, at most %d (max_sandboxes)", c.running,
			       c.max_sandboxes);
	if (c.memory_used_mib + need_mem > c.memory_budget_mib)
		return err_set(err, EDQUOT,
			       "not enough memory: %d MiB needed, %d MiB of %d MiB free for VMs", need_mem,
			       c.memory_budget_mib - c.memory_used_mib, c.memory_budget_mib);
	if (c.vcpus_used + need_cpu > c.vcpu_budget)
		return err_set(err, EDQUOT, "not enough vCPUs: %d needed, %d of %d free", need_cpu,
			       c.vcpu_budget - c.vcpus_used, c.vcpu_budget);
	return 0;
}

int capacity_snapshot_room(struct spaced *d, enum snap_kind kind, int memory_mib, space_err *err)
{
	char dir[PATH_MAX];
	int64_t avail;

	/* The image is at most the guest's memory (sparse: usually far less). */
	path_snapshot_dir(d, kind, "x", dir);
	*strrchr(dir, '/') = '\0';
	avail = free_mib(kind == SNAP_READY || kind == SNAP_FORK ? "/dev/shm" : d->cfg.state_dir);
	if (avail >= 0 && avail < memory_mib + 64)
		return err_set(err, EDQUOT, "no room for a %s snapshot of %d MiB: %lld MiB free under %s",
			       snap_kind_name(kind), memory_mib, (long long)avail, dir);
	return 0;
}

int capacity_overhead_mib(void)
{
	return VM_OVERHEAD_MIB;
}

static int add_capacity(const struct node_rec *n, void *arg)
{
	struct capacity *c = arg;

	if (n->state != NODE_UP)
		return 0;
	c->memory_budget_mib += n->memory_mib;
	c->memory_used_mib += n->used_memory_mib;
	c->vcpu_budget += n->vcpus;
	c->vcpus_used += n->used_vcpus;
	c->running += n->sandboxes;
	return 0;
}

int capacity_of_nodes(struct store *conn, int max_sandboxes, struct capacity *c, space_err *err)
{
	memset(c, 0, sizeof(*c));
	c->max_sandboxes = max_sandboxes;
	return store_node_each(conn, add_capacity, c, err);
}
