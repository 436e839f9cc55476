/* e2b.h -- the E2B-compatible front end (docs/design/e2b.md): E2B's control plane on the
 * control-plane listener, its envd (Connect protocol) and code interpreter on the data-plane
 * listener. A second front end over the same typed core (sandbox/sandbox.h): it parses E2B's
 * wire format into the core's requests and renders the core's records in E2B's shapes, with
 * no validation or lifecycle logic of its own. */
#ifndef SPACE_E2B_H
#define SPACE_E2B_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "http/http.h"

/* The envdVersion we report: every feature the SDKs gate on up to it is implemented (0.5.2
 * CloseStdin; below 0.5.7, so uploads are multipart, and below 0.6, so no file metadata). */
#define E2B_ENVD_VERSION "0.5.6"
/* The ports the SDKs name in E2b-Sandbox-Port. */
#define E2B_ENVD_PORT 49983
#define E2B_INTERP_PORT 49999
/* envd access tokens live as long as a sandbox may (a new one comes with every connect). */
#define E2B_TOKEN_TTL_S 604800

/* ---- control plane (API key: X-API-KEY or Authorization: Bearer), e2b_sandboxes.c ---- */
void e2b_create(struct http_req *r);        /* POST /v2/sandboxes, POST /sandboxes (Python SDK) */
void e2b_list(struct http_req *r);          /* GET /v2/sandboxes */
void e2b_get(struct http_req *r);           /* GET /sandboxes/{id} */
void e2b_kill(struct http_req *r);          /* DELETE /sandboxes/{id} */
void e2b_connect(struct http_req *r);       /* POST /v2/sandboxes/{id}/connect, POST /sandboxes/{id}/connect */
void e2b_resume(struct http_req *r);        /* POST /sandboxes/{id}/resume (older SDKs) */
void e2b_pause(struct http_req *r);         /* POST /sandboxes/{id}/pause */
void e2b_timeout(struct http_req *r);       /* POST /sandboxes/{id}/timeout */
void e2b_refresh(struct http_req *r);       /* POST /sandboxes/{id}/refreshes */
void e2b_metrics(struct http_req *r);       /* GET /sandboxes/{id}/metrics */
void e2b_network(struct http_req *r);       /* PUT /sandboxes/{id}/network */
void e2b_fork(struct http_req *r);          /* POST /sandboxes/{id}/fork */
void e2b_snapshot(struct http_req *r);      /* POST /sandboxes/{id}/snapshots */
void e2b_snapshots_list(struct http_req *r); /* GET /snapshots */
void e2b_templates_list(struct http_req *r); /* GET /templates */
/* e2b_events.c: lifecycle events and webhooks (events/), in E2B's shapes */
void e2b_events_list(struct http_req *r);    /* GET /events/sandboxes */
void e2b_events_sandbox(struct http_req *r); /* GET /events/sandboxes/{id} */
void e2b_webhooks_create(struct http_req *r); /* POST /events/webhooks */
void e2b_webhooks_list(struct http_req *r);  /* GET /events/webhooks */
void e2b_webhooks_get(struct http_req *r);   /* GET /events/webhooks/{id} */
void e2b_webhooks_update(struct http_req *r); /* PATCH /events/webhooks/{id} */
void e2b_webhooks_delete(struct http_req *r); /* DELETE /events/webhooks/{id} */
/* Its webhooks' deliveries (main.c adds it to events/webhook_formats.c's table). */
struct webhook_format;
extern const struct webhook_format e2b_webhook_format;

/* The control-plane routes (e2b_routes.c), which the control plane's table lists beside /v1's
 * (listeners.c), and the prefixes under which a path no route matches is E2B's (its errors in
 * E2B's shape: e2b_dialect). */
extern const struct http_route e2b_api_routes[];
extern const size_t e2b_api_nroutes;
extern const struct http_prefix e2b_api_prefixes[];
extern const size_t e2b_api_nprefixes;
/* The dialects (e2b_dialect.c): E2B's control plane, envd's plain routes, Connect's RPCs
 * (unary, and server streams). */
