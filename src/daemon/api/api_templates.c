/* api_templates.c -- GET /v1/templates and /v1/templates/{ref} */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "front/req.h"
#include "front/render.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

/* Templates are read (with the ready snapshot each would clone) on the store's thread; what
 * the node keeps warm of each (its pool) is added on the loop. */
struct tmpl_job {
	char ref[256];
	bool net;      /* sandbox_net: which ready snapshots this daemon clones */
	int size;      /* PUT .../pool */
	char name[SPEC_NAME_MAX + 1]; /* PUT .../pool: the template's name */
	char digest[128];
	json_t *out;   /* an array of templates, or one */
};

/* On the store's thread: the template and the ready snapshot creates clone. */
static json_t *template_read_json(struct store *conn, bool net, const struct template_rec *t)
{
	json_t *j = template_to_json(t);
	struct snapshot_rec snap;

	if (!j)
		return NULL;
	if (snapshot_ready_in(conn, net, t->digest, t->vcpus > 0 ? t->vcpus : 1,
			      t->memory_mib > 0 ? t->memory_mib : 256, &snap) == 0) {
		json_object_set_new(j, "ready_snapshot", json_string(snap.id));
		snapshot_rec_clear(&snap);
	} else {
		json_object_set_new(j, "ready_snapshot", json_null());
	}
	return j;
}

/* On the loop: its warm pool. */
static void add_pool(struct spaced *d, json_t *j)
{
	const char *name = json_string_value(json_object_get(j, "name"));
	int size = 0, ready = 0;

	if (name)
		pool_counts(d, name, &size, &ready);
	json_object_set_new(j, "pool", json_pack("{s:i,s:i}", "size", size, "ready", ready));
}

struct list_read {
	struct store *conn;
	bool net;
	json_t *arr;
};

static int add_template(const struct template_rec *t, void *arg)
{
	struct list_read *l = arg;
	json_t *j = template_read_json(l->conn, l->net, t);

	if (!j)
		return -1;
	return json_array_append_new(l->arr, j);
}

static int list_read(struct store *conn, void *arg, space_err *err)
{
	struct tmpl_job *q = arg;
	struct list_read l = { conn, q->net, json_array() };

	if (!l.arr)
		return err_set(err, ENOMEM, "out of memory");
	if (store_template_each(conn, add_template, &l, err) < 0) {
		json_decref(l.arr);
		if (!err->code)
			err_set(err, ENOMEM, "out of memory listing templates");
		return -1;
	}
	q->out = l.arr;
	return 0;
}

static void list_reply(struct spaced *d, struct evhttp_request *req, void *arg, int rc, const space_err *err)
{
	struct tmpl_job *q = arg;
	size_t i;
	json_t *j;

	if (rc < 0) {
		http_reply_err(req, err);
		return;
	}
	json_array_foreach(q->out, i, j)
		add_pool(d, j);
	http_reply_json(req, 200, json_pack("{s:O}", "templates", q->out));
}

static void job_release(void *arg)
{
	struct tmpl_job *q = arg;

	json_decref(q->out);
	free(q);
}

static struct tmpl_job *job_new(struct http_req *r, const char *ref)
{
	struct tmpl_job *q = calloc(1, sizeof(*q));

	if (!q) {
		http_reply_error(r->req, 500, "internal", "out of memory");
		return NULL;
	}
	snprintf(q->ref, sizeof(q->ref), "%s", ref);
	q->net = sandbox_net(r->d);
	return q;
}

void api_templates_list(struct http_req *r)
{
	struct tmpl_job *q = job_new(r, "");

	if (q)
		api_read(r, list_read, list_reply, job_release, q);
}

/* Every digest the template's name had, newest first, with the tags each holds now. */
static int add_version(const struct template_rec *t, void *arg)
{
	char created[32];

	fmt_time(created, t->created_ms);
	return json_array_append_new(arg, json_pack("{s:s,s:O,s:s,s:I}", "digest", t->digest, "tags",
						    t->tags ? t->tags : json_array(), "created_at", created,
						    "image_bytes", (json_int_t)t->image_bytes));
}

