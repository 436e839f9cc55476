/* envd_auth.c -- which data-plane requests are E2B's (envd and the code interpreter), the
 * sandbox their E2b-Sandbox-Id header names, the envd token that must open it, and the user
 * they act as */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>

#include "daemon.h"
#include "e2b.h"
#include "connect.h"
#include "front/front.h"
#include "sandbox/sandbox.h"
#include "sandbox/spec.h"

#define HDR_SANDBOX "E2b-Sandbox-Id"

const char *e2b_sandbox_id(const struct http_req *r)
{
	const char *h = evhttp_find_header(evhttp_request_get_input_headers(r->req), HDR_SANDBOX);

	return h ? h : "";
}

/* In the route's dialect (e2b_routes.c): Connect's shape on the RPCs (code: 401
 * unauthenticated, 503 unavailable), envd's ({"code":N,"message"}) on the plain ones. */
static void refuse(struct http_req *r, int status, const char *code, const char *msg)
{
	http_req_error(r, status, code, "%s", msg);
}

static void refuse_token(struct http_req *r, const space_err *err)
{
	if (err->code == EAGAIN)
		refuse(r, 503, "unavailable", err->msg);
	else
		refuse(r, 401, "unauthenticated", "invalid access token");
}

/* The envd token a request carries (the code interpreter's SDK sends only the traffic one). */
static const char *access_token(struct evkeyvalq *h)
{
	const char *tok = evhttp_find_header(h, "X-Access-Token");

	return tok ? tok : evhttp_find_header(h, "E2B-Traffic-Access-Token");
}

/* A token this process has not seen: its row is read on the store's thread. */
static int envd_verdict(struct http_req *r, void *arg)
{
	space_err err = { 0 };

	if (token_job_verdict(r->d, arg, &err) < 0) {
		refuse_token(r, &err);
		return -1;
	}
	return 0;
}

int envd_auth(struct http_req *r)
{
	struct evkeyvalq *h = evhttp_request_get_input_headers(r->req);
	const char *id = e2b_sandbox_id(r);
	const char *tok = access_token(h);
	space_err err = { 0 };
	struct token_job *q;
	struct token_row row;
	struct sandbox *sb;
	int rc;

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
	rc = token_check(r->d, id, TOKEN_SCOPE_ENVD, tok, &row, &err);
	if (rc < 0) {
		refuse_token(r, &err);
		return -1;
	}
	if (rc == 0)
		return 0;
	if (!(q = token_job_new(id, TOKEN_SCOPE_ENVD, &row))) {
		refuse(r, 500, "internal", "out of memory");
		return -1;
	}
	return api_step_read(r, token_job_read, envd_verdict, free, q);
}

enum http_head_verdict envd_head_auth(struct http_req *r, struct evkeyvalq *hdrs)
{
	const char *id = evhttp_find_header(hdrs, HDR_SANDBOX), *tok = access_token(hdrs);
	struct sandbox *sb;
	struct token_row row;
	space_err err = { 0 };
	int rc;

	sb = id && tok && id_valid(id, "sb-") ? sandbox_find(r->d, id) : NULL;
	if (!sb || !sandbox_visible(sandbox_record(sb)))
		return HTTP_HEAD_REFUSED; /* what envd_auth answers 401 or 502 */
	rc = token_check(r->d, id, TOKEN_SCOPE_ENVD, tok, &row, &err);
	return rc == 0 ? HTTP_HEAD_AUTHED : rc > 0 ? HTTP_HEAD_UNKNOWN : HTTP_HEAD_REFUSED;
}

/* ---- base64 ---- */

static int b64_val(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '-')
		return 62;
	if (c == '/' || c == '_')
		return 63;
	return -1;
}

ssize_t envd_b64_decode(const char *in, size_t len, uint8_t *out)
{
	uint32_t acc = 0;
	size_t n = 0, bits = 0, i;

	while (len && in[len - 1] == '=')
		len--;
	if (len % 4 == 1)
		return -1;
	for (i = 0; i < len; i++) {
		int v = b64_val((unsigned char)in[i]);

		if (v < 0)
			return -1;
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[n++] = (uint8_t)(acc >> bits);
		}
	}
	return (ssize_t)n;
}

int envd_basic_user(const char *h, char *out, size_t cap, space_err *err)
{
	uint8_t raw[256];
	ssize_t n;
	char *colon;

	out[0] = '\0';
	if (!h || !*h)
		return 0;
	if (strncasecmp(h, "Basic ", 6) != 0)
		return err_set(err, EINVAL, "Authorization must be Basic base64(\"<user>:\")");
	h += 6;
	while (*h == ' ')
		h++;
	if (strlen(h) > 4 * (sizeof(raw) - 3) / 3 || (n = envd_b64_decode(h, strlen(h), raw)) < 0)
		return err_set(err, EINVAL, "Authorization: malformed Basic credentials");
	raw[n] = '\0';
	if (memchr(raw, '\0', (size_t)n))
		return err_set(err, EINVAL, "Authorization: malformed Basic credentials");
	colon = strchr((char *)raw, ':');
	if (colon)
		*colon = '\0';
	if (strlen((char *)raw) >= cap)
		return err_set(err, EINVAL, "Authorization: the user name is too long");
	snprintf(out, cap, "%s", (char *)raw);
	return 0;
}

int envd_user(struct http_req *r, bool query, char user[ENVD_USER_MAX], space_err *err)
{
	const char *h = evhttp_find_header(evhttp_request_get_input_headers(r->req), "Authorization");
	const char *q = query ? http_query(r, "username") : NULL;

	if (envd_basic_user(h, user, ENVD_USER_MAX, err) < 0)
		return -1;
	if (!user[0] && q && *q) {
		if (strlen(q) >= ENVD_USER_MAX)
			return err_set(err, EINVAL, "user name too long");
		snprintf(user, ENVD_USER_MAX, "%s", q);
	}
	if (user[0] && spec_check_user(user, err) < 0)
		return -1;
	return 0;
}
