/* port_rw.c -- each request a client sends to a port, written again for the guest: hop-by-hop
 * headers and SPACE's credentials dropped, X-Forwarded-* set, the body framed as it came
 * (ports_front.h) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/proxy.h"
#include "ports_front.h"

#define URL_MAX (16u << 10)
#define FIELD_MAX 256u

/* Headers the guest never gets as the client sent them. */
static bool dropped(const char *name)
{
	static const char *const drop[] = {
		"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization", "TE", "Trailer",
		"Transfer-Encoding", "Upgrade", "Content-Length", "X-Forwarded-For", "X-Forwarded-Proto",
		"X-Forwarded-Host", "Forwarded", PORT_TOKEN_HEADER, PORT_E2B_TRAFFIC_HEADER, HTTP_PEER_HEADER,
		"X-Space-Body-Stream",
	};

	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
		if (strcasecmp(name, drop[i]) == 0)
			return true;
	return false;
}

static int stop(struct port_rw *rw, const char *why)
{
	rw->status = PORT_RW_STOP;
	snprintf(rw->why, sizeof(rw->why), "%s", why);
	return -1;
}

/* The Cookie header without PORT_COOKIE; false when nothing is left. */
static bool cookie_without(struct evbuffer *out, const char *v)
{
	bool any = false;

	while (*v) {
		const char *end = strchr(v, ';');
		size_t n = end ? (size_t)(end - v) : strlen(v);

		while (n && (*v == ' ' || *v == '\t'))
			v++, n--;
		if (n && !(n > strlen(PORT_COOKIE) && strncmp(v, PORT_COOKIE "=", strlen(PORT_COOKIE) + 1) == 0)) {
			evbuffer_add_printf(out, "%s%.*s", any ? "; " : "", (int)n, v);
			any = true;
		}
		v = end ? end + 1 : v + n;
	}
	return any;
}

/* One header line, whole: kept, rewritten or dropped. */
static int header_done(struct port_rw *rw)
{
	size_t fl = evbuffer_get_length(rw->field), vl = evbuffer_get_length(rw->value);
	char *f, *v;

	if (!fl)
		return 0;
	evbuffer_add(rw->field, "", 1);
	evbuffer_add(rw->value, "", 1);
	f = (char *)evbuffer_pullup(rw->field, -1);
	v = (char *)evbuffer_pullup(rw->value, -1);
	if (!f || !v)
		return stop(rw, "out of memory");
	if (memchr(v, '\0', vl) || memchr(v, '\r', vl) || memchr(v, '\n', vl))
		return stop(rw, "a header value with a control byte");
	if (strcasecmp(f, "Host") == 0) {
		rw->nhost++;
		rw->host_ok = strcasecmp(v, rw->host) == 0;
	}
	if (strcasecmp(f, "Upgrade") == 0)
		snprintf(rw->upgrade, sizeof(rw->upgrade), "%s", v);
	if (!dropped(f) && !(rw->api_key[0] && (strstr(v, rw->api_key) || strstr(f, rw->api_key)))) {
		if (strcasecmp(f, "Cookie") == 0) {
			struct evbuffer *c = evbuffer_new();

			if (!c)
				return stop(rw, "out of memory");
			if (cookie_without(c, v)) {
				evbuffer_add_printf(rw->hdrs, "%s: ", f);
				evbuffer_add_buffer(rw->hdrs, c);
				evbuffer_add(rw->hdrs, "\r\n", 2);
			}
			evbuffer_free(c);
		} else {
			evbuffer_add_printf(rw->hdrs, "%s: %s\r\n", f, v);
		}
	}
	evbuffer_drain(rw->field, fl + 1);
	evbuffer_drain(rw->value, vl + 1);
	return 0;
}

static struct port_rw *of(http_parser *p)
{
	return p->data;
}

static int on_begin(http_parser *p)
{
	struct port_rw *rw = of(p);

	evbuffer_drain(rw->url, evbuffer_get_length(rw->url));
	evbuffer_drain(rw->field, evbuffer_get_length(rw->field));
	evbuffer_drain(rw->value, evbuffer_get_length(rw->value));
	evbuffer_drain(rw->hdrs, evbuffer_get_length(rw->hdrs));
	rw->in_value = rw->in_body = rw->chunked = rw->host_ok = false;
	rw->nhost = 0;
	rw->upgrade[0] = '\0';
	rw->head_bytes = 0;
	return 0;
}

static int grow(struct port_rw *rw, size_t n)
{
	rw->head_bytes += n;
	return rw->head_bytes > HTTP_MAX_HEADERS ? stop(rw, "a request head over the limit") : 0;
}

static int on_url(http_parser *p, const char *at, size_t n)
{
	struct port_rw *rw = of(p);

	if (grow(rw, n) < 0 || evbuffer_get_length(rw->url) + n > URL_MAX)
		return stop(rw, "a request target over the limit");
	evbuffer_add(rw->url, at, n);
	return 0;
}

static int on_field(http_parser *p, const char *at, size_t n)
{
	struct port_rw *rw = of(p);

	if (rw->in_body) /* a trailer: not passed on */
		return 0;
	if (rw->in_value) {
		rw->in_value = false;
		if (header_done(rw) < 0)
			return -1;
	}
	if (grow(rw, n) < 0 || evbuffer_get_length(rw->field) + n > FIELD_MAX)
		return stop(rw, "a header name over the limit");
	evbuffer_add(rw->field, at, n);
	return 0;
}

