/* http.c -- listener setup, routing, JSON replies and auth helpers shared by both HTTP planes */
#include "http.h"

#include <ctype.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http_struct.h>
#include <netdb.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cleanup.h"
#include "daemon.h"
#include "log.h"
#include "metrics/metrics.h"
#include "stream.h"

/* libevent's hard cap on a body is our limit itself: evhttp refuses a larger
 * Content-Length with its own 413 before it reads a byte of the body, and
 * libevent 2.1 offers no hook to authenticate between headers and body, so
 * an unauthenticated client can make us buffer at most the limit. */
#define BODY_CAP(max) (max)
/* While a request is held, pipelined input is buffered up to this much
 * (then reading pauses) so a client cannot grow our memory. */
#define HOLD_READ_HIGH (64u << 10)

int http_timeout_s = HTTP_TIMEOUT_S;

/* ---- listener ---- */

int http_parse_addr(const char *s, char *host, size_t hostlen, uint16_t *port, space_err *err)
{
	const char *colon, *h = s, *p;
	size_t hl;
	uint64_t v;

	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (!close || close[1] != ':')
			return err_set(err, EINVAL, "bad listen address '%s' (want [ADDR]:PORT)", s);
		h = s + 1;
		hl = (size_t)(close - h);
		p = close + 2;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return err_set(err, EINVAL, "bad listen address '%s' (want ADDR:PORT)", s);
		hl = (size_t)(colon - s);
		p = colon + 1;
	}
	if (hl >= hostlen)
		return err_set(err, EINVAL, "listen address '%s' is too long", s);
	if (http_parse_u64(p, &v) < 0 || v > 65535)
		return err_set(err, EINVAL, "bad port in listen address '%s'", s);
	memcpy(host, h, hl);
	host[hl] = '\0';
	*port = (uint16_t)v;
	return 0;
}

static void dispatch(struct evhttp_request *req, void *arg);

static int bind_listener(const char *addr_port, space_err *err)
{
	struct addrinfo hints = { .ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL, *ai;
	char host[256], portstr[8];
	uint16_t port;
	int rc, fd = -1, saved = 0;
	const char *what = "bind";

	if (http_parse_addr(addr_port, host, sizeof(host), &port, err) < 0)
		return -1;
	snprintf(portstr, sizeof(portstr), "%u", port);
	rc = getaddrinfo(host[0] ? host : NULL, portstr, &hints, &res);
	if (rc != 0)
		return err_set(err, EINVAL, "listen address %s: %s", addr_port, gai_strerror(rc));
	for (ai = res; ai; ai = ai->ai_next) {
		int one = 1;
		fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			saved = errno;
			what = "socket";
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 1024) == 0)
			break;
		saved = errno;
		what = "bind";
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		if (saved == EADDRINUSE)
			return err_set(err, EADDRINUSE,
				       "listening on %s: address already in use (another spaced running?)",
				       addr_port);
		return err_sys(err, saved ? saved : EINVAL, "listening on %s: %s", addr_port, what);
	}
	return fd;
}

struct evhttp *http_listen(struct event_base *base, const char *addr_port, const struct http_plane *plane,
			   space_err *err)
{
	struct evhttp_bound_socket *bound;
	struct evhttp *http;
	int fd = bind_listener(addr_port, err);

	if (fd < 0)
		return NULL;
	http = evhttp_new(base);
	if (!http) {
		close(fd);
		err_set(err, ENOMEM, "listening on %s: evhttp_new failed", addr_port);
		return NULL;
	}
	/* Every method reaches the router, so a wrong one is our JSON 405
	 * rather than libevent's 501 page. */
	evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
						 EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
						 EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
	evhttp_set_max_body_size(http, (ev_ssize_t)BODY_CAP(plane->max_body));
	evhttp_set_max_headers_size(http, HTTP_MAX_HEADERS);
	evhttp_set_timeout(http, http_timeout_s);
	evhttp_set_gencb(http, dispatch, (void *)plane);
	bound = evhttp_accept_socket_with_handle(http, fd);
	if (!bound) {
		close(fd);
		evhttp_free(http);
		err_set(err, EIO, "listening on %s: evhttp_accept_socket failed", addr_port);
		return NULL;
	}
	if (plane->d->conns && http_conns_attach(plane->d->conns, http, bound, plane, err) < 0) {
		evhttp_free(http);
		return NULL;
	}
	log_info("%s: listening on %s", plane->name, addr_port);
	return http;
}

