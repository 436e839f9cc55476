/* paths.c -- where things live.
 *
 * Persistent files (disk layers, console logs, output spools, named and
 * suspend snapshots) go under the state directory. Unix sockets go to a short
 * directory because sun_path holds 108 bytes and state directories can be
 * long; ready and fork snapshots go to tmpfs (/dev/shm) so clones map their
 * memory from RAM. Both are named by a hash of the state directory so daemons
 * side by side never collide. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon.h"

void path_run_dir(const struct spaced *d, const char *sb_id, char out[PATH_MAX])
{
	snprintf(out, PATH_MAX, "%s/sandboxes/%s", d->cfg.state_dir, sb_id);
}

void path_sock_dir(const struct spaced *d, const char *sb_id, char out[PATH_MAX])
{
	snprintf(out, PATH_MAX, "/run/space/%s/%s", d->state_tag, sb_id);
}

void path_jail_root(const struct spaced *d, char out[PATH_MAX])
{
	snprintf(out, PATH_MAX, "/run/space/%s/jail", d->state_tag);
}

void path_jail_dir(const struct spaced *d, const char *sb_id, char out[PATH_MAX])
{
	snprintf(out, PATH_MAX, "/run/space/%s/jail/%s", d->state_tag, sb_id);
}

void path_console_log(const struct spaced *d, const char *sb_id, char out[PATH_MAX])
{
	snprintf(out, PATH_MAX, "%s/sandboxes/%s/console.log", d->cfg.state_dir, sb_id);
}

void path_session_spool(const struct spaced *d, const char *sb_id, const char *ss_id, char out[PATH_MAX])
{
	snprintf(out, PATH_MAX, "%s/sandboxes/%s/sessions/%s.out", d->cfg.state_dir, sb_id, ss_id);
}

void path_disks_dir(const struct spaced *d, char out[PATH_MAX])
{
	snprintf(out, PATH_MAX, "%s/disks", d->cfg.state_dir);
}

void path_tmpfs_root(const struct spaced *d, char out[PATH_MAX])
{
	snprintf(out, PATH_MAX, "/dev/shm/space-%s", d->state_tag);
}

void path_snapshot_dir(const struct spaced *d, enum snap_kind kind, const char *sn_id, char out[PATH_MAX])
{
	if (kind == SNAP_READY || kind == SNAP_FORK)
		snprintf(out, PATH_MAX, "/dev/shm/space-%s/snapshots/%s", d->state_tag, sn_id);
	else if (kind == SNAP_SUSPEND && d->cfg.shared_dir[0])
		/* restorable by any node of a cluster (docs/design/cluster.md) */
		snprintf(out, PATH_MAX, "%s/snapshots/%s", d->cfg.shared_dir, sn_id);
	else
		snprintf(out, PATH_MAX, "%s/snapshots/%s", d->cfg.state_dir, sn_id);
}

/* One level, mode 0700; an existing directory must be ours and private: on a
 * shared tmpfs another local user could have made it first to read what we
 * put there. */
static int mkdir_private(const char *path, space_err *err)
{
	struct stat st;

	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return err_sys(err, errno, "creating %s", path);
	if (lstat(path, &st) < 0)
		return err_sys(err, errno, "stat %s", path);
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 0077))
		return err_set(err, EACCES, "%s is not a private directory of ours (owner %u, mode %o)", path,
			       (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	return 0;
}

int path_mkdirs(const char *path, space_err *err)
{
	char buf[PATH_MAX];
	char *p;

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return err_set(err, ENAMETOOLONG, "path too long: %.100s", path);
	/* Parents that exist already (/dev/shm, the state directory's parent)
	 * are left as they are; what we create is private. */
	for (p = buf + 1; (p = strchr(p, '/')); p++) {
		struct stat st;

		*p = '\0';
		if (stat(buf, &st) < 0 && mkdir_private(buf, err) < 0)
			return -1;
		*p = '/';
	}
	return mkdir_private(buf, err);
}
