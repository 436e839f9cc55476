/* stream.c -- streaming request bodies: a filter bufferevent between each connection's socket and
 * evhttp (see stream.h for the shape, docs/design/http.md for the reasons).
 *
 * Input. http-parser finds where each request's head and body end; the filter pauses it at both
 * points, so the bytes of one http_parser_execute() call always belong to one phase:
 *   HEAD    bytes collect in `head` until the head is whole, then one decision:
 *             raw    anything outside the subset below, or an upgrade: the head and everything
 *                    after it pass through untouched, for good (evhttp alone parses them);
 *             stream a stream route: evhttp gets the head without Content-Length,
 *                    Transfer-Encoding and Expect, plus `Content-Length: 0` and HTTP_SF_HEADER;
 *                    the decoded body goes to the body's buffer (at most body_max);
 *             pass   any other request: the head as it came (less a client's HTTP_SF_HEADER),
 *                    then its body byte for byte.
 *   WAIT    once a request is whole, nothing more is read until evhttp has sent its reply
 *           (http_sf_reply_done): evhttp never gets bytes while it writes, and a streaming
 *           request's body can never be read as the next request.
 * The strict subset (head_parse): "METHOD SP target SP HTTP/1.x" with a method evhttp knows,
 * header lines "name:value" with token names, CRLF or LF line ends, no bare CR, no control bytes,
 * no folded lines, at most one Content-Length (digits only) or one `Transfer-Encoding: chunked`
 * (not both), at most one `Expect: 100-continue`, and no body on HEAD or TRACE. Inside it evhttp and
 * http-parser agree on where a request ends, which is what lets the filter change a head.
 *
 * Output. evhttp (and ws.c) take "the output buffer is empty" to mean "the kernel has every byte":
 * evhttp frees a `Connection: close` connection the moment that happens. A filter that moved bytes
 * on to the socket's bufferevent would empty its buffer early and lose the end of such replies. So
 * sf_out copies bytes to the socket's buffer and drains its own only as the socket's drains. */
#include "stream.h"

#include <ctype.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <http_parser.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"
#include "preauth.h"

/* The socket's bufferevent: what it reads ahead of the filter, and what it holds for writing. */
#define UNDER_READ_HIGH (256u << 10)
#define UNDER_WRITE_HIGH (256u << 10)
#define SINGLE_IO (256u << 10)
#define KICK_ROOM(sf) ((sf)->body_max / 4 < (64u << 10) ? (sf)->body_max / 4 : (64u << 10))

enum pause_reason { PAUSE_NONE, PAUSE_HEADERS, PAUSE_MESSAGE };

struct http_body {
	struct http_sf *sf;
	struct evbuffer *buf;
	uint64_t length;   /* Content-Length, or UINT64_MAX when chunked */
	unsigned id;
	bool complete;     /* every byte is in buf (or was read) */
	bool failed;
	bool claimed;
	bool expect;       /* the client waits for 100 Continue */
	bool close_hdr;    /* we put `Connection: close` on the reply */
	struct evhttp_request *req;
	void (*fn)(struct http_body *b, void *arg);
	void *arg;
};

struct http_sf {
	http_parser p;
	enum http_sf_state state;
	enum pause_reason paused;
	struct evbuffer *head;
	const struct http_route *routes;
	size_t nroutes, body_max, peak;
	unsigned serial;
	struct http_body *body;    /* the streaming request's body until its reply has gone */
	bool stalled;              /* stopped reading: the body buffer is full */
	bool body_changed;         /* for the wrapper: the body got bytes, ended or failed */
	bool progress;             /* a streaming body advanced (the idle timer restarts) */
	/* on a connection */
	struct bufferevent *bev, *under;
	struct bufferevent *filter;    /* = bev, kept after the connection is gone */
	bufferevent_data_cb f_read, f_write; /* libevent's own callbacks on `under` (under_readcb) */
	bufferevent_event_cb f_event;
	void *f_arg;
	struct event *kick, *notify, *idle, *closer, *pump;
	struct http_conn *conn;
	int idle_s;
	size_t emitted;            /* bytes handed to evhttp, ever */
	size_t inflight, foreign;  /* output: our bytes copied to the socket's buffer; 100 Continue there */
	const struct http_plane *plane; /* its head check (preauth.c), when it has one */
	bool authed;               /* the request being passed on: credentials known good (or no check) */
	bool upgraded;             /* raw since an upgrade request: closed if its reply is not a switch */
	bool raw_capped;           /* raw since a head we could not read: at most raw_left more bytes */
	size_t raw_left;
};

/* ---- the head ---- */

enum hdr_kind { HDR_OTHER, HDR_CL, HDR_TE, HDR_EXPECT, HDR_MARKER, HDR_HOST };

struct head_info {
	enum evhttp_cmd_type method;
	const char *target;
	size_t target_len;
	int minor;
	int ncl, nte, nexpect, nmarker, nhost;
	const char *host;     /* the Host header's value (trimmed), when there is one */
	size_t host_len;
	uint64_t cl;
	bool chunked, expect_continue;
	size_t reqline_len;   /* the request line with its line end */
};

/* One line of h[0..n) from *pos: its text (without the line end) and its length with it. */
static bool next_line(const char *h, size_t n, size_t *pos, const char **line, size_t *len, size_t *whole)
{
	const char *nl;

	if (*pos >= n)
		return false;
	nl = memchr(h + *pos, '\n', n - *pos);
	if (!nl)
		return false;
	*line = h + *pos;
	*whole = (size_t)(nl - *line) + 1;
	*len = *whole - 1;
	if (*len && (*line)[*len - 1] == '\r')
		(*len)--;
	*pos += *whole;
	return true;
}

