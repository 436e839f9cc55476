/* transport.c -- MCP's Streamable HTTP transport at /mcp on the control plane: POST carries one
 * JSON-RPC message or a batch, answered as application/json (or 202 when it held no request),
 * or as text/event-stream when a tools/call sends progress notifications; initialize issues an
 * Mcp-Session-Id that every later request must carry; DELETE ends a session; GET (a stream the
 * server would open on its own) is not served: 405. The API key is checked by the control
 * plane's auth before anything here runs, as for /v1.
 *
 * One POST is one exchange (struct mcp_x): its messages run in order, one at a time; a tool
 * that waits for the core (an operation, a session, a file operation) resumes the exchange when
 * it is done. Lifetime: an exchange is freed exactly once, by x_finish (the reply went out), by
 * x_gone (the client left while the exchange held the request) or by mcp_call_gone (it left
 * while a step that held the request itself ran, e.g. the file engine). */
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "exchange.h"
#include "mcp.h"
#include "model/model.h"

/* Exchanges whose tool runs, for notifications/cancelled (which comes on another POST of the
 * same session). The daemon has one loop: a list in the module is enough. */
static struct mcp_x *calls;

void mcp_x_unlist(struct mcp_x *x)
{
	if (!x->listed)
		return;
	if (x->lprev)
		x->lprev->lnext = x->lnext;
	else
		calls = x->lnext;
	if (x->lnext)
		x->lnext->lprev = x->lprev;
	x->lprev = x->lnext = NULL;
	x->listed = false;
}

static void enlist(struct mcp_x *x)
{
	x->lnext = calls;
	x->lprev = NULL;
	if (calls)
		calls->lprev = x;
	calls = x;
	x->listed = true;
}

void mcp_x_free(struct mcp_x *x)
{
	mcp_x_unlist(x);
	if (x->kick)
		event_free(x->kick);
	json_decref(x->msgs);
	json_decref(x->out);
	json_decref(x->call_id);
	json_decref(x->call_args);
	free(x);
}

static void x_gone(struct http_hold *h)
{
	struct mcp_x *x = (struct mcp_x *)h;

	x->held = false;
	if (x->cancel)
		x->cancel(x->cancel_arg);
	mcp_x_free(x);
}

void mcp_x_hold(struct mcp_x *x)
{
	if (x->held)
		return;
	http_hold_begin(&x->hold, x->req, x_gone, x->d->conns);
	x->held = true;
}

void mcp_x_unhold(struct mcp_x *x)
{
	if (!x->held)
		return;
	http_hold_end(&x->hold);
	x->held = false;
}

void mcp_x_add(struct mcp_x *x, json_t *msg)
{
	if (!msg)
		msg = mcp_error(NULL, MCP_INTERNAL_ERROR, "out of memory");
	if (msg)
		json_array_append_new(x->out, msg);
}

/* ---- the reply ---- */

int mcp_x_sse_event(struct mcp_x *x, const json_t *msg)
{
	struct evbuffer *b = evbuffer_new();
	char *s = json_dumps(msg, JSON_COMPACT);
	int rc = -1;

	/* JSON_COMPACT output has no newline, so one data: line holds it. */
	if (b && s && evbuffer_add_printf(b, "event: message\ndata: %s\n\n", s) >= 0) {
		evhttp_send_reply_chunk(x->req, b);
		rc = 0;
	}
	free(s);
	if (b)
		evbuffer_free(b);
	return rc;
}

void mcp_x_sse_begin(struct mcp_x *x)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(x->req);

	evhttp_add_header(h, "Content-Type", "text/event-stream");
	evhttp_add_header(h, "Cache-Control", "no-cache");
	http_reply_start(x->req, 200, "OK");
	x->sse = true;
}

static void x_finish(struct mcp_x *x)
{
	size_t n = json_array_size(x->out);

	if (x->sse) {
		for (size_t i = 0; i < n; i++)
			mcp_x_sse_event(x, json_array_get(x->out, i));
		mcp_x_unhold(x);
		evhttp_send_reply_end(x->req);
	} else {
		mcp_x_unhold(x);
		if (n == 0)
			http_reply_empty(x->req, 202); /* only notifications and responses */
		else
			http_reply_json(x->req, 200, json_incref(x->batch ? x->out : json_array_get(x->out, 0)));
	}
	mcp_x_free(x);
}

/* ---- the methods ---- */

