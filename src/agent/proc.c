/* proc.c -- process channels: spawning, pipes, flow control, reaping, exit.
 *
 * Output flow control: a stdout/stderr pipe is watched only while its channel may hold more
 * output (PROTO_OUT_WINDOW per channel, AGENT_OUT_BUDGET over all), and a read takes at most
 * that much.  A process that writes faster than the host acks fills its pipe and blocks in
 * write(): the agent's memory stays bounded and nothing is dropped.
 *
 * When is a channel finished?  Its main process has been reaped and both pipes reached EOF.
 * Descendants that inherited the pipes (`cmd &`, daemons) may hold them open forever, so once
 * the main process is gone the agent keeps reading for AGENT_EXIT_GRACE_MS; after that it
 * closes a pipe the first time a read finds it empty, or after AGENT_EXIT_DRAIN_MAX more bytes
 * (a descendant that never stops writing).  The main process's own output is never cut: all
 * of it is in the pipe by the time it exits, and the pipe is only closed when found empty or
 * after more than a pipe can hold. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "agent.h"
#include "log.h"

struct agent_proc *agent_proc_find(struct agent *a, uint32_t id)
{
	struct agent_proc *p;

	for (p = a->procs; p; p = p->next)
		if (p->id == id)
			return p;
	return NULL;
}

void agent_proc_mark_pending(struct agent *a, struct agent_proc *p)
{
	if (p->pending || p->state == P_FREED)
		return;
	p->pending = true;
	p->pnext = NULL;
	p->pprev = a->pend_tail;
	if (a->pend_tail)
		a->pend_tail->pnext = p;
	else
		a->pend_head = p;
	a->pend_tail = p;
}

static void unpend(struct agent *a, struct agent_proc *p)
{
	if (!p->pending)
		return;
	if (p->pprev)
		p->pprev->pnext = p->pnext;
	else
		a->pend_head = p->pnext;
	if (p->pnext)
		p->pnext->pprev = p->pprev;
	else
		a->pend_tail = p->pprev;
	p->pnext = p->pprev = NULL;
	p->pending = false;
}

static uint8_t stream_of(const struct agent_watch *w)
{
	return w->kind == W_STDOUT ? PROTO_STDOUT : PROTO_STDERR;
}

/* A PTY's H_STDIN_CLOSE: its EOF character is still to be written (after the buffered input). */
static bool eof_due(const struct agent_proc *p)
{
	return p->pty && p->stdin_close && !p->eof_sent;
}

static void update_interest(struct agent *a, struct agent_proc *p)
{
	struct agent_watch *ws[2] = { &p->w_out, &p->w_err };
	int i;

	for (i = 0; i < 2; i++) {
		struct agent_watch *w = ws[i];
		uint32_t ev = 0;

		if (w->fd < 0)
			continue;
		if (p->state != P_STARTING && agent_obuf_room(&p->out, stream_of(w)) > 0) {
			if (a->out_held < AGENT_OUT_BUDGET)
				ev = EPOLLIN;
			else
				a->budget_blocked = true;
		}
		agent_watch_set(a, w, ev);
	}
	if (p->w_in.fd >= 0)
		agent_watch_set(a, &p->w_in, agent_ibuf_len(&p->in) || eof_due(p) ? EPOLLOUT : 0);
}

static void stop_grace(struct agent *a, struct agent_proc *p)
{
	if (p->grace_until_ms) {
		p->grace_until_ms = 0;
		a->in_grace--;
	}
}

static void check_done(struct agent *a, struct agent_proc *p)
{
	if (p->state != P_RUNNING || !p->reaped || p->w_out.fd >= 0 || p->w_err.fd >= 0)
		return;
	p->state = P_DONE;
	stop_grace(a, p);
	agent_watch_close(a, &p->w_in);
	agent_ibuf_drop(&p->in);
	agent_proc_mark_pending(a, p);
}

static void close_stdin(struct agent *a, struct agent_proc *p)
{
	agent_watch_close(a, &p->w_in);
	/* Nothing more reaches the process: ack what is pending so the host is not stuck. */
	agent_ibuf_drop(&p->in);
	agent_proc_mark_pending(a, p);
}

static void free_proc_resources(struct agent *a, struct agent_proc *p)
{
	stop_grace(a, p);
	agent_watch_close(a, &p->w_status);
	agent_watch_close(a, &p->w_out);
	agent_watch_close(a, &p->w_err);
	agent_watch_close(a, &p->w_in);
	a->out_held -= agent_obuf_held(&p->out);
	agent_obuf_free(&p->out);
	agent_ibuf_free(&p->in);
}

