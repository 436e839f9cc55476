/* proc.c -- spawning and watching child processes (QEMU, qemu-img) without blocking for long */
#include "proc.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "jail.h"
#include "seccomp.h"
#include "vm.h"
#include "log.h"

/* ---- argv ---- */

static void strv_push(struct strv *s, char *str)
{
	if (!str) {
		s->failed = true;
		return;
	}
	if (s->n + 2 > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 32;
		char **v = realloc(s->v, cap * sizeof(*v));
		if (!v) {
			free(str);
			s->failed = true;
			return;
		}
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = str;
	s->v[s->n] = NULL;
}

void strv_add(struct strv *s, const char *str)
{
	strv_push(s, strdup(str));
}

void strv_addf(struct strv *s, const char *fmt, ...)
{
	va_list ap;
	char *str = NULL;

	va_start(ap, fmt);
	if (vasprintf(&str, fmt, ap) < 0)
		str = NULL;
	va_end(ap);
	strv_push(s, str);
}

void strv_free(struct strv *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

int strv_find(const struct strv *s, const char *str)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->v[i], str) == 0)
			return (int)i;
	return -1;
}

/* ---- small helpers ---- */

int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int proc_pidfd_open(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

int proc_pidfd_signal(int pidfd, int sig)
{
	return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

void proc_status_text(int status, char *buf, size_t len)
{
	if (WIFEXITED(status))
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by signal %d", WTERMSIG(status));
	else
		snprintf(buf, len, "ended (wait status 0x%x)", status);
}

int proc_wait_child(pid_t pid, int pidfd, int timeout_ms, int *status)
{
	int64_t deadline = mono_ms() + timeout_ms;

	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);
		if (r == pid)
			return 0;
		if (r < 0 && errno != EINTR)
			return -1;
		int left = (int)(deadline - mono_ms());
		if (left <= 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		if (pidfd >= 0) {
			struct pollfd p = { .fd = pidfd, .events = POLLIN };
			poll(&p, 1, left);
		} else {
			usleep(left < 10 ? (useconds_t)left * 1000 : 10000);
		}
	}
}

void proc_kill_reap(pid_t pid, int pidfd)
{
	int status;

	if (pid <= 0)
		return;
	if (pidfd >= 0)
		proc_pidfd_signal(pidfd, SIGKILL);
	else
		kill(pid, SIGKILL);
	/* SIGKILL ends a process promptly unless it is stuck in the kernel;
	 * bound the wait anyway so a start-up path can never hang. */
	if (proc_wait_child(pid, pidfd, 5000, &status) < 0)
		log_warn("process %d did not end within 5 s of SIGKILL", (int)pid);
}

/* ---- spawning ---- */

/* What the child reports through the close-on-exec pipe when a step fails;
 * EOF on the pipe means exec succeeded. */
struct spawn_fail {
	int err;
	char step[96];
};

static __attribute__((noreturn)) void child_fail(int fd, int e, const char *step)
{
	struct spawn_fail f = { .err = e };
	ssize_t r;

	snprintf(f.step, sizeof(f.step), "%s", step);
	do
		r = write(fd, &f, sizeof(f));
	while (r < 0 && errno == EINTR);
	_exit(127);
}

static int child_dup(int from, int to)
{
	if (from == to)
		return fcntl(to, F_SETFD, 0); /* dup2 onto itself keeps FD_CLOEXEC */
	return dup2(from, to) < 0 ? -1 : 0;
}

static int lo_up(void)
{
	struct ifreq ifr = { 0 };
	_cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (s < 0)
		return -1;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		return -1;
	ifr.ifr_flags |= IFF_UP;
	return ioctl(s, SIOCSIFFLAGS, &ifr);
}

/* setns into o->netns_path, TUNSETIFF o->tap_name on a fresh /dev/net/tun
 * descriptor, moved to o->tap_fd (left open across exec). Fails the child with
 * the step on error. errfd is not o->tap_fd (the caller moved it). */
static void open_tap(const struct spawn_opts *o, int errfd)
{
	struct ifreq ifr = { 0 };
	int ns = open(o->netns_path, O_RDONLY | O_CLOEXEC);

	if (ns < 0)
		child_fail(errfd, errno, "open the sandbox netns");
	if (setns(ns, CLONE_NEWNET) < 0)
		child_fail(errfd, errno, "setns into the sandbox netns");
	close(ns);
	int tun = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (tun < 0)
		child_fail(errfd, errno, "open /dev/net/tun");
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", o->tap_name ? o->tap_name : "tap0");
	if (ioctl(tun, TUNSETIFF, &ifr) < 0)
		child_fail(errfd, errno, "TUNSETIFF on the sandbox's TAP");
	if (tun != o->tap_fd) {
		if (dup2(tun, o->tap_fd) < 0)
			child_fail(errfd, errno, "move the TAP's descriptor");
		close(tun);
	} else if (fcntl(tun, F_SETFD, 0) < 0) {
		child_fail(errfd, errno, "keep the TAP open across exec");
	}
}

static int join_cgroup(const char *dir)
{
	char path[PATH_MAX], pid[24];
	int n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());

	if (snprintf(path, sizeof(path), "%s/cgroup.procs", dir) >= (int)sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	return write(fd, pid, (size_t)n) == n ? 0 : -1;
}

/* Confinement, in this order: the cgroups first (their files are outside
 * the jail, and cgroup.procs needs our privileges); then the jail (mounts
 * need CAP_SYS_ADMIN); then the uid and capabilities go; the seccomp filter
 * last, because it forbids the calls above. */
static void confine(const struct spawn_opts *o, int errfd)
{
	const char *step = "";

	for (int i = 0; i < o->ncgroups; i++)
		if (join_cgroup(o->cgroup_dirs[i]) < 0)
			child_fail(errfd, errno, "join cgroup");
	if (o->jail_root && jail_enter(o->jail_root, &step) < 0)
		child_fail(errfd, errno, step);
	if (o->uid != 0 && jail_drop_privileges(o->uid, o->gid, &step) < 0)
		child_fail(errfd, errno, step);
	if (o->seccomp) {
		int rc = jail_seccomp_apply(); /* compiled before fork (spawn) */
		if (rc < 0)
			child_fail(errfd, -rc, "seccomp filter");
	}
}

/* Runs in the forked child; never returns. The daemon has other threads (the store's writer,
 * the cluster worker) that may hold a lock at the instant of fork (an allocator's, a
 * library's), which stays held in the child: so the child makes system calls and nothing
 * that allocates or locks. What needs memory is made before fork (spawn): the environment
 * (envp), the seccomp program (jail_seccomp_prepare). */
static int close_in_children = -1;

void proc_close_in_children(int fd)
{
	close_in_children = fd;
}

void proc_child_started(void)
{
	if (close_in_children >= 0)
		close(close_in_children);
}

static __attribute__((noreturn)) void child_exec(const struct spawn_opts *o, char *const *envp, int errfd)
{
	sigset_t all;

	/* First: a child still setting up (a jail takes a while) must not keep what
	 * proc_close_in_children named (the state dir's lock) past the daemon's death. */
	if (close_in_children >= 0)
		close(close_in_children);

	/* The daemon may block or ignore signals (libevent, SIGPIPE); a
	 * child must start with the defaults (ignored dispositions survive exec). */
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	if (o->no_thp && prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) < 0)
		child_fail(errfd, errno, "PR_SET_THP_DISABLE");

	/* Own session: a Ctrl-C on the daemon's terminal must not reach the
	 * VMs, which are meant to outlive the daemon. */
	if (o->new_session && setsid() < 0)
		child_fail(errfd, errno, "setsid");
	if (o->nice && setpriority(PRIO_PROCESS, 0, getpriority(PRIO_PROCESS, 0) + o->nice) < 0)
		child_fail(errfd, errno, "setpriority");

	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull < 0)
		child_fail(errfd, errno, "open /dev/null");
	/* Above every number a passed descriptor is moved to. */
	int xfd = o->exec_fd > 0 ? fcntl(o->exec_fd, F_DUPFD_CLOEXEC, 96) : -1;
	if (o->exec_fd > 0 && xfd < 0)
		child_fail(errfd, errno, "dup the binary's descriptor");
	/* Passed descriptors first go above every number they could land on,
	 * so that moving one to 3 + i never overwrites another still to move. */
	int moved[8];
	if (o->npass < 0 || o->npass > 8)
		child_fail(errfd, EINVAL, "too many descriptors to pass");
	for (int i = 0; i < o->npass; i++)
		if ((moved[i] = fcntl(o->pass_fds[i], F_DUPFD_CLOEXEC, 64)) < 0)
			child_fail(errfd, errno, "dup a passed descriptor");
	if (child_dup(o->stdin_fd > 0 ? o->stdin_fd : devnull, 0) < 0 ||
	    child_dup(o->stdout_fd >= 0 ? o->stdout_fd : devnull, 1) < 0 ||
	    child_dup(o->stderr_fd >= 0 ? o->stderr_fd : devnull, 2) < 0)
		child_fail(errfd, errno, "redirect stdio");
	/* Nothing else of the daemon's (listeners, other VMs' sockets) may
	 * leak into the child; errfd is closed by exec like the rest. */
	if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) < 0) {
		for (int fd = 3; fd < 4096; fd++)
			if (fd != errfd)
				fcntl(fd, F_SETFD, FD_CLOEXEC);
	}
	/* dup2 leaves the new descriptor open across exec. errfd is above 64
	 * only by chance, so it must not be one of the targets: it is moved
	 * out of the way first if it is. */
	for (int i = 0; i < o->npass; i++) {
		if (errfd == 3 + i) {
			int e2 = fcntl(errfd, F_DUPFD_CLOEXEC, 64 + 8);
			if (e2 < 0)
				_exit(127);
			errfd = e2;
		}
		if (dup2(moved[i], 3 + i) < 0)
			child_fail(errfd, errno, "pass a descriptor");
	}

	/* Namespaces need privileges, so before dropping them. The TAP is
	 * opened inside the sandbox's netns (a TAP belongs to the netns it
	 * was attached in); then we leave it for an empty one of our own, so
	 * the descriptor is all the program keeps of it. */
	if (o->netns && o->netns_path) {
		if (errfd == o->tap_fd && (errfd = fcntl(errfd, F_DUPFD_CLOEXEC, 64 + 8)) < 0)
			_exit(127);
		open_tap(o, errfd);
	}
	if (o->netns) {
		if (unshare(CLONE_NEWNET) < 0)
			child_fail(errfd, errno,
				   errno == EPERM ? "unshare(CLONE_NEWNET) (needs root or CAP_SYS_ADMIN)"
						  : "unshare(CLONE_NEWNET)");
		if (lo_up() < 0)
			child_fail(errfd, errno, "bring up lo in the new netns");
	}

	confine(o, errfd);
	if (xfd >= 0)
		syscall(SYS_execveat, xfd, "", o->argv, envp, AT_EMPTY_PATH);
	else if (o->clear_env)
		execve(o->argv[0], o->argv, envp);
	else
		execvpe(o->argv[0], o->argv, envp);
	child_fail(errfd, errno, "exec");
}

