/* route.c -- an api process's routes: served here, written as intent, or sent to the node that
 * owns the sandbox (cluster.h) */
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
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
	const struct http_dialect *dialect; /* the route's: the shape of errors */
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
		if (h->dialect && h->dialect->reply_error)
			http_dialect_err(h->dialect, r.req, &h->err);
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
	h->dialect = r->dialect;
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

/* ---- the tables, from the routes' declarations (http.h: http_place) ---- */

static void route_sandbox_ctl(struct http_req *r)
{
	route_by(r, BY_SANDBOX, r->param[0], false);
}

static void route_sandbox_data(struct http_req *r)
{
	route_by(r, BY_SANDBOX, r->param[0], true);
}

static void route_session(struct http_req *r)
{
	route_by(r, BY_SESSION, r->param[0], true);
}

/* The sandbox E2B's envd requests name in a header. */
static void route_sandbox_hdr(struct http_req *r)
{
	route_by(r, BY_SANDBOX, evhttp_find_header(evhttp_request_get_input_headers(r->req), "E2b-Sandbox-Id"), true);
}

static void route_room(struct http_req *r)
{
	route_by(r, BY_ROOM, NULL, false);
}

static void route_snapshot(struct http_req *r)
{
	route_by(r, BY_SNAPSHOT, r->param[0], false);
}

static void not_here(struct http_req *r)
{
	/* Warm pools, build contexts and template builds are each node's own. */
	http_req_error(r, 400, "bad_request",
		       "this is an api process (--role api): this route is served on each node's own control "
		       "plane (warm pools: --pool or PUT /v1/templates/{ref}/pool there; template builds and "
		       "build contexts: /v1/templates/builds and PUT /v1/contexts there)");
}

/* What an api process runs for a route placed `place`, on its control (data false) or data plane. */
static http_handler placed(const struct http_route *rt, bool data)
{
	switch (rt->place) {
	case HTTP_PLACE_LOCAL: return rt->fn;
	case HTTP_PLACE_SANDBOX: return data ? route_sandbox_data : route_sandbox_ctl;
	case HTTP_PLACE_SESSION: return route_session;
	case HTTP_PLACE_SANDBOX_HDR: return route_sandbox_hdr;
	case HTTP_PLACE_SNAPSHOT: return route_snapshot;
	case HTTP_PLACE_ROOM: return route_room;
	case HTTP_PLACE_CREATE: return cluster_create;
	case HTTP_PLACE_RESTORE: return cluster_restore;
	case HTTP_PLACE_DELETE: return cluster_delete;
	case HTTP_PLACE_NODE_ONLY: return not_here;
	}
	return rt->fn;
}

struct http_route *cluster_routes(const struct http_route *routes, size_t n, bool data)
{
	struct http_route *t = calloc(n ? n : 1, sizeof(*t));

	if (!t)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		t[i] = routes[i];
		t[i].fn = placed(&routes[i], data);
		if (routes[i].place != HTTP_PLACE_LOCAL) {
			/* relayed or written here: the node checks the route's own credentials */
			t[i].auth = NULL;
			t[i].head_auth = NULL;
		}
	}
	return t;
}
