/* http.c -- the HTTP request relay (egress.md "HTTP request"): the guest->upstream direction
 * parsed with http-parser, each request's authorities (Host, absolute-form target) checked
 * like an SNI, the head rebuilt from the parsed fields with injected headers, the body passed
 * on (chunked bodies re-chunked, trailers dropped), a refused request answered 403 and the
 * connection closed. Every guest byte is hostile: the head is bounded, nothing is trusted.
 * The upstream's answers are framed (http_resp.c) and passed on as they are: guest bytes after
 * an Upgrade or CONNECT wait, unparsed, until its answer comes; only a 101 (a 2xx to CONNECT)
 * turns the connection into raw bytes, any other answer and parsing goes on, Host checks
 * included. */
#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <http_parser.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gw.h"
#include "http_resp.h"

#define GW_HTTP_HEAD_MAX 65536
#define GW_HTTP_HEADERS_MAX 128

struct gw_hdr {
	uint32_t name, name_len, val, val_len; /* offsets into buf */
};

enum last_cb { CB_NONE, CB_URL, CB_FIELD, CB_VALUE };

struct gw_http {
	struct gw_conn *c;
	http_parser p;
	char *buf;
	size_t len, cap;
	uint32_t url, url_len;
	struct gw_hdr hdr[GW_HTTP_HEADERS_MAX];
	int nhdr;
	enum last_cb last;
	bool chunked, raw, forwarding;
	bool strip_h2c;                      /* this request's Upgrade names h2c: not relayed */
	enum gw_req_kind kind;               /* this request's, for its response's framing */
	struct gw_resp resp;                 /* the upstream->guest direction */
	bool hold, hold_switch;              /* guest bytes wait: for the answer to an Upgrade or
					      * CONNECT (hold_switch), or for answers to the
					      * GW_RESP_PENDING_MAX requests relayed */
	int status;                          /* !0: refuse with this status */
	int allowed;                         /* requests allowed so far */
	uint64_t req_bytes;
	char name[EGRESS_NAME_MAX + 1];      /* this request's authority */
	char reason[EGRESS_NAME_MAX + 128];
	char inj[EGRESS_MAX_INJECT][64];     /* injected header names (copies: the policy may change) */
	int ninj;
};

bool gw_http_raw(const struct gw_http *h)
{
	return h->raw;
}

bool gw_http_holding(const struct gw_http *h)
{
	return h->hold;
}

static int append(struct gw_http *h, const char *at, size_t n)
{
	if (h->len + n > GW_HTTP_HEAD_MAX) {
		h->status = 431;
		snprintf(h->reason, sizeof(h->reason), "request head larger than %d bytes", GW_HTTP_HEAD_MAX);
		return -1;
	}
	if (h->len + n > h->cap) {
		size_t cap = h->cap ? h->cap : 1024;
		char *b;

		while (cap < h->len + n)
			cap *= 2;
		b = realloc(h->buf, cap);
		if (!b)
			return -1;
		h->buf = b;
		h->cap = cap;
	}
	memcpy(h->buf + h->len, at, n);
	h->len += n;
	return 0;
}

static int on_begin(http_parser *p)
{
	struct gw_http *h = p->data;

	h->len = 0;
	h->nhdr = 0;
	h->url_len = 0;
	h->last = CB_NONE;
	h->ninj = 0;
	h->name[0] = '\0';
	h->req_bytes = 0;
	h->strip_h2c = false;
	return 0;
}

static int on_url(http_parser *p, const char *at, size_t n)
{
	struct gw_http *h = p->data;

	if (h->last != CB_URL)
		h->url = (uint32_t)h->len;
	h->last = CB_URL;
	h->url_len += (uint32_t)n;
	return append(h, at, n);
}

static int on_field(http_parser *p, const char *at, size_t n)
{
	struct gw_http *h = p->data;

	if (h->last != CB_FIELD) {
		if (h->nhdr == GW_HTTP_HEADERS_MAX) {
			h->status = 431;
			snprintf(h->reason, sizeof(h->reason), "more than %d headers", GW_HTTP_HEADERS_MAX);
			return -1;
		}
		h->hdr[h->nhdr++] = (struct gw_hdr){ .name = (uint32_t)h->len };
	}
	h->last = CB_FIELD;
	h->hdr[h->nhdr - 1].name_len += (uint32_t)n;
	return append(h, at, n);
}

