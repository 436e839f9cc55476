/* spawn.c -- the child side of a channel: session, stdio, credentials, cwd, environment, then
 * exec (process and PTY channels) or a function of the agent itself (file and watch channels,
 * fsop_main).  Runs after fork() in a copy of the single-threaded agent, so it may allocate.
 * Any failure is reported through the CLOEXEC status pipe as (i32 errno, message) and the
 * child exits 127; a successful exec closes the pipe, which the agent reads as "started" (a
 * child that runs a function closes it itself, right before calling it).
 *
 * Only the stdio part differs between kinds: pipes (stdin pipe or /dev/null, stdout and
 * stderr pipes), or a pseudo-terminal slave on 0, 1 and 2 as the controlling terminal. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"
#include "users.h"

#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

static bool has_key(const char *const *envp, const char *key)
{
	size_t kl = strlen(key);

	for (; envp && *envp; envp++)
		if (strncmp(*envp, key, kl) == 0 && (*envp)[kl] == '=')
			return true;
	return false;
}

char **agent_build_env(const char *const *envp, const struct agent_user *u, bool net_ca,
		       const char *term)
{
	static const char *const ca_env[][2] = {
		{ "SSL_CERT_FILE", AGENT_CA_BUNDLE },
		{ "REQUESTS_CA_BUNDLE", AGENT_CA_BUNDLE },
		{ "CURL_CA_BUNDLE", AGENT_CA_BUNDLE },
		{ "NODE_EXTRA_CA_CERTS", AGENT_CA_FILE },
	};
	const char *add[12][2] = { { NULL, NULL } };
	size_t n = 0, nadd = 0, strbytes = 0, i;
	char **env, *s;

	while (envp && envp[n])
		n++;
	if (u->home[0] && !has_key(envp, "HOME"))
		add[nadd][0] = "HOME", add[nadd++][1] = u->home;
	if (u->name[0] && !has_key(envp, "USER"))
		add[nadd][0] = "USER", add[nadd++][1] = u->name;
	if (u->name[0] && !has_key(envp, "LOGNAME"))
		add[nadd][0] = "LOGNAME", add[nadd++][1] = u->name;
	if (!has_key(envp, "PATH"))
		add[nadd][0] = "PATH", add[nadd++][1] = DEFAULT_PATH;
	for (i = 0; net_ca && i < sizeof(ca_env) / sizeof(ca_env[0]); i++)
		if (!has_key(envp, ca_env[i][0]))
			add[nadd][0] = ca_env[i][0], add[nadd++][1] = ca_env[i][1];
	if (term && !has_key(envp, "TERM"))
		add[nadd][0] = "TERM", add[nadd++][1] = term;
	for (i = 0; i < nadd; i++)
		strbytes += strlen(add[i][0]) + 1 + strlen(add[i][1]) + 1;
	/* One block: the pointer array, then the added strings; free(env) releases it all. */
	env = malloc((n + nadd + 1) * sizeof(char *) + strbytes);
	if (!env)
		return NULL;
	for (i = 0; i < n; i++)
		env[i] = (char *)envp[i];
	s = (char *)(env + n + nadd + 1);
	for (i = 0; i < nadd; i++) {
		env[n + i] = s;
		s += sprintf(s, "%s=%s", add[i][0], add[i][1]) + 1;
	}
	env[n + nadd] = NULL;
	return env;
}

static const char *env_get(char *const env[], const char *key)
{
	size_t kl = strlen(key);

	for (; env && *env; env++)
		if (strncmp(*env, key, kl) == 0 && (*env)[kl] == '=')
			return *env + kl + 1;
	return NULL;
}

/* A file that is not a binary and has no #! line: run it with /bin/sh, as execvp does. */
static void exec_sh(const char *path, char *const argv[], char *const env[])
{
	size_t argc = 0, i;
	char **nargv;

	while (argv[argc])
		argc++;
	nargv = calloc(argc + 2, sizeof(char *));
	if (!nargv)
		return;
	nargv[0] = (char *)"sh";
	nargv[1] = (char *)path;
	for (i = 1; i < argc; i++)
		nargv[i + 1] = argv[i];
	execve("/bin/sh", nargv, env);
	free(nargv);
}