/* The child's environment, made before fork: empty (clear_env), or the daemon's with each
 * of env_add in place of a variable of its name. The strings are borrowed; free the array. */
static char **child_env(const struct spawn_opts *o)
{
	size_t n = 0, k = 0, add = 0;
	char **envp;

	for (char *const *e = o->env_add; !o->clear_env && e && *e; e++)
		add++;
	for (char **e = environ; !o->clear_env && e && *e; e++)
		n++;
	if (!(envp = calloc(n + add + 1, sizeof(*envp))))
		return NULL;
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(environ[i], '=');
		size_t len = eq ? (size_t)(eq - environ[i]) + 1 : strlen(environ[i]);
		bool replaced = false;

		for (size_t j = 0; j < add && !replaced; j++)
			replaced = strncmp(o->env_add[j], environ[i], len) == 0;
		if (!replaced)
			envp[k++] = environ[i];
	}
	for (size_t j = 0; j < add; j++)
		envp[k++] = o->env_add[j];
	return envp;
}

/* fork, then the child sets itself up and execs; rfd gets the status pipe's
 * read end (EOF at exec, a spawn_fail record before a failure). */
static int spawn(const struct spawn_opts *o, pid_t *pidp, int *pidfdp, int *rfd, space_err *err)
{
	int pipefd[2];

	int rc;

	if (o->seccomp && (rc = jail_seccomp_prepare()) < 0)
		return err_sys(err, -rc, "compiling the seccomp filter");
	_cleanup_free_ char **envp = child_env(o);
	if (!envp)
		return err_set(err, ENOMEM, "out of memory");
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return err_sys(err, errno, "pipe");
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(pipefd[0]);
		close(pipefd[1]);
		return err_sys(err, e, "fork");
	}
	if (pid == 0) {
		close(pipefd[0]);
		child_exec(o, envp, pipefd[1]);
	}
	close(pipefd[1]);
	_cleanup_close_ int r = pipefd[0];
	/* Our child cannot be reaped behind our back, so the pid is stable
	 * until we wait for it: opening the pidfd now is race-free. */
	_cleanup_close_ int pidfd = proc_pidfd_open(pid);
	if (pidfd < 0) {
		int e = errno;
		proc_kill_reap(pid, -1);
		return err_sys(err, e, "pidfd_open (needs Linux >= 5.3)");
	}
	*pidp = pid;
	*pidfdp = steal_fd(&pidfd);
	*rfd = steal_fd(&r);
	return 0;
}

