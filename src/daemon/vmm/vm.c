/* vm.c -- one QEMU -M microvm process per sandbox: launch, adopt, watch (pidfd), kill */
#include "vm.h"

#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "console.h"
#include "log.h"
#include "proc.h"
#include "qmp.h"
#include "vm_argv.h"

/* From spawn to the QMP handshake (QEMU is initialised and its main loop
 * runs): ~50-150 ms measured under TCG. Bounded because vm_launch runs on
 * the daemon's single loop thread. */
#define VM_START_TIMEOUT_MS 3000
#define VM_ADOPT_TIMEOUT_MS 2000
/* vm_kill: QMP quit first, SIGKILL if QEMU is still there after this. */
#define VM_KILL_GRACE_MS 2000
#define QEMU_IMG_TIMEOUT_MS 10000

struct vm {
	struct event_base *base;
	char id[72];
	pid_t pid;
	uint64_t pid_start;
	int pidfd;
	struct event *exit_ev;  /* pidfd readable: the process is gone */
	struct event *kill_ev;  /* SIGKILL after the grace period */
	struct qmp *qmp;
	struct console *con;
	vm_exit_cb cb;
	void *arg;
	bool exited;
	bool killing;
	/* vm_free() from a callback that on_qemu_exit() runs is deferred. */
	int depth;
	bool free_pending;
	char reason[128];
	char agent_path[PATH_MAX];
};

/* ---- small file helpers ---- */

static int mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

static int mkdir_parent(const char *path, mode_t mode)
{
	char buf[PATH_MAX];

	snprintf(buf, sizeof(buf), "%s", path);
	char *slash = strrchr(buf, '/');
	if (!slash || slash == buf)
		return 0;
	*slash = '\0';
	return mkdir_p(buf, mode);
}

static void log_argv(int fd, char *const *argv)
{
	char when[64];
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	dprintf(fd, "--- %s command:", when);
	for (char *const *a = argv; *a; a++)
		dprintf(fd, " %s", *a);
	/* A short last header: file_last_line() reports what follows it. */
	dprintf(fd, "\n--- %s qemu output:\n", when);
}

/* The qcow2 overlay over the template's raw image, created once per
 * sandbox; written to a temporary name first so that a crash never leaves a
 * half-made overlay behind under the real name. */
static int ensure_overlay(const struct vm_spec *spec, int log_fd, space_err *err)
{
	char overlay[PATH_MAX], tmp[PATH_MAX + 8], base[PATH_MAX];

	vm_file_path(spec, VM_OVERLAY, overlay);
	if (access(overlay, F_OK) == 0)
		return 0;
	/* qemu-img records the backing path as given: make it absolute so
	 * the overlay does not depend on the daemon's working directory. */
	if (!realpath(spec->base_image, base))
		/* EIO, not ENOENT: a missing template file is our fault, not an
		 * unknown id of the caller's. */
		return err_set(err, EIO, "template image %s: %s", spec->base_image, strerror(errno));
	snprintf(tmp, sizeof(tmp), "%s.tmp", overlay);
	unlink(tmp);
	char *argv[] = { (char *)vm_qemu_img_binary(), "create", "-q", "-f", "qcow2", "-F", "raw",
			 "-b", base, tmp, NULL };
	if (proc_run(argv, log_fd, QEMU_IMG_TIMEOUT_MS, err) < 0) {
		unlink(tmp);
		return err_wrap(err, "creating overlay %s", overlay);
	}
	if (rename(tmp, overlay) < 0) {
		int e = errno;
		unlink(tmp);
		return err_sys(err, e, "rename %s", tmp);
	}
	return 0;
}

