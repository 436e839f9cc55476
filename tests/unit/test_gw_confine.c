/* test_gw_confine.c -- the gateway's seccomp allowlist (src/gateway/confine.c), installed in a
 * child: what relaying needs still works, the ways out fail with EPERM. This binary is the
 * ASan build, so it checks the allowlist with the sanitizer runtime's extras (its leak checker
 * may clone without namespaces and ptrace itself); the production gateway has fewer. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "confine.h"
#include "harness.h"

static char dir[] = "/tmp/test_gw_confine.XXXXXX";

/* "ok" or the errno's name of each probe, one per line. */
static void probes(int out)
{
	char path[sizeof(dir) + 16], line[128];
	int fd, n = 0, s;
	void *m;

#define PROBE(name, expr) do { errno = 0; long r_ = (long)(expr); \
	n = snprintf(line, sizeof(line), "%s %s\n", name, r_ >= 0 ? "ok" : strerrorname_np(errno)); \
	if (write(out, line, (size_t)n) != n) _exit(3); } while (0)

	snprintf(path, sizeof(path), "%s/audit.log", dir);
	PROBE("open-write", fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
	PROBE("write", write(fd, "x", 1));
	PROBE("open-rdwr", open(path, O_RDWR | O_CLOEXEC));
	PROBE("socket-inet", s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
	PROBE("ioctl-fionread", ioctl(s, FIONREAD, &n));
	PROBE("ioctl-other", ioctl(s, TIOCGWINSZ, line));
	PROBE("socket-unix", socket(AF_UNIX, SOCK_STREAM, 0));
	PROBE("socket-inet6", socket(AF_INET6, SOCK_DGRAM, 0));
	PROBE("socket-netlink", socket(AF_NETLINK, SOCK_RAW, 0));
	PROBE("socket-packet", socket(AF_PACKET, SOCK_RAW, 0));
	PROBE("mmap", (m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)) ==
			      MAP_FAILED ? -1 : 0);
	PROBE("mprotect-exec", mprotect(m, 4096, PROT_READ | PROT_EXEC));
	PROBE("mmap-exec", mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) ==
				   MAP_FAILED ? -1 : 0);
	PROBE("execve", execve("/bin/true", (char *[]){ "true", NULL }, (char *[]){ NULL }));
	PROBE("unshare", unshare(CLONE_NEWNET));
	PROBE("setns", syscall(SYS_setns, 0, CLONE_NEWNET));
	PROBE("clone-newuser", syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0));
	PROBE("ptrace-traceme", ptrace(PTRACE_TRACEME, 0, 0, 0));
	PROBE("mount", mount("none", dir, "tmpfs", 0, NULL));
	PROBE("setuid", syscall(SYS_setuid, 0));
	PROBE("kill-other", kill(1, 0));
	PROBE("kill-self", kill(getpid(), 0));
	PROBE("bpf", syscall(SYS_bpf, 0, 0, 0));
	PROBE("io_uring", syscall(SYS_io_uring_setup, 1, line));
#undef PROBE
}

int main(void)
{
	static const char *const want[][2] = {
		{ "open-write", "ok" }, { "write", "ok" }, { "open-rdwr", "EPERM" },
		{ "socket-inet", "ok" }, { "ioctl-fionread", "ok" }, { "ioctl-other", "EPERM" },
		{ "socket-unix", "ok" }, { "socket-inet6", "ok" }, { "socket-netlink", "EPERM" },
		{ "socket-packet", "EPERM" }, { "mmap", "ok" }, { "mprotect-exec", "EPERM" },
		{ "mmap-exec", "EPERM" }, { "execve", "EPERM" }, { "unshare", "EPERM" }, { "setns", "EPERM" },
		{ "clone-newuser", "EPERM" }, { "ptrace-traceme", "EPERM" }, { "mount", "EPERM" },
		{ "setuid", "EPERM" }, { "kill-other", "EPERM" }, { "kill-self", "ok" }, { "bpf", "EPERM" },
		{ "io_uring", "EPERM" },
	};
	char buf[4096] = "", *line, *save;
	int p[2], status;
	size_t got = 0, i = 0;
	space_err err = { 0 };
	pid_t pid;

	if (!mkdtemp(dir) || pipe(p) < 0)
		SKIP_ALL("no temp dir or pipe");
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || gw_confine_seccomp(&err) < 0) {
			dprintf(p[1], "install %s\n", err.msg);
			_exit(2);
		}
		probes(p[1]);
		_exit(0); /* (no atexit: the leak checker would run in the child) */
	}
	close(p[1]);
	for (ssize_t n; got < sizeof(buf) - 1 && (n = read(p[0], buf + got, sizeof(buf) - 1 - got)) > 0;)
		got += (size_t)n;
	buf[got] = '\0';
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the confined child ran every probe (%s)",
	      strncmp(buf, "install", 7) == 0 ? buf : "");
	for (line = strtok_r(buf, "\n", &save); line && i < sizeof(want) / sizeof(want[0]);
	     line = strtok_r(NULL, "\n", &save), i++) {
		char expect[96];

		snprintf(expect, sizeof(expect), "%s %s", want[i][0], want[i][1]);
		CHECK(strcmp(line, expect) == 0, "%s (got \"%s\")", expect, line);
	}
	CHECK(i == sizeof(want) / sizeof(want[0]), "all %zu probes reported", i);
	{
		char path[sizeof(dir) + 16];

		snprintf(path, sizeof(path), "%s/audit.log", dir);
		unlink(path);
		rmdir(dir);
	}
	return DONE();
}