static bool is_tchar(unsigned char c)
{
	return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

static enum hdr_kind hdr_kind(const char *name, size_t n)
{
	static const struct {
		const char *name;
		enum hdr_kind kind;
	} known[] = {
		{ "Content-Length", HDR_CL },
		{ "Transfer-Encoding", HDR_TE },
		{ "Expect", HDR_EXPECT },
		{ HTTP_SF_HEADER, HDR_MARKER },
		{ "Host", HDR_HOST },
	};

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strlen(known[i].name) == n && strncasecmp(name, known[i].name, n) == 0)
			return known[i].kind;
	return HDR_OTHER;
}

static bool method_from(const char *m, size_t n, enum evhttp_cmd_type *out)
{
	static const struct {
		const char *name;
		enum evhttp_cmd_type type;
	} methods[] = {
		{ "GET", EVHTTP_REQ_GET },       { "POST", EVHTTP_REQ_POST },
		{ "HEAD", EVHTTP_REQ_HEAD },     { "PUT", EVHTTP_REQ_PUT },
		{ "DELETE", EVHTTP_REQ_DELETE }, { "OPTIONS", EVHTTP_REQ_OPTIONS },
		{ "TRACE", EVHTTP_REQ_TRACE },   { "CONNECT", EVHTTP_REQ_CONNECT },
		{ "PATCH", EVHTTP_REQ_PATCH },
	};

	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		if (strlen(methods[i].name) == n && memcmp(m, methods[i].name, n) == 0) {
			*out = methods[i].type;
			return true;
		}
	}
	return false;
}

static void trim(const char **v, size_t *n)
{
	while (*n && (**v == ' ' || **v == '\t'))
		(*v)++, (*n)--;
	while (*n && ((*v)[*n - 1] == ' ' || (*v)[*n - 1] == '\t'))
		(*n)--;
}

static bool is_eq(const char *v, size_t n, const char *s)
{
	return strlen(s) == n && strncasecmp(v, s, n) == 0;
}

static int parse_request_line(const char *l, size_t n, struct head_info *hi)
{
	size_t i = 0, m;

	while (i < n && l[i] >= 'A' && l[i] <= 'Z')
		i++;
	if (i == 0 || i >= n || l[i] != ' ' || !method_from(l, i, &hi->method))
		return -1;
	m = ++i;
	while (i < n && (unsigned char)l[i] > 0x20 && (unsigned char)l[i] < 0x7f)
		i++;
	if (i == m || i >= n || l[i] != ' ')
		return -1;
	hi->target = l + m;
	hi->target_len = i - m;
	i++;
	if (n - i != 8 || memcmp(l + i, "HTTP/1.", 7) != 0 || (l[i + 7] != '0' && l[i + 7] != '1'))
		return -1;
	hi->minor = l[i + 7] - '0';
	return 0;
}

/* h[0..n) is a whole head, its empty line included. 0 when it is inside the strict subset. */
static int head_parse(const char *h, size_t n, struct head_info *hi)
{
	size_t pos = 0, len = 1, whole;
	const char *line;
	bool first = true;

	memset(hi, 0, sizeof(*hi));
	while (next_line(h, n, &pos, &line, &len, &whole)) {
		for (size_t i = 0; i < len; i++) {
			unsigned char c = (unsigned char)line[i];
			if ((c < 0x20 && c != '\t') || c == 0x7f)
				return -1; /* a bare CR, NUL or other control byte */
		}
		if (first) {
			first = false;
			hi->reqline_len = whole;
			if (parse_request_line(line, len, hi) < 0)
				return -1;
			continue;
		}
		if (len == 0) /* the empty line ends the head */
			break;
		size_t k = 0;
		while (k < len && is_tchar((unsigned char)line[k]))
			k++;
		if (k == 0 || k == len || line[k] != ':')
			return -1; /* also a folded line (it starts with a space) */
		const char *v = line + k + 1;
		size_t vl = len - k - 1;
		trim(&v, &vl);
		switch (hdr_kind(line, k)) {
		case HDR_CL:
			if (hi->ncl++ || vl == 0 || vl > 18)
				return -1;
			hi->cl = 0;
			for (size_t i = 0; i < vl; i++) {
				if (v[i] < '0' || v[i] > '9')
					return -1;
				hi->cl = hi->cl * 10 + (uint64_t)(v[i] - '0');
			}
			break;
		case HDR_TE:
			if (hi->nte++ || !is_eq(v, vl, "chunked"))
				return -1;
			hi->chunked = true;
			break;
		case HDR_EXPECT:
			if (hi->nexpect++ || !is_eq(v, vl, "100-continue"))
				return -1;
			hi->expect_continue = true;
			break;
		case HDR_MARKER:
			hi->nmarker++;
			break;
		case HDR_HOST:
			hi->nhost++;
			hi->host = v;
			hi->host_len = vl;
			break;
		case HDR_OTHER:
			break;
		}
	}
	if (first || pos != n || len != 0)
		return -1; /* no request line, or bytes after the empty line */
	if (hi->ncl && hi->nte)
		return -1;
	if ((hi->chunked || hi->cl) && (hi->method == EVHTTP_REQ_HEAD || hi->method == EVHTTP_REQ_TRACE))
		return -1; /* evhttp reads no body for these; http-parser would */
	return 0;
}

