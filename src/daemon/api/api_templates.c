/* api_templates.c -- GET /v1/templates and /v1/templates/{ref} */
#include <string.h>

#include "api.h"
#include "api/req.h"
#include "render.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

/* A template with what the node keeps ready of it: its warm pool and the
 * snapshot creates clone. */
static json_t *template_json(struct spaced *d, const struct template_rec *t)
{
	json_t *j = template_to_json(t);
	struct snapshot_rec snap;
	int size, ready;

	if (!j)
		return NULL;
	pool_counts(d, t->name, &size, &ready);
	json_object_set_new(j, "pool", json_pack("{s:i,s:i}", "size", size, "ready", ready));
	if (snapshot_ready_for(d, t->digest, t->vcpus > 0 ? t->vcpus : 1, t->memory_mib > 0 ? t->memory_mib : 256,
			       &snap) == 0) {
		json_object_set_new(j, "ready_snapshot", json_string(snap.id));
		snapshot_rec_clear(&snap);
	} else {
		json_object_set_new(j, "ready_snapshot", json_null());
	}
	return j;
}

struct list_ctx {
	struct spaced *d;
	json_t *arr;
};

static int add_template(const struct template_rec *t, void *arg)
{
	struct list_ctx *c = arg;
	json_t *j = template_json(c->d, t);

	if (!j)
		return -1;
	return json_array_append_new(c->arr, j);
}

void api_templates_list(struct http_req *r)
{
	struct list_ctx c = { .d = r->d, .arr = json_array() };
	space_err err = { 0 };

	if (!c.arr) {
		http_reply_error(r->req, 500, "internal", "out of memory");
		return;
	}
	if (store_template_each(r->d->store, add_template, &c, &err) < 0) {
		json_decref(c.arr);
		http_reply_err(r->req, &err);
		return;
	}
	http_reply_json(r->req, 200, json_pack("{s:o}", "templates", c.arr));
}

void api_templates_get(struct http_req *r)
{
	struct template_rec t = { 0 };
	space_err err = { 0 };
	const char *ref = r->param[0];

	if (!ref[0] || strlen(ref) >= 256) {
		http_reply_error(r->req, 404, "not_found", "no such template");
		return;
	}
	if (store_template_resolve(r->d->store, ref, &t, &err) < 0) {
		if (err.code == ENOENT || err.code == EINVAL)
			http_reply_error(r->req, 404, "not_found", "no template '%s'", ref);
		else
			http_reply_err(r->req, &err);
		return;
	}
	http_reply_json(r->req, 200, template_json(r->d, &t));
	template_rec_clear(&t);
}

/* PUT /v1/templates/{ref}/pool {"size": N} */
void api_templates_pool(struct http_req *r)
{
	struct template_rec t = { 0 };
	space_err err = { 0 };
	json_t *body = http_body_json(r);
	int size;

	if (!body)
		return;
	if (store_template_resolve(r->d->store, r->param[0], &t, &err) < 0) {
		/* A malformed reference names no template either. */
		http_reply_error(r->req, 404, "not_found", "no template '%.200s'", r->param[0]);
	} else if (req_pool(body, &size, &err) < 0 || pool_set_size(r->d, t.digest, size, &err) < 0) {
		http_reply_err(r->req, &err);
	} else {
		http_reply_json(r->req, 200, template_json(r->d, &t));
	}
	template_rec_clear(&t);
	json_decref(body);
}
