/* cgroup.c -- one cgroup leaf per VM under the daemon's own cgroup: memory, CPU and task limits.
 *
 * Layout: <controller mount><daemon's cgroup>/space-<tag>/<sandbox id>.
 * Under cgroup v2 (/sys/fs/cgroup is cgroup2) there is one tree, and the
 * scope's parent must delegate memory, cpu and pids in its subtree_control;
 * v2 forbids processes in a cgroup that delegates, so when the daemon's own
 * cgroup refuses (EBUSY) the daemon moves itself into a "daemon" leaf beside
 * the scope first. Under v1 (or hybrid) each controller has its own tree:
 * memory.limit_in_bytes, cpu.cfs_quota_us / cfs_period_us, pids.max. */
#include "cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <linux/magic.h>

#include "cleanup.h"

static const char *const v1_ctrls[CGROUP_CTRLS] = { "memory", "cpu", "pids" };

void cgroup_limits_for(int memory_mib, int vcpus, struct cgroup_limits *out)
{
	out->memory_bytes = ((int64_t)memory_mib + CGROUP_QEMU_OVERHEAD_MIB) << 20;
	out->cpu_quota_us = (int64_t)vcpus * CGROUP_CPU_PERIOD_US;
	out->pids_max = CGROUP_PIDS_BASE + vcpus;
}

/* Is `ctrl` one of the comma-separated names in list[0..len)? */
static bool has_ctrl(const char *list, size_t len, const char *ctrl)
{
	size_t n = strlen(ctrl);

	for (size_t i = 0; i < len;) {
		size_t j = i;
		while (j < len && list[j] != ',')
			j++;
		if (j - i == n && memcmp(list + i, ctrl, n) == 0)
			return true;
		i = j + 1;
	}
	return false;
}

int cgroup_self_path(const char *text, const char *ctrl, char *out, size_t len)
{
	for (const char *line = text; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t llen = end ? (size_t)(end - line) : strlen(line);
		const char *c1 = memchr(line, ':', llen);
		const char *c2 = c1 ? memchr(c1 + 1, ':', llen - (size_t)(c1 + 1 - line)) : NULL;

		if (c2) {
			const char *list = c1 + 1;
			size_t list_len = (size_t)(c2 - list);
			bool match = ctrl ? has_ctrl(list, list_len, ctrl)
					  : (list_len == 0 && c1 - line == 1 && line[0] == '0');
			size_t plen = llen - (size_t)(c2 + 1 - line);

			if (match && plen > 0 && c2[1] == '/') {
				if (plen >= len)
					return -1;
				memcpy(out, c2 + 1, plen);
				out[plen] = '\0';
				return 0;
			}
		}
		line = end ? end + 1 : NULL;
	}
	return -1;
}