/* Writes the head without the header lines `drop` says, from h (the head less its last byte). */
static void emit_head(struct evbuffer *dst, const char *h, size_t n, const struct head_info *hi, bool stream)
{
	size_t pos = hi->reqline_len, len, whole;
	const char *line;

	evbuffer_add(dst, h, hi->reqline_len);
	while (next_line(h, n, &pos, &line, &len, &whole)) {
		enum hdr_kind k = HDR_OTHER;
		if (len == 0)
			break;
		k = hdr_kind(line, strcspn(line, ":"));
		if (k == HDR_MARKER || (stream && k != HDR_OTHER && k != HDR_HOST))
			continue;
		evbuffer_add(dst, line, whole);
	}
	if (!stream) /* the empty line's CR, if any; its LF is still to come */
		evbuffer_add(dst, h + pos, n - pos);
}

static bool is_stream_route(const struct http_sf *sf, const struct head_info *hi)
{
	const struct http_route *route = NULL;
	struct evhttp_uri *uri = NULL;
	struct http_req *r = NULL;
	char *target = NULL;
	bool match = false, candidate = false;

	for (size_t i = 0; i < sf->nroutes; i++)
		candidate |= sf->routes[i].method == hi->method;
	if (!candidate)
		return false;
	/* As dispatch() sees it: evhttp's URI parser, then our path splitting and router. */
	target = strndup(hi->target, hi->target_len);
	uri = target ? evhttp_uri_parse_with_flags(target, EVHTTP_URI_NONCONFORMANT) : NULL;
	r = uri ? calloc(1, sizeof(*r)) : NULL;
	if (r) {
		r->method = hi->method;
		match = http_split_path(r, evhttp_uri_get_path(uri)) == 0 &&
			http_route_find(sf->routes, sf->nroutes, r, &route, NULL, 0) == HTTP_MATCH;
	}
	free(r);
	if (uri)
		evhttp_uri_free(uri);
	free(target);
	return match;
}

/* ---- the state machine ---- */

static void body_free(struct http_body *b)
{
	if (!b)
		return;
	evbuffer_free(b->buf);
	free(b);
}

static void body_fail(struct http_sf *sf)
{
	struct http_body *b = sf->body;

	sf->state = HTTP_SF_DEAD;
	if (!b || b->complete)
		return;
	b->failed = true;
	sf->body_changed = true;
	/* The rest of the body cannot be found: the reply must close the connection. */
	if (b->req && !evhttp_request_get_response_code(b->req) && !b->close_hdr) {
		evhttp_add_header(evhttp_request_get_output_headers(b->req), "Connection", "close");
		b->close_hdr = true;
	}
}

/* Everything from here on passes untouched; returns what went to dst. */
static size_t go_raw(struct http_sf *sf, struct evbuffer *dst)
{
	size_t n = evbuffer_get_length(sf->head);

	evbuffer_add_buffer(dst, sf->head);
	sf->state = HTTP_SF_RAW;
	return n;
}

static bool checks_heads(const struct http_sf *sf)
{
	return sf->plane && sf->plane->head_auth;
}

/* Input from now on is dropped and the connection closed (from the loop, outside evhttp). */
static void kill_conn(struct http_sf *sf, const char *why)
{
	log_debug("http: %s; closing the connection", why);
	sf->state = HTTP_SF_DEAD;
	if (sf->closer)
		event_active(sf->closer, EV_TIMEOUT, 0);
}

/* A request whose body will not be read: evhttp gets its head with no body and a marker saying
 * why (http_sf_dispatch), the rest of the connection's input is dropped, and the reply closes
 * it. */
static size_t withhold(struct http_sf *sf, struct evbuffer *dst, const char *h, size_t hl,
		       const struct head_info *hi, const char *why)
{
	size_t before = evbuffer_get_length(dst);

	emit_head(dst, h, hl, hi, true);
	evbuffer_add_printf(dst, "Content-Length: 0\r\n%s: %s\r\n\r\n", HTTP_SF_HEADER, why);
	evbuffer_drain(sf->head, evbuffer_get_length(sf->head));
	sf->state = HTTP_SF_DEAD;
	return evbuffer_get_length(dst) - before;
}

/* go_raw for a request the head check could not look at: on a plane with one, evhttp gets what
 * came so far and at most HTTP_SF_RAW_CAP more bytes, and the connection ends after its reply
 * (so an unauthenticated client cannot make evhttp buffer a whole body by malforming a head). */
static size_t raw_capped(struct http_sf *sf, struct evbuffer *dst)
{
	if (checks_heads(sf)) {
		sf->raw_capped = true;
		sf->raw_left = HTTP_SF_RAW_CAP;
	}
	return go_raw(sf, dst);
}

/* Does the plane's front end for hosts (a sandbox's ports) claim this head's one Host? */
static bool host_taken(const struct http_sf *sf, const struct head_info *hi)
{
	return sf->plane && sf->plane->host_takes && hi->nhost == 1 &&
	       sf->plane->host_takes(sf->plane, hi->host, hi->host_len);
}

/* evhttp gets the head with no body and the HTTP_SF_TAKE marker; the head as it came stays in
 * `head`, and nothing after it is read until http_sf_release or the reply. */
static size_t take(struct http_sf *sf, struct evbuffer *dst, const char *h, size_t hl, const struct head_info *hi)
{
	size_t before = evbuffer_get_length(dst);

	emit_head(dst, h, hl, hi, true);
	evbuffer_add_printf(dst, "Content-Length: 0\r\n%s: %s\r\n\r\n", HTTP_SF_HEADER, HTTP_SF_TAKE);
	sf->state = HTTP_SF_TAKEN;
	return evbuffer_get_length(dst) - before;
}

