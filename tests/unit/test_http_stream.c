/* test_http_stream.c -- streaming request bodies: the connection filter's state machine as a pure
 * function over buffers (stream.h), then the whole path through a real evhttp listener (a 64 MiB
 * upload read slowly with the buffer bound checked, keep-alive after it, pipelining, chunked
 * bodies, 100-continue, a 401 before the body, a client sending the internal header, malformed
 * bodies and requests, non-streaming bodies and large replies through the filter). */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/keyvalq_struct.h>
#include <time.h>

#include "daemon/http/body.h"
#include "daemon/http/preauth.h"
#include "daemon/http/stream.h"
#include "log.h"
#include "test_http_server.h"

static void noop(struct http_req *r) { (void)r; }

static const struct http_route stream_routes[] = {
	{ .method = EVHTTP_REQ_PUT, .pattern = "/v1/sandboxes/{}/files", .fn = noop },
	{ .method = EVHTTP_REQ_PUT, .pattern = "/v1/sandboxes/{}/files/tar", .fn = noop },
};
#define NSTREAM (sizeof(stream_routes) / sizeof(stream_routes[0]))

/* ---- the pure state machine ---- */

static char *dup_buf(struct evbuffer *b)
{
	size_t n = evbuffer_get_length(b);
	char *s = malloc(n + 1);

	evbuffer_copyout(b, s, n);
	s[n] = '\0';
	return s;
}

/* What a handler does first: claims its streaming body (nothing of it is read before). */
static void claim(struct http_sf *sf)
{
	struct http_req r = { .body = http_sf_body(sf) };

	if (r.body)
		http_body_get(&r);
}

/* The filter's input and a handler claiming each streaming body as it comes. */
static void input(struct http_sf *sf, struct evbuffer *src, struct evbuffer *dst)
{
	http_sf_input(sf, src, dst, -1);
	claim(sf);
	http_sf_input(sf, src, dst, -1);
}

/* Feeds s in pieces of `step` bytes (0: all at once); returns what evhttp would get. */
static char *feed(struct http_sf *sf, const char *s, size_t len, size_t step, struct evbuffer *dst)
{
	struct evbuffer *src = evbuffer_new();

	for (size_t at = 0; at < len;) {
		size_t n = step && step < len - at ? step : len - at;
		evbuffer_add(src, s + at, n);
		at += n;
		input(sf, src, dst);
	}
	input(sf, src, dst);
	evbuffer_free(src);
	return dup_buf(dst);
}

static char *body_text(struct http_sf *sf)
{
	struct http_body *b = http_sf_body(sf);
	struct evbuffer *out = evbuffer_new();
	char *s;

	if (b)
		http_body_read(b, out, SIZE_MAX);
	s = dup_buf(out);
	evbuffer_free(out);
	return s;
}

static void test_split(void)
{
	static const char req[] = "PUT /v1/sandboxes/sb-1/files?path=/a HTTP/1.1\r\nHost: x\r\n"
				  "Content-Length: 5\r\nX-Other: 1\r\n\r\nhello";
	struct http_sf *sf = http_sf_new(stream_routes, NSTREAM, 0);
	struct evbuffer *dst = evbuffer_new();
	char *out = feed(sf, req, sizeof(req) - 1, 0, dst), *body = body_text(sf);

	EXPECT(strcmp(out, "PUT /v1/sandboxes/sb-1/files?path=/a HTTP/1.1\r\nHost: x\r\nX-Other: 1\r\n"
			   "Content-Length: 0\r\n" HTTP_SF_HEADER ": 1\r\n\r\n") == 0);
	EXPECT(strcmp(body, "hello") == 0);
	EXPECT(http_sf_state(sf) == HTTP_SF_WAIT);
	EXPECT(http_body_done(http_sf_body(sf)));
	EXPECT_EQ(http_body_length(http_sf_body(sf)), 5);
	free(out);
	free(body);
	evbuffer_free(dst);
	http_sf_free(sf);
}

/* Several requests in one send: only one is taken at a time; the others pass byte for byte. */
static void test_pipeline(void)
{
	static const char a[] = "GET /v1/info HTTP/1.1\r\nHost: x\r\n\r\n";
	static const char b[] = "PUT /v1/sandboxes/s/files/tar HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
				"3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nTrailer: t\r\n\r\n";
	static const char c[] = "POST /v1/sandboxes HTTP/1.1\r\ncontent-length: 4\r\n\r\n{}\r\n";
	static const char d[] = "PUT /v1/sandboxes/s/files HTTP/1.1\r\nContent-Length: 0\r\n\r\n";
	struct http_sf *sf = http_sf_new(stream_routes, NSTREAM, 0);
	struct evbuffer *src = evbuffer_new(), *dst = evbuffer_new();
	char *out, *body;

	evbuffer_add_printf(src, "%s%s%s%s", a, b, c, d);
	input(sf, src, dst);
	out = dup_buf(dst);
	EXPECT(strcmp(out, a) == 0); /* then it waits for the reply */
	EXPECT(http_sf_state(sf) == HTTP_SF_WAIT);
	free(out);
	evbuffer_drain(dst, evbuffer_get_length(dst));
	http_sf_reply_done(sf);
	input(sf, src, dst);
	out = dup_buf(dst);
	EXPECT(strcmp(out, "PUT /v1/sandboxes/s/files/tar HTTP/1.1\r\nContent-Length: 0\r\n" HTTP_SF_HEADER
			   ": 1\r\n\r\n") == 0);
	body = body_text(sf);
	EXPECT(strcmp(body, "abcde") == 0);
	EXPECT(http_body_length(http_sf_body(sf)) == UINT64_MAX);
	free(out);
	free(body);
	evbuffer_drain(dst, evbuffer_get_length(dst));
	http_sf_reply_done(sf);
	input(sf, src, dst);
	out = dup_buf(dst);
	EXPECT(strcmp(out, c) == 0);
	free(out);
	evbuffer_drain(dst, evbuffer_get_length(dst));
	http_sf_reply_done(sf);
	input(sf, src, dst);
	out = dup_buf(dst);
	EXPECT(strstr(out, HTTP_SF_HEADER ": 2\r\n") != NULL);
	EXPECT(http_body_done(http_sf_body(sf)));
	EXPECT_EQ(evbuffer_get_length(src), 0);
	free(out);
	evbuffer_free(src);
	evbuffer_free(dst);
	http_sf_free(sf);
}