static bool component_ok(const char *s)
{
	return s && *s && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

int cgroup_leaf_path(const char *mount, const char *self, const char *scope, const char *id, char *out,
		     size_t len)
{
	if (!component_ok(scope) || (id && !component_ok(id)) || !self || self[0] != '/' ||
	    strstr(self, "/../") || strstr(self, "/./"))
		return -1;
	/* self is "/" for the root cgroup: no double slash. */
	const char *sep = strcmp(self, "/") == 0 ? "" : self;
	int n = id ? snprintf(out, len, "%s%s/%s/%s", mount, sep, scope, id)
		   : snprintf(out, len, "%s%s/%s", mount, sep, scope);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

static bool is_v2(void)
{
	struct statfs sf;

	return statfs(CGROUP_ROOT, &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC;
}

static int read_self(char *buf, size_t len, space_err *err)
{
	_cleanup_close_ int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return err_sys(err, errno, "open /proc/self/cgroup");
	n = read(fd, buf, len - 1);
	if (n <= 0)
		return err_sys(err, n < 0 ? errno : EIO, "read /proc/self/cgroup");
	buf[n] = '\0';
	return 0;
}

/* The directory of controller i (or the v2 tree) under which scopes live,
 * i.e. <mount><self>, with the leaf of `id` (NULL: the scope itself). */
static int leaf(bool v2, int i, const char *text, const char *scope, const char *id, char *out,
		space_err *err)
{
	char self[PATH_MAX], mount[64];

	if (cgroup_self_path(text, v2 ? NULL : v1_ctrls[i], self, sizeof(self)) < 0)
		return err_set(err, ENOENT, "no %s cgroup of ours in /proc/self/cgroup",
			       v2 ? "v2" : v1_ctrls[i]);
	snprintf(mount, sizeof(mount), v2 ? CGROUP_ROOT : CGROUP_ROOT "/%s", v1_ctrls[i]);
	if (cgroup_leaf_path(mount, self, scope, id, out, PATH_MAX) < 0)
		return err_set(err, EINVAL, "cgroup path for %s/%s does not fit", scope, id ? id : "");
	return 0;
}

int cgroup_paths(const char *scope, const char *id, struct vm_cgroup *cg, space_err *err)
{
	char text[4096];

	memset(cg, 0, sizeof(*cg));
	if (read_self(text, sizeof(text), err) < 0)
		return -1;
	cg->v2 = is_v2();
	cg->n = cg->v2 ? 1 : CGROUP_CTRLS;
	for (int i = 0; i < cg->n; i++)
		if (leaf(cg->v2, i, text, scope, id, cg->dir[i], err) < 0)
			return -1;
	return 0;
}

static int write_file(const char *dir, const char *name, const char *value, space_err *err)
{
	char path[PATH_MAX];
	size_t n = strlen(value);

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return err_sys(err, errno, "open %s", path);
	if (write(fd, value, n) != (ssize_t)n)
		return err_sys(err, errno, "write '%s' to %s", value, path);
	return 0;
}

static int mkdir_one(const char *path, space_err *err)
{
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return err_sys(err, errno, "mkdir %s", path);
	return 0;
}

/* v2: the scope's parent delegates the three controllers, the scope too. */
static int v2_delegate(const char *scope_dir, space_err *err)
{
	char parent[PATH_MAX], procs[32];
	space_err e2 = { 0 };

	snprintf(parent, sizeof(parent), "%s", scope_dir);
	*strrchr(parent, '/') = '\0';
	if (write_file(parent, "cgroup.subtree_control", "+memory +cpu +pids", &e2) == 0)
		return write_file(scope_dir, "cgroup.subtree_control", "+memory +cpu +pids", err);
	if (e2.code != EBUSY)
		return err_set(err, e2.code, "%s", e2.msg);
	/* Processes in the parent (us): move ourselves into a leaf first. */
	char leafdir[PATH_MAX + 8];
	snprintf(leafdir, sizeof(leafdir), "%s/daemon", parent);
	snprintf(procs, sizeof(procs), "%d", (int)getpid());
	if (mkdir_one(leafdir, err) < 0 || write_file(leafdir, "cgroup.procs", procs, err) < 0 ||
	    write_file(parent, "cgroup.subtree_control", "+memory +cpu +pids", err) < 0)
		return -1;
	return write_file(scope_dir, "cgroup.subtree_control", "+memory +cpu +pids", err);
}

static int set_limits(const struct vm_cgroup *cg, const struct cgroup_limits *l, space_err *err)
{
	char mem[32], cpu[64], pids[32];

	snprintf(mem, sizeof(mem), "%lld", (long long)l->memory_bytes);
	snprintf(pids, sizeof(pids), "%d", l->pids_max);
	if (cg->v2) {
		snprintf(cpu, sizeof(cpu), "%lld %d", (long long)l->cpu_quota_us, CGROUP_CPU_PERIOD_US);
		return write_file(cg->dir[0], "memory.max", mem, err) < 0 ||
				       write_file(cg->dir[0], "cpu.max", cpu, err) < 0 ||
				       write_file(cg->dir[0], "pids.max", pids, err) < 0
			       ? -1
			       : 0;
	}
	snprintf(cpu, sizeof(cpu), "%lld", (long long)l->cpu_quota_us);
	if (write_file(cg->dir[0], "memory.limit_in_bytes", mem, err) < 0)
		return -1;
	/* The period first: a quota is checked against the current period. */
	snprintf(mem, sizeof(mem), "%d", CGROUP_CPU_PERIOD_US);
	if (write_file(cg->dir[1], "cpu.cfs_period_us", mem, err) < 0 ||
	    write_file(cg->dir[1], "cpu.cfs_quota_us", cpu, err) < 0)
		return -1;
	return write_file(cg->dir[2], "pids.max", pids, err);
}

int cgroup_create(const char *scope, const char *id, const struct cgroup_limits *l, struct vm_cgroup *cg,
		  space_err *err)
{
	char scope_dir[PATH_MAX];

	if (cgroup_paths(scope, id, cg, err) < 0)
		return err_wrap(err, "cgroup of %s", id);
	for (int i = 0; i < cg->n; i++) {
		snprintf(scope_dir, sizeof(scope_dir), "%s", cg->dir[i]);
		*strrchr(scope_dir, '/') = '\0';
		if (mkdir_one(scope_dir, err) < 0)
			return -1;
		if (cg->v2 && v2_delegate(scope_dir, err) < 0)
			return err_wrap(err, "delegating controllers to %s", scope_dir);
		if (mkdir_one(cg->dir[i], err) < 0)
			return -1;
	}
	if (set_limits(cg, l, err) < 0) {
		cgroup_remove(cg, NULL);
		return err_wrap(err, "cgroup limits of %s", id);
	}
	return 0;
}

int cgroup_remove(const struct vm_cgroup *cg, space_err *err)
{
	int rc = 0;

	for (int i = 0; i < cg->n; i++) {
		if (!cg->dir[i][0] || rmdir(cg->dir[i]) == 0 || errno == ENOENT)
			continue;
		if (rc == 0 && err)
			err_sys(err, errno, "rmdir %s", cg->dir[i]);
		rc = -1;
	}
	return rc;
}

int cgroup_clean_orphans(const char *scope, bool (*keep)(const char *id, void *arg), void *arg)
{
	char text[4096], dir[PATH_MAX], path[PATH_MAX + 256];
	space_err err = { 0 };
	bool v2 = is_v2();
	int removed = 0;

	if (read_self(text, sizeof(text), &err) < 0)
		return 0;
	for (int i = 0; i < (v2 ? 1 : CGROUP_CTRLS); i++) {
		if (leaf(v2, i, text, scope, NULL, dir, &err) < 0)
			continue;
		_cleanup_closedir_ DIR *dd = opendir(dir);
		struct dirent *de;

		while (dd && (de = readdir(dd))) {
			if (de->d_type != DT_DIR || de->d_name[0] == '.' || keep(de->d_name, arg))
				continue;
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			removed += rmdir(path) == 0;
		}
	}
	return removed;
}
