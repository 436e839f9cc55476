/* tool_sandbox.c -- the MCP tools that act on sandboxes as a whole: create, list, delete,
 * pause, resume, fork, snapshot, expose a port. Each parses its arguments into the core's
 * request (through /v1's parsers, so a rule exists once), starts the core's operation and
 * answers once op_wait says it is done, as E2B's front end does (e2b/e2b_sandboxes.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "front/port_names.h"
#include "front/render.h"
#include "front/req.h"
#include "mcp.h"
#include "ports/ports_front.h"
#include "sandbox/ports.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

/* How long a tool waits for its operation (a cold boot under TCG on a busy host is slow). */
#define MCP_WAIT_S 180

enum wait_kind { W_CREATE, W_DELETE, W_PAUSE, W_RESUME, W_FORK, W_SNAPSHOT };

/* One wait for an operation (or a store read before one). Freed exactly once: by its
 * callback (the call answered), by wait_cancel (the client left while op_wait held it), or,
 * for a store read, by its done callback after the client left (gone). */
struct sb_wait {
	struct mcp_call *c;
	enum wait_kind kind;
	struct op_waiter *waiter;
	bool gone;
	char sb_id[ID_LEN];
	json_t *children;            /* W_FORK */
	char snap_id[ID_LEN];        /* W_SNAPSHOT */
	char name[SPEC_NAME_MAX + 1];
	struct create_job *job;      /* W_CREATE: its reads */
	struct snapshot_req *snap;   /* W_SNAPSHOT: its name check */
	json_t *list;                /* list_sandboxes: rendered on the store's thread */
	int rc;
	space_err err;
};

static struct sb_wait *wait_new(struct mcp_call *c, enum wait_kind kind, const char *sb_id)
{
	struct sb_wait *w = calloc(1, sizeof(*w));

	if (!w) {
		mcp_call_fail(c, "%s: out of memory", c->tool->name);
		return NULL;
	}
	w->c = c;
	w->kind = kind;
	snprintf(w->sb_id, sizeof(w->sb_id), "%s", sb_id ? sb_id : "");
	return w;
}

static void wait_free(struct sb_wait *w)
{
	json_decref(w->children);
	json_decref(w->list);
	if (w->job)
		create_job_free(w->job);
	if (w->snap)
		snapshot_req_free(w->snap);
	free(w);
}

/* The sandbox's record as a tool result. */
static json_t *sandbox_brief(const struct sandbox_rec *sb)
{
	return json_pack("{s:s,s:s,s:s,s:s?,s:o}", "sandbox_id", sb->id, "state", sb_state_name(sb->state), "template",
			 sb->template_ref, "parent_id", sb->parent_id[0] ? sb->parent_id : NULL, "expires_at",
			 render_time(sb->expires_ms));
}

static void answer_state(struct mcp_call *c, const char *id)
{
	struct sandbox_rec sb = { 0 };
	space_err err = { 0 };

	if (sandbox_get(c->d, id, &sb, &err) < 0)
		mcp_call_err(c, c->tool->name, &err);
	else
		mcp_call_done(c, mcp_tool_json(sandbox_brief(&sb)));
	sandbox_rec_clear(&sb);
}

static void answer_fork(struct mcp_call *c, struct sb_wait *w)
{
	json_t *ids = json_array(), *v;
	size_t i;

	json_array_foreach(w->children, i, v) {
		struct sandbox_rec sb = { 0 };
		space_err err = { 0 };

		if (sandbox_get(c->d, json_string_value(v), &sb, &err) == 0 && sb.state == SB_RUNNING)
			json_array_append(ids, v);
		sandbox_rec_clear(&sb);
	}
	if (json_array_size(ids) != json_array_size(w->children)) {
		json_decref(ids);
		mcp_call_fail(c, "fork_sandbox: not every copy of %s runs", w->sb_id);
		return;
	}
	mcp_call_done(c, mcp_tool_json(json_pack("{s:s,s:o}", "parent_id", w->sb_id, "sandbox_ids", ids)));
}

