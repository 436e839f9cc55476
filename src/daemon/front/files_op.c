/* files_op.c -- one file operation in a sandbox as one HTTP reply: runs the agent's operation
 * (an ephemeral session of kind file or watch), feeds it the request body, and turns its output
 * (a header line, then a body: docs/design/channels.md) into the reply, streamed with bounded
 * memory both ways. */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "front/fop.h"
#include "http/body.h"
#include "daemon.h"
#include "log.h"
#include "sandbox/sandbox.h"

/* fop_stdout: raw bytes beyond a sized reply's length. */
#define FOP_OVERRUN (-3)

/* An aborted reply's queued bytes get this long to reach the client before the close. */
#define FOP_ABORT_STEP_US 10000
#define FOP_ABORT_WAITS 300

/* Bytes of output read from the spool at once. */
#define FOP_CHUNK (256u << 10)
/* Reply bytes queued toward a client before we wait for it: a slow reader costs this much. */
#define FOP_HIGH_WATER (1u << 20)
/* The header line, one listing entry, one watch event: at most this long. */
#define FOP_LINE_MAX (64u << 10)
/* What we keep of the operation's stderr (its error JSON). */
#define FOP_ERR_MAX 4096
/* Request body bytes queued toward the agent at once. */
#define FOP_STDIN_BATCH (1u << 20)

struct fop {
	struct http_hold hold; /* first: fop_gone gets &hold */
	struct session_watch w;
	struct spaced *d;
	struct event *kick;
	struct evhttp_request *req;
	const struct fop_kind *k;
	void *ctx;             /* the route's own state (range, ...) */
	bool watching, replying, held, aborting, header_done, sent_stdin_close;
	unsigned abort_waits;  /* looks at the output while aborting (FOP_ABORT_WAITS at most) */
	bool pulled_all;       /* pull_stdin said the route's stdin is complete */
	struct evbuffer *line; /* the header line or an entry being assembled */
	struct evbuffer *err;  /* stderr */
	struct evbuffer *out;  /* a chunk being built */
	struct evbuffer *body; /* the request body not yet given to the session */
	struct http_body *sbody; /* the request body, streaming (NULL: evhttp read it whole) */
	uint8_t *buf;
	json_t *header;
	int status;            /* a unary reply's, when on_end set one */
	bool first;
	uint64_t body_bytes;   /* raw body bytes sent */
	uint64_t sized;        /* fop_reply_start_sized's length: body_bytes must end equal to it */
	bool is_sized;
	int nentries;
};

static void fop_release(struct fop *f)
{
	struct session *s = f->watching ? f->w.s : NULL;

	if (s) {
		/* The client went away mid-operation: the agent's child goes too. */
		session_set_stdin_room_cb(s, NULL, NULL);
		session_cancel(s);
		session_watch_del(&f->w);
	}
	if (f->kick)
		event_free(f->kick);
	if (f->line)
		evbuffer_free(f->line);
	if (f->err)
		evbuffer_free(f->err);
	if (f->out)
		evbuffer_free(f->out);
	if (f->body)
		evbuffer_free(f->body);
	json_decref(f->header);
	if (f->k && f->k->free_ctx)
		f->k->free_ctx(f->ctx);
	free(f->buf);
	free(f);
}

/* ---- errors ---- */

void files_errno_http(int e, int *status, const char **code)
{
	static const struct {
		int e, status;
		const char *code;
	} map[] = {
		{ ENOENT, 404, "not_found" },        { EEXIST, 409, "already_exists" },
		{ ENOTEMPTY, 409, "not_empty" },     { EACCES, 403, "permission_denied" },
		{ EPERM, 403, "permission_denied" }, { ENOTDIR, 400, "not_a_directory" },
		{ EISDIR, 400, "is_a_directory" },   { EINVAL, 400, "invalid_argument" },
		{ ELOOP, 400, "invalid_argument" },  { ENAMETOOLONG, 400, "invalid_argument" },
		{ EXDEV, 400, "invalid_argument" },  { ERANGE, 416, "range_not_satisfiable" },
		{ ENOSPC, 507, "no_space" },         { EDQUOT, 507, "no_space" },
		{ EROFS, 403, "read_only" },
	};

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (map[i].e == e) {
			*status = map[i].status;
			*code = map[i].code;
			return;
		}
	*status = 500;
	*code = "io_error";
}