static const json_t *params_of(const json_t *m)
{
	const json_t *p = json_object_get(m, "params");

	return json_is_object(p) ? p : NULL;
}

static json_t *do_initialize(struct mcp_x *x, const json_t *m)
{
	const json_t *p = params_of(m);
	const char *v = json_string_value(json_object_get(p, "protocolVersion"));
	const char *use;

	if (!v)
		return mcp_error(json_object_get(m, "id"), MCP_INVALID_PARAMS,
				 "initialize needs params.protocolVersion (a string)");
	use = mcp_negotiate(v);
	mcp_session_new(x->sid, use, now_ms());
	evhttp_add_header(evhttp_request_get_output_headers(x->req), "Mcp-Session-Id", x->sid);
	return mcp_result(json_object_get(m, "id"), mcp_initialize_result(use));
}

/* The progressToken of params._meta: a string or an integer, else none. */
static json_t *progress_token(const json_t *p)
{
	json_t *t = json_object_get(json_object_get(p, "_meta"), "progressToken");

	return (json_is_string(t) && json_string_length(t) <= MCP_NAME_MAX) || json_is_integer(t) ? t : NULL;
}

/* Starts a tool: true when it runs (the exchange resumes from mcp_call_done), false when the
 * answer is already in x->out. */
static bool start_call(struct mcp_x *x, const json_t *m, const struct mcp_tool *t, json_t *args, const char *uri)
{
	space_err err = { 0 };

	x->call_id = json_deep_copy(json_object_get(m, "id"));
	enlist(x);
	x->call = (struct mcp_call){ .d = x->d, .tool = t, .args = args, .progress = progress_token(params_of(m)),
				     .uri = uri, .x = x };
	if (mcp_args_check(t->schema, args, &err) < 0) {
		mcp_call_fail(&x->call, "%s: %s", t->name, err.msg);
		return true;
	}
	t->fn(&x->call);
	return true;
}

static bool do_tools_call(struct mcp_x *x, const json_t *m)
{
	const json_t *p = params_of(m), *id = json_object_get(m, "id");
	const char *name = json_string_value(json_object_get(p, "name"));
	json_t *args = json_object_get(p, "arguments");
	const struct mcp_tool *t;

	if (!name) {
		mcp_x_add(x, mcp_error(id, MCP_INVALID_PARAMS, "tools/call needs params.name (a tool's name)"));
		return false;
	}
	if (!(t = mcp_tool_find(name))) {
		mcp_x_add(x, mcp_error(id, MCP_INVALID_PARAMS, "unknown tool '%.64s' (tools/list names them)", name));
		return false;
	}
	if (args && !json_is_object(args) && !json_is_null(args)) {
		mcp_x_add(x, mcp_error(id, MCP_INVALID_PARAMS, "params.arguments must be an object"));
		return false;
	}
	if (!args || json_is_null(args)) {
		args = x->call_args = json_object();
		if (!args) {
			mcp_x_add(x, mcp_error(id, MCP_INTERNAL_ERROR, "out of memory"));
			return false;
		}
	}
	return start_call(x, m, t, args, NULL);
}

static bool do_resources_read(struct mcp_x *x, const json_t *m)
{
	const json_t *id = json_object_get(m, "id");
	const char *uri = json_string_value(json_object_get(params_of(m), "uri"));
	char sb[ID_LEN], path[4096];

	if (!uri || mcp_uri_parse(uri, sb, sizeof(sb), path, sizeof(path)) < 0) {
		mcp_x_add(x, mcp_error(id, MCP_INVALID_PARAMS, "resources/read needs params.uri of the form %s{sandbox_id}/files/{path}",
				     MCP_URI_PREFIX));
		return false;
	}
	x->call_args = json_pack("{s:s,s:s}", "sandbox_id", sb, "path", path);
	if (!x->call_args) {
		mcp_x_add(x, mcp_error(id, MCP_INTERNAL_ERROR, "out of memory"));
		return false;
	}
	return start_call(x, m, mcp_tool_find("read_file"), x->call_args, uri);
}

