/* gw.c -- a sandbox's egress gateway process (space-gw): started (empty environment, its own
 * cgroup leaf) or adopted, watched, given its policy over the control socket, stopped
 * (docs/design/egress.md) */
#include "net.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "vmm/cgroup.h"
#include "vmm/proc.h"
#include "vmm/vm.h"

#define GW_NAME "space-gw"
/* What a push waits for the gateway's answer; a gateway just spawned gets longer (it opens
 * its sockets and reads the CA bundle first). */
#define GW_PUSH_TIMEOUT_MS 2000
#define GW_FIRST_PUSH_TIMEOUT_MS 5000
/* A reply line longer than this is not a gateway's. */
#define GW_REPLY_MAX 4096
/* A gateway's cgroup leaf: memory = its buffer budget plus this (its own heap, an OpenSSL
 * state per intercepted connection, libevent; about 8 MiB idle, 40 MiB with 300 connections
 * and a 16 MiB budget full), one core, a few tasks (it has one thread; ASan's leak checker
 * adds one at exit). */
#define GW_MEMORY_BASE_MIB 128
#define GW_PIDS_MAX 8
#ifdef __SANITIZE_ADDRESS__
/* A sanitized daemon runs the sanitized gateway beside it: ASan's shadow and quarantine. */
#define GW_MEMORY_SANITIZER_MIB 768
#else
#define GW_MEMORY_SANITIZER_MIB 0
#endif
/* The only variables a gateway inherits: the sanitizer runtime's (where a sanitized build
 * writes its reports). Anything else of the daemon's (SPACE_API_KEY, PGPASSWORD, a store
 * URL) must not sit in /proc/<gateway>/environ. */
static const char *const gw_env_keep[] = { "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS" };

struct gw {
	struct spaced *d;
	char id[ID_LEN];
	char run_dir[PATH_MAX];
	char sock[PATH_MAX];
	pid_t pid;
	uint64_t start;
	int pidfd;
	bool child;       /* ours to reap (spawned by this daemon) */
	bool pushed;      /* has had a push answered */
	struct event *exit_ev;
	gw_exit_cb exited;
	void *arg;
	struct push_op *op; /* a push waiting for its answer from the loop (at most one) */
	struct gw *live_next;
};

/* Every gateway object of this daemon: a gateway joins its cgroup leaf itself, after the
 * spawn, so the reaper of an older gateway of the same sandbox must not remove the leaf
 * while a newer one exists (it may not have joined yet). The loop's only. */
static struct gw *live;

static void live_del(struct gw *g)
{
	for (struct gw **pp = &live; *pp; pp = &(*pp)->live_next) {
		if (*pp == g) {
			*pp = g->live_next;
			return;
		}
	}
}

static bool live_has(const char *id, const struct gw *except)
{
	for (struct gw *g = live; g; g = g->live_next)
		if (g != except && strcmp(g->id, id) == 0)
			return true;
	return false;
}

/* An asynchronous push: the line goes out and the answer comes in from the loop. */
struct push_op {
	struct gw *g;
	int fd;
	struct event *ev;
	char *line;       /* holds secret values and the CA key: cleared before it is freed */
	size_t len, off;
	char reply[GW_REPLY_MAX];
	size_t got;
	uint64_t generation;
	gw_push_cb cb;
	void *arg;
};

static void op_free(struct push_op *op)
{
	if (op->ev)
		event_free(op->ev);
	if (op->fd >= 0)
		close(op->fd);
	if (op->line) {
		explicit_bzero(op->line, op->len);
		free(op->line);
	}
	free(op);
}

const char *gw_binary(void)
{
	static char path[PATH_MAX];

	return proc_sibling_binary("SPACE_GW", GW_NAME, path);
}

static void pid_file(const char *run_dir, char out[PATH_MAX])
{
	snprintf(out, PATH_MAX, "%s/gw.pid", run_dir);
}

static bool comm_is_gw(pid_t pid)
{
	char path[64], comm[32] = "";

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, comm, sizeof(comm) - 1);
	comm[n > 0 ? n : 0] = '\0';
	comm[strcspn(comm, "\n")] = '\0';
	return strcmp(comm, GW_NAME) == 0;
}

/* The gateway gw.pid names, if it still is the one of sandbox id: its pidfd (opened first,
 * then checked, so the pid cannot be reused under us), else -1. */
