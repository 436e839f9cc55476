/* mcp.h -- the Model Context Protocol front end (docs/design/mcp.md): JSON-RPC 2.0 messages
 * (jsonrpc.c), the protocol's lifecycle and sessions (lifecycle.c), the Streamable HTTP
 * transport at /mcp (transport.c), the tool table and its argument checks (tools.c), and the
 * tools over the core (tool_sandbox.c, tool_exec.c, tool_files.c; resources.c). The pure parts
 * (envelope, negotiation, argument checks, truncation) are unit-tested in tests/unit/test_mcp.c. */
#ifndef SPACE_MCP_H
#define SPACE_MCP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "http/http.h"

struct spaced;

/* ---- JSON-RPC 2.0 (jsonrpc.c; pure) ---- */
#define MCP_PARSE_ERROR (-32700)
#define MCP_INVALID_REQUEST (-32600)
#define MCP_METHOD_NOT_FOUND (-32601)
#define MCP_INVALID_PARAMS (-32602)
#define MCP_INTERNAL_ERROR (-32603)
/* Messages in one batch at most (each may start work in a sandbox). */
#define MCP_BATCH_MAX 32
/* A method name, a request id string: at most this long. */
#define MCP_NAME_MAX 128

enum mcp_kind { MCP_REQUEST, MCP_NOTIFICATION, MCP_RESPONSE, MCP_INVALID };

/* A POST body: one message or a batch (a non-empty array of at most MCP_BATCH_MAX). *msgs
 * gets an array (one entry for a single message; new reference), *batch whether it came as
 * one. -1: *reply is the JSON-RPC error to answer (parse error, invalid request). */
