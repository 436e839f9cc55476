/* loop.c -- the agent's single-threaded epoll loop: fd events, timers, signals, logging.
 * Modelled on Redis ae: callbacks only change state and queue work; the before-sleep step
 * flushes output to the host and frees released channels (never inside a callback that may
 * still be using them). */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "log.h"

#define LOG_LINES_PER_SEC 50

int64_t agent_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Register interest in exactly `events`.  Interest 0 removes the fd from epoll: EPOLLHUP and
 * EPOLLERR are reported even when not asked for, so an fd we do not want to hear from (a
 * pipe whose writer is gone while the window is full, a disconnected port) must not stay in. */
int agent_watch_set(struct agent *a, struct agent_watch *w, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };
	int op;

	if (w->fd < 0 || events == w->events)
		return 0;
	if (events == 0)
		op = EPOLL_CTL_DEL;
	else if (w->events == 0)
		op = EPOLL_CTL_ADD;
	else
		op = EPOLL_CTL_MOD;
	if (epoll_ctl(a->epfd, op, w->fd, &ev) < 0) {
		agent_log(a, false, "epoll_ctl fd %d: %s", w->fd, strerror(errno));
		return -1;
	}
	w->events = events;
	return 0;
}

void agent_watch_close(struct agent *a, struct agent_watch *w)
{
	if (w->fd < 0)
		return;
	agent_watch_set(a, w, 0);
	close(w->fd);
	w->fd = -1;
	w->events = 0;
}

void agent_log(struct agent *a, bool to_host, const char *fmt, ...)
{
	char buf[512];
	int64_t now = agent_now_ms();
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	/* The console may be a serial port at a few KB/s under TCG, and a hostile host or
	 * process could provoke a line per frame: cap the rate, say what was dropped. */
	if (now - a->log_window_ms >= 1000) {
		if (a->log_dropped)
			log_warn("%u log line(s) suppressed", a->log_dropped);
		a->log_window_ms = now;
		a->log_count = 0;
		a->log_dropped = 0;
	}
	if (a->log_count >= LOG_LINES_PER_SEC) {
		a->log_dropped++;
		return;
	}
	a->log_count++;
	log_info("%s", buf);
	if (to_host && a->port.up && a->port.hello)
		agent_ctl_send(a, A_LOG, 0, buf, strlen(buf) + 1, true);
}

int agent_loop_init(struct agent *a)
{
	sigset_t mask;
	int fd;

	/* Writes to a pipe or socket whose reader is gone must fail with EPIPE, not kill PID 1.
	 * Job-control signals from a terminal must not stop it either. */
	signal(SIGPIPE, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGTTIN, SIG_IGN);
	signal(SIGTTOU, SIG_IGN);
	signal(SIGTSTP, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	if (!a->pid1) {
		/* A host test run stops cleanly on SIGTERM/SIGINT; PID 1 ignores them (the
		 * kernel sends SIGINT for ctrl-alt-del). */
		sigaddset(&mask, SIGTERM);
		sigaddset(&mask, SIGINT);
	} else {
		signal(SIGINT, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
	}
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		return -1;
	a->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (a->epfd < 0)
		return -1;
	fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0)
		return -1;
	a->w_sig.kind = W_SIGNAL;
	a->w_sig.fd = fd;
	a->w_sig.events = 0;
	return agent_watch_set(a, &a->w_sig, EPOLLIN);
}

static void on_signal(struct agent *a)
{
	struct signalfd_siginfo si;

	for (;;) {
		ssize_t n = read(a->w_sig.fd, &si, sizeof(si));

		if (n < 0 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof(si))
			break;
		if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
			agent_log(a, false, "signal %u: stopping", si.ssi_signo);
			agent_proc_signal_all(a, SIGKILL);
			a->quit = true;
		}
	}
	/* SIGCHLD coalesces: reap whatever has exited, however many signals that took. */
	agent_proc_reap(a);
}

int agent_run(struct agent *a)
{
	struct epoll_event evs[64];

	while (!a->quit) {
		int64_t now = agent_now_ms(), next = now + 60000;
		int n, i, timeout;

		if (!a->port.up && now >= a->port.retry_at_ms)
			agent_port_poll_retry(a);
		if (!a->port.up && a->port.retry_at_ms < next)
			next = a->port.retry_at_ms;
		agent_proc_timers(a, now, &next);
		if (a->budget_blocked) {
			agent_proc_rearm_budget(a);
			if (a->budget_blocked && now + AGENT_RETRY_MS < next)
				next = now + AGENT_RETRY_MS;
		}
		/* Before sleeping: send what the callbacks queued, free what they released. */
		agent_port_flush(a);
		agent_proc_free_dead(a);
		/* Work that follows an answer: after the flush above, before the next frame. */
		if (a->ca_pending) {
			agent_net_finish(a);
			continue;
		}

		timeout = next > now ? (int)(next - now) : 0;
		n = epoll_wait(a->epfd, evs, 64, timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			agent_log(a, false, "epoll_wait: %s", strerror(errno));
			return -1;
		}
		for (i = 0; i < n; i++) {
			struct agent_watch *w = evs[i].data.ptr;

			switch (w->kind) {
			case W_PORT:
				agent_port_event(a, evs[i].events);
				break;
			case W_SIGNAL:
				on_signal(a);
				break;
			case W_STATUS:
			case W_STDOUT:
			case W_STDERR:
			case W_STDIN:
				agent_proc_event(a, w, evs[i].events);
				break;
			}
		}
	}
	agent_port_flush(a);
	return 0;
}