static int on_value(http_parser *p, const char *at, size_t n)
{
	struct gw_http *h = p->data;

	if (h->last != CB_VALUE)
		h->hdr[h->nhdr - 1].val = (uint32_t)h->len;
	h->last = CB_VALUE;
	h->hdr[h->nhdr - 1].val_len += (uint32_t)n;
	return append(h, at, n);
}

static bool hdr_is(const struct gw_http *h, const struct gw_hdr *x, const char *name)
{
	return x->name_len == strlen(name) && strncasecmp(h->buf + x->name, name, x->name_len) == 0;
}

/* "name[:port]" (Host value or URL host) -> normalised name, "" for an IPv4 literal.
 * false: not acceptable (IPv6 literal, bad name). */
static bool authority_name(const char *a, size_t n, char out[EGRESS_NAME_MAX + 1])
{
	char tmp[EGRESS_NAME_MAX + 8];
	const char *colon;
	struct in_addr ia;

	while (n && (a[n - 1] == ' ' || a[n - 1] == '\t'))
		n--;
	while (n && (*a == ' ' || *a == '\t'))
		a++, n--;
	if (n == 0 || n >= sizeof(tmp) || *a == '[' || memchr(a, '\0', n))
		return false;
	memcpy(tmp, a, n);
	tmp[n] = '\0';
	colon = strrchr(tmp, ':');
	if (colon) {
		if (!colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1))
			return false;
		tmp[colon - tmp] = '\0';
	}
	if (inet_pton(AF_INET, tmp, &ia) == 1) {
		out[0] = '\0';
		return true;
	}
	return egress_name_normalise(tmp, out);
}

static __attribute__((format(printf, 3, 4))) int refuse_req(struct gw_http *h, int status,
								  const char *fmt, ...)
{
	va_list ap;

	h->status = status;
	va_start(ap, fmt);
	vsnprintf(h->reason, sizeof(h->reason), fmt, ap);
	va_end(ap);
	http_parser_pause(&h->p, 1);
	return 0;
}

/* Checks one authority; 0 if allowed. The first names the request (audit, injection). */
static int check_authority(struct gw_http *h, const char *a, size_t n)
{
	struct gw_conn *c = h->c;
	char name[EGRESS_NAME_MAX + 1];
	struct egress_verdict v;

	if (!authority_name(a, n, name))
		return refuse_req(h, 400, "bad authority");
	if (!h->name[0])
		snprintf(h->name, sizeof(h->name), "%s", name);
	if (c->proto == GW_HTTPS && strcmp(name, c->name) != 0)
		return refuse_req(h, 403, "Host does not match the TLS server name %s", c->name);
	v = gw_decide_name(c->g, name, c->addr, c->port);
	if (!v.allow)
		return refuse_req(h, 403, "%s", v.reason);
	if (!h->reason[0])
		snprintf(h->reason, sizeof(h->reason), "%s", v.reason);
	return 0;
}

static int check_request(struct gw_http *h)
{
	struct http_parser_url u;
	int hosts = 0;

	for (int i = 0; i < h->nhdr; i++) {
		if (!hdr_is(h, &h->hdr[i], "host"))
			continue;
		if (++hosts > 1)
			return refuse_req(h, 400, "more than one Host header");
		if (check_authority(h, h->buf + h->hdr[i].val, h->hdr[i].val_len) || h->status)
			return 0;
	}
	http_parser_url_init(&u);
	if (h->url_len && h->buf[h->url] != '/' && h->buf[h->url] != '*') {
		if (http_parser_parse_url(h->buf + h->url, h->url_len, h->p.method == HTTP_CONNECT, &u) ||
		    !(u.field_set & (1 << UF_HOST)))
			return refuse_req(h, 400, "bad request target");
		if (check_authority(h, h->buf + h->url + u.field_data[UF_HOST].off, u.field_data[UF_HOST].len) ||
		    h->status)
			return 0;
		hosts++;
	}
	if (!hosts) /* no authority: the TLS name, or a CIDR rule alone */
		return check_authority(h, h->c->proto == GW_HTTPS ? h->c->name : "0.0.0.0",
				       strlen(h->c->proto == GW_HTTPS ? h->c->name : "0.0.0.0"));
	return 0;
}