/* The head is whole (its last byte is still the first of src). */
static size_t on_head(struct http_sf *sf, struct evbuffer *src, struct evbuffer *dst)
{
	size_t hl = evbuffer_get_length(sf->head), before = evbuffer_get_length(dst);
	struct head_info hi;
	struct http_body *b;
	bool parsed;
	char *h;

	h = malloc(hl + 2);
	if (!h || evbuffer_copyout(sf->head, h, hl) != (ev_ssize_t)hl || evbuffer_copyout(src, h + hl, 1) != 1) {
		free(h);
		return go_raw(sf, dst);
	}
	h[hl + 1] = '\0';
	parsed = head_parse(h, hl + 1, &hi) == 0 && !(hi.ncl && sf->p.content_length != hi.cl) &&
		 !!(sf->p.flags & F_CHUNKED) == hi.chunked;
	if (parsed && host_taken(sf, &hi)) {
		size_t n = take(sf, dst, h, hl, &hi);

		free(h);
		return n;
	}
	if (sf->p.upgrade || !parsed) {
		free(h);
		sf->upgraded = sf->p.upgrade;
		/* A head whose credentials we cannot read, with a body evhttp would buffer unchecked:
		 * evhttp may answer it, but gets little of its body (raw_capped). */
		if (checks_heads(sf) && ((sf->p.flags & F_CHUNKED) ||
					 (sf->p.content_length != ULLONG_MAX && sf->p.content_length > 0)))
			return raw_capped(sf, dst);
		return go_raw(sf, dst);
	}
	if (!is_stream_route(sf, &hi)) {
		sf->authed = true;
		if (checks_heads(sf) && (hi.chunked || hi.cl > 0)) {
			uint64_t len = hi.chunked ? UINT64_MAX : hi.cl;

			switch (http_preauth(sf->plane, sf->conn, h, hl + 1, hi.method, hi.target, hi.target_len, len)) {
			case HTTP_PREAUTH_AUTHED:
				break;
			case HTTP_PREAUTH_BUDGETED:
				sf->authed = false;
				break;
			case HTTP_PREAUTH_REFUSED:
				len = withhold(sf, dst, h, hl, &hi, HTTP_SF_REFUSED);
				free(h);
				return len;
			case HTTP_PREAUTH_BUSY:
				len = withhold(sf, dst, h, hl, &hi, HTTP_SF_BUSY);
				free(h);
				return len;
			}
		}
		if (hi.nmarker)
			emit_head(dst, h, hl, &hi, false);
		else
			evbuffer_add_buffer(dst, sf->head);
		evbuffer_drain(sf->head, evbuffer_get_length(sf->head));
		sf->state = HTTP_SF_PASS;
		free(h);
		return evbuffer_get_length(dst) - before;
	}
	b = calloc(1, sizeof(*b));
	if (b && !(b->buf = evbuffer_new())) {
		free(b);
		b = NULL;
	}
	if (!b) {
		free(h);
		return go_raw(sf, dst); /* out of memory: evhttp reads it whole, within its limit */
	}
	body_free(sf->body);
	sf->body = b;
	b->sf = sf;
	b->id = ++sf->serial;
	b->length = hi.chunked ? UINT64_MAX : hi.cl;
	b->expect = hi.expect_continue && hi.minor >= 1;
	emit_head(dst, h, hl, &hi, true);
	evbuffer_add_printf(dst, "Content-Length: 0\r\n%s: %u\r\n\r\n", HTTP_SF_HEADER, b->id);
	evbuffer_drain(sf->head, evbuffer_get_length(sf->head));
	sf->state = HTTP_SF_STREAM;
	free(h);
	return evbuffer_get_length(dst) - before;
}

static void on_message_end(struct http_sf *sf)
{
	switch (sf->state) {
	case HTTP_SF_STREAM:
		sf->body->complete = true;
		sf->body_changed = true;
		sf->state = HTTP_SF_WAIT;
		break;
	case HTTP_SF_PASS:
		sf->state = HTTP_SF_WAIT;
		break;
	case HTTP_SF_DISCARD: /* its reply has gone already */
		sf->state = HTTP_SF_HEAD;
		break;
	default:
		break;
	}
}

static int cb_headers(http_parser *p)
{
	struct http_sf *sf = p->data;

	sf->paused = PAUSE_HEADERS;
	http_parser_pause(p, 1);
	return 0;
}

static int cb_message(http_parser *p)
{
	struct http_sf *sf = p->data;

	sf->paused = PAUSE_MESSAGE;
	http_parser_pause(p, 1);
	return 0;
}

static int cb_body(http_parser *p, const char *at, size_t len)
{
	struct http_sf *sf = p->data;
	size_t have;

	if (sf->state != HTTP_SF_STREAM || !sf->body)
		return 0;
	evbuffer_add(sf->body->buf, at, len);
	have = evbuffer_get_length(sf->body->buf);
	if (have > sf->peak)
		sf->peak = have;
	sf->body_changed = true;
	return 0;
}

static const http_parser_settings settings = {
	.on_headers_complete = cb_headers,
	.on_message_complete = cb_message,
	.on_body = cb_body,
};

