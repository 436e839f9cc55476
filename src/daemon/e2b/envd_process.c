/* envd_process.c -- envd's process.Process over the core's sessions: Start and Connect stream a
 * session's events (start with the guest pid, output, end), the unary calls act on a running
 * session found by its guest pid or tag. A client that goes away only detaches, as from envd:
 * the process runs on and Connect finds it again (also after a pause and resume). */
#include <errno.h>
#include <event2/event.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "connect.h"
#include "daemon.h"
#include "e2b.h"
#include "envd_proc.h"
#include "log.h"
#include "metrics/metrics.h"
#include "sandbox/sandbox.h"

/* Output bytes per data event at most. */
#define PROC_CHUNK (32u << 10)

/*
 * One Start or Connect stream. Lifetime: freed exactly once, by proc_finish (we ended the
 * stream) or by proc_gone (the client left; the connect stream frees itself after). The
 * session watch only schedules work (event_active on kick), never frees from inside the
 * session's notify loop.
 */
struct proc_stream {
	struct connect_stream *cs;
	struct session_watch w;
	struct event *kick;
	uint8_t *buf;
	bool watching;
	bool started; /* the start event went out */
	bool pty;
	bool owns_deadline; /* a Start with Connect-Timeout-Ms: the deadline kills its process */
};

static void proc_release(struct proc_stream *ps)
{
	if (ps->watching)
		session_watch_del(&ps->w);
	if (ps->kick)
		event_free(ps->kick);
	free(ps->buf);
	free(ps);
}

static void proc_finish(struct proc_stream *ps, const char *code, const char *message)
{
	connect_stream_end(ps->cs, code, message);
	proc_release(ps);
}

/* Sends msg (reference stolen); on failure ends the stream: -1, ps is gone. */
static int proc_send(struct proc_stream *ps, json_t *msg)
{
	int rc = msg ? connect_stream_send(ps->cs, msg) : -1;

	json_decref(msg);
	if (rc < 0) {
		proc_finish(ps, "internal", "out of memory");
		return -1;
	}
	return 0;
}

/* Up to PROC_CHUNK bytes of one stream from w.pos (consecutive records of the same stream
 * joined). */
static ssize_t read_chunk(struct proc_stream *ps, struct session *s, int *stream, space_err *err)
{
	size_t got = 0;
	int first = 0;

	while (got < PROC_CHUNK) {
		int st = 0;
		ssize_t n = session_output_read(s, ps->w.pos + got, &st, ps->buf + got, PROC_CHUNK - got, err);

		if (n < 0)
			return got ? (ssize_t)got : -1; /* the error comes back on the next read */
		if (n == 0 || (got && st != first))
			break;
		first = st;
		got += (size_t)n;
	}
	*stream = first;
	return (ssize_t)got;
}

static void proc_pump(struct proc_stream *ps)
{
	struct session *s = ps->w.s;
	const struct session_rec *rec;
	space_err err = { 0 };
	bool moved = false;
	ssize_t n = 0;

	if (!s) {
		proc_finish(ps, "unavailable", "the sandbox is no longer running");
		return;
	}
	rec = session_rec(s);
	if (!ps->started) {
		if (rec->pid <= 0 && !session_done(s))
			return; /* woken again when the agent reports the pid */
		if (rec->pid <= 0 && rec->state == SESS_FAILED) {
			proc_finish(ps, "unknown", rec->error[0] ? rec->error : "the process could not start");
			return;
		}
		ps->started = true;
		if (proc_send(ps, envd_event_start(rec->pid)) < 0)
			return;
	}
	while (!connect_stream_full(ps->cs)) {
		int stream = 1;
		uint64_t kept = session_output_start(s);

		if (ps->w.pos < kept) {
			/* Dropped by the output caps: go on from what is kept. */
			ps->w.pos = kept;
			moved = true;
		}
		n = read_chunk(ps, s, &stream, &err);
		if (n < 0) {
			log_warn("envd: process %d of %s: %s", rec->pid, rec->sandbox_id, err.msg);
			proc_finish(ps, "internal", err.msg);
			return;
		}
		if (n == 0)
			break;
		if (proc_send(ps, envd_event_data(ps->pty ? "pty" : stream == 2 ? "stderr" : "stdout", ps->buf,
						  (size_t)n)) < 0)
			return;
		metrics_output_sent(MX_TR_E2B, stream, (uint64_t)n);
		ps->w.pos += (uint64_t)n;
		moved = true;
	}
	if (moved)
		session_watch_progress(&ps->w);
	if (n == 0 && session_done(s) && ps->w.pos >= session_output_length(s)) {
		if (proc_send(ps, envd_event_end(rec)) < 0)
			return;
		proc_finish(ps, NULL, NULL);
	}
}

static void proc_kick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	proc_pump(arg);
}

/* From the session's notify loop: only schedule. */
static void proc_wake(struct session_watch *w)
{
	struct proc_stream *ps = (struct proc_stream *)((char *)w - offsetof(struct proc_stream, w));

	event_active(ps->kick, 0, 0);
}

