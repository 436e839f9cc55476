/* test_agent_kinds.c -- channel kinds (src/agent/kinds.c): H_OPEN / H_RESIZE / PTY payload
 * parsing, the kind table, TERM for PTY children, and the child side (spawn.c) of a channel
 * that runs a function instead of exec (file and watch kinds) or sits on a terminal. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/fsops.h"
#include "agent/users.h"
#include "harness.h"

static void open_parse(void)
{
	const uint8_t p[] = { 2, 0, 0, 0, 0xaa, 0xbb };
	const uint8_t *rest = NULL;
	uint32_t kind = 0;
	size_t n = 99, i;

	EXPECT_EQ(agent_open_parse(p, sizeof(p), &kind, &rest, &n), PROTO_OK);
	EXPECT_EQ(kind, PROTO_KIND_PTY);
	EXPECT(rest == p + 4);
	EXPECT_EQ(n, 2);
	EXPECT_EQ(agent_open_parse(p, 4, &kind, &rest, &n), PROTO_OK);
	EXPECT_EQ(n, 0);
	for (i = 0; i < 4; i++)
		EXPECT_EQ(agent_open_parse(p, i, &kind, &rest, &n), PROTO_E_TRUNCATED);
	/* Any kind number parses; the table decides. */
	{
		const uint8_t big[] = { 0xff, 0xff, 0xff, 0xff };

		EXPECT_EQ(agent_open_parse(big, 4, &kind, &rest, &n), PROTO_OK);
		EXPECT_EQ(kind, 0xffffffffu);
	}
}

static void resize_parse(void)
{
	/* rows 24, cols 80; the limits; out of range; lengths. */
	const uint8_t ok[] = { 24, 0, 80, 0 }, lo[] = { 1, 0, 1, 0 };
	const uint8_t hi[] = { 0xe8, 0x03, 0xe8, 0x03 };   /* 1000, 1000 */
	const uint8_t over[] = { 0xe9, 0x03, 1, 0 };        /* 1001 rows */
	const uint8_t over_c[] = { 1, 0, 0xff, 0xff };      /* 65535 cols */
	const uint8_t zero_r[] = { 0, 0, 80, 0 }, zero_c[] = { 24, 0, 0, 0 };
	const uint8_t longer[] = { 24, 0, 80, 0, 0 };
	uint16_t r = 0, c = 0;
	size_t i;

	EXPECT_EQ(agent_resize_parse(ok, 4, &r, &c), PROTO_OK);
	EXPECT_EQ(r, 24);
	EXPECT_EQ(c, 80);
	EXPECT_EQ(agent_resize_parse(lo, 4, &r, &c), PROTO_OK);
	EXPECT_EQ(agent_resize_parse(hi, 4, &r, &c), PROTO_OK);
	EXPECT_EQ(r, PROTO_PTY_MAX_DIM);
	EXPECT_EQ(c, PROTO_PTY_MAX_DIM);
	EXPECT_EQ(agent_resize_parse(over, 4, &r, &c), PROTO_E_BAD_VALUE);
	EXPECT_EQ(agent_resize_parse(over_c, 4, &r, &c), PROTO_E_BAD_VALUE);
	EXPECT_EQ(agent_resize_parse(zero_r, 4, &r, &c), PROTO_E_BAD_VALUE);
	EXPECT_EQ(agent_resize_parse(zero_c, 4, &r, &c), PROTO_E_BAD_VALUE);
	EXPECT_EQ(agent_resize_parse(longer, sizeof(longer), &r, &c), PROTO_E_TRAILING);
	for (i = 0; i < 4; i++)
		EXPECT_EQ(agent_resize_parse(ok, i, &r, &c), PROTO_E_TRUNCATED);
}