static int find_live(const char *run_dir, const char *id, pid_t *pid, uint64_t *start)
{
	char path[PATH_MAX], buf[64] = "";
	unsigned long long st = 0;
	int p = 0;

	pid_file(run_dir, path);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	if (sscanf(buf, "%d %llu", &p, &st) != 2 || p <= 1)
		return -1;
	int pidfd = proc_pidfd_open(p);
	if (pidfd < 0)
		return -1;
	if (proc_start_time(p) != st || !comm_is_gw(p) || !proc_cmdline_has(p, "--sandbox", id)) {
		close(pidfd);
		return -1;
	}
	*pid = p;
	*start = st;
	return pidfd;
}

/* "space-<tag>-gw": a scope of its own beside the VMs' (whose orphan sweep keeps only
 * sandboxes with a VM), one leaf per sandbox. */
static void cg_scope(const struct spaced *d, char out[64])
{
	snprintf(out, 64, "%s-gw", d->cgroup_scope);
}

/* The leaf of the sandbox's gateway, made or reused. */
static int cg_make(struct gw *g, struct vm_cgroup *cg, space_err *err)
{
	struct cgroup_limits l = {
		.memory_bytes = ((int64_t)g->d->cfg.egress_max_buffer_mib + GW_MEMORY_BASE_MIB +
				 GW_MEMORY_SANITIZER_MIB) << 20,
		.cpu_quota_us = CGROUP_CPU_PERIOD_US, /* one thread: one core */
		.pids_max = GW_PIDS_MAX,
	};
	char scope[64];

	cg_scope(g->d, scope);
	if (cgroup_create(scope, g->id, &l, cg, err) < 0)
		return err_wrap(err, "the gateway's cgroup");
	return 0;
}

/* Removes the leaf of sandbox id's gateway (gone by now; a busy leaf stays for the sweep), unless
 * a gateway object of the sandbox other than except lives: it joins the leaf on its own. */
static void cg_remove(const struct spaced *d, const char *id, const struct gw *except)
{
	struct vm_cgroup cg;
	char scope[64];
	space_err e = { 0 };

	cg_scope(d, scope);
	if (live_has(id, except))
		return; /* a newer gateway of the sandbox has (or is about to join) the leaf */
	if (geteuid() == 0 && cgroup_paths(scope, id, &cg, &e) == 0)
		cgroup_remove(&cg, NULL);
}

int gw_cgroup_sweep(const struct spaced *d, bool (*keep)(const char *sb_id, void *arg), void *arg)
{
	char scope[64];

	cg_scope(d, scope);
	return geteuid() == 0 ? cgroup_clean_orphans(scope, keep, arg) : 0;
}

static void on_exit_ev(evutil_socket_t fd, short what, void *arg)
{
	struct gw *g = arg;
	char why[96] = "it ended";
	int status;

	(void)fd;
	(void)what;
	if (g->child && waitpid(g->pid, &status, WNOHANG) == g->pid)
		proc_status_text(status, why, sizeof(why));
	log_warn("sandbox %s: gateway pid %d is gone (%s)", g->id, (int)g->pid, why);
	cg_remove(g->d, g->id, g);
	event_del(g->exit_ev);
	if (g->exited)
		g->exited(g, why, g->arg); /* may free g */
}

static struct gw *gw_new(struct spaced *d, const struct gw_spec *spec)
{
	struct gw *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->d = d;
	g->pidfd = -1;
	snprintf(g->id, sizeof(g->id), "%s", spec->id);
	snprintf(g->run_dir, sizeof(g->run_dir), "%s", spec->run_dir);
	snprintf(g->sock, sizeof(g->sock), "%s/gw.sock", spec->sock_dir);
	g->live_next = live;
	live = g;
	return g;
}

static int mkdir_owned(const char *path, mode_t mode, uid_t uid, gid_t gid, space_err *err)
{
	struct stat st;

	if (mkdir(path, mode) < 0 && errno != EEXIST)
		return err_sys(err, errno, "creating %s", path);
	if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return err_set(err, EEXIST, "%s is not a directory", path);
	if ((st.st_uid != uid || st.st_gid != gid) && lchown(path, uid, gid) < 0)
		return err_sys(err, errno, "chown %s", path);
	if ((st.st_mode & 07777) != mode && chmod(path, mode) < 0)
		return err_sys(err, errno, "chmod %s", path);
	return 0;
}

