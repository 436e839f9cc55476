/* e2b_ctl.h -- E2B's control plane in pieces: its request bodies parsed into the core's typed
 * requests (e2b_req.c) and the core's records rendered in its shapes (e2b_render.c). Pure:
 * no store, no loop; unit-tested (tests/unit/test_e2b_req.c). */
#ifndef SPACE_E2B_CTL_H
#define SPACE_E2B_CTL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "err.h"
#include "model/model.h"
#include "sandbox/spec.h"

/* What E2B calls a sandbox's state. */
enum e2b_state { E2B_NONE, E2B_RUNNING, E2B_PAUSED };
#define E2B_STATE_RUNNING (1u << E2B_RUNNING)
#define E2B_STATE_PAUSED (1u << E2B_PAUSED)
/* The template a create names when it names none. */
#define E2B_DEFAULT_TEMPLATE "base"
/* GET /v2/sandboxes and GET /snapshots: page sizes. */
#define E2B_LIST_DEFAULT 100
#define E2B_LIST_MAX 1000
/* Metadata filter of a list: at most this many pairs. */
#define E2B_FILTER_MAX 32

/* Each parser returns 0, or -1 with EINVAL and a message naming the field; on failure
 * nothing is left to free. */

/* POST /v2/sandboxes: templateID (default "base") into out->template_ref, timeout (s),
 * autoPause (on_timeout suspend, else delete when a timeout is set), metadata, envVars,
 * allow_internet_access + network (e2b_req_network). Fields of E2B's we cannot honour
 * (volumeMounts, mcp, iam tokens, autoResume enabled) are refused, not ignored. */
int e2b_req_create(json_t *body, struct create_req *out, space_err *err);

/* An E2B network description onto our egress policy (docs/design/egress.md), normalised
 * through req_network; always a policy (E2B's default is internet on, whatever the template's
 * default policy). allow_internet: -1 absent, 0 false, 1 true. network: E2B's
 * {allowOut, denyOut, allowPublicTraffic, maskRequestHost, httpsPorts} or NULL.
 *  - no internet (allow_internet 0, or denyOut naming 0.0.0.0/0): {"allow": allowOut};
 *  - otherwise (true or absent): {"allow": ["0.0.0.0/0", "*", allowOut...], "deny": denyOut
 *    less what allowOut names (E2B's allow wins over its deny; ours the other way round)}:
 *    every public address, and every name resolved by the gateway (its addresses reachable
 *    under that name), denyOut's names and CIDRs excepted. */
int e2b_req_network(int allow_internet, const json_t *network, json_t **out, space_err *err);

/* PUT /sandboxes/{id}/network: {allowOut, denyOut, allow_internet_access}. */
int e2b_req_network_update(json_t *body, json_t **out, space_err *err);

/* {"<key>": seconds} (key "timeout" or "duration") into a timeout_req (never on_timeout);
 * *set false when absent (or null). */
int e2b_req_timeout(json_t *body, const char *key, struct timeout_req *out, bool *set, space_err *err);

/* POST /sandboxes/{id}/fork: {count (1..SPEC_FORK_MAX, default 1), timeout}. */
int e2b_req_fork(json_t *body, int *count, struct timeout_req *t, bool *tset, space_err *err);

/* POST /sandboxes/{id}/snapshots: {name} optional ("" when absent), checked as our
 * snapshot names are. */
int e2b_req_snapshot(json_t *body, char *name, size_t len, space_err *err);

/* The list's metadata filter: "k=v&k2=v2" with each key and value percent-encoded once more
 * (the SDK encodes them, then URLSearchParams encodes the pairs; the query's own decoding
 * undoes the outer layer). Decodes into out. */
int e2b_req_metadata_filter(const char *s, struct strmap *out, space_err *err);
/* State filter values: "running", "paused", or comma-separated lists of them, OR-ed into
 * *mask (E2B_STATE_*). */
int e2b_req_states(const char *s, unsigned *mask, space_err *err);
/* limit: 1..E2B_LIST_MAX. */
int e2b_req_limit(const char *s, int *limit, space_err *err);

/* ---- rendering (e2b_render.c) ---- */
enum e2b_state e2b_state_of(enum sb_state s);
const char *e2b_state_name(enum e2b_state s);
/* The templateID E2B sees: the template as asked, else the snapshot it came from. */
const char *e2b_template_id(const struct sandbox_rec *sb);
/* A list entry / GET /sandboxes/{id}: disk_mb the template image's size (0: unknown). */
json_t *e2b_sandbox_json(const struct sandbox_rec *sb, int64_t disk_mb);
/* GET /sandboxes/{id}: that, with allowInternetAccess and network from its egress policy. */
json_t *e2b_sandbox_detail_json(const struct sandbox_rec *sb, int64_t disk_mb);
/* Our egress policy as E2B's network ({"allowOut": [...], "denyOut": [...]}); *open: its
 * allowInternetAccess. -1 when out of memory (pure). */
int e2b_network_json(const json_t *policy, bool *open, json_t **out);
/* What create, connect, resume and fork answer. */
/* domain: what the SDKs' getHost(port) puts after "{port}-{id}." (front/port_names.h). */
json_t *e2b_created_json(const struct sandbox_rec *sb, const char *token, const char *domain);
/* E2B's template list entry. */
json_t *e2b_template_json(const struct template_rec *t);
/* GET /snapshots entry. */
json_t *e2b_snapshot_json(const struct snapshot_rec *s);
/* One sample of GET /sandboxes/{id}/metrics from QEMU's /proc/<pid>/stat text: cpu ticks
 * (utime+stime) over the process's life so far, RSS pages. NULL if stat does not parse or
 * its start time is not pid_start (the pid was reused). */
json_t *e2b_metrics_json(const char *stat, uint64_t pid_start, double uptime_s, long hz, long page,
			 const struct sandbox_rec *sb, int64_t disk_used, int64_t now);
/* "http://<listen>" with ":PORT" (every address) as 127.0.0.1: E2B_API_URL. */
void e2b_api_url(const char *listen, char *out, size_t len);

/* ---- shared by the handlers (e2b_sandboxes.c, e2b_list.c); not pure ---- */
struct http_req;
/* The body as a JSON object ({} when empty), or NULL having answered 400/413 in E2B's
 * shape. The caller owns it. */
json_t *e2b_body(struct http_req *r);
/* The sandbox named by the path, as E2B may see it (not deleted, deleting or failed): 0, or
 * -1 having answered 404 {"code":404,...} (or 500). Clear *out. */
int e2b_sandbox_param(struct http_req *r, struct sandbox_rec *out);

#endif