static void pty_parse(void)
{
	struct proto_exec in = { .user = "", .cwd = "", .argc = 1, .argv = { "sh" } }, *out;
	struct proto_wr w;
	uint8_t buf[256];
	const uint8_t *rest = NULL;
	uint16_t r = 0, c = 0;
	size_t n = 0;

	proto_wr_init(&w);
	proto_wr_bytes(&w, (const uint8_t[]){ 50, 0, 0x84, 0 }, 4); /* 50 x 132 */
	EXPECT_EQ(proto_exec_encode(&w, &in), 0);
	EXPECT(!w.bad && w.len < sizeof(buf));
	memcpy(buf, w.buf, w.len);
	EXPECT_EQ(agent_pty_parse(buf, w.len, &r, &c, &rest, &n), PROTO_OK);
	EXPECT_EQ(r, 50);
	EXPECT_EQ(c, 132);
	EXPECT(rest == buf + 4);
	EXPECT_EQ(n, w.len - 4);
	out = malloc(sizeof(*out));
	EXPECT(out && proto_exec_decode(rest, n, out) == PROTO_OK);
	if (out)
		EXPECT(out->argc == 1 && strcmp(out->argv[0], "sh") == 0);
	free(out);
	/* The size alone parses (the exec payload is checked by its decoder). */
	EXPECT_EQ(agent_pty_parse(buf, 4, &r, &c, &rest, &n), PROTO_OK);
	EXPECT_EQ(n, 0);
	EXPECT_EQ(agent_pty_parse(buf, 3, &r, &c, &rest, &n), PROTO_E_TRUNCATED);
	buf[0] = 0;
	buf[1] = 0;
	EXPECT_EQ(agent_pty_parse(buf, w.len, &r, &c, &rest, &n), PROTO_E_BAD_VALUE);
	proto_wr_free(&w);
}

static void kind_table(void)
{
	static const struct { uint32_t kind; const char *name; } want[] = {
		{ PROTO_KIND_PROC, "process" },
		{ PROTO_KIND_PTY, "pty" },
		{ PROTO_KIND_FILE, "file" },
		{ PROTO_KIND_WATCH, "watch" },
	};
	const uint32_t unknown[] = { 0, PROTO_KIND_MAX + 1, 99, 0x80000001u, 0xffffffffu };
	size_t i;

	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct agent_kind *k = agent_kind_find(want[i].kind);

		EXPECT(k != NULL);
		if (!k)
			continue;
		EXPECT_EQ(k->kind, want[i].kind);
		EXPECT(strcmp(k->name, want[i].name) == 0);
		EXPECT(k->start != NULL);
	}
	for (i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++)
		EXPECT(agent_kind_find(unknown[i]) == NULL);
	/* Every kind up to PROTO_KIND_MAX has an entry. */
	for (i = 1; i <= PROTO_KIND_MAX; i++)
		EXPECT(agent_kind_find((uint32_t)i) != NULL);
}

static const char *env_get(char **env, const char *key)
{
	size_t kl = strlen(key);

	for (; *env; env++)
		if (strncmp(*env, key, kl) == 0 && (*env)[kl] == '=')
			return *env + kl + 1;
	return NULL;
}

static void pty_term(void)
{
	struct agent_user u = { .name = "alice", .home = "/home/alice" };
	const char *none[] = { "A=1", NULL }, *given[] = { "TERM=dumb", NULL };
	char **env;

	env = agent_build_env(none, &u, false, AGENT_PTY_TERM);
	EXPECT(env && env_get(env, "TERM") && strcmp(env_get(env, "TERM"), "xterm-256color") == 0);
	free(env);
	env = agent_build_env(given, &u, true, AGENT_PTY_TERM);
	EXPECT(env && strcmp(env_get(env, "TERM"), "dumb") == 0);
	free(env);
	/* Not a terminal: no TERM invented. */
	env = agent_build_env(none, &u, true, NULL);
	EXPECT(env && env_get(env, "TERM") == NULL);
	free(env);
}

/* ---- the child side: agent_child_start in a fork, as proc.c does it ---- */

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory's own fd */
}