int proc_spawn(const struct spawn_opts *o, pid_t *pidp, int *pidfdp, space_err *err)
{
	struct spawn_fail f;
	pid_t pid;
	int pidfd_raw, rfd_raw;
	ssize_t r;

	if (spawn(o, &pid, &pidfd_raw, &rfd_raw, err) < 0)
		return -1;
	_cleanup_close_ int rfd = rfd_raw, pidfd = pidfd_raw;
	/* Blocks only until exec() or an early failure. */
	do
		r = read(rfd, &f, sizeof(f));
	while (r < 0 && errno == EINTR);
	if (r > 0) {
		int status;
		proc_wait_child(pid, pidfd, 5000, &status);
		f.step[sizeof(f.step) - 1] = '\0';
		if (r != sizeof(f))
			return err_set(err, EIO, "spawning %s: child failed", o->argv[0]);
		return err_sys(err, f.err, "spawning %s: %s", o->argv[0], f.step);
	}
	*pidp = pid;
	if (pidfdp)
		*pidfdp = steal_fd(&pidfd);
	return 0;
}

int proc_spawn_async(const struct spawn_opts *o, pid_t *pid, int *pidfd, int *statusfd, space_err *err)
{
	if (spawn(o, pid, pidfd, statusfd, err) < 0)
		return -1;
	if (fcntl(*statusfd, F_SETFL, O_NONBLOCK) < 0)
		log_warn("spawn: status pipe: %s", strerror(errno));
	return 0;
}

