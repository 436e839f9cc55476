/* api.h -- control-plane handlers, one file per resource (api_<resource>.c), routed by api.c */
#ifndef SPACE_API_H
#define SPACE_API_H

#include "http/http.h"

/* api_info.c */
void api_info_get(struct http_req *r);
/* api_health.c: the orchestrator's probes, answered without the API key */
void api_healthz(struct http_req *r);
void api_readyz(struct http_req *r);
/* True for GET /v1/healthz and GET /v1/readyz, which need no API key. */
bool api_health_public(const struct http_req *r);
/* api_metrics.c: GET /metrics, Prometheus text format */
void api_metrics_get(struct http_req *r);
/* api_templates.c */
void api_templates_list(struct http_req *r);
void api_templates_get(struct http_req *r);
/* api_sandboxes.c */
void api_sandboxes_create(struct http_req *r);
void api_sandboxes_list(struct http_req *r);
/* GET /v1/nodes (api_nodes.c). */
void api_nodes_list(struct http_req *r);
void api_sandboxes_get(struct http_req *r);
/* api_lifecycle.c: DELETE and POST /v1/sandboxes/{id}/<action> */
void api_sandboxes_delete(struct http_req *r);
void api_sandboxes_pause(struct http_req *r);
void api_sandboxes_resume(struct http_req *r);
void api_sandboxes_suspend(struct http_req *r);
void api_sandboxes_restore(struct http_req *r);
void api_sandboxes_stop(struct http_req *r);
void api_sandboxes_start(struct http_req *r);
void api_sandboxes_wake(struct http_req *r);
void api_sandboxes_fork(struct http_req *r);
void api_sandboxes_snapshot(struct http_req *r);
void api_sandboxes_timeout(struct http_req *r);
/* api_snapshots.c */
void api_snapshots_list(struct http_req *r);
void api_snapshots_get(struct http_req *r);
void api_snapshots_delete(struct http_req *r);
/* api_templates.c */
void api_templates_pool(struct http_req *r);
void api_sandboxes_logs(struct http_req *r);
/* api_network.c: a sandbox's egress policy and audit */
void api_sandboxes_network(struct http_req *r);
void api_sandboxes_egress(struct http_req *r);
/* api_secrets.c */
void api_secrets_put(struct http_req *r);
void api_secrets_list(struct http_req *r);
void api_secrets_get(struct http_req *r);
void api_secrets_delete(struct http_req *r);
/* api_operations.c */
void api_operations_get(struct http_req *r);
/* api_sessions.c */
void api_sessions_create(struct http_req *r);
void api_sessions_list(struct http_req *r);
void api_sessions_get(struct http_req *r);
void api_sessions_token(struct http_req *r);
/* api_ui.c: the browser page (GET /ui, /ui/, /ui/<file>) */
void api_ui_get(struct http_req *r);
/* True for the requests the page's files answer, which need no API key. */
bool api_ui_public(const struct http_req *r);

/* The stored sandbox named by path parameter i: 0, or -1 having answered
 * 404 (malformed or unknown id) or 500. Clear *out with sandbox_rec_clear. */
struct sandbox_rec;
struct op_rec;
int api_sandbox_param(struct http_req *r, int i, struct sandbox_rec *out);
/* A sandbox as the API shows it (with what its saved state takes). */
json_t *api_sandbox_json(struct spaced *d, const struct sandbox_rec *sb);
/* 202 {"sandbox":..,"operation":..}, as every operation answers. */
void api_reply_accepted(struct http_req *r, const struct sandbox_rec *sb, const struct op_rec *op);
void api_reply_accepted_to(struct spaced *d, struct evhttp_request *req, const struct sandbox_rec *sb,
			   const struct op_rec *op);
/* Sends status and body (the reference is taken) once every store write queued before now
 * was made (reply_stored.c): for replies that announce new rows. */
void api_reply_stored(struct http_req *r, int status, json_t *body);
void api_reply_stored_to(struct spaced *d, struct evhttp_request *req, int status, json_t *body);

/* Reads off the loop (read_async.c): read(conn, arg, err) runs on the store's thread, behind
 * every write queued before the call, touching only conn and arg; then, on the loop and only
 * if the client is still there, reply(d, req, arg, rc, err) with read's result answers. Last,
 * release(arg) (may be NULL), whatever happened. The request is held meanwhile. */
struct store;
typedef int (*api_read_fn)(struct store *conn, void *arg, space_err *err);
typedef void (*api_reply_fn)(struct spaced *d, struct evhttp_request *req, void *arg, int rc,
			     const space_err *err);
void api_read(struct http_req *r, api_read_fn read, api_reply_fn reply, void (*release)(void *arg), void *arg);
/* The same for a request already held once (from a reply: a second round on the store's
 * thread). Takes arg as api_read does. */
void api_read_to(struct spaced *d, struct evhttp_request *req, api_read_fn read, api_reply_fn reply,
		 void (*release)(void *arg), void *arg);
/* A step before a route's handler (http_plane.auth after routing, or .prepare) that must read
 * the store: read(conn, arg) runs on the store's thread, then on the loop, if the client is
 * still there, verdict(r, arg) answers 0 (the next steps and the handler run) or -1 (it
 * replied); release(arg) last (after the handler), whatever happened. Returns 1 (held: the step's answer to
 * http.c), or -1 having replied (arg released). */
int api_step_read(struct http_req *r, void (*read)(struct store *conn, void *arg),
		  int (*verdict)(struct http_req *r, void *arg), void (*release)(void *arg), void *arg);
/* The same where the read renders the whole body: fn returns it (200) or NULL with err set
 * (answered as http_reply_err does). */
typedef json_t *(*api_json_fn)(struct store *conn, void *arg, space_err *err);
void api_read_json(struct http_req *r, api_json_fn fn, void (*release)(void *arg), void *arg);

/* Parses "state=a,b" into a mask of 1 << sb_state (0 when absent). -1 with
 * err on an unknown state. */
int api_parse_states(const char *list, unsigned *mask, space_err *err);

#endif
