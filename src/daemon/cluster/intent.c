/* intent.c -- an api process writes creates and restores as intent for nodes to claim
 * (cluster.h; docs/design/cluster.md, "Placement") */
#include <stdlib.h>
#include <string.h>

#include "front/dialect.h"
#include "front/front.h"
#include "front/req.h"
#include "cluster.h"
#include "http/proxy.h"
#include "log.h"
#include "front/render.h"
#include "sandbox/sandbox.h"
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

/* POST /v1/sandboxes on an api process, in three steps, the database's two on the store's
 * thread: (1) what the create reads (the template, a named snapshot: create_read); (2) on the
 * loop, the record a node will make of the request (the same create_prepare runs on the node
 * with the same ids) and its operation; (3) whether an up node could ever hold it, and the
 * intent written (the record, its operation and the request itself, one transaction); then
 * the 202. The loop never waits on the database. */
struct intent_job {
	json_t *body;
	struct create_job c;   /* the request and what create_read read */
	struct sandbox_rec rec;
	struct op_rec op;
	json_t *intent;
	const struct http_dialect *dialect; /* the route's: how it answers */
};

static void create_free(void *arg)
{
	struct intent_job *j = arg;

	json_decref(j->body);
	json_decref(j->intent);
	create_req_free(&j->c.req);
	create_reads_clear(&j->c.pre);
	sandbox_rec_clear(&j->rec);
	free(j);
}

static int create_write(struct store *conn, void *arg, space_err *err)
{
	struct intent_job *j = arg;
	struct fit f = { .memory_mib = j->rec.memory_mib };

	if (store_node_each(conn, fits_some_node, &f, err) < 0)
		return -1;
	if (!f.fits)
		return err_set(err, EDQUOT, "no node that is up has room for a %d MiB sandbox", j->rec.memory_mib);
	return store_intent_put(conn, &j->rec, &j->op, j->intent, err);
}

static void create_written(struct spaced *d, struct evhttp_request *req, void *arg, int rc, const space_err *err)
{
	struct intent_job *j = arg;
	const struct front_intent_reply *fi = front_intent_of(j->dialect);

	if (rc < 0)
		http_dialect_err(j->dialect, req, err);
	else if (fi && fi->accepted)
		fi->accepted(d, req, &j->rec, &j->op);
	else
		http_reply_json(req, 202, json_pack("{s:s,s:s}", "sandbox", j->rec.id, "operation", j->op.id));
}

static int create_reads(struct store *conn, void *arg, space_err *err)
{
	struct intent_job *j = arg;

	return create_job_read(conn, &j->c, err);
}

/* Step 2; step 3 takes the job over (moved into a new one: this one is freed after). */
static void create_prepared(struct spaced *d, struct evhttp_request *req, void *arg, int rc, const space_err *err)
{
	struct intent_job *j = arg, *next;
	struct op_rec *op = &j->op;
	space_err e2 = { 0 };

	if (rc < 0) {
		http_reply_err(req, err);
		return;
	}
	if (sandbox_create_record(d, &j->c.req, &j->c.pre, &j->rec, &e2) < 0) {
		http_reply_err(req, &e2);
		return;
	}
	id_new(op->id, "op-");
	op->kind = OPK_CREATE;
	snprintf(op->sandbox_id, sizeof(op->sandbox_id), "%s", j->rec.id);
	op->state = OP_PENDING;
	op->created_ms = op->updated_ms = now_ms();
	j->intent = json_pack("{s:s,s:s,s:O}", "kind", "create", "op", op->id, "request", j->body);
	if (!j->intent || !(next = calloc(1, sizeof(*next)))) {
		http_reply_error(req, 500, "internal", "out of memory");
		return;
	}
	*next = *j;
	memset(j, 0, sizeof(*j));
	api_read_to(d, req, create_write, create_written, create_free, next);
}

void cluster_create(struct http_req *r)
{
	struct intent_job *j;
	space_err err = { 0 };
	json_t *body = http_body_json(r);

	if (!body)
		return;
	if (!(j = calloc(1, sizeof(*j)))) {
		http_reply_error(r->req, 500, "internal", "out of memory");
		json_decref(body);
		return;
	}
	j->body = body;
	j->dialect = r->dialect;
	if (req_create(body, &j->c.req, &err) < 0) {
		http_reply_err(r->req, &err);
		json_decref(body);
		free(j);
		return;
	}
	api_read(r, create_reads, create_prepared, create_free, j);
}

/* A restore whose front end answers once the sandbox runs (front/dialect.h: restore_waits,
 * E2B's connect/resume): the request waits for the restore to be claimed and done, then goes
 * to the node that did it. */
