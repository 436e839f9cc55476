/* vm.c -- one QEMU -M microvm process per sandbox: launch, adopt, watch (pidfd), kill */
#include "vm.h"

#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "cleanup.h"
#include "jail.h"
#include "log.h"
#include "memimg.h"
#include "proc.h"
#include "egress/rules.h"
#include "vm_argv.h"
#include "vm_internal.h"

#define VM_ADOPT_TIMEOUT_MS 2000
/* How much less CPU priority QEMU gets than the daemon (nice levels). */
#define VM_NICE 10
/* vm_kill: QMP quit first, SIGKILL if QEMU is still there after this. */
#define VM_KILL_GRACE_MS 2000

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
	/* Ours and private, not a link someone planted (EACCES otherwise). */
	struct stat st;
	if (lstat(buf, &st) < 0)
		return -1;
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 0077)) {
		errno = EACCES;
		return -1;
	}
	return 0;
}

/* mkdir_p of the directory that holds path. */
static int mkdir_parent(const char *path, mode_t mode)
{
	char buf[PATH_MAX];

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	char *slash = strrchr(buf, '/');
	if (!slash || slash == buf) {
		errno = EINVAL;
		return -1;
	}
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

/* ---- watching ---- */

static void vm_really_free(struct vm *vm)
{
	vm_calls_abort(vm, "the vm was freed", false);
	if (vm->exit_ev)
		event_free(vm->exit_ev);
	if (vm->kill_ev)
		event_free(vm->kill_ev);
	if (vm->start_ev)
		event_free(vm->start_ev);
	qmp_free(vm->qmp);
	console_free(vm->con);
	if (vm->pidfd >= 0)
		close(vm->pidfd);
	if (vm->incoming_fd >= 0)
		close(vm->incoming_fd);
	if (vm->spawn_fd >= 0)
		close(vm->spawn_fd);
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

/* Why a VM that never became ready ended: its exit status and what QEMU said. */
static void start_failure_reason(struct vm *vm, const char *how)
{
	char said[200];

	if (vm->reason[0])
		return; /* vm_launch_fail said why */
	/* Never exec'd: the step that failed says why. */
	proc_spawn_failure(vm->spawn_fd, said, sizeof(said));
	if (said[0]) {
		snprintf(vm->reason, sizeof(vm->reason), "qemu could not be started: %s", said);
		return;
	}
	file_last_line(vm->qemu_log, said, sizeof(said));
	snprintf(vm->reason, sizeof(vm->reason), "qemu %s during start-up: %s", how,
		 said[0] ? said : "(no output)");
}

static void on_qemu_exit(evutil_socket_t fd, short what, void *arg)
{
	struct vm *vm = arg;
	char how[64];
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
		proc_status_text(status, how, sizeof(how));
	else
		snprintf(how, sizeof(how), "exited");
	if (!vm->ready)
		start_failure_reason(vm, how);
	else if (!vm->reason[0])
		snprintf(vm->reason, sizeof(vm->reason), "%s", how);
	vm->exited = true;

	if (vm->kill_ev)
		event_del(vm->kill_ev);
	if (vm->start_ev)
		event_del(vm->start_ev);
	close(vm->pidfd);
	vm->pidfd = -1;
	vm_confinement_undo(vm);
	/* Keep the last words of a crashing guest before closing. */
	console_drain(vm->con);
	console_free(vm->con);
	vm->con = NULL;

	/* Pending QMP commands and control calls fail now, before the exit
	 * callback; their callbacks may free the vm. */
	vm->depth++;
	qmp_close(vm->qmp, "QEMU exited");
	vm_calls_abort(vm, "QEMU exited", true);
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
	if (vm->ev.exited)
		vm->ev.exited(vm, vm->reason, vm->arg);
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

static void on_start_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct vm *vm = arg;

	(void)fd;
	(void)what;
	if (!vm->ready && !vm->exited)
		vm_launch_fail(vm, "did not start in time");
}

static void on_qmp_event(const char *event, json_t *data, void *arg)
{
	struct vm *vm = arg;

	if (strcmp(event, "SHUTDOWN") == 0 || strcmp(event, "GUEST_PANICKED") == 0)
		log_info("vm %s: qmp event %s", vm->id, event);
	vm->depth++;
	vm_ctl_event(vm, event, data);
	if (vm->ev.event && !vm->free_pending)
		vm->ev.event(vm, event, data, vm->arg);
	if (--vm->depth == 0 && vm->free_pending)
		vm_really_free(vm);
}

static void on_qmp_closed(const char *why, void *arg)
{
	struct vm *vm = arg;

	/* Normal while QEMU exits; the pidfd tells the real story. */
	log_debug("vm %s: %s", vm->id, why);
}

static struct vm *vm_alloc(struct event_base *base, const struct vm_spec *spec,
			   const struct vm_events *ev, void *arg)
{
	struct vm *vm = calloc(1, sizeof(*vm));

	if (!vm)
		return NULL;
	vm->base = base;
	vm->pidfd = -1;
	vm->incoming_fd = -1;
	vm->spawn_fd = -1;
	if (ev)
		vm->ev = *ev;
	vm->arg = arg;
	vm->t0 = mono_ms();
	snprintf(vm->id, sizeof(vm->id), "%s", spec->id);
	snprintf(vm->disk, sizeof(vm->disk), "%s", spec->disk);
	vm->jailed = spec->jail;
	vm->uid = spec->run_uid;
	vm->gid = spec->run_gid;
	if (spec->jail)
		snprintf(vm->jail_dir, sizeof(vm->jail_dir), "%s", spec->jail_dir);
	vm_file_path(spec, VM_AGENT_SOCK, vm->agent_path);
	vm_file_path(spec, VM_QEMU_LOG, vm->qemu_log);
	return vm;
}

/* Takes the pidfd and the connected sockets; starts watching. */
static int vm_attach(struct vm *vm, int *pidfd, int *qmp_fd, int *con_fd, bool negotiated,
		     const struct vm_spec *spec, space_err *err)
{
	char log_path[PATH_MAX];

	vm->pidfd = steal_fd(pidfd);
	vm->exit_ev = event_new(vm->base, vm->pidfd, EV_READ, on_qemu_exit, vm);
	vm->kill_ev = evtimer_new(vm->base, on_kill_timeout, vm);
	vm->start_ev = evtimer_new(vm->base, on_start_timeout, vm);
	if (!vm->exit_ev || !vm->kill_ev || !vm->start_ev || event_add(vm->exit_ev, NULL) < 0)
		return err_set(err, ENOMEM, "vm %s: event_new failed", vm->id);
	vm->qmp = qmp_new(vm->base, steal_fd(qmp_fd), negotiated, vm->id, err);
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

/* ---- launch ---- */

void vm_launch_done(struct vm *vm)
{
	if (vm->ready || vm->exited)
		return;
	vm->ready = true;
	event_del(vm->start_ev);
	log_info("vm %s: qemu pid %d ready in %lld ms", vm->id, (int)vm->pid,
		 (long long)(mono_ms() - vm->t0));
	vm->depth++;
	if (vm->ev.ready)
		vm->ev.ready(vm, vm->arg);
	if (--vm->depth == 0 && vm->free_pending)
		vm_really_free(vm);
}

void vm_launch_fail(struct vm *vm, const char *why)
{
	if (vm->exited)
		return;
	if (!vm->reason[0]) {
		char said[200];

		file_last_line(vm->qemu_log, said, sizeof(said));
		snprintf(vm->reason, sizeof(vm->reason), "qemu %s%s%s", why, said[0] ? ": " : "", said);
	}
	log_warn("vm %s: %s; SIGKILL pid %d", vm->id, vm->reason, (int)vm->pid);
	if (proc_pidfd_signal(vm->pidfd, SIGKILL) < 0 && errno != ESRCH)
		log_error("vm %s: SIGKILL pid %d: %s", vm->id, (int)vm->pid, strerror(errno));
}

static void on_first_reply(json_t *reply, const char *error, void *arg)
{
	struct vm *vm = arg;

	/* No reply at all: the connection closed because QEMU is ending, and
	 * its exit says why (status and last words) better than we could. */
	if (!error)
		vm_launch_done(vm);
	else if (reply)
		vm_launch_fail(vm, "did not answer QMP");
}

/* Binds the three sockets QEMU serves (agent, qmp, console) under sock_dir. */
static int listen_all(const struct vm_spec *spec, int fds[3], space_err *err)
{
	char path[PATH_MAX];

	for (enum vm_file f = VM_AGENT_SOCK; f <= VM_CONSOLE_SOCK; f++) {
		vm_file_path(spec, f, path);
		if (unix_listen(path, &fds[f - VM_AGENT_SOCK], err) < 0)
			return -1;
	}
	return 0;
}

/* Everything before the spawn: directories, log, argv, sockets, state,
 * and the confinement (jail root, cgroup leaf, sealed memory image). */
struct launch_prep {
	struct strv argv;
	int log_fd;
	int listen[4];       /* agent, qmp, console; the memfd (borrowed from memimg) */
	int npass;
	int incoming;
	char qemu[PATH_MAX];
	bool jail_built;
	const char *jail_dir;
	struct vm_cgroup cg;
	const char *cgroups[CGROUP_CTRLS];
};

/* undo: the launch failed, so the jail and the cgroup go as well. */
static void prep_clear(struct launch_prep *p, bool undo)
{
	space_err e;

	strv_free(&p->argv);
	if (p->log_fd >= 0)
		close(p->log_fd);
	for (int i = 0; i < 3; i++)
		if (p->listen[i] >= 0)
			close(p->listen[i]);
	if (p->incoming >= 0)
		close(p->incoming);
	if (undo && p->jail_built && jail_teardown(p->jail_dir, &e) < 0)
		log_warn("%s", e.msg);
	if (undo && p->cg.n && cgroup_remove(&p->cg, &e) < 0)
		log_warn("%s", e.msg);
}

static int confine_prepare(const struct vm_spec *spec, struct launch_prep *p, space_err *err)
{
	if (spec->cgroup_scope) {
		struct cgroup_limits l;

		cgroup_limits_for(spec->memory_mib, spec->vcpus, &l);
		if (cgroup_create(spec->cgroup_scope, spec->id, &l, &p->cg, err) < 0)
			return -1;
		for (int i = 0; i < p->cg.n; i++)
			p->cgroups[i] = p->cg.dir[i];
	}
	if (!spec->jail)
		return 0;
	struct jail_files f = { .kernel = spec->kernel, .disk = spec->disk, .kvm = spec->accel == ACCEL_KVM,
				.uid = spec->run_uid, .gid = spec->run_gid, .layer_dirs = spec->layer_dirs };
	if (mkdir_parent(spec->jail_dir, 0700) < 0)
		return err_sys(err, errno, "creating the directory of %s", spec->jail_dir);
	if (jail_build(spec->jail_dir, &f, err) < 0)
		return -1;
	p->jail_built = true;
	p->jail_dir = spec->jail_dir;
	if (spec->mem == VM_MEM_IMAGE && spec->mem_own)
		return jail_own_file(spec->jail_dir, spec->mem_image, spec->run_uid, spec->run_gid, err);
	if (spec->mem == VM_MEM_IMAGE) {
		int fd = memimg_fd(spec->mem_image, err);
		if (fd < 0)
			return -1;
		p->listen[3] = fd;
		p->npass = 4;
	}
	return 0;
}

static int prepare(const struct vm_spec *spec, struct launch_prep *p, space_err *err)
{
	char path[PATH_MAX];
	int probe_fd;
	space_err e2;

	if (vm_spec_check(spec, err) < 0)
		return -1;
	if (mkdir_p(spec->run_dir, 0700) < 0 || mkdir_p(spec->sock_dir, 0700) < 0)
		return err_sys(err, errno, "creating the directories of %s", spec->id);
	/* Never start a second QEMU over a live one: it would take over the
	 * sockets of the first, which then can neither be reached nor adopted. */
	vm_file_path(spec, VM_QMP_SOCK, path);
	if (unix_connect(path, &probe_fd, &e2) == 0) {
		close(probe_fd);
		return err_set(err, EEXIST, "a QEMU is already listening on %s", path);
	}
	if (access(spec->disk, R_OK | W_OK) < 0)
		return err_sys(err, errno == ENOENT ? EIO : errno, "disk %s", spec->disk);
	if (spec->incoming) {
		p->incoming = open(spec->incoming, O_RDONLY | O_CLOEXEC);
		if (p->incoming < 0)
			return err_sys(err, errno == ENOENT ? EIO : errno, "snapshot state %s", spec->incoming);
	}
	/* An empty environment has no PATH: the binary by its full path. */
	if (proc_which(vm_qemu_binary(), p->qemu, sizeof(p->qemu)) < 0)
		return err_sys(err, errno, "finding %s", vm_qemu_binary());
	if (confine_prepare(spec, p, err) < 0)
		return err_wrap(err, "confining the VM");
	vm_file_path(spec, VM_QEMU_LOG, path);
	p->log_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (p->log_fd < 0)
		return err_sys(err, errno, "open %s", path);
	if (vm_argv_build(spec, p->qemu, &p->argv, err) < 0)
		return -1;
	log_argv(p->log_fd, p->argv.v);
	return listen_all(spec, p->listen, err);
}

int vm_launch(struct event_base *base, const struct vm_spec *spec, int timeout_ms,
	      const struct vm_events *ev, void *arg, struct vm **out, space_err *err)
{
	struct launch_prep p = { .log_fd = -1, .listen = { -1, -1, -1, -1 }, .npass = 3, .incoming = -1 };
	_cleanup_close_ int pidfd = -1, qmp_fd = -1, con_fd = -1, spawn_fd = -1;
	char path[PATH_MAX];
	pid_t pid = -1;
	int rc;

	if (prepare(spec, &p, err) < 0) {
		prep_clear(&p, true);
		return -1;
	}
	struct spawn_opts o = {
		.argv = p.argv.v,
		.stdout_fd = p.log_fd,
		.stderr_fd = p.log_fd,
		.pass_fds = p.listen,
		.npass = p.npass,
		.new_session = true,
		/* VMs are the node's bulk work; the control plane that starts,
		 * stops and streams them must not wait behind a busy vCPU. */
		.nice = VM_NICE,
		.netns = spec->netns,
		.netns_path = spec->net_ns,
		.tap_name = EGRESS_TAP_NAME,
		.tap_fd = VM_FD_TAP,
		.cgroup_dirs = p.cgroups,
		.ncgroups = p.cg.n,
		.jail_root = spec->jail ? spec->jail_dir : NULL,
		.uid = spec->jail ? spec->run_uid : 0,
		.gid = spec->jail ? spec->run_gid : 0,
		.seccomp = spec->jail,
		.clear_env = spec->jail,
		/* QEMU asks for huge pages for its TCG code buffer (madvise): an idle clone's few
		 * MiB of translated code then sit in four 2 MiB pages, 8 MiB of private memory.
		 * With KVM there is no such buffer, and the guest's RAM is not anonymous memory. */
		.no_thp = spec->accel == ACCEL_TCG,
	};
	/* Not waiting for the exec keeps the loop free while the child waits
	 * for a CPU (2 cores, ten VMs starting). A failure before exec shows
	 * up as the child's exit, with its reason on spawn_fd. */
	rc = proc_spawn_async(&o, &pid, &pidfd, &spawn_fd, err);
	if (rc < 0) {
		prep_clear(&p, true);
		return -1;
	}
	/* The listeners live on in QEMU. Connecting to one of them succeeds at
	 * once, into its backlog, whether or not QEMU is accepting yet. */
	vm_file_path(spec, VM_QMP_SOCK, path);
	rc = unix_connect(path, &qmp_fd, err);
	vm_file_path(spec, VM_CONSOLE_SOCK, path);
	if (rc == 0)
		rc = unix_connect(path, &con_fd, err);
	struct vm *vm = rc == 0 ? vm_alloc(base, spec, ev, arg) : NULL;
	if (rc == 0 && !vm)
		rc = err_set(err, ENOMEM, "out of memory");
	if (rc == 0) {
		vm->pid = pid;
		vm->pid_start = proc_start_time(pid);
		vm->incoming_fd = steal_fd(&p.incoming);
		vm->spawn_fd = steal_fd(&spawn_fd);
		int watch = pidfd; /* vm_attach takes it; still needed if it fails */
		if (vm_attach(vm, &pidfd, &qmp_fd, &con_fd, false, spec, err) < 0) {
			proc_kill_reap(pid, watch);
			vm_really_free(vm);
			prep_clear(&p, true);
			return -1;
		}
	} else {
		proc_kill_reap(pid, pidfd);
		prep_clear(&p, true);
		return -1;
	}
	/* The vm undoes the confinement from now on, when QEMU is gone. */
	vm->cg = p.cg;
	prep_clear(&p, false);
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	evtimer_add(vm->start_ev, &tv);
	/* The first reply means QEMU initialised and runs its main loop. */
	if (vm->incoming_fd >= 0)
		rc = vm_ctl_incoming(vm, err);
	else
		rc = qmp_send(vm->qmp, "query-status", NULL, on_first_reply, vm, err);
	if (rc < 0) {
		proc_kill_reap(vm->pid, vm->pidfd);
		vm_confinement_undo(vm);
		vm_really_free(vm);
		return -1;
	}
	log_info("vm %s: qemu pid %d started (%s%s%s)", spec->id, (int)pid, accel_name(spec->accel),
		 spec->incoming ? ", from a snapshot" : "", spec->jail ? ", jailed" : ", NOT jailed");
	*out = vm;
	return 0;
}

/* ---- adoption ---- */

int vm_adopt(struct event_base *base, const struct vm_spec *spec, int pid, uint64_t pid_start,
	     const struct vm_events *ev, void *arg, struct vm **out, space_err *err)
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
		return err_set(err, ESRCH, "pid %d is another process (started at %llu, not %llu)", pid,
			       (unsigned long long)start, (unsigned long long)pid_start);
	snprintf(name, sizeof(name), VM_NAME_KEY "%s", spec->id);
	if (!proc_cmdline_has(pid, "-name", name))
		return err_set(err, ESRCH, "pid %d is not the QEMU of %s", pid, spec->id);
	/* A command line anyone can forge; the uid only root can give. A
	 * process that claims the VM but runs as another uid than the one
	 * recorded for its jail (0 for a VM started without one) is not ours. */
	if (!jail_pid_has_uid(pid, spec->run_uid))
		return err_set(err, ESRCH, "pid %d claims to be the QEMU of %s but does not run as its uid %u", pid,
			       spec->id, (unsigned)spec->run_uid);

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

	struct vm *vm = vm_alloc(base, spec, ev, arg);
	if (!vm)
		return err_set(err, ENOMEM, "out of memory");
	vm->pid = pid;
	vm->pid_start = start;
	vm->ready = true;
	vm->jailed = spec->run_uid != 0;
	if (!vm->jailed)
		vm->jail_dir[0] = '\0';
	if (spec->cgroup_scope && cgroup_paths(spec->cgroup_scope, spec->id, &vm->cg, &e2) < 0)
		log_warn("vm %s: its cgroup will not be removed: %s", spec->id, e2.msg);
	if (vm_attach(vm, &pidfd, &qmp_fd, &con_fd, true, spec, err) < 0) {
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

const char *vm_id(const struct vm *vm)
{
	return vm->id;
}

void vm_kill(struct vm *vm)
{
	struct timeval grace = { VM_KILL_GRACE_MS / 1000, (VM_KILL_GRACE_MS % 1000) * 1000 };
	space_err e;

	if (vm->exited || vm->killing)
		return;
	vm->killing = true;
	if (vm->ready && qmp_is_open(vm->qmp) && qmp_send(vm->qmp, "quit", NULL, NULL, NULL, &e) == 0) {
		evtimer_add(vm->kill_ev, &grace);
		return;
	}
	log_info("vm %s: SIGKILL pid %d", vm->id, (int)vm->pid);
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

int vm_rm_tree(const char *path, space_err *err)
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

void vm_confinement_undo(struct vm *vm)
{
	space_err e = { 0 };

	if (vm->jail_dir[0] && jail_teardown(vm->jail_dir, &e) < 0)
		log_warn("vm %s: %s", vm->id, e.msg);
	vm->jail_dir[0] = '\0';
	if (vm->cg.n && cgroup_remove(&vm->cg, &e) < 0)
		log_warn("vm %s: %s", vm->id, e.msg);
	vm->cg.n = 0;
}

void vm_remove_confinement(const struct vm_spec *spec)
{
	struct vm_cgroup cg;
	space_err e = { 0 };

	if (spec->jail_dir && jail_teardown(spec->jail_dir, &e) < 0)
		log_warn("vm %s: %s", spec->id, e.msg);
	if (spec->cgroup_scope && cgroup_paths(spec->cgroup_scope, spec->id, &cg, &e) == 0)
		cgroup_remove(&cg, NULL);
}

int vm_remove_files(const struct vm_spec *spec, space_err *err)
{
	int rc = 0;

	/* Each path is tried even if one fails; the first error is reported. */
	space_err e;
	const char *paths[] = { spec->run_dir, spec->sock_dir };
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		if (!paths[i])
			continue;
		if (vm_rm_tree(paths[i], &e) < 0 && rc == 0) {
			rc = -1;
			if (err)
				*err = e;
		}
	}
	if (rc < 0)
		err_wrap(err, "removing files of %s", spec->id);
	return rc;
}
