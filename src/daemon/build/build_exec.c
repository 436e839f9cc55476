/* build_exec.c -- one command in a build's VM: a session the daemon runs for itself
 * (session_open_internal_in), its stdin fed from a file no faster than the guest takes it, its
 * output logged as the step's (a run step) and the first bytes kept for the caller, its end
 * told once, from the loop. */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build_int.h"
#include "log.h"

#define EXEC_CHUNK (64u << 10)

static void feed(struct build *b)
{
	struct session *s = b->sess;
	space_err e = { 0 };

	while (b->in_fd >= 0 && !b->in_closed && !session_done(s)) {
		size_t room = session_stdin_room(s);

		if (b->in_off == b->in_len && !b->in_eof) {
			ssize_t n = read(b->in_fd, b->in_buf, EXEC_CHUNK);

			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				log_warn("build %s: reading a copy's files: %s", b->id, strerror(errno));
				session_cancel(s);
				return;
			}
			b->in_off = 0;
			b->in_len = (size_t)n;
			b->in_eof = n == 0;
		}
		if (b->in_off == b->in_len && b->in_eof) {
			b->in_closed = true;
			(void)session_stdin(s, NULL, 0, 1, &e);
			return;
		}
		if (!room)
			return;
		size_t n = b->in_len - b->in_off < room ? b->in_len - b->in_off : room;
		if (session_stdin(s, b->in_buf + b->in_off, n, 0, &e) < 0)
			return;
		b->in_off += n;
	}
}

static void keep(struct build *b, const char *buf, size_t n)
{
	size_t room = BUILD_CAPTURE_MAX - b->out_len;

	if (n > room)
		n = room;
	memcpy(b->out + b->out_len, buf, n);
	b->out_len += n;
	b->out[b->out_len] = '\0';
}

/* The session's end as (code, error): 0.. its exit code; -1 and why otherwise. */
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

static void finish(struct build *b)
{
	char why[600] = "";
	build_exec_cb done = b->done;
	int code = outcome(b->sess, why, sizeof(why));

	if (b->in_buf)
		session_set_stdin_room_cb(b->sess, NULL, NULL);
	session_watch_del(&b->w);
	b->watching = false;
	b->sess = NULL;
	b->done = NULL;
	if (b->in_fd >= 0)
		close(b->in_fd);
	b->in_fd = -1;
	free(b->in_buf);
	b->in_buf = NULL;
	if (done)
		done(b, code, code < 0 ? why : NULL, b->out);
}

static void pump(struct build *b)
{
	struct session *s = b->w.s;
	static char buf[EXEC_CHUNK]; /* the loop's: one pump at a time */
	space_err e = { 0 };
	bool moved = false;

	if (!b->sess)
		return;
	if (!s) { /* the session went with its sandbox */
		build_exec_cb done = b->done;

		b->sess = NULL;
		b->done = NULL;
		b->watching = false;
		if (b->in_fd >= 0)
			close(b->in_fd);
		b->in_fd = -1;
		free(b->in_buf);
		b->in_buf = NULL;
		if (done)
			done(b, -1, "the builder VM went away", b->out);
		return;
	}
	feed(b);
	for (;;) {
		int stream = 0;
		ssize_t n;

		if (b->w.pos < session_output_start(s))
			b->w.pos = session_output_start(s);
		n = session_output_read(s, b->w.pos, &stream, buf, sizeof(buf), &e);
		if (n <= 0)
			break;
		b->w.pos += (uint64_t)n;
		moved = true;
		keep(b, buf, (size_t)n);
		if (b->log_output)
			build_log_output(b, b->cur, buf, (size_t)n);
	}
	if (moved)
		session_watch_progress(&b->w);
	if (session_done(s) && b->w.pos >= session_output_length(s))
		finish(b);
}

static void on_kick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	pump(arg);
}

static void on_wake(struct session_watch *w)
{
	struct build *b = (struct build *)((char *)w - offsetof(struct build, w));

	event_active(b->kick, 0, 0);
}

static void on_room(struct session *s, void *arg)
{
	struct build *b = arg;

	(void)s;
	event_active(b->kick, 0, 0);
}

int build_exec(struct build *b, enum sess_kind kind, const char *const *argv, const char *user, const json_t *env,
	       const char *cwd, const char *in_path, bool log, build_exec_cb done, space_err *err)
{
	struct session *s;

	if (!b->kick && !(b->kick = event_new(b->d->base, -1, 0, on_kick, b)))
		return err_set(err, ENOMEM, "out of memory");
	if (in_path) {
		b->in_fd = open(in_path, O_RDONLY | O_CLOEXEC);
		if (b->in_fd < 0)
			return err_sys(err, errno, "opening %s", in_path);
		if (!(b->in_buf = malloc(EXEC_CHUNK))) {
			close(b->in_fd);
			b->in_fd = -1;
			return err_set(err, ENOMEM, "out of memory");
		}
	}
	b->in_len = b->in_off = 0;
	b->in_eof = b->in_closed = false;
	s = session_open_internal_in(b->d, b->sb_id, kind, argv,
				     user, env, cwd, in_path != NULL, err);
	if (!s) {
		if (b->in_fd >= 0)
			close(b->in_fd);
		b->in_fd = -1;
		free(b->in_buf);
		b->in_buf = NULL;
		return -1;
	}
	b->sess = s;
	b->done = done;
	b->log_output = log;
	b->out_len = 0;
	b->out[0] = '\0';
	memset(&b->w, 0, sizeof(b->w));
	b->w.fn = on_wake;
	session_watch_add(s, &b->w);
	b->watching = true;
	session_set_deadline(s, now_ms() + BUILD_STEP_TIMEOUT_MS);
	if (in_path)
		session_set_stdin_room_cb(s, on_room, b);
	event_active(b->kick, 0, 0);
	return 0;
}

void build_exec_cancel(struct build *b)
{
	struct session *s = b->w.s;

	if (!b->sess)
		return;
	if (s) {
		if (b->in_buf)
			session_set_stdin_room_cb(s, NULL, NULL);
		if (!session_done(s))
			session_cancel(s);
		session_watch_del(&b->w);
	}
	b->sess = NULL;
	b->done = NULL;
	b->watching = false;
	if (b->in_fd >= 0)
		close(b->in_fd);
	b->in_fd = -1;
	free(b->in_buf);
	b->in_buf = NULL;
}
