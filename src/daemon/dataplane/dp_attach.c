/* dp_attach.c -- a session's output as server-sent events, resumable by offset, paced by the client */
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "sandbox/sandbox.h"
#include "dataplane.h"
#include "log.h"
#include "metrics/metrics.h"

/* Payload bytes per event at most (base64 makes it ~87 KiB on the wire). */
#define SSE_CHUNK (64u << 10)
/* Bytes queued in one client's connection before we wait for it to drain:
 * a slow client costs at most this much memory, and its reader position
 * (w.pos) stays honest, so the process is paced by what clients took. */
#define SSE_HIGH_WATER (512u << 10)
/* Write this much per loop turn to a stream (libevent's default is 16 KiB). */
#define SSE_SINGLE_WRITE (256u << 10)
#ifndef SSE_KEEPALIVE_S /* the stub test builds with a shorter one */
#define SSE_KEEPALIVE_S 15
#endif

/*
 * One attached client. Lifetime: created by dp_attach; freed exactly once,
 * either by sse_finish (stream ended by us: reply completed) or by sse_gone
 * (client went away: libevent already released the request). The session
 * watch only *schedules* work (event_active on `kick`), so the watch is never
 * removed or freed from inside the session's notify loop.
 */
struct sse {
	struct http_hold hold; /* first: sse_gone gets &hold */
	struct session_watch w;
	struct event *kick;
	struct event *keepalive;
	struct evbuffer *ev;   /* one event being formatted */
	uint8_t *buf;          /* SSE_CHUNK bytes read from the spool */
	bool watching;
	/* On d->streams while counted against the stream caps. */
	struct spaced *d;
	struct sse *next, *prev;
	char sandbox_id[sizeof(((struct session_rec *)0)->sandbox_id)];
};

int sse_format_data(struct evbuffer *out, const char *event, uint64_t id, const void *data, size_t len)
{
	struct evbuffer_iovec iov;
	size_t need = 4 * ((len + 2) / 3) + 1; /* EVP_EncodeBlock writes a NUL */

	if (len > (1u << 28))
		return -1;
	if (evbuffer_add_printf(out, "event: %s\nid: %" PRIu64 "\ndata: ", event, id) < 0)
		return -1;
	if (len) {
		if (evbuffer_reserve_space(out, (ev_ssize_t)need, &iov, 1) < 1)
			return -1;
		iov.iov_len = (size_t)EVP_EncodeBlock(iov.iov_base, data, (int)len);
		if (evbuffer_commit_space(out, &iov, 1) < 0)
			return -1;
	}
	return evbuffer_add(out, "\n\n", 2);
}

int sse_start_offset(const char *last_event_id, const char *offset_param, uint64_t length, uint64_t *out,
		     space_err *err)
{
	const char *s = last_event_id && *last_event_id ? last_event_id : offset_param;
	uint64_t off = 0;

	if (s && http_parse_u64(s, &off) < 0)
		return err_set(err, EINVAL, "offset must be a non-negative integer");
	if (off > length)
		return err_set(err, EINVAL, "offset %" PRIu64 " is beyond the output (%" PRIu64 " bytes)", off,
			       length);
	*out = off;
	return 0;
}

static unsigned streams_of(const struct spaced *d, const char *sandbox_id)
{
	unsigned n = 0;

	for (const struct sse *c = d->streams; c; c = c->next)
		n += strcmp(c->sandbox_id, sandbox_id) == 0;
	return n;
}

/* Takes a place for a new stream of sandbox_id, or answers 429. */
static int streams_admit(struct http_req *r, const char *sandbox_id)
{
	const struct config *cfg = &r->d->cfg;

	switch (http_cap_check(r->d->nstreams, streams_of(r->d, sandbox_id), (unsigned)cfg->max_streams,
			       (unsigned)cfg->max_streams_per_sandbox)) {
	case HTTP_CAP_OK:
		return 0;
	case HTTP_CAP_TOTAL:
		http_reply_error(r->req, 429, "at_capacity", "too many attached streams on this server (%d); retry later",
				 cfg->max_streams);
		return -1;
	case HTTP_CAP_GROUP:
		http_reply_error(r->req, 429, "at_capacity",
				 "too many attached streams on sandbox %s (%d); close one first", sandbox_id,
				 cfg->max_streams_per_sandbox);
		return -1;
	}
	return -1;
}