static void wait_done(struct spaced *d, const struct op_rec *op, void *arg)
{
	struct sb_wait *w = arg;
	struct mcp_call *c = w->c;

	(void)d;
	w->waiter = NULL;
	if (!op_state_done(op->state)) {
		mcp_call_fail(c, "%s: operation %s (%s) still %s after %d s", c->tool->name, op->id, op_kind_name(op->kind),
			      op_state_name(op->state), MCP_WAIT_S);
	} else if (op->state == OP_FAILED) {
		mcp_call_fail(c, "%s: %s failed: %s", c->tool->name, op_kind_name(op->kind), op->error);
	} else {
		switch (w->kind) {
		case W_CREATE:
		case W_PAUSE:
		case W_RESUME:
			answer_state(c, w->sb_id);
			break;
		case W_DELETE:
			mcp_call_done(c, mcp_tool_json(json_pack("{s:s,s:b}", "sandbox_id", w->sb_id, "deleted", 1)));
			break;
		case W_FORK:
			answer_fork(c, w);
			break;
		case W_SNAPSHOT:
			mcp_call_done(c, mcp_tool_json(json_pack("{s:s,s:s,s:s}", "snapshot_id", w->snap_id, "name", w->name,
								 "sandbox_id", w->sb_id)));
			break;
		}
	}
	wait_free(w);
}

static void wait_cancel(void *arg)
{
	struct sb_wait *w = arg;

	op_wait_cancel(w->waiter);
	wait_free(w);
}

/* Answers c once op is done; takes w. */
static void hold_op(struct mcp_call *c, const struct op_rec *op, struct sb_wait *w)
{
	space_err err = { 0 };

	if (!w)
		return;
	if (op_wait(c->d, op->id, MCP_WAIT_S, wait_done, w, &w->waiter, &err) < 0) {
		mcp_call_err(c, c->tool->name, &err);
		wait_free(w);
		return;
	}
	mcp_call_wait(c, wait_cancel, w);
}

/* ---- reads on the store's thread before the operation ---- */

static void read_cancel(void *arg)
{
	((struct sb_wait *)arg)->gone = true; /* read_done frees it */
}

/* Runs read on the store's thread, then then(w) on the loop (unless the client left). */
static void store_step(struct sb_wait *w, void (*read)(struct store *conn, void *arg), void (*done)(void *arg, bool ran))
{
	struct mcp_call *c = w->c;
	space_err err = { 0 };

	/* Held first: without write-behind, read and done run inside store_async. */
	mcp_call_wait(c, read_cancel, w);
	if (store_async(c->d->store, read, done, w, &err) < 0) {
		wait_free(w);
		mcp_call_err(c, c->tool->name, &err);
	}
}

/* A store step's end: false (w freed) when the call is over. */
static bool step_back(struct sb_wait *w, bool ran)
{
	if (w->gone) {
		wait_free(w);
		return false;
	}
	if (!ran) {
		mcp_call_fail(w->c, "%s: the daemon is stopping", w->c->tool->name);
		wait_free(w);
		return false;
	}
	if (w->rc < 0) {
		mcp_call_err(w->c, w->c->tool->name, &w->err);
		wait_free(w);
		return false;
	}
	return true;
}

/* ---- create_sandbox ---- */

static void create_reads(struct store *conn, void *arg)
{
	struct sb_wait *w = arg;

	w->rc = create_job_read(conn, w->job, &w->err);
}

static void create_done(void *arg, bool ran)
{
	struct sb_wait *w = arg;
	struct sandbox_rec sb = { 0 };
	struct op_rec op = { 0 };
	space_err err = { 0 };

	if (!step_back(w, ran))
		return;
	if (sandbox_create_read(w->c->d, &w->job->req, &w->job->pre, &sb, &op, &err) < 0) {
		mcp_call_err(w->c, "create_sandbox", &err);
		wait_free(w);
	} else {
		snprintf(w->sb_id, sizeof(w->sb_id), "%s", sb.id);
		hold_op(w->c, &op, w);
	}
	sandbox_rec_clear(&sb);
	op_rec_clear(&op);
}

/* The /v1 body create_sandbox's arguments make (req_create checks it). */
static json_t *create_body(struct mcp_call *c, space_err *err)
{
	json_t *net = json_object_get(c->args, "network"), *body;
	const char *t = mcp_arg_str(c, "template");

	if (net && !json_is_null(net) && mcp_arg_bool(c, "internet", false)) {
		err_set(err, EINVAL, "give internet or network, not both");
		return NULL;
	}
	const char *snap = mcp_arg_str(c, "snapshot");

	if (snap && t) {
		err_set(err, EINVAL, "give template or snapshot, not both");
		return NULL;
	}
	body = snap ? json_pack("{s:s}", "snapshot", snap) : json_pack("{s:s}", "template", t ? t : "base");
	if (!body) {
		err_set(err, ENOMEM, "out of memory");
		return NULL;
	}
	if (mcp_arg_bool(c, "internet", false))
		json_object_set_new(body, "network", json_pack("{s:[s,s]}", "allow", "0.0.0.0/0", "*"));
	else if (net && !json_is_null(net))
		json_object_set(body, "network", net);
	if (json_object_get(c->args, "timeout"))
		json_object_set(body, "timeout_s", json_object_get(c->args, "timeout"));
	if (json_object_get(c->args, "env"))
		json_object_set(body, "env", json_object_get(c->args, "env"));
	return body;
}

