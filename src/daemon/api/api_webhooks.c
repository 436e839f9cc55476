/* api_webhooks.c -- /v1/webhooks: where lifecycle events are POSTed, signed (events/webhook.h).
 * A secret goes in and never comes out. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "daemon.h"
#include "events/webhook.h"
#include "store/store.h"

static json_t *types_json(unsigned mask)
{
	json_t *a = json_array();

	for (int t = 0; a && t < EVT__COUNT; t++)
		if (mask & (1u << t))
			json_array_append_new(a, json_string(ev_type_name(t)));
	return a;
}

static json_t *webhook_json(const struct webhook *w)
{
	struct webhook_view v;
	char c[32], cur[24];
	json_t *j;

	webhook_view(w, &v);
	fmt_time(c, v.created_ms);
	snprintf(cur, sizeof(cur), "%lld", (long long)v.cursor);
	j = json_pack("{s:s,s:s,s:s,s:o,s:s,s:b,s:s,s:s}", "id", v.id, "url", v.url, "name", v.name, "events",
		      types_json(v.mask), "format", v.format, "enabled", v.enabled, "created_at", c, "cursor", cur);
	if (j)
		json_object_set_new(j, "pending",
				    v.pending_attempts ? json_pack("{s:i,s:s}", "attempts", v.pending_attempts,
								   "last_error", v.last_error)
						       : json_null());
	return j;
}

/* The body's fields; for an update, what it leaves out is what w has. -1 answered. */
static int parse_body(struct http_req *r, json_t *body, const struct webhook *w, struct webhook_req *out)
{
	json_t *events = json_object_get(body, "events"), *enabled = json_object_get(body, "enabled");
	static const char *const known[] = { "url", "events", "secret", "name", "enabled", NULL };
	space_err err = { 0 };
	const char *key;
	json_t *v;

	if (!json_is_object(body)) {
		http_req_error(r, 400, "bad_request", "the body must be a JSON object");
		return -1;
	}
	json_object_foreach(body, key, v) {
		bool ok = false;

		for (size_t i = 0; known[i]; i++)
			ok |= strcmp(key, known[i]) == 0;
		if (!ok) {
			http_req_error(r, 400, "bad_request", "unknown field '%.64s' (url, events, secret, name, enabled)",
				       key);
			return -1;
		}
	}
	for (size_t i = 0; i < 3; i++) {
		static const char *const strs[] = { "url", "secret", "name" };
		json_t *s = json_object_get(body, strs[i]);

		if (s && !json_is_string(s)) {
			http_req_error(r, 400, "bad_request", "%s: a string", strs[i]);
			return -1;
		}
	}
	if (enabled && !json_is_boolean(enabled)) {
		http_req_error(r, 400, "bad_request", "enabled: true or false");
		return -1;
	}
	memset(out, 0, sizeof(*out));
	out->url = json_string_value(json_object_get(body, "url"));
	out->secret = json_string_value(json_object_get(body, "secret"));
	out->name = json_string_value(json_object_get(body, "name"));
	struct webhook_view cur = { .enabled = true };

	if (w)
		webhook_view(w, &cur);
	out->enabled = enabled ? json_is_true(enabled) : cur.enabled;
	if (events || !w) {
		if (ev_types_json(events, &out->mask, &err) < 0) {
			http_req_err(r, &err);
			return -1;
		}
	} else {
		out->mask = cur.mask;
	}
	return 0;
}

static void created_reply(struct spaced *d, struct evhttp_request *req, const struct webhook *w,
			  const space_err *err)
{
	if (w)
		api_reply_stored_to(d, req, 201, json_pack("{s:o}", "webhook", webhook_json(w)));
	else if (err->code == EACCES || err->code == EINVAL || err->code == EHOSTUNREACH)
		http_reply_error(req, 400, "bad_request", "%s", err->msg);
	else if (err->code == ENOSPC)
		http_reply_error(req, 409, "conflict", "%s", err->msg);
	else
		http_reply_err(req, err);
}

