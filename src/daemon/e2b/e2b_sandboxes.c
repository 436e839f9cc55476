/* e2b_sandboxes.c -- E2B's sandbox lifecycle (create, connect/resume, kill, pause, timeout,
 * network, fork, snapshot) mapped onto the core: each starts the core's operation and, where
 * E2B answers only once it is done, holds the request until op_wait reports it */
#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>

#include "front/front.h"
#include "front/port_names.h"
#include "e2b.h"
#include "e2b_ctl.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

/* How long a held request waits for its operation (a cold boot under TCG on a busy host
 * can take a while). */
#define E2B_WAIT_S 180

json_t *e2b_body(struct http_req *r)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(r->req);
	size_t len = evbuffer_get_length(in);
	space_err err = { 0 };
	const char *data;
	json_t *j;

	if (len > r->max_body) {
		e2b_reply_error(r->req, 413, "request body of %zu bytes is over the limit of %zu", len, r->max_body);
		return NULL;
	}
	data = len ? (const char *)evbuffer_pullup(in, -1) : "";
	if (!data) {
		e2b_reply_error(r->req, 500, "out of memory reading the body");
		return NULL;
	}
	j = http_parse_json_object(data, len, &err);
	if (!j)
		e2b_reply_err(r->req, &err);
	return j;
}

static bool gone_state(enum sb_state s)
{
	return s == SB_DELETING || s == SB_DELETED || s == SB_FAILED;
}

int e2b_sandbox_param(struct http_req *r, struct sandbox_rec *out)
{
	space_err err = { 0 };

	if (sandbox_get(r->d, r->param[0], out, &err) < 0) {
		e2b_reply_err(r->req, &err);
		return -1;
	}
	if (gone_state(out->state)) {
		e2b_reply_error(r->req, 404, "sandbox %s not found (%s)", out->id, sb_state_name(out->state));
		sandbox_rec_clear(out);
		return -1;
	}
	return 0;
}

/* Its ports' domain as the SDKs' getHost(port) wants it (the same for every sandbox). */
static const char *e2b_domain(const struct spaced *d)
{
	static char dom[192];

	port_domain(d->cfg.data_url, d->cfg.ports_domain, dom, sizeof(dom));
	return dom;
}

/* A sandbox that runs, handed to the SDK: its timeout set (when asked), a fresh envd token. */
static void reply_running(struct spaced *d, struct evhttp_request *req, const char *id, bool tset,
			  const struct timeout_req *t, int status)
{
	struct sandbox_rec sb = { 0 };
	space_err err = { 0 };
	char token[65];
	int64_t exp;

	if ((tset ? sandbox_set_timeout(d, id, t, &sb, &err) : sandbox_get(d, id, &sb, &err)) < 0 ||
	    token_issue(d, id, TOKEN_SCOPE_ENVD, E2B_TOKEN_TTL_S, token, &exp, &err) < 0) {
		e2b_reply_err(req, &err);
	} else {
		/* once the token's row is in the store (token_issue queued it) */
		api_reply_stored_to(d, req, status, e2b_created_json(&sb, token, e2b_domain(d)));
		explicit_bzero(token, sizeof(token));
	}
	sandbox_rec_clear(&sb);
}

/* ---- requests held until their operation is done ---- */

enum wait_kind { W_CREATE, W_CONNECT, W_KILL, W_PAUSE, W_FORK, W_SNAPSHOT };

/* Freed exactly once: by its op_wait callback (reply sent) or when the client goes away
 * (the waiter cancelled; the operation itself goes on, as E2B's would). */
struct e2b_wait {
	struct http_hold hold; /* first: on_gone gets &hold */
	struct spaced *d;
	struct op_waiter *waiter; /* NULL once the operation is done */
	bool gone;            /* the client went away while the reply waited for the store */
	struct op_rec op;     /* the operation as it ended (no result) */
	enum wait_kind kind;
	char sb_id[ID_LEN];
	int status;
	bool tset;
	struct timeout_req t;
	json_t *children;     /* W_FORK: the children's ids */
	char name[SPEC_NAME_MAX + 1]; /* W_SNAPSHOT */
	struct snapshot_rec snap;     /* W_SNAPSHOT: read on the store's thread */
	int snap_rc;
	space_err snap_err;
};

