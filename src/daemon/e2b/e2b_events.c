/* e2b_events.c -- E2B's lifecycle events API (GET /events/sandboxes[/{id}]) and its webhooks
 * (/events/webhooks), served from the core's events and webhooks (events/events.h,
 * events/webhook.h) in E2B's shapes: its event types (sandbox.lifecycle.*), its records, its
 * delivery signature. docs/design/e2b.md, "Lifecycle events". */
#include <event2/http.h>
#include <sys/queue.h>
#include <event2/keyvalq_struct.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "e2b.h"
#include "events/webhook.h"
#include "front/front.h"

#define LIST_MAX 100

/* E2B's names, and the core's events each stands for. */
static const struct {
	const char *name;
	unsigned mask;
} types[] = {
	{ "sandbox.lifecycle.created", 1u << EVT_CREATED },
	{ "sandbox.lifecycle.killed", 1u << EVT_DELETED },
	{ "sandbox.lifecycle.paused", 1u << EVT_PAUSED | 1u << EVT_SUSPENDED },
	{ "sandbox.lifecycle.resumed", 1u << EVT_RESUMED | 1u << EVT_RESTORED },
	{ "sandbox.lifecycle.updated", 1u << EVT_TIMEOUT_SET },
	{ "sandbox.lifecycle.checkpointed", 1u << EVT_SNAPSHOTTED },
};
#define NTYPES (sizeof(types) / sizeof(types[0]))

static unsigned all_mask(void)
{
	unsigned m = 0;

	for (size_t i = 0; i < NTYPES; i++)
		m |= types[i].mask;
	return m;
}

static const char *e2b_type(enum ev_type t)
{
	for (size_t i = 0; i < NTYPES; i++)
		if (types[i].mask & (1u << t))
			return types[i].name;
	return NULL;
}

static int parse_type(const char *s, unsigned *mask)
{
	for (size_t i = 0; s && i < NTYPES; i++)
		if (strcmp(s, types[i].name) == 0) {
			*mask |= types[i].mask;
			return 0;
		}
	return -1;
}

static json_t *types_json(unsigned mask)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < NTYPES; i++)
		if (mask & types[i].mask)
			json_array_append_new(a, json_string(types[i].name));
	return a;
}

static json_t *event_data(const struct sb_event *e)
{
	json_t *at;

	if (e->type == EVT_TIMEOUT_SET && (at = json_object_get(e->data, "expires_at")) && json_is_string(at))
		return json_pack("{s:O}", "set_timeout", at);
	return e->data ? json_deep_copy(e->data) : json_null();
}

/* One event as E2B renders it; NULL when E2B has no such type. */
static json_t *e2b_event_json(const struct sb_event *e)
{
	const char *type = e2b_type(e->type);
	char id[40], t[32];

	if (!type)
		return NULL;
	/* E2B's ids are UUIDs: the cursor in one. */
	snprintf(id, sizeof(id), "00000000-0000-4000-8000-%012llx", (unsigned long long)e->seq);
	fmt_time(t, e->time_ms);
	return json_pack("{s:s,s:s,s:s,s:o,s:s,s:s,s:s,s:s,s:s,s:s}", "version", "v1", "id", id, "type", type,
			 "eventData", event_data(e), "sandboxBuildId", e->template_digest, "sandboxExecutionId",
			 e->sandbox_id, "sandboxId", e->sandbox_id, "sandboxTeamId",
			 "00000000-0000-0000-0000-000000000000", "sandboxTemplateId", e->template_ref, "timestamp", t);
}

/* ---- the webhook format ---- */

static json_t *render(const struct sb_event *e, const struct webhook *w)
{
	(void)w;
	return e2b_event_json(e);
}

static int sign(const struct webhook *w, const struct sb_event *e, const char *body, size_t len,
		struct evkeyvalq *h)
{
	char sig[48], id[40];