/* Unlink now (so the id is free and nothing finds it), free memory before the loop sleeps:
 * events for its fds may still be in the batch being dispatched. */
static void proc_kill_entry(struct agent *a, struct agent_proc *p)
{
	free_proc_resources(a, p);
	unpend(a, p);
	if (p->prev)
		p->prev->next = p->next;
	else
		a->procs = p->next;
	if (p->next)
		p->next->prev = p->prev;
	p->state = P_FREED;
	p->next = a->dead;
	p->prev = NULL;
	a->dead = p;
	a->nprocs--;
	agent_proc_rearm_budget(a);
}

void agent_proc_free_dead(struct agent *a)
{
	while (a->dead) {
		struct agent_proc *p = a->dead;

		a->dead = p->next;
		free(p);
	}
}

static void watch_init(struct agent_watch *w, enum agent_watch_kind kind, struct agent_proc *p,
		       int fd)
{
	w->kind = kind;
	w->proc = p;
	w->fd = fd;
	w->events = 0;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void close_pair(int fds[2])
{
	int i;

	for (i = 0; i < 2; i++)
		if (fds[i] >= 0) {
			close(fds[i]);
			fds[i] = -1;
		}
}

/* A new pseudo-terminal of rows x cols: master (non-blocking; the agent's side), slave (the
 * child's controlling terminal).  All CLOEXEC; posix_openpt and friends are plain libc
 * (no libutil in the static agent). */
static int open_pty(uint16_t rows, uint16_t cols, int *master, int *slave)
{
	struct winsize ws = { .ws_row = rows, .ws_col = cols };
	int m, sl = -1, e;

	m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0)
		return -1;
	if (grantpt(m) < 0 || unlockpt(m) < 0)
		goto fail;
#ifdef TIOCGPTPEER
	/* The slave of this very master, whatever is mounted where. */
	sl = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
#endif
	if (sl < 0) {
		char name[64];

		if (ptsname_r(m, name, sizeof(name)) != 0)
			goto fail;
		sl = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (sl < 0)
			goto fail;
	}
	if (ioctl(m, TIOCSWINSZ, &ws) < 0 || set_nonblock(m) < 0)
		goto fail;
	*master = m;
	*slave = sl;
	return 0;
fail:
	e = errno;
	if (sl >= 0)
		close(sl);
	close(m);
	errno = e;
	return -1;
}

int agent_proc_spawn(struct agent *a, uint32_t id, const struct agent_spawn *s)
{
	const struct proto_exec *x = s->x;
	int st[2] = { -1, -1 }, out[2] = { -1, -1 }, err[2] = { -1, -1 }, in[2] = { -1, -1 };
	int pty[2] = { -1, -1 }; /* master, slave */
	struct agent_proc *p;
	pid_t pid;
	int e;

	p = calloc(1, sizeof(*p));
	if (!p || pipe2(st, O_CLOEXEC) < 0)
		goto fail;
	if (s->pty) {
		/* The stdin side is the same terminal under a second fd, for epoll. */
		if (open_pty(s->rows, s->cols, &pty[0], &pty[1]) < 0 ||
		    (in[1] = fcntl(pty[0], F_DUPFD_CLOEXEC, 3)) < 0) {
			e = errno;
			agent_send_error(a, id, e, "pty: %s", strerror(e));
			goto cleanup;
		}
	} else {
		if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ||
		    (s->stdin_pipe && pipe2(in, O_CLOEXEC) < 0))
			goto fail;
		/* Parent ends non-blocking; the child's ends stay blocking, as programs expect. */
		if (set_nonblock(out[0]) < 0 || set_nonblock(err[0]) < 0 ||
		    (in[1] >= 0 && set_nonblock(in[1]) < 0))
			goto fail;
	}
	if (set_nonblock(st[0]) < 0)
		goto fail;
	pid = fork();
	if (pid < 0)
		goto fail;
	if (pid == 0) {
		struct agent_child c = {
			.x = x, .in = in[0], .out = out[1], .err = err[1], .tty = pty[1],
			.status = st[1], .body = s->body,
		};

		agent_child_start(a, &c);
	}
	close(st[1]);
	if (s->pty) {
		close(pty[1]);
		out[0] = pty[0];
	} else {
		close(out[1]);
		close(err[1]);
		if (in[0] >= 0)
			close(in[0]);
	}

	p->id = id;
	p->state = P_STARTING;
	p->pid = pid;
	p->pty = s->pty;
	snprintf(p->argv0, sizeof(p->argv0), "%s", x->argv[0]);
	watch_init(&p->w_status, W_STATUS, p, st[0]);
	watch_init(&p->w_out, W_STDOUT, p, out[0]);
	watch_init(&p->w_err, W_STDERR, p, err[0]);
	watch_init(&p->w_in, W_STDIN, p, in[1]);
	p->has_stdin = in[1] >= 0;
	agent_obuf_init(&p->out, PROTO_OUT_WINDOW);
	agent_ibuf_init(&p->in, PROTO_IN_WINDOW);
	p->next = a->procs;
	if (a->procs)
		a->procs->prev = p;
	a->procs = p;
	a->nprocs++;
	if (agent_watch_set(a, &p->w_status, EPOLLIN) < 0) {
		agent_send_error(a, id, errno, "exec: epoll: %s", strerror(errno));
		kill(pid, SIGKILL);
		proc_kill_entry(a, p);
		return -1;
	}
	log_debug("chan %u: %s started pid %d (%s)", id, s->kind ? s->kind : "?", (int)pid,
		  p->argv0);
	return 0;