static struct e2b_wait *wait_new(enum wait_kind kind, const char *sb_id, int status)
{
	struct e2b_wait *w = calloc(1, sizeof(*w));

	if (w) {
		w->kind = kind;
		w->status = status;
		snprintf(w->sb_id, sizeof(w->sb_id), "%s", sb_id);
	}
	return w;
}

static void wait_free(struct e2b_wait *w)
{
	json_decref(w->children);
	snapshot_rec_clear(&w->snap);
	free(w);
}

static void reply_forked(struct spaced *d, struct evhttp_request *req, struct e2b_wait *w)
{
	json_t *out = json_array(), *v;
	size_t i;

	json_array_foreach(w->children, i, v) {
		struct sandbox_rec sb = { 0 };
		space_err err = { 0 };
		const char *id = json_string_value(v);
		char token[65];
		int64_t exp;
		json_t *one;

		if (!id || (w->tset ? sandbox_set_timeout(d, id, &w->t, &sb, &err) : sandbox_get(d, id, &sb, &err)) < 0) {
			one = json_pack("{s:{s:i,s:s}}", "error", "code", err_http_status(err.code ? err.code : EIO),
					"message", err.msg);
		} else if (sb.state != SB_RUNNING) {
			one = json_pack("{s:{s:i,s:s}}", "error", "code", 500, "message",
					sb.error[0] ? sb.error : sb_state_name(sb.state));
		} else if (token_issue(d, id, TOKEN_SCOPE_ENVD, E2B_TOKEN_TTL_S, token, &exp, &err) < 0) {
			one = json_pack("{s:{s:i,s:s}}", "error", "code", 500, "message", err.msg);
		} else {
			one = json_pack("{s:o}", "sandbox", e2b_created_json(&sb, token, e2b_domain(d)));
			explicit_bzero(token, sizeof(token));
		}
		sandbox_rec_clear(&sb);
		if (one)
			json_array_append_new(out, one);
	}
	api_reply_stored_to(d, req, w->status, out); /* once the tokens' rows are in the store */
}

/* The snapshot was read behind the operation's writes (wait_barrier). */
static void reply_snapshot(struct evhttp_request *req, struct e2b_wait *w)
{
	if (w->snap_rc < 0) {
		e2b_reply_err(req, &w->snap_err);
		return;
	}
	http_reply_json(req, w->status, e2b_snapshot_json(&w->snap));
}

/* The operation is done, and the store has what it wrote (wait_done): the reply. */
static void wait_stored(void *arg, bool ran)
{
	struct e2b_wait *w = arg;
	struct spaced *d = w->d;
	struct evhttp_request *req = w->hold.req;
	const struct op_rec *op = &w->op;

	(void)ran; /* stopping: answered from memory all the same */
	if (w->gone) {
		wait_free(w);
		return;
	}
	http_hold_end(&w->hold);
	if (!op_state_done(op->state)) {
		e2b_reply_error(req, 504, "operation %s (%s) still %s after %d s", op->id, op_kind_name(op->kind),
				op_state_name(op->state), E2B_WAIT_S);
	} else if (op->state == OP_FAILED) {
		e2b_reply_error(req, 500, "%s failed: %s", op_kind_name(op->kind), op->error);
	} else {
		switch (w->kind) {
		case W_CREATE:
		case W_CONNECT:
			reply_running(d, req, w->sb_id, w->tset, &w->t, w->status);
			break;
		case W_KILL:
		case W_PAUSE:
			http_reply_empty(req, 204);
			break;
		case W_FORK:
			reply_forked(d, req, w);
			break;
		case W_SNAPSHOT:
			reply_snapshot(req, w);
			break;
		}
	}
	wait_free(w);
}