extern const struct http_dialect e2b_dialect, envd_dialect, connect_dialect, connect_stream_dialect;

/* E2B's control-plane error: {"code": status, "message": "..."} (pure part: e2b_error_body). */
void e2b_reply_error(struct evhttp_request *req, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void e2b_reply_err(struct evhttp_request *req, const space_err *e);
json_t *e2b_error_body(int status, const char *message);

/* ---- data plane: envd and the code interpreter ----
 * Routed by path; the sandbox is named by the E2b-Sandbox-Id header and opened by its envd
 * token (X-Access-Token, or E2B-Traffic-Access-Token, which is the same token: the code
 * interpreter's SDK sends only that one on /contexts). envd_auth sets r->obj to nothing;
 * handlers read the id with e2b_sandbox_id(). */
int envd_auth(struct http_req *r);
/* envd_auth's verdict from a request's head alone (http_plane.head_auth), from memory. */
enum http_head_verdict envd_head_auth(struct http_req *r, struct evkeyvalq *hdrs);
/* The E2b-Sandbox-Id header of an authorised request ("" if absent). */
const char *e2b_sandbox_id(const struct http_req *r);
/* Who a request acts as. The user named by `Authorization: Basic base64("<user>:")` (the SDKs'
 * only use of it): 0 with out set ("" when the header is absent or names nobody), -1 with
 * EINVAL when malformed (pure). envd_user: that, else (query: the plain /files routes)
 * ?username=, checked by spec_check_user; "" = the template's default user. */
#define ENVD_USER_MAX 64
int envd_basic_user(const char *authorization, char *out, size_t cap, space_err *err);
int envd_user(struct http_req *r, bool query, char user[ENVD_USER_MAX], space_err *err);
/* Base64 (standard or URL-safe alphabet, padding optional, as proto3 JSON accepts): decoded
 * length, or -1 for anything else. out must hold 3 * (len / 4) + 3 bytes (pure). */
ssize_t envd_b64_decode(const char *in, size_t len, uint8_t *out);

/* envd_process.c: process.Process over sessions */
void envd_process_start(struct http_req *r);
void envd_process_connect(struct http_req *r);
void envd_process_list(struct http_req *r);
void envd_process_send_input(struct http_req *r);
void envd_process_stream_input(struct http_req *r);
void envd_process_send_signal(struct http_req *r);
void envd_process_close_stdin(struct http_req *r);
void envd_process_update(struct http_req *r);
/* envd_fs.c: filesystem.Filesystem over file operations (api/files.h) */
void envd_fs_stat(struct http_req *r);
void envd_fs_make_dir(struct http_req *r);
void envd_fs_move(struct http_req *r);
void envd_fs_list_dir(struct http_req *r);
void envd_fs_remove(struct http_req *r);
void envd_fs_watch_dir(struct http_req *r);
void envd_fs_create_watcher(struct http_req *r);
void envd_fs_get_watcher_events(struct http_req *r);
void envd_fs_remove_watcher(struct http_req *r);
/* envd_files.c: GET /health, GET /files (raw bytes), POST /files (multipart, streamed) */
void envd_health(struct http_req *r);
void envd_files_get(struct http_req *r);
void envd_files_post(struct http_req *r);
/* interp.c: the code interpreter (POST /execute as NDJSON, /contexts) */
void interp_execute(struct http_req *r);
void interp_contexts_list(struct http_req *r);
void interp_contexts_create(struct http_req *r);
void interp_contexts_delete(struct http_req *r);
void interp_contexts_restart(struct http_req *r);
void interp_contexts_interrupt(struct http_req *r);

/* The data-plane routes (e2b_routes.c), beside /v1's session routes (listeners.c); those whose
 * bodies stream (http/body.h); the prefixes of envd's unmatched paths. */
extern const struct http_route envd_routes[];
extern const size_t envd_nroutes;
extern const struct http_route envd_stream_routes[];
extern const size_t envd_nstream_routes;
extern const struct http_prefix envd_prefixes[];
extern const size_t envd_nprefixes;

#endif
