/* api_events.c -- GET /v1/events: lifecycle events after a cursor, as a JSON page (a long-poll
 * with wait=S) or, for Accept: text/event-stream, as a stream resumable by Last-Event-ID */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "daemon.h"
#include "events/events.h"

#define WAIT_MAX_S 60
#define STREAM_HIGH (4u << 20) /* a reader this far behind is let go (it resumes by its cursor) */
#define KEEPALIVE_S 15

static int parse_i64(const char *v, int64_t lo, int64_t hi, int64_t *out)
{
	char *end = NULL;
	long long n;

	if (!v || !*v || *v < '0' || *v > '9')
		return -1;
	errno = 0;
	n = strtoll(v, &end, 10);
	if (errno || *end || n < lo || n > hi)
		return -1;
	*out = n;
	return 0;
}

/* The query's parameters, or a 400 answered. */
static int parse_query(struct http_req *r, struct events_query *q, bool stream)
{
	const char *after = http_query(r, "after"), *wait = http_query(r, "wait"), *limit = http_query(r, "limit");
	const char *sb = http_query(r, "sandbox"), *types = http_query(r, "types");
	const char *last = evhttp_find_header(evhttp_request_get_input_headers(r->req), "Last-Event-ID");
	space_err err = { 0 };
	int64_t n;

	memset(q, 0, sizeof(*q));
	q->limit = 100;
	if (stream && !after && last)
		after = last;
	if (after && parse_i64(after, 0, INT64_MAX, &q->after) < 0) {
		http_req_error(r, 400, "bad_request", "after: a cursor (a decimal number from an earlier page)");
		return -1;
	}
	if (wait) {
		if (parse_i64(wait, 0, WAIT_MAX_S, &n) < 0) {
			http_req_error(r, 400, "bad_request", "wait: 0 to %d seconds", WAIT_MAX_S);
			return -1;
		}
		q->wait_ms = (int)n * 1000;
	}
	if (limit) {
		if (parse_i64(limit, 1, EVENTS_PAGE_MAX, &n) < 0) {
			http_req_error(r, 400, "bad_request", "limit: 1 to %d", EVENTS_PAGE_MAX);
			return -1;
		}
		q->limit = (int)n;
	}
	if (sb) {
		if (!id_valid(sb, "sb-")) {
			http_req_error(r, 400, "bad_request", "sandbox: a sandbox id (sb-...)");
			return -1;
		}
		snprintf(q->sandbox, sizeof(q->sandbox), "%s", sb);
	}
	if (ev_types_csv(types, &q->mask, &err) < 0) {
		http_req_err(r, &err);
		return -1;
	}
	return 0;
}

static json_t *page_json(const struct events_page *p)
{
	json_t *arr = json_array();
	char cursor[24];

	for (size_t i = 0; arr && p && i < p->n; i++)
		json_array_append_new(arr, event_json(&p->v[i]));
	snprintf(cursor, sizeof(cursor), "%lld", (long long)(p ? p->cursor : 0));
	return json_pack("{s:o,s:s,s:b}", "events", arr ? arr : json_array(), "cursor", cursor, "has_more",
			 p && p->more);
}

/* ---- one page (a long-poll when wait is given) ---- */

struct poll {
	struct http_hold hold;
	struct events_wait *w;
};

static void poll_gone(struct http_hold *h)
{
	struct poll *p = (struct poll *)((char *)h - offsetof(struct poll, hold));

	events_query_cancel(p->w);
	free(p);
}

static void poll_answer(void *arg, struct events_page *page, const space_err *err)
{
	struct poll *p = arg;
	struct evhttp_request *req = p->hold.req;

	http_hold_end(&p->hold);
	if (err)
		http_reply_err(req, err);
	else
		http_reply_json(req, 200, page_json(page));
	free(p);
}

/* ---- a stream ---- */

struct stream {
	struct spaced *d;
	struct http_hold hold;
	struct events_sub sub;
	struct events_query q;
	struct evbuffer *out;
	struct event *alive;
};

static void stream_free(struct stream *s)
{
	events_unsubscribe(s->d, &s->sub);
	if (s->alive)
		event_free(s->alive);
	if (s->out)
		evbuffer_free(s->out);
	free(s);
}

static void stream_gone(struct http_hold *h)
{
	stream_free((struct stream *)((char *)h - offsetof(struct stream, hold)));
}

