/* connect.c -- the Connect protocol's JSON codec, server side: unary replies, errors, and server
 * streams of envelopes held open as chunked replies */
#include "connect.h"

#include <errno.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "daemon.h"
#include "log.h"

#define STREAM_HIGH_WATER (1u << 20)
#define KEEPALIVE_DEFAULT_S 50

static const struct {
	const char *code;
	int status;
} codes[] = {
	{ "canceled", 499 },          { "unknown", 500 },           { "invalid_argument", 400 },
	{ "deadline_exceeded", 504 }, { "not_found", 404 },         { "already_exists", 409 },
	{ "permission_denied", 403 }, { "resource_exhausted", 429 }, { "failed_precondition", 400 },
	{ "aborted", 409 },           { "out_of_range", 400 },      { "unimplemented", 501 },
	{ "internal", 500 },          { "unavailable", 503 },       { "data_loss", 500 },
	{ "unauthenticated", 401 },
};

int connect_code_status(const char *code)
{
	for (size_t i = 0; code && i < sizeof(codes) / sizeof(codes[0]); i++)
		if (strcmp(code, codes[i].code) == 0)
			return codes[i].status;
	return 500;
}

const char *connect_code_of_errno(int e)
{
	switch (e) {
	case ENOENT:
		return "not_found";
	case EEXIST:
	case ENOTEMPTY:
		return "already_exists";
	case EINVAL:
	case ENOTDIR:
	case EISDIR:
	case ENAMETOOLONG:
		return "invalid_argument";
	case EACCES:
	case EPERM:
	case EROFS:
		return "permission_denied";
	case EBUSY:
		return "failed_precondition";
	case EDQUOT:
	case ENOSPC:
	case E2BIG:
		return "resource_exhausted";
	case EAGAIN:
	case ECONNRESET:
	case EPIPE:
		return "unavailable";
	case ETIMEDOUT:
		return "deadline_exceeded";
	case ECANCELED:
		return "canceled";
	case ENOSYS:
		return "unimplemented";
	default:
		return "internal";
	}
}

int connect_envelope_add(struct evbuffer *out, uint8_t flags, const json_t *msg)
{
	char *s = json_dumps(msg, JSON_COMPACT);
	size_t n;
	uint8_t hdr[5];
	int rc;

	if (!s)
		return -1;
	n = strlen(s);
	hdr[0] = flags;
	hdr[1] = (uint8_t)(n >> 24);
	hdr[2] = (uint8_t)(n >> 16);
	hdr[3] = (uint8_t)(n >> 8);
	hdr[4] = (uint8_t)n;
	rc = evbuffer_add(out, hdr, sizeof(hdr)) == 0 && evbuffer_add(out, s, n) == 0 ? 0 : -1;
	free(s);
	return rc;
}

int connect_envelope_parse(const uint8_t *buf, size_t len, uint8_t *flags, json_t **msg, size_t *used,
			   space_err *err)
{
	uint32_t n;
	json_t *j;

	*msg = NULL;
	if (len < 5)
		return 1;
	n = (uint32_t)buf[1] << 24 | (uint32_t)buf[2] << 16 | (uint32_t)buf[3] << 8 | buf[4];
	if (buf[0] & CONNECT_FLAG_COMPRESSED)
		return err_set(err, EINVAL, "compressed messages are not supported");
	if (buf[0] & ~(CONNECT_FLAG_COMPRESSED | CONNECT_FLAG_END))
		return err_set(err, EINVAL, "unknown envelope flags 0x%02x", buf[0]);
	if (n > CONNECT_MAX_MESSAGE)
		return err_set(err, EINVAL, "message of %u bytes is over the limit (%u)", n, CONNECT_MAX_MESSAGE);
	if (len - 5 < n)
		return 1;
	j = http_parse_json_object((const char *)buf + 5, n, err);
	if (!j)
		return -1;
	*flags = buf[0];
	*msg = j;
	*used = 5 + (size_t)n;
	return 0;
}

json_t *connect_end_message(const char *code, const char *message)
{
	if (!code)
		return json_object();
	return json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", message ? message : "");
}

/* "application/json; charset=utf-8" is "application/json". */
static bool media_is(const char *h, const char *want)
{
	size_t n = strlen(want);

	return h && strncasecmp(h, want, n) == 0 && (h[n] == '\0' || h[n] == ';' || h[n] == ' ');
}