/* A chunked body cut at every byte, and given one byte at a time. */
static void test_chunked_splits(void)
{
	static const char req[] = "PUT /v1/sandboxes/s/files HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n"
				  "1a\r\nabcdefghijklmnopqrstuvwxyz\r\n10\r\n0123456789ABCDEF\r\n0\r\n\r\n"
				  "GET /next HTTP/1.1\r\n\r\n";
	size_t len = sizeof(req) - 1;
	int bad = 0;

	for (size_t cut = 0; cut <= len; cut++) {
		struct http_sf *sf = http_sf_new(stream_routes, NSTREAM, 0);
		struct evbuffer *src = evbuffer_new(), *dst = evbuffer_new();
		char *body;

		evbuffer_add(src, req, cut);
		input(sf, src, dst);
		evbuffer_add(src, req + cut, len - cut);
		input(sf, src, dst);
		body = body_text(sf);
		bad += strcmp(body, "abcdefghijklmnopqrstuvwxyz0123456789ABCDEF") != 0 ||
		       http_sf_state(sf) != HTTP_SF_WAIT || evbuffer_get_length(src) != 22;
		free(body);
		evbuffer_free(src);
		evbuffer_free(dst);
		http_sf_free(sf);
	}
	EXPECT_EQ(bad, 0);
	{
		struct http_sf *sf = http_sf_new(stream_routes, NSTREAM, 0);
		struct evbuffer *dst = evbuffer_new();
		char *out = feed(sf, req, len, 1, dst), *body = body_text(sf);
		EXPECT(strcmp(body, "abcdefghijklmnopqrstuvwxyz0123456789ABCDEF") == 0);
		EXPECT(strstr(out, "Transfer-Encoding") == NULL);
		free(out);
		free(body);
		evbuffer_free(dst);
		http_sf_free(sf);
	}
}

/* A client's own X-Space-Body-Stream never reaches evhttp. */
static void test_client_marker(void)
{
	static const char pass[] = "GET /v1/info HTTP/1.1\r\n" HTTP_SF_HEADER ": 1\r\nHost: x\r\n\r\n";
	static const char strm[] = "PUT /v1/sandboxes/s/files HTTP/1.1\r\nx-space-body-stream: 7\r\n"
				   "Content-Length: 2\r\n\r\nhi";
	struct http_sf *sf = http_sf_new(stream_routes, NSTREAM, 0);
	struct evbuffer *dst = evbuffer_new();
	char *out = feed(sf, pass, sizeof(pass) - 1, 0, dst);

	EXPECT(strcmp(out, "GET /v1/info HTTP/1.1\r\nHost: x\r\n\r\n") == 0);
	free(out);
	evbuffer_drain(dst, evbuffer_get_length(dst));
	http_sf_reply_done(sf);
	out = feed(sf, strm, sizeof(strm) - 1, 3, dst);
	EXPECT(strcmp(out, "PUT /v1/sandboxes/s/files HTTP/1.1\r\nContent-Length: 0\r\n" HTTP_SF_HEADER
			   ": 1\r\n\r\n") == 0);
	free(out);
	evbuffer_free(dst);
	http_sf_free(sf);
}

/* What the filter does not fully understand passes through untouched, for good. */
static void test_raw(void)
{
	static const char *const cases[] = {
		"GARBAGE\r\n\r\nPUT /v1/sandboxes/s/files HTTP/1.1\r\nContent-Length: 1\r\n\r\nx",
		"PUT /v1/sandboxes/s/files HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
		"PUT /v1/sandboxes/s/files HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\nx",
		"PUT /v1/sandboxes/s/files HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\nx",
		"PUT /v1/sandboxes/s/files HTTP/1.1\r\nX-A: 1\r\n folded\r\nContent-Length: 1\r\n\r\nx",
		"PUT /v1/sandboxes/s/files HTTP/1.1\r\nX-A: 1\rX\r\nContent-Length: 1\r\n\r\nx",
		"PUT /v1/sandboxes/s/files HTTP/1.1\r\nContent-Length: +1\r\n\r\nx",
		"PUT /v1/sandboxes/s/files HTTP/1.1\r\nExpect: something\r\nContent-Length: 1\r\n\r\nx",
		"PUT  /v1/sandboxes/s/files HTTP/1.1\r\nContent-Length: 1\r\n\r\nx",
		"PUT /v1/sandboxes/s/files HTTP/1.1 \r\nContent-Length: 1\r\n\r\nx",
		"HEAD /v1/info HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
		"PROPFIND /v1/info HTTP/1.1\r\n\r\n",
		"GET /v1/sessions/x/ws HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n\x81\x85",
		"\r\nGET /v1/info HTTP/1.1\r\n\r\n",
		"PUT /v1/sandboxes/s/files HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct http_sf *sf = http_sf_new(stream_routes, NSTREAM, 0);
		struct evbuffer *dst = evbuffer_new();
		size_t len = strlen(cases[i]);
		char *out = feed(sf, cases[i], len, 0, dst);
		bool ok = i == sizeof(cases) / sizeof(cases[0]) - 1
				  ? http_sf_state(sf) == HTTP_SF_DEAD && http_body_failed(http_sf_body(sf))
				  : strcmp(out, cases[i]) == 0 && http_sf_state(sf) == HTTP_SF_RAW;
		if (!ok)
			printf("# case %zu: state %d, got [%s]\n", i, http_sf_state(sf), out);
		EXPECT(ok);
		free(out);
		evbuffer_free(dst);
		http_sf_free(sf);
	}
}

/* The body buffer never holds more than its bound: reading stops, and goes on once drained. */
static void test_bound(void)
{
	struct http_sf *sf = http_sf_new(stream_routes, NSTREAM, 1000);
	struct evbuffer *src = evbuffer_new(), *dst = evbuffer_new(), *got = evbuffer_new();
	char *blk = malloc(5000);

	for (int i = 0; i < 5000; i++)
		blk[i] = (char)('a' + i % 26);
	evbuffer_add_printf(src, "PUT /v1/sandboxes/s/files HTTP/1.1\r\nContent-Length: 5000\r\n\r\n");
	evbuffer_add(src, blk, 5000);
	evbuffer_add_printf(src, "GET /after HTTP/1.1\r\n\r\n");
	input(sf, src, dst);
	if (!http_sf_body(sf)) {
		EXPECT(http_sf_body(sf) != NULL);
		return;
	}
	for (int round = 0; round < 20 && !http_body_done(http_sf_body(sf)); round++) {
		input(sf, src, dst);
		EXPECT(http_body_buffered(http_sf_body(sf)) <= 1000);
		http_body_read(http_sf_body(sf), got, 700);
	}
	EXPECT(http_body_done(http_sf_body(sf)));
	EXPECT_EQ(evbuffer_get_length(got), 5000);
	EXPECT(memcmp(evbuffer_pullup(got, -1), blk, 5000) == 0);
	EXPECT(http_sf_peak(sf) <= 1000);
	http_sf_reply_done(sf);
	evbuffer_drain(dst, evbuffer_get_length(dst));
	input(sf, src, dst);
	EXPECT_EQ(evbuffer_get_length(dst), strlen("GET /after HTTP/1.1\r\n\r\n"));
	free(blk);
	evbuffer_free(src);
	evbuffer_free(dst);
	evbuffer_free(got);
	http_sf_free(sf);
}

