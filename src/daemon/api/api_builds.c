/* api_builds.c -- /v1/templates/builds: a build started (its plan read on the store's thread,
 * then build_start), a build's state, every build, and a build's event log as server-sent
 * events resumable from any event's id (?offset= or Last-Event-ID). The rules are build/'s. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "build/build.h"
#include "daemon.h"
#include "front/front.h"

#define LOGS_CHUNK (64u << 10)
#define LOGS_HIGH_WATER (256u << 10)
#define LOGS_KEEPALIVE_S 15

/* ---- POST ---- */

static int plan_read(struct store *conn, void *arg, space_err *err)
{
	return build_plan_read(conn, arg, err);
}

static void plan_start(struct spaced *d, struct evhttp_request *req, void *arg, int rc, const space_err *rerr)
{
	struct build_plan *p = arg;
	char op_id[ID_LEN];
	space_err err = { 0 };
	json_t *build = NULL;

	(void)d;
	if (rc < 0) {
		http_reply_err(req, rerr);
		return;
	}
	if (build_start(p, &build, op_id, &err) < 0) {
		http_reply_err(req, &err);
		return;
	}
	api_reply_stored_to(d, req, 202, json_pack("{s:o,s:s}", "build", build, "operation", op_id));
}

static void plan_release(void *arg)
{
	build_plan_free(arg);
}

void api_builds_create(struct http_req *r)
{
	json_t *body = http_body_json(r);
	struct build_plan *p;
	space_err err = { 0 };

	if (!body)
		return;
	p = build_plan_new(r->d, body, &err);
	json_decref(body);
	if (!p) {
		http_req_err(r, &err);
		return;
	}
	api_read(r, plan_read, plan_start, plan_release, p);
}

/* POST /v1/sandboxes/{id}/template: a running sandbox made a template. */
void api_builds_promote(struct http_req *r)
{
	json_t *body = http_body_json(r), *build = NULL;
	char op_id[ID_LEN];
	space_err err = { 0 };

	if (!body)
		return;
	if (build_promote(r->d, r->param[0], body, &build, op_id, &err) < 0)
		http_req_err(r, &err);
	else
		api_reply_stored(r, 202, json_pack("{s:o,s:s}", "build", build, "operation", op_id));
	json_decref(body);
}

/* ---- GET ---- */

void api_builds_list(struct http_req *r)
{
	http_reply_json(r->req, 200, json_pack("{s:o}", "builds", builds_json(r->d)));
}

static struct build *named(struct http_req *r)
{
	struct build *b = build_find(r->d, r->param[0]);

	if (!b)
		http_req_error(r, 404, "not_found", "no build %.40s", r->param[0]);
	return b;
}

void api_builds_get(struct http_req *r)
{
	struct build *b = named(r);

	if (b)
		http_reply_json(r->req, 200, build_json(b));
}

/* ---- GET .../logs ---- */

struct logs {
	struct spaced *d;
	char id[ID_LEN];
	struct http_hold hold;
	struct build_watch watch;
	struct evbuffer *ev;
	struct event *kick, *alive;
	uint64_t off;
};

static void logs_free(struct logs *l)
{
	struct build *b = build_find(l->d, l->id);

	if (b)
		build_log_unwatch(b, &l->watch);
	if (l->kick)
		event_free(l->kick);
	if (l->alive)
		event_free(l->alive);
	if (l->ev)
		evbuffer_free(l->ev);
	free(l);
}

static void logs_gone(struct http_hold *h)
{
	logs_free((struct logs *)((char *)h - offsetof(struct logs, hold)));
}

static void logs_end(struct logs *l)
{
	struct evhttp_request *req = l->hold.req;

	http_hold_end(&l->hold);
	if (evbuffer_get_length(l->ev))
		evhttp_send_reply_chunk(req, l->ev);
	evhttp_send_reply_end(req);
	logs_free(l);
}

static void logs_flushed(struct evhttp_connection *evcon, void *arg)
{
	struct logs *l = arg;

	(void)evcon;
	event_active(l->kick, 0, 0);
}