/* ---- routing ---- */

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int http_pct_decode(char *s)
{
	char *w = s;

	for (const char *p = s; *p; p++) {
		if (*p == '%') {
			int hi = hexval((unsigned char)p[1]), lo = hi < 0 ? -1 : hexval((unsigned char)p[2]);
			int c = hi * 16 + lo;
			if (hi < 0 || lo < 0 || c == 0 || c == '/')
				return -1;
			*w++ = (char)c;
			p += 2;
		} else {
			*w++ = *p;
		}
	}
	*w = '\0';
	return 0;
}

int http_split_path(struct http_req *r, const char *path)
{
	size_t len;
	char *p;

	r->nseg = 0;
	if (!path || path[0] != '/')
		return -1;
	len = strlen(path);
	if (len >= sizeof(r->path))
		return -1;
	memcpy(r->path, path + 1, len); /* includes the NUL */
	len--;
	if (len > 0 && r->path[len - 1] == '/')
		r->path[--len] = '\0';
	if (len == 0)
		return 0;
	for (p = r->path;;) {
		char *slash = strchr(p, '/');
		if (r->nseg == HTTP_MAX_SEGS)
			return -1;
		if (slash)
			*slash = '\0';
		if (http_pct_decode(p) < 0)
			return -2;
		r->seg[r->nseg++] = p;
		if (!slash)
			break;
		p = slash + 1;
	}
	return 0;
}

static bool pattern_match(const char *pat, const struct http_req *r, const char **params, int *np)
{
	const char *p = pat;
	int i = 0;

	*np = 0;
	if (*p == '/')
		p++;
	while (*p) {
		const char *end = strchrnul(p, '/');
		size_t n = (size_t)(end - p);
		if (i >= r->nseg)
			return false;
		if (n == 2 && p[0] == '{' && p[1] == '}') {
			if (*np == HTTP_MAX_PARAMS)
				return false;
			params[(*np)++] = r->seg[i];
		} else if (strlen(r->seg[i]) != n || memcmp(r->seg[i], p, n) != 0) {
			return false;
		}
		i++;
		p = *end ? end + 1 : end;
	}
	return i == r->nseg;
}

const char *http_method_name(enum evhttp_cmd_type m)
{
	switch (m) {
	case EVHTTP_REQ_GET: return "GET";
	case EVHTTP_REQ_POST: return "POST";
	case EVHTTP_REQ_HEAD: return "HEAD";
	case EVHTTP_REQ_PUT: return "PUT";
	case EVHTTP_REQ_DELETE: return "DELETE";
	case EVHTTP_REQ_OPTIONS: return "OPTIONS";
	case EVHTTP_REQ_TRACE: return "TRACE";
	case EVHTTP_REQ_CONNECT: return "CONNECT";
	case EVHTTP_REQ_PATCH: return "PATCH";
	}
	return "?";
}

enum http_match http_route_find(const struct http_route *routes, size_t n, struct http_req *r,
				const struct http_route **out, char *allow, size_t allowlen)
{
	const char *params[HTTP_MAX_PARAMS];
	unsigned seen = 0;
	bool path_known = false;
	int np;

	if (allow && allowlen)
		allow[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		if (!pattern_match(routes[i].pattern, r, params, &np))
			continue;
		if (routes[i].method == r->method) {
			memcpy(r->param, params, sizeof(params[0]) * (size_t)np);
			r->nparam = np;
			*out = &routes[i];
			return HTTP_MATCH;
		}
		path_known = true;
		if (allow && !(seen & routes[i].method)) {
			size_t used = strlen(allow);
			snprintf(allow + used, allowlen - used, "%s%s", used ? ", " : "",
				 http_method_name(routes[i].method));
			seen |= routes[i].method;
		}
	}
	return path_known ? HTTP_BAD_METHOD : HTTP_NO_ROUTE;
}

/* The reply is out: it is counted, the next request on this connection has the deadline, and
 * the stream filter reads the next request. */
static void request_done(struct evhttp_request *req, void *arg)
{
	struct http_sf *sf = http_conn_sf(arg);

	metrics_http_answered(http_conn_plane(arg), evhttp_request_get_response_code(req));
	http_conn_deadline_arm(arg);
	if (sf)
		http_sf_reply_done(sf);
}

/* The request is whole: its connection's deadline stops (a reply may be
 * held for long) and starts again once the reply has gone. */