static int on_value(http_parser *p, const char *at, size_t n)
{
	struct port_rw *rw = of(p);

	if (rw->in_body)
		return 0;
	rw->in_value = true;
	if (grow(rw, n) < 0)
		return -1;
	evbuffer_add(rw->value, at, n);
	return 0;
}

static int on_headers(http_parser *p)
{
	struct port_rw *rw = of(p);
	struct evbuffer *out = rw->out;

	if (rw->in_value && header_done(rw) < 0)
		return -1;
	rw->in_value = false;
	if (rw->nhost != 1 || !rw->host_ok)
		return stop(rw, "a request on this connection for another host");
	if (p->method == HTTP_CONNECT)
		return stop(rw, "CONNECT to a sandbox's port");
	if (p->http_major != 1)
		return stop(rw, "a request that is not HTTP/1.x");
	if (rw->requests && rw->allow && !rw->allow(rw->allow_arg))
		return stop(rw, "the credential that opened this connection no longer opens the port");
	evbuffer_add_printf(out, "%s ", http_method_str((enum http_method)p->method));
	evbuffer_add_buffer(out, rw->url);
	evbuffer_add_printf(out, " HTTP/1.%u\r\n", p->http_minor > 1 ? 1 : p->http_minor);
	evbuffer_add_buffer(out, rw->hdrs);
	evbuffer_add_printf(out, "X-Forwarded-For: %s\r\nX-Forwarded-Proto: %s\r\nX-Forwarded-Host: %s\r\n",
			    rw->peer, rw->proto, rw->host);
	rw->chunked = (p->flags & F_CHUNKED) != 0;
	if (rw->chunked)
		evbuffer_add_printf(out, "Transfer-Encoding: chunked\r\n");
	else if (p->content_length != ULLONG_MAX && p->content_length > 0)
		evbuffer_add_printf(out, "Content-Length: %llu\r\n", (unsigned long long)p->content_length);
	else if (p->method == HTTP_POST || p->method == HTTP_PUT || p->method == HTTP_PATCH)
		evbuffer_add_printf(out, "Content-Length: 0\r\n");
	if (p->upgrade && rw->upgrade[0])
		evbuffer_add_printf(out, "Connection: Upgrade\r\nUpgrade: %s\r\n", rw->upgrade);
	else if (!http_should_keep_alive(p))
		evbuffer_add_printf(out, "Connection: close\r\n");
	evbuffer_add(out, "\r\n", 2);
	rw->in_body = true;
	rw->requests++;
	return 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
	struct port_rw *rw = of(p);

	if (rw->chunked)
		evbuffer_add_printf(rw->out, "%zx\r\n", n);
	evbuffer_add(rw->out, at, n);
	if (rw->chunked)
		evbuffer_add(rw->out, "\r\n", 2);
	return 0;
}

static int on_complete(http_parser *p)
{
	struct port_rw *rw = of(p);

	if (rw->chunked)
		evbuffer_add(rw->out, "0\r\n\r\n", 5);
	rw->in_body = false;
	return 0;
}

static const http_parser_settings settings = {
	.on_message_begin = on_begin,
	.on_url = on_url,
	.on_header_field = on_field,
	.on_header_value = on_value,
	.on_headers_complete = on_headers,
	.on_body = on_body,
	.on_message_complete = on_complete,
};

int port_rw_init(struct port_rw *rw, const char *host, const char *peer, const char *proto, const char *api_key)
{
	memset(rw, 0, sizeof(*rw));
	http_parser_init(&rw->p, HTTP_REQUEST);
	rw->p.data = rw;
	snprintf(rw->host, sizeof(rw->host), "%s", host);
	snprintf(rw->peer, sizeof(rw->peer), "%s", peer);
	rw->proto = proto;
	rw->api_key = api_key ? api_key : "";
	rw->url = evbuffer_new();
	rw->field = evbuffer_new();
	rw->value = evbuffer_new();
	rw->hdrs = evbuffer_new();
	if (!rw->url || !rw->field || !rw->value || !rw->hdrs) {
		port_rw_free(rw);
		return -1;
	}
	return 0;
}

void port_rw_free(struct port_rw *rw)
{
	if (rw->url)
		evbuffer_free(rw->url);
	if (rw->field)
		evbuffer_free(rw->field);
	if (rw->value)
		evbuffer_free(rw->value);
	if (rw->hdrs)
		evbuffer_free(rw->hdrs);
	rw->url = rw->field = rw->value = rw->hdrs = NULL;
}

size_t port_rw_feed(struct port_rw *rw, const char *buf, size_t n, struct evbuffer *out)
{
	size_t used;
	enum http_errno e;

	if (rw->status != PORT_RW_OK)
		return 0;
	rw->out = out;
	used = http_parser_execute(&rw->p, &settings, buf, n);
	rw->out = NULL;
	if (rw->status != PORT_RW_OK)
		return used;
	if (rw->p.upgrade) {
		rw->status = PORT_RW_RAW;
		return used;
	}
	e = HTTP_PARSER_ERRNO(&rw->p);
	if (e != HPE_OK || used != n) {
		rw->status = PORT_RW_STOP;
		snprintf(rw->why, sizeof(rw->why), "a malformed request (%s)", http_errno_name(e));
	}
	return used;
}
