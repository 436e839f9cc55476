/* intent.c -- an api process writes creates and restores as intent for nodes to claim
 * (cluster.h; docs/design/cluster.md, "Placement") */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/req.h"
#include "cluster.h"
#include "e2b/e2b.h"
#include "http/proxy.h"
#include "log.h"
#include "api/render.h"
#include "sandbox/runtime.h"
#include "store/store.h"

struct fit {
	int memory_mib;
	bool fits;
};

static int fits_some_node(const struct node_rec *n, void *arg)
{
	struct fit *f = arg;

	if (n->state == NODE_UP && n->memory_mib >= f->memory_mib)
		f->fits = true;
	return f->fits;
}

/* The record a node will make of the request (the same create_prepare runs on the node with
 * the same ids), written with its operation and the request itself as intent. */
static int write_create(struct spaced *d, json_t *body, const struct create_req *req, struct sandbox_rec *out,
			struct op_rec *op, space_err *err)
{
	struct sandbox *sb = calloc(1, sizeof(*sb));
	struct snapshot_rec from = { 0 };
	struct fit f = { 0 };
	json_t *intent = NULL;
	int rc = -1;

	if (!sb)
		return err_set(err, ENOMEM, "out of memory");
	sb->d = d;
	if (create_prepare(d, req, sb, &from, err) < 0)
		goto out;
	f.memory_mib = sb->rec.memory_mib;
	if (store_node_each(d->store, fits_some_node, &f, err) < 0)
		goto out;
	if (!f.fits) {
		err_set(err, EDQUOT, "no node that is up has room for a %d MiB sandbox", sb->rec.memory_mib);
		goto out;
	}
	memset(op, 0, sizeof(*op));
	id_new(op->id, "op-");
	op->kind = OPK_CREATE;
	snprintf(op->sandbox_id, sizeof(op->sandbox_id), "%s", sb->rec.id);
	op->state = OP_PENDING;
	op->created_ms = op->updated_ms = now_ms();
	intent = json_pack("{s:s,s:s,s:O}", "kind", "create", "op", op->id, "request", body);
	if (!intent) {
		err_set(err, ENOMEM, "out of memory");
		goto out;
	}
	if (store_intent_put(d->store, &sb->rec, op, intent, err) < 0)
		goto out;
	sandbox_copy_out(sb, out, NULL);
	rc = 0;
out:
	json_decref(intent);
	snapshot_rec_clear(&from);
	sandbox_free(sb);
	return rc;
}

void cluster_create(struct http_req *r)
{
	struct sandbox_rec sb = { 0 };
	struct op_rec op = { 0 };
	struct create_req req;
	space_err err = { 0 };
	json_t *body = http_body_json(r);

	if (!body)
		return;
	if (req_create(body, &req, &err) < 0) {
		http_reply_err(r->req, &err);
	} else {
		if (write_create(r->d, body, &req, &sb, &op, &err) < 0)
			http_reply_err(r->req, &err);
		else
			api_reply_accepted(r, &sb, &op);
		create_req_free(&req);
	}
	json_decref(body);
	sandbox_rec_clear(&sb);
}

/* A suspended sandbox no node owns (its node was lost): any node may restore it from the
 * shared directory. */
static int write_restore(struct spaced *d, const char *id, struct op_rec *op, space_err *err)
{
	memset(op, 0, sizeof(*op));
	id_new(op->id, "op-");
	op->kind = OPK_RESTORE;
	snprintf(op->sandbox_id, sizeof(op->sandbox_id), "%s", id);
	op->state = OP_PENDING;
	op->created_ms = op->updated_ms = now_ms();
	return store_intent_restore(d->store, id, op, err);
}

/* E2B's connect/resume answer once the sandbox runs: the request waits for the restore to
 * be claimed and done, then goes to the node that did it. */
struct e2b_wait {
	struct http_hold hold; /* first */
	struct op_waiter *waiter;
	enum evhttp_cmd_type method;
	char sb_id[ID_LEN];
};

static void e2b_wait_done(struct spaced *d, const struct op_rec *op, void *arg)
{
	struct e2b_wait *w = arg;
	struct http_req r = { .d = d, .req = w->hold.req, .method = w->method };
	char url[256];
	space_err err = { 0 };

	http_hold_end(&w->hold);
	if (op->state != OP_SUCCEEDED)
		e2b_reply_error(r.req, 500, "restoring %s: %s", w->sb_id, op->error[0] ? op->error : "timed out");
	else if (cluster_sandbox_url(d, w->sb_id, false, url, sizeof(url), &err) < 0 || http_proxy(&r, url, &err) < 0)
		e2b_reply_error(r.req, err_http_status(err.code), "%s", err.msg);
	free(w);
}

static void e2b_wait_gone(struct http_hold *h)
{
	struct e2b_wait *w = (struct e2b_wait *)h;

	op_wait_cancel(w->waiter);
	free(w);
}

static void e2b_hold(struct http_req *r, const struct op_rec *op)
{
	struct e2b_wait *w = calloc(1, sizeof(*w));
	space_err err = { 0 };

	if (!w) {
		e2b_reply_error(r->req, 500, "out of memory");
		return;
	}
	w->method = r->method;
	snprintf(w->sb_id, sizeof(w->sb_id), "%s", op->sandbox_id);
	if (op_wait(r->d, op->id, 60, e2b_wait_done, w, &w->waiter, &err) < 0) {
		free(w);
		e2b_reply_error(r->req, 500, "%s", err.msg);
		return;
	}
	http_hold_begin(&w->hold, r->req, e2b_wait_gone, r->d->conns);
}