/* posix_spawn, not fork: the child shares our memory until it execs (vfork), so starting
 * a gateway costs no copy of the daemon's page tables (a fork of a large daemon takes tens
 * of ms of the loop, and every create starts one). The control socket becomes fd 3, the log
 * stdout and stderr; its own session, like QEMU, so it outlives the daemon and a Ctrl-C;
 * signals at their defaults. */
/* The gateway's environment: gw_env_keep's variables the daemon has, nothing else. The
 * strings are the daemon's own (environ), valid until it changes them. */
static void gw_envp(char *envp[], size_t cap)
{
	size_t n = 0;

	for (size_t i = 0; i < sizeof(gw_env_keep) / sizeof(gw_env_keep[0]) && n + 1 < cap; i++) {
		size_t len = strlen(gw_env_keep[i]);

		for (char **e = environ; *e; e++)
			if (strncmp(*e, gw_env_keep[i], len) == 0 && (*e)[len] == '=') {
				envp[n++] = *e;
				break;
			}
	}
	envp[n] = NULL;
}

static int spawn_gw(char *const argv[], int lfd, int log_fd, pid_t *pid, int *pidfd, space_err *err)
{
	char *envp[sizeof(gw_env_keep) / sizeof(gw_env_keep[0]) + 1];

	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, all;
	int rc;

	/* adddup2 onto itself would leave close-on-exec set: the socket goes above 3 first. */
	_cleanup_close_ int ctl = fcntl(lfd, F_DUPFD_CLOEXEC, 10);
	if (ctl < 0)
		return err_sys(err, errno, "dup");
	sigemptyset(&none);
	sigfillset(&all);
	if (posix_spawn_file_actions_init(&fa) != 0)
		return err_set(err, ENOMEM, "out of memory");
	if (posix_spawnattr_init(&at) != 0) {
		posix_spawn_file_actions_destroy(&fa);
		return err_set(err, ENOMEM, "out of memory");
	}
	rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	rc = rc ? rc : posix_spawn_file_actions_adddup2(&fa, log_fd, 1);
	rc = rc ? rc : posix_spawn_file_actions_adddup2(&fa, log_fd, 2);
	rc = rc ? rc : posix_spawn_file_actions_adddup2(&fa, ctl, 3);
	/* Nothing else of ours: many of the daemon's descriptors are not close-on-exec (an
	 * agent connection a gateway kept open would keep QEMU's one-client port from ever
	 * accepting the next daemon's; the state dir's lock would keep it from starting). */
	rc = rc ? rc : posix_spawn_file_actions_addclosefrom_np(&fa, 4);
	rc = rc ? rc : posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
							POSIX_SPAWN_SETSIGDEF);
	rc = rc ? rc : posix_spawnattr_setsigmask(&at, &none);
	rc = rc ? rc : posix_spawnattr_setsigdefault(&at, &all);
	gw_envp(envp, sizeof(envp) / sizeof(envp[0]));
	rc = rc ? rc : posix_spawn(pid, argv[0], &fa, &at, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	if (rc != 0)
		return err_sys(err, rc, "spawning %s", argv[0]);
	*pidfd = proc_pidfd_open(*pid);
	if (*pidfd < 0) {
		int e = errno;
		kill(*pid, SIGKILL);
		waitpid(*pid, NULL, 0);
		return err_sys(err, e, "pidfd_open");
	}
	return 0;
}

static int spawn_args(struct gw *g, const struct gw_spec *spec, const char *audit, const struct vm_cgroup *cg,
		      struct strv *a)
{
	const struct config *cfg = &g->d->cfg;