fail:
	e = errno;
	agent_send_error(a, id, e, "exec %s: %s", x->argv[0], strerror(e));
cleanup:
	close_pair(st);
	close_pair(out);
	close_pair(err);
	close_pair(in);
	close_pair(pty);
	free(p);
	return -1;
}

int agent_proc_resize(struct agent *a, struct agent_proc *p, uint16_t rows, uint16_t cols)
{
	struct winsize ws = { .ws_row = rows, .ws_col = cols };
	int fd = p->w_out.fd >= 0 ? p->w_out.fd : p->w_in.fd;

	(void)a;
	if (!p->pty || fd < 0 || p->state == P_DONE) {
		errno = EINVAL;
		return -1;
	}
	/* The kernel sends SIGWINCH to the terminal's foreground process group. */
	return ioctl(fd, TIOCSWINSZ, &ws);
}

/* The child closes the status pipe by exec (CLOEXEC), or writes (i32 errno, message). */
static void on_status(struct agent *a, struct agent_proc *p)
{
	uint8_t buf[600];
	ssize_t n;

	do
		n = read(p->w_status.fd, buf, sizeof(buf) - 1);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return;
	if (n > 0) {
		int e = n >= 4 ? (int)((uint32_t)buf[0] | (uint32_t)buf[1] << 8 |
				       (uint32_t)buf[2] << 16 | (uint32_t)buf[3] << 24)
			       : EIO;

		buf[n] = '\0';
		agent_send_error(a, p->id, e, "%s", n > 4 ? (char *)buf + 4 : "exec failed");
		/* The child exits by itself; it is reaped (and ignored) like any orphan. */
		proc_kill_entry(a, p);
		return;
	}
	agent_watch_close(a, &p->w_status);
	p->state = P_RUNNING;
	agent_proc_mark_pending(a, p);
	update_interest(a, p);
	check_done(a, p);
}

static void close_pipe(struct agent *a, struct agent_proc *p, struct agent_watch *w)
{
	agent_watch_close(a, w);
	check_done(a, p);
}

static void read_pipe(struct agent *a, struct agent_proc *p, struct agent_watch *w)
{
	uint8_t stream = stream_of(w);
	int rounds;

	for (rounds = 0; rounds < 4 && w->fd >= 0; rounds++) {
		size_t room = agent_obuf_room(&p->out, stream), len;
		size_t budget = a->out_held < AGENT_OUT_BUDGET ? AGENT_OUT_BUDGET - a->out_held : 0;
		uint8_t *dst;
		ssize_t n;

		if (room > budget)
			room = budget;
		if (room > PROTO_MAX_CHUNK)
			room = PROTO_MAX_CHUNK;
		if (room == 0)
			break;
		dst = agent_obuf_reserve(&p->out, room, &len);
		if (!dst) {
			/* Out of memory: stop reading; the budget timer retries. */
			a->budget_blocked = true;
			agent_watch_set(a, w, 0);
			return;
		}
		if (len > room)
			len = room;
		n = read(w->fd, dst, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			if (p->grace_over)
				close_pipe(a, p, w);
			break;
		}
		if (n <= 0) {
			/* A PTY master reads EIO once no slave fd is open: its EOF. */
			if (n < 0 && !(p->pty && errno == EIO))
				agent_log(a, false, "chan %u: read: %s", p->id, strerror(errno));
			close_pipe(a, p, w);
			break;
		}
		agent_obuf_commit(&p->out, stream, (size_t)n);
		a->out_held += (size_t)n;
		agent_proc_mark_pending(a, p);
		if (p->grace_over) {
			p->drained_after_grace[stream - 1] += (uint64_t)n;
			if (p->drained_after_grace[stream - 1] > AGENT_EXIT_DRAIN_MAX) {
				agent_log(a, false, "chan %u: descendants keep writing after exit: "
					  "closing its output", p->id);
				close_pipe(a, p, w);
			}
		}
	}
	if (p->state != P_FREED)
		update_interest(a, p);
}

