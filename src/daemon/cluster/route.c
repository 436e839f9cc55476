/* route.c -- an api process's routes: served here, written as intent, or sent to the node that
 * owns the sandbox (cluster.h) */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "cluster.h"
#include "e2b/e2b.h"
#include "http/proxy.h"
#include "log.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

int cluster_sandbox_url_on(struct store *st, const char *sb_id, bool data, char *url, size_t len,
			  space_err *err)
{
	struct sandbox_rec sb;
	struct node_rec n;

	if (!id_valid(sb_id, "sb-"))
		return err_set(err, ENOENT, "no sandbox '%.64s'", sb_id);
	if (store_sandbox_get(st, sb_id, &sb, err) < 0) {
		if (err->code == ENOENT)
			err_set(err, ENOENT, "no sandbox '%.64s'", sb_id);
		return -1;
	}
	if (!sb.node_id[0]) {
		err_set(err, EAGAIN, "sandbox %s is %s and on no node%s", sb_id, sb_state_name(sb.state),
			sb.state == SB_CREATING ? " yet: wait for its create operation" :
			sb.state == SB_SUSPENDED ? ": restore it first" : "");
		sandbox_rec_clear(&sb);
		return -1;
	}
	if (store_node_get(st, sb.node_id, &n, err) < 0) {
		err_wrap(err, "sandbox %s: its node %s", sb_id, sb.node_id);
		err->code = EAGAIN;
		sandbox_rec_clear(&sb);
		return -1;
	}
	sandbox_rec_clear(&sb);
	if (n.state != NODE_UP)
		return err_set(err, EAGAIN, "sandbox %s: its node %s is %s", sb_id, n.id, node_state_name(n.state));
	snprintf(url, len, "%s", data ? n.data_url : n.api_url);
	return 0;
}


/* ---- a relay's lookup, on the store's thread ----
 * Which node a request goes to is read from the store by the store's thread (store_async),
 * with the request held meanwhile: a slow or restarting database delays the requests that
 * wait on it, never the streams this process relays. */

enum hop_by { BY_SANDBOX, BY_SESSION, BY_ROOM, BY_SNAPSHOT };

struct hop {
	struct http_hold hold; /* first: on_gone gets &hold */
	bool gone;             /* the client went away: only free */
	struct spaced *d;
	enum evhttp_cmd_type method;
	enum hop_by by;
	bool data;             /* to the node's data plane */
	bool e2b;              /* errors in E2B's shape */
	char id[SPEC_NAME_MAX + 8]; /* the sandbox, session or snapshot the client named */
	int rc;
	space_err err;
	char url[256];
};

static void hop_gone(struct http_hold *h)
{
	((struct hop *)h)->gone = true;
}

/* E2B's create: no intent form yet; it goes to the node with the most free memory. */
static int roomiest(const struct node_rec *n, void *arg)
{
	struct node_rec *best = arg;

	if (n->state == NODE_UP && (!best->id[0] || n->memory_mib - n->used_memory_mib >
							      best->memory_mib - best->used_memory_mib))
		*best = *n;
	return 0;
}

static int lookup_room(struct store *conn, struct hop *h)
{
	struct node_rec best = { 0 };

	if (store_node_each(conn, roomiest, &best, &h->err) < 0)
		return -1;
	if (!best.id[0])
		return err_set(&h->err, EAGAIN, "no node is up");
	snprintf(h->url, sizeof(h->url), "%s", best.api_url);
	return 0;
}

/* DELETE /v1/snapshots/{id}: the node of the sandbox it was taken from (its files are there,
 * or on the shared directory that node also mounts). */
static int lookup_snapshot(struct store *conn, struct hop *h)
{
	struct snapshot_rec sn;
	struct sandbox_rec sb;
	struct node_rec n;
	int rc;

	if (snapshot_lookup(conn, h->id, &sn, &h->err) < 0)
		return err_set(&h->err, ENOENT, "no snapshot '%.64s'", h->id);
	rc = store_sandbox_get(conn, sn.sandbox_id, &sb, &h->err);
	if (rc == 0) {
		if (store_node_get(conn, sb.node_id, &n, &h->err) < 0 || n.state != NODE_UP)
			rc = err_set(&h->err, EAGAIN, "snapshot %s: its node '%s' is not up", sn.id, sb.node_id);
		else
			snprintf(h->url, sizeof(h->url), "%s", n.api_url);
		sandbox_rec_clear(&sb);
	}
	snapshot_rec_clear(&sn);
	return rc;
}

static void hop_lookup(struct store *conn, void *arg)
{
	struct hop *h = arg;
	struct session_rec s;
	char sb_id[72];

	if (h->by == BY_ROOM) {
		h->rc = lookup_room(conn, h);
		return;
	}
	if (h->by == BY_SNAPSHOT) {
		h->rc = lookup_snapshot(conn, h);
		return;
	}
	snprintf(sb_id, sizeof(sb_id), "%s", h->id);
	if (h->by == BY_SESSION) {
		if (!id_valid(h->id, "ss-") || store_session_get(conn, h->id, &s, &h->err) < 0) {
			h->rc = err_set(&h->err, ENOENT, "no session '%.64s'", h->id);
			return;
		}
		snprintf(sb_id, sizeof(sb_id), "%s", s.sandbox_id);
		session_rec_clear(&s);
	}
	h->rc = cluster_sandbox_url_on(conn, sb_id, h->data, h->url, sizeof(h->url), &h->err);
}