int agent_execvpe(const char *file, char *const argv[], char *const env[])
{
	const char *path, *p;
	bool eacces = false;
	char buf[PATH_MAX];

	if (!file || !file[0])
		return ENOENT;
	if (strchr(file, '/')) {
		execve(file, argv, env);
		if (errno == ENOEXEC) {
			exec_sh(file, argv, env);
			errno = ENOEXEC;
		}
		return errno;
	}
	if (strlen(file) > NAME_MAX)
		return ENAMETOOLONG;
	path = env_get(env, "PATH");
	if (!path)
		path = DEFAULT_PATH;
	for (p = path;; p++) {
		const char *end = strchrnul(p, ':');
		size_t dl = (size_t)(end - p);
		int e;

		/* An empty entry means the current directory. */
		if (dl + 1 + strlen(file) + 1 <= sizeof(buf)) {
			if (dl) {
				memcpy(buf, p, dl);
				buf[dl] = '/';
				strcpy(buf + dl + 1, file);
			} else {
				strcpy(buf, file);
			}
			execve(buf, argv, env);
			e = errno;
			if (e == ENOEXEC) {
				exec_sh(buf, argv, env);
				return ENOEXEC;
			}
			switch (e) {
			case EACCES:
				eacces = true;
				break;
			case ENOENT:
			case ENOTDIR:
			case ESTALE:
			case ENODEV:
			case ETIMEDOUT:
			case ELOOP:
			case ENAMETOOLONG:
				break;
			default:
				return e;
			}
		}
		if (!*end)
			break;
		p = end;
	}
	return eacces ? EACCES : ENOENT;
}

static void __attribute__((noreturn, format(printf, 3, 4)))
child_fail(int status_fd, int e, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	buf[0] = (char)(e & 0xff);
	buf[1] = (char)((e >> 8) & 0xff);
	buf[2] = (char)((e >> 16) & 0xff);
	buf[3] = (char)((e >> 24) & 0xff);
	va_start(ap, fmt);
	n = vsnprintf(buf + 4, sizeof(buf) - 4, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n > sizeof(buf) - 5)
		n = sizeof(buf) - 5;
	/* One write below PIPE_BUF: the agent reads it whole. */
	if (write(status_fd, buf, 4 + (size_t)n) < 0)
		_exit(126);
	_exit(127);
}

/* stdio of a process channel: fds[0] the stdin pipe's read end (-1: /dev/null), stdout and
 * stderr pipes' write ends.  The agent keeps 0-2 open (console or /dev/null), so the pipe fds
 * are all >= 3 and the dup2()s cannot clobber one another. */
static void stdio_pipes(const struct agent_child *c)
{
	int sfd = c->status, nullfd;

	if (c->in >= 0) {
		if (dup2(c->in, 0) < 0)
			child_fail(sfd, errno, "stdin: %s", strerror(errno));
	} else {
		nullfd = open("/dev/null", O_RDONLY);
		if (nullfd < 0 || dup2(nullfd, 0) < 0)
			child_fail(sfd, errno, "open /dev/null: %s", strerror(errno));
		if (nullfd > 2)
			close(nullfd);
	}
	if (dup2(c->out, 1) < 0 || dup2(c->err, 2) < 0)
		child_fail(sfd, errno, "stdout/stderr: %s", strerror(errno));
}

/* stdio of a PTY channel: the slave becomes the controlling terminal of the new session (we
 * are its leader: setsid() ran) and fds 0, 1 and 2. */
static void stdio_tty(const struct agent_child *c)
{
	int sfd = c->status;

	if (ioctl(c->tty, TIOCSCTTY, 0) < 0)
		child_fail(sfd, errno, "pty: TIOCSCTTY: %s", strerror(errno));
	if (dup2(c->tty, 0) < 0 || dup2(c->tty, 1) < 0 || dup2(c->tty, 2) < 0)
		child_fail(sfd, errno, "pty: stdio: %s", strerror(errno));
}