/* run_uid: the files QEMU opens itself must be its own. */
static int give_files(const struct vm_spec *spec, space_err *err)
{
	char overlay[PATH_MAX];

	if (spec->run_uid == 0)
		return 0;
	vm_file_path(spec, VM_OVERLAY, overlay);
	_cleanup_close_ int mfd = open(spec->mem_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (mfd < 0)
		return err_sys(err, errno, "create %s", spec->mem_path);
	/* run_dir keeps the daemon's logs: QEMU may only traverse it (so it
	 * cannot swap console.log for a symlink), and owns just the overlay.
	 * The parents of all three paths must be traversable by run_uid. */
	if (fchown(mfd, spec->run_uid, spec->run_gid) < 0 ||
	    chown(spec->sock_dir, spec->run_uid, spec->run_gid) < 0 ||
	    chown(overlay, spec->run_uid, spec->run_gid) < 0 || chmod(spec->run_dir, 0711) < 0)
		return err_sys(err, errno, "handing files of %s to uid %u", spec->id,
			       (unsigned)spec->run_uid);
	return 0;
}

/* ---- watching ---- */

static void vm_really_free(struct vm *vm)
{
	if (vm->exit_ev)
		event_free(vm->exit_ev);
	if (vm->kill_ev)
		event_free(vm->kill_ev);
	qmp_free(vm->qmp);
	console_free(vm->con);
	if (vm->pidfd >= 0)
		close(vm->pidfd);
	free(vm);
}

void vm_free(struct vm *vm)
{
	if (!vm)
		return;
	if (vm->depth > 0) {
		vm->free_pending = true;
		return;
	}
	vm_really_free(vm);
}

static void on_qemu_exit(evutil_socket_t fd, short what, void *arg)
{
	struct vm *vm = arg;
	int status;

	(void)fd;
	(void)what;
	/* Our own child: reap it for the status. An adopted QEMU belongs to
	 * init (or a subreaper) now, and how it ended is not ours to know. */
	pid_t r;
	do
		r = waitpid(vm->pid, &status, WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r == vm->pid)
		proc_status_text(status, vm->reason, sizeof(vm->reason));
	else
		snprintf(vm->reason, sizeof(vm->reason), "exited");
	vm->exited = true;

	if (vm->kill_ev)
		event_del(vm->kill_ev);
	close(vm->pidfd);
	vm->pidfd = -1;
	/* Keep the last words of a crashing guest before closing. */
	console_drain(vm->con);
	console_free(vm->con);
	vm->con = NULL;

	/* Pending QMP commands fail now, before the exit callback; their
	 * callbacks may free the vm. */
	vm->depth++;
	qmp_close(vm->qmp, "QEMU exited");
	vm->depth--;
	if (vm->free_pending) {
		vm_really_free(vm);
		return;
	}
	qmp_free(vm->qmp);
	vm->qmp = NULL;

	log_info("vm %s: qemu pid %d %s", vm->id, (int)vm->pid, vm->reason);
	/* Last. The callback may vm_free(): deferred until it returns, so
	 * `reason` (vm->reason) stays valid for the whole call. */
	vm->depth++;
	if (vm->cb)
		vm->cb(vm, vm->reason, vm->arg);
	if (--vm->depth == 0 && vm->free_pending)
		vm_really_free(vm);
}

static void on_kill_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct vm *vm = arg;

	(void)fd;
	(void)what;
	if (vm->exited || vm->pidfd < 0)
		return;
	log_warn("vm %s: qemu pid %d still running %d ms after quit; SIGKILL", vm->id, (int)vm->pid,
		 VM_KILL_GRACE_MS);
	if (proc_pidfd_signal(vm->pidfd, SIGKILL) < 0 && errno != ESRCH)
		log_error("vm %s: SIGKILL pid %d: %s", vm->id, (int)vm->pid, strerror(errno));
}

static void on_qmp_event(const char *event, json_t *data, void *arg)
{
	struct vm *vm = arg;

	(void)data;
	if (strcmp(event, "SHUTDOWN") == 0 || strcmp(event, "GUEST_PANICKED") == 0)
		log_info("vm %s: qmp event %s", vm->id, event);
}

static void on_qmp_closed(const char *why, void *arg)
{
	struct vm *vm = arg;

	/* Normal while QEMU exits; the pidfd tells the real story. */
	log_debug("vm %s: %s", vm->id, why);
}

static struct vm *vm_alloc(struct event_base *base, const struct vm_spec *spec, vm_exit_cb cb,
			   void *arg)
{
	struct vm *vm = calloc(1, sizeof(*vm));

	if (!vm)
		return NULL;
	vm->base = base;
	vm->pidfd = -1;
	vm->cb = cb;
	vm->arg = arg;
	snprintf(vm->id, sizeof(vm->id), "%s", spec->id);
	vm_file_path(spec, VM_AGENT_SOCK, vm->agent_path);
	return vm;
}

