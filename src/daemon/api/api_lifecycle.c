/* api_lifecycle.c -- POST /v1/sandboxes/{id}/pause|resume|suspend|restore|stop|start|wake|fork|
 * snapshots|timeout and DELETE /v1/sandboxes/{id}: each starts an operation and answers 202 */
#include <string.h>

#include "api.h"
#include "front/req.h"
#include "front/render.h"
#include "sandbox/sandbox.h"

/* Operations without a body: an empty one or {} is all they take. */
static int no_fields(struct http_req *r)
{
	json_t *body = http_body_json(r);

	if (!body)
		return -1;
	if (json_object_size(body) != 0) {
		const char *k = json_object_iter_key(json_object_iter(body));

		http_reply_error(r->req, 400, "bad_request", "unknown field '%.64s'", k);
		json_decref(body);
		return -1;
	}
	json_decref(body);
	return 0;
}

static void act(struct http_req *r, enum op_kind kind)
{
	struct sandbox_rec sb = { 0 };
	struct op_rec op = { 0 };
	space_err err = { 0 };

	if (kind != OPK_DELETE && no_fields(r) < 0)
		return;
	if (sandbox_act(r->d, r->param[0], kind, &sb, &op, &err) < 0)
		http_reply_err(r->req, &err);
	else
		api_reply_accepted(r, &sb, &op);
	sandbox_rec_clear(&sb);
	op_rec_clear(&op);
}

void api_sandboxes_delete(struct http_req *r)
{
	act(r, OPK_DELETE);
}

void api_sandboxes_pause(struct http_req *r)
{
	act(r, OPK_PAUSE);
}

void api_sandboxes_resume(struct http_req *r)
{
	act(r, OPK_RESUME);
}

void api_sandboxes_suspend(struct http_req *r)
{
	act(r, OPK_SUSPEND);
}

void api_sandboxes_restore(struct http_req *r)
{
	act(r, OPK_RESTORE);
}

void api_sandboxes_stop(struct http_req *r)
{
	act(r, OPK_STOP);
}

void api_sandboxes_start(struct http_req *r)
{
	act(r, OPK_START);
}

/* 202 with the operation started, or 200 with none when it already runs. */
void api_sandboxes_wake(struct http_req *r)
{
	struct sandbox_rec sb = { 0 };
	struct op_rec op = { 0 };
	space_err err = { 0 };

	if (no_fields(r) < 0)
		return;
	if (sandbox_wake(r->d, r->param[0], &sb, &op, &err) < 0)
		http_reply_err(r->req, &err);
	else if (!op.id[0])
		http_reply_json(r->req, 200, json_pack("{s:o,s:n}", "sandbox", api_sandbox_json(r->d, &sb),
						       "operation"));
	else
		api_reply_accepted(r, &sb, &op);
	sandbox_rec_clear(&sb);
	op_rec_clear(&op);
}

void api_sandboxes_fork(struct http_req *r)
{
	struct sandbox_rec sb = { 0 };
	struct op_rec op = { 0 };
	space_err err = { 0 };
	json_t *body = http_body_json(r), *children = NULL;
	int count;

	if (!body)
		return;
	if (req_fork(body, &count, &err) < 0 ||
	    sandbox_fork(r->d, r->param[0], count, &sb, &op, &children, &err) < 0)
		http_reply_err(r->req, &err);
	else
		api_reply_stored(r, 202,
				json_pack("{s:o,s:o,s:o}", "sandbox", api_sandbox_json(r->d, &sb), "operation",
					  op_to_json(&op), "children", children));
	json_decref(body);
	sandbox_rec_clear(&sb);
	op_rec_clear(&op);
}

/* Whether the name is free is asked on the store's thread; the snapshot begins on the loop. */
static void snap_begin(struct spaced *d, struct evhttp_request *req, void *arg, int rc, const space_err *rerr)
{
	struct snapshot_req *j = arg;
	struct sandbox_rec sb = { 0 };
	struct op_rec op = { 0 };
	struct snapshot_rec snap = { 0 };
	space_err err = { 0 };

	if (rc < 0) {
		http_reply_err(req, rerr);
		return;
	}
	if (sandbox_snapshot(d, j->id, j->name, &sb, &op, &snap, &err) < 0)
		http_reply_err(req, &err);
	else
		api_reply_stored_to(d, req, 202,
				    json_pack("{s:o,s:o,s:o}", "sandbox", api_sandbox_json(d, &sb), "operation",
					      op_to_json(&op), "snapshot",
					      snap.id[0] ? snapshot_to_json(&snap) : json_null()));
	sandbox_rec_clear(&sb);
	op_rec_clear(&op);
	snapshot_rec_clear(&snap);
}

void api_sandboxes_snapshot(struct http_req *r)
{
	space_err err = { 0 };
	json_t *body = http_body_json(r);
	struct snapshot_req *j;

	if (!body)
		return;
	j = snapshot_req_new(r->param[0]);
	if (!j) {
		http_reply_error(r->req, 500, "internal", "out of memory");
	} else if (req_snapshot(body, j->name, sizeof(j->name), &err) < 0) {
		http_reply_err(r->req, &err);
		snapshot_req_free(j);
	} else if (!sandbox_find(r->d, j->id)) {
		/* not held here: refused now, from the record read before */
		snap_begin(r->d, r->req, j, 0, &err);
		snapshot_req_free(j);
	} else {
		api_read(r, snapshot_req_read, snap_begin, snapshot_req_free, j);
	}
	json_decref(body);
}

void api_sandboxes_timeout(struct http_req *r)
{
	struct sandbox_rec sb = { 0 };
	struct timeout_req req;
	space_err err = { 0 };
	json_t *body = http_body_json(r);

	if (!body)
		return;
	if (req_timeout(body, &req, &err) < 0 || sandbox_set_timeout(r->d, r->param[0], &req, &sb, &err) < 0)
		http_reply_err(r->req, &err);
	else
		http_reply_json(r->req, 200, api_sandbox_json(r->d, &sb));
	json_decref(body);
	sandbox_rec_clear(&sb);
}
