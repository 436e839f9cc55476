/* icmd.c -- a command the daemon runs in a sandbox for itself (icmd.h). */
#include "sandbox/icmd.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "log.h"
#include "sandbox/sandbox.h"

#define ICMD_CHUNK (64u << 10)

struct icmd {
	struct spaced *d;
	struct session_watch w; /* w.s: the session, NULL once it went with its sandbox */
	icmd_output_fn output;
	icmd_done_fn done;
	void *arg;
	struct event *kick;
	int in_fd;
	char *in_buf;
	size_t in_len, in_off;
	bool in_eof, in_closed;
	char out[ICMD_KEEP_MAX + 1];
	size_t out_len;
};

static void icmd_free(struct icmd *c)
{
	if (c->w.s) {
		if (c->in_buf)
			session_set_stdin_room_cb(c->w.s, NULL, NULL);
		session_watch_del(&c->w);
	}
	if (c->kick)
		event_free(c->kick);
	if (c->in_fd >= 0)
		close(c->in_fd);
	free(c->in_buf);
	free(c);
}

static void feed(struct icmd *c)
{
	struct session *s = c->w.s;
	space_err e = { 0 };

	while (c->in_fd >= 0 && !c->in_closed && !session_done(s)) {
		size_t room = session_stdin_room(s), n;

		if (c->in_off == c->in_len && !c->in_eof) {
			ssize_t got = read(c->in_fd, c->in_buf, ICMD_CHUNK);

			if (got < 0 && errno == EINTR)
				continue;
			if (got < 0) {
				log_warn("an internal command's stdin: %s", strerror(errno));
				session_cancel(s);
				return;
			}
			c->in_off = 0;
			c->in_len = (size_t)got;
			c->in_eof = got == 0;
		}
		if (c->in_off == c->in_len && c->in_eof) {
			c->in_closed = true;
			(void)session_stdin(s, NULL, 0, 1, &e);
			return;
		}
		if (!room)
			return;
		n = c->in_len - c->in_off < room ? c->in_len - c->in_off : room;
		if (session_stdin(s, c->in_buf + c->in_off, n, 0, &e) < 0)
			return;
		c->in_off += n;
	}
}

static void keep(struct icmd *c, const char *buf, size_t n)
{
	size_t room = ICMD_KEEP_MAX - c->out_len;

	if (n > room)
		n = room;
	memcpy(c->out + c->out_len, buf, n);
	c->out_len += n;
	c->out[c->out_len] = '\0';
}

/* The session's end as (code, why): its exit code, or -1. */
static int outcome(const struct session *s, char *why, size_t len)
{
	const struct session_rec *r = session_rec(s);

	if (r->state == SESS_EXITED && !r->exit_signal)
		return r->exit_code;
	if (r->state == SESS_EXITED)
		snprintf(why, len, "killed by signal %d", r->exit_signal);
	else
		snprintf(why, len, "%s", r->error[0] ? r->error : "the command failed to run");
	return -1;
}

static void finish(struct icmd *c, int code, const char *why)
{
	icmd_done_fn done = c->done;
	void *arg = c->arg;
	char out[ICMD_KEEP_MAX + 1];

	memcpy(out, c->out, c->out_len + 1);
	icmd_free(c); /* first: done may start another command in the same sandbox */
	done(arg, code, code < 0 ? why : NULL, out);
}

static void pump(struct icmd *c)
{
	static char buf[ICMD_CHUNK]; /* the loop's: one pump at a time */
	struct session *s = c->w.s;
	space_err e = { 0 };
	bool moved = false;
	char why[600] = "";

	if (!s) {
		finish(c, -1, "the sandbox went away");
		return;
	}
	feed(c);
	for (;;) {
		int stream = 0;
		ssize_t n;

		if (c->w.pos < session_output_start(s))
			c->w.pos = session_output_start(s);
		n = session_output_read(s, c->w.pos, &stream, buf, sizeof(buf), &e);
		if (n <= 0)
			break;
		c->w.pos += (uint64_t)n;
		moved = true;
		keep(c, buf, (size_t)n);
		if (c->output)
			c->output(c->arg, buf, (size_t)n);
	}
	if (moved)
		session_watch_progress(&c->w);
	if (session_done(s) && c->w.pos >= session_output_length(s)) {
		int code = outcome(s, why, sizeof(why));

		finish(c, code, why);
	}
}

static void on_kick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	pump(arg);
}

static void on_wake(struct session_watch *w)
{
	struct icmd *c = (struct icmd *)((char *)w - offsetof(struct icmd, w));

	event_active(c->kick, 0, 0);
}

static void on_room(struct session *s, void *arg)
{
	struct icmd *c = arg;

	(void)s;
	event_active(c->kick, 0, 0);
}

struct icmd *icmd_start(struct spaced *d, const char *sb_id, const struct icmd_spec *spec, space_err *err)
{
	struct icmd *c = calloc(1, sizeof(*c));
	struct session *s;

	if (!c || !(c->kick = event_new(d->base, -1, 0, on_kick, c))) {
		free(c);
		err_set(err, ENOMEM, "out of memory");
		return NULL;
	}
	c->d = d;
	c->in_fd = -1;
	c->output = spec->output;
	c->done = spec->done;
	c->arg = spec->arg;
	if (spec->stdin_path) {
		if ((c->in_fd = open(spec->stdin_path, O_RDONLY | O_CLOEXEC)) < 0) {
			err_sys(err, errno, "opening %s", spec->stdin_path);
			icmd_free(c);
			return NULL;
		}
		if (!(c->in_buf = malloc(ICMD_CHUNK))) {
			err_set(err, ENOMEM, "out of memory");
			icmd_free(c);
			return NULL;
		}
	}
	s = spec->own_vm ? session_open_internal_in(d, sb_id, spec->kind, spec->argv, spec->user, spec->env,
						      spec->cwd, spec->stdin_path != NULL, err)
			   : session_open_internal(d, sb_id, spec->kind, spec->argv, spec->user,
						   spec->stdin_path != NULL, err);
	if (!s) {
		icmd_free(c);
		return NULL;
	}
	c->w.fn = on_wake;
	session_watch_add(s, &c->w);
	if (spec->timeout_ms > 0)
		session_set_deadline(s, now_ms() + spec->timeout_ms);
	if (spec->stdin_path)
		session_set_stdin_room_cb(s, on_room, c);
	event_active(c->kick, 0, 0);
	return c;
}

void icmd_cancel(struct icmd *c)
{
	if (!c)
		return;
	if (c->w.s && !session_done(c->w.s))
		session_cancel(c->w.s);
	icmd_free(c);
}