/* Takes the pidfd and the connected sockets; starts watching. */
static int vm_attach(struct vm *vm, int *pidfd, int *qmp_fd, int *con_fd,
		     const struct vm_spec *spec, space_err *err)
{
	char log_path[PATH_MAX];

	vm->pidfd = steal_fd(pidfd);
	vm->exit_ev = event_new(vm->base, vm->pidfd, EV_READ, on_qemu_exit, vm);
	vm->kill_ev = evtimer_new(vm->base, on_kill_timeout, vm);
	if (!vm->exit_ev || !vm->kill_ev || event_add(vm->exit_ev, NULL) < 0)
		return err_set(err, ENOMEM, "vm %s: event_new failed", vm->id);
	vm->qmp = qmp_new(vm->base, steal_fd(qmp_fd), true, vm->id, err);
	if (!vm->qmp)
		return -1;
	qmp_set_handlers(vm->qmp, on_qmp_event, on_qmp_closed, vm);
	if (*con_fd >= 0) {
		vm_file_path(spec, VM_CONSOLE_LOG, log_path);
		vm->con = console_new(vm->base, steal_fd(con_fd), log_path, CONSOLE_MAX_BYTES,
				      CONSOLE_KEEP_BYTES, err);
		if (!vm->con)
			return -1;
	}
	return 0;
}

/* Connects console and QMP of a QEMU just spawned, and waits for the QMP
 * handshake: bounded, and cut short when the pidfd says QEMU died. */
static int connect_started(const struct vm_spec *spec, int pidfd, int64_t deadline, int *qmp_fd,
			   int *con_fd, space_err *err)
{
	char qmp_path[PATH_MAX], con_path[PATH_MAX];
	_cleanup_close_ int q = -1, c = -1;
	space_err e2 = { 0 };

	vm_file_path(spec, VM_QMP_SOCK, qmp_path);
	vm_file_path(spec, VM_CONSOLE_SOCK, con_path);
	/* QEMU creates the chardev sockets in command-line order (console
	 * last), all before the machine starts: once both connect, the
	 * console misses nothing the guest prints. */
	while (q < 0 || c < 0) {
		struct pollfd p = { .fd = pidfd, .events = POLLIN };
		if (c < 0)
			unix_connect(con_path, &c, &e2);
		if (c >= 0 && q < 0)
			unix_connect(qmp_path, &q, &e2);
		if (q >= 0 && c >= 0)
			break;
		int left = (int)(deadline - mono_ms());
		if (left <= 0)
			return err_set(err, ETIMEDOUT, "QEMU sockets did not appear within %d ms (%s)",
				       VM_START_TIMEOUT_MS, e2.msg);
		if (poll(&p, 1, left < 10 ? left : 10) > 0)
			return err_set(err, ECHILD, "QEMU exited during start-up");
	}
	char version[32];
	if (qmp_handshake(q, pidfd, deadline, version, sizeof(version), err) < 0)
		return -1;
	*qmp_fd = steal_fd(&q);
	*con_fd = steal_fd(&c);
	return 0;
}

int vm_launch(struct event_base *base, const struct vm_spec *spec, vm_exit_cb cb, void *arg,
	      struct vm **out, space_err *err)
{
	char path[PATH_MAX], why[512];
	struct strv argv = { 0 };
	pid_t pid = -1;
	_cleanup_close_ int pidfd = -1, qmp_fd = -1, con_fd = -1, log_fd = -1;
	int64_t t0 = mono_ms();

	if (vm_spec_check(spec, err) < 0)
		return -1;
	if (mkdir_p(spec->run_dir, 0700) < 0 || mkdir_p(spec->sock_dir, 0700) < 0 ||
	    mkdir_parent(spec->mem_path, 0700) < 0)
		return err_sys(err, errno, "creating the directories of %s", spec->id);
	/* Never start a second QEMU over a live one: it would take over the
	 * sockets of the first, which then can neither be reached nor adopted. */
	vm_file_path(spec, VM_QMP_SOCK, path);
	int probe_fd;
	space_err e2;
	if (unix_connect(path, &probe_fd, &e2) == 0) {
		close(probe_fd);
		return err_set(err, EEXIST, "a QEMU is already listening on %s", path);
	}
	/* A fresh boot: no stale sockets for our connect loop to hit, and no
	 * memory file of an earlier life (its size may not match). */
	for (enum vm_file f = VM_AGENT_SOCK; f <= VM_CONSOLE_SOCK; f++) {
		vm_file_path(spec, f, path);
		unlink(path);
	}
	unlink(spec->mem_path);