	strv_add(a, gw_binary());
	strv_add(a, "--sandbox");
	strv_add(a, spec->id);
	strv_add(a, "--netns");
	strv_add(a, spec->netns);
	strv_add(a, "--control-fd");
	strv_add(a, "3");
	strv_add(a, "--audit-dir");
	strv_add(a, audit);
	if (spec->uid) {
		strv_add(a, "--uid");
		strv_addf(a, "%u", (unsigned)spec->uid);
		strv_add(a, "--gid");
		strv_addf(a, "%u", (unsigned)spec->gid);
	}
	if (cfg->dns_upstream[0]) {
		strv_add(a, "--dns-upstream");
		strv_add(a, cfg->dns_upstream);
	}
	if (cfg->egress_ca_file[0]) {
		strv_add(a, "--upstream-ca");
		strv_add(a, cfg->egress_ca_file);
	}
	if (cfg->egress_refuse[0]) {
		strv_add(a, "--refuse");
		strv_add(a, cfg->egress_refuse);
	}
	strv_add(a, "--max-conns");
	strv_addf(a, "%d", cfg->egress_max_conns);
	strv_add(a, "--max-buffer");
	strv_addf(a, "%lld", (long long)cfg->egress_max_buffer_mib << 20);
	/* It joins its leaf itself, first thing (a move costs ms: not on our loop). */
	for (int i = 0; i < cg->n; i++) {
		strv_add(a, "--cgroup-procs");
		strv_addf(a, "%s/cgroup.procs", cg->dir[i]);
	}
	return a->failed ? -1 : 0;
}

static int spawn(struct gw *g, const struct gw_spec *spec, space_err *err)
{
	char audit[PATH_MAX], log_path[PATH_MAX], path[PATH_MAX], tmp[PATH_MAX + 8], line[64];
	struct strv a = { 0 };
	struct vm_cgroup cg = { 0 };
	int lfd_raw;

	if (mkdir(spec->sock_dir, 0700) < 0 && errno != EEXIST)
		return err_sys(err, errno, "creating %s", spec->sock_dir);
	snprintf(audit, sizeof(audit), "%s/egress", spec->run_dir);
	if (mkdir_owned(audit, 0700, spec->uid, spec->gid, err) < 0)
		return -1;
	if (unix_listen(g->sock, &lfd_raw, err) < 0)
		return -1;
	_cleanup_close_ int lfd = lfd_raw;
	snprintf(log_path, sizeof(log_path), "%s/gw.log", spec->run_dir);
	_cleanup_close_ int log_fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (log_fd < 0)
		return err_sys(err, errno, "open %s", log_path);
	dprintf(log_fd, "--- space-gw for %s starting\n", spec->id);

	/* Its memory and tasks count against a leaf of its own (with root only: like the VMs') */
	if (geteuid() == 0 && cg_make(g, &cg, err) < 0)
		return -1;
	if (spawn_args(g, spec, audit, &cg, &a) < 0) {
		strv_free(&a);
		return err_set(err, ENOMEM, "out of memory");
	}
	int rc = spawn_gw(a.v, lfd, log_fd, &g->pid, &g->pidfd, err);
	strv_free(&a);
	if (rc < 0) {
		cgroup_remove(&cg, NULL);
		return err_wrap(err, "starting the gateway");
	}
	g->child = true;
	g->start = proc_start_time(g->pid);
	/* Written whole or not at all: a restart reads it to adopt the process. */
	pid_file(spec->run_dir, path);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int n = snprintf(line, sizeof(line), "%d %llu\n", (int)g->pid, (unsigned long long)g->start);
	_cleanup_close_ int pf = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (pf < 0 || write(pf, line, (size_t)n) != n || rename(tmp, path) < 0) {
		int e = errno;
		proc_kill_reap(g->pid, g->pidfd);
		close(g->pidfd);
		g->pidfd = -1;
		cgroup_remove(&cg, NULL);
		unlink(tmp);
		return err_sys(err, e, "writing %s", path);
	}
	log_info("sandbox %s: gateway pid %d started%s", spec->id, (int)g->pid, spec->uid ? "" : " (as root)");
	return 0;
}

int gw_start(struct spaced *d, const struct gw_spec *spec, gw_exit_cb exited, void *arg, struct gw **out,
	     space_err *err)
{
	struct gw *g = gw_new(d, spec);

	if (!g)
		return err_set(err, ENOMEM, "out of memory");
	g->exited = exited;
	g->arg = arg;
	g->pidfd = find_live(spec->run_dir, spec->id, &g->pid, &g->start);
	if (g->pidfd >= 0) {
		log_info("sandbox %s: adopted gateway pid %d", spec->id, (int)g->pid);
	} else if (spawn(g, spec, err) < 0) {
		live_del(g);
		free(g);
		return -1;
	}
	g->exit_ev = event_new(d->base, g->pidfd, EV_READ, on_exit_ev, g);
	if (!g->exit_ev || event_add(g->exit_ev, NULL) < 0) {
		gw_stop(g);
		return err_set(err, ENOMEM, "watching the gateway: out of memory");
	}
	*out = g;
	return 0;
}