/* The character a PTY's line discipline takes as end-of-file (VEOF, normally ^D). */
static uint8_t pty_eof_char(int fd)
{
	struct termios t;

	if (tcgetattr(fd, &t) == 0 && t.c_cc[VEOF] != _POSIX_VDISABLE)
		return t.c_cc[VEOF];
	return 4;
}

static void pump_stdin(struct agent *a, struct agent_proc *p)
{
	for (;;) {
		size_t len;
		const uint8_t *d = agent_ibuf_peek(&p->in, &len);
		uint8_t eof;
		bool is_eof = false;
		ssize_t n;

		if (p->w_in.fd < 0) {
			if (len)
				close_stdin(a, p);
			return;
		}
		if (!len && eof_due(p)) {
			/* A terminal has no half-close: its line discipline turns the EOF
			 * character into end-of-file for the reader, and stdin stays open. */
			eof = pty_eof_char(p->w_in.fd);
			d = &eof;
			len = 1;
			is_eof = true;
		} else if (!len) {
			if (p->stdin_close && !p->pty)
				close_stdin(a, p);
			break;
		}
		n = write(p->w_in.fd, d, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 || (n < 0 && errno == EAGAIN))
			break;
		if (n < 0) {
			/* EPIPE: the process closed its stdin (EIO: nobody holds the terminal);
			 * the rest has nowhere to go. */
			close_stdin(a, p);
			return;
		}
		if (is_eof) {
			p->eof_sent = true;
			continue;
		}
		agent_ibuf_consume(&p->in, (size_t)n);
		agent_proc_mark_pending(a, p);
	}
	update_interest(a, p);
}

void agent_proc_event(struct agent *a, struct agent_watch *w, uint32_t events)
{
	struct agent_proc *p = w->proc;

	if (!p || p->state == P_FREED || w->fd < 0)
		return;
	switch (w->kind) {
	case W_STATUS:
		on_status(a, p);
		break;
	case W_STDOUT:
	case W_STDERR:
		read_pipe(a, p, w);
		break;
	case W_STDIN:
		if (events & EPOLLERR)
			close_stdin(a, p);
		else
			pump_stdin(a, p);
		break;
	case W_PORT:
	case W_SIGNAL:
		break;
	}
}

/*
 * Reap every child that has exited.  As PID 1 the agent inherits every orphan in the guest
 * (a daemonised `cmd &` whose parent exited), so it must wait for any pid, not only for the
 * processes it started, or zombies pile up until the pid space is gone.  waitpid(-1) also
 * reaps the channels' main processes, so their status is recorded here, on the channel,
 * when the pid matches: the exit must be reported to the host (A_EXIT), possibly several
 * times after reconnects, long after the kernel has forgotten it.
 */
void agent_proc_reap(struct agent *a)
{
	for (;;) {
		struct agent_proc *p;
		int status;
		pid_t pid = waitpid(-1, &status, WNOHANG);

		if (pid < 0 && errno == EINTR)
			continue;
		if (pid <= 0)
			return;
		for (p = a->procs; p; p = p->next)
			if (p->pid == pid && !p->reaped)
				break;
		if (!p)
			continue;
		p->reaped = true;
		p->status = status;
		p->exited_at_ms = agent_now_ms();
		log_debug("chan %u: pid %d exited, status 0x%x", p->id, (int)pid, status);
		/* Stdin has no reader that matters any more. */
		if (p->has_stdin)
			close_stdin(a, p);
		if (p->w_out.fd >= 0 || p->w_err.fd >= 0) {
			p->grace_until_ms = p->exited_at_ms + AGENT_EXIT_GRACE_MS;
			a->in_grace++;
		}
		check_done(a, p);
	}
}

void agent_proc_timers(struct agent *a, int64_t now, int64_t *next)
{
	struct agent_proc *p, *nx;

	if (!a->in_grace)
		return;
	for (p = a->procs; p; p = nx) {
		nx = p->next;
		if (!p->grace_until_ms)
			continue;
		if (now < p->grace_until_ms) {
			if (p->grace_until_ms < *next)
				*next = p->grace_until_ms;
			continue;
		}
		stop_grace(a, p);
		p->grace_over = true;
		/* Read now: an empty pipe gives no event, and EAGAIN is what closes it. */
		if (p->w_out.fd >= 0)
			read_pipe(a, p, &p->w_out);
		if (p->w_err.fd >= 0)
			read_pipe(a, p, &p->w_err);
	}
}