/* The inject rules that apply to this request; their header names replace the guest's. */
static int applicable_injects(struct gw_http *h, const struct egress_inject *out[EGRESS_MAX_INJECT + 1])
{
	const struct egress_inject *all[EGRESS_MAX_INJECT + 1];
	int n = 0, k = egress_injects_for(h->c->g->policy, h->name, all);

	for (int i = 0; i < k; i++) {
		size_t r = strlen(h->reason);

		if (h->c->proto != GW_HTTPS && !all[i]->plain_http)
			continue;
		if (!all[i]->value) {
			snprintf(h->reason + r, sizeof(h->reason) - r, " (secret-missing: %s)", all[i]->secret);
			continue;
		}
		out[n++] = all[i];
	}
	out[n] = NULL;
	return n;
}

/* Does a comma-separated header value list the token (case-insensitive)? */
static bool value_has_token(const char *v, size_t n, const char *token)
{
	size_t t = strlen(token);

	for (size_t i = 0; i < n;) {
		size_t j;

		while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		for (j = i; j < n && v[j] != ',' && v[j] != ' ' && v[j] != '\t' && v[j] != '/'; j++)
			;
		if (j - i == t && strncasecmp(v + i, token, t) == 0)
			return true;
		while (j < n && v[j] != ',')
			j++;
		i = j;
	}
	return false;
}

/* An Upgrade to h2c (HTTP/2 in clear text) is dropped, with its settings: the upstream then
 * answers the request as HTTP/1.1. Relayed, a 101 would carry the connection into frames whose
 * :authority nobody checks, which on a shared address reaches other hosts. */
static bool upgrades_to_h2c(const struct gw_http *h)
{
	for (int i = 0; i < h->nhdr; i++)
		if (hdr_is(h, &h->hdr[i], "upgrade") &&
		    value_has_token(h->buf + h->hdr[i].val, h->hdr[i].val_len, "h2c"))
			return true;
	return false;
}

static bool replaced(const struct gw_http *h, const struct gw_hdr *x,
		     const struct egress_inject *const *inj, int n)
{
	if (h->strip_h2c && (hdr_is(h, x, "upgrade") || hdr_is(h, x, "http2-settings")))
		return true;
	for (int i = 0; i < n; i++)
		if (hdr_is(h, x, inj[i]->header))
			return true;
	return false;
}

static void write_head(struct gw_http *h, struct evbuffer *out)
{
	const struct egress_inject *inj[EGRESS_MAX_INJECT + 1];
	int n = applicable_injects(h, inj);

	evbuffer_add_printf(out, "%s %.*s HTTP/%u.%u\r\n", http_method_str(h->p.method), (int)h->url_len,
			    h->buf + h->url, h->p.http_major, h->p.http_minor);
	for (int i = 0; i < h->nhdr; i++) {
		const struct gw_hdr *x = &h->hdr[i];

		if (replaced(h, x, inj, n))
			continue;
		evbuffer_add(out, h->buf + x->name, x->name_len);
		evbuffer_add(out, ": ", 2);
		evbuffer_add(out, h->buf + x->val, x->val_len);
		evbuffer_add(out, "\r\n", 2);
	}
	for (int i = 0; i < n; i++) {
		evbuffer_add_printf(out, "%s: %s\r\n", inj[i]->header, inj[i]->value);
		snprintf(h->inj[h->ninj++], sizeof(h->inj[0]), "%s", inj[i]->header);
	}
	evbuffer_add(out, "\r\n", 2);
}

