/* test_jail.c -- the jail's parts: uid slots, cgroup paths and limits, the seccomp denylist in a
 * real child, privilege dropping, a real jail root entered by a child, sealed memory images */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <linux/kvm.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/vmm/cgroup.h"
#include "daemon/vmm/jail.h"
#include "daemon/vmm/memimg.h"
#include "daemon/vmm/qcow2.h"
#include "daemon/vmm/seccomp.h"
#include "harness.h"

#define UID_T 2000000123u

static void test_uid_pick(void)
{
	uint32_t out = 0, used[3] = { 100, 101, 103 };

	EXPECT(jail_uid_pick(100, 10, NULL, 0, &out) == 0 && out == 100);
	EXPECT(jail_uid_pick(100, 10, used, 3, &out) == 0 && out == 102);
	EXPECT(jail_uid_pick(100, 10, used + 1, 2, &out) == 0 && out == 100);
	errno = 0;
	EXPECT(jail_uid_pick(100, 2, used, 2, &out) < 0 && errno == EAGAIN);
	/* Outsiders (another range's uids) do not block a slot. */
	uint32_t other[2] = { 5, 6 };
	EXPECT(jail_uid_pick(100, 1, other, 2, &out) == 0 && out == 100);
}

static void test_cgroup_paths(void)
{
	const char *v1 = "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/abc\n2:cpu,cpuacct:/x\n0::/\n";
	const char *v2 = "0::/user.slice/spaced.service\n";
	char out[PATH_MAX];

	EXPECT(cgroup_self_path(v1, "memory", out, sizeof(out)) == 0 && strcmp(out, "/process_api/abc") == 0);
	EXPECT(cgroup_self_path(v1, "cpu", out, sizeof(out)) == 0 && strcmp(out, "/x") == 0);
	EXPECT(cgroup_self_path(v1, "cpuacct", out, sizeof(out)) == 0 && strcmp(out, "/x") == 0);
	EXPECT(cgroup_self_path(v1, "pids", out, sizeof(out)) == 0 && strcmp(out, "/") == 0);
	EXPECT(cgroup_self_path(v1, "blkio", out, sizeof(out)) < 0);
	EXPECT(cgroup_self_path(v1, "cpus", out, sizeof(out)) < 0);
	EXPECT(cgroup_self_path(v2, NULL, out, sizeof(out)) == 0 &&
	       strcmp(out, "/user.slice/spaced.service") == 0);
	EXPECT(cgroup_self_path(v2, "memory", out, sizeof(out)) < 0);
	EXPECT(cgroup_self_path("0::/a/b/c/d/e/f/g\n", NULL, out, 4) < 0);

	EXPECT(cgroup_leaf_path("/sys/fs/cgroup/pids", "/", "space-ab", "sb-1", out, sizeof(out)) == 0 &&
	       strcmp(out, "/sys/fs/cgroup/pids/space-ab/sb-1") == 0);
	EXPECT(cgroup_leaf_path("/sys/fs/cgroup/memory", "/p/q", "space-ab", "sb-1", out, sizeof(out)) == 0 &&
	       strcmp(out, "/sys/fs/cgroup/memory/p/q/space-ab/sb-1") == 0);
	EXPECT(cgroup_leaf_path("/sys/fs/cgroup", "/p", "space-ab", NULL, out, sizeof(out)) == 0 &&
	       strcmp(out, "/sys/fs/cgroup/p/space-ab") == 0);
	EXPECT(cgroup_leaf_path("/m", "/", "space-ab", "..", out, sizeof(out)) < 0);
	EXPECT(cgroup_leaf_path("/m", "/", "space-ab", "a/b", out, sizeof(out)) < 0);
	EXPECT(cgroup_leaf_path("/m", "/", "a/b", "x", out, sizeof(out)) < 0);
	EXPECT(cgroup_leaf_path("/m", "/a/../b", "s", "x", out, sizeof(out)) < 0);
	EXPECT(cgroup_leaf_path("/m", "/", "s", "x", out, 6) < 0);

	struct cgroup_limits l;
	cgroup_limits_for(128, 2, &l);
	EXPECT_EQ(l.memory_bytes, (int64_t)(128 + CGROUP_QEMU_OVERHEAD_MIB) << 20);
	EXPECT_EQ(l.cpu_quota_us, 2 * CGROUP_CPU_PERIOD_US);
	EXPECT_EQ(l.pids_max, CGROUP_PIDS_BASE + 2);
}