int gw_pid(const struct gw *g)
{
	return g ? (int)g->pid : 0;
}

/* Blocking, bounded: the gateway answers a local socket in well under a millisecond
 * unless it is wedged, and the caller must know the policy took before it answers. */
static int exchange(int fd, const char *req, size_t len, char *reply, size_t cap, int timeout_ms,
		    space_err *err)
{
	int64_t deadline = mono_ms() + timeout_ms;
	size_t off = 0, got = 0;

	while (off < len || !memchr(reply, '\n', got)) {
		int left = (int)(deadline - mono_ms());
		if (left <= 0)
			return err_set(err, ETIMEDOUT, "the gateway did not answer within %d ms", timeout_ms);
		struct pollfd p = { .fd = fd, .events = off < len ? POLLOUT : POLLIN };
		if (poll(&p, 1, left) < 0) {
			if (errno == EINTR)
				continue;
			return err_sys(err, errno, "poll");
		}
		if (off < len && (p.revents & (POLLOUT | POLLERR | POLLHUP))) {
			ssize_t n = send(fd, req + off, len - off, MSG_NOSIGNAL);
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				return err_sys(err, errno, "sending to the gateway");
			if (n > 0)
				off += (size_t)n;
		} else if (off == len && (p.revents & (POLLIN | POLLERR | POLLHUP))) {
			if (got + 1 >= cap)
				return err_set(err, EPROTO, "the gateway's answer is too long");
			ssize_t n = recv(fd, reply + got, cap - 1 - got, 0);
			if (n == 0)
				return err_set(err, ECONNRESET, "the gateway closed the connection without answering");
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				return err_sys(err, errno, "reading the gateway's answer");
			if (n > 0)
				got += (size_t)n;
			reply[got] = '\0';
		}
	}
	return 0;
}

/* The request line: the policy (with inject values) and the CA, newline-terminated. NULL
 * on failure. The caller clears it before freeing it. */
static char *push_line(uint64_t generation, const json_t *policy, const char *ca_cert, const char *ca_key,
		       size_t *len, space_err *err)
{
	json_t *msg = json_pack("{s:s,s:I,s:O,s:{s:s,s:s}}", "op", "policy", "generation", (json_int_t)generation,
				"policy", policy, "ca", "cert", ca_cert ? ca_cert : "", "key", ca_key ? ca_key : "");
	if (!msg) {
		err_set(err, ENOMEM, "building the gateway's policy: out of memory");
		return NULL;
	}
	char *text = json_dumps(msg, JSON_COMPACT);
	json_decref(msg);
	if (!text) {
		err_set(err, ENOMEM, "building the gateway's policy: out of memory");
		return NULL;
	}
	*len = strlen(text);
	char *line = realloc(text, *len + 2);
	if (!line) {
		explicit_bzero(text, *len);
		free(text);
		err_set(err, ENOMEM, "out of memory");
		return NULL;
	}
	line[(*len)++] = '\n';
	line[*len] = '\0';
	return line;
}

/* Is this answer the acknowledgement of `generation`? */
static int check_reply(struct gw *g, char *reply, uint64_t generation, space_err *err)
{
	json_error_t jerr;
	int rc;

	reply[strcspn(reply, "\n")] = '\0';
	json_t *ans = json_loads(reply, 0, &jerr);
	json_t *ok = json_object_get(ans, "ok");
	if (!json_is_true(ok)) {
		const char *why = json_string_value(json_object_get(ans, "error"));
		rc = err_set(err, EIO, "the gateway of %s refused the policy: %.200s", g->id,
			     why ? why : ans ? "no reason given" : "unparsable answer");
	} else if (json_integer_value(json_object_get(ans, "generation")) != (json_int_t)generation) {
		rc = err_set(err, EIO, "the gateway of %s acknowledged another generation", g->id);
	} else {
		g->pushed = true;
		rc = 0;
	}
	json_decref(ans);
	return rc;
}