static struct http_conn *conn_request_read(const struct http_plane *plane, struct evhttp_request *req)
{
	struct http_conn *c = http_conn_find(plane->d->conns, evhttp_request_get_connection(req));

	if (!c)
		return NULL;
	http_conn_deadline_stop(c);
	evhttp_request_set_on_complete_cb(req, request_done, c);
	return c;
}

static void req_free(struct http_req *r)
{
	evhttp_clear_headers(&r->query);
	free(r);
}

/* The late auth, the prepare step, the handler; a step that holds r (returns 1) comes back
 * through http_auth_done (possibly before it returns: the stage is set first). */
static void run_steps(struct http_req *r)
{
	const struct http_plane *plane = r->plane;
	int a;

	if (r->stage == 0) {
		r->stage = 1;
		int (*auth)(struct http_req *r) = r->route && r->route->auth ? r->route->auth : plane->auth;

		if (!plane->auth_first && auth && (a = auth(r)) != 0) {
			if (a < 0)
				req_free(r);
			return;
		}
	}
	if (r->stage == 1) {
		r->stage = 2;
		if (plane->prepare && (a = plane->prepare(r)) != 0) {
			if (a < 0)
				req_free(r);
			return;
		}
	}
	if (r->withheld) {
		/* The filter found the head's credentials wanting (preauth.c) but no step refused
		 * them: the handler must not run with a body that was never read. */
		http_req_error(r, 401, "unauthorized", "missing or invalid credentials (the request body was not "
							"read)");
		req_free(r);
		return;
	}
	r->next(r);
	req_free(r);
}

/* A request for the plane's Host front end: true when it was answered or handed on here. */
static bool host_route(const struct http_plane *plane, struct http_req *r)
{
	const char *host = evhttp_find_header(evhttp_request_get_input_headers(r->req), "Host");

	if (!r->taken && !(host && plane->host_takes(plane, host, strlen(host))))
		return false;
	if (!r->taken) {
		/* The filter could not read its head (outside the subset it takes, two Host lines...):
		 * evhttp may have read a body nobody checked, and the port it names is not answered. */
		evhttp_add_header(evhttp_request_get_output_headers(r->req), "Connection", "close");
		http_req_error(r, 400, "bad_request", "a request for a sandbox's port must be plain HTTP/1.x with one "
						      "Host header and a body framed by Content-Length or chunked");
		return true;
	}
	r->next = plane->host_handler;
	r->stage = 3; /* no plane auth or prepare step: the handler checks its own credentials */
	r->next(r);
	return true;
}

struct bufferevent *http_take_over(struct http_conns *cs, struct evhttp_request *req)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct http_conn *c = evcon ? http_conn_find(cs, evcon) : NULL;

	if (!c || !http_sf_release(http_conn_sf(c)))
		return NULL;
	return evhttp_connection_get_bufferevent(evcon);
}