static void test_layer_dirs(void)
{
	const char *dirs[] = { "/var/lib/space/disks", "/var/lib/space/images", NULL };

	EXPECT(jail_layer_allowed("/var/lib/space/disks/dk-1.qcow2", dirs));
	EXPECT(jail_layer_allowed("/var/lib/space/images/ab/rootfs.ext4", dirs));
	EXPECT(!jail_layer_allowed("/var/lib/space/disks", dirs));
	EXPECT(!jail_layer_allowed("/var/lib/space/disks/", dirs));
	EXPECT(!jail_layer_allowed("/var/lib/space/disksx/a", dirs));
	EXPECT(!jail_layer_allowed("/var/lib/space/disks/../space.db", dirs));
	EXPECT(!jail_layer_allowed("/etc/shadow", dirs));
	EXPECT(!jail_layer_allowed("/var/lib/space/disks/a", NULL));
}

/* Runs fn in a forked child; its exit status (0: every check in it held). */
static int in_child(int (*fn)(void *), void *arg)
{
	int status;
	pid_t pid = fork();

	if (pid == 0)
		_exit(fn(arg));
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int seccomp_child(void *arg)
{
	(void)arg;
	if (jail_seccomp_install() < 0)
		return 1;
	if (unshare(CLONE_NEWNS) == 0 || errno != EPERM)
		return 2;
	if (mount("none", "/tmp", "tmpfs", 0, NULL) == 0 || errno != EPERM)
		return 3;
	if (syscall(SYS_clone3, NULL, 0) == 0 || errno != ENOSYS)
		return 4;
	if (syscall(SYS_ptrace, 0, 0, 0, 0) == 0 || errno != EPERM)
		return 5;
	if (syscall(SYS_keyctl, 0, 0, 0, 0, 0) == 0 || errno != EPERM)
		return 6;
	/* clone with a namespace flag is refused, a plain fork is not. */
	if (syscall(SYS_clone, CLONE_NEWNET | SIGCHLD, 0, 0, 0, 0) >= 0 || errno != EPERM)
		return 7;
	pid_t p = fork();
	if (p == 0)
		_exit(0);
	if (p < 0 || waitpid(p, NULL, 0) != p)
		return 8;
	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
		return 9;
	return getpid() > 0 ? 0 : 10;
}

static void test_seccomp(void)
{
	size_t known = jail_seccomp_known(), total = 0;

	for (const char *const *p = jail_denied_syscalls; *p; p++)
		total++;
	CHECK(known >= total - 8 && known > 50, "the denylist resolves on this architecture (%zu of %zu)", known,
	      total);
	int rc = in_child(seccomp_child, NULL);
	CHECK(rc == 0, "under the filter: unshare, mount, ptrace, keyctl, namespace clone EPERM; clone3 ENOSYS; "
		       "fork works (child said %d)", rc);
}

static int drop_child(void *arg)
{
	const char *step = "";

	(void)arg;
	if (jail_drop_privileges(UID_T, UID_T, &step) < 0)
		return 1;
	if (getuid() != UID_T || geteuid() != UID_T || getgid() != UID_T || getegid() != UID_T)
		return 2;
	if (setuid(0) == 0 || setgid(0) == 0)
		return 3;
	if (prctl(PR_CAPBSET_READ, 0, 0, 0, 0) != 0 || prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
		return 4;
	if (getgroups(0, NULL) != 0)
		return 5;
	/* No capability left: a root-only file cannot be opened. */
	if (open("/etc/shadow", O_RDONLY) >= 0 || errno != EACCES)
		return 6;
	return 0;
}

static void test_drop_privileges(void)
{
	const char *step = "";

	errno = 0;
	CHECK(jail_drop_privileges(0, 5, &step) < 0 && errno == EINVAL, "uid 0 is refused");
	if (geteuid() != 0) {
		NOTE("not root: privilege dropping not exercised");
		return;
	}
	int rc = in_child(drop_child, NULL);
	CHECK(rc == 0, "a child drops to its uid/gid, no capabilities, no groups, nnp (child said %d)", rc);
}

/* ---- a real jail ---- */

struct jail_case {
	char root[PATH_MAX], dir[PATH_MAX], kernel[PATH_MAX], base[PATH_MAX], top[PATH_MAX];
	bool kvm;
};

static int write_file(const char *path, const void *data, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	bool ok = fd >= 0 && write(fd, data, len) == (ssize_t)len;

	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

/* A qcow2 header naming `backing` (all a chain walk reads). */
static int write_qcow2(const char *path, const char *backing)
{
	unsigned char h[512] = { 0x51, 0x46, 0x49, 0xfb, 0, 0, 0, 3 };
	size_t n = strlen(backing);

	h[15] = 100; /* backing_file_offset = 100 */
	h[19] = (unsigned char)n;
	memcpy(h + 100, backing, n);
	return write_file(path, h, sizeof(h), 0600);
}

static int jail_child(void *arg)
{
	struct jail_case *c = arg;
	const char *step = "";
	struct stat st;

	if (jail_enter(c->root, &step) < 0 || jail_drop_privileges(UID_T, UID_T, &step) < 0)
		return 1;
	/* The host's tree is gone; what the VM needs is there. */
	if (stat(c->dir, &st) < 0 || access("/usr/bin", X_OK) < 0 || access("/dev/null", W_OK) < 0)
		return 2;
	if (access("/etc/passwd", F_OK) == 0 || access("/root", F_OK) == 0 || access("/tmp/unit-x", F_OK) == 0)
		return 3;
	if (access(c->kernel, R_OK) < 0 || access(c->base, R_OK) < 0)
		return 4;
	int fd = open(c->top, O_RDWR);
	if (fd < 0 || write(fd, "x", 1) != 1)
		return 5;
	close(fd);
	if (open(c->base, O_RDWR) >= 0 || open(c->kernel, O_RDWR) >= 0)
		return 6;
	/* Device nodes work (the root is nodev; /dev is a tmpfs of its own). */
	char z[4];
	int zfd = open("/dev/zero", O_RDONLY);
	if (zfd < 0 || read(zfd, z, sizeof(z)) != (ssize_t)sizeof(z) || z[0] != 0)
		return 9;
	close(zfd);
	if (c->kvm) {
		int kfd = open("/dev/kvm", O_RDWR);
		if (kfd < 0 || ioctl(kfd, KVM_GET_API_VERSION, 0) != KVM_API_VERSION)
			return 10;
		close(kfd);
	} else if (access("/dev/kvm", F_OK) == 0) {
		return 11;
	}
	/* Only ourselves in /proc. */
	if (access("/proc/self/status", R_OK) < 0 || access("/proc/1/status", F_OK) == 0 ||
	    access("/proc/sys", F_OK) == 0)
		return 7;
	if (mkdir("/x", 0700) == 0 || mknod("/dev/x", S_IFREG | 0600, 0) == 0)
		return 8;
	return 0;
}

static bool mounted_under(const char *prefix)
{
	char line[4096];
	FILE *f = fopen("/proc/self/mountinfo", "r");
	bool found = false;

	while (f && fgets(line, sizeof(line), f))
		found |= strstr(line, prefix) != NULL;
	if (f)
		fclose(f);
	return found;
}

static void test_real_jail(void)
{
	struct jail_case c;
	space_err err = { 0 };
	struct stat st;
	char tmpl[] = "/tmp/space-unit-jail-XXXXXX";

	if (geteuid() != 0) {
		NOTE("not root: no jail built");
		return;
	}
	char canon[PATH_MAX];
	if (!CHECK(mkdtemp(tmpl) != NULL && realpath(tmpl, canon), "temp dir"))
		return;
	snprintf(tmpl, sizeof(tmpl), "%s", canon);
	snprintf(c.dir, sizeof(c.dir), "%s/disks", tmpl);
	snprintf(c.root, sizeof(c.root), "%s/jail", tmpl);
	snprintf(c.kernel, sizeof(c.kernel), "%s/vmlinuz", tmpl);
	snprintf(c.base, sizeof(c.base), "%s/disks/base.qcow2", tmpl);
	snprintf(c.top, sizeof(c.top), "%s/disks/top.qcow2", tmpl);
	mkdir(c.dir, 0700);
	write_file(c.kernel, "kernel", 6, 0644);
	char raw[PATH_MAX];
	snprintf(raw, sizeof(raw), "%s/disks/rootfs.raw", tmpl);
	write_file(raw, "raw", 3, 0600);
	write_qcow2(c.base, "rootfs.raw"); /* relative: resolved against its directory */
	write_qcow2(c.top, c.base);
	const char *dirs[] = { c.dir, NULL };
	/* /dev/kvm when the host has one: the jail's own node, the VM's. */
	bool kvm = access("/dev/kvm", F_OK) == 0;
	c.kvm = kvm;
	struct jail_files f = { .kernel = c.kernel, .disk = c.top, .uid = UID_T, .gid = UID_T, .layer_dirs = dirs,
				.kvm = kvm };

	/* A header a compromised QEMU wrote may name any file: refused, untouched. */
	char forged[PATH_MAX], victim[PATH_MAX];
	snprintf(forged, sizeof(forged), "%s/disks/forged.qcow2", tmpl);
	snprintf(victim, sizeof(victim), "%s/secret", tmpl);
	write_file(victim, "s", 1, 0600);
	write_qcow2(forged, victim);
	f.disk = forged;
	CHECK(jail_build(c.root, &f, &err) < 0 && err.code == EPERM && stat(victim, &st) == 0 &&
		      (st.st_mode & 07777) == 0600 && !mounted_under(c.root),
	      "a backing file outside the disk directories is refused, left 0600 (%s)", err.msg);
	write_qcow2(forged, "../disks/../secret");
	CHECK(jail_build(c.root, &f, &err) < 0 && err.code == EPERM, "also through a relative name (%s)", err.msg);
	write_qcow2(forged, "other-top.qcow2");
	snprintf(victim, sizeof(victim), "%s/disks/other-top.qcow2", tmpl);
	write_file(victim, "t", 1, 0600);
	if (chown(victim, UID_T + 1, UID_T + 1) < 0)
		NOTE("chown: %s", strerror(errno));
	CHECK(jail_build(c.root, &f, &err) < 0 && err.code == EPERM && stat(victim, &st) == 0 &&
		      st.st_uid == UID_T + 1 && (st.st_mode & 07777) == 0600,
	      "another VM's live top layer is refused as a backing file (%s)", err.msg);
	unlink(victim);
	/* Our record of the backing file wins over the header. */
	snprintf(victim, sizeof(victim), "%s/secret", tmpl);
	write_file(victim, "s", 1, 0600);
	write_qcow2(forged, victim);
	CHECK(qcow2_backing_record(forged, c.base, &err) == 0, "a backing record is written (%s)", err.msg);
	char rec[PATH_MAX], in_jail_victim[PATH_MAX * 2];
	CHECK(qcow2_backing_recorded(forged, rec) == 1 && strcmp(rec, c.base) == 0, "and read back");
	CHECK(jail_build(c.root, &f, &err) == 0, "a forged header under a record builds (%s)", err.msg);
	snprintf(in_jail_victim, sizeof(in_jail_victim), "%s%s", c.root, victim);
	CHECK(access(in_jail_victim, F_OK) < 0 && stat(victim, &st) == 0 && (st.st_mode & 07777) == 0600,
	      "the file the header names is neither in the jail nor touched");
	jail_teardown(c.root, &err);
	qcow2_backing_forget(forged);
	CHECK(qcow2_backing_recorded(forged, rec) == 0, "a forgotten record is gone");
	unlink(forged);
	unlink(victim);
	f.disk = c.top;
	if (!CHECK(jail_build(c.root, &f, &err) == 0, "a jail root builds (%s)", err.msg))
		return;
	CHECK(stat(c.top, &st) == 0 && st.st_uid == UID_T && (st.st_mode & 07777) == 0600,
	      "the top layer is the VM's, 0600");
	CHECK(stat(c.base, &st) == 0 && st.st_uid == 0 && (st.st_mode & 07777) == 0644 && stat(raw, &st) == 0 &&
		      (st.st_mode & 07777) == 0644,
	      "the layers below (a relative backing name too) are root's, 0644");
	int rc = in_child(jail_child, &c);
	CHECK(rc == 0, "a child in the jail sees its files and nothing else of the host (child said %d)", rc);
	/* A bind added afterwards appears in the jail (the freeze path). */
	char later[PATH_MAX], in_jail[PATH_MAX * 2];
	snprintf(later, sizeof(later), "%s/disks/new.qcow2", tmpl);
	write_file(later, "n", 1, 0600);
	CHECK(jail_bind_file(c.root, later, true, &err) == 0, "a file is bound in later (%s)", err.msg);
	snprintf(in_jail, sizeof(in_jail), "%s%s", c.root, later);
	CHECK(stat(in_jail, &st) == 0 && st.st_size == 1, "it is there at its host path");
	CHECK(jail_release_layer(c.top, &err) == 0 && stat(c.top, &st) == 0 && st.st_uid == 0 &&
		      (st.st_mode & 07777) == 0644,
	      "a released layer is root's 0644");
	CHECK(jail_teardown(c.root, &err) == 0 && !mounted_under(c.root) && access(c.root, F_OK) < 0,
	      "teardown leaves no mount and no directory");
	CHECK(jail_teardown(c.root, &err) == 0, "a second teardown is fine");
	unlink(later);
	unlink(c.top);
	unlink(c.base);
	unlink(raw);
	unlink(c.kernel);
	rmdir(c.dir);
	rmdir(tmpl);
}

/* ---- sealed memory images ---- */

static void test_memimg(void)
{
	char path[] = "/dev/shm/space-unit-mem-XXXXXX";
	space_err err = { 0 };
	struct stat st;
	char buf[8];
	int fd = mkstemp(path);

	if (!CHECK(fd >= 0, "temp image"))
		return;
	/* 8 MiB, two pages of data: the copy keeps the holes. */
	if (ftruncate(fd, 8 << 20) < 0 || pwrite(fd, "ABCDEFG", 8, 4096) != 8 ||
	    pwrite(fd, "1234567", 8, 5 << 20) != 8)
		NOTE("writing the image failed: %s", strerror(errno));
	close(fd);
	int m = memimg_fd(path, &err);
	if (!CHECK(m >= 0, "a sealed copy is made (%s)", err.msg)) {
		unlink(path);
		return;
	}
	CHECK(memimg_fd(path, &err) == m, "the copy is cached");
	int seals = fcntl(m, F_GET_SEALS);
	CHECK(seals == (F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL), "sealed: write, grow, shrink, seal");
	memset(&st, 0, sizeof(st));
	int fs = fstat(m, &st);
	CHECK(fs == 0 && st.st_size == 8 << 20 && st.st_blocks * 512 <= 64 * 1024,
	      "same size, holes kept (%lld bytes allocated)", (long long)st.st_blocks * 512);
	CHECK(pread(m, buf, 8, 4096) == 8 && memcmp(buf, "ABCDEFG", 8) == 0 && pread(m, buf, 8, 5 << 20) == 8 &&
		      memcmp(buf, "1234567", 8) == 0,
	      "the data is copied");
	/* What a jailed QEMU gets: it opens /proc/self/fd/N O_RDWR. */
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", m);
	int rw = open(proc, O_RDWR | O_CLOEXEC);
	CHECK(rw >= 0, "it opens O_RDWR (as QEMU 7.2 insists)");
	errno = 0;
	CHECK(rw >= 0 && pwrite(rw, "x", 1, 0) < 0 && errno == EPERM, "write(2) is refused");
	errno = 0;
	CHECK(rw >= 0 && fallocate(rw, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096) < 0 && errno == EPERM,
	      "punching a hole is refused");
	errno = 0;
	void *sh = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0);
	CHECK(sh == MAP_FAILED && errno == EPERM, "a shared writable mapping is refused");
	char *pv = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE, rw, 0);
	if (CHECK(pv != MAP_FAILED, "a private writable mapping works")) {
		memcpy(pv + 4096, "zzzzzzz", 8);
		CHECK(pread(m, buf, 8, 4096) == 8 && memcmp(buf, "ABCDEFG", 8) == 0,
		      "writes to the private mapping never reach the image");
		munmap(pv, 8192);
	}
	if (rw >= 0)
		close(rw);
	CHECK(memimg_cached_bytes() > 0, "the cache accounts its bytes");
	memimg_forget(path);
	CHECK(memimg_cached_bytes() == 0, "forgotten");
	unlink(path);
	memimg_forget_all();
}

int main(void)
{
	RUN(test_uid_pick);
	RUN(test_cgroup_paths);
	RUN(test_layer_dirs);
	test_seccomp();
	test_drop_privileges();
	test_real_jail();
	test_memimg();
	return DONE();
}
