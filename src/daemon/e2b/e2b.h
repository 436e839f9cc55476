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

/* The control-plane routes, listed in api.c's table. */
#define E2B_API_ROUTES                                                              \
	{ EVHTTP_REQ_POST, "/v2/sandboxes", e2b_create },                           \
	{ EVHTTP_REQ_GET, "/v2/sandboxes", e2b_list },                              \
	{ EVHTTP_REQ_POST, "/v2/sandboxes/{}/connect", e2b_connect },               \
	{ EVHTTP_REQ_POST, "/sandboxes", e2b_create },                              \
	{ EVHTTP_REQ_POST, "/sandboxes/{}/connect", e2b_connect },                  \
	{ EVHTTP_REQ_GET, "/sandboxes/{}", e2b_get },                               \
	{ EVHTTP_REQ_DELETE, "/sandboxes/{}", e2b_kill },                           \
	{ EVHTTP_REQ_POST, "/sandboxes/{}/resume", e2b_resume },                    \
	{ EVHTTP_REQ_POST, "/sandboxes/{}/pause", e2b_pause },                      \
	{ EVHTTP_REQ_POST, "/sandboxes/{}/timeout", e2b_timeout },                  \
	{ EVHTTP_REQ_POST, "/sandboxes/{}/refreshes", e2b_refresh },                \
	{ EVHTTP_REQ_GET, "/sandboxes/{}/metrics", e2b_metrics },                   \
	{ EVHTTP_REQ_PUT, "/sandboxes/{}/network", e2b_network },                   \
	{ EVHTTP_REQ_POST, "/sandboxes/{}/fork", e2b_fork },                        \
	{ EVHTTP_REQ_POST, "/sandboxes/{}/snapshots", e2b_snapshot },               \
	{ EVHTTP_REQ_GET, "/snapshots", e2b_snapshots_list },                       \
	{ EVHTTP_REQ_GET, "/templates", e2b_templates_list }

/* Is this a request to the E2B control plane (its errors take E2B's shape)? */
bool e2b_api_path(const struct http_req *r);
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
/* Is this request one of the routes below (not /v1/...)? */
bool envd_path(const struct http_req *r);
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

#define ENVD_ROUTES                                                                                 \
	{ EVHTTP_REQ_POST, "/process.Process/Start", envd_process_start },                          \
	{ EVHTTP_REQ_POST, "/process.Process/Connect", envd_process_connect },                      \
	{ EVHTTP_REQ_POST, "/process.Process/List", envd_process_list },                            \
	{ EVHTTP_REQ_POST, "/process.Process/SendInput", envd_process_send_input },                 \
	{ EVHTTP_REQ_POST, "/process.Process/StreamInput", envd_process_stream_input },             \
	{ EVHTTP_REQ_POST, "/process.Process/SendSignal", envd_process_send_signal },               \
	{ EVHTTP_REQ_POST, "/process.Process/CloseStdin", envd_process_close_stdin },               \
	{ EVHTTP_REQ_POST, "/process.Process/Update", envd_process_update },                        \
	{ EVHTTP_REQ_POST, "/filesystem.Filesystem/Stat", envd_fs_stat },                           \
	{ EVHTTP_REQ_POST, "/filesystem.Filesystem/MakeDir", envd_fs_make_dir },                    \
	{ EVHTTP_REQ_POST, "/filesystem.Filesystem/Move", envd_fs_move },                           \
	{ EVHTTP_REQ_POST, "/filesystem.Filesystem/ListDir", envd_fs_list_dir },                    \
	{ EVHTTP_REQ_POST, "/filesystem.Filesystem/Remove", envd_fs_remove },                       \
	{ EVHTTP_REQ_POST, "/filesystem.Filesystem/WatchDir", envd_fs_watch_dir },                  \
	{ EVHTTP_REQ_POST, "/filesystem.Filesystem/CreateWatcher", envd_fs_create_watcher },        \
	{ EVHTTP_REQ_POST, "/filesystem.Filesystem/GetWatcherEvents", envd_fs_get_watcher_events }, \
	{ EVHTTP_REQ_POST, "/filesystem.Filesystem/RemoveWatcher", envd_fs_remove_watcher },        \
	{ EVHTTP_REQ_GET, "/health", envd_health },                                                 \
	{ EVHTTP_REQ_GET, "/files", envd_files_get },                                               \
	{ EVHTTP_REQ_POST, "/files", envd_files_post },                                             \
	{ EVHTTP_REQ_POST, "/execute", interp_execute },                                            \
	{ EVHTTP_REQ_GET, "/contexts", interp_contexts_list },                                      \
	{ EVHTTP_REQ_POST, "/contexts", interp_contexts_create },                                   \
	{ EVHTTP_REQ_DELETE, "/contexts/{}", interp_contexts_delete },                              \
	{ EVHTTP_REQ_POST, "/contexts/{}/restart", interp_contexts_restart },                       \
	{ EVHTTP_REQ_POST, "/contexts/{}/interrupt", interp_contexts_interrupt }

/* The data-plane routes whose bodies stream (http/body.h). */
#define ENVD_STREAM_ROUTES { EVHTTP_REQ_POST, "/files", envd_files_post }

#endif