struct e2b_wait {
	struct http_hold hold; /* first */
	struct spaced *d;
	const struct http_dialect *dialect;
	struct op_waiter *waiter; /* NULL once it fired */
	enum evhttp_cmd_type method;
	char sb_id[ID_LEN];
	bool looking;          /* the node's URL is being read on the store's thread */
	bool gone;             /* the client left meanwhile */
	int rc;
	space_err err;
	char url[256];
};

/* Which node has it now, read on the store's thread; the relay from the loop. */
static void url_read(struct store *conn, void *arg)
{
	struct e2b_wait *w = arg;

	w->rc = cluster_sandbox_url_on(conn, w->sb_id, false, w->url, sizeof(w->url), &w->err);
}

static void url_done(void *arg, bool ran)
{
	struct e2b_wait *w = arg;
	struct http_req r = { .d = w->d, .req = w->hold.req, .method = w->method };

	if (!w->gone) {
		http_hold_end(&w->hold);
		if (!ran)
			http_dialect_error(w->dialect, r.req, 503, "unavailable", "this api process is stopping");
		else if (w->rc < 0 || http_proxy(&r, w->url, &w->err) < 0)
			http_dialect_err(w->dialect, r.req, &w->err);
	}
	free(w);
}

static void e2b_wait_done(struct spaced *d, const struct op_rec *op, void *arg)
{
	struct e2b_wait *w = arg;
	space_err err = { 0 };

	w->waiter = NULL;
	if (op->state == OP_SUCCEEDED) {
		w->looking = true;
		if (store_async(d->store, url_read, url_done, w, &err) == 0)
			return;
		w->looking = false;
	}
	http_hold_end(&w->hold);
	if (op->state != OP_SUCCEEDED)
		http_dialect_error(w->dialect, w->hold.req, 500, "internal", "restoring %s: %s", w->sb_id,
				   op->error[0] ? op->error : "timed out");
	else
		http_dialect_err(w->dialect, w->hold.req, &err);
	free(w);
}

static void e2b_wait_gone(struct http_hold *h)
{
	struct e2b_wait *w = (struct e2b_wait *)h;

	w->gone = true;
	if (w->looking)
		return; /* url_done frees it */
	op_wait_cancel(w->waiter);
	free(w);
}

static void e2b_hold(struct spaced *d, struct evhttp_request *req, enum evhttp_cmd_type method,
		     const struct http_dialect *dl, const struct op_rec *op)
{
	struct e2b_wait *w = calloc(1, sizeof(*w));
	space_err err = { 0 };

	if (!w) {
		http_dialect_error(dl, req, 500, "internal", "out of memory");
		return;
	}
	w->d = d;
	w->dialect = dl;
	w->method = method;
	snprintf(w->sb_id, sizeof(w->sb_id), "%s", op->sandbox_id);
	if (op_wait(d, op->id, 60, e2b_wait_done, w, &w->waiter, &err) < 0) {
		free(w);
		http_dialect_error(dl, req, 500, "internal", "%s", err.msg);
		return;
	}
	http_hold_begin(&w->hold, req, e2b_wait_gone, d->conns);
}

/* ---- restore and delete on an api process: the store's work on its thread ----
 * Which node owns the sandbox (and its URL), a restore's intent, a deletion made in the store
 * alone: all read and written on the store's thread (api_read_to); the relay, or the reply, on
 * the loop. */
enum cl_kind { CL_RESTORE, CL_DELETE };
enum cl_then { CL_RELAY, CL_ANSWER };

struct cl_job {
	enum cl_kind kind;
	const struct http_dialect *dialect; /* the route's: how it answers (front/dialect.h) */
	enum evhttp_cmd_type method;
	char id[ID_LEN];
	enum cl_then then;
	struct sandbox_rec sb;
	struct op_rec op;
	char url[256];
};

/* Operations still open on a sandbox closed here fail with why (a create no node claimed). */
struct close_ops {
	struct store *st;
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
	if (store_op_put(c->st, &o, &err) < 0)
		log_error("operation %s: %s", o.id, err.msg);
	op_rec_clear(&o);
	return 0;
}

/* A sandbox no live node owns (lost with its node, or a create not claimed yet) is deleted in
 * the store alone: there is no VM here to stop, and none left where it was. */
static int delete_here(struct store *st, struct sandbox_rec *sb, struct op_rec *op, space_err *err)
{
	struct close_ops c = { st, sb->id, "the sandbox was deleted before a node started it" };
	int64_t gen = sb->generation;

	if (store_op_each_open(st, close_op, &c, err) < 0)
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
	if (store_sandbox_put_if(st, sb, gen, NULL, err) < 0) {
		if (err->code == ESTALE)
			err_set(err, EBUSY, "sandbox %s changed while it was being deleted: try again", sb->id);
		return -1;
	}
	return store_op_put(st, op, err);
}