static int get_read(struct store *conn, void *arg, space_err *err)
{
	struct tmpl_job *q = arg;
	struct template_rec t = { 0 };

	if (store_template_resolve(conn, q->ref, &t, err) < 0) {
		/* A malformed reference names no template either. */
		if (err->code == ENOENT || err->code == EINVAL)
			err_set(err, ENOENT, "no template '%.200s'", q->ref);
		return -1;
	}
	snprintf(q->digest, sizeof(q->digest), "%s", t.digest);
	q->out = template_read_json(conn, q->net, &t);
	json_t *history = json_array();
	if (q->out && history && store_template_named(conn, t.name, add_version, history, err) == 0)
		json_object_set(q->out, "history", history);
	json_decref(history);
	template_rec_clear(&t);
	return q->out ? 0 : err_set(err, ENOMEM, "out of memory");
}

/* DELETE /v1/templates/{ref}: "name:tag" drops that tag, "name" every tag of the name. The
 * templates stay by digest, and so do their files: sandboxes made from them run on. */
static int untag_read(struct store *conn, void *arg, space_err *err)
{
	struct tmpl_job *q = arg;
	int removed = 0;

	if (store_template_untag(conn, q->ref, &removed, err) < 0) {
		if (err->code == EINVAL)
			err_set(err, EINVAL, "a template is deleted by name or name:tag, not '%.200s'", q->ref);
		return -1;
	}
	q->size = removed;
	return removed ? 0 : err_set(err, ENOENT, "no template '%.200s'", q->ref);
}

/* A route on /v1/templates/{ref}: the ref checked, then read (and answered) on the store's
 * thread. */
static void on_ref(struct http_req *r, api_read_fn read, api_reply_fn reply)
{
	const char *ref = r->param[0];
	struct tmpl_job *q;

	if (!ref[0] || strlen(ref) >= sizeof(q->ref)) {
		http_reply_error(r->req, 404, "not_found", "no such template");
		return;
	}
	if ((q = job_new(r, ref)))
		api_read(r, read, reply, job_release, q);
}

void api_templates_delete(struct http_req *r)
{
	on_ref(r, untag_read, api_reply_no_content);
}

static void get_reply(struct spaced *d, struct evhttp_request *req, void *arg, int rc, const space_err *err)
{
	struct tmpl_job *q = arg;

	if (rc < 0) {
		http_reply_err(req, err);
		return;
	}
	add_pool(d, q->out);
	http_reply_json(req, 200, json_incref(q->out));
}

void api_templates_get(struct http_req *r)
{
	on_ref(r, get_read, get_reply);
}

/* PUT /v1/templates/{ref}/pool {"size": N}: the template is resolved and the size stored on
 * the store's thread, the pool sized on the loop. */
static int pool_read(struct store *conn, void *arg, space_err *err)
{
	struct tmpl_job *q = arg;

	if (get_read(conn, arg, err) < 0)
		return -1;
	return pool_store_size(conn, q->digest, q->size, q->name, err);
}

static void pool_reply(struct spaced *d, struct evhttp_request *req, void *arg, int rc, const space_err *err)
{
	struct tmpl_job *q = arg;
	space_err e2 = { 0 };

	if (rc < 0) {
		http_reply_err(req, err);
		return;
	}
	if (pool_resize(d, q->name, q->size, &e2) < 0) {
		http_reply_err(req, &e2);
		return;
	}
	add_pool(d, q->out);
	http_reply_json(req, 200, json_incref(q->out));
}

void api_templates_pool(struct http_req *r)
{
	const char *ref = r->param[0];
	json_t *body = http_body_json(r);
	struct tmpl_job *q = NULL;
	space_err err = { 0 };
	int size;

	if (!body)
		return;
	if (!ref[0] || strlen(ref) >= 256)
		http_reply_error(r->req, 404, "not_found", "no template '%.200s'", ref);
	else if (req_pool(body, &size, &err) < 0)
		http_reply_err(r->req, &err);
	else if ((q = job_new(r, ref))) {
		q->size = size;
		api_read(r, pool_read, pool_reply, job_release, q);
	}
	json_decref(body);
}
