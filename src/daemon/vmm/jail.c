/* jail.c -- building a VM's jail root (daemon side) and entering it (child side).
 *
 * The root is a small tmpfs at a path only root can reach (the daemon's run
 * directory, 0700 above it), marked shared. The child unshares its mount
 * namespace, makes every mount a slave and pivots into the root: it sees
 * the read-only system it needs to run, its kernel and its own disk chain,
 * nothing else of the host. Because its root is a slave of the daemon's
 * copy, a bind the daemon adds later (the new top layer of a disk freeze)
 * appears inside the running VM. The mounts live in the host's namespace,
 * so they survive a daemon restart with the QEMU that uses them.
 *
 * Tear a jail down only when its QEMU is gone: unmounting the binds under a
 * shared root propagates into the VM's namespace too. */
#include "jail.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <grp.h>
#include <linux/securebits.h>

#include "cleanup.h"
#include "qcow2.h"

#define JAIL_TMPFS_OPTS "mode=0755,size=1m,nr_inodes=4096"
#define JAIL_MAX_LAYERS 64

int jail_uid_pick(uint32_t base, uint32_t count, const uint32_t *used, size_t n, uint32_t *out)
{
	/* At most n + 1 candidates are looked at: n uids can block n slots. */
	for (uint32_t slot = 0; slot < count && slot <= n; slot++) {
		uint32_t uid = base + slot;
		bool taken = false;

		for (size_t i = 0; i < n && !taken; i++)
			taken = used[i] == uid;
		if (!taken) {
			*out = uid;
			return 0;
		}
	}
	errno = EAGAIN;
	return -1;
}

/* ---- daemon side ---- */

static int jail_path(const char *root, const char *path, char out[PATH_MAX], space_err *err)
{
	if (path[0] != '/' || strstr(path, "/../") || strstr(path, "/./"))
		return err_set(err, EINVAL, "jail: not a plain absolute path: %s", path);
	if (snprintf(out, PATH_MAX, "%s%s", root, path) >= PATH_MAX)
		return err_set(err, ENAMETOOLONG, "jail: path too long: %s", path);
	return 0;
}

/* A directory the VM's uid may traverse; the daemon's umask is 077. */
static int mkdir_open(const char *path)
{
	return mkdir(path, 0755) < 0 ? -1 : chmod(path, 0755);
}

/* Creates the directories above target (which lies under root) inside the
 * jail, never through a link: a path must not lead out of the jail. */
static int mkparents(const char *root, const char *target, space_err *err)
{
	char buf[PATH_MAX];
	size_t skip = strlen(root);

	snprintf(buf, sizeof(buf), "%s", target);
	for (char *p = buf + skip + 1; (p = strchr(p, '/')); p++) {
		struct stat st;

		*p = '\0';
		if (lstat(buf, &st) == 0) {
			if (!S_ISDIR(st.st_mode))
				return err_set(err, ENOTDIR, "jail: %s is not a directory", buf + skip);
		} else if (mkdir_open(buf) < 0) {
			return err_sys(err, errno, "jail: mkdir %s", buf + skip);
		}
		*p = '/';
	}
	return 0;
}

/* Binds host `src` at `dst` inside the jail (nosuid, nodev); read-only
 * unless rw. An entry that exists already in the jail (under a directory
 * bound before) is left alone. */
static int bind_at(const char *root, const char *src, const char *dst, bool rw, space_err *err)
{
	char target[PATH_MAX];
	struct stat st, tst;

	if (jail_path(root, dst, target, err) < 0)
		return -1;
	if (stat(src, &st) < 0)
		return err_sys(err, errno, "jail: %s", src);
	if (lstat(target, &tst) == 0)
		return 0;
	if (mkparents(root, target, err) < 0)
		return -1;
	if (S_ISDIR(st.st_mode) ? mkdir_open(target) < 0 : mknod(target, S_IFREG | 0600, 0) < 0)
		return err_sys(err, errno, "jail: creating %s", dst);
	if (mount(src, target, NULL, MS_BIND | MS_REC, NULL) < 0)
		return err_sys(err, errno, "jail: bind %s", src);
	unsigned long fl = MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV | (rw ? 0 : MS_RDONLY);
	if (mount(NULL, target, NULL, fl, NULL) < 0)
		return err_sys(err, errno, "jail: remount %s", dst);
	return 0;
}

int jail_bind_file(const char *root, const char *path, bool rw, space_err *err)
{
	return bind_at(root, path, path, rw, err);
}

static int own_layer(const char *path, bool top, uid_t uid, gid_t gid, space_err *err);