void proc_spawn_failure(int statusfd, char *buf, size_t len)
{
	struct spawn_fail f;
	ssize_t r;

	buf[0] = '\0';
	if (statusfd < 0)
		return;
	do
		r = read(statusfd, &f, sizeof(f));
	while (r < 0 && errno == EINTR);
	if (r != (ssize_t)sizeof(f))
		return;
	f.step[sizeof(f.step) - 1] = '\0';
	snprintf(buf, len, "%s: %s", f.step, strerror(f.err));
}

int proc_which(const char *argv0, char *out, size_t len)
{
	const char *path = getenv("PATH");

	if (strchr(argv0, '/')) {
		if (snprintf(out, len, "%s", argv0) >= (int)len)
			return errno = ENAMETOOLONG, -1;
		return 0;
	}
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (const char *p = path; *p;) {
		const char *end = strchr(p, ':');
		int dlen = end ? (int)(end - p) : (int)strlen(p);

		if (dlen > 0 && p[0] == '/' && snprintf(out, len, "%.*s/%s", dlen, p, argv0) < (int)len &&
		    access(out, X_OK) == 0)
			return 0;
		p += dlen + (end ? 1 : 0);
	}
	errno = ENOENT;
	return -1;
}

int proc_run(char *const *argv, int log_fd, int timeout_ms, space_err *err)
{
	struct spawn_opts o = { .argv = argv, .stdout_fd = log_fd, .stderr_fd = log_fd };
	pid_t pid;
	int pidfd, status;
	char how[64];

	if (proc_spawn(&o, &pid, &pidfd, err) < 0)
		return -1;
	if (proc_wait_child(pid, pidfd, timeout_ms, &status) < 0) {
		proc_kill_reap(pid, pidfd);
		close(pidfd);
		return err_set(err, ETIMEDOUT, "%s did not finish within %d ms", argv[0], timeout_ms);
	}
	close(pidfd);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		proc_status_text(status, how, sizeof(how));
		return err_set(err, EIO, "%s %s", argv[0], how);
	}
	return 0;
}

/* ---- /proc ---- */

int proc_stat_parse_starttime(const char *stat, uint64_t *out)
{
	const char *p = strrchr(stat, ')');

	if (!p)
		return -1;
	p++;
	/* After ") " comes field 3 (state); starttime is field 22. */
	for (int field = 3; field < 22; field++) {
		while (*p == ' ')
			p++;
		if (!*p)
			return -1;
		while (*p && *p != ' ')
			p++;
	}
	while (*p == ' ')
		p++;
	if (*p < '0' || *p > '9')
		return -1;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(p, &end, 10);
	if (errno || (*end && *end != ' ' && *end != '\n'))
		return -1;
	*out = v;
	return 0;
}