/* A body in place of fsop_main: reports who and where it runs and what it holds. */
static int body_report(int argc, char *const argv[])
{
	char cwd[256], buf[64], line[512];
	ssize_t n;
	size_t in = 0;
	int len;

	/* stdin is the pipe: read it to the end. */
	while ((n = read(0, buf, sizeof(buf))) > 0)
		in += (size_t)n;
	if (!getcwd(cwd, sizeof(cwd)))
		strcpy(cwd, "?");
	len = snprintf(line, sizeof(line), "argc=%d argv0=%s argv1=%s uid=%u gid=%u cwd=%s fds=%d in=%zu\n",
		       argc, argv[0], argc > 1 ? argv[1] : "-", (unsigned)getuid(),
		       (unsigned)getgid(), cwd, count_fds(), in);
	if (write(1, line, (size_t)len) < 0)
		return 1;
	if (write(2, "err\n", 4) < 0)
		return 1;
	return 42;
}

/* On a terminal: session leader, controlling tty, foreground group, window size. */
static int body_tty(int argc, char *const argv[])
{
	struct winsize ws = { 0 };
	char line[256];
	int len;

	(void)argc;
	(void)argv;
	ioctl(0, TIOCGWINSZ, &ws);
	len = snprintf(line, sizeof(line), "tty=%d%d%d leader=%d fg=%d size=%ux%u\n", isatty(0),
		       isatty(1), isatty(2), getsid(0) == getpid(), tcgetpgrp(0) == getpgrp(),
		       ws.ws_row, ws.ws_col);
	if (write(1, line, (size_t)len) < 0)
		return 1;
	return 0;
}

static size_t read_all(int fd, char *buf, size_t cap)
{
	size_t len = 0;
	ssize_t n;

	while (len + 1 < cap && ((n = read(fd, buf + len, cap - 1 - len)) > 0 ||
				 (n < 0 && errno == EINTR)))
		if (n > 0)
			len += (size_t)n;
	buf[len] = '\0';
	return len;
}

static struct agent *new_agent(void)
{
	struct agent *a = calloc(1, sizeof(*a));

	if (a)
		getrlimit(RLIMIT_NOFILE, &a->nofile);
	return a;
}

static size_t st_len; /* bytes the last child wrote on its status pipe (0: "started") */

/* Fork a child running body as `user` (or as ourselves); returns its wait status, the
 * status pipe's content (st_len bytes: i32 errno, message) and stdout/stderr. */
static int run_body(const char *user, const char *cwd, int (*body)(int, char *const[]),
		    const char *input, char *st, char *out, char *err)
{
	struct agent *a = new_agent();
	struct proto_exec *x = calloc(1, sizeof(*x));
	int sp[2], op[2], ep[2], ip[2], extra, status = -1;
	pid_t pid;

	if (!a || !x || pipe2(sp, O_CLOEXEC) || pipe2(op, O_CLOEXEC) || pipe2(ep, O_CLOEXEC) ||
	    pipe2(ip, O_CLOEXEC)) {
		free(a);
		free(x);
		return -1;
	}
	x->user = user;
	x->cwd = cwd;
	x->uid = getuid();
	x->gid = getgid();
	x->argc = 2;
	x->argv[0] = "stat";
	x->argv[1] = "/some/path";
	/* An fd the agent would hold (the port, another channel's pipe): not inherited. */
	extra = open("/dev/null", O_RDONLY);
	pid = fork();
	if (pid == 0) {
		struct agent_child c = { .x = x, .in = ip[0], .out = op[1], .err = ep[1],
					 .tty = -1, .status = sp[1], .body = body };

		agent_child_start(a, &c);
	}
	close(extra);
	close(sp[1]);
	close(op[1]);
	close(ep[1]);
	close(ip[0]);
	if (input && write(ip[1], input, strlen(input)) < 0)
		NOTE("write stdin: %s", strerror(errno));
	close(ip[1]);
	if (pid > 0) {
		st_len = read_all(sp[0], st, 600);
		read_all(op[0], out, 600);
		read_all(ep[0], err, 600);
		waitpid(pid, &status, 0);
	}
	close(sp[0]);
	close(op[0]);
	close(ep[0]);
	free(x);
	free(a);
	return status;
}