int gw_push(struct gw *g, uint64_t generation, const json_t *policy, const char *ca_cert, const char *ca_key,
	    space_err *err)
{
	char reply[GW_REPLY_MAX];
	size_t len;
	int fd_raw, rc = -1;

	memset(reply, 0, sizeof(reply));
	char *line = push_line(generation, policy, ca_cert, ca_key, &len, err);
	if (!line)
		return -1;
	if (unix_connect(g->sock, &fd_raw, err) == 0) {
		_cleanup_close_ int fd = fd_raw;
		rc = exchange(fd, line, len, reply, sizeof(reply),
			      g->pushed ? GW_PUSH_TIMEOUT_MS : GW_FIRST_PUSH_TIMEOUT_MS, err);
	}
	explicit_bzero(line, len);
	free(line);
	if (rc < 0)
		return err_wrap(err, "pushing the policy to the gateway of %s", g->id);
	return check_reply(g, reply, generation, err);
}

static void push_finish(struct push_op *op, space_err *err)
{
	struct gw *g = op->g;
	gw_push_cb cb = op->cb;
	void *arg = op->arg;

	if (!err->code)
		check_reply(g, op->reply, op->generation, err);
	else
		err_wrap(err, "pushing the policy to the gateway of %s", g->id);
	g->op = NULL;
	op_free(op);
	cb(g, err->code ? err : NULL, arg); /* last: it may stop (free) g */
}

static void on_push_io(evutil_socket_t fd, short what, void *arg)
{
	struct push_op *op = arg;
	space_err err = { 0 };

	if (what & EV_TIMEOUT) {
		err_set(&err, ETIMEDOUT, "the gateway did not answer within %d ms", GW_FIRST_PUSH_TIMEOUT_MS);
		push_finish(op, &err);
		return;
	}
	if (op->off < op->len) {
		ssize_t n = send(fd, op->line + op->off, op->len - op->off, MSG_NOSIGNAL);
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			err_sys(&err, errno, "sending to the gateway");
			push_finish(op, &err);
		} else if (n > 0 && (op->off += (size_t)n) == op->len) {
			struct timeval tv = { GW_FIRST_PUSH_TIMEOUT_MS / 1000, 0 };
			/* All out: only the answer is waited for now (a write event would spin). */
			event_del(op->ev);
			event_assign(op->ev, op->g->d->base, fd, EV_READ | EV_PERSIST, on_push_io, op);
			event_add(op->ev, &tv);
		}
		return; /* the answer is read once everything went out */
	}
	if (op->got + 1 >= sizeof(op->reply)) {
		err_set(&err, EPROTO, "the gateway's answer is too long");
		push_finish(op, &err);
		return;
	}
	ssize_t n = recv(fd, op->reply + op->got, sizeof(op->reply) - 1 - op->got, 0);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		if (n == 0)
			err_set(&err, ECONNRESET, "the gateway closed the connection without answering");
		else
			err_sys(&err, errno, "reading the gateway's answer");
		push_finish(op, &err);
		return;
	}
	if (n > 0) {
		op->got += (size_t)n;
		op->reply[op->got] = '\0';
		if (memchr(op->reply, '\n', op->got))
			push_finish(op, &err);
	}
}