json_t *connect_request(struct http_req *r, bool streaming)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(r->req);
	const char *ct = evhttp_find_header(evhttp_request_get_input_headers(r->req), "Content-Type");
	size_t len = evbuffer_get_length(in);
	const uint8_t *p = len ? evbuffer_pullup(in, -1) : (const uint8_t *)"";
	space_err err = { 0 };
	uint8_t flags = 0;
	size_t used = 0;
	json_t *msg = NULL;

	if (!p) {
		connect_reply_error(r->req, "internal", "out of memory reading the request");
		return NULL;
	}
	if (!streaming) {
		if (!media_is(ct, "application/json")) {
			connect_reply_error(r->req, "unimplemented", "only the JSON codec (application/json) is served");
			return NULL;
		}
		msg = http_parse_json_object((const char *)p, len, &err);
		if (!msg)
			connect_reply_error(r->req, "invalid_argument", "%s", err.msg);
		return msg;
	}
	if (!media_is(ct, "application/connect+json")) {
		connect_stream_reply_error(r->req, "unimplemented",
					   "only the JSON codec (application/connect+json) is served");
		return NULL;
	}
	switch (connect_envelope_parse(p, len, &flags, &msg, &used, &err)) {
	case 0:
		if (used == len && !(flags & CONNECT_FLAG_END))
			return msg;
		json_decref(msg);
		connect_stream_reply_error(r->req, "invalid_argument", "a server stream takes exactly one message");
		return NULL;
	case 1:
		connect_stream_reply_error(r->req, "invalid_argument", "the request envelope is incomplete");
		return NULL;
	default:
		connect_stream_reply_error(r->req, "invalid_argument", "%s", err.msg);
		return NULL;
	}
}

void connect_reply(struct evhttp_request *req, json_t *msg)
{
	http_reply_json(req, 200, msg);
}

__attribute__((format(printf, 3, 0))) static void reply_error_v(struct evhttp_request *req, const char *code,
							    const char *fmt, va_list ap)
{
	char msg[1024];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	http_reply_json(req, connect_code_status(code), json_pack("{s:s,s:s}", "code", code, "message", msg));
}

void connect_reply_error(struct evhttp_request *req, const char *code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	reply_error_v(req, code, fmt, ap);
	va_end(ap);
}

void connect_reply_err(struct evhttp_request *req, const space_err *e)
{
	connect_reply_error(req, connect_code_of_errno(e->code), "%s", e->msg[0] ? e->msg : strerror(e->code));
}

void connect_stream_reply_error(struct evhttp_request *req, const char *code, const char *fmt, ...)
{
	struct evbuffer *b = evbuffer_new();
	char msg[1024];
	json_t *end;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	end = connect_end_message(code, msg);
	if (!b || !end || connect_envelope_add(b, CONNECT_FLAG_END, end) < 0) {
		json_decref(end);
		if (b)
			evbuffer_free(b);
		http_reply_error(req, 500, "internal", "out of memory");
		return;
	}
	json_decref(end);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/connect+json");
	evhttp_send_reply(req, 200, "OK", b);
	evbuffer_free(b);
}

int64_t connect_parse_timeout(const char *h)
{
	uint64_t v;

	if (!h || strlen(h) > 10 || http_parse_u64(h, &v) < 0)
		return 0;
	return (int64_t)v;
}

/* ---- streams ---- */

struct connect_stream {
	struct http_hold hold; /* first: stream_gone gets &hold */
	const struct connect_stream_ops *ops;
	void *arg;
	struct evbuffer *out;
	json_t *keepalive;
	struct event *ka_timer;
	struct timeval ka_every;
	bool sent_since_tick;
	struct event *deadline; /* the client's Connect-Timeout-Ms, or NULL */
};

static void stream_free(struct connect_stream *cs)
{
	if (cs->ka_timer)
		event_free(cs->ka_timer);
	if (cs->deadline)
		event_free(cs->deadline);
	if (cs->out)
		evbuffer_free(cs->out);
	json_decref(cs->keepalive);
	free(cs);
}

static void stream_gone(struct http_hold *h)
{
	struct connect_stream *cs = (struct connect_stream *)h;

	if (cs->ops && cs->ops->on_gone)
		cs->ops->on_gone(cs, cs->arg);
	stream_free(cs);
}

static struct bufferevent *stream_bev(const struct connect_stream *cs)
{
	return evhttp_connection_get_bufferevent(cs->hold.evcon);
}

static void stream_flushed(struct evhttp_connection *evcon, void *arg)
{
	struct connect_stream *cs = arg;

	(void)evcon;
	if (cs->ops && cs->ops->on_drain && !connect_stream_full(cs))
		cs->ops->on_drain(cs, cs->arg);
}