static void logs_pump(struct logs *l)
{
	struct build *b = build_find(l->d, l->id);
	struct bufferevent *bev = evhttp_connection_get_bufferevent(l->hold.evcon);
	space_err err = { 0 };

	if (!b) {
		logs_end(l);
		return;
	}
	while (evbuffer_get_length(bufferevent_get_output(bev)) < LOGS_HIGH_WATER && l->off < build_log_length(b)) {
		if (build_log_read(b, &l->off, LOGS_CHUNK, l->ev, &err) < 0) {
			evbuffer_add_printf(l->ev, "event: error\ndata: {\"message\":\"the log could not be read\"}\n\n");
			logs_end(l);
			return;
		}
		if (!evbuffer_get_length(l->ev))
			break;
		evhttp_send_reply_chunk_with_cb(l->hold.req, l->ev, logs_flushed, l);
		evbuffer_drain(l->ev, evbuffer_get_length(l->ev));
	}
	if (l->off >= build_log_length(b) && build_ended(b)) {
		logs_end(l);
		return;
	}
	if (l->off >= build_log_length(b))
		build_log_watch(b, &l->watch);
}

static void logs_kick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	logs_pump(arg);
}

static void logs_grew(void *arg)
{
	struct logs *l = arg;

	event_active(l->kick, 0, 0);
}

/* A comment now and then, so that proxies and clients with idle timeouts keep a quiet
 * build's stream (a long step prints nothing for minutes). */
static void logs_alive(evutil_socket_t fd, short what, void *arg)
{
	struct logs *l = arg;

	(void)fd;
	(void)what;
	evbuffer_add(l->ev, ":\n\n", 3);
	evhttp_send_reply_chunk(l->hold.req, l->ev);
	evbuffer_drain(l->ev, evbuffer_get_length(l->ev));
}

static int logs_offset(struct http_req *r, uint64_t *off)
{
	const char *q = http_query(r, "offset");
	const char *h = evhttp_find_header(evhttp_request_get_input_headers(r->req), "Last-Event-ID");
	const char *v = q ? q : h;
	char *end = NULL;

	*off = 0;
	if (!v || !*v)
		return 0;
	errno = 0;
	unsigned long long n = strtoull(v, &end, 10);
	if (errno || *end || *v < '0' || *v > '9') {
		http_req_error(r, 400, "bad_request", "offset: a decimal byte offset (an event's id)");
		return -1;
	}
	*off = n;
	return 0;
}

void api_builds_logs(struct http_req *r)
{
	struct build *b = named(r);
	struct timeval every = { LOGS_KEEPALIVE_S, 0 };
	struct evkeyvalq *hdrs;
	struct logs *l;
	uint64_t off;
	space_err err = { 0 };

	if (!b || logs_offset(r, &off) < 0)
		return;
	l = calloc(1, sizeof(*l));
	if (!l || !(l->ev = evbuffer_new()) ||
	    !(l->kick = event_new(r->d->base, -1, 0, logs_kick, l)) ||
	    !(l->alive = event_new(r->d->base, -1, EV_PERSIST, logs_alive, l))) {
		if (l)
			logs_free(l);
		http_req_error(r, 500, "internal", "out of memory");
		return;
	}
	l->d = r->d;
	l->off = off;
	snprintf(l->id, sizeof(l->id), "%s", r->param[0]);
	l->watch.fn = logs_grew;
	l->watch.arg = l;
	/* An offset that is not an event's end is refused before the stream starts. */
	if (build_log_read(b, &l->off, 0, l->ev, &err) < 0) {
		logs_free(l);
		http_req_err(r, &err);
		return;
	}
	evbuffer_drain(l->ev, evbuffer_get_length(l->ev));
	l->off = off;
	hdrs = evhttp_request_get_output_headers(r->req);
	evhttp_add_header(hdrs, "Content-Type", "text/event-stream");
	evhttp_add_header(hdrs, "Cache-Control", "no-store");
	evhttp_add_header(hdrs, "X-Accel-Buffering", "no");
	http_hold_begin(&l->hold, r->req, logs_gone, r->d->conns);
	evhttp_send_reply_start(r->req, 200, "OK");
	evtimer_add(l->alive, &every);
	logs_pump(l);
}