static void wait_barrier(struct store *conn, void *arg)
{
	struct e2b_wait *w = arg;

	if (w->kind == W_SNAPSHOT && w->op.state == OP_SUCCEEDED)
		w->snap_rc = store_snapshot_get_by_name(conn, w->name, &w->snap, &w->snap_err);
}

/* Before answering, the rows the operation changed must be in the store: the SDK's next call
 * may go through another process (an api process reads the store). The reply waits for the
 * writes queued so far on the store's thread (store_async), not on the loop. */
static void wait_done(struct spaced *d, const struct op_rec *op, void *arg)
{
	struct e2b_wait *w = arg;
	space_err err = { 0 };

	w->waiter = NULL;
	w->op = *op;
	w->op.result = NULL;
	if (store_async(d->store, wait_barrier, wait_stored, w, &err) < 0)
		wait_stored(w, true);
}

static void wait_gone(struct http_hold *h)
{
	struct e2b_wait *w = (struct e2b_wait *)h;

	if (!w->waiter) {
		w->gone = true; /* wait_stored frees it */
		return;
	}
	op_wait_cancel(w->waiter);
	wait_free(w);
}

/* Holds req until op is done; takes w. */
static void hold_op_to(struct spaced *d, struct evhttp_request *req, const struct op_rec *op, struct e2b_wait *w)
{
	space_err err = { 0 };

	if (!w) {
		e2b_reply_error(req, 500, "out of memory");
		return;
	}
	w->d = d;
	/* op_wait never calls back from inside itself, so the hold may begin after it. */
	if (op_wait(d, op->id, E2B_WAIT_S, wait_done, w, &w->waiter, &err) < 0) {
		e2b_reply_err(req, &err);
		wait_free(w);
		return;
	}
	http_hold_begin(&w->hold, req, wait_gone, d->conns);
}

static void hold_op(struct http_req *r, const struct op_rec *op, struct e2b_wait *w)
{
	hold_op_to(r->d, r->req, op, w);
}

/* ---- handlers ---- */

/* E2B passes a snapshot to create as its templateID: our snapshot id, or a named snapshot's
 * name when no template has that name. On the store's thread, with the create's other reads
 * (create_job_read); the sandbox is made on the loop with them. */

static void template_or_snapshot(struct store *conn, struct create_req *req)
{
	struct template_rec t = { 0 };
	struct snapshot_rec s = { 0 };
	space_err err = { 0 };
	bool snap = id_valid(req->template_ref, "sn-");

	if (!snap && store_template_resolve(conn, req->template_ref, &t, &err) < 0 && err.code == ENOENT &&
	    snapshot_lookup(conn, req->template_ref, &s, &err) == 0)
		snap = true;
	template_rec_clear(&t);
	snapshot_rec_clear(&s);
	if (snap) {
		memcpy(req->snapshot, req->template_ref, sizeof(req->snapshot));
		req->template_ref[0] = '\0';
	}
}

static int create_reads(struct store *conn, void *arg, space_err *err)
{
	struct create_job *j = arg;

	template_or_snapshot(conn, &j->req);
	return create_job_read(conn, j, err);
}

static void create_reply(struct spaced *d, struct evhttp_request *req, void *arg, int rc, const space_err *err)
{
	struct create_job *j = arg;
	struct sandbox_rec sb = { 0 };
	struct op_rec op = { 0 };
	space_err e2 = { 0 };

	/* A failed read is answered as the create would answer it (it fails the same way). */
	if (rc < 0)
		e2b_reply_err(req, err);
	else if (sandbox_create_read(d, &j->req, &j->pre, &sb, &op, &e2) < 0)
		e2b_reply_err(req, &e2);
	else
		hold_op_to(d, req, &op, wait_new(W_CREATE, sb.id, 201));
	sandbox_rec_clear(&sb);
	op_rec_clear(&op);
}