	if (wh_sign_e2b(webhook_secret(w), body, len, sig) < 0)
		return -1;
	snprintf(id, sizeof(id), "00000000-0000-4000-8000-%012llx", (unsigned long long)e->seq);
	evhttp_add_header(h, "e2b-webhook-id", webhook_id(w));
	evhttp_add_header(h, "e2b-delivery-id", id);
	evhttp_add_header(h, "e2b-signature-version", "v1");
	evhttp_add_header(h, "e2b-signature", sig);
	return 0;
}

const struct webhook_format e2b_webhook_format = {
	.name = "e2b",
	.render = render,
	.sign = sign,
};

/* ---- GET /events/sandboxes[/{id}] ---- */

struct list {
	json_t *all;
	unsigned mask;
};

static int add_event(const struct sb_event *e, void *arg)
{
	struct list *l = arg;
	json_t *j = e2b_event_json(e);

	if (j)
		json_array_append_new(l->all, j);
	return 0;
}

static int query_int(struct http_req *r, const char *key, long lo, long hi, long def, long *out)
{
	const char *v = http_query(r, key);
	char *end = NULL;

	*out = def;
	if (!v)
		return 0;
	*out = strtol(v, &end, 10);
	if (!*v || *end || *out < lo || *out > hi) {
		e2b_reply_error(r->req, 400, "%s: %ld to %ld", key, lo, hi);
		return -1;
	}
	return 0;
}

/* ?types=a&types=b: every value of the key. */
static int query_types(struct http_req *r, unsigned *mask)
{
	struct evkeyvalq q;
	const char *uri = evhttp_request_get_uri(r->req), *qs = strchr(uri, '?');
	struct evkeyval *kv;
	int rc = 0;

	*mask = 0;
	if (!qs || evhttp_parse_query_str(qs + 1, &q) < 0) {
		*mask = all_mask();
		return 0;
	}
	TAILQ_FOREACH(kv, &q, next) {
		if (strcmp(kv->key, "types") != 0)
			continue;
		if (parse_type(kv->value, mask) < 0) {
			e2b_reply_error(r->req, 400, "types: '%.64s' is not an event type", kv->value);
			rc = -1;
			break;
		}
	}
	evhttp_clear_headers(&q);
	if (!*mask)
		*mask = all_mask();
	return rc;
}

static void list_events(struct http_req *r, const char *sandbox)
{
	struct list l = { .all = json_array() };
	long offset, limit;
	const char *asc = http_query(r, "orderAsc");
	bool ascending = asc && strcmp(asc, "true") == 0;
	json_t *out;
	size_t n;

	if (!l.all || query_int(r, "offset", 0, 1000000, 0, &offset) < 0 ||
	    query_int(r, "limit", 1, LIST_MAX, 10, &limit) < 0 || query_types(r, &l.mask) < 0) {
		json_decref(l.all);
		return;
	}
	/* The events kept in memory (the newest EVENTS_RING), oldest first. */
	events_mem_each(r->d, 0, sandbox, l.mask, 0, add_event, &l);
	n = json_array_size(l.all);
	out = json_array();
	for (size_t i = (size_t)offset; out && i < n && (long)json_array_size(out) < limit; i++)
		json_array_append(out, json_array_get(l.all, ascending ? i : n - 1 - i));
	json_decref(l.all);
	http_reply_json(r->req, 200, out);
}

void e2b_events_list(struct http_req *r)
{
	list_events(r, NULL);
}

void e2b_events_sandbox(struct http_req *r)
{
	list_events(r, r->param[0]);
}

/* ---- /events/webhooks ---- */

static json_t *webhook_json(const struct webhook *w)
{
	struct webhook_view v;
	char c[32];

	webhook_view(w, &v);
	fmt_time(c, v.created_ms);
	return json_pack("{s:s,s:s,s:s,s:s,s:s,s:b,s:s,s:o}", "id", v.id, "teamID",
			 "00000000-0000-0000-0000-000000000000", "teamId", "00000000-0000-0000-0000-000000000000",
			 "name", v.name, "createdAt", c, "enabled", v.enabled, "url", v.url, "events",
			 types_json(v.mask));
}