static void body_child(void)
{
	char st[600], out[600], err[600], want[256];
	int status;

	status = run_body("", "/tmp", body_report, "four", st, out, err);
	EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 42);
	EXPECT_EQ(st_len, 0); /* closed without a word: started */
	snprintf(want, sizeof(want), "argc=2 argv0=stat argv1=/some/path uid=%u gid=%u cwd=/tmp fds=3 in=4\n",
		 (unsigned)getuid(), (unsigned)getgid());
	EXPECT(strcmp(out, want) == 0);
	if (strcmp(out, want) != 0)
		NOTE("got: %s", out);
	EXPECT(strcmp(err, "err\n") == 0);

	/* Failures before the body come through the status pipe, as for exec. */
	status = run_body("no-such-user-xyz", "", body_report, NULL, st, out, err);
	EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 127);
	EXPECT(st_len > 4 && strstr(st + 4, "no-such-user-xyz"));
	EXPECT_EQ(strlen(out), 0);
	status = run_body("", "/nonexistent-dir-xyz", body_report, NULL, st, out, err);
	EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 127);
	EXPECT(st_len > 4 && st[0] == ENOENT && strstr(st + 4, "chdir"));

	/* As another user: the switch happens before the body (root only). */
	if (getuid() == 0) {
		status = run_body("nobody", "", body_report, "", st, out, err);
		EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 42);
		EXPECT(strstr(out, "uid=65534 ") != NULL);
		if (!strstr(out, "uid=65534 "))
			NOTE("as nobody: status %s out %s", st_len > 4 ? st + 4 : "", out);
	} else {
		NOTE("not root: user switch not tested");
	}
}

/* The temporary fsop_main (and later the real one) on a path that cannot exist. */
static void fsop_entry(void)
{
	char st[600], out[600], err[600];
	int status = run_body("", "", fsop_main, NULL, st, out, err);

	EXPECT(WIFEXITED(status));
	EXPECT_EQ(st_len, 0);
	if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
		EXPECT_EQ(strlen(out), 0);
		EXPECT(strncmp(err, "{\"errno\":", 9) == 0);
	}
}

static void tty_child(void)
{
	struct agent *a = new_agent();
	struct proto_exec *x = calloc(1, sizeof(*x));
	struct winsize ws = { .ws_row = 33, .ws_col = 101 };
	char st[600], out[600];
	int m, s, sp[2], status = -1;
	pid_t pid;

	m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (!a || !x || m < 0 || grantpt(m) || unlockpt(m) || pipe2(sp, O_CLOEXEC)) {
		NOTE("no pty here: %s", strerror(errno));
		free(a);
		free(x);
		return;
	}
	s = open(ptsname(m), O_RDWR | O_NOCTTY | O_CLOEXEC);
	EXPECT(s >= 0);
	EXPECT_EQ(ioctl(m, TIOCSWINSZ, &ws), 0);
	x->user = "";
	x->cwd = "";
	x->uid = getuid();
	x->gid = getgid();
	x->argc = 1;
	x->argv[0] = "tty";
	pid = fork();
	if (pid == 0) {
		struct agent_child c = { .x = x, .in = -1, .out = -1, .err = -1, .tty = s,
					 .status = sp[1], .body = body_tty };

		agent_child_start(a, &c);
	}
	close(s);
	close(sp[1]);
	EXPECT_EQ(read_all(sp[0], st, sizeof(st)), 0);
	/* The master reads EIO once the child (the last slave holder) is gone. */
	read_all(m, out, sizeof(out));
	waitpid(pid, &status, 0);
	EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	EXPECT(strcmp(out, "tty=111 leader=1 fg=1 size=33x101\r\n") == 0);
	if (strcmp(out, "tty=111 leader=1 fg=1 size=33x101\r\n") != 0)
		NOTE("got: %s", out);
	close(sp[0]);
	close(m);
	free(x);
	free(a);
}

int main(void)
{
	RUN(open_parse);
	RUN(resize_parse);
	RUN(pty_parse);
	RUN(kind_table);
	RUN(pty_term);
	RUN(body_child);
	RUN(fsop_entry);
	RUN(tty_child);
	return harness_done();
}