/* Close every fd from lo to hi (inclusive). */
static void close_fds(unsigned lo, unsigned hi)
{
	unsigned fd;

	if (lo > hi)
		return;
#ifdef SYS_close_range
	if (syscall(SYS_close_range, lo, hi, 0) == 0)
		return;
#endif
	/* Kernels before 5.9: up to the limit (the agent's own, not yet lowered). */
	for (fd = lo; fd <= hi && fd < 65536; fd++)
		close((int)fd);
}

/* A child that does not exec: no CLOEXEC to shed the agent's fds (the port, epoll, other
 * channels' pipes, whose ends would stay open while it runs), so close all but 0-2 and the
 * status pipe; and drop anything the agent left in stdio buffers, which would otherwise end
 * up in this child's output. */
static void __attribute__((noreturn)) run_body(const struct agent_child *c)
{
	int rc;

	close_fds(3, (unsigned)c->status - 1);
	close_fds((unsigned)c->status + 1, ~0u);
	__fpurge(stdout);
	__fpurge(stderr);
	/* "Started": the agent reads the closed status pipe as a successful exec. */
	close(c->status);
	rc = c->body((int)c->x->argc, (char *const *)c->x->argv);
	fflush(stdout);
	fflush(stderr);
	/* Never back into agent code: this is a copy of the agent. */
	_exit(rc >= 0 && rc <= 255 ? rc : 255);
}

void agent_child_start(const struct agent *a, const struct agent_child *c)
{
	const struct proto_exec *x = c->x;
	int sfd = c->status, sig, e;
	const char *cwd;
	struct agent_user u;
	char msg[256];
	sigset_t none;
	char **env;

	/* Own session and process group, so H_SIGNAL can reach the whole job (and, on a PTY,
	 * so the terminal can become ours). */
	setsid();
	/* Signal state is inherited across exec: undo the agent's (blocked SIGCHLD for the
	 * signalfd, ignored SIGPIPE). */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	setrlimit(RLIMIT_NOFILE, &a->nofile);

	if (c->tty >= 0)
		stdio_tty(c);
	else
		stdio_pipes(c);

	if (agent_user_resolve("/etc/passwd", "/etc/group", x->user, x->uid, x->gid, &u, msg,
			       sizeof(msg)) < 0)
		child_fail(sfd, errno, "%s", msg);
	if (geteuid() == 0) {
		/* The terminal belongs to its user, as login and sshd do it (best effort: the
		 * fds are open already, only programs reopening the path need it). */
		if (c->tty >= 0) {
			int rc = fchown(0, u.uid, (gid_t)-1);

			(void)rc;
		}
		if (setgroups((size_t)u.ngroups, u.groups) < 0)
			child_fail(sfd, errno, "setgroups: %s", strerror(errno));
		if (setgid(u.gid) < 0)
			child_fail(sfd, errno, "setgid %u: %s", (unsigned)u.gid, strerror(errno));
		if (setuid(u.uid) < 0)
			child_fail(sfd, errno, "setuid %u: %s", (unsigned)u.uid, strerror(errno));
	} else if (u.uid != getuid() || u.gid != getgid()) {
		/* Only in host tests: the agent itself is not root. */
		child_fail(sfd, EPERM, "switch to uid %u gid %u: agent is not root",
			   (unsigned)u.uid, (unsigned)u.gid);
	}

	cwd = x->cwd && x->cwd[0] ? x->cwd : NULL;
	if (cwd) {
		if (chdir(cwd) < 0)
			child_fail(sfd, errno, "chdir %s: %s", cwd, strerror(errno));
	} else if (!u.home[0] || chdir(u.home) < 0) {
		/* A home that does not exist is not worth failing the command for. */
		if (chdir("/") < 0)
			child_fail(sfd, errno, "chdir /: %s", strerror(errno));
	}

	if (c->body)
		run_body(c);
	env = agent_build_env(x->envp, &u, a->net_ca, c->tty >= 0 ? AGENT_PTY_TERM : NULL);
	if (!env)
		child_fail(sfd, ENOMEM, "exec %s: out of memory", x->argv[0]);
	e = agent_execvpe(x->argv[0], (char *const *)x->argv, env);
	child_fail(sfd, e, "exec %s: %s", x->argv[0], strerror(e));
}