static void streams_add(struct sse *c, struct spaced *d, const char *sandbox_id)
{
	c->d = d;
	snprintf(c->sandbox_id, sizeof(c->sandbox_id), "%s", sandbox_id);
	c->next = d->streams;
	if (d->streams)
		d->streams->prev = c;
	d->streams = c;
	d->nstreams++;
}

static void streams_del(struct sse *c)
{
	if (!c->d)
		return;
	if (c->prev)
		c->prev->next = c->next;
	else
		c->d->streams = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->d->nstreams--;
	c->d = NULL;
}

static void sse_release(struct sse *c)
{
	streams_del(c);
	if (c->watching)
		session_watch_del(&c->w);
	if (c->kick)
		event_free(c->kick);
	if (c->keepalive)
		event_free(c->keepalive);
	if (c->ev)
		evbuffer_free(c->ev);
	free(c->buf);
	free(c);
}

static struct bufferevent *sse_bev(struct sse *c)
{
	return evhttp_connection_get_bufferevent(c->hold.evcon);
}

static void sse_flushed(struct evhttp_connection *evcon, void *arg)
{
	struct sse *c = arg;

	(void)evcon;
	event_active(c->kick, 0, 0);
}

static void sse_send(struct sse *c)
{
	evhttp_send_reply_chunk_with_cb(c->hold.req, c->ev, sse_flushed, c);
	evbuffer_drain(c->ev, evbuffer_get_length(c->ev));
}

/* Sends the last event (already in c->ev, or none) and completes the reply. */
static void sse_finish(struct sse *c)
{
	struct evhttp_request *req = c->hold.req;

	http_hold_end(&c->hold);
	if (evbuffer_get_length(c->ev))
		evhttp_send_reply_chunk(req, c->ev);
	evhttp_send_reply_end(req);
	sse_release(c);
}

static void sse_fail(struct sse *c, const char *message)
{
	json_t *j = json_pack("{s:s}", "message", message);
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

	json_decref(j);
	evbuffer_add_printf(c->ev, "event: error\ndata: %s\n\n", s ? s : "{\"message\":\"internal error\"}");
	free(s);
	sse_finish(c);
}

/* The process is done and the reader has everything: exit (or error) event. */
static void sse_exit(struct sse *c, struct session *s)
{
	const struct session_rec *rec = session_rec(s);

	if (rec->state == SESS_FAILED) {
		sse_fail(c, rec->error[0] ? rec->error : "the session failed");
		return;
	}
	if (rec->exit_signal > 0)
		evbuffer_add_printf(c->ev, "event: exit\nid: %" PRIu64 "\ndata: {\"exit_code\":null,\"signal\":%d}\n\n",
				    c->w.pos, rec->exit_signal);
	else
		evbuffer_add_printf(c->ev, "event: exit\nid: %" PRIu64 "\ndata: {\"exit_code\":%d,\"signal\":null}\n\n",
				    c->w.pos, rec->exit_code);
	sse_finish(c);
}

/* Up to SSE_CHUNK bytes from w.pos, joining consecutive records of the same
 * stream into one event. */
static ssize_t read_chunk(struct sse *c, struct session *s, int *stream, space_err *err)
{
	size_t got = 0;
	int first = 0;

	while (got < SSE_CHUNK) {
		int st = 0;
		ssize_t n = session_output_read(s, c->w.pos + got, &st, c->buf + got, SSE_CHUNK - got, err);
		if (n < 0)
			return got ? (ssize_t)got : -1; /* the error comes back on the next read */
		if (n == 0 || (got && st != first))
			break; /* another stream's bytes: read again for the next event */
		first = st;
		got += (size_t)n;
	}
	*stream = first;
	return (ssize_t)got;
}

