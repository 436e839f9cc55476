/* accel.c -- KVM or TCG: a probe boot decides, because /dev/kvm may exist and still hang a guest */
#include "vm.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/kvm.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "jail.h"
#include "log.h"
#include "proc.h"
#include "vm_argv.h"

#define PROBE_MARK "SPACE-PROBE-OK"

const char *accel_name(enum accel a)
{
	switch (a) {
	case ACCEL_KVM:
		return "kvm";
	case ACCEL_TCG:
		return "tcg";
	}
	return "?";
}

/* Reads the probe QEMU's console until the mark, EOF or the deadline.
 * Returns 1: mark seen, 0: EOF (QEMU ended), -1: timed out. */
static int wait_mark(int fd, int64_t deadline)
{
	char buf[4096 + sizeof(PROBE_MARK)];
	size_t have = 0; /* tail of the previous chunk, for a mark split in two */

	for (;;) {
		int left = (int)(deadline - mono_ms());
		if (left <= 0)
			return -1;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int r = poll(&p, 1, left);
		if (r < 0 && errno != EINTR)
			return -1;
		if (r <= 0)
			continue;
		ssize_t n = read(fd, buf + have, sizeof(buf) - have - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return 0;
		size_t len = have + (size_t)n;
		if (memmem(buf, len, PROBE_MARK, sizeof(PROBE_MARK) - 1))
			return 1;
		have = len < sizeof(PROBE_MARK) - 1 ? len : sizeof(PROBE_MARK) - 1;
		memmove(buf, buf + len - have, have);
	}
}

/* The probe's jail: kernel and image read-only, a writable /var/tmp for
 * the snapshot=on overlay, /dev/kvm of its own. */
static int probe_jail(const char *kernel, const char *image, const char *root, uid_t uid, space_err *err)
{
	struct jail_files f = { .kernel = kernel, .disk = image, .kvm = true, .uid = uid, .gid = uid,
				.disk_ro = true, .scratch = true };

	return jail_build(root, &f, err);
}

enum accel accel_probe(const char *kernel, const char *image, const char *work_dir, uid_t uid, int timeout_ms,
		       char *reason, size_t reason_len)
{
	char log_path[PATH_MAX], tmpdir_env[PATH_MAX + 8], last[200], qemu[PATH_MAX], jail_root[PATH_MAX];
	struct strv argv = { 0 };
	space_err err;
	int64_t t0 = mono_ms();

	_cleanup_close_ int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0) {
		snprintf(reason, reason_len, "no usable /dev/kvm (%s); using TCG", strerror(errno));
		return ACCEL_TCG;
	}
	int api = ioctl(kvm, KVM_GET_API_VERSION, 0);
	if (api != KVM_API_VERSION) {
		snprintf(reason, reason_len, "/dev/kvm answers API version %d, not %d; using TCG", api,
			 KVM_API_VERSION);
		return ACCEL_TCG;
	}
	if (access(kernel, R_OK) < 0 || access(image, R_OK) < 0) {
		snprintf(reason, reason_len, "cannot probe KVM: %s: %s; using TCG",
			 access(kernel, R_OK) < 0 ? kernel : image, strerror(errno));
		return ACCEL_TCG;
	}
	if (mkdir(work_dir, 0700) < 0 && errno != EEXIST) {
		snprintf(reason, reason_len, "cannot probe KVM: mkdir %s: %s; using TCG", work_dir,
			 strerror(errno));
		return ACCEL_TCG;
	}
	snprintf(log_path, sizeof(log_path), "%s/kvm-probe.log", work_dir);
	snprintf(tmpdir_env, sizeof(tmpdir_env), "TMPDIR=%s", work_dir);
	_cleanup_close_ int log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int pipefd[2];
	if (log_fd < 0 || pipe2(pipefd, O_CLOEXEC) < 0) {
		snprintf(reason, reason_len, "cannot probe KVM: %s: %s; using TCG", log_path,
			 strerror(errno));
		return ACCEL_TCG;
	}
	_cleanup_close_ int rd = pipefd[0];
	_cleanup_close_ int wr = pipefd[1];
	snprintf(jail_root, sizeof(jail_root), "%s/jail", work_dir);
	if (proc_which(vm_qemu_binary(), qemu, sizeof(qemu)) < 0) {
		snprintf(reason, reason_len, "cannot probe KVM: %s: %s; using TCG", vm_qemu_binary(), strerror(errno));
		return ACCEL_TCG;
	}
	if (vm_probe_argv_build(qemu, kernel, image, uid != 0, &argv, &err) < 0 ||
	    (uid && probe_jail(kernel, image, jail_root, uid, &err) < 0)) {
		snprintf(reason, reason_len, "cannot probe KVM: %s; using TCG", err.msg);
		strv_free(&argv);
		return ACCEL_TCG;
	}
	char *env_add[] = { tmpdir_env, NULL };
	struct spawn_opts o = {
		.argv = argv.v,
		.env_add = env_add,
		.stdout_fd = wr,
		.stderr_fd = log_fd,
		.new_session = true,
		/* Jailed like a VM (the template's kernel and image run in it). */
		.jail_root = uid ? jail_root : NULL,
		.uid = uid,
		.gid = uid,
		.seccomp = uid != 0,
		.clear_env = uid != 0,
	};
	pid_t pid;
	int pidfd;
	int rc = proc_spawn(&o, &pid, &pidfd, &err);
	strv_free(&argv);
	if (rc < 0) {
		if (uid)
			jail_teardown(jail_root, &err);
		snprintf(reason, reason_len, "cannot probe KVM: %s; using TCG", err.msg);
		return ACCEL_TCG;
	}
	close(steal_fd(&wr)); /* EOF on rd once QEMU is gone */

	int seen = wait_mark(rd, t0 + timeout_ms);
	/* Every path ends the probe QEMU and reaps it (bounded). */
	proc_kill_reap(pid, pidfd);
	close(pidfd);
	space_err e2;
	if (uid && jail_teardown(jail_root, &e2) < 0)
		log_warn("%s", e2.msg);
	long long ms = (long long)(mono_ms() - t0);
	if (seen == 1) {
		snprintf(reason, reason_len, "KVM probe boot reached the agent in %lld ms; using KVM", ms);
		return ACCEL_KVM;
	}
	if (seen == 0) {
		file_last_line(log_path, last, sizeof(last));
		snprintf(reason, reason_len, "KVM probe QEMU ended before the agent answered (%s); using TCG",
			 last[0] ? last : "no output");
	} else {
		snprintf(reason, reason_len,
			 "KVM probe boot did not reach the agent within %d ms; using TCG", timeout_ms);
	}
	return ACCEL_TCG;
}