static void proc_drained(struct connect_stream *cs, void *arg)
{
	struct proc_stream *ps = arg;

	(void)cs;
	event_active(ps->kick, 0, 0);
}

static void proc_gone(struct connect_stream *cs, void *arg)
{
	(void)cs;
	proc_release(arg);
}

/* As envd: a Start's process runs under the request's timeout and is killed when it passes
 * (exec.CommandContext); a Connect's deadline only ends that stream. */
static void proc_deadline(struct connect_stream *cs, void *arg)
{
	struct proc_stream *ps = arg;

	(void)cs;
	if (ps->owns_deadline && ps->w.s)
		session_cancel(ps->w.s);
	proc_release(ps);
}

static const struct connect_stream_ops proc_ops = {
	.on_gone = proc_gone, .on_drain = proc_drained, .on_deadline = proc_deadline
};

static struct proc_stream *proc_new(struct http_req *r)
{
	struct proc_stream *ps = calloc(1, sizeof(*ps));

	if (ps) {
		ps->buf = malloc(PROC_CHUNK);
		ps->kick = event_new(r->d->base, -1, 0, proc_kick, ps);
	}
	if (!ps || !ps->buf || !ps->kick) {
		if (ps)
			proc_release(ps);
		connect_stream_reply_error(r->req, "internal", "out of memory");
		return NULL;
	}
	return ps;
}

/* Begins the reply of ps and watches s from offset `from`. ps is freed on failure. */
static void proc_begin(struct http_req *r, struct proc_stream *ps, struct session *s, uint64_t from)
{
	json_t *ka = envd_event_keepalive();

	ps->cs = ka ? connect_stream_begin(r, &proc_ops, ps, ka) : NULL;
	json_decref(ka);
	if (!ps->cs) {
		if (!ka)
			connect_stream_reply_error(r->req, "internal", "out of memory");
		proc_release(ps);
		return;
	}
	ps->pty = session_rec(s)->kind == SESS_KIND_PTY;
	ps->w.fn = proc_wake;
	ps->w.pos = from;
	session_watch_add(s, &ps->w);
	ps->watching = true;
	proc_pump(ps);
}

/* ---- finding a process ---- */

struct find {
	int pid;
	const char *tag;
	struct session *found;
};

static int find_one(struct session *s, void *arg)
{
	struct find *f = arg;
	const struct session_rec *rec = session_rec(s);

	if (f->tag ? strcmp(rec->tag, f->tag) != 0 : rec->pid != f->pid)
		return 0;
	f->found = s;
	return 1;
}

/* The live process of this request's sandbox its "process" selector names, or NULL with the
 * Connect error answered (streaming: in a stream's shape). */
static struct session *find_process(struct http_req *r, const json_t *body, bool streaming)
{
	struct find f = { 0 };
	space_err err = { 0 };

	if (envd_selector(body, &f.pid, &f.tag, &err) < 0) {
		if (streaming)
			connect_stream_reply_error(r->req, "invalid_argument", "%s", err.msg);
		else
			connect_reply_error(r->req, "invalid_argument", "%s", err.msg);
		return NULL;
	}
	session_each_live(r->d, e2b_sandbox_id(r), find_one, &f);
	if (f.found)
		return f.found;
	if (streaming && f.tag)
		connect_stream_reply_error(r->req, "not_found", "process with tag %s not found", f.tag);
	else if (streaming)
		connect_stream_reply_error(r->req, "not_found", "process with pid %d not found", f.pid);
	else if (f.tag)
		connect_reply_error(r->req, "not_found", "process with tag %s not found", f.tag);
	else
		connect_reply_error(r->req, "not_found", "process with pid %d not found", f.pid);
	return NULL;
}

/* ---- streams ---- */

void envd_process_start(struct http_req *r)
{
	const char *auth = evhttp_find_header(evhttp_request_get_input_headers(r->req), "Authorization");
	struct session_rec rec = { 0 };
	struct proc_stream *ps;
	struct exec_req req;
	space_err err = { 0 };
	struct session *s;
	char user[SPEC_USER_MAX + 2], token[65];
	json_t *body = connect_request(r, true);
	int64_t timeout_ms;
	int rc;

	if (!body)
		return;
	rc = envd_basic_user(auth, user, sizeof(user), &err);
	if (rc == 0)
		rc = envd_start_req(body, user, &req, &err);
	json_decref(body);
	if (rc < 0) {
		connect_stream_reply_error(r->req, "invalid_argument", "%s", err.msg);
		return;
	}
	rc = session_create(r->d, e2b_sandbox_id(r), &req, &rec, token, &err);
	exec_req_free(&req);
	explicit_bzero(token, sizeof(token));
	if (rc < 0) {
		connect_stream_reply_error(r->req, err.code == EBUSY ? "unavailable" : connect_code_of_errno(err.code),
					   "%s", err.msg);
		return;
	}
	s = session_loaded(r->d, rec.id);
	session_rec_clear(&rec);
	if (!s) {
		connect_stream_reply_error(r->req, "internal", "the session vanished");
		return;
	}
	session_set_free_running(s);
	ps = proc_new(r);
	if (!ps) {
		session_cancel(s);
		return;
	}
	/* The process dies at the deadline even if this stream is gone by then. */
	if ((timeout_ms = connect_timeout_ms(r->req)) > 0) {
		session_set_deadline(s, now_ms() + timeout_ms);
		ps->owns_deadline = true;
	}
	if (session_start(s, &err) < 0) {
		proc_release(ps);
		session_cancel(s);
		connect_stream_reply_error(r->req, err.code == EBUSY ? "unavailable" : connect_code_of_errno(err.code),
					   "%s", err.msg);
		return;
	}
	proc_begin(r, ps, s, 0);
}

