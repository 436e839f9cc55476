/* api_snapshots.c -- GET /v1/snapshots, GET and DELETE /v1/snapshots/{id or name} */
#include "api.h"
#include "render.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

struct list_ctx {
	json_t *arr;
	bool oom;
};

static int add_snapshot(const struct snapshot_rec *s, void *arg)
{
	struct list_ctx *c = arg;
	json_t *j;

	/* Fork and suspend snapshots are the daemon's own business; ready ones
	 * are listed so a client can see what creates clone. */
	if (s->kind != SNAP_NAMED && s->kind != SNAP_READY)
		return 0;
	j = snapshot_to_json(s);
	if (!j || json_array_append_new(c->arr, j) < 0)
		c->oom = true;
	return 0;
}

void api_snapshots_list(struct http_req *r)
{
	struct list_ctx c = { .arr = json_array() };
	space_err err = { 0 };

	if (!c.arr) {
		http_reply_error(r->req, 500, "internal", "out of memory");
		return;
	}
	if (store_snapshot_each(r->d->store, 0, add_snapshot, &c, &err) < 0 || c.oom) {
		json_decref(c.arr);
		if (c.oom)
			http_reply_error(r->req, 500, "internal", "out of memory listing snapshots");
		else
			http_reply_err(r->req, &err);
		return;
	}
	http_reply_json(r->req, 200, json_pack("{s:o}", "snapshots", c.arr));
}

void api_snapshots_get(struct http_req *r)
{
	struct snapshot_rec snap;
	space_err err = { 0 };

	if (snapshot_get(r->d, r->param[0], &snap, &err) < 0) {
		http_reply_err(r->req, &err);
		return;
	}
	http_reply_json(r->req, 200, snapshot_to_json(&snap));
	snapshot_rec_clear(&snap);
}

void api_snapshots_delete(struct http_req *r)
{
	space_err err = { 0 };

	if (snapshot_delete(r->d, r->param[0], &err) < 0)
		http_reply_err(r->req, &err);
	else
		http_reply_empty(r->req, 204);
}
