/* jsonrpc.c -- JSON-RPC 2.0 envelopes as MCP uses them: a POST body into messages (one, or a
 * batch), each classified as request, notification or response, and the replies built. Pure. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "mcp.h"

json_t *mcp_result(const json_t *id, json_t *result)
{
	/* "o" steals result even when the pack fails (jansson >= 2.11). */
	if (!result)
		return NULL;
	return json_pack("{s:s,s:o,s:o}", "jsonrpc", "2.0", "id", id ? json_deep_copy(id) : json_null(), "result",
			 result);
}

json_t *mcp_error(const json_t *id, int code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return json_pack("{s:s,s:o,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", id ? json_deep_copy(id) : json_null(),
			 "error", "code", code, "message", msg);
}

json_t *mcp_notification(const char *method, json_t *params)
{
	return json_pack("{s:s,s:s,s:o}", "jsonrpc", "2.0", "method", method, "params", params ? params : json_object());
}

/* An id is a string or an integer (JSON-RPC allows numbers; MCP says no fractions, no null). */
static bool id_ok(const json_t *id)
{
	return (json_is_string(id) && json_string_length(id) <= MCP_NAME_MAX) || json_is_integer(id);
}

enum mcp_kind mcp_classify(const json_t *m, const char **why)
{
	const json_t *v, *id, *method, *params;

	*why = NULL;
	if (!json_is_object(m)) {
		*why = "a message must be a JSON object";
		return MCP_INVALID;
	}
	v = json_object_get(m, "jsonrpc");
	if (!json_is_string(v) || strcmp(json_string_value(v), "2.0") != 0) {
		*why = "\"jsonrpc\" must be \"2.0\"";
		return MCP_INVALID;
	}
	id = json_object_get(m, "id");
	method = json_object_get(m, "method");
	params = json_object_get(m, "params");
	if (!method) {
		/* A response to something we asked: we ask nothing, so it is only checked. */
		if (!id || (!json_object_get(m, "result") == !json_object_get(m, "error"))) {
			*why = "a message needs a \"method\" (or is a response with an id and one of result, error)";
			return MCP_INVALID;
		}
		return MCP_RESPONSE;
	}
	if (!json_is_string(method) || json_string_length(method) == 0 || json_string_length(method) > MCP_NAME_MAX) {
		*why = "\"method\" must be a non-empty string of at most 128 bytes";
		return MCP_INVALID;
	}
	if (params && !json_is_object(params) && !json_is_array(params)) {
		*why = "\"params\" must be an object";
		return MCP_INVALID;
	}
	if (!id)
		return MCP_NOTIFICATION;
	if (!id_ok(id)) {
		*why = "\"id\" must be a string (at most 128 bytes) or an integer";
		return MCP_INVALID;
	}
	return MCP_REQUEST;
}

int mcp_parse_body(const char *buf, size_t len, json_t **msgs, bool *batch, json_t **reply)
{
	json_error_t je;
	json_t *j;

	*msgs = NULL;
	*batch = false;
	*reply = NULL;
	if (len == 0) {
		*reply = mcp_error(NULL, MCP_INVALID_REQUEST, "empty body: POST one JSON-RPC message or a batch");
		return -1;
	}
	j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (!j) {
		*reply = mcp_error(NULL, MCP_PARSE_ERROR, "parse error at line %d col %d: %s", je.line, je.column,
				   je.text);
		return -1;
	}
	if (json_is_array(j)) {
		if (json_array_size(j) == 0 || json_array_size(j) > MCP_BATCH_MAX) {
			*reply = mcp_error(NULL, MCP_INVALID_REQUEST, "a batch holds 1..%d messages, not %zu", MCP_BATCH_MAX,
					   json_array_size(j));
			json_decref(j);
			return -1;
		}
		*batch = true;
		*msgs = j;
		return 0;
	}
	if (!json_is_object(j)) {
		*reply = mcp_error(NULL, MCP_INVALID_REQUEST, "the body must be a JSON-RPC message (an object) or a batch");
		json_decref(j);
		return -1;
	}
	*msgs = json_array();
	if (!*msgs || json_array_append_new(*msgs, j) < 0) {
		json_decref(*msgs);
		*msgs = NULL;
		*reply = mcp_error(NULL, MCP_INTERNAL_ERROR, "out of memory");
		return -1;
	}
	return 0;
}