size_t http_sf_input(struct http_sf *sf, struct evbuffer *src, struct evbuffer *dst, ev_ssize_t lim)
{
	size_t out = 0;

	for (;;) {
		size_t avail = evbuffer_get_length(src), n, used;
		enum http_sf_state st = sf->state;
		struct evbuffer_iovec v;
		enum http_errno e;

		if (!avail || st == HTTP_SF_WAIT || st == HTTP_SF_TAKEN)
			break;
		if (st == HTTP_SF_DEAD) {
			evbuffer_drain(src, avail);
			break;
		}
		if (st == HTTP_SF_RAW) {
			n = avail;
			if (sf->raw_capped) {
				if (!sf->raw_left) {
					kill_conn(sf, "more than the bytes a request left unchecked may send");
					continue;
				}
				if (n > sf->raw_left)
					n = sf->raw_left;
				sf->raw_left -= n;
			}
			if (lim >= 0) {
				if (out >= (size_t)lim)
					break;
				if (n > (size_t)lim - out)
					n = (size_t)lim - out;
			}
			evbuffer_remove_buffer(src, dst, n);
			out += n;
			continue;
		}
		if (evbuffer_peek(src, -1, NULL, &v, 1) < 1 || !v.iov_len)
			break;
		n = v.iov_len;
		if (st == HTTP_SF_STREAM) {
			size_t have = evbuffer_get_length(sf->body->buf);
			if (!sf->body->claimed)
				break; /* not a byte of it before a handler (past auth) asks */
			if (have >= sf->body_max) {
				sf->stalled = true;
				break;
			}
			if (n > sf->body_max - have)
				n = sf->body_max - have; /* body bytes never outnumber the bytes they came in */
		} else if (st == HTTP_SF_PASS && lim >= 0) {
			if (out >= (size_t)lim)
				break;
			if (n > (size_t)lim - out)
				n = (size_t)lim - out;
		} else if (st == HTTP_SF_HEAD) {
			size_t hl = evbuffer_get_length(sf->head);
			if (hl >= HTTP_SF_HEAD_MAX) {
				out += go_raw(sf, dst);
				continue;
			}
			if (n > HTTP_SF_HEAD_MAX - hl)
				n = HTTP_SF_HEAD_MAX - hl;
		}
		sf->paused = PAUSE_NONE;
		used = http_parser_execute(&sf->p, &settings, v.iov_base, n);
		e = HTTP_PARSER_ERRNO(&sf->p);
		switch (st) {
		case HTTP_SF_HEAD:
			evbuffer_remove_buffer(src, sf->head, used);
			break;
		case HTTP_SF_PASS:
			evbuffer_remove_buffer(src, dst, used);
			out += used;
			break;
		default: /* a streaming body (copied by cb_body) or one being dropped */
			evbuffer_drain(src, used);
			sf->progress |= st == HTTP_SF_STREAM && used;
			break;
		}
		if (e == HPE_PAUSED) {
			http_parser_pause(&sf->p, 0);
			if (sf->paused == PAUSE_HEADERS)
				out += on_head(sf, src, dst);
			else
				on_message_end(sf);
			continue;
		}
		if (e != HPE_OK || used < n) {
			log_debug("http: %s while reading a request; %s", http_errno_name(e),
				  st == HTTP_SF_STREAM || st == HTTP_SF_DISCARD ? "closing the connection"
									      : "passing the rest through");
			if (st == HTTP_SF_HEAD)
				out += raw_capped(sf, dst);
			else if (st == HTTP_SF_PASS && (sf->authed || !checks_heads(sf)))
				sf->state = HTTP_SF_RAW;
			else if (st == HTTP_SF_PASS)
				kill_conn(sf, "a malformed body from a client not yet authenticated");
			else
				body_fail(sf);
		}
	}
	return out;
}

void http_sf_reply_done(struct http_sf *sf)
{
	body_free(sf->body);
	sf->body = NULL;
	sf->stalled = false;
	if (sf->idle)
		evtimer_del(sf->idle);
	if (sf->conn)
		http_conn_unauth_give(sf->conn);
	/* An upgrade that was answered instead of switching (a refused token, say): what follows
	 * on the connection would pass unchecked, so it ends here. */
	if (sf->state == HTTP_SF_RAW && (sf->upgraded || sf->raw_capped) && checks_heads(sf)) {
		kill_conn(sf, sf->upgraded ? "an upgrade request answered without a switch"
					   : "the reply to a request the head check could not read");
		return;
	}
	switch (sf->state) {
	case HTTP_SF_TAKEN: /* answered, not taken over: its body (unread) ends the connection */
		sf->state = HTTP_SF_DEAD;
		if (sf->closer)
			event_active(sf->closer, EV_TIMEOUT, 0);
		return;
	case HTTP_SF_STREAM: /* answered before the whole body came: drop the rest */
		sf->state = HTTP_SF_DISCARD;
		break;
	case HTTP_SF_WAIT:
		sf->state = HTTP_SF_HEAD;
		break;
	case HTTP_SF_DEAD:
		if (sf->closer)
			event_active(sf->closer, EV_TIMEOUT, 0);
		return;
	default:
		break;
	}
	if (sf->kick)
		event_active(sf->kick, EV_TIMEOUT, 0);
}

enum http_sf_state http_sf_state(const struct http_sf *sf)
{
	return sf->state;
}

struct http_body *http_sf_body(struct http_sf *sf)
{
	return sf->body;
}

size_t http_sf_peak(const struct http_sf *sf)
{
	return sf->peak;
}

struct http_sf *http_sf_new(const struct http_route *routes, size_t nroutes, size_t body_max)
{
	struct http_sf *sf = calloc(1, sizeof(*sf));

	if (!sf)
		return NULL;
	sf->head = evbuffer_new();
	if (!sf->head) {
		free(sf);
		return NULL;
	}
	http_parser_init(&sf->p, HTTP_REQUEST);
	sf->p.data = sf;
	sf->routes = routes;
	sf->nroutes = nroutes;
	sf->body_max = body_max ? body_max : HTTP_BODY_BUFFER;
	return sf;
}

void http_sf_free(struct http_sf *sf)
{
	if (!sf)
		return;
	body_free(sf->body);
	evbuffer_free(sf->head);
	if (sf->kick)
		event_free(sf->kick);
	if (sf->notify)
		event_free(sf->notify);
	if (sf->idle)
		event_free(sf->idle);
	if (sf->closer)
		event_free(sf->closer);
	if (sf->pump)
		event_free(sf->pump);
	free(sf);
}