/* Nothing of a streaming body is read before a handler claims it. */
static void test_unclaimed(void)
{
	static const char req[] = "PUT /v1/sandboxes/s/files HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello";
	struct http_sf *sf = http_sf_new(stream_routes, NSTREAM, 0);
	struct evbuffer *src = evbuffer_new(), *dst = evbuffer_new();

	evbuffer_add(src, req, sizeof(req) - 1);
	http_sf_input(sf, src, dst, -1);
	EXPECT(http_sf_state(sf) == HTTP_SF_STREAM);
	EXPECT_EQ(evbuffer_get_length(src), 6); /* the head's last LF and the body wait */
	EXPECT_EQ(http_body_buffered(http_sf_body(sf)), 0);
	claim(sf);
	http_sf_input(sf, src, dst, -1);
	EXPECT_EQ(http_body_buffered(http_sf_body(sf)), 5);
	EXPECT(http_sf_state(sf) == HTTP_SF_WAIT);
	evbuffer_free(src);
	evbuffer_free(dst);
	http_sf_free(sf);
}

/* Answered before the whole body came: the rest is dropped and the next request goes through. */
static void test_discard(void)
{
	static const char req[] = "PUT /v1/sandboxes/s/files HTTP/1.1\r\nContent-Length: 10\r\n\r\n01234";
	static const char rest[] = "56789POST /x HTTP/1.1\r\nContent-Length: 2\r\n\r\nok";
	struct http_sf *sf = http_sf_new(stream_routes, NSTREAM, 0);
	struct evbuffer *dst = evbuffer_new();
	char *out = feed(sf, req, sizeof(req) - 1, 0, dst);

	free(out);
	http_sf_reply_done(sf);
	EXPECT(http_sf_state(sf) == HTTP_SF_DISCARD);
	EXPECT(http_sf_body(sf) == NULL);
	evbuffer_drain(dst, evbuffer_get_length(dst));
	out = feed(sf, rest, sizeof(rest) - 1, 4, dst);
	EXPECT(strcmp(out, "POST /x HTTP/1.1\r\nContent-Length: 2\r\n\r\nok") == 0);
	free(out);
	evbuffer_free(dst);
	http_sf_free(sf);
}

/* LF-only line ends are in the subset too; HTTP/1.0; the head's last byte comes alone. */
static void test_lf(void)
{
	static const char req[] = "PUT /v1/sandboxes/s/files HTTP/1.0\nContent-Length: 3\nX: y\n\nabc";
	struct http_sf *sf = http_sf_new(stream_routes, NSTREAM, 0);
	struct evbuffer *dst = evbuffer_new();
	char *out = feed(sf, req, sizeof(req) - 1, 1, dst), *body = body_text(sf);

	EXPECT(strcmp(out, "PUT /v1/sandboxes/s/files HTTP/1.0\nX: y\nContent-Length: 0\r\n" HTTP_SF_HEADER
			   ": 1\r\n\r\n") == 0);
	EXPECT(strcmp(body, "abc") == 0);
	free(out);
	free(body);
	evbuffer_free(dst);
	http_sf_free(sf);
}

/* ---- the head check (preauth.c): no body byte of a refused request reaches evhttp ---- */

static const struct http_route all_routes[] = {
	{ .method = EVHTTP_REQ_POST, .pattern = "/v1/sessions/{}/stdin", .fn = noop },
	{ .method = EVHTTP_REQ_PUT, .pattern = "/v1/sandboxes/{}/files", .fn = noop },
};

static int head_calls;

/* "Bearer good": authed; "Bearer bad" or none: refused; any other: unknown. */
static enum http_head_verdict test_head_auth(struct http_req *r, struct evkeyvalq *hdrs)
{
	const char *a = evhttp_find_header(hdrs, "Authorization");

	head_calls++;
	if (!r->next || !a || strcmp(a, "Bearer bad") == 0)
		return HTTP_HEAD_REFUSED;
	return strcmp(a, "Bearer good") == 0 ? HTTP_HEAD_AUTHED : HTTP_HEAD_UNKNOWN;
}

static const struct http_plane head_plane = {
	.name = "test", .routes = all_routes, .nroutes = 2, .max_body = 1 << 20, .head_auth = test_head_auth,
};

static char *head_feed(const char *req, enum http_sf_state *state)
{
	struct http_sf *sf = http_sf_new(stream_routes, NSTREAM, 0);
	struct evbuffer *dst = evbuffer_new();
	char *out;

	http_sf_set_plane(sf, &head_plane);
	out = feed(sf, req, strlen(req), 7, dst);
	*state = http_sf_state(sf);
	evbuffer_free(dst);
	http_sf_free(sf);
	return out;
}

/* A head whose Host a host front end claims (the port proxy): evhttp gets it bodiless and
 * marked, and nothing after it is read (the body, a pipelined request) until it is released. */
static bool takes_port_names(const struct http_plane *plane, const char *host, size_t n)
{
	(void)plane;
	return n > 10 && memcmp(host + n - 10, ".localhost", 10) == 0;
}

static void test_host_taken(void)
{
	static const char req[] = "POST /up HTTP/1.1\r\nHost: 8000-sb-1.localhost\r\nContent-Length: 5\r\n"
				  "Upgrade: x\r\n\r\nhelloGET / HTTP/1.1\r\nHost: a\r\n\r\n";
	struct http_plane plane = { .name = "data", .host_takes = takes_port_names };
	struct http_sf *sf = http_sf_new(stream_routes, NSTREAM, 0);
	struct evbuffer *src = evbuffer_new(), *dst = evbuffer_new();
	char *out, *rest;

	http_sf_set_plane(sf, &plane);
	evbuffer_add(src, req, strlen(req));
	for (int i = 0; i < 3; i++)
		http_sf_input(sf, src, dst, -1);
	out = dup_buf(dst);
	rest = dup_buf(src);
	EXPECT(strcmp(out, "POST /up HTTP/1.1\r\nHost: 8000-sb-1.localhost\r\nUpgrade: x\r\nContent-Length: 0\r\n"
			   HTTP_SF_HEADER ": " HTTP_SF_TAKE "\r\n\r\n") == 0);
	EXPECT(http_sf_state(sf) == HTTP_SF_TAKEN);
	EXPECT(strcmp(rest, "\nhelloGET / HTTP/1.1\r\nHost: a\r\n\r\n") == 0); /* from the head's last byte */
	EXPECT(!http_sf_release(sf)); /* not on a connection: nothing to hand over */
	free(out);
	free(rest);
	/* the reply instead of a takeover: the connection ends (its body was never read) */
	http_sf_reply_done(sf);
	EXPECT(http_sf_state(sf) == HTTP_SF_DEAD);
	http_sf_free(sf);
	/* a Host it does not claim, or two Host lines: not taken */
	sf = http_sf_new(stream_routes, NSTREAM, 0);
	http_sf_set_plane(sf, &plane);
	evbuffer_drain(dst, evbuffer_get_length(dst));
	out = feed(sf, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", strlen("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"), 0,
		   dst);
	EXPECT(http_sf_state(sf) == HTTP_SF_WAIT && !strstr(out, HTTP_SF_TAKE));
	free(out);
	http_sf_free(sf);
	sf = http_sf_new(stream_routes, NSTREAM, 0);
	http_sf_set_plane(sf, &plane);
	evbuffer_drain(dst, evbuffer_get_length(dst));
	{
		static const char two[] = "GET / HTTP/1.1\r\nHost: a.localhost\r\nHost: b.localhost\r\n\r\n";

		out = feed(sf, two, strlen(two), 0, dst);
	}
	EXPECT(http_sf_state(sf) != HTTP_SF_TAKEN && !strstr(out, HTTP_SF_TAKE));
	free(out);
	http_sf_free(sf);
	evbuffer_free(src);
	evbuffer_free(dst);
}