/* Runs a request; true when a tool runs (the exchange waits for it). */
static bool do_request(struct mcp_x *x, const json_t *m)
{
	const char *method = json_string_value(json_object_get(m, "method"));
	const json_t *id = json_object_get(m, "id");

	if (strcmp(method, "initialize") == 0) {
		if (x->batch)
			mcp_x_add(x, mcp_error(id, MCP_INVALID_REQUEST, "initialize must not be part of a batch"));
		else
			mcp_x_add(x, do_initialize(x, m));
	} else if (strcmp(method, "ping") == 0) {
		mcp_x_add(x, mcp_result(id, json_object()));
	} else if (strcmp(method, "tools/list") == 0) {
		mcp_x_add(x, mcp_result(id, mcp_tools_list()));
	} else if (strcmp(method, "tools/call") == 0) {
		return do_tools_call(x, m);
	} else if (strcmp(method, "resources/list") == 0) {
		mcp_x_add(x, mcp_result(id, json_pack("{s:[]}", "resources")));
	} else if (strcmp(method, "resources/templates/list") == 0) {
		mcp_x_add(x, mcp_result(id, mcp_resource_templates()));
	} else if (strcmp(method, "resources/read") == 0) {
		return do_resources_read(x, m);
	} else {
		mcp_x_add(x, mcp_error(id, MCP_METHOD_NOT_FOUND, "method '%.128s' is not served", method));
	}
	return false;
}

/* notifications/cancelled {requestId}: the tool of that request in this session, if it still
 * waits under the exchange's hold (an operation, a command: the command is killed), ends with a
 * tool error; one in a step that holds the request itself (a file operation) runs on. */
static void do_cancelled(struct mcp_x *x, const json_t *m)
{
	const json_t *rid = json_object_get(params_of(m), "requestId");

	for (struct mcp_x *o = calls; rid && o; o = o->lnext) {
		if (o == x || strcmp(o->sid, x->sid) != 0 || !o->call_id || !json_equal(o->call_id, rid) || !o->cancel)
			continue;
		o->cancel(o->cancel_arg);
		o->cancel = NULL;
		mcp_call_fail(&o->call, "%s: cancelled by the client", o->call.tool->name);
		return;
	}
}

/* Runs messages from x->next on until one waits or all are done (then the reply). */
static void x_run(struct mcp_x *x)
{
	while (x->next < json_array_size(x->msgs)) {
		const json_t *m = json_array_get(x->msgs, x->next++);
		const char *why;

		switch (mcp_classify(m, &why)) {
		case MCP_INVALID: {
			const json_t *id = json_is_object(m) ? json_object_get(m, "id") : NULL;

			mcp_x_add(x, mcp_error(json_is_string(id) || json_is_integer(id) ? id : NULL, MCP_INVALID_REQUEST,
					     "invalid request: %s", why));
			break;
		}
		case MCP_NOTIFICATION: /* notifications/initialized...: nothing to do */
			if (strcmp(json_string_value(json_object_get(m, "method")), "notifications/cancelled") == 0)
				do_cancelled(x, m);
			break;
		case MCP_RESPONSE: /* we send no requests: nothing awaits one */
			break;
		case MCP_REQUEST:
			if (do_request(x, m))
				return;
			break;
		}
	}
	x_finish(x);
}

static void x_kick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	x_run(arg);
}

/* ---- the routes ---- */

static void reply_rpc_error(struct evhttp_request *req, int status, int code, const char *msg)
{
	http_reply_json(req, status, mcp_error(NULL, code, "%s", msg));
}

/* The dialect of /mcp's own refusals (413, 405...): a JSON-RPC error body. */
static void mcp_dialect_error(struct evhttp_request *req, int status, const char *code, const char *msg)
{
	(void)code;
	reply_rpc_error(req, status, status == 401 ? -32001 : MCP_INVALID_REQUEST, msg);
}

static const struct http_dialect mcp_dialect = { "mcp", mcp_dialect_error, NULL };

static bool header_has(struct evhttp_request *req, const char *name, const char *what)
{
	const char *v = evhttp_find_header(evhttp_request_get_input_headers(req), name);

	return v && strstr(v, what);
}

/* The session a request names: 0, or -1 having answered (400 none, 404 unknown). */
static int check_session(struct evhttp_request *req, const char *why_needed)
{
	struct evkeyvalq *in = evhttp_request_get_input_headers(req);
	const char *sid = evhttp_find_header(in, "Mcp-Session-Id");
	const char *pv = evhttp_find_header(in, "MCP-Protocol-Version");

	if (!sid) {
		reply_rpc_error(req, 400, MCP_INVALID_REQUEST, why_needed);
		return -1;
	}
	if (mcp_session_touch(sid, now_ms()) < 0) {
		reply_rpc_error(req, 404, MCP_INVALID_REQUEST, "session not found (it ended or expired): initialize again");
		return -1;
	}
	if (pv && !mcp_version_served(pv)) {
		reply_rpc_error(req, 400, MCP_INVALID_REQUEST,
				"unsupported MCP-Protocol-Version (served: 2025-06-18, 2025-03-26, 2024-11-05)");
		return -1;
	}
	return 0;
}