int gw_push_async(struct gw *g, uint64_t generation, const json_t *policy, const char *ca_cert,
		  const char *ca_key, gw_push_cb cb, void *arg, space_err *err)
{
	struct timeval tv = { GW_FIRST_PUSH_TIMEOUT_MS / 1000, (GW_FIRST_PUSH_TIMEOUT_MS % 1000) * 1000 };
	struct push_op *op;
	int fd;

	if (g->op)
		return err_set(err, EBUSY, "a push to the gateway of %s is under way", g->id);
	op = calloc(1, sizeof(*op));
	if (!op)
		return err_set(err, ENOMEM, "out of memory");
	op->g = g;
	op->fd = -1;
	op->generation = generation;
	op->cb = cb;
	op->arg = arg;
	op->line = push_line(generation, policy, ca_cert, ca_key, &op->len, err);
	if (!op->line || unix_connect(g->sock, &fd, err) < 0) {
		op_free(op);
		return err_wrap(err, "pushing the policy to the gateway of %s", g->id);
	}
	op->fd = fd;
	/* The daemon made the listening socket, so the connect is queued even before the
	 * gateway runs; the line goes out and the answer comes back from the loop (the
	 * socket is small: the whole line fits its buffer, a persistent write event would
	 * only spin while waiting for the answer). */
	int fl = fcntl(fd, F_GETFL);
	op->ev = fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? NULL
		 : event_new(g->d->base, fd, EV_READ | EV_PERSIST, on_push_io, op);
	if (!op->ev || event_add(op->ev, &tv) < 0) {
		op_free(op);
		return err_set(err, ENOMEM, "watching the gateway's answer: out of memory");
	}
	while (op->off < op->len) {
		ssize_t n = send(fd, op->line + op->off, op->len - op->off, MSG_NOSIGNAL);
		if (n > 0) {
			op->off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		/* Full (a policy near the size limit): the rest goes out when it drains. */
		if (n < 0 && errno == EAGAIN) {
			event_del(op->ev);
			event_assign(op->ev, g->d->base, fd, EV_READ | EV_WRITE | EV_PERSIST, on_push_io, op);
			event_add(op->ev, &tv);
			break;
		}
		int e = errno;
		op_free(op);
		return err_sys(err, e, "sending to the gateway of %s", g->id);
	}
	g->op = op;
	return 0;
}

bool gw_push_pending(const struct gw *g)
{
	return g && g->op;
}

/* Bounded wait for a pidfd to become readable (the process ended). */
static bool wait_gone(int pidfd, int ms)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	int64_t deadline = mono_ms() + ms;

	for (;;) {
		int left = (int)(deadline - mono_ms());
		if (left < 0)
			left = 0;
		int r = poll(&p, 1, left);
		if (r > 0)
			return true;
		if (r == 0 || errno != EINTR)
			return false;
	}
}

static void kill_pidfd(pid_t pid, int pidfd, bool child, const char *id)
{
	int status;

	proc_pidfd_signal(pidfd, SIGTERM);
	/* It exits on SIGTERM at once; a wedged one gets SIGKILL. */
	if (!wait_gone(pidfd, 300)) {
		proc_pidfd_signal(pidfd, SIGKILL);
		if (!wait_gone(pidfd, 2000))
			log_warn("sandbox %s: gateway pid %d did not end within 2 s of SIGKILL", id, (int)pid);
	}
	if (child)
		waitpid(pid, &status, WNOHANG);
}

/* A gateway being stopped from the loop: SIGTERM is sent and its end awaited from the loop,
 * SIGKILL after 300 ms. Waiting in the loop instead (as gw_kill_stale does at start-up) costs
 * every client 60-90 ms per gateway on a loaded machine: a burst of VM exits stalled the
 * control plane for 200-600 ms. Reapers still waiting at shutdown are finished synchronously. */
struct gw_reaper {
	const struct spaced *d;
	pid_t pid;
	int pidfd;
	bool child, killed;
	char id[ID_LEN];
	struct event *ev;
	struct gw_reaper *next, **pprev;
};
static struct gw_reaper *reapers;

static void reaper_free(struct gw_reaper *r)
{
	*r->pprev = r->next;
	if (r->next)
		r->next->pprev = r->pprev;
	event_free(r->ev);
	close(r->pidfd);
	free(r);
}

static void reaper_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gw_reaper *r = arg;
	struct timeval tv = { .tv_sec = 2 };
	int status;

	(void)fd;
	if ((what & EV_TIMEOUT) && !r->killed) {
		proc_pidfd_signal(r->pidfd, SIGKILL);
		r->killed = true;
		event_add(r->ev, &tv);
		return;
	}
	if (what & EV_TIMEOUT)
		log_warn("sandbox %s: gateway pid %d did not end within 2 s of SIGKILL", r->id, (int)r->pid);
	else
		log_info("sandbox %s: gateway pid %d stopped", r->id, (int)r->pid);
	if (r->child)
		waitpid(r->pid, &status, WNOHANG);
	cg_remove(r->d, r->id, NULL);
	reaper_free(r);
}