static void test_head_refused(void)
{
	enum http_sf_state st;
	char *out;

	/* no credentials: the head goes on without its body, marked; the rest is dropped */
	out = head_feed("POST /v1/sessions/ss-1/stdin HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n"
			"0123456789GET /next HTTP/1.1\r\n\r\n", &st);
	EXPECT(strcmp(out, "POST /v1/sessions/ss-1/stdin HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
			   HTTP_SF_HEADER ": " HTTP_SF_REFUSED "\r\n\r\n") == 0);
	EXPECT(st == HTTP_SF_DEAD);
	free(out);
	/* a wrong key, chunked, with Expect: the same, and no 100 Continue can follow */
	out = head_feed("POST /v1/sessions/ss-1/stdin HTTP/1.1\r\nAuthorization: Bearer bad\r\nExpect: 100-continue\r\n"
			"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", &st);
	EXPECT(strstr(out, HTTP_SF_HEADER ": " HTTP_SF_REFUSED) && !strstr(out, "hello") && !strstr(out, "Expect"));
	EXPECT(st == HTTP_SF_DEAD);
	free(out);
	/* no route: nothing of the body either */
	out = head_feed("POST /nowhere HTTP/1.1\r\nAuthorization: Bearer good\r\nContent-Length: 3\r\n\r\nabc", &st);
	EXPECT(strstr(out, HTTP_SF_REFUSED) && !strstr(out, "abc"));
	free(out);
}

static void test_head_passes(void)
{
	enum http_sf_state st;
	char *out;
	int before = head_calls;

	out = head_feed("POST /v1/sessions/ss-1/stdin HTTP/1.1\r\nAuthorization: Bearer good\r\n"
			"Content-Length: 3\r\n\r\nabc", &st);
	EXPECT(strcmp(out, "POST /v1/sessions/ss-1/stdin HTTP/1.1\r\nAuthorization: Bearer good\r\n"
			   "Content-Length: 3\r\n\r\nabc") == 0);
	EXPECT(st == HTTP_SF_WAIT);
	free(out);
	/* unknown credentials and no connection (so no budget): passed, byte for byte */
	out = head_feed("POST /v1/sessions/ss-1/stdin HTTP/1.1\r\nAuthorization: Bearer maybe\r\n"
			"Content-Length: 3\r\n\r\nabc", &st);
	EXPECT(strstr(out, "\r\n\r\nabc") != NULL && !strstr(out, HTTP_SF_HEADER));
	free(out);
	/* a request without a body is never checked here (its credentials are checked as always) */
	out = head_feed("GET /v1/sessions/ss-1 HTTP/1.1\r\nHost: x\r\n\r\n", &st);
	EXPECT(strcmp(out, "GET /v1/sessions/ss-1 HTTP/1.1\r\nHost: x\r\n\r\n") == 0);
	free(out);
	EXPECT_EQ(head_calls - before, 2);
}

/* A head outside the strict subset with a body: evhttp would read the body whole, unchecked;
 * it gets at most HTTP_SF_RAW_CAP of it, then the connection ends. Without a body it still goes
 * raw (an upgrade, say). */
static void test_head_unreadable(void)
{
	static const char dup[] = "POST /v1/sessions/ss-1/stdin HTTP/1.1\r\nContent-Length: 9\r\n"
				  "Content-Length: 9\r\n\r\n";
	enum http_sf_state st;
	size_t big = 3 * HTTP_SF_RAW_CAP;
	char *out, *req = malloc(sizeof(dup) + big);

	out = head_feed("POST /v1/sessions/ss-1/stdin HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
			&st);
	EXPECT(strstr(out, "abc") != NULL);
	EXPECT(st == HTTP_SF_RAW);
	free(out);
	memcpy(req, dup, sizeof(dup) - 1);
	memset(req + sizeof(dup) - 1, 'x', big);
	req[sizeof(dup) - 1 + big] = '\0';
	out = head_feed(req, &st);
	EXPECT(strlen(out) <= sizeof(dup) + HTTP_SF_RAW_CAP);
	EXPECT(st == HTTP_SF_DEAD);
	free(out);
	free(req);
	out = head_feed("GET /v1/sessions/ss-1/ws HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", &st);
	EXPECT(strstr(out, "Upgrade: websocket") != NULL);
	EXPECT(st == HTTP_SF_RAW);
	free(out);
}

static void test_head_headers(void)
{
	static const char h[] = "POST / HTTP/1.1\r\nA:1\r\nB-Name:   two words \t\r\nc:\r\n\r\n";
	struct evkeyvalq kv;

	EXPECT(http_head_headers(h, sizeof(h) - 1, &kv) == 0);
	EXPECT(strcmp(evhttp_find_header(&kv, "a"), "1") == 0);
	EXPECT(strcmp(evhttp_find_header(&kv, "b-name"), "two words") == 0);
	EXPECT(strcmp(evhttp_find_header(&kv, "C"), "") == 0);
	evhttp_clear_headers(&kv);
}

/* ---- through a real listener ---- */

#define BIG (getenv("TEST_BIG") ? (unsigned)atoi(getenv("TEST_BIG")) : (64u << 20))
#define SLOW_STEP (512u << 10)

static struct {
	uint64_t got, bad;
	size_t peak, max_buffered, sse_max_out;
	unsigned uploads, unclaimed_seen_marker, failed_bodies, plain_bodies, uploads_gone, sse_gone, early, aborts_gone;
	bool slow;
} srv;

static uint8_t pat(uint64_t i)
{
	return (uint8_t)(i * 7 + (i >> 9));
}

struct upload {
	struct http_hold hold;
	struct http_body *b;
	struct evhttp_request *req;
	struct http_sf *sf;
	struct event *tick;
	struct evbuffer *tmp;
	uint64_t n, bad;
};

static void upload_free(struct upload *u)
{
	http_body_notify(u->b, NULL, NULL);
	event_free(u->tick);
	evbuffer_free(u->tmp);
	free(u);
}

static void upload_gone(struct http_hold *h)
{
	srv.uploads_gone++;
	upload_free((struct upload *)h);
}