/* Why the operation failed: its stderr JSON's message, or the errno's text. */
static void fop_error_text(struct fop *f, int e, char *msg, size_t len)
{
	size_t n = evbuffer_get_length(f->err);
	char *text = n ? (char *)evbuffer_pullup(f->err, -1) : NULL;
	json_t *j = NULL;
	const char *m = NULL;

	if (text) {
		char *nl = memchr(text, '\n', n);

		j = json_loadb(text, nl ? (size_t)(nl - text) : n, 0, NULL);
		m = json_string_value(json_object_get(j, "message"));
	}
	snprintf(msg, len, "%s", m ? m : strerror(e));
	json_decref(j);
}

/* An error answered before the reply began: by the route's on_error, else in our shape. */
static __attribute__((format(printf, 5, 6))) void fop_reply_error(struct fop *f, int e, int status, const char *code,
								 const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (f->k && f->k->on_error)
		f->k->on_error(f, e, status, code, msg);
	else
		http_reply_error(f->req, status, code, "%s", msg);
}

/* ---- the reply ---- */

static struct bufferevent *fop_bev(struct fop *f)
{
	return evhttp_connection_get_bufferevent(f->hold.evcon);
}

static void fop_flushed(struct evhttp_connection *evcon, void *arg)
{
	struct fop *f = arg;

	(void)evcon;
	event_active(f->kick, 0, 0);
}

static void fop_send(struct fop *f, struct evbuffer *chunk)
{
	if (!evbuffer_get_length(chunk))
		return;
	evhttp_send_reply_chunk_with_cb(f->hold.req, chunk, fop_flushed, f);
	evbuffer_drain(chunk, evbuffer_get_length(chunk));
}

void fop_reply_start(struct fop *f, int status, const char *reason)
{
	http_reply_start(f->req, status, reason);
	f->replying = true;
}

void fop_reply_start_sized(struct fop *f, int status, const char *reason, uint64_t len)
{
	char cl[24];

	snprintf(cl, sizeof(cl), "%" PRIu64, len);
	evhttp_remove_header(evhttp_request_get_output_headers(f->req), "Content-Length");
	evhttp_add_header(evhttp_request_get_output_headers(f->req), "Content-Length", cl);
	f->sized = len;
	f->is_sized = true;
	evhttp_send_reply_start(f->req, status, reason);
	f->replying = true;
}

struct evhttp_request *fop_req(struct fop *f)
{
	return f->req;
}

void fop_set_status(struct fop *f, int status)
{
	f->status = status;
}

bool fop_set_first(struct fop *f, bool v)
{
	bool was = f->first;

	f->first = v;
	return was;
}

int fop_open_doc(struct fop *f, const char *prefix, const json_t *j, const char *suffix)
{
	char *s = json_dumps(j ? j : json_null(), JSON_COMPACT | JSON_ENCODE_ANY);
	struct evbuffer *b = s ? evbuffer_new() : NULL;
	int rc = -1;

	if (b && evbuffer_add_printf(b, "%s%s%s", prefix, s, suffix) >= 0)
		rc = evbuffer_prepend_buffer(f->out, b);
	if (b)
		evbuffer_free(b);
	free(s);
	return rc;
}

json_t *fop_header(struct fop *f)
{
	return f->header;
}

void *fop_ctx(struct fop *f)
{
	return f->ctx;
}

static void fop_finish(struct fop *f)
{
	struct evhttp_request *req = f->hold.req;

	http_hold_end(&f->hold);
	if (evbuffer_get_length(f->out))
		evhttp_send_reply_chunk(req, f->out);
	evhttp_send_reply_end(req);
	fop_release(f);
}

/* A reply that cannot be answered any more (it began, then the operation failed): the only
 * honest end is to cut the connection, so that the client sees a short body, not a whole one.
 * Done from the kick event, outside every evhttp callback. */
static void fop_abort(struct fop *f, const char *why)
{
	log_warn("files: %s", why);
	f->aborting = true;
	event_active(f->kick, 0, 0);
}