void envd_process_connect(struct http_req *r)
{
	json_t *body = connect_request(r, true);
	struct proc_stream *ps;
	struct session *s;

	if (!body)
		return;
	s = find_process(r, body, true);
	json_decref(body);
	if (!s || !(ps = proc_new(r)))
		return;
	/* As envd: the output from now on (what was printed before went to earlier streams). */
	proc_begin(r, ps, s, session_output_length(s));
}

void envd_process_stream_input(struct http_req *r)
{
	connect_stream_reply_error(r->req, "unimplemented",
				   "StreamInput is not served; use SendInput (the SDKs do)");
}

/* ---- unary calls ---- */

struct list_ctx {
	json_t *arr;
	bool oom;
};

static int list_one(struct session *s, void *arg)
{
	struct list_ctx *c = arg;
	const struct session_rec *rec = session_rec(s);
	json_t *j;

	if (rec->state != SESS_RUNNING || rec->pid <= 0)
		return 0;
	j = envd_process_info(rec);
	if (!j || json_array_append_new(c->arr, j) < 0)
		c->oom = true;
	return 0;
}

void envd_process_list(struct http_req *r)
{
	json_t *body = connect_request(r, false);
	struct list_ctx c = { 0 };

	if (!body)
		return;
	json_decref(body);
	c.arr = json_array();
	if (c.arr)
		session_each_live(r->d, e2b_sandbox_id(r), list_one, &c);
	if (!c.arr || c.oom) {
		json_decref(c.arr);
		connect_reply_error(r->req, "internal", "out of memory listing processes");
		return;
	}
	connect_reply(r->req, json_pack("{s:o}", "processes", c.arr));
}

/* The unary calls' shared start: the request and the process it selects (NULL: answered). */
static struct session *unary_process(struct http_req *r, json_t **body)
{
	struct session *s;

	*body = connect_request(r, false);
	if (!*body)
		return NULL;
	s = find_process(r, *body, false);
	if (!s) {
		json_decref(*body);
		*body = NULL;
	}
	return s;
}

static void unary_done(struct http_req *r, json_t *body, int rc, const space_err *err)
{
	json_decref(body);
	if (rc < 0)
		connect_reply_error(r->req, err->code == EBUSY ? "failed_precondition" : connect_code_of_errno(err->code),
				    "%s", err->msg);
	else
		connect_reply(r->req, json_object());
}

void envd_process_send_input(struct http_req *r)
{
	space_err err = { 0 };
	uint8_t *data = NULL;
	size_t len = 0;
	bool pty = false;
	json_t *body;
	struct session *s = unary_process(r, &body);
	int rc;

	if (!s)
		return;
	rc = envd_input(body, &data, &len, &pty, &err);
	if (rc == 0)
		rc = session_stdin(s, data, len, 0, &err);
	free(data);
	unary_done(r, body, rc, &err);
}

void envd_process_send_signal(struct http_req *r)
{
	space_err err = { 0 };
	json_t *body;
	struct session *s = unary_process(r, &body);
	int signo = 0, rc;

	if (!s)
		return;
	rc = envd_signal(body, &signo, &err);
	if (rc == 0)
		rc = session_signal(s, signo, &err);
	unary_done(r, body, rc, &err);
}

void envd_process_close_stdin(struct http_req *r)
{
	space_err err = { 0 };
	json_t *body;
	struct session *s = unary_process(r, &body);

	if (!s)
		return;
	unary_done(r, body, session_stdin(s, NULL, 0, 1, &err), &err);
}

void envd_process_update(struct http_req *r)
{
	space_err err = { 0 };
	uint16_t rows = 0, cols = 0;
	json_t *body, *pty;
	struct session *s = unary_process(r, &body);
	int rc = 0;

	if (!s)
		return;
	pty = json_object_get(body, "pty");
	if (pty && !json_is_null(pty)) {
		rc = envd_pty_size(pty, &rows, &cols, &err);
		if (rc == 0)
			rc = session_resize(s, rows, cols, &err);
	}
	unary_done(r, body, rc, &err);
}