static void upload_step(struct upload *u)
{
	size_t buffered = http_body_buffered(u->b);

	if (buffered > srv.max_buffered)
		srv.max_buffered = buffered;
	if (http_body_failed(u->b)) {
		srv.failed_bodies++;
		http_hold_end(&u->hold);
		http_reply_error(u->req, 400, "bad_request", "malformed body");
		upload_free(u);
		return;
	}
	for (;;) {
		size_t n = http_body_read(u->b, u->tmp, srv.slow ? SLOW_STEP : SIZE_MAX);
		const uint8_t *p = evbuffer_pullup(u->tmp, -1);
		for (size_t k = 0; k < n; k++)
			u->bad += p[k] != pat(u->n + k);
		u->n += n;
		evbuffer_drain(u->tmp, n);
		if (!n || srv.slow)
			break;
	}
	if (http_body_done(u->b)) {
		srv.got = u->n;
		srv.bad = u->bad;
		srv.peak = http_sf_peak(u->sf);
		http_hold_end(&u->hold);
		http_reply_json(u->req, 200, json_pack("{s:I}", "size", (json_int_t)u->n));
		upload_free(u);
		return;
	}
	if (srv.slow) {
		struct timeval tv = { .tv_usec = 2000 };
		evtimer_add(u->tick, &tv);
	}
}

static void upload_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	upload_step(arg);
}

static void upload_notify(struct http_body *b, void *arg)
{
	struct upload *u = arg;

	(void)b;
	if (srv.slow && event_pending(u->tick, EV_TIMEOUT, NULL))
		return; /* the timer paces it */
	upload_step(u);
}

/* ?limit=N: reads N bytes, then answers 413 with the rest unread. */
struct early {
	struct http_hold hold;
	struct http_body *b;
	struct evhttp_request *req;
	struct evbuffer *tmp;
	uint64_t limit, n;
};

static void early_gone(struct http_hold *h)
{
	struct early *e = (struct early *)h;

	evbuffer_free(e->tmp);
	free(e);
}

static void early_notify(struct http_body *b, void *arg)
{
	struct early *e = arg;

	e->n += http_body_read(b, e->tmp, SIZE_MAX);
	evbuffer_drain(e->tmp, evbuffer_get_length(e->tmp));
	if (e->n < e->limit && !http_body_done(b) && !http_body_failed(b))
		return;
	srv.early++;
	http_body_notify(b, NULL, NULL);
	http_hold_end(&e->hold);
	http_reply_error(e->req, 413, "payload_too_large", "read %llu bytes, enough", (unsigned long long)e->n);
	early_gone(&e->hold);
}

/* PUT /v1/sandboxes/{}/files: streams (checks the pattern); ?deny=1 answers 401 unread. */
static void h_upload(struct http_req *r)
{
	struct http_body *b;
	struct upload *u;
	uint64_t limit = 0;

	if (http_query(r, "deny")) {
		http_reply_error(r->req, 401, "unauthorized", "no");
		return;
	}
	b = http_body_get(r);
	if (b && http_query(r, "limit") && http_parse_u64(http_query(r, "limit"), &limit) == 0) {
		struct early *e = calloc(1, sizeof(*e));
		e->b = b;
		e->req = r->req;
		e->limit = limit;
		e->tmp = evbuffer_new();
		http_hold_begin(&e->hold, r->req, early_gone, r->d->conns);
		http_body_notify(b, early_notify, e);
		return;
	}
	if (!b) {
		srv.plain_bodies++;
		http_reply_json(r->req, 200, json_pack("{s:I}", "size",
						       (json_int_t)evbuffer_get_length(evhttp_request_get_input_buffer(r->req))));
		return;
	}
	srv.uploads++;
	u = calloc(1, sizeof(*u));
	u->b = b;
	u->req = r->req;
	u->sf = http_conn_sf(r->conn);
	u->tmp = evbuffer_new();
	u->tick = evtimer_new(r->d->base, upload_tick, u);
	http_hold_begin(&u->hold, r->req, upload_gone, r->d->conns);
	http_body_notify(b, upload_notify, u);
}

/* PUT .../files/tar: echoes the body back (text). */
struct echo {
	struct http_hold hold;
	struct http_body *b;
	struct evhttp_request *req;
	struct evbuffer *acc;
};

static void echo_gone(struct http_hold *h)
{
	struct echo *e = (struct echo *)h;

	evbuffer_free(e->acc);
	free(e);
}

static void echo_notify(struct http_body *b, void *arg)
{
	struct echo *e = arg;

	if (http_body_failed(b)) {
		srv.failed_bodies++;
		http_hold_end(&e->hold);
		http_reply_error(e->req, 400, "bad_request", "malformed body");
		echo_gone(&e->hold);
		return;
	}
	http_body_read(b, e->acc, SIZE_MAX);
	if (!http_body_done(b))
		return;
	http_hold_end(&e->hold);
	evhttp_send_reply(e->req, 200, "OK", e->acc);
	echo_gone(&e->hold);
}

static void h_echo_stream(struct http_req *r)
{
	struct http_body *b = http_body_get(r);
	struct echo *e;

	if (!b) {
		evhttp_send_reply(r->req, 200, "OK", evhttp_request_get_input_buffer(r->req));
		return;
	}
	e = calloc(1, sizeof(*e));
	e->b = b;
	e->req = r->req;
	e->acc = evbuffer_new();
	http_hold_begin(&e->hold, r->req, echo_gone, r->d->conns);
	http_body_notify(b, echo_notify, e);
}

/* POST /echo (not streaming): the body evhttp read, and whether a marker got through. */
static void h_echo(struct http_req *r)
{
	if (evhttp_find_header(evhttp_request_get_input_headers(r->req), HTTP_SF_HEADER) || http_body_get(r))
		srv.unclaimed_seen_marker++;
	evhttp_send_reply(r->req, 200, "OK", evhttp_request_get_input_buffer(r->req));
}

static void h_ping(struct http_req *r)
{
	http_reply_json(r->req, 200, json_pack("{s:b}", "ok", 1));
}

/* GET /big?n=N: N bytes of the pattern in one reply (the client may ask to close after it). */
static void h_big(struct http_req *r)
{
	const char *n = http_query(r, "n");
	uint64_t len = 0;
	struct evbuffer *b = evbuffer_new();
	uint8_t *blk = malloc(65536);

	http_parse_u64(n ? n : "0", &len);
	for (uint64_t at = 0; at < len;) {
		size_t k = len - at < 65536 ? (size_t)(len - at) : 65536;
		for (size_t i = 0; i < k; i++)
			blk[i] = pat(at + i);
		evbuffer_add(b, blk, k);
		at += k;
	}
	free(blk);
	evhttp_send_reply(r->req, 200, "OK", b);
	evbuffer_free(b);
}

/* GET /sse?n=N: a held, chunked reply paced like dp_attach's (the output under 512 KiB, more when a
 * chunk has gone); n=0 never ends. */
struct sse {
	struct http_hold hold;
	struct evbuffer *chunk;
	uint64_t n, at;
};

static void sse_gone(struct http_hold *h)
{
	struct sse *c = (struct sse *)h;

	srv.sse_gone++;
	evbuffer_free(c->chunk);
	free(c);
}

static void sse_pump(struct sse *c);

static void sse_flushed(struct evhttp_connection *evcon, void *arg)
{
	(void)evcon;
	sse_pump(arg);
}