static void fop_fail(struct fop *f, int e)
{
	char msg[1024];
	int status;
	const char *code;

	fop_error_text(f, e, msg, sizeof(msg));
	if (f->replying) {
		fop_abort(f, msg);
		return;
	}
	files_errno_http(e, &status, &code);
	if (f->held)
		http_hold_end(&f->hold);
	fop_reply_error(f, e, status, code, "%s", msg);
	fop_release(f);
}

/* ---- output of the operation ---- */

static int fop_on_line(struct fop *f, const char *line, size_t len)
{
	if (!f->header_done) {
		json_error_t je;

		f->header = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
		if (!json_is_object(f->header))
			return -1;
		f->header_done = true;
		return f->k->on_header ? f->k->on_header(f) : 0; /* may be FOP_RANGE_NOT_SATISFIABLE */
	}
	f->nentries++;
	return f->k->on_line ? f->k->on_line(f, line, len, f->out) : 0;
}

/* stdout bytes: lines until the header (and, for line kinds, always), raw after it. */
static int fop_stdout(struct fop *f, const uint8_t *p, size_t n)
{
	while (n) {
		if (f->header_done && f->k->on_raw) {
			if (f->is_sized && n > f->sized - f->body_bytes)
				return FOP_OVERRUN;
			f->body_bytes += n;
			return f->k->on_raw(f, p, n, f->out);
		}
		const uint8_t *nl = memchr(p, '\n', n);
		size_t take = nl ? (size_t)(nl - p) : n;

		if (evbuffer_get_length(f->line) + take > FOP_LINE_MAX)
			return -1;
		evbuffer_add(f->line, p, take);
		p += take;
		n -= take;
		if (!nl)
			break;
		p++;
		n--;
		size_t ll = evbuffer_get_length(f->line);
		char *line = (char *)evbuffer_pullup(f->line, -1);
		int rc = fop_on_line(f, line ? line : "", ll);

		evbuffer_drain(f->line, ll);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static void fop_end(struct fop *f, struct session *s)
{
	const struct session_rec *rec = session_rec(s);

	if (rec->state == SESS_FAILED) {
		if (f->replying) {
			fop_abort(f, rec->error[0] ? rec->error : "the operation failed");
			return;
		}
		if (f->held)
			http_hold_end(&f->hold);
		fop_reply_error(f, 0, 503, "unavailable", "%s", rec->error[0] ? rec->error : "the operation failed");
		fop_release(f);
		return;
	}
	if (rec->exit_signal || rec->exit_code != 0 || !f->header_done) {
		int e = rec->exit_code > 0 && rec->exit_code < 256 ? rec->exit_code : EIO;

		fop_fail(f, e);
		return;
	}
	if (f->is_sized && f->body_bytes != f->sized) {
		fop_abort(f, "the guest ended after fewer bytes than it declared");
		return;
	}
	if (f->k->on_end && f->k->on_end(f, f->out) < 0) {
		fop_abort(f, "the reply could not be completed");
		return;
	}
	if (!f->replying && f->k->on_done) {
		/* The route takes the request over (answers it, or runs a next operation on it). */
		if (f->held)
			http_hold_end(&f->hold);
		f->held = false;
		f->k->on_done(f, f->out);
		fop_release(f);
		return;
	}
	if (!f->replying) {
		/* A unary operation: the reply is what on_end put in out, as JSON. */
		if (f->held)
			http_hold_end(&f->hold);
		evhttp_add_header(evhttp_request_get_output_headers(f->req), "Content-Type", "application/json");
		evhttp_send_reply(f->req, f->status ? f->status : f->k->ok_status ? f->k->ok_status : 200, "OK", f->out);
		fop_release(f);
		return;
	}
	fop_finish(f);
}

/* The client stopped sending its body halfway, or sent a malformed one: the operation is
 * killed (a write then leaves the old file as it was) and the request answered 400. */
static void fop_body_failed(struct fop *f)
{
	space_err e = { 0 };

	if (f->w.s && !session_done(f->w.s))
		(void)session_signal(f->w.s, 9, &e);
	if (f->held)
		http_hold_end(&f->hold);
	fop_reply_error(f, EINVAL, 400, "bad_request", "the request body was malformed or cut short; nothing was written");
	fop_release(f);
}

/* Body bytes to the session while its stdin has room: from evhttp's whole body, or pulled from
 * a streaming one no faster than the guest takes them. 1 when f was answered and freed. */
static int fop_feed(struct fop *f)
{
	struct session *s = f->w.s;
	space_err e = { 0 };

	if (!s || !f->body || session_done(s))
		return 0;
	if (f->k->pull_stdin && !f->sent_stdin_close) {
		size_t room = session_stdin_room(s), have = evbuffer_get_length(f->body);
		int rc = 0;

		if (room > FOP_STDIN_BATCH)
			room = FOP_STDIN_BATCH;
		if (room > have)
			rc = f->k->pull_stdin(f, f->body, room - have);
		if (rc < 0) {
			fop_body_failed(f);
			return 1;
		}
		if (rc == 1)
			f->pulled_all = true;
	}
	if (f->sbody) {
		size_t want = session_stdin_room(s), have = evbuffer_get_length(f->body);

		if (http_body_failed(f->sbody)) {
			fop_body_failed(f);
			return 1;
		}
		if (want > have)
			http_body_read(f->sbody, f->body, want - have);
		if (!http_body_done(f->sbody) && !evbuffer_get_length(f->body))
			return 0;
	}
	while (evbuffer_get_length(f->body) && session_stdin_room(s) > 0) {
		size_t n = evbuffer_get_length(f->body), room = session_stdin_room(s);

		if (n > room)
			n = room;
		if (n > FOP_STDIN_BATCH)
			n = FOP_STDIN_BATCH;
		if (session_stdin(s, evbuffer_pullup(f->body, (ev_ssize_t)n), n, 0, &e) < 0)
			return 0;
		evbuffer_drain(f->body, n);
	}
	if (!evbuffer_get_length(f->body) && !f->sent_stdin_close && (!f->sbody || http_body_done(f->sbody)) &&
	    (!f->k->pull_stdin || f->pulled_all)) {
		f->sent_stdin_close = true;
		(void)session_stdin(s, NULL, 0, 1, &e);
	}
	return 0;
}

static void fop_pump(struct fop *f)
{
	struct session *s = f->w.s;
	space_err err = { 0 };
	bool moved = false;

	if (!s) {
		if (f->replying)
			fop_abort(f, "the sandbox went away");
		else
			fop_fail(f, EIO);
		return;
	}
	if (fop_feed(f))
		return;
	for (;;) {
		int stream = 0;
		ssize_t n;

		if (f->replying && evbuffer_get_length(bufferevent_get_output(fop_bev(f))) >= FOP_HIGH_WATER)
			break;
		if (f->w.pos < session_output_start(s)) {
			fop_abort(f, "the operation's output was dropped");
			return;
		}
		n = session_output_read(s, f->w.pos, &stream, f->buf, FOP_CHUNK, &err);
		if (n < 0) {
			fop_abort(f, err.msg);
			return;
		}
		if (n == 0)
			break;
		f->w.pos += (uint64_t)n;
		moved = true;
		if (stream == 2) {
			size_t have = evbuffer_get_length(f->err);

			if (have < FOP_ERR_MAX)
				evbuffer_add(f->err, f->buf, (size_t)n < FOP_ERR_MAX - have ? (size_t)n : FOP_ERR_MAX - have);
			continue;
		}
		int rc = fop_stdout(f, f->buf, (size_t)n);

		if (rc == FOP_RANGE_NOT_SATISFIABLE && !f->replying) {
			json_int_t size = json_integer_value(json_object_get(f->header, "size"));
			char cr[48];

			session_signal(s, 9, &err);
			snprintf(cr, sizeof(cr), "bytes */%" PRId64, (int64_t)size);
			evhttp_add_header(evhttp_request_get_output_headers(f->req), "Content-Range", cr);
			if (f->held)
				http_hold_end(&f->hold);
			fop_reply_error(f, ERANGE, 416, "range_not_satisfiable",
					"the range starts at or past the end (%" PRId64 " bytes)", (int64_t)size);
			fop_release(f);
			return;
		}
		if (rc < 0) {
			session_signal(s, 9, &err);
			if (f->replying) {
				fop_abort(f, rc == FOP_OVERRUN ? "the guest sent more bytes than it declared"
							       : "the operation's output was malformed");
			} else {
				if (f->held)
					http_hold_end(&f->hold);
				fop_reply_error(f, 0, 502, "bad_gateway", "the guest agent's answer was malformed");
				fop_release(f);
			}
			return;
		}
		if (f->replying)
			fop_send(f, f->out);
		if (f->aborting)
			return;
	}
	/* What the route added on its own since (a stream's keepalive, then fop_poke) goes too. */
	if (f->replying)
		fop_send(f, f->out);
	if (moved)
		session_watch_progress(&f->w);
	if (session_done(s) && f->w.pos >= session_output_length(s))
		fop_end(f, s);
}

static void fop_kick(evutil_socket_t fd, short what, void *arg)
{
	struct fop *f = arg;

	(void)fd;
	(void)what;
	if (f->aborting) {
		/* What went out before the failure reaches the client first (the head and the bytes
		 * sent so far: it sees a short body, not nothing), for a little while; then the close.
		 * closecb -> hold gone -> fop_gone frees f. */
		if (evbuffer_get_length(bufferevent_get_output(fop_bev(f))) && f->abort_waits++ < FOP_ABORT_WAITS) {
			struct timeval tv = { .tv_usec = FOP_ABORT_STEP_US };

			event_add(f->kick, &tv);
			return;
		}
		evhttp_connection_free(f->hold.evcon);
		return;
	}
	fop_pump(f);
}

static void fop_wake(struct session_watch *w)
{
	struct fop *f = (struct fop *)((char *)w - offsetof(struct fop, w));

	event_active(f->kick, 0, 0);
}

static void fop_stdin_room(struct session *s, void *arg)
{
	struct fop *f = arg;

	(void)s;
	event_active(f->kick, 0, 0);
}

static void fop_body_more(struct http_body *b, void *arg)
{
	struct fop *f = arg;

	(void)b;
	event_active(f->kick, 0, 0);
}

static void fop_gone(struct http_hold *h)
{
	fop_release((struct fop *)h);
}

void fop_poke(struct fop *f)
{
	event_active(f->kick, 0, 0);
}

struct evbuffer *fop_out(struct fop *f)
{
	return f->out;
}

void fop_run(struct http_req *r, const char *sb_id, const struct fop_kind *k, const char *const *argv,
	     const char *user, void *ctx)
{
	struct fop *f = calloc(1, sizeof(*f));
	struct evbuffer *in = evhttp_request_get_input_buffer(r->req);
	space_err err = { 0 };
	struct session *s;

	if (f) {
		f->d = r->d;
		f->req = r->req;
		f->k = k;
		f->ctx = ctx;
		ctx = NULL;
		f->buf = malloc(FOP_CHUNK);
		f->line = evbuffer_new();
		f->err = evbuffer_new();
		f->out = evbuffer_new();
		f->kick = event_new(r->d->base, -1, 0, fop_kick, f);
		if (k->with_stdin && (f->body = evbuffer_new()) && !k->pull_stdin && !(f->sbody = http_body_get(r)))
			evbuffer_add_buffer(f->body, in);
	}
	if (!f || !f->buf || !f->line || !f->err || !f->out || !f->kick || (k->with_stdin && !f->body)) {
		if (f) {
			fop_reply_error(f, ENOMEM, 500, "internal", "out of memory");
			fop_release(f);
		} else {
			if (k->free_ctx)
				k->free_ctx(ctx);
			http_reply_error(r->req, 500, "internal", "out of memory");
		}
		return;
	}
	s = session_open_internal(r->d, sb_id, k->kind, argv, user, k->with_stdin, &err);
	if (!s) {
		int e = err.code ? err.code : EIO;

		fop_reply_error(f, e, err_http_status(e), err_code_name(e), "%s", err.msg[0] ? err.msg : strerror(e));
		fop_release(f);
		return;
	}
	f->w.fn = fop_wake;
	session_watch_add(s, &f->w);
	f->watching = true;
	if (k->with_stdin) {
		session_set_stdin_room_cb(s, fop_stdin_room, f);
	}
	http_hold_begin(&f->hold, r->req, fop_gone, r->d->conns);
	f->held = true;
	if (f->sbody)
		http_body_notify(f->sbody, fop_body_more, f);
	fop_pump(f);
}