/* ---- on a connection ---- */

static void idle_arm(struct http_sf *sf)
{
	struct timeval tv = { .tv_sec = sf->idle_s };
	struct http_body *b = sf->body;

	if (!sf->idle)
		return;
	if (sf->state == HTTP_SF_STREAM && b && b->claimed && !sf->stalled && sf->idle_s > 0)
		evtimer_add(sf->idle, &tv);
	else
		evtimer_del(sf->idle);
}

/* After the core ran from a callback: wake the handler, restart or stop the idle timer. */
static void after_input(struct http_sf *sf)
{
	if (sf->body_changed && sf->notify)
		event_active(sf->notify, EV_TIMEOUT, 0);
	sf->body_changed = false;
	if (sf->progress || sf->state != HTTP_SF_STREAM || sf->stalled)
		idle_arm(sf);
	sf->progress = false;
}

static enum bufferevent_filter_result sf_in(struct evbuffer *src, struct evbuffer *dst, ev_ssize_t lim,
					    enum bufferevent_flush_mode mode, void *ctx)
{
	struct http_sf *sf = ctx;
	size_t out;

	(void)mode;
	out = http_sf_input(sf, src, dst, lim);
	sf->emitted += out;
	after_input(sf);
	/* BEV_OK only when evhttp has something new: the filter then calls evhttp's read
	 * callback, which must not run for body bytes it never sees. */
	return out ? BEV_OK : BEV_NEED_MORE;
}

/* src (the filter's output, what evhttp and ws.c see) keeps every byte until the socket's
 * bufferevent has written it: the first `inflight` bytes of src are copies waiting in dst. */
static enum bufferevent_filter_result sf_out(struct evbuffer *src, struct evbuffer *dst, ev_ssize_t lim,
					     enum bufferevent_flush_mode mode, void *ctx)
{
	struct http_sf *sf = ctx;
	size_t pending = evbuffer_get_length(dst), ours, gone, n;
	bool progress = false;

	(void)mode;
	if (sf->inflight > evbuffer_get_length(src)) /* drained by someone else */
		sf->inflight = evbuffer_get_length(src);
	ours = sf->inflight + sf->foreign;
	gone = ours > pending ? ours - pending : 0;
	if (gone) { /* dst is first in, first out: a 100 Continue we put there went first */
		size_t f = gone < sf->foreign ? gone : sf->foreign;
		sf->foreign -= f;
		gone -= f;
		if (gone > sf->inflight)
			gone = sf->inflight;
		if (gone) {
			evbuffer_drain(src, gone);
			sf->inflight -= gone;
			progress = true;
		}
	}
	n = evbuffer_get_length(src) - sf->inflight;
	if (lim >= 0 && n > (size_t)lim)
		n = (size_t)lim;
	pending = evbuffer_get_length(dst); /* a flush passes no limit: keep the copy bounded */
	if (n > UNDER_WRITE_HIGH - (pending < UNDER_WRITE_HIGH ? pending : UNDER_WRITE_HIGH))
		n = UNDER_WRITE_HIGH - (pending < UNDER_WRITE_HIGH ? pending : UNDER_WRITE_HIGH);
	if (n) {
		struct evbuffer_iovec v[16];
		struct evbuffer_ptr at;
		int nv;

		evbuffer_ptr_set(src, &at, sf->inflight, EVBUFFER_PTR_SET);
		nv = evbuffer_peek(src, (ev_ssize_t)n, &at, v, 16);
		for (int i = 0; i < nv && i < 16 && n; i++) {
			size_t take = v[i].iov_len < n ? v[i].iov_len : n;
			if (evbuffer_add(dst, v[i].iov_base, take) < 0)
				break;
			sf->inflight += take;
			n -= take;
			progress = true;
		}
	}
	return progress ? BEV_OK : BEV_NEED_MORE;
}

static void sf_free_ctx(void *ctx)
{
	http_sf_free(ctx);
}

/* libevent's filter moves output only when bytes are added while writing is enabled, or when
 * the socket has drained; evhttp adds a reply first and enables writing after. So once bytes
 * are added with writing off, pump them from the loop (evhttp has enabled writing by then). */
static void out_added(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	struct http_sf *sf = arg;

	(void)buf;
	if (info->n_added && sf->bev && !(bufferevent_get_enabled(sf->bev) & EV_WRITE))
		event_active(sf->pump, EV_TIMEOUT, 0);
}

static void pump_cb(evutil_socket_t fd, short what, void *arg)
{
	struct http_sf *sf = arg;

	(void)fd;
	(void)what;
	if (sf->bev)
		bufferevent_flush(sf->bev, EV_WRITE, BEV_NORMAL);
}

/* Reads on after a pause (a reply went out, the handler drained the body, a claim). */
static void kick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct http_sf *sf = arg;
	size_t before = sf->emitted;

	(void)fd;
	(void)what;
	if (!sf->bev)
		return;
	sf->stalled = false;
	bufferevent_flush(sf->bev, EV_READ, BEV_NORMAL);
	after_input(sf);
	if (sf->emitted != before) /* a pipelined head for evhttp */
		bufferevent_trigger(sf->bev, EV_READ, 0);
}

static void notify_cb(evutil_socket_t fd, short what, void *arg)
{
	struct http_sf *sf = arg;
	struct http_body *b = sf->body;

	(void)fd;
	(void)what;
	if (!b || !b->fn || !b->req || evhttp_request_get_response_code(b->req))
		return;
	b->fn(b, b->arg);
}