	vm_file_path(spec, VM_QEMU_LOG, path);
	log_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (log_fd < 0)
		return err_sys(err, errno, "open %s", path);
	if (ensure_overlay(spec, log_fd, err) < 0 || give_files(spec, err) < 0 ||
	    vm_argv_build(spec, vm_qemu_binary(), &argv, err) < 0)
		return -1;
	log_argv(log_fd, argv.v);

	struct spawn_opts o = {
		.argv = argv.v,
		.stdout_fd = log_fd,
		.stderr_fd = log_fd,
		.new_session = true,
		.netns = spec->netns,
		.cgroup_dir = spec->cgroup_dir,
		.uid = spec->run_uid,
		.gid = spec->run_gid,
	};
	int rc = proc_spawn(&o, &pid, &pidfd, err);
	strv_free(&argv);
	if (rc < 0)
		return -1;
	uint64_t start = proc_start_time(pid);

	space_err ce = { 0 };
	if (connect_started(spec, pidfd, t0 + VM_START_TIMEOUT_MS, &qmp_fd, &con_fd, &ce) < 0) {
		int status;
		/* A QEMU that refuses its arguments closes the sockets while it
		 * exits: give it a moment to finish, then report its words. */
		if (proc_wait_child(pid, pidfd, ce.code == ETIMEDOUT ? 0 : 500, &status) == 0) {
			char how[64];
			proc_status_text(status, how, sizeof(how));
			vm_file_path(spec, VM_QEMU_LOG, path);
			file_last_line(path, why, sizeof(why));
			return err_set(err, EIO, "qemu %s: %s", how,
				       why[0] ? why : "(no output)");
		}
		proc_kill_reap(pid, pidfd);
		return err_set(err, ce.code, "%s", ce.msg);
	}

	struct vm *vm = vm_alloc(base, spec, cb, arg);
	if (!vm) {
		proc_kill_reap(pid, pidfd);
		return err_set(err, ENOMEM, "out of memory");
	}
	vm->pid = pid;
	vm->pid_start = start;
	int watch_pidfd = pidfd; /* vm_attach takes it; still needed if it fails */
	if (vm_attach(vm, &pidfd, &qmp_fd, &con_fd, spec, err) < 0) {
		proc_kill_reap(pid, watch_pidfd);
		vm_really_free(vm);
		return -1;
	}
	log_info("vm %s: qemu pid %d up in %lld ms (%s)", spec->id, (int)pid,
		 (long long)(mono_ms() - t0), accel_name(spec->accel));
	*out = vm;
	return 0;
}

int vm_adopt(struct event_base *base, const struct vm_spec *spec, int pid, uint64_t pid_start,
	     vm_exit_cb cb, void *arg, struct vm **out, space_err *err)
{
	char name[96], path[PATH_MAX];
	_cleanup_close_ int pidfd = -1, qmp_fd = -1, con_fd = -1;
	space_err e2;

	if (vm_spec_check(spec, err) < 0)
		return -1;
	if (pid <= 0)
		return err_set(err, ESRCH, "no pid recorded");
	/* Open the pidfd first and verify after: if the pid was reused in
	 * between, the start time no longer matches, so a pidfd that passed
	 * the checks refers to the verified process for good. */
	pidfd = proc_pidfd_open(pid);
	if (pidfd < 0)
		return err_sys(err, errno == ESRCH ? ESRCH : errno, "pid %d", pid);
	uint64_t start = proc_start_time(pid);
	if (start == 0)
		return err_set(err, ESRCH, "pid %d is gone", pid);
	if (start != pid_start)
		return err_set(err, ESRCH, "pid %d is another process (started at %llu, not %llu)", pid, (unsigned long long)start, (unsigned long long)pid_start);
	snprintf(name, sizeof(name), VM_NAME_KEY "%s", spec->id);
	if (!proc_cmdline_has(pid, "-name", name))
		return err_set(err, ESRCH, "pid %d is not the QEMU of %s", pid, spec->id);

	/* The previous daemon's connections died with it, so QEMU's
	 * one-client chardev servers accept us again. */
	vm_file_path(spec, VM_QMP_SOCK, path);
	if (unix_connect(path, &qmp_fd, err) < 0 ||
	    qmp_handshake(qmp_fd, pidfd, mono_ms() + VM_ADOPT_TIMEOUT_MS, NULL, 0, err) < 0) {
		/* It is this sandbox's QEMU, but it cannot be controlled: end it
		 * rather than leak a VM nobody can stop. */
		proc_pidfd_signal(pidfd, SIGKILL);
		err_wrap(err, "qmp");
		return err_wrap(err, "killed unreachable qemu pid %d", pid);
	}
	vm_file_path(spec, VM_CONSOLE_SOCK, path);
	if (unix_connect(path, &con_fd, &e2) < 0)
		log_warn("vm %s: console not captured: %s", spec->id, e2.msg);

	struct vm *vm = vm_alloc(base, spec, cb, arg);
	if (!vm)
		return err_set(err, ENOMEM, "out of memory");
	vm->pid = pid;
	vm->pid_start = start;
	if (vm_attach(vm, &pidfd, &qmp_fd, &con_fd, spec, err) < 0) {
		vm_really_free(vm);
		return -1;
	}
	log_info("vm %s: adopted qemu pid %d", spec->id, pid);
	*out = vm;
	return 0;
}