void api_webhooks_create(struct http_req *r)
{
	json_t *body = http_body_json(r);
	struct webhook_req req;

	if (!body)
		return;
	if (parse_body(r, body, NULL, &req) == 0 && front_webhook_create(r, &req, created_reply) < 0)
		http_req_error(r, 500, "internal", "out of memory");
	json_decref(body);
}

static int add_one(const struct webhook *w, void *arg)
{
	json_array_append_new(arg, webhook_json(w));
	return 0;
}

void api_webhooks_list(struct http_req *r)
{
	json_t *arr = json_array();

	webhooks_each(r->d, add_one, arr);
	http_reply_json(r->req, 200, json_pack("{s:o}", "webhooks", arr));
}

static struct webhook *named(struct http_req *r)
{
	struct webhook *w = webhook_find(r->d, r->param[0]);

	if (!w)
		http_req_error(r, 404, "not_found", "no webhook '%.64s'", r->param[0]);
	return w;
}

void api_webhooks_get(struct http_req *r)
{
	struct webhook *w = named(r);

	if (w)
		http_reply_json(r->req, 200, json_pack("{s:o}", "webhook", webhook_json(w)));
}

void api_webhooks_update(struct http_req *r)
{
	struct webhook *w = named(r);
	struct webhook_req req;
	space_err err = { 0 };
	json_t *body;

	if (!w || !(body = http_body_json(r)))
		return;
	if (parse_body(r, body, w, &req) == 0) {
		if (webhook_update(r->d, r->param[0], &req, &err) < 0)
			http_req_error(r, err.code == ENOENT ? 404 : 400, err.code == ENOENT ? "not_found" : "bad_request",
				       "%s", err.msg);
		else
			api_reply_stored(r, 200, json_pack("{s:o}", "webhook", webhook_json(w)));
	}
	json_decref(body);
}

/* Nothing to read: the answer waits behind the deletion's write on the store's thread. */
static int after_writes(struct store *conn, void *arg, space_err *err)
{
	(void)conn;
	(void)arg;
	(void)err;
	return 0;
}

void api_webhooks_delete(struct http_req *r)
{
	space_err err = { 0 };

	if (webhook_delete(r->d, r->param[0], &err) < 0)
		http_req_error(r, 404, "not_found", "no webhook '%.64s'", r->param[0]);
	else
		api_read(r, after_writes, api_reply_no_content, NULL, NULL);
}

/* ---- its delivery log, read on the store's thread ---- */

struct log_read {
	char id[ID_LEN];
	int limit;
};

static int add_delivery(int64_t time_ms, const char *body, void *arg)
{
	json_t *j = json_loads(body, 0, NULL);

	(void)time_ms;
	if (j)
		json_array_append_new(arg, j);
	return 0;
}

static json_t *log_json(struct store *conn, void *arg, space_err *err)
{
	struct log_read *l = arg;
	json_t *arr = json_array();

	if (!arr || store_deliveries_each(conn, l->id, l->limit, add_delivery, arr, err) < 0) {
		json_decref(arr);
		return NULL;
	}
	return json_pack("{s:o}", "deliveries", arr);
}

void api_webhooks_deliveries(struct http_req *r)
{
	const char *limit = http_query(r, "limit");
	struct log_read *l;
	char *end = NULL;
	long n = 100;

	if (!named(r))
		return;
	if (limit && ((n = strtol(limit, &end, 10)) < 1 || n > 1000 || *end)) {
		http_req_error(r, 400, "bad_request", "limit: 1 to 1000");
		return;
	}
	if (!(l = calloc(1, sizeof(*l)))) {
		http_req_error(r, 500, "internal", "out of memory");
		return;
	}
	snprintf(l->id, sizeof(l->id), "%s", r->param[0]);
	l->limit = (int)n;
	api_read_json(r, log_json, free, l);
}