static void sse_pump(struct sse *c)
{
	struct session *s = c->w.s;
	struct evbuffer *out;
	space_err err = { 0 };
	bool moved = false;
	ssize_t n = 0;

	if (!s) {
		sse_fail(c, "the session is no longer available");
		return;
	}
	out = bufferevent_get_output(sse_bev(c));
	while (evbuffer_get_length(out) < SSE_HIGH_WATER) {
		int stream = 1;
		uint64_t kept = session_output_start(s);

		if (c->w.pos < kept) {
			/* The output caps dropped these bytes: say which, then go on from what is kept
			 * (offsets keep counting from the session's start). */
			evbuffer_add_printf(c->ev, "event: dropped\nid: %" PRIu64 "\ndata: {\"from\":%" PRIu64
					    ",\"to\":%" PRIu64 "}\n\n", kept, c->w.pos, kept);
			sse_send(c);
			c->w.pos = kept;
			moved = true;
			continue;
		}
		n = read_chunk(c, s, &stream, &err);
		if (n < 0) {
			log_warn("attach %s: %s", session_rec(s)->id, err.msg);
			sse_fail(c, err.msg);
			return;
		}
		if (n == 0)
			break;
		if (sse_format_data(c->ev, stream == 2 ? "stderr" : "stdout", c->w.pos + (uint64_t)n, c->buf,
				    (size_t)n) < 0) {
			evbuffer_drain(c->ev, evbuffer_get_length(c->ev));
			sse_fail(c, "out of memory");
			return;
		}
		sse_send(c);
		metrics_output_sent(MX_TR_SSE, stream, (uint64_t)n);
		c->w.pos += (uint64_t)n;
		moved = true;
	}
	if (moved)
		session_watch_progress(&c->w);
	if (n == 0 && session_done(s) && c->w.pos >= session_output_length(s))
		sse_exit(c, s);
}

static void sse_kick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	sse_pump(arg);
}

/* From the session's notify loop: only schedule. */
static void sse_wake(struct session_watch *w)
{
	struct sse *c = (struct sse *)((char *)w - offsetof(struct sse, w));

	event_active(c->kick, 0, 0);
}

static void sse_keepalive(evutil_socket_t fd, short what, void *arg)
{
	struct sse *c = arg;

	(void)fd;
	(void)what;
	if (evbuffer_get_length(bufferevent_get_output(sse_bev(c))) == 0) {
		evbuffer_add(c->ev, ": keepalive\n\n", 13);
		sse_send(c);
	}
}

static void sse_gone(struct http_hold *h)
{
	struct sse *c = (struct sse *)h;

	sse_release(c);
}

void dp_attach(struct http_req *r)
{
	struct session *s = r->obj;
	struct evkeyvalq *hdrs = evhttp_request_get_output_headers(r->req);
	struct timeval ka = { .tv_sec = SSE_KEEPALIVE_S };
	space_err err = { 0 }, start_err = { 0 };
	uint64_t start;
	struct sse *c;
	int started;

	if (sse_start_offset(evhttp_find_header(evhttp_request_get_input_headers(r->req), "Last-Event-ID"),
			     http_query(r, "offset"), session_output_length(s), &start, &err) < 0) {
		http_reply_err(r->req, &err);
		return;
	}
	if (streams_admit(r, session_rec(s)->sandbox_id) < 0)
		return;
	c = calloc(1, sizeof(*c));
	if (c) {
		c->buf = malloc(SSE_CHUNK);
		c->ev = evbuffer_new();
		c->kick = event_new(r->d->base, -1, 0, sse_kick, c);
		c->keepalive = event_new(r->d->base, -1, EV_PERSIST, sse_keepalive, c);
	}
	if (!c || !c->buf || !c->ev || !c->kick || !c->keepalive) {
		if (c)
			sse_release(c);
		http_reply_error(r->req, 500, "internal", "out of memory");
		return;
	}
	streams_add(c, r->d, session_rec(s)->sandbox_id);
	started = session_start(s, &start_err);

	evhttp_add_header(hdrs, "Content-Type", "text/event-stream");
	evhttp_add_header(hdrs, "Cache-Control", "no-store");
	evhttp_add_header(hdrs, "X-Accel-Buffering", "no");
	http_reply_start(r->req, 200, "OK");
	http_hold_begin(&c->hold, r->req, sse_gone, r->d->conns);
	bufferevent_set_max_single_write(sse_bev(c), SSE_SINGLE_WRITE);
	if (started < 0) {
		sse_fail(c, start_err.msg[0] ? start_err.msg : "the process could not start");
		return;
	}
	evtimer_add(c->keepalive, &ka);
	c->w.fn = sse_wake;
	c->w.pos = start;
	session_watch_add(s, &c->w);
	c->watching = true;
	sse_pump(c);
}