int vm_pid(const struct vm *vm)
{
	return vm->pid;
}

uint64_t vm_pid_start(const struct vm *vm)
{
	return vm->pid_start;
}

const char *vm_agent_path(const struct vm *vm)
{
	return vm->agent_path;
}

void vm_kill(struct vm *vm)
{
	struct timeval grace = { VM_KILL_GRACE_MS / 1000, (VM_KILL_GRACE_MS % 1000) * 1000 };
	space_err e;

	if (vm->exited || vm->killing)
		return;
	vm->killing = true;
	if (qmp_is_open(vm->qmp) && qmp_send(vm->qmp, "quit", NULL, NULL, NULL, &e) == 0) {
		evtimer_add(vm->kill_ev, &grace);
		return;
	}
	log_info("vm %s: no QMP; SIGKILL pid %d", vm->id, (int)vm->pid);
	if (proc_pidfd_signal(vm->pidfd, SIGKILL) < 0 && errno != ESRCH)
		log_error("vm %s: SIGKILL pid %d: %s", vm->id, (int)vm->pid, strerror(errno));
}

int vm_qmp(struct vm *vm, const char *command, json_t *args, qmp_reply_cb cb, void *arg,
	   space_err *err)
{
	if (vm->exited || !vm->qmp) {
		json_decref(args);
		return err_set(err, ESRCH, "vm %s: qmp %s: QEMU is not running", vm->id, command);
	}
	if (qmp_send(vm->qmp, command, args, cb, arg, err) < 0)
		return err_wrap(err, "vm %s", vm->id);
	return 0;
}

/* ---- files ---- */

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if ((type == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT)
		return errno;
	return 0;
}

/* rm -r without a shell: depth-first, never following symlinks or leaving
 * the file system the directory is on. */
static int rm_tree(const char *path, space_err *err)
{
	struct stat st;

	if (!path || path[0] != '/' || strcmp(path, "/") == 0)
		return err_set(err, EINVAL, "refusing to remove '%s'", path ? path : "");
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : err_sys(err, errno, "stat %s", path);
	if (!S_ISDIR(st.st_mode))
		return unlink(path) < 0 && errno != ENOENT ? err_sys(err, errno, "unlink %s", path) : 0;
	int r = nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	if (r < 0)
		return err_sys(err, errno, "remove %s", path);
	if (r > 0)
		return err_sys(err, r, "remove %s", path);
	return 0;
}

int vm_remove_files(const struct vm_spec *spec, space_err *err)
{
	int rc = 0;

	/* Each path is tried even if one fails; the first error is reported. */
	space_err e;
	const char *paths[] = { spec->run_dir, spec->sock_dir, spec->mem_path };
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		if (!paths[i])
			continue;
		if (rm_tree(paths[i], &e) < 0 && rc == 0) {
			rc = -1;
			if (err)
				*err = e;
		}
	}
	if (rc < 0)
		err_wrap(err, "removing files of %s", spec->id);
	return rc;
}