void e2b_create(struct http_req *r)
{
	struct create_job *j;
	space_err err = { 0 };
	json_t *body = e2b_body(r);

	if (!body)
		return;
	if (!(j = create_job_new(r->d))) {
		e2b_reply_error(r->req, 500, "out of memory");
	} else if (e2b_req_create(body, &j->req, &err) < 0) {
		e2b_reply_err(r->req, &err);
		free(j);
	} else {
		api_read(r, create_reads, create_reply, create_job_free, j);
	}
	json_decref(body);
}

/* connect (resume: older SDKs, 409 when it runs already). */
static void wake(struct http_req *r, bool resume)
{
	struct sandbox_rec sb = { 0 };
	struct op_rec op = { 0 };
	struct timeout_req t;
	space_err err = { 0 };
	json_t *body = e2b_body(r);
	struct e2b_wait *w;
	bool tset;

	if (!body)
		return;
	if (e2b_req_timeout(body, "timeout", &t, &tset, &err) < 0) {
		e2b_reply_err(r->req, &err);
		goto out;
	}
	if (e2b_sandbox_param(r, &sb) < 0)
		goto out;
	if (resume && sb.state == SB_RUNNING) {
		e2b_reply_error(r->req, 409, "sandbox %s is already running", sb.id);
		goto out;
	}
	sandbox_rec_clear(&sb);
	if (sandbox_wake(r->d, r->param[0], &sb, &op, &err) < 0) {
		e2b_reply_err(r->req, &err);
	} else if (!op.id[0]) {
		reply_running(r->d, r->req, sb.id, tset, &t, 200);
	} else if ((w = wait_new(W_CONNECT, sb.id, 201))) {
		w->tset = tset;
		w->t = t;
		hold_op(r, &op, w);
	} else {
		e2b_reply_error(r->req, 500, "out of memory");
	}
out:
	json_decref(body);
	sandbox_rec_clear(&sb);
	op_rec_clear(&op);
}

void e2b_connect(struct http_req *r)
{
	wake(r, false);
}

void e2b_resume(struct http_req *r)
{
	wake(r, true);
}

/* kill and pause: the operation, then 204 once it is done. */
static void act(struct http_req *r, enum op_kind kind, enum wait_kind wk)
{
	struct sandbox_rec sb = { 0 };
	struct op_rec op = { 0 };
	space_err err = { 0 };

	if (e2b_sandbox_param(r, &sb) < 0)
		return;
	if (kind == OPK_SUSPEND && e2b_state_of(sb.state) == E2B_PAUSED) {
		e2b_reply_error(r->req, 409, "sandbox %s is already paused (%s)", sb.id, sb_state_name(sb.state));
		sandbox_rec_clear(&sb);
		return;
	}
	sandbox_rec_clear(&sb);
	if (sandbox_act(r->d, r->param[0], kind, &sb, &op, &err) < 0)
		e2b_reply_err(r->req, &err);
	else
		hold_op(r, &op, wait_new(wk, sb.id, 204));
	sandbox_rec_clear(&sb);
	op_rec_clear(&op);
}

void e2b_kill(struct http_req *r)
{
	act(r, OPK_DELETE, W_KILL);
}

void e2b_pause(struct http_req *r)
{
	json_t *body = e2b_body(r); /* {"memory": bool}: our suspend always keeps memory */

	if (!body)
		return;
	json_decref(body);
	act(r, OPK_SUSPEND, W_PAUSE);
}

static void set_timeout(struct http_req *r, const char *key)
{
	struct sandbox_rec sb = { 0 };
	struct timeout_req t;
	space_err err = { 0 };
	json_t *body = e2b_body(r);
	bool set;

	if (!body)
		return;
	if (e2b_req_timeout(body, key, &t, &set, &err) < 0) {
		e2b_reply_err(r->req, &err);
	} else if (e2b_sandbox_param(r, &sb) == 0) {
		if (!set)
			t.timeout_s = sb.timeout_s; /* a refresh without a duration: the same again */
		sandbox_rec_clear(&sb);
		if (sandbox_set_timeout(r->d, r->param[0], &t, &sb, &err) < 0)
			e2b_reply_err(r->req, &err);
		else
			http_reply_empty(r->req, 204);
	}
	json_decref(body);
	sandbox_rec_clear(&sb);
}

