/* e2b_routes.c -- E2B's routes, each with its dialect (its error shape) and where an api process
 * answers it (http.h: http_place); the listeners' tables list them beside /v1's (listeners.c) */
#include "e2b.h"

/* The control plane (docs/design/e2b.md): its paths beside ours, E2B_API_URL = that listener.
 * E2B's create is relayed to the roomiest node (no intent form of it yet); connect and resume
 * are restores (they answer once the sandbox runs). */
const struct http_route e2b_api_routes[] = {
	{ EVHTTP_REQ_POST, "/v2/sandboxes", e2b_create, &e2b_dialect, HTTP_PLACE_ROOM, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v2/sandboxes", e2b_list, &e2b_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_POST, "/v2/sandboxes/{}/connect", e2b_connect, &e2b_dialect, HTTP_PLACE_RESTORE, 0, NULL, NULL },
	/* The Python SDK's forms of create and connect (the JS SDK uses the /v2 ones). */
	{ EVHTTP_REQ_POST, "/sandboxes", e2b_create, &e2b_dialect, HTTP_PLACE_ROOM, 0, NULL, NULL },
	{ EVHTTP_REQ_POST, "/sandboxes/{}/connect", e2b_connect, &e2b_dialect, HTTP_PLACE_RESTORE, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/sandboxes/{}", e2b_get, &e2b_dialect, HTTP_PLACE_LOCAL, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_DELETE, "/sandboxes/{}", e2b_kill, &e2b_dialect, HTTP_PLACE_DELETE, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_POST, "/sandboxes/{}/resume", e2b_resume, &e2b_dialect, HTTP_PLACE_RESTORE, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_POST, "/sandboxes/{}/pause", e2b_pause, &e2b_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_POST, "/sandboxes/{}/timeout", e2b_timeout, &e2b_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_POST, "/sandboxes/{}/refreshes", e2b_refresh, &e2b_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_GET, "/sandboxes/{}/metrics", e2b_metrics, &e2b_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_PUT, "/sandboxes/{}/network", e2b_network, &e2b_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_POST, "/sandboxes/{}/fork", e2b_fork, &e2b_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_POST, "/sandboxes/{}/snapshots", e2b_snapshot, &e2b_dialect, HTTP_PLACE_SANDBOX, HTTP_ROUTE_SANDBOX_PRE, NULL, NULL },
	{ EVHTTP_REQ_GET, "/snapshots", e2b_snapshots_list, &e2b_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/templates", e2b_templates_list, &e2b_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/events/sandboxes", e2b_events_list, &e2b_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/events/sandboxes/{}", e2b_events_sandbox, &e2b_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_POST, "/events/webhooks", e2b_webhooks_create, &e2b_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/events/webhooks", e2b_webhooks_list, &e2b_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/events/webhooks/{}", e2b_webhooks_get, &e2b_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_PATCH, "/events/webhooks/{}", e2b_webhooks_update, &e2b_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
	{ EVHTTP_REQ_DELETE, "/events/webhooks/{}", e2b_webhooks_delete, &e2b_dialect, HTTP_PLACE_LOCAL, 0, NULL, NULL },
};
const size_t e2b_api_nroutes = sizeof(e2b_api_routes) / sizeof(e2b_api_routes[0]);

/* envd and the code interpreter on the data plane, E2B_SANDBOX_URL = that listener: opened by
 * the envd token of the sandbox the E2b-Sandbox-Id header names (envd_auth), relayed by an api
 * process to that sandbox's node. */
#define ENVD(m, pat, fn, dl) \
	{ EVHTTP_REQ_##m, pat, fn, &dl, HTTP_PLACE_SANDBOX_HDR, 0, envd_auth, envd_head_auth }
const struct http_route envd_routes[] = {
	ENVD(POST, "/process.Process/Start", envd_process_start, connect_stream_dialect),
	ENVD(POST, "/process.Process/Connect", envd_process_connect, connect_stream_dialect),
	ENVD(POST, "/process.Process/List", envd_process_list, connect_dialect),
	ENVD(POST, "/process.Process/SendInput", envd_process_send_input, connect_dialect),
	ENVD(POST, "/process.Process/StreamInput", envd_process_stream_input, connect_dialect),
	ENVD(POST, "/process.Process/SendSignal", envd_process_send_signal, connect_dialect),
	ENVD(POST, "/process.Process/CloseStdin", envd_process_close_stdin, connect_dialect),
	ENVD(POST, "/process.Process/Update", envd_process_update, connect_dialect),
	ENVD(POST, "/filesystem.Filesystem/Stat", envd_fs_stat, connect_dialect),
	ENVD(POST, "/filesystem.Filesystem/MakeDir", envd_fs_make_dir, connect_dialect),
	ENVD(POST, "/filesystem.Filesystem/Move", envd_fs_move, connect_dialect),
	ENVD(POST, "/filesystem.Filesystem/ListDir", envd_fs_list_dir, connect_dialect),
	ENVD(POST, "/filesystem.Filesystem/Remove", envd_fs_remove, connect_dialect),
	ENVD(POST, "/filesystem.Filesystem/WatchDir", envd_fs_watch_dir, connect_stream_dialect),
	ENVD(POST, "/filesystem.Filesystem/CreateWatcher", envd_fs_create_watcher, connect_dialect),
	ENVD(POST, "/filesystem.Filesystem/GetWatcherEvents", envd_fs_get_watcher_events, connect_dialect),
	ENVD(POST, "/filesystem.Filesystem/RemoveWatcher", envd_fs_remove_watcher, connect_dialect),
	ENVD(GET, "/health", envd_health, envd_dialect),
	ENVD(GET, "/files", envd_files_get, envd_dialect),
	ENVD(POST, "/files", envd_files_post, envd_dialect),
	ENVD(POST, "/execute", interp_execute, envd_dialect),
	ENVD(GET, "/contexts", interp_contexts_list, envd_dialect),
	ENVD(POST, "/contexts", interp_contexts_create, envd_dialect),
	ENVD(DELETE, "/contexts/{}", interp_contexts_delete, envd_dialect),
	ENVD(POST, "/contexts/{}/restart", interp_contexts_restart, envd_dialect),
	ENVD(POST, "/contexts/{}/interrupt", interp_contexts_interrupt, envd_dialect),
};
const size_t envd_nroutes = sizeof(envd_routes) / sizeof(envd_routes[0]);

const struct http_route envd_stream_routes[] = {
	ENVD(POST, "/files", envd_files_post, envd_dialect),
};
const size_t envd_nstream_routes = sizeof(envd_stream_routes) / sizeof(envd_stream_routes[0]);