uint64_t proc_start_time(int pid)
{
	char path[64], buf[1024];
	uint64_t v;

	if (pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return proc_stat_parse_starttime(buf, &v) < 0 ? 0 : v;
}

bool cmdline_buf_has(const char *buf, size_t len, const char *flag, const char *value)
{
	size_t vlen = strlen(value);
	const char *prev = NULL;

	for (size_t i = 0; i < len;) {
		const char *arg = buf + i;
		size_t alen = strnlen(arg, len - i);
		if (prev && strcmp(prev, flag) == 0 && alen >= vlen &&
		    memcmp(arg, value, vlen) == 0 && (arg[vlen] == '\0' || arg[vlen] == ','))
			return true;
		prev = alen < len - i ? arg : NULL; /* last arg may lack its NUL */
		i += alen + 1;
	}
	return false;
}

bool proc_cmdline_has(pid_t pid, const char *flag, const char *value)
{
	char path[64];
	size_t cap = 64 * 1024, len = 0;
	_cleanup_free_ char *buf = malloc(cap);

	if (!buf)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	while (len < cap) {
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	return cmdline_buf_has(buf, len, flag, value);
}

/* ---- sockets and files ---- */

int unix_listen(const char *path, int *fdp, space_err *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	if (strlen(path) >= sizeof(sa.sun_path))
		return err_set(err, ENAMETOOLONG, "socket path too long: %s", path);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_sys(err, errno, "socket");
	if (unlink(path) < 0 && errno != ENOENT)
		return err_sys(err, errno, "unlink %s", path);
	/* Bound under a 0700 directory; the mode is a second fence. */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return err_sys(err, errno, "bind %s", path);
	if (chmod(path, 0600) < 0 || listen(fd, 8) < 0)
		return err_sys(err, errno, "listen on %s", path);
	*fdp = steal_fd(&fd);
	return 0;
}

int unix_connect(const char *path, int *fdp, space_err *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	if (strlen(path) >= sizeof(sa.sun_path))
		return err_set(err, ENAMETOOLONG, "socket path too long: %s", path);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return err_sys(err, errno, "socket");
	/* A unix stream connect completes or fails at once (EAGAIN only when
	 * the listener's backlog is full). */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return err_sys(err, errno, "connect %s", path);
	*fdp = steal_fd(&fd);
	return 0;
}

void file_last_line(const char *path, char *buf, size_t len)
{
	char tail[1024];

	buf[0] = '\0';
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	off_t size = lseek(fd, 0, SEEK_END);
	off_t from = size > (off_t)sizeof(tail) - 1 ? size - (off_t)sizeof(tail) + 1 : 0;
	ssize_t n = pread(fd, tail, sizeof(tail) - 1, from);
	if (n <= 0)
		return;
	tail[n] = '\0';
	/* Only what follows the last "--- " header line (one start's output). */
	char *p = tail, *hdr = NULL;
	for (char *h = strstr(tail, "--- "); h; h = strstr(h + 1, "--- "))
		if (h == tail || h[-1] == '\n')
			hdr = h;
	if (hdr)
		p = strchr(hdr, '\n') ? strchr(hdr, '\n') + 1 : hdr + strlen(hdr);
	/* Lines joined with " / ", blank ones dropped. */
	size_t o = 0;
	for (char *line = strtok(p, "\r\n"); line && o + 1 < len; line = strtok(NULL, "\r\n")) {
		int w = snprintf(buf + o, len - o, "%s%s", o ? " / " : "", line);
		if (w < 0)
			break;
		o += (size_t)w < len - o ? (size_t)w : len - o - 1;
	}
}

const char *proc_sibling_binary(const char *env, const char *name, char path[PATH_MAX])
{
	const char *e = getenv(env);
	ssize_t n;

	if (e && *e)
		return e;
	if (path[0])
		return path;
	n = readlink("/proc/self/exe", path, PATH_MAX - 1);
	if (n <= 0 || (size_t)n + strlen(name) + 1 >= PATH_MAX) {
		snprintf(path, PATH_MAX, "%s", name);
		return path;
	}
	path[n] = '\0';
	char *slash = strrchr(path, '/');
	char *at = slash ? slash + 1 : path;
	snprintf(at, PATH_MAX - (size_t)(at - path), "%s", name);
	return path;
}