static void sse_pump(struct sse *c)
{
	struct evbuffer *out = bufferevent_get_output(evhttp_connection_get_bufferevent(c->hold.evcon));
	uint8_t blk[4096];

	while (evbuffer_get_length(out) < (512u << 10) && (c->n == 0 || c->at < c->n)) {
		for (int k = 0; k < 16; k++) {
			for (size_t i = 0; i < sizeof(blk); i++)
				blk[i] = pat(c->at + i);
			evbuffer_add(c->chunk, blk, sizeof(blk));
			c->at += sizeof(blk);
		}
		evhttp_send_reply_chunk_with_cb(c->hold.req, c->chunk, sse_flushed, c);
		if (evbuffer_get_length(out) > srv.sse_max_out)
			srv.sse_max_out = evbuffer_get_length(out);
	}
	if (c->n && c->at >= c->n) {
		struct evhttp_request *req = c->hold.req;
		http_hold_end(&c->hold);
		evhttp_send_reply_end(req);
		evbuffer_free(c->chunk);
		free(c);
	}
}

static void h_sse(struct http_req *r)
{
	struct sse *c = calloc(1, sizeof(*c));
	uint64_t n = 0;

	http_parse_u64(http_query(r, "n") ? http_query(r, "n") : "0", &n);
	c->n = n;
	c->chunk = evbuffer_new();
	evhttp_add_header(evhttp_request_get_output_headers(r->req), "Content-Type", "text/event-stream");
	http_hold_begin(&c->hold, r->req, sse_gone, r->d->conns);
	evhttp_send_reply_start(r->req, 200, "OK");
	sse_pump(c);
}

/* GET /abort: a reply that starts, then is cut the way files_op.c's fop_abort cuts one (the
 * connection freed from an event of ours, outside evhttp's callbacks). */
struct abort_reply {
	struct http_hold hold;
	struct event *kick;
};

static void abort_gone(struct http_hold *h)
{
	struct abort_reply *a = (struct abort_reply *)h;

	srv.aborts_gone++;
	event_free(a->kick);
	free(a);
}

static void abort_kick(evutil_socket_t fd, short what, void *arg)
{
	struct abort_reply *a = arg;

	(void)fd;
	(void)what;
	evhttp_connection_free(a->hold.evcon); /* closecb -> on_gone frees a */
}

static void h_abort(struct http_req *r)
{
	struct abort_reply *a = calloc(1, sizeof(*a));
	struct evbuffer *chunk = evbuffer_new();

	a->kick = event_new(r->d->base, -1, 0, abort_kick, a);
	http_hold_begin(&a->hold, r->req, abort_gone, r->d->conns);
	evhttp_send_reply_start(r->req, 200, "OK");
	evbuffer_add(chunk, "partial", 7);
	evhttp_send_reply_chunk(r->req, chunk);
	evbuffer_free(chunk);
	event_active(a->kick, 0, 0);
}

static const struct http_route routes[] = {
	{ .method = EVHTTP_REQ_GET, .pattern = "/abort", .fn = h_abort },
	{ .method = EVHTTP_REQ_GET, .pattern = "/sse", .fn = h_sse },
	{ .method = EVHTTP_REQ_PUT, .pattern = "/v1/sandboxes/{}/files", .fn = h_upload },
	{ .method = EVHTTP_REQ_PUT, .pattern = "/v1/sandboxes/{}/files/tar", .fn = h_echo_stream },
	{ .method = EVHTTP_REQ_POST, .pattern = "/echo", .fn = h_echo },
	{ .method = EVHTTP_REQ_GET, .pattern = "/ping", .fn = h_ping },
	{ .method = EVHTTP_REQ_GET, .pattern = "/big", .fn = h_big },
};

static bool body_is(const char *got, size_t n, const char *want)
{
	return n == strlen(want) && memcmp(got, want, n) == 0;
}

/* Sends the pattern: n bytes with Content-Length, in pieces. */
static int send_pattern(int fd, uint64_t n)
{
	uint8_t *blk = malloc(1 << 20);
	int rc = 0;

	for (uint64_t at = 0; at < n && rc == 0;) {
		size_t k = n - at < (1 << 20) ? (size_t)(n - at) : (1 << 20);
		for (size_t i = 0; i < k; i++)
			blk[i] = pat(at + i);
		rc = cl_send(fd, blk, k);
		at += k;
	}
	free(blk);
	return rc;
}