/* Takes pidfd. false: it could not be watched (the caller waits instead). */
static bool reap_later(struct spaced *d, pid_t pid, int pidfd, bool child, const char *id)
{
	struct gw_reaper *r = calloc(1, sizeof(*r));
	struct timeval tv = { .tv_usec = 300 * 1000 };

	if (!r || !(r->ev = event_new(d->base, pidfd, EV_READ, reaper_cb, r))) {
		free(r);
		return false;
	}
	r->d = d;
	r->pid = pid;
	r->pidfd = pidfd;
	r->child = child;
	snprintf(r->id, sizeof(r->id), "%s", id);
	r->next = reapers;
	if (reapers)
		reapers->pprev = &r->next;
	r->pprev = &reapers;
	reapers = r;
	proc_pidfd_signal(pidfd, SIGTERM);
	event_add(r->ev, &tv);
	return true;
}

void gw_reapers_finish(void)
{
	while (reapers) {
		struct gw_reaper *r = reapers;

		kill_pidfd(r->pid, r->pidfd, r->child, r->id);
		cg_remove(r->d, r->id, NULL);
		reaper_free(r);
	}
}

void gw_stop(struct gw *g)
{
	char path[PATH_MAX];

	if (!g)
		return;
	live_del(g);
	if (g->op)
		op_free(g->op); /* its callback is not called */
	if (g->exit_ev)
		event_free(g->exit_ev);
	if (g->pidfd >= 0 && !reap_later(g->d, g->pid, g->pidfd, g->child, g->id)) {
		kill_pidfd(g->pid, g->pidfd, g->child, g->id);
		close(g->pidfd);
		cg_remove(g->d, g->id, NULL);
		log_info("sandbox %s: gateway pid %d stopped", g->id, (int)g->pid);
	}
	pid_file(g->run_dir, path);
	unlink(path);
	unlink(g->sock);
	free(g);
}

void gw_free(struct gw *g)
{
	if (!g)
		return;
	live_del(g);
	if (g->op)
		op_free(g->op);
	if (g->exit_ev)
		event_free(g->exit_ev);
	if (g->pidfd >= 0)
		close(g->pidfd);
	free(g);
}

void gw_kill_stale(const struct spaced *d, const char *run_dir, const char *sb_id)
{
	char path[PATH_MAX];
	pid_t pid;
	uint64_t start;
	int pidfd = find_live(run_dir, sb_id, &pid, &start);

	if (pidfd >= 0) {
		kill_pidfd(pid, pidfd, false, sb_id);
		close(pidfd);
		log_info("sandbox %s: stopped its unwatched gateway pid %d", sb_id, (int)pid);
	}
	cg_remove(d, sb_id, NULL);
	pid_file(run_dir, path);
	unlink(path);
}

/* The value after `flag` in a NUL-separated command line, or NULL. */
static const char *arg_after(const char *buf, size_t len, const char *flag)
{
	for (size_t i = 0; i < len;) {
		const char *a = buf + i;
		size_t n = strnlen(a, len - i);
		if (n == len - i)
			return NULL; /* the last argument, cut off */
		i += n + 1;
		if (strcmp(a, flag) == 0 && i < len && strnlen(buf + i, len - i) < len - i)
			return buf + i;
	}
	return NULL;
}

int gw_sweep(const char *ns_prefix, bool (*keep)(const char *sb_id, void *arg), void *arg)
{
	_cleanup_closedir_ DIR *proc = opendir("/proc");
	struct dirent *e;
	int n = 0;

	if (!proc)
		return 0;
	while ((e = readdir(proc))) {
		char path[64], buf[4096];
		pid_t pid = (pid_t)atoi(e->d_name);

		if (pid <= 1 || !comm_is_gw(pid))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
		_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t len = fd < 0 ? -1 : read(fd, buf, sizeof(buf));
		if (len <= 0)
			continue;
		const char *ns = arg_after(buf, (size_t)len, "--netns");
		const char *id = arg_after(buf, (size_t)len, "--sandbox");
		if (!ns || !id || strncmp(ns, ns_prefix, strlen(ns_prefix)) != 0 || keep(id, arg))
			continue;
		int pidfd = proc_pidfd_open(pid);
		if (pidfd < 0)
			continue;
		/* The pid is pinned now: is it still a gateway? */
		if (comm_is_gw(pid)) {
			kill_pidfd(pid, pidfd, false, id);
			log_info("sandbox %s: stopped its gateway pid %d (no VM of it runs)", id, (int)pid);
			n++;
		}
		close(pidfd);
	}
	return n;
}