static enum gw_req_kind request_kind(struct gw_http *h)
{
	if (h->p.method == HTTP_HEAD)
		return GW_REQ_HEAD;
	if (h->p.method == HTTP_CONNECT)
		return GW_REQ_CONNECT;
	h->strip_h2c = h->p.upgrade && upgrades_to_h2c(h);
	return h->p.upgrade && !h->strip_h2c ? GW_REQ_UPGRADE : GW_REQ_PLAIN;
}

static int on_headers_complete(http_parser *p)
{
	struct gw_http *h = p->data;
	struct gw_conn *c = h->c;

	h->reason[0] = '\0';
	if (p->http_major != 1)
		return refuse_req(h, 505, "HTTP/%u.%u is not relayed (HTTP/1.x only)", p->http_major,
				  p->http_minor);
	if (check_request(h) || h->status)
		return 0;
	/* TRACE echoes the request back, headers the gateway injected included */
	if (p->method == HTTP_TRACE)
		return refuse_req(h, 403, "TRACE is not relayed (it would echo injected credentials)");
	h->kind = request_kind(h);
	if (!c->up) {
		c->up = gw_conn_connect(c, NULL);
		if (!c->up)
			return refuse_req(h, 502, "upstream connect failed");
		gw_relay_attach_up(c);
	}
	if (!h->allowed) { /* the connection's record names its first request */
		snprintf(c->name, sizeof(c->name), "%s", h->name);
		snprintf(c->reason, sizeof(c->reason), "%s", h->reason);
	}
	h->req_bytes = h->len; /* the head as parsed; the body is added as it passes */
	h->chunked = (p->flags & F_CHUNKED) != 0;
	write_head(h, bufferevent_get_output(c->up));
	gw_resp_expect(&h->resp, h->kind); /* room: parsing stops while the ring is full */
	h->forwarding = true;
	h->allowed++;
	return 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
	struct gw_http *h = p->data;
	struct evbuffer *out = bufferevent_get_output(h->c->up);

	h->req_bytes += n;
	if (h->chunked)
		evbuffer_add_printf(out, "%zx\r\n", n);
	evbuffer_add(out, at, n);
	if (h->chunked)
		evbuffer_add(out, "\r\n", 2);
	return 0;
}

static void audit_request(struct gw_http *h, bool allow)
{
	const char *names[EGRESS_MAX_INJECT];
	struct gw_audit_rec r = {
		.proto = h->c->proto == GW_HTTPS ? "https" : "http", .addr = h->c->addr, .port = h->c->port,
		.name = h->name[0] ? h->name : h->c->name, .allow = allow, .reason = h->reason,
		.bytes_out = h->req_bytes, .injected = names, .n_injected = h->ninj,
	};

	for (int i = 0; i < h->ninj; i++)
		names[i] = h->inj[i];
	gw_audit(h->c->g, &r);
}

static int on_message_complete(http_parser *p)
{
	struct gw_http *h = p->data;

	if (!h->forwarding)
		return 0;
	if (h->chunked)
		evbuffer_add(bufferevent_get_output(h->c->up), "0\r\n\r\n", 5);
	audit_request(h, true);
	h->forwarding = false;
	/* Whatever follows an Upgrade or CONNECT is read only once the upstream answered it: as
	 * the new protocol after a 101 (2xx), as the next request otherwise. */
	h->hold_switch = h->kind == GW_REQ_UPGRADE || h->kind == GW_REQ_CONNECT;
	if (h->hold_switch || gw_resp_pending(&h->resp) == GW_RESP_PENDING_MAX) {
		h->hold = true;
		http_parser_pause(p, 1);
	}
	return 0;
}

static const http_parser_settings settings = {
	.on_message_begin = on_begin,
	.on_url = on_url,
	.on_header_field = on_field,
	.on_header_value = on_value,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

static const char *status_text(int status)
{
	switch (status) {
	case 400:
		return "Bad Request";
	case 403:
		return "Forbidden";
	case 431:
		return "Request Header Fields Too Large";
	case 505:
		return "HTTP Version Not Supported";
	default:
		return "Bad Gateway";
	}
}

/* Answers the guest, stops relaying, closes once the answer is out; true if c was freed. */
static bool answer_and_close(struct gw_conn *c, int status, const char *reason)
{
	struct evbuffer *out = bufferevent_get_output(c->down);

	evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
			    "Connection: close\r\n\r\n%s\n", status, status_text(status), strlen(reason) + 1,
			    reason);
	audit_request(c->http, false);
	if (!c->http->allowed)
		c->relaying = false; /* nothing went out: the request's deny is the record */
	c->closing = true;
	bufferevent_disable(c->down, EV_READ);
	gw_relay_drop_up(c);
	return gw_relay_settle(c);
}

