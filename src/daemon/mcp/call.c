/* call.c -- what a tool calls of the exchange that runs it (mcp.h: struct mcp_call): its
 * answer (a result, a tool error, the client gone), the hold it waits under, progress
 * notifications, and its arguments, read as the schema checked them. */
#include <event2/event.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "daemon.h"
#include "exchange.h"
#include "mcp.h"
#include "model/model.h"

void mcp_call_done(struct mcp_call *c, json_t *result)
{
	struct mcp_x *x = c->x;

	x->cancel = NULL;
	mcp_x_unlist(x);
	if (c->uri && json_is_true(json_object_get(result, "isError"))) {
		/* resources/read: a file it cannot read is the protocol's "resource not found" */
		json_t *t = json_object_get(json_array_get(json_object_get(result, "content"), 0), "text");

		mcp_x_add(x, mcp_error(x->call_id, -32002, "%s", json_string_value(t) ? json_string_value(t) : "not found"));
		json_decref(result);
	} else {
		mcp_x_add(x, mcp_result(x->call_id, result));
	}
	json_decref(x->call_id);
	x->call_id = NULL;
	json_decref(x->call_args);
	x->call_args = NULL;
	mcp_x_hold(x);
	event_active(x->kick, 0, 0);
}

void mcp_call_fail(struct mcp_call *c, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	mcp_call_done(c, mcp_tool_result(msg, NULL, true));
}

void mcp_call_err(struct mcp_call *c, const char *what, const space_err *e)
{
	mcp_call_fail(c, "%s: %s", what, e->msg[0] ? e->msg : "failed");
}

void mcp_call_gone(struct mcp_call *c)
{
	struct mcp_x *x = c->x;

	x->cancel = NULL;
	if (x->held) {
		http_hold_end(&x->hold);
		x->held = false;
	}
	mcp_x_free(x);
}

void mcp_call_wait(struct mcp_call *c, void (*cancel)(void *arg), void *arg)
{
	c->x->cancel = cancel;
	c->x->cancel_arg = arg;
	mcp_x_hold(c->x);
}

void mcp_call_unhold(struct mcp_call *c)
{
	c->x->cancel = NULL;
	mcp_x_unhold(c->x);
}

struct evhttp_request *mcp_call_req(struct mcp_call *c)
{
	return c->x->req;
}

bool mcp_call_streams(const struct mcp_call *c)
{
	return c->progress && !c->x->batch && c->x->accepts_sse;
}

int mcp_call_progress(struct mcp_call *c, double progress, const char *message, size_t len)
{
	struct mcp_x *x = c->x;
	bool cut;
	json_t *text, *n;
	int rc;

	if (!mcp_call_streams(c))
		return -1;
	text = mcp_text(message, len, len, &cut);
	n = text ? mcp_notification("notifications/progress",
				    json_pack("{s:O,s:f,s:o}", "progressToken", c->progress, "progress", progress, "message",
					      text))
		 : NULL;
	if (!n)
		return -1;
	if (!x->sse)
		mcp_x_sse_begin(x);
	rc = mcp_x_sse_event(x, n);
	json_decref(n);
	return rc;
}

const char *mcp_arg_str(const struct mcp_call *c, const char *key)
{
	return json_string_value(json_object_get(c->args, key));
}

int64_t mcp_arg_int(const struct mcp_call *c, const char *key, int64_t dflt)
{
	json_t *v = json_object_get(c->args, key);

	return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

bool mcp_arg_bool(const struct mcp_call *c, const char *key, bool dflt)
{
	json_t *v = json_object_get(c->args, key);

	return json_is_boolean(v) ? json_is_true(v) : dflt;
}

int mcp_arg_sandbox(struct mcp_call *c, const char **id)
{
	*id = mcp_arg_str(c, "sandbox_id");
	if (!*id || !id_valid(*id, "sb-")) {
		mcp_call_fail(c, "%s: no sandbox '%.64s' (ids look like sb-0123456789abcdef: list_sandboxes names them)",
			      c->tool->name, *id ? *id : "");
		return -1;
	}
	return 0;
}