int mcp_parse_body(const char *buf, size_t len, json_t **msgs, bool *batch, json_t **reply);
/* What one message is; for MCP_INVALID, *why says why (static text). */
enum mcp_kind mcp_classify(const json_t *m, const char **why);
/* A response with result (stolen); id is copied (NULL: null). NULL only when out of memory. */
json_t *mcp_result(const json_t *id, json_t *result);
json_t *mcp_error(const json_t *id, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* {"jsonrpc":"2.0","method":..,"params":..} (params stolen). */
json_t *mcp_notification(const char *method, json_t *params);

/* ---- lifecycle (lifecycle.c) ---- */
#define MCP_SID_LEN 40 /* "mcp-" + 32 hex digits + NUL, rounded */
#define MCP_VERSION_LEN 16
/* Sessions kept at once (the least recently used goes first) and how long one lives idle. */
#define MCP_SESSIONS_MAX 256
#define MCP_SESSION_IDLE_MS (24LL * 3600 * 1000)
/* The protocol versions served, newest first. */
extern const char *const mcp_versions[];
/* The version to answer a client's initialize with: the client's when it is served, else the
 * newest (pure). */
const char *mcp_negotiate(const char *client_version);
bool mcp_version_served(const char *v);
/* The initialize result for version v. */
json_t *mcp_initialize_result(const char *v);
/* A new session (its id in sid); the oldest idle one is forgotten when the table is full. */
void mcp_session_new(char sid[MCP_SID_LEN], const char *version, int64_t now_ms);
/* 0: sid is a live session (its use time moves on); -1 not (never was, ended, expired). */
int mcp_session_touch(const char *sid, int64_t now_ms);
/* Ends sid: 0, or -1 when there was none. */
int mcp_session_end(const char *sid);
/* Forgets every session (tests). */
void mcp_sessions_reset(void);

/* ---- the tools (tools.c) ---- */
struct mcp_call;
typedef void (*mcp_tool_fn)(struct mcp_call *c);
struct mcp_tool {
	const char *name;
	const char *description;
	const char *schema; /* its inputSchema, JSON text (a subset of JSON Schema: mcp_args_check) */
	mcp_tool_fn fn;
	bool read_only, destructive;
};
extern const struct mcp_tool mcp_tools[];
extern const size_t mcp_ntools;
const struct mcp_tool *mcp_tool_find(const char *name);
/* The tools/list result (every schema parsed). NULL only when out of memory. */
json_t *mcp_tools_list(void);
/* args against schema (JSON text): an object, required members present, no member it does not
 * name, each of the type it says (string, integer, boolean, object, array of strings), within
 * minimum/maximum, minLength/maxLength, enum. 0, or -1 with EINVAL naming the argument (pure). */
int mcp_args_check(const char *schema, const json_t *args, space_err *err);
/* The longest prefix of s[0..len) of at most max bytes that ends on a UTF-8 character's
 * boundary (pure). */
size_t mcp_utf8_cut(const char *s, size_t len, size_t max);
/* s[0..len) as a JSON string, cut to max bytes (at a character boundary) and invalid UTF-8
 * replaced by U+FFFD; *cut whether anything was left out (pure). */
json_t *mcp_text(const char *s, size_t len, size_t max, bool *cut);
/* A CallToolResult: content [{type:text, text}], structuredContent (stolen, may be NULL),
 * isError. */
json_t *mcp_tool_result(const char *text, json_t *structured, bool is_error);
/* The same with structured rendered as its text. */
json_t *mcp_tool_json(json_t *structured);

/* ---- one tools/call in flight (call.c, over the exchange of transport.c) ----
 * A tool answers exactly once: mcp_call_done (a result), mcp_call_fail (isError: a message an
 * agent can act on) or mcp_call_gone (the client left while a step that held the request, such
 * as the file engine, ran). While a tool waits for the core it either keeps the exchange's hold
 * (mcp_call_wait: cancel runs if the client leaves, and the call is over) or hands the request
 * to a step that holds it itself (mcp_call_unhold first). */
struct mcp_call {
	struct spaced *d;
	const struct mcp_tool *tool;
	json_t *args;       /* borrowed: an object, checked against the tool's schema */
	json_t *progress;   /* the client's progressToken, or NULL */
	const char *uri;    /* resources/read of this URI (a read_file answered as contents) */
	struct mcp_x *x;
};
void mcp_call_done(struct mcp_call *c, json_t *result);
void mcp_call_fail(struct mcp_call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A core error as a tool error: "<what>: <message>". */
void mcp_call_err(struct mcp_call *c, const char *what, const space_err *e);
void mcp_call_gone(struct mcp_call *c);
void mcp_call_wait(struct mcp_call *c, void (*cancel)(void *arg), void *arg);
void mcp_call_unhold(struct mcp_call *c);
/* The request (for the file engine) and a synthetic dispatcher record of it. */
struct evhttp_request *mcp_call_req(struct mcp_call *c);
/* A progress notification (only when the client asked for them: a progressToken): progress
 * grows with each; message the output. Opens the SSE reply on the first one. -1 when the
 * client takes none (no token, a batch, no text/event-stream in Accept). */
int mcp_call_progress(struct mcp_call *c, double progress, const char *message, size_t len);
/* Whether progress notifications go out for this call. */
bool mcp_call_streams(const struct mcp_call *c);

/* Argument helpers for the tools (NULL/default when absent). */
const char *mcp_arg_str(const struct mcp_call *c, const char *key);
int64_t mcp_arg_int(const struct mcp_call *c, const char *key, int64_t dflt);
bool mcp_arg_bool(const struct mcp_call *c, const char *key, bool dflt);
/* sandbox_id as the core names one ("sb-..."); -1 having failed the call. */
int mcp_arg_sandbox(struct mcp_call *c, const char **id);

/* The tools. */
void mcp_tool_create(struct mcp_call *c);
void mcp_tool_list_sandboxes(struct mcp_call *c);
void mcp_tool_delete(struct mcp_call *c);
void mcp_tool_pause(struct mcp_call *c);
void mcp_tool_resume(struct mcp_call *c);
void mcp_tool_fork(struct mcp_call *c);
void mcp_tool_snapshot(struct mcp_call *c);
void mcp_tool_expose_port(struct mcp_call *c);
void mcp_tool_run_command(struct mcp_call *c);
void mcp_tool_run_code(struct mcp_call *c);
void mcp_tool_read_file(struct mcp_call *c);
void mcp_tool_write_file(struct mcp_call *c);
void mcp_tool_list_files(struct mcp_call *c);

/* Output kept per stream in a run_command result, and sent as progress at most. */
#define MCP_OUTPUT_MAX (64u << 10)
#define MCP_PROGRESS_MAX (1u << 20)
/* read_file: bytes returned at most. list_files: entries at most. */
#define MCP_READ_MAX (256u << 10)
#define MCP_LIST_MAX 1000

/* ---- resources (resources.c) ---- */
#define MCP_URI_PREFIX "space://sandboxes/"
/* "space://sandboxes/{id}/files/{path}" -> id and "/path" (percent-decoded; pure). -1 when
 * it is not one. */
int mcp_uri_parse(const char *uri, char *id, size_t idlen, char *path, size_t pathlen);
json_t *mcp_resource_templates(void);
/* resources/read: runs as a call of read_file with args {sandbox_id, path}, answered as
 * resource contents. */
void mcp_resource_read(struct mcp_call *c, const char *uri);

/* ---- the routes (transport.c), listed in the control plane's table (listeners.c) ---- */
extern const struct http_route mcp_routes[];
extern const size_t mcp_nroutes;

#endif