void e2b_timeout(struct http_req *r)
{
	json_t *body = e2b_body(r);
	bool has;

	if (!body)
		return;
	has = json_object_get(body, "timeout") != NULL;
	json_decref(body);
	if (!has) {
		e2b_reply_error(r->req, 400, "timeout is required: seconds from now");
		return;
	}
	set_timeout(r, "timeout");
}

void e2b_refresh(struct http_req *r)
{
	set_timeout(r, "duration");
}

void e2b_network(struct http_req *r)
{
	struct sandbox_rec sb = { 0 };
	space_err err = { 0 };
	json_t *body = e2b_body(r), *pol = NULL;

	if (!body)
		return;
	if (e2b_req_network_update(body, &pol, &err) < 0)
		e2b_reply_err(r->req, &err);
	else if (e2b_sandbox_param(r, &sb) == 0) {
		sandbox_rec_clear(&sb);
		if (sandbox_set_network(r->d, r->param[0], pol, NULL, &sb, &err) < 0)
			e2b_reply_err(r->req, &err);
		else
			http_reply_empty(r->req, 204);
	}
	json_decref(pol);
	json_decref(body);
	sandbox_rec_clear(&sb);
}

void e2b_fork(struct http_req *r)
{
	struct sandbox_rec sb = { 0 };
	struct op_rec op = { 0 };
	struct timeout_req t;
	space_err err = { 0 };
	json_t *body = e2b_body(r), *children = NULL;
	struct e2b_wait *w;
	bool tset;
	int count;

	if (!body)
		return;
	if (e2b_req_fork(body, &count, &t, &tset, &err) < 0 ||
	    sandbox_fork(r->d, r->param[0], count, &sb, &op, &children, &err) < 0) {
		e2b_reply_err(r->req, &err);
	} else if ((w = wait_new(W_FORK, sb.id, 201))) {
		w->children = children;
		w->tset = tset;
		w->t = t;
		hold_op(r, &op, w);
	} else {
		json_decref(children);
		e2b_reply_error(r->req, 500, "out of memory");
	}
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
	struct e2b_wait *w;

	if (rc < 0) {
		e2b_reply_err(req, rerr);
		return;
	}
	if (sandbox_snapshot(d, j->id, j->name, &sb, &op, &snap, &err) < 0) {
		e2b_reply_err(req, &err);
	} else if ((w = wait_new(W_SNAPSHOT, sb.id, 201))) {
		snprintf(w->name, sizeof(w->name), "%s", j->name);
		hold_op_to(d, req, &op, w);
	} else {
		e2b_reply_error(req, 500, "out of memory");
	}
	sandbox_rec_clear(&sb);
	op_rec_clear(&op);
	snapshot_rec_clear(&snap);
}

void e2b_snapshot(struct http_req *r)
{
	space_err err = { 0 };
	json_t *body = e2b_body(r);
	struct snapshot_req *j;

	if (!body)
		return;
	j = snapshot_req_new(r->param[0]);
	if (!j) {
		e2b_reply_error(r->req, 500, "out of memory");
	} else if (e2b_req_snapshot(body, j->name, sizeof(j->name), &err) < 0) {
		e2b_reply_err(r->req, &err);
		snapshot_req_free(j);
	} else {
		if (!j->name[0]) {
			char id[ID_LEN];

			id_new(id, "e2b-"); /* "e2b-" + hex: a name, never shaped like a snapshot id */
			snprintf(j->name, sizeof(j->name), "%s", id);
		}
		if (sandbox_find(r->d, j->id)) {
			api_read(r, snapshot_req_read, snap_begin, snapshot_req_free, j);
		} else {
			/* not held here: refused now, from the record read before */
			snap_begin(r->d, r->req, j, 0, &err);
			snapshot_req_free(j);
		}
	}
	json_decref(body);
}
