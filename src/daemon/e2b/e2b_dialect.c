/* e2b_dialect.c -- E2B's error shapes as dialects (http.h): its control plane's and envd's plain
 * routes' {"code": <status>, "message"}, and Connect's {"code": "<name>", "message"} (unary, or
 * as the end of a stream) on envd's RPCs; and the prefixes under which unmatched paths are E2B's */
#include <string.h>

#include "connect.h"
#include "e2b.h"
#include "front/dialect.h"
#include "model/model.h"

static void e2b_shape(struct evhttp_request *req, int status, const char *code, const char *msg)
{
	(void)code;
	e2b_reply_error(req, status, "%s", msg);
}

/* Connect's code for an HTTP status the dispatcher or a relay answers. */
static const char *connect_code(int status)
{
	switch (status) {
	case 400: return "invalid_argument";
	case 401: return "unauthenticated";
	case 403: return "permission_denied";
	case 404: return "not_found";
	case 405: case 501: return "unimplemented";
	case 408: case 504: return "deadline_exceeded";
	case 409: return "failed_precondition";
	case 413: case 429: return "resource_exhausted";
	case 503: return "unavailable";
	default: return status >= 500 ? "internal" : "unknown";
	}
}

/* A code that is Connect's already (envd's own refusals name them: "unavailable" answered
 * 502) is kept; SPACE's ("unauthorized", "bad_request") become Connect's by status. */
static const char *connect_code_for(int status, const char *code)
{
	if (code && (connect_code_status(code) != 500 || strcmp(code, "internal") == 0))
		return code;
	return connect_code(status);
}

static void connect_shape(struct evhttp_request *req, int status, const char *code, const char *msg)
{
	connect_reply_error(req, connect_code_for(status, code), "%s", msg);
}

static void connect_stream_shape(struct evhttp_request *req, int status, const char *code, const char *msg)
{
	connect_stream_reply_error(req, connect_code_for(status, code), "%s", msg);
}

static void e2b_no_sandbox(struct evhttp_request *req, const char *id)
{
	e2b_reply_error(req, 404, "sandbox %.64s not found", id);
}

/* A kill closed in the store: E2B answers 204. (A restore waits; E2B writes no create intent.) */
static void e2b_accepted(struct spaced *d, struct evhttp_request *req, const struct sandbox_rec *sb,
			 const struct op_rec *op)
{
	(void)d, (void)sb, (void)op;
	http_reply_empty(req, 204);
}

static const struct front_intent_reply e2b_intent = {
	.no_sandbox = e2b_no_sandbox,
	.accepted = e2b_accepted,
	.restore_waits = true,
};

const struct http_dialect e2b_dialect = { "e2b", e2b_shape, &e2b_intent };
const struct http_dialect envd_dialect = { "envd", e2b_shape, NULL };
const struct http_dialect connect_dialect = { "connect", connect_shape, NULL };
const struct http_dialect connect_stream_dialect = { "connect-stream", connect_stream_shape, NULL };

const struct http_prefix e2b_api_prefixes[] = {
	{ "sandboxes", &e2b_dialect },
	{ "v2", &e2b_dialect },
	{ "snapshots", &e2b_dialect },
	{ "templates", &e2b_dialect },
	{ "events", &e2b_dialect },
};
const size_t e2b_api_nprefixes = sizeof(e2b_api_prefixes) / sizeof(e2b_api_prefixes[0]);

const struct http_prefix envd_prefixes[] = {
	{ "process.Process", &connect_dialect },
	{ "filesystem.Filesystem", &connect_dialect },
	{ "files", &envd_dialect },
	{ "health", &envd_dialect },
	{ "execute", &envd_dialect },
	{ "contexts", &envd_dialect },
};
const size_t envd_nprefixes = sizeof(envd_prefixes) / sizeof(envd_prefixes[0]);
