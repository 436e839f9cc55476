/* fuzz_agent_guest.c -- libFuzzer target: the guest agent's input from the host, i.e. the byte
 * stream on its virtio-serial port, through the real deframer (src/agent/chan.c,
 * agent_deframe) and message handlers (src/agent/msg.c, proc.c, identity.c), then the output
 * path (agent_port_flush over a socketpair, so A_* frames are generated from channel state).
 *
 * The input is cut into reads at the positions its first byte chooses, as a port delivers
 * them.  The agent runs as a host process (not PID 1, clock not settable), as in the agent's
 * host tests, and two things it would do to the machine are replaced at link time
 * (-Wl,--wrap): fork() starts a child that exits at once (at most 4 per input), so H_EXEC
 * goes through its real path without running the fuzzer's commands, and agent_poweroff()
 * (which never returns: a host-run agent exits there) jumps back to the harness, ending the
 * input as the agent's life would end.  epoll_ctl() is wrapped too: EBADF, ENOENT or EEXIST
 * means the agent's idea of what epoll watches (agent_watch.events) is wrong, a finding.
 * State is fresh for every input. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/agent.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
pid_t __real_fork(void);
int __real_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev);
int __wrap_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev);
pid_t __wrap_fork(void);
void __wrap_agent_poweroff(struct agent *a, uint32_t mode) __attribute__((noreturn));

#define MAX_FORKS 4

static pid_t children[MAX_FORKS];
static int nchildren;
static jmp_buf powered_off;

pid_t __wrap_fork(void)
{
	sigset_t all, old;
	pid_t pid;
	int e;

	if (nchildren == MAX_FORKS) {
		errno = EAGAIN;
		return -1;
	}
	/* The child exits at once, signals blocked: an H_SIGNAL must not run libFuzzer's
	 * handlers in it. */
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
	pid = __real_fork();
	if (pid == 0)
		_exit(0); /* never the fuzzer's command */
	e = errno;
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (pid > 0)
		children[nchildren++] = pid;
	errno = e;
	return pid;
}

void __wrap_agent_poweroff(struct agent *a, uint32_t mode)
{
	(void)a;
	(void)mode;
	longjmp(powered_off, 1);
}

int __wrap_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	int rc = __real_epoll_ctl(epfd, op, fd, ev);

	if (rc < 0 && (errno == EBADF || errno == ENOENT || errno == EEXIST)) {
		fprintf(stderr, "fuzz_agent_guest: epoll_ctl(op %d, fd %d): %s\n", op, fd, strerror(errno));
		abort();
	}
	return rc;
}

static struct agent ag;
static int epfd = -1;

static void setup(int port_fd)
{
	memset(&ag, 0, sizeof(ag));
	ag.epfd = epfd;
	ag.w_sig.fd = -1;
	ag.port.kind = PORT_SOCK;
	ag.port.w.kind = W_PORT;
	ag.port.w.fd = port_fd;
	ag.port.up = true;
}

/* Everything the input left behind: channels (their pipes, the children), queued frames. */
static void teardown(void)
{
	while (ag.procs)
		agent_proc_release(&ag, ag.procs);
	agent_proc_free_dead(&ag);
	for (int i = 0; i < nchildren; i++) {
		kill(children[i], SIGKILL);
		waitpid(children[i], NULL, 0);
	}
	nchildren = 0;
	while (ag.port.ctl_head) {
		struct agent_ctl *c = ag.port.ctl_head;

		ag.port.ctl_head = c->next;
		free(c);
	}
	ag.port.ctl_tail = NULL;
	ag.port.ctl_bytes = 0;
}

static void drain(int fd)
{
	static uint8_t sink[1 << 16];

	while (read(fd, sink, sizeof(sink)) > 0)
		;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int sv[2];
	size_t step;
	volatile size_t pos = 1;

	if (size < 1)
		return 0;
	log_set_level(LOG_ERROR);
	if (epfd < 0) {
		signal(SIGPIPE, SIG_IGN); /* as agent_loop_init does: a child's stdin may be gone */
		epfd = epoll_create1(EPOLL_CLOEXEC);
		if (epfd < 0)
			abort();
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	setup(sv[0]);
	/* Reads of 1..256 bytes, or as large as the input buffer takes (first byte 0). */
	step = data[0] ? data[0] : sizeof(ag.port.inbuf);
	if (setjmp(powered_off))
		pos = size; /* H_SHUTDOWN: nothing after it is read */
	while (pos < size) {
		size_t room = sizeof(ag.port.inbuf) - ag.port.inlen, k = size - pos;

		if (k > step)
			k = step;
		if (k > room)
			k = room;
		memcpy(ag.port.inbuf + ag.port.inlen, data + pos, k);
		ag.port.inlen += k;
		pos += k;
		agent_deframe(ag.port.inbuf, &ag.port.inlen, &ag.port.desync, agent_handle_frame,
			      agent_handle_badframe, &ag);
		/* The deframer keeps at most one partial frame: there is always room again. */
		if (ag.port.inlen >= sizeof(ag.port.inbuf))
			abort();
		agent_port_flush(&ag);
		drain(sv[1]);
	}
	teardown();
	/* Out of epoll and closed (unless a write error took the port down and did that). */
	agent_watch_close(&ag, &ag.port.w);
	close(sv[1]);
	return 0;
}