void cluster_restore(struct http_req *r)
{
	struct sandbox_rec sb = { 0 };
	struct op_rec op = { 0 };
	space_err err = { 0 };
	char url[256];
	bool e2b = e2b_api_path(r);

	if (!id_valid(r->param[0], "sb-") || store_sandbox_get(r->d->store, r->param[0], &sb, &err) < 0) {
		if (e2b)
			e2b_reply_error(r->req, 404, "sandbox %.64s not found", r->param[0]);
		else
			http_reply_error(r->req, 404, "not_found", "no sandbox '%.64s'", r->param[0]);
		return;
	}
	if (sb.node_id[0]) {
		/* Its node does it, as a single daemon would. */
		if (cluster_sandbox_url(r->d, sb.id, false, url, sizeof(url), &err) < 0 || http_proxy(r, url, &err) < 0) {
			if (e2b)
				e2b_reply_error(r->req, err_http_status(err.code), "%s", err.msg);
			else
				http_reply_err(r->req, &err);
		}
	} else if (sb.state != SB_SUSPENDED) {
		err_set(&err, EBUSY, "sandbox %s is %s and on no node: nothing to restore", sb.id,
			sb_state_name(sb.state));
		if (e2b)
			e2b_reply_error(r->req, 409, "%s", err.msg);
		else
			http_reply_err(r->req, &err);
	} else if (write_restore(r->d, sb.id, &op, &err) < 0) {
		if (e2b)
			e2b_reply_error(r->req, err_http_status(err.code), "%s", err.msg);
		else
			http_reply_err(r->req, &err);
	} else if (e2b) {
		e2b_hold(r, &op);
	} else {
		sb.state = SB_RESTORING;
		api_reply_accepted(r, &sb, &op);
	}
	sandbox_rec_clear(&sb);
	op_rec_clear(&op);
}

/* Operations still open on a sandbox closed here fail with why (a create no node claimed). */
struct close_ops {
	struct spaced *d;
	const char *sb_id;
	const char *why;
};

static int close_op(const struct op_rec *op, void *arg)
{
	struct close_ops *c = arg;
	struct op_rec o;
	space_err err = { 0 };

	if (strcmp(op->sandbox_id, c->sb_id) != 0)
		return 0;
	op_copy(&o, op);
	o.state = OP_FAILED;
	snprintf(o.error, sizeof(o.error), "%s", c->why);
	o.updated_ms = now_ms();
	if (store_op_put(c->d->store, &o, &err) < 0)
		log_error("operation %s: %s", o.id, err.msg);
	op_rec_clear(&o);
	return 0;
}

/* A sandbox no live node owns (lost with its node, or a create not claimed yet) is deleted in
 * the store alone: there is no VM here to stop, and none left where it was. */
static int delete_here(struct spaced *d, struct sandbox_rec *sb, struct op_rec *op, space_err *err)
{
	struct close_ops c = { d, sb->id, "the sandbox was deleted before a node started it" };
	int64_t gen = sb->generation;

	if (store_op_each_open(d->store, close_op, &c, err) < 0)
		return -1;
	memset(op, 0, sizeof(*op));
	id_new(op->id, "op-");
	op->kind = OPK_DELETE;
	snprintf(op->sandbox_id, sizeof(op->sandbox_id), "%s", sb->id);
	op->state = OP_SUCCEEDED;
	op->created_ms = op->updated_ms = now_ms();
	sb->state = SB_DELETED;
	sb->updated_ms = op->updated_ms;
	/* Conditional: a node that claimed it meanwhile wins (409, try again). */
	if (store_sandbox_put_if(d->store, sb, gen, NULL, err) < 0) {
		if (err->code == ESTALE)
			err_set(err, EBUSY, "sandbox %s changed while it was being deleted: try again", sb->id);
		return -1;
	}
	return store_op_put(d->store, op, err);
}

static bool node_alive(struct spaced *d, const char *node_id)
{
	struct node_rec n;
	space_err err = { 0 };

	return node_id[0] && store_node_get(d->store, node_id, &n, &err) == 0 && n.state == NODE_UP;
}

void cluster_delete(struct http_req *r)
{
	struct sandbox_rec sb = { 0 };
	struct op_rec op = { 0 };
	space_err err = { 0 };
	char url[256];
	bool e2b = e2b_api_path(r);

	if (!id_valid(r->param[0], "sb-") || store_sandbox_get(r->d->store, r->param[0], &sb, &err) < 0 ||
	    sb.state == SB_DELETED || sb.role != ROLE_USER) {
		sandbox_rec_clear(&sb);
		if (e2b)
			e2b_reply_error(r->req, 404, "sandbox %.64s not found", r->param[0]);
		else
			http_reply_error(r->req, 404, "not_found", "no sandbox '%.64s'", r->param[0]);
		return;
	}
	if (node_alive(r->d, sb.node_id)) {
		if (cluster_sandbox_url(r->d, sb.id, false, url, sizeof(url), &err) < 0 || http_proxy(r, url, &err) < 0)
			goto fail;
	} else if (delete_here(r->d, &sb, &op, &err) < 0) {
		goto fail;
	} else if (e2b) {
		http_reply_empty(r->req, 204);
	} else {
		api_reply_accepted(r, &sb, &op);
	}
	sandbox_rec_clear(&sb);
	op_rec_clear(&op);
	return;
fail:
	if (e2b)
		e2b_reply_error(r->req, err_http_status(err.code), "%s", err.msg);
	else
		http_reply_err(r->req, &err);
	sandbox_rec_clear(&sb);
	op_rec_clear(&op);
}