bool gw_http_feed(struct gw_conn *c)
{
	struct gw_http *h = c->http;
	struct evbuffer *in = bufferevent_get_input(c->down);
	struct evbuffer_iovec v;

	while (!h->raw && !h->hold && evbuffer_get_length(in) && evbuffer_peek(in, -1, NULL, &v, 1) >= 1) {
		size_t n = http_parser_execute(&h->p, &settings, v.iov_base, v.iov_len);
		enum http_errno e = HTTP_PARSER_ERRNO(&h->p);

		c->bytes_out += n;
		evbuffer_drain(in, n);
		if (h->hold && !h->status)
			break; /* paused by on_message_complete: the rest waits in `in` */
		if (h->status || e != HPE_OK) {
			if (!h->status)
				snprintf(h->reason, sizeof(h->reason), "bad HTTP request: %s", http_errno_name(e));
			return answer_and_close(c, h->status ? h->status : 400, h->reason);
		}
		/* (short of v without an error: http-parser stopped after a request it took for an
		 * upgrade whose h2c the relay dropped; the next bytes are the next request) */
		if (n == 0 || (n < v.iov_len && !h->p.upgrade))
			break;
	}
	gw_relay_backpressure(c, c->down, c->up);
	return false;
}

enum gw_http_up gw_http_upstream(struct gw_conn *c)
{
	struct gw_http *h = c->http;
	struct evbuffer *in = bufferevent_get_input(c->up);
	struct evbuffer_iovec v[8];
	struct evbuffer_ptr at;
	enum gw_resp_rc rc = GW_RESP_OK;
	int k;

	evbuffer_ptr_set(in, &at, 0, EVBUFFER_PTR_SET);
	/* the bytes are only read here; gw_relay_pump moves them on unmodified */
	while (rc == GW_RESP_OK && (k = evbuffer_peek(in, -1, &at, v, 8)) > 0) {
		size_t seen = 0;

		for (int i = 0; i < k && i < 8 && rc == GW_RESP_OK; i++) {
			rc = gw_resp_feed(&h->resp, v[i].iov_base, v[i].iov_len);
			seen += v[i].iov_len;
		}
		if (k <= 8 || evbuffer_ptr_set(in, &at, seen, EVBUFFER_PTR_ADD) < 0)
			break;
	}
	if (rc == GW_RESP_BAD)
		return GW_HTTP_UP_BAD;
	if (rc == GW_RESP_SWITCH)
		return GW_HTTP_UP_SWITCH;
	if (h->hold && (h->hold_switch ? gw_resp_pending(&h->resp) == 0
				       : gw_resp_pending(&h->resp) < GW_RESP_PENDING_MAX))
		return GW_HTTP_UP_RESUME;
	return GW_HTTP_UP_PASS;
}

void gw_http_switch(struct gw_conn *c)
{
	struct gw_http *h = c->http;

	h->raw = true;
	h->hold = false;
	if (c->up && c->down)
		gw_relay_pump(c, c->down, c->up);
}

bool gw_http_resume(struct gw_conn *c)
{
	struct gw_http *h = c->http;

	h->hold = h->hold_switch = false;
	http_parser_pause(&h->p, 0);
	return gw_http_feed(c);
}

int gw_http_new(struct gw_conn *c)
{
	struct gw_http *h = calloc(1, sizeof(*h));

	if (!h)
		return -1;
	h->c = c;
	http_parser_init(&h->p, HTTP_REQUEST);
	h->p.data = h;
	gw_resp_init(&h->resp);
	c->http = h;
	return 0;
}

void gw_http_free(struct gw_http *h)
{
	free(h->buf);
	free(h);
}