int jail_own_file(const char *root, const char *path, uid_t uid, gid_t gid, space_err *err)
{
	if (own_layer(path, true, uid, gid, err) < 0)
		return -1;
	return bind_at(root, path, path, true, err);
}

/* /lib, /bin, ... : the same link as on the host (merged /usr), or a bind. */
static int system_dir(const char *root, const char *name, space_err *err)
{
	char host[64], link[PATH_MAX], target[PATH_MAX];
	struct stat st;
	ssize_t n;

	snprintf(host, sizeof(host), "/%s", name);
	if (lstat(host, &st) < 0)
		return errno == ENOENT ? 0 : err_sys(err, errno, "jail: %s", host);
	if (!S_ISLNK(st.st_mode))
		return S_ISDIR(st.st_mode) ? bind_at(root, host, host, false, err) : 0;
	n = readlink(host, link, sizeof(link) - 1);
	if (n <= 0)
		return err_sys(err, errno, "jail: readlink %s", host);
	link[n] = '\0';
	snprintf(target, sizeof(target), "%s%s", root, host);
	/* Relative, always: an absolute link ("/usr/lib") would resolve on
	 * the host for the daemon working in the jail's tree. At the root,
	 * "/usr/lib" and "usr/lib" name the same inside the jail. */
	if (symlink(link[0] == '/' ? link + 1 : link, target) < 0)
		return err_sys(err, errno, "jail: symlink %s", host);
	return 0;
}

/* /dev: a small tmpfs of its own (the jail root is nodev) holding device
 * nodes made for this VM: null, zero, full, random, urandom 0666, and under
 * KVM a /dev/kvm owned by the VM's uid, 0600 (the host's is root's or
 * group kvm's; the jail's uid is neither). */