void mcp_tool_create(struct mcp_call *c)
{
	space_err err = { 0 };
	struct sb_wait *w = wait_new(c, W_CREATE, NULL);
	json_t *body;

	if (!w)
		return;
	if (!(w->job = create_job_new(c->d))) {
		mcp_call_fail(c, "create_sandbox: out of memory");
		wait_free(w);
		return;
	}
	body = create_body(c, &err);
	if (!body || req_create(body, &w->job->req, &err) < 0) {
		mcp_call_err(c, "create_sandbox", &err);
		json_decref(body);
		free(w->job); /* req_create leaves nothing to free on failure */
		w->job = NULL;
		wait_free(w);
		return;
	}
	json_decref(body);
	store_step(w, create_reads, create_done);
}

/* ---- list_sandboxes ---- */

static int list_one(const struct sandbox_rec *sb, void *arg)
{
	struct sb_wait *w = arg;
	json_t *j;

	if (!sandbox_visible(sb) || sb->state == SB_DELETED)
		return 0;
	if (json_array_size(w->list) >= 1000)
		return 1;
	j = json_pack("{s:s,s:s,s:s,s:o}", "sandbox_id", sb->id, "state", sb_state_name(sb->state), "template",
		      sb->template_ref, "created_at", render_time(sb->created_ms));
	if (!j || json_array_append_new(w->list, j) < 0)
		return -1;
	return 0;
}

static void list_read(struct store *conn, void *arg)
{
	struct sb_wait *w = arg;

	if (!(w->list = json_array()))
		w->rc = err_set(&w->err, ENOMEM, "out of memory");
	else if (store_sandbox_each(conn, 0, list_one, w, &w->err) < 0)
		w->rc = -1;
}

static void list_done(void *arg, bool ran)
{
	struct sb_wait *w = arg;

	if (!step_back(w, ran))
		return;
	mcp_call_done(w->c, mcp_tool_json(json_pack("{s:O}", "sandboxes", w->list)));
	wait_free(w);
}

void mcp_tool_list_sandboxes(struct mcp_call *c)
{
	struct sb_wait *w = wait_new(c, W_CREATE, NULL);

	if (w)
		store_step(w, list_read, list_done);
}

/* ---- lifecycle ---- */

static void act(struct mcp_call *c, enum op_kind kind, enum wait_kind wk)
{
	struct sandbox_rec sb = { 0 };
	struct op_rec op = { 0 };
	space_err err = { 0 };
	const char *id;

	if (mcp_arg_sandbox(c, &id) < 0)
		return;
	if (sandbox_act(c->d, id, kind, &sb, &op, &err) < 0)
		mcp_call_err(c, c->tool->name, &err);
	else
		hold_op(c, &op, wait_new(c, wk, id));
	sandbox_rec_clear(&sb);
	op_rec_clear(&op);
}

void mcp_tool_delete(struct mcp_call *c)
{
	act(c, OPK_DELETE, W_DELETE);
}

void mcp_tool_pause(struct mcp_call *c)
{
	const char *mode = mcp_arg_str(c, "mode");

	act(c, mode && strcmp(mode, "disk") == 0 ? OPK_SUSPEND : OPK_PAUSE, W_PAUSE);
}

void mcp_tool_resume(struct mcp_call *c)
{
	struct sandbox_rec sb = { 0 };
	struct op_rec op = { 0 };
	space_err err = { 0 };
	const char *id;

	if (mcp_arg_sandbox(c, &id) < 0)
		return;
	if (sandbox_wake(c->d, id, &sb, &op, &err) < 0)
		mcp_call_err(c, "resume", &err);
	else if (!op.id[0])
		answer_state(c, id); /* it runs already */
	else
		hold_op(c, &op, wait_new(c, W_RESUME, id));
	sandbox_rec_clear(&sb);
	op_rec_clear(&op);
}