static void dispatch(struct evhttp_request *req, void *arg)
{
	const struct http_plane *plane = arg;
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
	const char *query = uri ? evhttp_uri_get_query(uri) : NULL;
	const struct http_route *route = NULL;
	enum http_match m = HTTP_NO_ROUTE;
	struct http_req *r;
	char allow[64] = "";
	size_t len;
	int rc;

	/* ~2.5 KB: keep it off the event loop's stack. */
	r = calloc(1, sizeof(*r));
	if (!r) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	r->conn = conn_request_read(plane, req);
	/* Before anything can answer: a streaming body marks its reply (stream.h). */
	if (http_conn_sf(r->conn))
		r->body = http_sf_dispatch(r->conn, req, &r->withheld, &r->taken);
	TAILQ_INIT(&r->query);
	r->d = plane->d;
	r->req = req;
	r->method = evhttp_request_get_command(req);
	r->max_body = plane->max_body;
	r->plane = plane;

	/* The route is looked up first (pure) so that every answer, refusals before routing
	 * included, takes its front end's shape; what it found is acted on after the auth. */
	rc = http_split_path(r, path);
	if (rc == 0)
		m = http_route_find(plane->routes, plane->nroutes, r, &route, allow, sizeof(allow));
	r->route = m == HTTP_MATCH ? route : NULL;
	r->dialect = r->route ? r->route->dialect : rc == 0 ? http_prefix_dialect(plane, r) : NULL;
	if (r->withheld == 429) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
		http_req_error(r, 429, "at_capacity", "too many request bodies of clients not yet authenticated "
						      "are in flight; retry later");
		goto out;
	}
	if (rc == -2) {
		http_req_error(r, 400, "bad_request", "bad percent-encoding in the path");
		goto out;
	}
	if (log_enabled(LOG_DEBUG)) {
		char shown[512];
		http_redact_uri(evhttp_request_get_uri(req), shown, sizeof(shown));
		log_debug("%s: %s %s", plane->name, http_method_name(r->method), shown);
	}
	if (query && *query && evhttp_parse_query_str(query, &r->query) < 0) {
		http_req_error(r, 400, "bad_request", "malformed query string");
		goto out;
	}
	if (plane->peer_key && !(plane->peer_exempt && plane->peer_exempt(r)) &&
	    !http_peer_ok(plane, evhttp_request_get_input_headers(req))) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
		http_req_error(r, 401, "unauthorized", "this node serves its cluster's api processes only (%s)",
			       HTTP_PEER_HEADER);
		goto out;
	}
	if (plane->host_takes && host_route(plane, r))
		goto out;
	if (plane->auth_first && plane->auth && plane->auth(r) < 0)
		goto out;
	switch (m) {
	case HTTP_NO_ROUTE:
		http_req_error(r, 404, "not_found", "no such route: %s %s", http_method_name(r->method),
			       path ? path : "");
		goto out;
	case HTTP_BAD_METHOD:
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
		http_req_error(r, 405, "method_not_allowed", "%s is not allowed here (allowed: %s)",
			       http_method_name(r->method), allow);
		goto out;
	case HTTP_MATCH:
		break;
	}
	len = evbuffer_get_length(evhttp_request_get_input_buffer(req));
	if (len > plane->max_body) {
		http_req_error(r, 413, "payload_too_large", "request body of %zu bytes is over the limit of %zu", len,
			       plane->max_body);
		goto out;
	}
	r->next = route->fn;
	run_steps(r);
	return;
out:
	req_free(r);
}

bool http_peer_ok(const struct http_plane *plane, struct evkeyvalq *hdrs)
{
	const char *v = evhttp_find_header(hdrs, HTTP_PEER_HEADER);

	if (!plane->peer_key)
		return true;
	return v && plane->peer_key[0] && http_secret_equal(v, plane->peer_key);
}

void http_auth_done(struct http_req *r, bool go_on)
{
	if (go_on)
		run_steps(r);
	else
		req_free(r);
}

/* ---- requests ---- */

json_t *http_parse_json_object(const char *buf, size_t len, space_err *err)
{
	json_error_t je;
	json_t *j;

	if (len == 0)
		return json_object();
	j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (!j) {
		/* jansson quotes the text near the error ("... near 'sk-live-'"): left out, so
		 * that an answer never carries a piece of a body that may hold a secret. */
		char *near = strstr(je.text, " near ");
		if (near)
			*near = '\0';
		err_set(err, EINVAL, "malformed JSON at line %d col %d: %s", je.line, je.column, je.text);
		return NULL;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		err_set(err, EINVAL, "request body must be a JSON object");
		return NULL;
	}
	return j;
}

json_t *http_body_json(struct http_req *r)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(r->req);
	size_t len = evbuffer_get_length(in);
	space_err err = { 0 };
	const char *data;
	json_t *j;

	if (len > r->max_body) {
		http_req_error(r, 413, "payload_too_large", "request body of %zu bytes is over the limit of %zu", len,
			       r->max_body);
		return NULL;
	}
	data = len ? (const char *)evbuffer_pullup(in, -1) : "";
	if (!data) {
		http_reply_error(r->req, 500, "internal", "out of memory reading the body");
		return NULL;
	}
	j = http_parse_json_object(data, len, &err);
	if (!j)
		http_reply_err(r->req, &err);
	return j;
}

const char *http_query(struct http_req *r, const char *key)
{
	return evhttp_find_header(&r->query, key);
}

int http_bearer(const char *h, char *out, size_t outlen)
{
	size_t n;

	if (!h || strncasecmp(h, "Bearer", 6) != 0 || (h[6] != ' ' && h[6] != '\t'))
		return -1;
	h += 6;
	while (*h == ' ' || *h == '\t')
		h++;
	n = strcspn(h, " \t\r\n");
	if (n == 0 || n >= outlen || h[n + strspn(h + n, " \t")] != '\0')
		return -1;
	memcpy(out, h, n);
	out[n] = '\0';
	return 0;
}