static bool node_alive(struct store *st, const char *node_id)
{
	struct node_rec n;
	space_err err = { 0 };

	return node_id[0] && store_node_get(st, node_id, &n, &err) == 0 && n.state == NODE_UP;
}

/* A suspended sandbox no node owns (its node was lost): any node may restore it from the
 * shared directory. */
static int write_restore(struct store *st, const char *id, struct op_rec *op, space_err *err)
{
	memset(op, 0, sizeof(*op));
	id_new(op->id, "op-");
	op->kind = OPK_RESTORE;
	snprintf(op->sandbox_id, sizeof(op->sandbox_id), "%s", id);
	op->state = OP_PENDING;
	op->created_ms = op->updated_ms = now_ms();
	return store_intent_restore(st, id, op, err);
}

static int cl_read(struct store *conn, void *arg, space_err *err)
{
	struct cl_job *j = arg;
	struct sandbox_rec *sb = &j->sb;

	if (store_sandbox_get(conn, j->id, sb, err) < 0 ||
	    (j->kind == CL_DELETE && (sb->state == SB_DELETED || sb->role != ROLE_USER)))
		return err_set(err, ENOENT, "no sandbox '%.64s'", j->id);
	j->then = CL_RELAY;
	if (j->kind == CL_DELETE) {
		if (node_alive(conn, sb->node_id))
			return cluster_sandbox_url_on(conn, sb->id, false, j->url, sizeof(j->url), err);
		j->then = CL_ANSWER;
		return delete_here(conn, sb, &j->op, err);
	}
	if (sb->node_id[0]) /* its node does it, as a single daemon would */
		return cluster_sandbox_url_on(conn, sb->id, false, j->url, sizeof(j->url), err);
	if (sb->state != SB_SUSPENDED)
		return err_set(err, EBUSY, "sandbox %s is %s and on no node: nothing to restore", sb->id,
			       sb_state_name(sb->state));
	j->then = CL_ANSWER;
	return write_restore(conn, sb->id, &j->op, err);
}

static void cl_reply(struct spaced *d, struct evhttp_request *req, void *arg, int rc, const space_err *err)
{
	struct cl_job *j = arg;
	const struct front_intent_reply *fi = front_intent_of(j->dialect);
	struct http_req r = { .d = d, .req = req, .method = j->method };
	space_err e2 = { 0 };

	if (rc == 0 && j->then == CL_RELAY && http_proxy(&r, j->url, &e2) < 0) {
		rc = -1;
		err = &e2;
	}
	if (rc < 0) {
		if (err->code == ENOENT && fi && fi->no_sandbox)
			fi->no_sandbox(req, j->id);
		else
			http_dialect_err(j->dialect, req, err);
		return;
	}
	if (j->then == CL_RELAY)
		return;
	if (j->kind == CL_RESTORE && fi && fi->restore_waits) {
		e2b_hold(d, req, j->method, j->dialect, &j->op);
		return;
	}
	if (j->kind == CL_RESTORE)
		j->sb.state = SB_RESTORING;
	if (fi && fi->accepted)
		fi->accepted(d, req, &j->sb, &j->op);
	else
		http_reply_json(req, 202, json_pack("{s:s,s:s}", "sandbox", j->sb.id, "operation", j->op.id));
}

static void cl_free(void *arg)
{
	struct cl_job *j = arg;

	sandbox_rec_clear(&j->sb);
	op_rec_clear(&j->op);
	free(j);
}

static void cl_begin(struct http_req *r, enum cl_kind kind)
{
	const struct front_intent_reply *fi = front_intent_of(r->dialect);
	struct cl_job *j;

	if (!id_valid(r->param[0], "sb-")) {
		if (fi && fi->no_sandbox)
			fi->no_sandbox(r->req, r->param[0]);
		else
			http_req_error(r, 404, "not_found", "no sandbox '%.64s'", r->param[0]);
		return;
	}
	if (!(j = calloc(1, sizeof(*j)))) {
		http_reply_error(r->req, 500, "internal", "out of memory");
		return;
	}
	j->kind = kind;
	j->dialect = r->dialect;
	j->method = r->method;
	snprintf(j->id, sizeof(j->id), "%s", r->param[0]);
	api_read(r, cl_read, cl_reply, cl_free, j);
}

void cluster_restore(struct http_req *r)
{
	cl_begin(r, CL_RESTORE);
}

void cluster_delete(struct http_req *r)
{
	cl_begin(r, CL_DELETE);
}
