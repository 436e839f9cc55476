/* api.c -- the control-plane listener: API-key check and the route table */
#include "api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/files.h"
#include "daemon.h"
#include "front/dialect.h"
#include "log.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

/* /v1's control plane, each route with where an api process answers it (http.h: http_place)
 * and whether the sandbox it names is read before the handler (HTTP_ROUTE_SANDBOX_PRE). The
 * listener's table lists E2B's beside these (listeners.c). */
const struct http_route api_routes[] = {
	{ EVHTTP_REQ_GET, "/v1/info", api_info_get, &api_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/healthz", api_healthz, &api_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/readyz", api_readyz, &api_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/metrics", api_metrics_get, &api_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/templates", api_templates_list, &api_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_PUT, "/v1/contexts", api_contexts_put, &api_dialect, HTTP_PLACE_NODE_ONLY, 0, NULL, NULL },
	{ EVHTTP_REQ_POST, "/v1/templates/builds", api_builds_create, &api_dialect, HTTP_PLACE_NODE_ONLY, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/templates/builds", api_builds_list, &api_dialect, HTTP_PLACE_NODE_ONLY, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/templates/builds/{}", api_builds_get, &api_dialect, HTTP_PLACE_NODE_ONLY, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/templates/builds/{}/logs", api_builds_logs, &api_dialect, HTTP_PLACE_NODE_ONLY, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/templates/{}", api_templates_get, &api_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_DELETE, "/v1/templates/{}", api_templates_delete, &api_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_PUT, "/v1/templates/{}/pool", api_templates_pool, &api_dialect, HTTP_PLACE_NODE_ONLY, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/snapshots", api_snapshots_list, &api_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/snapshots/{}", api_snapshots_get, &api_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_DELETE, "/v1/snapshots/{}", api_snapshots_delete, &api_dialect, HTTP_PLACE_SNAPSHOT, 0, NULL, NULL },
	{ EVHTTP_REQ_POST, "/v1/sandboxes", api_sandboxes_create, &api_dialect, HTTP_PLACE_CREATE, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/sandboxes", api_sandboxes_list, &api_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{}", api_sandboxes_get, &api_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_DELETE, "/v1/sandboxes/{}", api_sandboxes_delete, &api_dialect, HTTP_PLACE_DELETE, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/pause", api_sandboxes_pause, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/resume", api_sandboxes_resume, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/suspend", api_sandboxes_suspend, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/restore", api_sandboxes_restore, &api_dialect, HTTP_PLACE_RESTORE, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/stop", api_sandboxes_stop, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/start", api_sandboxes_start, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/wake", api_sandboxes_wake, &api_dialect, HTTP_PLACE_RESTORE, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/fork", api_sandboxes_fork, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/template", api_builds_promote, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/snapshots", api_sandboxes_snapshot, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/timeout", api_sandboxes_timeout, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{}/logs", api_sandboxes_logs, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/sessions", api_sessions_create, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{}/sessions", api_sessions_list, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{}/sessions/{}", api_sessions_get, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/sessions/{}/token", api_sessions_token, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_PUT, "/v1/sandboxes/{}/network", api_sandboxes_network, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{}/egress", api_sandboxes_egress, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{}/ports", api_ports_list, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_PUT, "/v1/sandboxes/{}/ports/{}", api_ports_put, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/ports/{}/tokens", api_ports_token_create, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_DELETE, "/v1/sandboxes/{}/ports/{}/tokens", api_ports_token_revoke, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_DELETE, "/v1/sandboxes/{}/ports/{}/tokens/{}", api_ports_token_revoke, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/secrets", api_secrets_list, &api_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_PUT, "/v1/secrets/{}", api_secrets_put, &api_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/secrets/{}", api_secrets_get, &api_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_DELETE, "/v1/secrets/{}", api_secrets_delete, &api_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/operations/{}", api_operations_get, &api_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/events", api_events_list, &api_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_POST, "/v1/webhooks", api_webhooks_create, &api_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/webhooks", api_webhooks_list, &api_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/webhooks/{}", api_webhooks_get, &api_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_PATCH, "/v1/webhooks/{}", api_webhooks_update, &api_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_DELETE, "/v1/webhooks/{}", api_webhooks_delete, &api_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/webhooks/{}/deliveries", api_webhooks_deliveries, &api_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/nodes", api_nodes_list, &api_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/tokens", api_tokens_create, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{}/files", api_files_read, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_PUT, "/v1/sandboxes/{}/files", api_files_write, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_DELETE, "/v1/sandboxes/{}/files", api_files_remove, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{}/files/stat", api_files_stat, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{}/files/list", api_files_list, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/files/mkdir", api_files_mkdir, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/files/rename", api_files_rename, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{}/files/tar", api_files_tar_get, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_PUT, "/v1/sandboxes/{}/files/tar", api_files_tar_put, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{}/files/watch", api_files_watch, &api_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_GET, "/ui", api_ui_get, &api_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/ui/{}", api_ui_get, &api_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
};
const size_t api_nroutes = sizeof(api_routes) / sizeof(api_routes[0]);
/* Routes whose bodies stream (http/body.h) beside the files ones: build contexts. */
const struct http_route api_stream_routes[] = {
	{ EVHTTP_REQ_PUT, "/v1/contexts", api_contexts_put, NULL, HTTP_PLACE_NODE_ONLY, 0, NULL, NULL },
};
const size_t api_nstream_routes = sizeof(api_stream_routes) / sizeof(api_stream_routes[0]);

/* Every control-plane request carries the API key, unknown routes included,
 * so nothing about the API is learned without it: as "Authorization: Bearer <key>", or as
 * "X-API-KEY: <key>" (what the E2B SDKs send). An empty configured key opens nothing. The
 * exceptions: GET of the browser page's static files (/ui/ and /ui/<name>), which hold no
 * data (the page asks the user for the key and sends it with everything it does), and GET of
 * the two probes, /v1/healthz and /v1/readyz, which an orchestrator sends without a key and
 * which answer only "ok" or the names and results of their checks. /metrics needs the key. */
static void refuse(struct http_req *r, const char *msg)
{
	http_req_error(r, 401, "unauthorized", "%s", msg); /* in the route's (or prefix's) dialect */
}

/* The API key in hdrs: NULL when it is the daemon's, else why not. */
static const char *key_refusal(const struct spaced *d, struct evkeyvalq *hdrs)
{
	const char *h = evhttp_find_header(hdrs, "Authorization");
	const char *x = evhttp_find_header(hdrs, "X-API-KEY");
	char key[sizeof(d->cfg.api_key)];
	const char *why = NULL;

	if (!h && !x)
		return "missing Authorization: Bearer <api key> (or X-API-KEY)";
	if (h && http_bearer(h, key, sizeof(key)) < 0)
		why = "invalid API key";
	else if (!h && snprintf(key, sizeof(key), "%s", x) >= (int)sizeof(key))
		why = "invalid API key";
	else if (!d->cfg.api_key[0] || !http_secret_equal(key, d->cfg.api_key))
		why = "invalid API key";
	explicit_bzero(key, sizeof(key));
	return why;
}

static int api_auth(struct http_req *r)
{
	const char *why;

	if (api_ui_public(r) || api_health_public(r))
		return 0;
	why = key_refusal(r->d, evhttp_request_get_input_headers(r->req));
	if (why) {
		refuse(r, why);
		return -1;
	}
	return 0;
}

/* The same check from a request's head, before its body is read: a body comes only with the
 * key (the public routes are GETs, which carry none). */
static enum http_head_verdict api_head_auth(struct http_req *r, struct evkeyvalq *hdrs)
{
	return key_refusal(r->d, hdrs) ? HTTP_HEAD_REFUSED : HTTP_HEAD_AUTHED;
}

/* ---- the sandbox a request names, when this process does not hold it ----
 * Routes that declare HTTP_ROUTE_SANDBOX_PRE (/v1/sandboxes/{id}..., E2B's /sandboxes/{id}...): a sandbox this process runs is answered
 * from memory; any other (deleted and let go, another node's, none at all) is read on the
 * store's thread first, and sandbox_get finds it there while the handler runs. So no handler
 * reads the store on the loop to tell "deleted" (409) from "never was" (404). */
static bool names_sandbox(const struct http_req *r)
{
	return r->route && (r->route->flags & HTTP_ROUTE_SANDBOX_PRE) && r->nparam >= 1 &&
	       id_valid(r->param[0], "sb-");
}

static void pre_read(struct store *conn, void *arg)
{
	struct sandbox_pre *q = arg;

	q->rc = store_sandbox_get(conn, q->id, &q->rec, &q->err);
}

static int pre_verdict(struct http_req *r, void *arg)
{
	r->d->sb_pre = arg;
	return 0;
}

static void pre_release(void *arg)
{
	struct sandbox_pre *q = arg;

	if (q->d->sb_pre == q)
		q->d->sb_pre = NULL;
	sandbox_rec_clear(&q->rec);
	free(q);
}

static int api_prepare(struct http_req *r)
{
	struct sandbox_pre *q;

	/* An api process relays what is not served here to the sandbox's node (cluster/route.c). */
	if (r->d->cfg.role == DROLE_API && r->route->place != HTTP_PLACE_LOCAL)
		return 0;
	if (!names_sandbox(r) || sandbox_find(r->d, r->param[0]))
		return 0;
	if (!(q = calloc(1, sizeof(*q)))) {
		http_reply_error(r->req, 500, "internal", "out of memory");
		return -1;
	}
	q->d = r->d;
	snprintf(q->id, sizeof(q->id), "%s", r->param[0]);
	return api_step_read(r, pre_read, pre_verdict, pre_release, q);
}

/* A node lets through without the cluster's credential only the probes (kubelet's) and the
 * metrics (which still need the API key). */
static bool api_peer_exempt(const struct http_req *r)
{
	return api_health_public(r) ||
	       (r->method == EVHTTP_REQ_GET && r->nseg == 1 && strcmp(r->seg[0], "metrics") == 0);
}

/* /v1's errors are SPACE's (reply_error NULL); its intent writers' answers (front/dialect.h). */
static void api_no_sandbox(struct evhttp_request *req, const char *id)
{
	http_reply_error(req, 404, "not_found", "no sandbox '%.64s'", id);
}

static const struct front_intent_reply api_intent = {
	.no_sandbox = api_no_sandbox,
	.accepted = api_reply_accepted_to,
};
const struct http_dialect api_dialect = { "space", NULL, &api_intent };

static struct http_plane api_plane = {
	.name = "api",
	.auth = api_auth,
	.auth_first = true,
	.prepare = api_prepare,
	.head_auth = api_head_auth,
};

int api_start(struct spaced *d, const struct front_tables *t, space_err *err)
{
	api_plane.d = d;
	api_plane.routes = t->routes;
	api_plane.nroutes = t->nroutes;
	api_plane.stream_routes = t->stream_routes;
	api_plane.nstream_routes = t->nstream_routes;
	api_plane.prefixes = t->prefixes;
	api_plane.nprefixes = t->nprefixes;
	api_plane.max_body = t->max_body ? t->max_body :
		d->cfg.max_body_bytes > 0 ? (size_t)d->cfg.max_body_bytes : (1u << 20);
	api_plane.tls = d->tls_server;
	if (d->cfg.role == DROLE_NODE) {
		api_plane.peer_key = d->cfg.cluster_key;
		api_plane.peer_exempt = api_peer_exempt;
	}
	if (!d->cfg.api_key[0])
		log_warn("api: no API key is configured; every control-plane request will be refused");
	d->api_http = http_listen(d->base, d->cfg.listen, &api_plane, err);
	return d->api_http ? 0 : err_wrap(err, "control plane");
}