bool http_secret_equal(const char *a, const char *b)
{
	unsigned char ha[SHA256_DIGEST_LENGTH], hb[SHA256_DIGEST_LENGTH];

	if (!a || !b)
		return false;
	SHA256((const unsigned char *)a, strlen(a), ha);
	SHA256((const unsigned char *)b, strlen(b), hb);
	return CRYPTO_memcmp(ha, hb, sizeof(ha)) == 0;
}

static void append(char *out, size_t *w, size_t outlen, const char *s, size_t n)
{
	while (n-- && *w + 1 < outlen)
		out[(*w)++] = *s++;
}

/* Whether a query key names the token the way the data plane reads it:
 * percent-decoded and compared ignoring case (evhttp_find_header). */
static bool key_is_token(const char *k, size_t n)
{
	char key[16];

	if (n >= sizeof(key))
		return false;
	memcpy(key, k, n);
	key[n] = '\0';
	return http_pct_decode(key) == 0 && strcasecmp(key, "token") == 0;
}

void http_redact_uri(const char *uri, char *out, size_t outlen)
{
	static const char mask[] = "REDACTED";
	const char *p = uri ? uri : "", *q = strchr(p, '?');
	size_t w = 0;

	if (!outlen)
		return;
	append(out, &w, outlen, p, q ? (size_t)(q - p) + 1 : strlen(p));
	for (p = q ? q + 1 : ""; *p;) {
		size_t pair = strcspn(p, "&#"), klen = strcspn(p, "=&#");

		if (klen < pair && key_is_token(p, klen)) {
			append(out, &w, outlen, p, klen + 1);
			append(out, &w, outlen, mask, sizeof(mask) - 1);
		} else {
			append(out, &w, outlen, p, pair);
		}
		p += pair;
		if (*p == '#') {
			append(out, &w, outlen, p, strlen(p));
			break;
		}
		if (*p == '&')
			append(out, &w, outlen, p++, 1);
	}
	out[w] = '\0';
}

int http_parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!s || !*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return 0;
}

/* ---- replies ---- */

json_t *http_error_body(const char *code, const char *message)
{
	json_t *msg = json_string(message);

	if (!msg) {
		/* Not UTF-8 (a client's bytes echoed back): keep it printable ASCII. */
		char clean[1024];
		size_t i;
		for (i = 0; message[i] && i < sizeof(clean) - 1; i++) {
			unsigned char c = (unsigned char)message[i];
			clean[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
		}
		clean[i] = '\0';
		msg = json_string(clean);
	}
	return json_pack("{s:{s:s,s:o}}", "error", "code", code, "message", msg);
}

void http_reply_json(struct evhttp_request *req, int status, json_t *j)
{
	struct evbuffer *buf;
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

	json_decref(j);
	if (!s) {
		evhttp_send_error(req, 500, "out of memory");
		return;
	}
	buf = evbuffer_new();
	if (!buf || evbuffer_add(buf, s, strlen(s)) < 0 || evbuffer_add(buf, "\n", 1) < 0) {
		free(s);
		if (buf)
			evbuffer_free(buf);
		evhttp_send_error(req, 500, "out of memory");
		return;
	}
	free(s);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
	evhttp_add_header(evhttp_request_get_output_headers(req), "Cache-Control", "no-store");
	evhttp_send_reply(req, status, NULL, buf);
	evbuffer_free(buf);
}

void http_reply_error(struct evhttp_request *req, int status, const char *code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (status >= 500)
		log_warn("%d %s: %s", status, code, msg);
	if (status == 401)
		evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate", "Bearer");
	http_reply_json(req, status, http_error_body(code, msg));
}

void http_dialect_error(const struct http_dialect *dl, struct evhttp_request *req, int status, const char *code,
			const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!dl || !dl->reply_error) {
		http_reply_error(req, status, code, "%s", msg);
		return;
	}
	if (status >= 500)
		log_warn("%d %s: %s", status, code, msg);
	dl->reply_error(req, status, code, msg);
}

void http_dialect_err(const struct http_dialect *dl, struct evhttp_request *req, const space_err *e)
{
	int code = e->code ? e->code : EIO;

	http_dialect_error(dl, req, err_http_status(code), err_code_name(code), "%s",
			   e->msg[0] ? e->msg : strerror(code));
}

void http_req_error(struct http_req *r, int status, const char *code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	http_dialect_error(r->dialect, r->req, status, code, "%s", msg);
}

void http_req_err(struct http_req *r, const space_err *e)
{
	http_dialect_err(r->dialect, r->req, e);
}