static void stream_end(struct stream *s)
{
	struct evhttp_request *req = s->hold.req;

	http_hold_end(&s->hold);
	evhttp_send_reply_end(req);
	stream_free(s);
}

static int stream_one(const struct sb_event *e, void *arg)
{
	struct stream *s = arg;
	json_t *j = event_json(e);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;

	json_decref(j);
	if (text) {
		evbuffer_add_printf(s->out, "id: %lld\nevent: %s\ndata: %s\n\n", (long long)e->seq, ev_type_name(e->type),
				    text);
		free(text);
	}
	s->q.after = e->seq;
	return 0;
}

static void stream_flush(struct stream *s)
{
	struct bufferevent *bev = evhttp_connection_get_bufferevent(s->hold.evcon);

	if (!evbuffer_get_length(s->out))
		return;
	evhttp_send_reply_chunk(s->hold.req, s->out);
	if (bev && evbuffer_get_length(bufferevent_get_output(bev)) > STREAM_HIGH)
		stream_end(s);
}

static void stream_event(struct events_sub *sub, const struct sb_event *e)
{
	struct stream *s = (struct stream *)((char *)sub - offsetof(struct stream, sub));
	bool sb_ok = !s->q.sandbox[0] || strcmp(s->q.sandbox, e->sandbox_id) == 0;

	if (!(s->q.mask & (1u << e->type)) || !sb_ok)
		return;
	stream_one(e, s);
	stream_flush(s);
}

static void stream_alive(evutil_socket_t fd, short what, void *arg)
{
	struct stream *s = arg;

	(void)fd;
	(void)what;
	evbuffer_add(s->out, ":\n\n", 3);
	stream_flush(s);
}

static void stream_start(struct http_req *r, const struct events_query *q)
{
	struct stream *s = calloc(1, sizeof(*s));
	struct timeval every = { KEEPALIVE_S, 0 };
	struct evkeyvalq *hdrs = evhttp_request_get_output_headers(r->req);

	if (!s || !(s->out = evbuffer_new()) || !(s->alive = event_new(r->d->base, -1, EV_PERSIST, stream_alive, s))) {
		if (s && s->out)
			evbuffer_free(s->out);
		free(s);
		http_req_error(r, 500, "internal", "out of memory");
		return;
	}
	s->d = r->d;
	s->q = *q;
	s->sub.fn = stream_event;
	evhttp_add_header(hdrs, "Content-Type", "text/event-stream");
	evhttp_add_header(hdrs, "Cache-Control", "no-store");
	evhttp_add_header(hdrs, "X-Accel-Buffering", "no");
	http_hold_begin(&s->hold, r->req, stream_gone, r->d->conns);
	evhttp_send_reply_start(r->req, 200, "OK");
	/* What is in memory after the cursor first (older ones: GET pages), then as they come. */
	events_mem_each(r->d, s->q.after, s->q.sandbox[0] ? s->q.sandbox : NULL, s->q.mask, 0, stream_one, s);
	evbuffer_add(s->out, ":\n\n", 3);
	events_subscribe(r->d, &s->sub);
	evtimer_add(s->alive, &every);
	stream_flush(s);
}

static bool wants_stream(struct http_req *r)
{
	const char *a = evhttp_find_header(evhttp_request_get_input_headers(r->req), "Accept");

	return (a && strstr(a, "text/event-stream")) || (http_query(r, "stream") && strcmp(http_query(r, "stream"), "1") == 0);
}

void api_events_list(struct http_req *r)
{
	bool stream = wants_stream(r) && r->d->cfg.role != DROLE_API;
	struct events_query q;
	struct poll *p;

	if (parse_query(r, &q, stream) < 0)
		return;
	if (stream) {
		stream_start(r, &q);
		return;
	}
	if (!(p = calloc(1, sizeof(*p)))) {
		http_req_error(r, 500, "internal", "out of memory");
		return;
	}
	/* Held before the query: its answer (at once, the usual case, or later) ends the hold and
	 * frees p, so p is touched after the call only when it waits. */
	http_hold_begin(&p->hold, r->req, poll_gone, r->d->conns);
	struct events_wait *w = events_query(r->d, &q, poll_answer, p);
	if (w)
		p->w = w;
}