static void client_upload(struct test_server *ts)
{
	int fd = cl_connect(ts->port), status = 0;
	char head[4096], *body = NULL;
	size_t blen = 0;

	/* 64 MiB read slowly, then a second request on the same connection. */
	srv.slow = true;
	dprintf(fd, "PUT /v1/sandboxes/sb-1/files?path=/big HTTP/1.1\r\nHost: t\r\nContent-Length: %u\r\n\r\n", BIG);
	CHECK(send_pattern(fd, BIG) == 0, "a 64 MiB body is sent while the handler reads it slowly");
	CHECK(cl_response(fd, &status, head, sizeof(head), &body, &blen) == 0 && status == 200 &&
		      (unsigned)strtoul(strchr(body, ':') ? strchr(body, ':') + 1 : "0", NULL, 10) == BIG,
	      "the upload is answered 200 with its size");
	free(body);
	body = NULL;
	srv.slow = false;
	cl_sends(fd, "GET /ping HTTP/1.1\r\nHost: t\r\n\r\n");
	CHECK(cl_response(fd, &status, NULL, 0, &body, &blen) == 0 && status == 200,
	      "a second request on the same keep-alive connection is answered");
	free(body);
	body = NULL;

	/* chunked, with Expect: 100-continue: the client waits for 100 before sending. */
	cl_sends(fd, "PUT /v1/sandboxes/sb-1/files/tar HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
		     "Expect: 100-continue\r\n\r\n");
	CHECK(cl_head(fd, head, sizeof(head)) == 0 && strcmp(head, "HTTP/1.1 100 Continue\r\n\r\n") == 0,
	      "100 Continue comes when the handler takes the body");
	cl_sends(fd, "5\r\nhello\r\n7\r\n, world\r\n0\r\n\r\n");
	CHECK(cl_response(fd, &status, head, sizeof(head), &body, &blen) == 0 && status == 200 &&
		      body_is(body, blen, "hello, world") && !strstr(head, "Connection: close"),
	      "a chunked streaming body arrives decoded, and the connection stays");
	free(body);
	body = NULL;

	/* a non-streaming route's body, on the same (filtered) connection */
	cl_sends(fd, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n" HTTP_SF_HEADER ": 3\r\n\r\nhello world");
	CHECK(cl_response(fd, &status, NULL, 0, &body, &blen) == 0 && status == 200 &&
		      body_is(body, blen, "hello world"),
	      "a non-streaming route gets its body from evhttp, as before");
	free(body);
	body = NULL;

	/* evhttp's own 100 Continue, for a route whose body it reads */
	cl_sends(fd, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
	CHECK(cl_head(fd, head, sizeof(head)) == 0 && strcmp(head, "HTTP/1.1 100 Continue\r\n\r\n") == 0,
	      "a non-streaming route's Expect: 100-continue is still evhttp's to answer");
	cl_sends(fd, "hello");
	CHECK(cl_response(fd, &status, NULL, 0, &body, &blen) == 0 && status == 200 && body_is(body, blen, "hello"),
	      "... and its body arrives");
	free(body);
	body = NULL;

	/* 401 before the body is read: the rest (8 MiB) is dropped and the connection goes on */
	dprintf(fd, "PUT /v1/sandboxes/sb-1/files?deny=1 HTTP/1.1\r\nHost: t\r\nContent-Length: %u\r\n\r\n", 8u << 20);
	CHECK(send_pattern(fd, 8u << 20) == 0, "the client can send the whole body of a refused upload");
	CHECK(cl_response(fd, &status, head, sizeof(head), &body, &blen) == 0 && status == 401,
	      "a 401 before the body is read");
	free(body);
	body = NULL;
	cl_sends(fd, "GET /ping HTTP/1.1\r\nHost: t\r\n\r\n");
	CHECK(cl_response(fd, &status, NULL, 0, &body, &blen) == 0 && status == 200,
	      "the connection serves the next request after the dropped body");
	free(body);
	body = NULL;

	/* pipelined: stream, plain, stream (chunked), plain with a body, all in one send */
	cl_sends(fd, "PUT /v1/sandboxes/a/files/tar HTTP/1.1\r\nContent-Length: 3\r\n\r\nonePOST /echo HTTP/1.1\r\n"
		     "Content-Length: 3\r\n\r\ntwoPUT /v1/sandboxes/a/files/tar HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
		     "\r\n5\r\nthree\r\n0\r\n\r\nPOST /echo HTTP/1.1\r\nContent-Length: 4\r\n\r\nfourGET /ping HTTP/1.1\r\n\r\n");
	{
		static const char *const want[] = { "one", "two", "three", "four" };
		int ok = 0;
		for (int i = 0; i < 4; i++) {
			if (cl_response(fd, &status, NULL, 0, &body, &blen) == 0 && status == 200 && body_is(body, blen, want[i]))
				ok++;
			free(body);
			body = NULL;
		}
		ok += cl_response(fd, &status, NULL, 0, &body, &blen) == 0 && status == 200;
		free(body);
		body = NULL;
		CHECK(ok == 5, "five pipelined requests (two streaming) are answered in order");
	}

	/* a reply far bigger than the socket buffers, then the connection closes: all of it arrives */
	dprintf(fd, "GET /big?n=%u HTTP/1.1\r\nConnection: close\r\n\r\n", 8u << 20);
	{
		bool ok = cl_response(fd, &status, NULL, 0, &body, &blen) == 0 && status == 200 && blen == (8u << 20);
		for (size_t i = 0; ok && i < blen; i++)
			ok = (uint8_t)body[i] == pat(i);
		CHECK(ok && cl_eof(fd), "an 8 MiB reply with Connection: close arrives whole before the close");
		free(body);
		body = NULL;
	}
	close(fd);

	/* Expect: 100-continue refused unread: 401 and the connection closes */
	fd = cl_connect(ts->port);
	cl_sends(fd, "PUT /v1/sandboxes/sb-1/files?deny=1 HTTP/1.1\r\nContent-Length: 100000\r\n"
		     "Expect: 100-continue\r\n\r\n");
	CHECK(cl_response(fd, &status, head, sizeof(head), &body, &blen) == 0 && status == 401 &&
		      strstr(head, "Connection: close") && cl_eof(fd),
	      "a refused Expect: 100-continue upload gets its 401 and the connection closes");
	free(body);
	body = NULL;
	close(fd);

	/* a malformed chunked body: the handler hears of it, answers 400, the connection closes */
	fd = cl_connect(ts->port);
	cl_sends(fd, "PUT /v1/sandboxes/a/files/tar HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nZZ\r\n");
	CHECK(cl_response(fd, &status, head, sizeof(head), &body, &blen) == 0 && status == 400 && cl_eof(fd),
	      "a malformed chunked body fails: 400, then the connection closes");
	free(body);
	body = NULL;
	close(fd);

	/* a malformed request passes through to evhttp, which answers it */
	fd = cl_connect(ts->port);
	cl_sends(fd, "GARBAGE\r\n\r\n");
	CHECK(cl_response(fd, &status, NULL, 0, &body, &blen) == 0 && status == 400,
	      "a malformed request is evhttp's to answer (400)");
	free(body);
	body = NULL;
	close(fd);

	/* the handler reads part of the body and answers: the rest is dropped, keep-alive goes on */
	fd = cl_connect(ts->port);
	dprintf(fd, "PUT /v1/sandboxes/sb-1/files?limit=100000 HTTP/1.1\r\nContent-Length: %u\r\n\r\n", 4u << 20);
	send_pattern(fd, 4u << 20);
	CHECK(cl_response(fd, &status, NULL, 0, &body, &blen) == 0 && status == 413,
	      "a handler that has read enough answers before the end of the body");
	free(body);
	body = NULL;
	cl_sends(fd, "GET /ping HTTP/1.1\r\n\r\n");
	CHECK(cl_response(fd, &status, NULL, 0, &body, &blen) == 0 && status == 200,
	      "... and the connection serves the next request");
	free(body);
	body = NULL;

	/* a held, chunked reply (like attach's events) through the filter, paced by its callback */
	{
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		cl_sends(fd, "GET /sse?n=33554432 HTTP/1.1\r\n\r\n");
		bool ok = cl_response(fd, &status, NULL, 0, &body, &blen) == 0 && status == 200 && blen == (32u << 20);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		for (size_t i = 0; ok && i < blen; i++)
			ok = (uint8_t)body[i] == pat(i);
		double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
		CHECK(ok, "32 MiB of held, chunked reply arrive intact through the filter (%.0f MB/s)",
		      (double)blen / 1e6 / s);
		free(body);
		body = NULL;
	}
	cl_sends(fd, "GET /sse HTTP/1.1\r\n\r\n");
	{
		char h[4096], chunk[65536];
		CHECK(cl_head(fd, h, sizeof(h)) == 0 && cl_recv(fd, chunk, sizeof(chunk)) == 0,
		      "an endless stream starts on the same connection");
	}
	close(fd); /* its on_gone must run */
}

static bool sse_ended(struct test_server *ts)
{
	(void)ts;
	return srv.sse_gone == 1;
}

static int allow_all(struct http_req *r)
{
	(void)r;
	return 0;
}

static void test_listener(void)
{
	struct http_limits lim = { .max_conns = 64, .max_conns_per_client = 64, .request_timeout_s = 10 };
	struct test_server ts = { 0 };

	ts.plane.routes = routes;
	ts.plane.nroutes = sizeof(routes) / sizeof(routes[0]);
	ts.plane.stream_routes = stream_routes;
	ts.plane.nstream_routes = NSTREAM;
	ts.plane.auth = allow_all;
	if (!CHECK(ts_start(&ts, &lim) == 0, "a listener with stream routes on 127.0.0.1"))
		return;
	ts_run_client(&ts, client_upload, 120);
	CHECK(srv.got == BIG && srv.bad == 0, "the handler got all 64 MiB intact (%llu bytes, %llu wrong)",
	      (unsigned long long)srv.got, (unsigned long long)srv.bad);
	CHECK(srv.peak <= HTTP_BODY_BUFFER && srv.max_buffered <= HTTP_BODY_BUFFER,
	      "the body buffer never held more than %u bytes (peak %zu)", HTTP_BODY_BUFFER, srv.peak);
	CHECK(srv.unclaimed_seen_marker == 0, "a client's " HTTP_SF_HEADER " never reaches a handler");
	CHECK(srv.failed_bodies == 1, "the malformed body was reported to its handler once");
	CHECK(srv.plain_bodies == 0, "every upload streamed");
	CHECK(srv.early == 1, "the early answer was given once");
	CHECK(srv.sse_max_out < (512u << 10) + (64u << 10) + 64,
	      "the held reply's output buffer stayed under its mark (%zu)", srv.sse_max_out);
	{
		bool gone = ts_spin_until(&ts, sse_ended, 5000);
		CHECK(gone, "a held stream's client that hangs up is noticed through the filter (on_gone)");
	}
	bool none = ts_spin_until(&ts, ts_no_conns, 5000);
	CHECK(none, "every connection is gone from conn.c's count (%u)", http_conns_count(ts.d.conns));
	CHECK(ts_freed_events(&ts) == 0, "no event of a freed connection is left in the loop");
	ts_stop(&ts);
}

/* A 1 s request timeout and at most 3 connections per client. */
static void client_limits(struct test_server *ts)
{
	int fd = cl_connect(ts->port), fds[3], status = 0;
	char head[4096], *body = NULL;
	size_t blen = 0;
	struct timespec t0, t1;

	/* a body that stops coming: the handler hears it failed, answers 400, the connection closes */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cl_sends(fd, "PUT /v1/sandboxes/a/files HTTP/1.1\r\nContent-Length: 1000\r\n\r\npart");
	bool ok = cl_response(fd, &status, head, sizeof(head), &body, &blen) == 0 && status == 400 && cl_eof(fd);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CHECK(ok && t1.tv_sec - t0.tv_sec < 5, "a body with no byte for the request timeout fails: 400, then closed");
	free(body);
	body = NULL;
	close(fd);

	/* a client that hangs up in the middle of an upload: the handler's on_gone runs */
	fd = cl_connect(ts->port);
	cl_sends(fd, "PUT /v1/sandboxes/a/files HTTP/1.1\r\nContent-Length: 100000000\r\n\r\n");
	send_pattern(fd, 3u << 20);
	usleep(100000);
	close(fd);

	/* a reply cut by the server after it began (files_op.c's fop_abort): the client gets a short
	 * body, then the close */
	fd = cl_connect(ts->port);
	cl_sends(fd, "GET /abort HTTP/1.1\r\n\r\n");
	{
		char sink[4096];
		size_t got = 0;
		ssize_t n;
		bool started = cl_head(fd, head, sizeof(head)) == 0 && sscanf(head, "HTTP/1.1 %d", &status) == 1 &&
			       status == 200;
		while (started && (n = recv(fd, sink, sizeof(sink), 0)) > 0)
			got += (size_t)n;
		CHECK(started && got > 0 && got < 20, "a reply cut after it began: part of it, then the close (%zu bytes)",
		      got);
	}
	close(fd);

	/* a client that hangs up in the middle of a download, with our output queued */
	fd = cl_connect(ts->port);
	cl_sends(fd, "GET /sse HTTP/1.1\r\n\r\n");
	{
		char h[4096], chunk[65536];
		CHECK(cl_head(fd, h, sizeof(h)) == 0 && cl_recv(fd, chunk, sizeof(chunk)) == 0,
		      "a download starts; its client hangs up with the reply half read");
	}
	close(fd);

	/* the per-client cap holds on filtered connections: 429 JSON, then the close */
	for (int i = 0; i < 3; i++)
		fds[i] = cl_connect(ts->port);
	usleep(100000);
	fd = cl_connect(ts->port);
	CHECK(cl_response(fd, &status, head, sizeof(head), &body, &blen) == 0 && status == 429 &&
		      strstr(body, "at_capacity") && cl_eof(fd),
	      "over the per-client cap: 429 at_capacity, then closed");
	free(body);
	close(fd);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
}

static bool upload_ended(struct test_server *ts)
{
	(void)ts;
	return srv.uploads_gone == 1;
}

static void test_listener_limits(void)
{
	struct http_limits lim = { .max_conns = 64, .max_conns_per_client = 3, .request_timeout_s = 1 };
	struct test_server ts = { 0 };

	memset(&srv, 0, sizeof(srv));
	ts.plane.routes = routes;
	ts.plane.nroutes = sizeof(routes) / sizeof(routes[0]);
	ts.plane.stream_routes = stream_routes;
	ts.plane.nstream_routes = NSTREAM;
	ts.plane.auth = allow_all;
	int saved = http_timeout_s;

	http_timeout_s = 3; /* run past below */
	if (!CHECK(ts_start(&ts, &lim) == 0, "a listener with a 1 s request timeout and 3 connections per client")) {
		http_timeout_s = saved;
		return;
	}
	ts_run_client(&ts, client_limits, 60);
	CHECK(srv.failed_bodies == 1, "the stalled body was reported failed");
	bool gone = ts_spin_until(&ts, upload_ended, 5000);
	CHECK(gone, "an upload whose client hung up ends in on_gone");
	CHECK(ts_spin_until(&ts, sse_ended, 5000) && srv.aborts_gone == 1,
	      "the cut reply and the download whose client hung up end in on_gone");
	bool none = ts_spin_until(&ts, ts_no_conns, 5000);
	CHECK(none, "every connection is gone from conn.c's count (%u)", http_conns_count(ts.d.conns));
	CHECK(ts_freed_events(&ts) == 0, "no event of a freed connection is left in the loop");
	ts_run_for(&ts, 4000);
	CHECK(ts_freed_events(&ts) == 0 && http_conns_count(ts.d.conns) == 0,
	      "the loop runs past every timeout (3 s) those connections had");
	ts_stop(&ts);
	http_timeout_s = saved;
}

int main(void)
{
	if (getenv("SPACE_DEBUG"))
		log_set_level(LOG_DEBUG);
	RUN(test_split);
	RUN(test_pipeline);
	RUN(test_chunked_splits);
	RUN(test_client_marker);
	RUN(test_raw);
	RUN(test_bound);
	RUN(test_unclaimed);
	RUN(test_discard);
	RUN(test_lf);
	RUN(test_host_taken);
	RUN(test_head_refused);
	RUN(test_head_passes);
	RUN(test_head_unreadable);
	RUN(test_head_headers);
	test_listener();
	test_listener_limits();
	return DONE();
}