const struct http_dialect *http_prefix_dialect(const struct http_plane *plane, const struct http_req *r)
{
	if (r->nseg < 1)
		return NULL;
	for (size_t i = 0; i < plane->nprefixes; i++)
		if (strcmp(plane->prefixes[i].seg, r->seg[0]) == 0)
			return plane->prefixes[i].dialect;
	return NULL;
}

void http_reply_err(struct evhttp_request *req, const space_err *e)
{
	int code = e->code ? e->code : EIO;

	http_reply_error(req, err_http_status(code), err_code_name(code), "%s",
			 e->msg[0] ? e->msg : strerror(code));
}

void http_reply_empty(struct evhttp_request *req, int status)
{
	evhttp_send_reply(req, status, NULL, NULL);
}

/* evhttp frames a streamed reply to HTTP/1.1 as chunks; to an HTTP/1.0 client that asked for
 * keep-alive it would send `Content-Length: 0` and then the stream unframed, so whatever the
 * stream carries (a guest's bytes) would be read as the next replies. Such a client gets the
 * stream delimited by the connection's close instead (its Connection header is dropped, which
 * is what evhttp consults both when it writes the head and when the reply ends). */
void http_reply_start(struct evhttp_request *req, int status, const char *reason)
{
	struct evkeyvalq *out = evhttp_request_get_output_headers(req);

	if ((req->major < 1 || (req->major == 1 && req->minor < 1)) && !evhttp_find_header(out, "Content-Length")) {
		evhttp_remove_header(evhttp_request_get_input_headers(req), "Connection");
		evhttp_remove_header(out, "Connection");
	}
	evhttp_send_reply_start(req, status, reason);
}

/* ---- held requests ---- */

void http_hold_gone(struct http_hold *h)
{
	if (!h->active)
		return;
	h->active = false;
	/* On EOF or timeout libevent detaches a request the user has not
	 * finished and leaves it to us; otherwise it frees it with the
	 * connection right after this callback. */
	if (evhttp_request_get_connection(h->req) == NULL)
		evhttp_request_free(h->req);
	h->req = NULL;
	h->evcon = NULL;
	h->conn = NULL;
	h->on_gone(h);
}

/* Untracked connections only (conn.c could not allocate its record). */
static void hold_closed(struct evhttp_connection *evcon, void *arg)
{
	evhttp_connection_set_closecb(evcon, NULL, NULL);
	http_hold_gone(arg);
}

void http_hold_begin(struct http_hold *h, struct evhttp_request *req, void (*on_gone)(struct http_hold *h),
		     struct http_conns *cs)
{
	struct timeval tv = { .tv_sec = http_timeout_s };
	bufferevent_data_cb rcb, wcb;
	bufferevent_event_cb ecb;
	struct bufferevent *bev;
	void *cbarg;

	h->req = req;
	h->evcon = evhttp_request_get_connection(req);
	h->on_gone = on_gone;
	h->active = true;
	h->conn = http_conn_find(cs, h->evcon);
	bev = evhttp_connection_get_bufferevent(h->evcon);
	/* evhttp stops reading once a request is complete, so it would notice
	 * a client hanging up only when a write fails. Read again, as evhttp
	 * itself does while it writes a reply: with no read callback (evhttp's
	 * would abort on pipelined bytes in this state), so EOF reaches evhttp's
	 * error callback, which frees the connection and calls closecb. */
	bufferevent_getcb(bev, &rcb, &wcb, &ecb, &cbarg);
	bufferevent_setcb(bev, NULL, wcb, ecb, cbarg);
	bufferevent_setwatermark(bev, EV_READ, 0, HOLD_READ_HIGH);
	bufferevent_set_timeouts(bev, NULL, &tv);
	bufferevent_enable(bev, EV_READ);
	if (h->conn)
		http_conn_set_hold(h->conn, h);
	else
		evhttp_connection_set_closecb(h->evcon, hold_closed, h);
}

void http_hold_end(struct http_hold *h)
{
	struct timeval tv = { .tv_sec = http_timeout_s };
	struct bufferevent *bev;

	if (!h->active)
		return;
	h->active = false;
	if (h->conn)
		http_conn_set_hold(h->conn, NULL);
	else
		evhttp_connection_set_closecb(h->evcon, NULL, NULL);
	bev = evhttp_connection_get_bufferevent(h->evcon);
	bufferevent_setwatermark(bev, EV_READ, 0, 0);
	bufferevent_set_timeouts(bev, &tv, &tv);
}
