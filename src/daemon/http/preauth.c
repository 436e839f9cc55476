/* preauth.c -- before evhttp reads a request's body, its plane's head check says whether the
 * credentials in its head are good, wrong, or not known from memory; the last kind's bodies are
 * read only within a budget of bytes in flight, per daemon and per client address (conn.c keeps
 * the count). So a client that has not authenticated can make the daemon hold at most that
 * budget, however many connections it opens (docs/design/http.md "Before the body"). */
#include "preauth.h"

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>


int http_head_headers(const char *head, size_t n, struct evkeyvalq *out)
{
	const char *p = memchr(head, '\n', n), *end = head + n;

	TAILQ_INIT(out);
	while (p && ++p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end, *colon;
		char *name, *value;
		size_t vl;

		while (le > p && (le[-1] == '\r'))
			le--;
		if (le == p)
			break; /* the empty line */
		colon = memchr(p, ':', (size_t)(le - p));
		if (colon) {
			const char *v = colon + 1;

			while (v < le && (*v == ' ' || *v == '\t'))
				v++;
			vl = (size_t)(le - v);
			while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
				vl--;
			name = strndup(p, (size_t)(colon - p));
			value = strndup(v, vl);
			if (!name || !value || evhttp_add_header(out, name, value) < 0) {
				free(name);
				free(value);
				evhttp_clear_headers(out);
				return -1;
			}
			free(name);
			free(value);
		}
		p = nl;
	}
	return 0;
}

/* The request as a router sees it, from the head alone: what the plane's check gets. */
static enum http_head_verdict head_verdict(const struct http_plane *plane, const char *head, size_t n,
					   enum evhttp_cmd_type method, const char *target, size_t target_len)
{
	struct evkeyvalq hdrs;
	struct evhttp_uri *uri = NULL;
	struct http_req *r = calloc(1, sizeof(*r));
	char *t = strndup(target, target_len);
	enum http_head_verdict v = HTTP_HEAD_REFUSED;
	const struct http_route *route = NULL;

	if (!r || !t || http_head_headers(head, n, &hdrs) < 0) {
		free(r);
		free(t);
		return HTTP_HEAD_UNKNOWN; /* out of memory: the budget still bounds it */
	}
	TAILQ_INIT(&r->query);
	r->d = plane->d;
	r->method = method;
	r->plane = plane;
	r->max_body = plane->max_body;
	uri = evhttp_uri_parse_with_flags(t, EVHTTP_URI_NONCONFORMANT);
	if (uri && http_split_path(r, evhttp_uri_get_path(uri)) == 0) {
		const char *q = evhttp_uri_get_query(uri);

		if (http_route_find(plane->routes, plane->nroutes, r, &route, NULL, 0) == HTTP_MATCH)
			r->next = route->fn;
		else
			route = NULL;
		/* a node: its api processes bound what they relay; nobody else gets in */
		if (plane->peer_key && !(plane->peer_exempt && plane->peer_exempt(r)))
			v = http_peer_ok(plane, &hdrs) ? HTTP_HEAD_AUTHED : HTTP_HEAD_REFUSED;
		else if (!q || !*q || evhttp_parse_query_str(q, &r->query) == 0)
			v = route && route->head_auth ? route->head_auth(r, &hdrs) : plane->head_auth(r, &hdrs);
	}
	if (uri)
		evhttp_uri_free(uri);
	evhttp_clear_headers(&hdrs);
	evhttp_clear_headers(&r->query);
	free(r);
	free(t);
	return v;
}

enum http_preauth http_preauth(const struct http_plane *plane, struct http_conn *c, const char *head, size_t n,
			       enum evhttp_cmd_type method, const char *target, size_t target_len, uint64_t body_len)
{
	uint64_t need;

	switch (head_verdict(plane, head, n, method, target, target_len)) {
	case HTTP_HEAD_AUTHED:
		return HTTP_PREAUTH_AUTHED;
	case HTTP_HEAD_REFUSED:
		return HTTP_PREAUTH_REFUSED;
	case HTTP_HEAD_UNKNOWN:
		break;
	}
	/* What evhttp will hold of it: a body over the plane's limit is refused from its
	 * Content-Length before it is read; a chunked one is cut at the limit. */
	need = body_len < plane->max_body ? body_len : plane->max_body;
	if (!c || http_conn_unauth_take(c, need))
		return HTTP_PREAUTH_BUDGETED;
	return HTTP_PREAUTH_BUSY;
}
