/* api.h -- control-plane handlers, one file per resource (api_<resource>.c), routed by api.c */
#ifndef SPACE_API_H
#define SPACE_API_H

#include "front/front.h"
#include "http/http.h"

/* The control-plane listener (api.c) over the tables listeners.c assembles; /v1's routes and
 * dialect (SPACE's errors; its intent answers: front/dialect.h). */
int api_start(struct spaced *d, const struct front_tables *t, space_err *err);
extern const struct http_route api_routes[];
/* PUT /v1/contexts: its body streams (listeners.c lists these beside the files routes). */
extern const struct http_route api_stream_routes[];
extern const size_t api_nstream_routes;
void api_contexts_put(struct http_req *r);
extern const size_t api_nroutes;
extern const struct http_dialect api_dialect;

/* api_info.c */
void api_info_get(struct http_req *r);
/* api_health.c: the orchestrator's probes, answered without the API key */
void api_healthz(struct http_req *r);
void api_readyz(struct http_req *r);
/* True for GET /v1/healthz and GET /v1/readyz, which need no API key. */
bool api_health_public(const struct http_req *r);
/* api_events.c, api_webhooks.c: lifecycle events and where they are POSTed */
void api_events_list(struct http_req *r);
void api_webhooks_create(struct http_req *r);
void api_webhooks_list(struct http_req *r);
void api_webhooks_get(struct http_req *r);
void api_webhooks_update(struct http_req *r);
void api_webhooks_delete(struct http_req *r);
void api_webhooks_deliveries(struct http_req *r);
/* api_metrics.c: GET /metrics, Prometheus text format */
void api_metrics_get(struct http_req *r);
/* api_builds.c */
void api_builds_create(struct http_req *r);
void api_builds_list(struct http_req *r);
void api_builds_get(struct http_req *r);
void api_builds_logs(struct http_req *r);
void api_builds_promote(struct http_req *r);
/* api_templates.c */
void api_templates_list(struct http_req *r);
void api_templates_get(struct http_req *r);
void api_templates_delete(struct http_req *r);
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
/* api_ports.c: a sandbox's ports (what listens, public marks, port tokens). */
void api_ports_list(struct http_req *r);
void api_ports_put(struct http_req *r);
void api_ports_token_create(struct http_req *r);
void api_ports_token_revoke(struct http_req *r);
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
/* Parses "state=a,b" into a mask of 1 << sb_state (0 when absent). -1 with
 * err on an unknown state. */
int api_parse_states(const char *list, unsigned *mask, space_err *err);

#endif