static void idle_cb(evutil_socket_t fd, short what, void *arg)
{
	struct http_sf *sf = arg;

	(void)fd;
	(void)what;
	if (sf->state != HTTP_SF_STREAM || !sf->body || sf->body->complete)
		return;
	log_debug("http: no byte of a request body for %d s; failing it", sf->idle_s);
	body_fail(sf);
	after_input(sf);
}

static void closer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct http_sf *sf = arg;

	(void)fd;
	(void)what;
	if (sf->conn)
		http_conn_close(sf->conn);
}

/* libevent's filter (2.1.12, bufferevent_filter.c) runs the socket's callbacks be_filter_readcb,
 * be_filter_writecb and be_filter_eventcb without a reference to itself, and from inside them it
 * calls evhttp's and ws.c's callbacks, which may free the connection: evhttp_send_done frees a
 * `Connection: close` connection from its write callback once our output has drained, which on
 * this filter is always inside be_filter_writecb (sf_out drains as the socket drains), and so does
 * ws.c once its close frame is out. The filter's refcount then reached 0 inside: libevent
 * unlinked it (freeing the socket's bufferevent) and began finalizing it (its timeout events
 * cancelled, its memory freed later from the loop), and then be_filter_process_output, returning,
 * re-armed the filter's write timeout (HTTP_TIMEOUT_S, BEV_RESET_GENERIC_WRITE_TIMEOUT). The filter
 * was freed with that event still in the timer heap; when it fired, libevent took a reference on
 * the freed filter and dropped it, unlinking again: a second decref of the socket's bufferevent
 * (ASan: SEGV in event_callback_finalize_many_ under bufferevent_decref_and_unlock_; -O2: a
 * segfault or a spin in timeout_process). So each of the three runs holding a reference: the last
 * one is dropped, and the filter finalized, only once libevent's own code is done with it. */
static void under_readcb(struct bufferevent *under, void *arg)
{
	struct http_sf *sf = arg;
	struct bufferevent *f = sf->filter;

	bufferevent_incref(f);
	sf->f_read(under, sf->f_arg);
	bufferevent_decref(f); /* from here on the filter (and sf, its context) may be finalizing */
}

static void under_writecb(struct bufferevent *under, void *arg)
{
	struct http_sf *sf = arg;
	struct bufferevent *f = sf->filter;

	bufferevent_incref(f);
	sf->f_write(under, sf->f_arg);
	bufferevent_decref(f);
}

static void under_eventcb(struct bufferevent *under, short what, void *arg)
{
	struct http_sf *sf = arg;
	struct bufferevent *f = sf->filter;

	bufferevent_incref(f);
	sf->f_event(under, what, sf->f_arg);
	bufferevent_decref(f);
}

struct bufferevent *http_sf_wrap(struct http_sf *sf, struct event_base *base, struct bufferevent *under)
{
	struct bufferevent *f;

	sf->kick = event_new(base, -1, 0, kick_cb, sf);
	sf->notify = event_new(base, -1, 0, notify_cb, sf);
	sf->idle = evtimer_new(base, idle_cb, sf);
	sf->closer = event_new(base, -1, 0, closer_cb, sf);
	sf->pump = event_new(base, -1, 0, pump_cb, sf);
	f = sf->kick && sf->notify && sf->idle && sf->closer && sf->pump
		    ? bufferevent_filter_new(under, sf_in, sf_out, BEV_OPT_CLOSE_ON_FREE, sf_free_ctx, sf)
		    : NULL;
	if (!f) {
		http_sf_free(sf);
		bufferevent_free(under);
		return NULL;
	}
	sf->bev = sf->filter = f;
	sf->under = under;
	/* Interpose on the callbacks the filter gave the socket's bufferevent (above). Freeing the
	 * filter clears them (it frees `under`, which we made with BEV_OPT_CLOSE_ON_FREE), so none
	 * runs once the filter's refcount has reached 0. */
	bufferevent_getcb(under, &sf->f_read, &sf->f_write, &sf->f_event, &sf->f_arg);
	if (!sf->f_read || !sf->f_write || !sf->f_event || sf->f_arg != (void *)f) {
		bufferevent_free(f); /* not the libevent this was written for */
		return NULL;
	}
	bufferevent_setcb(under, under_readcb, under_writecb, under_eventcb, sf);
	if (!evbuffer_add_cb(bufferevent_get_output(f), out_added, sf)) {
		bufferevent_free(f); /* frees under and sf */
		return NULL;
	}
	/* The socket's bufferevent reads ahead at most this much when the filter stops taking
	 * bytes, and writes in big steps (libevent's 16 KiB per call caps throughput). */
	bufferevent_setwatermark(under, EV_READ, 0, UNDER_READ_HIGH);
	bufferevent_setwatermark(under, EV_WRITE, UNDER_WRITE_HIGH / 2, UNDER_WRITE_HIGH);
	bufferevent_set_max_single_read(under, SINGLE_IO);
	bufferevent_set_max_single_write(under, SINGLE_IO);
	return f;
}

void http_sf_set_plane(struct http_sf *sf, const struct http_plane *plane)
{
	sf->plane = plane;
}

void http_sf_set_conn(struct http_sf *sf, struct http_conn *c, int idle_s)
{
	sf->conn = c;
	sf->idle_s = idle_s;
}