static int dev_nodes(const char *root, const struct jail_files *f, space_err *err)
{
	static const char *const devs[] = { "null", "zero", "full", "random", "urandom", "kvm" };
	char dir[PATH_MAX], host[64], node[PATH_MAX + 16];
	struct stat st;

	snprintf(dir, sizeof(dir), "%s/dev", root);
	if (mkdir_open(dir) < 0)
		return err_sys(err, errno, "jail: mkdir /dev");
	if (mount("space-jail-dev", dir, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k,nr_inodes=64") < 0)
		return err_sys(err, errno, "jail: mount /dev");
	for (size_t i = 0; i < sizeof(devs) / sizeof(devs[0]); i++) {
		bool kvm = strcmp(devs[i], "kvm") == 0;

		if (kvm && !f->kvm)
			continue;
		snprintf(host, sizeof(host), "/dev/%s", devs[i]);
		snprintf(node, sizeof(node), "%s/%s", dir, devs[i]);
		if (stat(host, &st) < 0 || !S_ISCHR(st.st_mode))
			return err_sys(err, errno ? errno : ENODEV, "jail: %s is not a character device", host);
		if (mknod(node, S_IFCHR | 0600, st.st_rdev) < 0)
			return err_sys(err, errno, "jail: mknod %s", host);
		if (kvm ? chown(node, f->uid, f->gid) < 0 : chmod(node, 0666) < 0)
			return err_sys(err, errno, "jail: the mode of %s", host);
	}
	return 0;
}

/* A writable /var/tmp of the VM's own, bounded (the probe's snapshot=on overlay). */
static int scratch_dir(const char *root, const struct jail_files *f, space_err *err)
{
	char dir[PATH_MAX], opts[96];

	snprintf(dir, sizeof(dir), "%s/var/tmp/x", root);
	if (mkparents(root, dir, err) < 0)
		return -1;
	*strrchr(dir, '/') = '\0';
	snprintf(opts, sizeof(opts), "mode=0700,uid=%u,gid=%u,size=64m,nr_inodes=256", (unsigned)f->uid,
		 (unsigned)f->gid);
	if (mount("space-jail-tmp", dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) < 0)
		return err_sys(err, errno, "jail: mount /var/tmp");
	return 0;
}

static int system_files(const char *root, const struct jail_files *f, space_err *err)
{
	static const char *const links[] = { "lib", "lib64", "lib32", "libx32", "bin", "sbin" };

	if (bind_at(root, "/usr", "/usr", false, err) < 0)
		return -1;
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++)
		if (system_dir(root, links[i], err) < 0)
			return -1;
	/* The dynamic loader finds libraries faster with its cache. */
	if (access("/etc/ld.so.cache", R_OK) == 0 &&
	    bind_at(root, "/etc/ld.so.cache", "/etc/ld.so.cache", false, err) < 0)
		return -1;
	if (dev_nodes(root, f, err) < 0 || (f->scratch && scratch_dir(root, f, err) < 0))
		return -1;
	char proc[PATH_MAX];
	snprintf(proc, sizeof(proc), "%s/proc", root);
	if (mkdir(proc, 0555) < 0 || chmod(proc, 0555) < 0)
		return err_sys(err, errno, "jail: mkdir /proc");
	return 0;
}

/* The top layer becomes the VM's (0600); the layers below (and the kernel)
 * readable by any VM that reaches them (root 0644; their directory is
 * root-only). O_NOFOLLOW: the last component must not be a link. */
static int own_layer(const char *path, bool top, uid_t uid, gid_t gid, space_err *err)
{
	struct stat st;
	_cleanup_close_ int fd = open(path, (top ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return err_sys(err, errno, "jail: open %s", path);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return err_set(err, EINVAL, "jail: %s is not a regular file", path);
	if (top) {
		if (fchown(fd, uid, gid) < 0 || fchmod(fd, 0600) < 0)
			return err_sys(err, errno, "jail: chown %s to %u", path, (unsigned)uid);
		return 0;
	}
	if ((st.st_mode & 0004) && st.st_uid == 0)
		return 0;
	if (fchown(fd, 0, 0) < 0 || fchmod(fd, 0644) < 0)
		return err_sys(err, errno, "jail: chmod %s", path);
	return 0;
}

bool jail_layer_allowed(const char *path, const char *const *dirs)
{
	for (; dirs && *dirs; dirs++) {
		size_t n = strlen(*dirs);

		if (n > 1 && strncmp(path, *dirs, n) == 0 && path[n] == '/' && path[n + 1] && !strstr(path + n, "/.."))
			return true;
	}
	return false;
}

/* The backing file named by cur's header, canonical, checked: in one of
 * the layer directories and root's. "" at the end of the chain. */
static int next_layer(const char *cur, const struct jail_files *f, char next[PATH_MAX], space_err *err)
{
	char named[PATH_MAX];
	struct stat st;

	next[0] = '\0';
	/* The daemon's record first; a layer made before records existed
	 * falls back to its header (checked as strictly below). */
	int rec = qcow2_backing_recorded(cur, named);
	if (rec < 0)
		return err_sys(err, errno ? errno : EIO, "jail: the backing record of %s", cur);
	if (rec == 0 && qcow2_backing_of(cur, named) < 0)
		return err_sys(err, errno ? errno : EIO, "jail: reading the header of %s", cur);
	if (!named[0])
		return 0;
	if (!realpath(named, next) || lstat(next, &st) < 0)
		return err_sys(err, errno, "jail: backing file %.200s of %s", named, cur);
	if (!jail_layer_allowed(next, f->layer_dirs))
		return err_set(err, EPERM, "jail: %s names a backing file outside the disk directories: %.200s", cur,
			       named);
	if (st.st_uid != 0 || !S_ISREG(st.st_mode))
		return err_set(err, EPERM, "jail: %s names a backing file that is not a frozen layer: %.200s", cur,
			       next);
	return 0;
}

static int disk_chain(const char *root, const struct jail_files *f, space_err *err)
{
	char cur[PATH_MAX], next[PATH_MAX];

	snprintf(cur, sizeof(cur), "%s", f->disk);
	for (int depth = 0; cur[0]; depth++) {
		bool top = depth == 0;

		if (depth >= JAIL_MAX_LAYERS)
			return err_set(err, ELOOP, "jail: disk chain of %s is longer than %d layers", f->disk,
				       JAIL_MAX_LAYERS);
		if (next_layer(cur, f, next, err) < 0)
			return -1;
		bool rw = top && !f->disk_ro;
		if (own_layer(cur, rw, f->uid, f->gid, err) < 0 || bind_at(root, cur, cur, rw, err) < 0)
			return -1;
		memcpy(cur, next, sizeof(cur));
	}
	return 0;
}

int jail_build(const char *root, const struct jail_files *f, space_err *err)
{
	space_err e2;

	if (jail_teardown(root, err) < 0)
		return -1;
	if (mkdir(root, 0700) < 0)
		return err_sys(err, errno, "jail: mkdir %s", root);
	if (mount("space-jail", root, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, JAIL_TMPFS_OPTS) < 0) {
		int e = errno;
		rmdir(root);
		return err_sys(err, e, "jail: mount tmpfs at %s", root);
	}
	if (mount(NULL, root, NULL, MS_SHARED, NULL) < 0) {
		err_sys(err, errno, "jail: make %s shared", root);
		goto fail;
	}
	char kernel[PATH_MAX];
	if (!realpath(f->kernel, kernel)) {
		err_sys(err, errno, "jail: kernel %s", f->kernel);
		goto fail;
	}
	if (system_files(root, f, err) < 0 || own_layer(kernel, false, 0, 0, err) < 0 ||
	    bind_at(root, kernel, f->kernel, false, err) < 0 || disk_chain(root, f, err) < 0)
		goto fail;
	return 0;
fail:
	jail_teardown(root, &e2);
	return -1;
}

int jail_teardown(const char *root, space_err *err)
{
	/* Stacked mounts (a half-built jail under a stale one) go one by one. */
	for (int i = 0; i < 16 && umount2(root, MNT_DETACH) == 0; i++)
		;
	if (rmdir(root) < 0 && errno != ENOENT)
		return err_sys(err, errno, "jail: remove %s", root);
	return 0;
}

int jail_clean_orphans(const char *dir, bool (*keep)(const char *id, void *arg), void *arg)
{
	_cleanup_closedir_ DIR *dd = opendir(dir);
	char path[PATH_MAX];
	struct dirent *de;
	space_err e;
	int removed = 0;

	while (dd && (de = readdir(dd))) {
		if (de->d_name[0] == '.' || keep(de->d_name, arg))
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= (int)sizeof(path))
			continue;
		removed += jail_teardown(path, &e) == 0;
	}
	return removed;
}

int jail_release_layer(const char *path, space_err *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return err_sys(err, errno, "open %s", path);
	if (fchown(fd, 0, 0) < 0 || fchmod(fd, 0644) < 0)
		return err_sys(err, errno, "chown %s to root", path);
	return 0;
}

bool jail_pid_has_uid(int pid, uid_t uid)
{
	char path[64], buf[4096];
	unsigned r, e, s, fs;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	const char *p = strstr(buf, "\nUid:");
	if (!p || sscanf(p + 5, "%u %u %u %u", &r, &e, &s, &fs) != 4)
		return false;
	return r == uid && e == uid && s == uid && fs == uid;
}

/* ---- child side ---- */

static int fail_step(const char **step, const char *what)
{
	*step = what;
	return -1;
}

int jail_enter(const char *root, const char **step)
{
	char proc[PATH_MAX];

	if (unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS) < 0)
		return fail_step(step, "jail: unshare(CLONE_NEWNS)");
	/* Nothing we mount from here on reaches the host; what the daemon
	 * binds under the jail's root still reaches us. */
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
		return fail_step(step, errno == EINVAL ? "jail: make / a slave (a chroot? its root must be a mount point)"
						       : "jail: make / a slave");
	snprintf(proc, sizeof(proc), "%s/proc", root);
	/* /proc/self/fd/N names the sealed memory image; no other process is
	 * visible (hidepid=invisible: other uids'), nor /proc/sys & co. */
	if (mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=invisible,subset=pid") < 0)
		return fail_step(step, "jail: mount /proc");
	if (chdir(root) < 0)
		return fail_step(step, "jail: chdir");
	/* pivot_root(".", "."): the old root ends up stacked on the new one
	 * and is detached at once, leaving no path to the host's tree. */
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		return fail_step(step, "jail: pivot_root");
	if (umount2(".", MNT_DETACH) < 0)
		return fail_step(step, "jail: detach the old root");
	if (chdir("/") < 0)
		return fail_step(step, "jail: chdir /");
	return 0;
}

int jail_drop_privileges(uid_t uid, gid_t gid, const char **step)
{
	if (uid == 0 || gid == 0) {
		errno = EINVAL;
		return fail_step(step, "jail: uid and gid must not be 0");
	}
	for (int cap = 0; cap < 64; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return fail_step(step, "jail: drop the capability bounding set");
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return fail_step(step, "jail: clear ambient capabilities");
	/* Locked for the process and its children: uid 0 would not mean
	 * capabilities any more, and setuid keeps no capabilities. */
	if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |
					     SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
					     SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
		  0, 0, 0) < 0)
		return fail_step(step, "jail: securebits");
	if (setgroups(0, NULL) < 0)
		return fail_step(step, "jail: setgroups");
	if (setresgid(gid, gid, gid) < 0)
		return fail_step(step, "jail: setresgid");
	if (setresuid(uid, uid, uid) < 0)
		return fail_step(step, "jail: setresuid");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return fail_step(step, "jail: no_new_privs");
	return 0;
}