void agent_proc_ack(struct agent *a, struct agent_proc *p, uint64_t off)
{
	size_t before = agent_obuf_held(&p->out);

	if (agent_obuf_ack(&p->out, off) < 0) {
		agent_log(a, true, "H_ACK chan %u: offset %llu beyond output (%llu): ignored",
			  p->id, (unsigned long long)off, (unsigned long long)p->out.tail);
		return;
	}
	a->out_held -= before - agent_obuf_held(&p->out);
	if (p->out.sent < p->out.tail || (p->state == P_DONE && !p->exit_sent))
		agent_proc_mark_pending(a, p);
	if (p->state == P_RUNNING && p->grace_over) {
		if (p->w_out.fd >= 0)
			read_pipe(a, p, &p->w_out);
		if (p->w_err.fd >= 0)
			read_pipe(a, p, &p->w_err);
	} else if (p->state == P_RUNNING) {
		update_interest(a, p);
	}
	agent_proc_rearm_budget(a);
}

void agent_proc_rearm_budget(struct agent *a)
{
	struct agent_proc *p;

	if (!a->budget_blocked || a->out_held >= AGENT_OUT_BUDGET)
		return;
	a->budget_blocked = false;
	for (p = a->procs; p; p = p->next)
		if (p->state == P_RUNNING)
			update_interest(a, p);
}

void agent_proc_stdin(struct agent *a, struct agent_proc *p, uint64_t off, const uint8_t *d,
		      size_t n)
{
	enum agent_ibuf_rc rc;

	if (p->stdin_close && off + n > p->in.received) {
		agent_log(a, true, "H_STDIN chan %u after H_STDIN_CLOSE: dropped", p->id);
		return;
	}
	rc = agent_ibuf_put(&p->in, off, d, n);
	switch (rc) {
	case AGENT_IBUF_OK:
		break;
	case AGENT_IBUF_DUP:
		return;
	case AGENT_IBUF_GAP:
		agent_log(a, true, "H_STDIN chan %u: offset %llu beyond %llu: dropped", p->id,
			  (unsigned long long)off, (unsigned long long)p->in.received);
		return;
	case AGENT_IBUF_OVERFLOW:
		agent_log(a, true, "H_STDIN chan %u: over the stdin window: dropped", p->id);
		return;
	case AGENT_IBUF_NOMEM:
		agent_log(a, true, "H_STDIN chan %u: out of memory: dropped", p->id);
		return;
	}
	if (p->w_in.fd < 0) {
		/* No stdin pipe (any more): consume and ack, so the host is not stuck. */
		agent_ibuf_drop(&p->in);
		p->stdin_ack_forced = true;
		agent_proc_mark_pending(a, p);
		return;
	}
	pump_stdin(a, p);
}

void agent_proc_stdin_close(struct agent *a, struct agent_proc *p)
{
	p->stdin_close = true;
	if (p->w_in.fd >= 0)
		pump_stdin(a, p);
}

int agent_proc_signal(struct agent *a, struct agent_proc *p, int signo)
{
	(void)a;
	/* Only before the reap: until then the pid (and its process group, the child called
	 * setsid) cannot have been reused. */
	if (p->reaped || p->state == P_DONE) {
		errno = ESRCH;
		return -1;
	}
	if (kill(-p->pid, signo) == 0)
		return 0;
	return kill(p->pid, signo);
}

void agent_proc_release(struct agent *a, struct agent_proc *p)
{
	log_debug("chan %u: released", p->id);
	proc_kill_entry(a, p);
}

void agent_proc_rewind_all(struct agent *a)
{
	struct agent_proc *p;

	for (p = a->procs; p; p = p->next) {
		agent_obuf_rewind(&p->out);
		p->started_sent = false;
		p->exit_sent = false;
		p->stdin_ack_forced = true;
		agent_proc_mark_pending(a, p);
	}
}

void agent_proc_signal_all(struct agent *a, int signo)
{
	struct agent_proc *p;

	/* Only before the reap, as in agent_proc_signal: the pid cannot have been reused. */
	for (p = a->procs; p; p = p->next)
		if (!p->reaped && p->pid > 0 && kill(-p->pid, signo) < 0)
			kill(p->pid, signo);
}