void http_sf_conn_gone(struct http_sf *sf)
{
	sf->conn = NULL;
	if (sf->kick) {
		event_del(sf->kick);
		event_del(sf->notify);
		event_del(sf->idle);
		event_del(sf->closer);
		event_del(sf->pump);
	}
	if (sf->body)
		sf->body->failed = !sf->body->complete;
	body_free(sf->body);
	sf->body = NULL;
	sf->state = HTTP_SF_DEAD;
	sf->bev = NULL; /* evhttp frees it next */
}

bool http_sf_release(struct http_sf *sf)
{
	if (!sf || sf->state != HTTP_SF_TAKEN || !sf->bev)
		return false;
	/* evhttp read the synthesized head whole, so the input holds nothing else */
	evbuffer_add_buffer(bufferevent_get_input(sf->bev), sf->head);
	sf->state = HTTP_SF_RAW;
	if (sf->kick)
		event_active(sf->kick, EV_TIMEOUT, 0); /* what the socket read ahead comes up too */
	return true;
}

struct http_body *http_sf_dispatch(struct http_conn *c, struct evhttp_request *req, int *withheld, bool *taken)
{
	struct evkeyvalq *in = evhttp_request_get_input_headers(req);
	const char *v = evhttp_find_header(in, HTTP_SF_HEADER);
	struct http_sf *sf = c ? http_conn_sf(c) : NULL;
	struct http_body *b = sf ? sf->body : NULL;
	uint64_t id = 0;

	*withheld = 0;
	*taken = false;
	if (!v)
		return NULL;
	if (strcmp(v, HTTP_SF_TAKE) == 0) {
		evhttp_remove_header(in, HTTP_SF_HEADER);
		*taken = sf && sf->state == HTTP_SF_TAKEN;
		if (*taken)
			evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
		return NULL;
	}
	if (sf && (strcmp(v, HTTP_SF_REFUSED) == 0 || strcmp(v, HTTP_SF_BUSY) == 0)) {
		*withheld = strcmp(v, HTTP_SF_BUSY) == 0 ? 429 : 401;
		evhttp_remove_header(in, HTTP_SF_HEADER);
		evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
		return NULL;
	}
	if (http_parse_u64(v, &id) < 0 || !b || b->id != id || b->req)
		b = NULL; /* not the filter's: cannot happen, as it strips a client's */
	evhttp_remove_header(in, HTTP_SF_HEADER);
	if (!b)
		return NULL;
	b->req = req;
	/* A client waiting for 100 Continue has not sent the body: if the handler answers without
	 * claiming it, the connection cannot be kept (is a body coming or not?). */
	if (b->expect && !b->complete && !b->close_hdr) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
		b->close_hdr = true;
	}
	return b;
}

/* ---- the handler's side (body.h) ---- */

struct http_body *http_body_get(struct http_req *r)
{
	struct http_body *b = r->body;
	struct http_sf *sf = b ? b->sf : NULL;
	struct timeval tv = { .tv_sec = http_timeout_s };
	bufferevent_data_cb rcb, wcb;
	bufferevent_event_cb ecb;
	void *cbarg;

	if (!b || b->claimed)
		return b;
	b->claimed = true;
	if (!sf || !sf->bev)
		return b;
	if (b->close_hdr && !b->failed) {
		evhttp_remove_header(evhttp_request_get_output_headers(b->req), "Connection");
		b->close_hdr = false;
	}
	/* 100 Continue goes straight to the socket's buffer, ahead of anything evhttp writes;
	 * only when nothing of ours is queued there (it never is at this point). */
	if (b->expect && !b->complete && evbuffer_get_length(b->buf) == 0 && sf->inflight == 0 &&
	    evbuffer_get_length(bufferevent_get_output(sf->bev)) == 0) {
		static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
		if (evbuffer_add(bufferevent_get_output(sf->under), cont, sizeof(cont) - 1) == 0)
			sf->foreign += sizeof(cont) - 1;
	}
	/* Read the body: evhttp stopped reading when it dispatched the request. Its read callback
	 * is off (as while it writes a reply) and so is the read timeout: the idle timer is ours. */
	bufferevent_getcb(sf->bev, &rcb, &wcb, &ecb, &cbarg);
	bufferevent_setcb(sf->bev, NULL, wcb, ecb, cbarg);
	bufferevent_set_timeouts(sf->bev, NULL, &tv);
	bufferevent_enable(sf->bev, EV_READ);
	idle_arm(sf);
	event_active(sf->kick, EV_TIMEOUT, 0); /* bytes may wait in the socket's buffer */
	return b;
}

size_t http_body_read(struct http_body *b, struct evbuffer *out, size_t max)
{
	int n = evbuffer_remove_buffer(b->buf, out, max);
	struct http_sf *sf = b->sf;

	if (n <= 0)
		return 0;
	/* Read on once there is room for a good step (not for every small read). */
	if (sf && sf->stalled && sf->kick && evbuffer_get_length(b->buf) + KICK_ROOM(sf) <= sf->body_max) {
		sf->stalled = false;
		event_active(sf->kick, EV_TIMEOUT, 0);
	}
	return (size_t)n;
}

size_t http_body_buffered(const struct http_body *b)
{
	return evbuffer_get_length(b->buf);
}

bool http_body_done(const struct http_body *b)
{
	return b->complete && evbuffer_get_length(b->buf) == 0;
}

bool http_body_failed(const struct http_body *b)
{
	return b->failed;
}

uint64_t http_body_length(const struct http_body *b)
{
	return b->length;
}

void http_body_notify(struct http_body *b, void (*fn)(struct http_body *b, void *arg), void *arg)
{
	b->fn = fn;
	b->arg = arg;
	if (fn && b->sf && b->sf->notify && (evbuffer_get_length(b->buf) || b->complete || b->failed))
		event_active(b->sf->notify, EV_TIMEOUT, 0);
}