static void hop_done(void *arg, bool ran)
{
	struct hop *h = arg;
	struct http_req r = { .d = h->d, .req = h->hold.req, .method = h->method };

	if (h->gone) {
		free(h);
		return;
	}
	http_hold_end(&h->hold);
	if (!ran)
		h->rc = err_set(&h->err, EAGAIN, "this api process is stopping");
	if (h->rc < 0 || http_proxy(&r, h->url, &h->err) < 0) {
		if (h->e2b)
			e2b_reply_error(r.req, err_http_status(h->err.code), "%s", h->err.msg);
		else if ((h->by == BY_SESSION || h->by == BY_SNAPSHOT) && h->err.code == ENOENT)
			http_reply_error(r.req, 404, "not_found", "%s", h->err.msg);
		else
			http_reply_err(r.req, &h->err);
	}
	free(h);
}

static void route_by(struct http_req *r, enum hop_by by, const char *id, bool data)
{
	struct hop *h = calloc(1, sizeof(*h));
	space_err err = { 0 };

	if (!h) {
		http_reply_error(r->req, 500, "internal", "out of memory");
		return;
	}
	h->d = r->d;
	h->method = r->method;
	h->by = by;
	h->data = data;
	h->e2b = e2b_api_path(r) || (data && envd_path(r));
	snprintf(h->id, sizeof(h->id), "%s", id ? id : "");
	if (id && strlen(id) >= sizeof(h->id))
		h->id[0] = '\0'; /* names nothing: not found */
	http_hold_begin(&h->hold, r->req, hop_gone, r->d->conns);
	if (store_async(r->d->store, hop_lookup, hop_done, h, &err) < 0) {
		h->rc = -1;
		h->err = err;
		hop_done(h, true);
	}
}

/* /v1/sandboxes/{id}/..., /sandboxes/{id}/... (E2B) on the control plane. */
static void route_control(struct http_req *r)
{
	route_by(r, BY_SANDBOX, r->param[0], false);
}

/* The sandbox a data-plane request is about: a session's, the path's, or E2B's header. */
static void route_data(struct http_req *r)
{
	if (envd_path(r))
		route_by(r, BY_SANDBOX, evhttp_find_header(evhttp_request_get_input_headers(r->req), "E2b-Sandbox-Id"),
			 true);
	else if (r->nseg >= 2 && strcmp(r->seg[1], "sandboxes") == 0)
		route_by(r, BY_SANDBOX, r->param[0], true);
	else
		route_by(r, BY_SESSION, r->param[0], true);
}

static void route_e2b_create(struct http_req *r)
{
	route_by(r, BY_ROOM, NULL, false);
}

static void route_snapshot(struct http_req *r)
{
	route_by(r, BY_SNAPSHOT, r->param[0], false);
}

static void not_here(struct http_req *r)
{
	http_reply_error(r->req, 400, "bad_request",
			 "this is an api process (--role api): warm pools are set on each node (--pool, or "
			 "PUT /v1/templates/{ref}/pool on the node itself)");
}

/* Routes an api process answers from the store as a single daemon would. */
static bool served_here(http_handler fn)
{
	static const http_handler here[] = {
		api_info_get,	     api_templates_list, api_templates_get, api_snapshots_list, api_snapshots_get,
		api_sandboxes_list,  api_sandboxes_get,  api_nodes_list,	 api_operations_get, api_secrets_list,	 api_secrets_put,
		api_secrets_get,     api_secrets_delete, api_ui_get,	    e2b_list,		e2b_get,
		e2b_snapshots_list,  e2b_templates_list,
	};

	for (size_t i = 0; i < sizeof(here) / sizeof(here[0]); i++)
		if (fn == here[i])
			return true;
	return false;
}

struct http_route *cluster_api_routes(const struct http_route *routes, size_t n)
{
	struct http_route *t = calloc(n, sizeof(*t));

	if (!t)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		t[i] = routes[i];
		if (served_here(routes[i].fn))
			continue;
		if (routes[i].fn == api_sandboxes_create)
			t[i].fn = cluster_create;
		else if (routes[i].fn == api_sandboxes_restore || routes[i].fn == api_sandboxes_wake ||
			 routes[i].fn == e2b_resume || routes[i].fn == e2b_connect)
			t[i].fn = cluster_restore;
		else if (routes[i].fn == api_sandboxes_delete || routes[i].fn == e2b_kill)
			t[i].fn = cluster_delete;
		else if (routes[i].fn == e2b_create)
			t[i].fn = route_e2b_create;
		else if (routes[i].fn == api_snapshots_delete)
			t[i].fn = route_snapshot;
		else if (routes[i].fn == api_templates_pool)
			t[i].fn = not_here;
		else if (strstr(routes[i].pattern, "{}"))
			t[i].fn = route_control;
	}
	return t;
}

struct http_route *cluster_data_routes(const struct http_route *routes, size_t n)
{
	struct http_route *t = calloc(n, sizeof(*t));

	if (!t)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		t[i] = routes[i];
		t[i].fn = route_data;
	}
	return t;
}
