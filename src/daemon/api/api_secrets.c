/* api_secrets.c -- /v1/secrets: values the egress gateways inject into requests. A value goes
 * in and never comes out: no response and no log line carries one. */
#include <string.h>

#include "api.h"
#include "api/req.h"
#include "egress/policy.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

static json_t *secret_json(const struct secret_rec *s)
{
	char c[32], u[32];

	fmt_time(c, s->created_ms);
	fmt_time(u, s->updated_ms);
	return json_pack("{s:s,s:s,s:s}", "name", s->name, "created_at", c, "updated_at", u);
}

/* The name in the path, or a 400/404 answered. */
static const char *name_param(struct http_req *r, bool for_put)
{
	const char *name = r->param[0];

	if (egress_secret_name_valid(name))
		return name;
	if (for_put)
		http_reply_error(r->req, 400, "bad_request", "a secret's name is 1 to %d of [A-Za-z0-9_.-]",
				 EGRESS_SECRET_NAME_MAX);
	else
		http_reply_error(r->req, 404, "not_found", "no secret '%.64s'", name);
	return NULL;
}

void api_secrets_put(struct http_req *r)
{
	const char *name = name_param(r, true), *value;
	struct secret_rec rec;
	space_err err = { 0 };
	bool created = false;
	size_t len;

	if (!name)
		return;
	json_t *body = http_body_json(r);
	if (!body)
		return;
	if (req_secret(body, &value, &len, &err) < 0 ||
	    store_secret_put(r->d->store, name, value, &rec, &created, &err) < 0) {
		http_reply_err(r->req, &err);
	} else {
		sandbox_secret_changed(r->d, name);
		http_reply_json(r->req, created ? 201 : 200, secret_json(&rec));
	}
	/* The body's copy of the value: cleared before it is freed. */
	json_t *v = json_object_get(body, "value");
	if (json_is_string(v))
		explicit_bzero((char *)json_string_value(v), json_string_length(v));
	json_decref(body);
}

static int add_secret(const struct secret_rec *s, void *arg)
{
	return json_array_append_new(arg, secret_json(s)) < 0;
}

void api_secrets_list(struct http_req *r)
{
	space_err err = { 0 };
	json_t *arr = json_array();

	if (!arr) {
		http_reply_error(r->req, 500, "internal", "out of memory");
		return;
	}
	if (store_secret_each(r->d->store, add_secret, arr, &err) < 0) {
		json_decref(arr);
		http_reply_err(r->req, &err);
		return;
	}
	http_reply_json(r->req, 200, json_pack("{s:o}", "secrets", arr));
}

void api_secrets_get(struct http_req *r)
{
	const char *name = name_param(r, false);
	struct secret_rec rec;
	space_err err = { 0 };

	if (!name)
		return;
	if (store_secret_get(r->d->store, name, &rec, NULL, &err) < 0)
		http_reply_err(r->req, &err);
	else
		http_reply_json(r->req, 200, secret_json(&rec));
}

void api_secrets_delete(struct http_req *r)
{
	const char *name = name_param(r, false);
	space_err err = { 0 };

	if (!name)
		return;
	if (store_secret_delete(r->d->store, name, &err) < 0) {
		http_reply_err(r->req, &err);
		return;
	}
	sandbox_secret_changed(r->d, name);
	http_reply_empty(r->req, 204);
}
