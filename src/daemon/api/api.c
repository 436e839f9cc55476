/* api.c -- the control-plane listener: API-key check and the route table */
#include "api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/files.h"
#include "cluster/cluster.h"
#include "daemon.h"
#include "e2b/e2b.h"
#include "log.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

static const struct http_route api_routes[] = {
	{ EVHTTP_REQ_GET, "/v1/info", api_info_get },
	{ EVHTTP_REQ_GET, "/v1/healthz", api_healthz },
	{ EVHTTP_REQ_GET, "/v1/readyz", api_readyz },
	{ EVHTTP_REQ_GET, "/metrics", api_metrics_get },
	{ EVHTTP_REQ_GET, "/v1/templates", api_templates_list },
	{ EVHTTP_REQ_GET, "/v1/templates/{}", api_templates_get },
	{ EVHTTP_REQ_PUT, "/v1/templates/{}/pool", api_templates_pool },
	{ EVHTTP_REQ_GET, "/v1/snapshots", api_snapshots_list },
	{ EVHTTP_REQ_GET, "/v1/snapshots/{}", api_snapshots_get },
	{ EVHTTP_REQ_DELETE, "/v1/snapshots/{}", api_snapshots_delete },
	{ EVHTTP_REQ_POST, "/v1/sandboxes", api_sandboxes_create },
	{ EVHTTP_REQ_GET, "/v1/sandboxes", api_sandboxes_list },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{}", api_sandboxes_get },
	{ EVHTTP_REQ_DELETE, "/v1/sandboxes/{}", api_sandboxes_delete },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/pause", api_sandboxes_pause },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/resume", api_sandboxes_resume },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/suspend", api_sandboxes_suspend },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/restore", api_sandboxes_restore },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/stop", api_sandboxes_stop },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/start", api_sandboxes_start },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/wake", api_sandboxes_wake },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/fork", api_sandboxes_fork },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/snapshots", api_sandboxes_snapshot },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/timeout", api_sandboxes_timeout },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{}/logs", api_sandboxes_logs },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/sessions", api_sessions_create },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{}/sessions", api_sessions_list },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{}/sessions/{}", api_sessions_get },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/sessions/{}/token", api_sessions_token },
	{ EVHTTP_REQ_PUT, "/v1/sandboxes/{}/network", api_sandboxes_network },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{}/egress", api_sandboxes_egress },
	{ EVHTTP_REQ_GET, "/v1/secrets", api_secrets_list },
	{ EVHTTP_REQ_PUT, "/v1/secrets/{}", api_secrets_put },
	{ EVHTTP_REQ_GET, "/v1/secrets/{}", api_secrets_get },
	{ EVHTTP_REQ_DELETE, "/v1/secrets/{}", api_secrets_delete },
	{ EVHTTP_REQ_GET, "/v1/operations/{}", api_operations_get },
	{ EVHTTP_REQ_GET, "/v1/nodes", api_nodes_list },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/tokens", api_tokens_create },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{}/files", api_files_read },
	{ EVHTTP_REQ_PUT, "/v1/sandboxes/{}/files", api_files_write },
	{ EVHTTP_REQ_DELETE, "/v1/sandboxes/{}/files", api_files_remove },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{}/files/stat", api_files_stat },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{}/files/list", api_files_list },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/files/mkdir", api_files_mkdir },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{}/files/rename", api_files_rename },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{}/files/tar", api_files_tar_get },
	{ EVHTTP_REQ_PUT, "/v1/sandboxes/{}/files/tar", api_files_tar_put },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{}/files/watch", api_files_watch },
	{ EVHTTP_REQ_GET, "/ui", api_ui_get },
	{ EVHTTP_REQ_GET, "/ui/{}", api_ui_get },
	/* E2B's control plane (docs/design/e2b.md): its paths beside ours, E2B_API_URL = this
	 * listener. */
	E2B_API_ROUTES,
};

/* Every control-plane request carries the API key, unknown routes included,
 * so nothing about the API is learned without it: as "Authorization: Bearer <key>", or as
 * "X-API-KEY: <key>" (what the E2B SDKs send). An empty configured key opens nothing. The
 * exceptions: GET of the browser page's static files (/ui/ and /ui/<name>), which hold no
 * data (the page asks the user for the key and sends it with everything it does), and GET of
 * the two probes, /v1/healthz and /v1/readyz, which an orchestrator sends without a key and
 * which answer only "ok" or the names and results of their checks. /metrics needs the key. */
static void refuse(struct http_req *r, const char *msg)
{
	if (e2b_api_path(r))
		e2b_reply_error(r->req, 401, "%s", msg);
	else
		http_reply_error(r->req, 401, "unauthorized", "%s", msg);
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
 * /v1/sandboxes/{id}... and E2B's /sandboxes/{id}...: a sandbox this process runs is answered
 * from memory; any other (deleted and let go, another node's, none at all) is read on the
 * store's thread first, and sandbox_get finds it there while the handler runs. So no handler
 * reads the store on the loop to tell "deleted" (409) from "never was" (404). */
static bool names_sandbox(const struct http_req *r)
{
	bool ours = r->nseg >= 2 && strcmp(r->seg[0], "v1") == 0 && strcmp(r->seg[1], "sandboxes") == 0;
	bool e2b = r->nseg >= 1 && strcmp(r->seg[0], "sandboxes") == 0;

	return (ours || e2b) && r->nparam >= 1 && id_valid(r->param[0], "sb-");
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

	/* GET /v1/sandboxes/{id} reads for itself (with its saved state); an api process relays
	 * the rest to the sandbox's node (cluster/route.c). */
	if (r->next == api_sandboxes_get || (r->d->cfg.role == DROLE_API && r->next != e2b_get))
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

static struct http_plane api_plane = {
	.name = "api",
	.routes = api_routes,
	.nroutes = sizeof(api_routes) / sizeof(api_routes[0]),
	.stream_routes = files_stream_routes,
	.nstream_routes = FILES_NSTREAM_ROUTES,
	.auth = api_auth,
	.auth_first = true,
	.prepare = api_prepare,
	.head_auth = api_head_auth,
};

int api_start(struct spaced *d, space_err *err)
{
	api_plane.d = d;
	api_plane.max_body = d->cfg.max_body_bytes > 0 ? (size_t)d->cfg.max_body_bytes : (1u << 20);
	if (d->cfg.role == DROLE_API) {
		/* Served from the store, written as intent, or sent to the owning node (cluster.h). */
		api_plane.routes = cluster_api_routes(api_routes, api_plane.nroutes);
		if (!api_plane.routes)
			return err_set(err, ENOMEM, "out of memory");
		api_plane.stream_routes = NULL;
		api_plane.nstream_routes = 0;
		api_plane.max_body = CLUSTER_MAX_BODY;
	}
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