static void stream_keepalive(evutil_socket_t fd, short what, void *arg)
{
	struct connect_stream *cs = arg;

	(void)fd;
	(void)what;
	if (!cs->sent_since_tick && cs->keepalive)
		connect_stream_send(cs, cs->keepalive);
	cs->sent_since_tick = false;
}

/* As connect-go's server: the handler's context ends at the deadline, the stream with
 * deadline_exceeded and Go's text for it. */
static void stream_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct connect_stream *cs = arg;

	(void)fd;
	(void)what;
	if (cs->ops && cs->ops->on_deadline)
		cs->ops->on_deadline(cs, cs->arg);
	else if (cs->ops && cs->ops->on_gone)
		cs->ops->on_gone(cs, cs->arg);
	connect_stream_end(cs, "deadline_exceeded", "context deadline exceeded");
}

int64_t connect_timeout_ms(struct evhttp_request *req)
{
	return connect_parse_timeout(evhttp_find_header(evhttp_request_get_input_headers(req), "Connect-Timeout-Ms"));
}

unsigned connect_keepalive_s(struct evhttp_request *req)
{
	const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Keepalive-Ping-Interval");
	uint64_t every = KEEPALIVE_DEFAULT_S;

	if (h && (http_parse_u64(h, &every) < 0 || every == 0 || every > 3600))
		every = KEEPALIVE_DEFAULT_S;
	return (unsigned)every;
}

struct connect_stream *connect_stream_begin(struct http_req *r, const struct connect_stream_ops *ops, void *arg,
					    const json_t *keepalive)
{
	struct connect_stream *cs = calloc(1, sizeof(*cs));
	unsigned every = connect_keepalive_s(r->req);
	int64_t timeout_ms = connect_timeout_ms(r->req);
	struct timeval until = { (time_t)(timeout_ms / 1000), (suseconds_t)(timeout_ms % 1000) * 1000 };

	if (cs) {
		cs->ops = ops;
		cs->arg = arg;
		cs->out = evbuffer_new();
		cs->ka_every.tv_sec = (time_t)every;
		if (keepalive) {
			cs->keepalive = json_incref((json_t *)keepalive);
			cs->ka_timer = event_new(r->d->base, -1, EV_PERSIST, stream_keepalive, cs);
		}
		if (timeout_ms > 0)
			cs->deadline = evtimer_new(r->d->base, stream_deadline, cs);
	}
	if (!cs || !cs->out || (keepalive && !cs->ka_timer) || (timeout_ms > 0 && !cs->deadline)) {
		if (cs)
			stream_free(cs);
		http_reply_error(r->req, 500, "internal", "out of memory");
		return NULL;
	}
	evhttp_add_header(evhttp_request_get_output_headers(r->req), "Content-Type", "application/connect+json");
	evhttp_add_header(evhttp_request_get_output_headers(r->req), "Cache-Control", "no-store");
	http_reply_start(r->req, 200, "OK");
	http_hold_begin(&cs->hold, r->req, stream_gone, r->d->conns);
	if (cs->ka_timer)
		evtimer_add(cs->ka_timer, &cs->ka_every);
	if (cs->deadline)
		evtimer_add(cs->deadline, &until);
	return cs;
}

int connect_stream_send(struct connect_stream *cs, const json_t *msg)
{
	if (connect_envelope_add(cs->out, 0, msg) < 0) {
		evbuffer_drain(cs->out, evbuffer_get_length(cs->out));
		return -1;
	}
	evhttp_send_reply_chunk_with_cb(cs->hold.req, cs->out, stream_flushed, cs);
	evbuffer_drain(cs->out, evbuffer_get_length(cs->out));
	cs->sent_since_tick = true;
	return 0;
}

bool connect_stream_full(const struct connect_stream *cs)
{
	return evbuffer_get_length(bufferevent_get_output(stream_bev(cs))) >= STREAM_HIGH_WATER;
}

void connect_stream_end(struct connect_stream *cs, const char *code, const char *message)
{
	struct evhttp_request *req = cs->hold.req;
	json_t *end = connect_end_message(code, message);

	http_hold_end(&cs->hold);
	if (!end || connect_envelope_add(cs->out, CONNECT_FLAG_END, end) < 0)
		log_warn("connect: out of memory ending a stream");
	json_decref(end);
	if (evbuffer_get_length(cs->out))
		evhttp_send_reply_chunk(req, cs->out);
	evhttp_send_reply_end(req);
	stream_free(cs);
}
