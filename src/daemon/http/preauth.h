/* preauth.h -- a request's credentials checked from its head, before evhttp reads a byte of its
 * body, and the budget of body bytes in flight for requests whose credentials are not known yet
 * (internal to http/: the stream filter calls it; docs/design/http.md "Before the body"). */
#ifndef SPACE_HTTP_PREAUTH_H
#define SPACE_HTTP_PREAUTH_H

#include <stddef.h>
#include <stdint.h>

#include "http.h"

enum http_preauth {
	HTTP_PREAUTH_AUTHED,   /* read the body */
	HTTP_PREAUTH_BUDGETED, /* read it: its bytes are held against the budget until the reply */
	HTTP_PREAUTH_REFUSED,  /* do not read it: the credentials are missing or wrong */
	HTTP_PREAUTH_BUSY,     /* do not read it: the budget is spent (the client retries) */
};

/* head: the whole head (request line, header lines, the empty line), n bytes, already checked
 * to be in the filter's strict subset; target its request target; body_len the Content-Length
 * (UINT64_MAX: chunked). c: the connection (NULL: not admitted yet, then no budget applies). */
enum http_preauth http_preauth(const struct http_plane *plane, struct http_conn *c, const char *head, size_t n,
			       enum evhttp_cmd_type method, const char *target, size_t target_len, uint64_t body_len);

/* The head's header lines as an evkeyvalq (name and value trimmed), for the plane's check
 * (pure; unit-tested). -1 when out of memory. */
int http_head_headers(const char *head, size_t n, struct evkeyvalq *out);

#endif
