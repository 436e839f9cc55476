/* envd_auth.c -- which data-plane requests are E2B's (envd and the code interpreter), the
 * sandbox their E2b-Sandbox-Id header names, and the envd token that must open it */
#include <string.h>

#include "daemon.h"
#include "e2b.h"
#include "connect.h"
#include "sandbox/sandbox.h"

#define HDR_SANDBOX "E2b-Sandbox-Id"

bool envd_path(const struct http_req *r)
{
	return r->nseg >= 1 && strcmp(r->seg[0], "v1") != 0;
}

const char *e2b_sandbox_id(const struct http_req *r)
{
	const char *h = evhttp_find_header(evhttp_request_get_input_headers(r->req), HDR_SANDBOX);

	return h ? h : "";
}

/* Connect routes answer in Connect's shape; the plain ones ({"code":N,"message"}) in envd's. */
static void refuse(struct http_req *r, int status, const char *code, const char *msg)
{
	if (r->nseg == 2 && strchr(r->seg[0], '.')) {
		if (strcmp(r->seg[1], "Start") == 0 || strcmp(r->seg[1], "Connect") == 0 ||
		    strcmp(r->seg[1], "WatchDir") == 0)
			connect_stream_reply_error(r->req, code, "%s", msg);
		else
			connect_reply_error(r->req, code, "%s", msg);
		return;
	}
	e2b_reply_error(r->req, status, "%s", msg);
}

int envd_auth(struct http_req *r)
{
	struct evkeyvalq *h = evhttp_request_get_input_headers(r->req);
	const char *id = e2b_sandbox_id(r);
	const char *tok = evhttp_find_header(h, "X-Access-Token");
	space_err err = { 0 };
	struct sandbox *sb;

	if (!tok)
		tok = evhttp_find_header(h, "E2B-Traffic-Access-Token");
	/* envd's /health answers without a token, as envd does; it says only whether the
	 * sandbox runs (the handler answers 502 for one that does not). */
	if (r->nseg == 1 && strcmp(r->seg[0], "health") == 0)
		return 0;
	if (!*id) {
		refuse(r, 400, "invalid_argument", "missing E2b-Sandbox-Id header (set E2B_SANDBOX_URL to SPACE's data plane)");
		return -1;
	}
	/* An unknown sandbox is what E2B's edge answers 502 for: the SDK reads it as "not running". */
	sb = id_valid(id, "sb-") ? sandbox_find(r->d, id) : NULL;
	if (!sb || !sandbox_visible(sandbox_record(sb))) {
		refuse(r, 502, "unavailable", "sandbox not found or not running");
		return -1;
	}
	if (!tok) {
		refuse(r, 401, "unauthenticated", "missing X-Access-Token (the envdAccessToken of this sandbox)");
		return -1;
	}
	if (token_check(r->d, id, TOKEN_SCOPE_ENVD, tok, &err) < 0) {
		if (err.code == EAGAIN)
			refuse(r, 503, "unavailable", err.msg);
		else
			refuse(r, 401, "unauthenticated", "invalid access token");
		return -1;
	}
	return 0;
}