static bool has_initialize(const json_t *msgs)
{
	const json_t *m;
	size_t i;

	json_array_foreach(msgs, i, m) {
		const char *method = json_string_value(json_object_get(m, "method"));

		if (method && strcmp(method, "initialize") == 0)
			return true;
	}
	return false;
}

static void mcp_post(struct http_req *r)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(r->req);
	size_t len = evbuffer_get_length(in);
	const char *ct = evhttp_find_header(evhttp_request_get_input_headers(r->req), "Content-Type");
	const char *accept = evhttp_find_header(evhttp_request_get_input_headers(r->req), "Accept");
	const char *sid = evhttp_find_header(evhttp_request_get_input_headers(r->req), "Mcp-Session-Id");
	json_t *msgs = NULL, *err = NULL;
	struct mcp_x *x;
	bool batch;
	const char *data;

	if (!ct || strncmp(ct, "application/json", 16) != 0) {
		reply_rpc_error(r->req, 415, MCP_INVALID_REQUEST, "Content-Type must be application/json");
		return;
	}
	if (accept && !strstr(accept, "application/json") && !strstr(accept, "text/event-stream") &&
	    !strstr(accept, "*/*")) {
		reply_rpc_error(r->req, 406, MCP_INVALID_REQUEST, "Accept must name application/json and text/event-stream");
		return;
	}
	if (len > r->max_body) {
		reply_rpc_error(r->req, 413, MCP_INVALID_REQUEST, "the body is over the limit");
		return;
	}
	data = len ? (const char *)evbuffer_pullup(in, -1) : "";
	if (!data) {
		reply_rpc_error(r->req, 500, MCP_INTERNAL_ERROR, "out of memory reading the body");
		return;
	}
	if (mcp_parse_body(data, len, &msgs, &batch, &err) < 0) {
		http_reply_json(r->req, 400, err);
		return;
	}
	/* Only a lone initialize opens a session: in a batch it is refused (do_request), and the
	 * batch's other messages need a session like any. */
	if (!(!batch && has_initialize(msgs)) &&
	    check_session(r->req, "Mcp-Session-Id is required (initialize first)") < 0) {
		json_decref(msgs);
		return;
	}
	x = calloc(1, sizeof(*x));
	if (!x || !(x->out = json_array()) || !(x->kick = event_new(r->d->base, -1, 0, x_kick, x))) {
		if (x)
			mcp_x_free(x);
		json_decref(msgs);
		reply_rpc_error(r->req, 500, MCP_INTERNAL_ERROR, "out of memory");
		return;
	}
	x->d = r->d;
	x->req = r->req;
	snprintf(x->sid, sizeof(x->sid), "%s", sid ? sid : "");
	x->msgs = msgs;
	x->batch = batch;
	x->accepts_sse = header_has(r->req, "Accept", "text/event-stream");
	x_run(x);
}

static void mcp_delete(struct http_req *r)
{
	const char *sid = evhttp_find_header(evhttp_request_get_input_headers(r->req), "Mcp-Session-Id");

	if (!sid) {
		reply_rpc_error(r->req, 400, MCP_INVALID_REQUEST, "Mcp-Session-Id is required");
		return;
	}
	if (mcp_session_end(sid) < 0) {
		reply_rpc_error(r->req, 404, MCP_INVALID_REQUEST, "session not found");
		return;
	}
	http_reply_empty(r->req, 204);
}

/* A single daemon or a node serves /mcp (its sessions and the tools' waits are this process's);
 * an api process refuses it (HTTP_PLACE_NODE_ONLY): docs/design/mcp.md. */
const struct http_route mcp_routes[] = {
	{ EVHTTP_REQ_POST, "/mcp", mcp_post, &mcp_dialect, HTTP_PLACE_NODE_ONLY, 0, NULL, NULL },
	{ EVHTTP_REQ_DELETE, "/mcp", mcp_delete, &mcp_dialect, HTTP_PLACE_NODE_ONLY, 0, NULL, NULL },
};
const size_t mcp_nroutes = sizeof(mcp_routes) / sizeof(mcp_routes[0]);