void mcp_tool_fork(struct mcp_call *c)
{
	struct sandbox_rec sb = { 0 };
	struct op_rec op = { 0 };
	space_err err = { 0 };
	json_t *children = NULL, *body = json_pack("{s:I}", "count", (json_int_t)mcp_arg_int(c, "count", 1));
	struct sb_wait *w;
	const char *id;
	int count;

	if (mcp_arg_sandbox(c, &id) == 0) {
		if (!body || req_fork(body, &count, &err) < 0 ||
		    sandbox_fork(c->d, id, count, &sb, &op, &children, &err) < 0) {
			mcp_call_err(c, "fork_sandbox", &err);
		} else if ((w = wait_new(c, W_FORK, id))) {
			w->children = children;
			children = NULL;
			hold_op(c, &op, w);
		}
	}
	json_decref(children);
	json_decref(body);
	sandbox_rec_clear(&sb);
	op_rec_clear(&op);
}

/* ---- snapshot ---- */

static void snap_read(struct store *conn, void *arg)
{
	struct sb_wait *w = arg;

	w->rc = snapshot_req_read(conn, w->snap, &w->err);
}

static void snap_done(void *arg, bool ran)
{
	struct sb_wait *w = arg;
	struct sandbox_rec sb = { 0 };
	struct op_rec op = { 0 };
	struct snapshot_rec snap = { 0 };
	space_err err = { 0 };

	if (!step_back(w, ran))
		return;
	if (sandbox_snapshot(w->c->d, w->snap->id, w->snap->name, &sb, &op, &snap, &err) < 0) {
		mcp_call_err(w->c, "snapshot", &err);
		wait_free(w);
	} else {
		snprintf(w->snap_id, sizeof(w->snap_id), "%s", snap.id);
		snprintf(w->name, sizeof(w->name), "%s", w->snap->name);
		hold_op(w->c, &op, w);
	}
	sandbox_rec_clear(&sb);
	op_rec_clear(&op);
	snapshot_rec_clear(&snap);
}

void mcp_tool_snapshot(struct mcp_call *c)
{
	space_err err = { 0 };
	json_t *body = json_pack("{s:s}", "name", mcp_arg_str(c, "name"));
	struct sb_wait *w;
	const char *id;

	if (mcp_arg_sandbox(c, &id) < 0 || !(w = wait_new(c, W_SNAPSHOT, id))) {
		json_decref(body);
		return;
	}
	if (!(w->snap = snapshot_req_new(id))) {
		mcp_call_fail(c, "snapshot: out of memory");
		wait_free(w);
	} else if (!body || req_snapshot(body, w->snap->name, sizeof(w->snap->name), &err) < 0) {
		mcp_call_err(c, "snapshot", &err);
		wait_free(w);
	} else if (!sandbox_find(c->d, id)) {
		mcp_call_fail(c, "snapshot: no running sandbox '%s' here", id);
		wait_free(w);
	} else {
		store_step(w, snap_read, snap_done);
	}
	json_decref(body);
}

/* ---- expose_port ---- */

void mcp_tool_expose_port(struct mcp_call *c)
{
	struct sandbox_rec sb = { 0 };
	space_err err = { 0 };
	char url[512], token[65], tid[PORT_TOKEN_ID_LEN + 1];
	int64_t expires = 0;
	int port = (int)mcp_arg_int(c, "port", 0);
	bool pub = mcp_arg_bool(c, "public", false);
	const char *id;
	json_t *out;

	if (mcp_arg_sandbox(c, &id) < 0)
		return;
	if (sandbox_get(c->d, id, &sb, &err) < 0) {
		mcp_call_err(c, "expose_port", &err);
		return;
	}
	sandbox_rec_clear(&sb);
	port_url(c->d->cfg.data_url, c->d->cfg.ports_domain, (uint16_t)port, id, url, sizeof(url));
	if (pub) {
		if (port_set_public(c->d, id, (uint16_t)port, true, &err) < 0) {
			mcp_call_err(c, "expose_port", &err);
			return;
		}
		out = json_pack("{s:s,s:i,s:b,s:s}", "sandbox_id", id, "port", port, "public", 1, "url", url);
	} else {
		if (port_token_issue(c->d, id, (uint16_t)port, 0, token, tid, &expires, &err) < 0) {
			mcp_call_err(c, "expose_port", &err);
			return;
		}
		out = json_pack("{s:s,s:i,s:b,s:s,s:s,s:s,s:o}", "sandbox_id", id, "port", port, "public", 0, "url", url,
				"token", token, "header", PORT_TOKEN_HEADER, "expires_at", render_time(expires));
		explicit_bzero(token, sizeof(token));
	}
	mcp_call_done(c, mcp_tool_json(out));
}