static bool ours(const struct webhook *w)
{
	struct webhook_view v;

	webhook_view(w, &v);
	return strcmp(v.format, "e2b") == 0;
}

/* The body's fields into req (an update keeps what it leaves out). -1 answered. */
static int parse_body(struct http_req *r, json_t *body, const struct webhook *w, struct webhook_req *req)
{
	json_t *events = json_object_get(body, "events"), *enabled = json_object_get(body, "enabled");
	struct webhook_view cur = { .enabled = true };
	size_t i;
	json_t *v;

	if (!json_is_object(body)) {
		e2b_reply_error(r->req, 400, "the body must be a JSON object");
		return -1;
	}
	if (w)
		webhook_view(w, &cur);
	memset(req, 0, sizeof(*req));
	req->format = "e2b";
	req->url = json_string_value(json_object_get(body, "url"));
	req->secret = json_string_value(json_object_get(body, "signatureSecret"));
	req->name = json_string_value(json_object_get(body, "name"));
	req->enabled = enabled ? json_is_true(enabled) : cur.enabled;
	req->mask = w ? cur.mask : all_mask();
	if (events) {
		req->mask = 0;
		if (!json_is_array(events) || json_array_size(events) == 0) {
			e2b_reply_error(r->req, 400, "events: an array of event types (sandbox.lifecycle.*)");
			return -1;
		}
		json_array_foreach(events, i, v)
			if (parse_type(json_string_value(v), &req->mask) < 0) {
				e2b_reply_error(r->req, 400, "events[%zu]: not an event type (sandbox.lifecycle.*)", i);
				return -1;
			}
	}
	if (enabled && !json_is_boolean(enabled)) {
		e2b_reply_error(r->req, 400, "enabled: true or false");
		return -1;
	}
	return 0;
}

static void created_reply(struct spaced *d, struct evhttp_request *req, const struct webhook *w,
			  const space_err *err)
{
	if (w)
		api_reply_stored_to(d, req, 201, webhook_json(w));
	else
		e2b_reply_error(req, err->code == ENOMEM ? 500 : 400, "%s", err->msg);
}

void e2b_webhooks_create(struct http_req *r)
{
	json_t *body = http_body_json(r);
	struct webhook_req req;

	if (!body)
		return;
	if (parse_body(r, body, NULL, &req) == 0 && front_webhook_create(r, &req, created_reply) < 0)
		e2b_reply_error(r->req, 500, "out of memory");
	json_decref(body);
}

static int add_webhook(const struct webhook *w, void *arg)
{
	if (ours(w))
		json_array_append_new(arg, webhook_json(w));
	return 0;
}

void e2b_webhooks_list(struct http_req *r)
{
	json_t *arr = json_array();

	webhooks_each(r->d, add_webhook, arr);
	http_reply_json(r->req, 200, arr);
}

static struct webhook *named(struct http_req *r)
{
	struct webhook *w = webhook_find(r->d, r->param[0]);

	if (!w || !ours(w)) {
		e2b_reply_error(r->req, 404, "webhook '%.64s' not found", r->param[0]);
		return NULL;
	}
	return w;
}

void e2b_webhooks_get(struct http_req *r)
{
	struct webhook *w = named(r);

	if (w)
		http_reply_json(r->req, 200, webhook_json(w));
}

void e2b_webhooks_update(struct http_req *r)
{
	struct webhook *w = named(r);
	struct webhook_req req;
	space_err err = { 0 };
	json_t *body;

	if (!w || !(body = http_body_json(r)))
		return;
	if (parse_body(r, body, w, &req) == 0) {
		if (webhook_update(r->d, r->param[0], &req, &err) < 0)
			e2b_reply_error(r->req, 400, "%s", err.msg);
		else
			api_reply_stored(r, 200, webhook_json(w));
	}
	json_decref(body);
}

void e2b_webhooks_delete(struct http_req *r)
{
	space_err err = { 0 };

	if (!named(r))
		return;
	if (webhook_delete(r->d, r->param[0], &err) < 0)
		e2b_reply_err(r->req, &err);
	else
		api_reply_stored(r, 200, json_object());
}
