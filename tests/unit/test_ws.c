/* test_ws.c -- WebSocket: the pure parts (frame parser and encoder, accept key, handshake checks,
 * UTF-8), then connections through a real evhttp listener (ws_accept from a route handler):
 * echo of text and binary, a 1 MiB message, fragments with a ping between them, the close
 * handshake, protocol errors (1002, 1007, 1009), bad handshakes, a server-initiated close, the
 * keepalive, flow control by on_writable and pausing, a client that vanishes; the connection
 * count must return to 0 and every ws be freed (ASan). All of it on a plain listener and on one
 * whose connections go through the stream filter (stream.h). Then clients that vanish every way
 * and connections freed from inside libevent's callbacks, with 1 s HTTP timeouts and the loop run
 * past them: no event of a freed connection may be left in it. */
#include <event2/buffer.h>
#include <sys/queue.h>
#include <openssl/evp.h>

#include "daemon/http/ws.h"
#include "log.h"
#include "test_http_server.h"

/* ---- the client's frames (masked unless told) ---- */

static size_t mk_frame(uint8_t *out, bool fin, uint8_t op, const void *data, size_t len, bool masked, int lenform)
{
	static const uint8_t key[4] = { 0x37, 0xfa, 0x21, 0x3d };
	size_t at = 2;

	out[0] = (uint8_t)((fin ? 0x80 : 0) | op);
	if (lenform == 0 && len <= 125) {
		out[1] = (uint8_t)len;
	} else if ((lenform == 0 || lenform == 126) && len <= 0xffff) {
		out[1] = 126;
		out[2] = (uint8_t)(len >> 8);
		out[3] = (uint8_t)len;
		at = 4;
	} else {
		out[1] = 127;
		for (int i = 0; i < 8; i++)
			out[2 + i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
		at = 10;
	}
	if (masked) {
		out[1] |= 0x80;
		memcpy(out + at, key, 4);
		at += 4;
	}
	for (size_t i = 0; i < len; i++)
		out[at + i] = ((const uint8_t *)data)[i] ^ (masked ? key[i & 3] : 0);
	return at + len;
}

/* Feeds buf to a fresh rx in pieces of step bytes (0: whole); returns the events in order. */
static int rx_events(struct ws_rx *rx, const uint8_t *buf, size_t len, size_t step, enum ws_rx_ev *ev, int max)
{
	int n = 0;
	size_t at = 0;

	while (at < len && n < max) {
		size_t piece = step && step < len - at ? step : len - at, used = 0;
		enum ws_rx_ev e = ws_rx_feed(rx, buf + at, piece, &used);
		at += used;
		if (e != WS_RX_MORE)
			ev[n++] = e;
		if (e == WS_RX_ERROR)
			break;
	}
	return n;
}

static void test_accept_key(void)
{
	char out[WS_ACCEPT_LEN + 1];

	ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", out);
	EXPECT(strcmp(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=") == 0);
}

static void test_handshake(void)
{
	struct evkeyvalq h;
	char acc[WS_ACCEPT_LEN + 1];
	const char *why = NULL;

	TAILQ_INIT(&h);
	evhttp_add_header(&h, "Upgrade", "WebSocket");
	evhttp_add_header(&h, "Connection", "keep-alive, Upgrade");
	evhttp_add_header(&h, "Sec-WebSocket-Version", "13");
	evhttp_add_header(&h, "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==");
	EXPECT_EQ(ws_handshake_check(EVHTTP_REQ_GET, &h, acc, &why), 0);
	EXPECT(strcmp(acc, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=") == 0);
	EXPECT_EQ(ws_handshake_check(EVHTTP_REQ_POST, &h, acc, &why), 400);
	evhttp_remove_header(&h, "Sec-WebSocket-Version");
	evhttp_add_header(&h, "Sec-WebSocket-Version", "8");
	EXPECT_EQ(ws_handshake_check(EVHTTP_REQ_GET, &h, acc, &why), 426);
	evhttp_remove_header(&h, "Sec-WebSocket-Version");
	evhttp_add_header(&h, "Sec-WebSocket-Version", "13");
	evhttp_remove_header(&h, "Sec-WebSocket-Key");
	evhttp_add_header(&h, "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=");
	EXPECT_EQ(ws_handshake_check(EVHTTP_REQ_GET, &h, acc, &why), 400);
	evhttp_remove_header(&h, "Sec-WebSocket-Key");
	evhttp_add_header(&h, "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25j*Q==");
	EXPECT_EQ(ws_handshake_check(EVHTTP_REQ_GET, &h, acc, &why), 400);
	evhttp_remove_header(&h, "Sec-WebSocket-Key");
	evhttp_add_header(&h, "Sec-WebSocket-Key", "AAAAAAAAAAAAAAAAAAAAAA==");
	evhttp_remove_header(&h, "Connection");
	evhttp_add_header(&h, "Connection", "keep-alive");
	EXPECT_EQ(ws_handshake_check(EVHTTP_REQ_GET, &h, acc, &why), 400);
	evhttp_remove_header(&h, "Connection");
	evhttp_add_header(&h, "Connection", "upgrade");
	evhttp_remove_header(&h, "Upgrade");
	EXPECT_EQ(ws_handshake_check(EVHTTP_REQ_GET, &h, acc, &why), 400);
	evhttp_clear_headers(&h);
	EXPECT(ws_header_has_token("a, b ,Upgrade", "upgrade"));
	EXPECT(!ws_header_has_token("upgrades", "upgrade"));
	EXPECT(!ws_header_has_token(NULL, "upgrade"));
}

static void test_utf8(void)
{
	EXPECT(ws_utf8_valid((const uint8_t *)"", 0));
	EXPECT(ws_utf8_valid((const uint8_t *)"plain ascii", 11));
	EXPECT(ws_utf8_valid((const uint8_t *)"\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 15));
	EXPECT(ws_utf8_valid((const uint8_t *)"\xf4\x8f\xbf\xbf", 4));  /* U+10FFFF */
	EXPECT(!ws_utf8_valid((const uint8_t *)"\xc0\x80", 2));         /* overlong NUL */
	EXPECT(!ws_utf8_valid((const uint8_t *)"\xe0\x80\xaf", 3));     /* overlong / */
	EXPECT(!ws_utf8_valid((const uint8_t *)"\xed\xa0\x80", 3));     /* a surrogate */
	EXPECT(!ws_utf8_valid((const uint8_t *)"\xf4\x90\x80\x80", 4)); /* past U+10FFFF */
	EXPECT(!ws_utf8_valid((const uint8_t *)"\xe2\x82", 2));         /* cut short */
	EXPECT(!ws_utf8_valid((const uint8_t *)"\x80", 1));             /* a stray continuation */
	EXPECT(!ws_utf8_valid((const uint8_t *)"\xff", 1));
}

static void test_frame_header(void)
{
	static const struct {
		uint64_t len;
		size_t size;
		uint8_t b1;
	} cases[] = { { 0, 2, 0 }, { 125, 2, 125 }, { 126, 4, 126 }, { 65535, 4, 126 }, { 65536, 10, 127 },
		      { (uint64_t)1 << 40, 10, 127 } };
	uint8_t h[WS_MAX_HEADER];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t n = ws_frame_header(h, WS_OP_BINARY, cases[i].len);
		uint64_t got = h[1] & 0x7f;
		EXPECT_EQ(n, cases[i].size);
		EXPECT_EQ(h[0], 0x82);
		EXPECT_EQ(h[1], cases[i].b1); /* the server's frames are not masked */
		if (n == 4)
			got = (uint64_t)h[2] << 8 | h[3];
		if (n == 10) {
			got = 0;
			for (int k = 0; k < 8; k++)
				got = got << 8 | h[2 + k];
		}
		EXPECT_EQ(got, cases[i].len);
	}
}

/* Lengths around each encoding's edges, whole and cut at various steps. */
static void test_rx_lengths(void)
{
	static const size_t lens[] = { 0, 1, 125, 126, 127, 65535, 65536, 70000 };
	uint8_t *data = malloc(70000), *frame = malloc(70000 + 14);

	for (size_t i = 0; i < 70000; i++)
		data[i] = (uint8_t)(i * 31 + 7);
	for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
		static const size_t steps[] = { 0, 1, 3, 4096 };
		size_t fl = mk_frame(frame, true, WS_OP_BINARY, data, lens[li], true, 0);
		for (size_t si = 0; si < sizeof(steps) / sizeof(steps[0]); si++) {
			struct ws_rx rx;
			enum ws_rx_ev ev[4];
			if (steps[si] == 1 && lens[li] > 1000)
				continue;
			ws_rx_init(&rx, 1 << 20);
			int n = rx_events(&rx, frame, fl, steps[si], ev, 4);
			bool ok = n == 1 && ev[0] == WS_RX_BINARY && rx.msg_len == lens[li] &&
				  (lens[li] == 0 || memcmp(rx.msg, data, lens[li]) == 0);
			if (!ok)
				printf("# len %zu step %zu: %d events\n", lens[li], steps[si], n);
			EXPECT(ok);
			ws_rx_free(&rx);
		}
	}
	{ /* a non-minimal length (5 bytes said in 16 and in 64 bits) is accepted */
		struct ws_rx rx;
		enum ws_rx_ev ev[4];
		size_t fl = mk_frame(frame, true, WS_OP_TEXT, "hello", 5, true, 126);
		ws_rx_init(&rx, 1 << 20);
		EXPECT(rx_events(&rx, frame, fl, 0, ev, 4) == 1 && ev[0] == WS_RX_TEXT && rx.msg_len == 5);
		fl = mk_frame(frame, true, WS_OP_TEXT, "hello", 5, true, 127);
		EXPECT(rx_events(&rx, frame, fl, 2, ev, 4) == 1 && ev[0] == WS_RX_TEXT && rx.msg_len == 5);
		ws_rx_free(&rx);
	}
	free(data);
	free(frame);
}

/* A fragmented text message with a ping in the middle; then a close with a code and reason. */
static void test_rx_fragments(void)
{
	uint8_t buf[256];
	size_t n = 0;
	enum ws_rx_ev ev[8];
	struct ws_rx rx;

	n += mk_frame(buf + n, false, WS_OP_TEXT, "Hel", 3, true, 0);
	n += mk_frame(buf + n, true, WS_OP_PING, "p!", 2, true, 0);
	n += mk_frame(buf + n, false, WS_OP_CONT, "lo, \xe2\x82", 6, true, 0); /* cuts a character */
	n += mk_frame(buf + n, true, WS_OP_CONT, "\xac!", 2, true, 0);
	n += mk_frame(buf + n, true, WS_OP_CLOSE, "\x03\xe8" "bye", 5, true, 0);
	for (size_t step = 0; step < 8; step++) {
		ws_rx_init(&rx, 1 << 20);
		int k = 0;
		size_t at = 0;
		bool ok = true;
		while (at < n && k < 8) {
			size_t piece = step && step < n - at ? step : n - at, used = 0;
			enum ws_rx_ev e = ws_rx_feed(&rx, buf + at, piece, &used);
			at += used;
			if (e == WS_RX_MORE)
				continue;
			ev[k++] = e;
			if (e == WS_RX_PING)
				ok &= rx.ctl_len == 2 && memcmp(rx.ctl, "p!", 2) == 0;
			if (e == WS_RX_TEXT)
				ok &= rx.msg_len == 11 && memcmp(rx.msg, "Hello, \xe2\x82\xac!", 11) == 0;
			if (e == WS_RX_CLOSE)
				ok &= rx.close_code == 1000 && rx.ctl_len == 5 && memcmp(rx.ctl + 2, "bye", 3) == 0;
		}
		if (!(ok && k == 3 && ev[0] == WS_RX_PING && ev[1] == WS_RX_TEXT && ev[2] == WS_RX_CLOSE))
			printf("# step %zu: ok %d, %d events: %d %d %d (close code %u)\n", step, ok, k, k > 0 ? (int)ev[0] : -1,
			       k > 1 ? (int)ev[1] : -1, k > 2 ? (int)ev[2] : -1, rx.close_code);
		EXPECT(ok && k == 3 && ev[0] == WS_RX_PING && ev[1] == WS_RX_TEXT && ev[2] == WS_RX_CLOSE);
		ws_rx_free(&rx);
	}
}

static uint16_t rx_error_of(const uint8_t *buf, size_t n, size_t max)
{
	struct ws_rx rx;
	enum ws_rx_ev ev[8];
	int k;
	uint16_t code = 0;

	ws_rx_init(&rx, max);
	k = rx_events(&rx, buf, n, 0, ev, 8);
	if (k > 0 && ev[k - 1] == WS_RX_ERROR)
		code = rx.close_code;
	ws_rx_free(&rx);
	return code;
}

static void test_rx_errors(void)
{
	uint8_t buf[512], big[200];
	size_t n;

	memset(big, 'a', sizeof(big));
	n = mk_frame(buf, true, WS_OP_TEXT, "hi", 2, false, 0);
	EXPECT_EQ(rx_error_of(buf, n, 100), 1002); /* not masked */
	n = mk_frame(buf, true, WS_OP_TEXT, "hi", 2, true, 0);
	buf[0] |= 0x40;
	EXPECT_EQ(rx_error_of(buf, n, 100), 1002); /* RSV1 */
	n = mk_frame(buf, true, 0x3, "hi", 2, true, 0);
	EXPECT_EQ(rx_error_of(buf, n, 100), 1002); /* unknown opcode */
	n = mk_frame(buf, true, 0xB, "hi", 2, true, 0);
	EXPECT_EQ(rx_error_of(buf, n, 100), 1002); /* unknown control opcode */
	n = mk_frame(buf, true, WS_OP_PING, big, 126, true, 0);
	EXPECT_EQ(rx_error_of(buf, n, 1000), 1002); /* control frame over 125 */
	n = mk_frame(buf, false, WS_OP_PING, "x", 1, true, 0);
	EXPECT_EQ(rx_error_of(buf, n, 100), 1002); /* fragmented control frame */
	n = mk_frame(buf, true, WS_OP_CONT, "x", 1, true, 0);
	EXPECT_EQ(rx_error_of(buf, n, 100), 1002); /* continuation of nothing */
	n = mk_frame(buf, false, WS_OP_TEXT, "x", 1, true, 0);
	n += mk_frame(buf + n, true, WS_OP_BINARY, "y", 1, true, 0);
	EXPECT_EQ(rx_error_of(buf, n, 100), 1002); /* a new message inside a fragmented one */
	n = mk_frame(buf, true, WS_OP_BINARY, big, 101, true, 0);
	EXPECT_EQ(rx_error_of(buf, n, 100), 1009); /* one frame over the max */
	n = mk_frame(buf, false, WS_OP_BINARY, big, 60, true, 0);
	n += mk_frame(buf + n, true, WS_OP_CONT, big, 41, true, 0);
	EXPECT_EQ(rx_error_of(buf, n, 100), 1009); /* fragments together over the max */
	n = mk_frame(buf, true, WS_OP_TEXT, "\xc3\x28", 2, true, 0);
	EXPECT_EQ(rx_error_of(buf, n, 100), 1007); /* not UTF-8 */
	n = mk_frame(buf, true, WS_OP_CLOSE, "\x03", 1, true, 0);
	EXPECT_EQ(rx_error_of(buf, n, 100), 1002); /* a close payload of one byte */
	n = mk_frame(buf, true, WS_OP_CLOSE, "\x03\xed", 2, true, 0);
	EXPECT_EQ(rx_error_of(buf, n, 100), 1002); /* close code 1005 may not be sent */
	n = mk_frame(buf, true, WS_OP_CLOSE, "\x03\xe8\xff", 3, true, 0);
	EXPECT_EQ(rx_error_of(buf, n, 100), 1007); /* a close reason that is not UTF-8 */
	n = mk_frame(buf, true, WS_OP_BINARY, "x", 1, true, 127);
	buf[2] = 0x80;
	EXPECT_EQ(rx_error_of(buf, n, 100), 1002); /* a 64-bit length with its top bit set */
	n = mk_frame(buf, true, WS_OP_BINARY, big, 101, true, 0);
	EXPECT_EQ(rx_error_of(buf, n, 101), 0); /* exactly the max is fine */
}

/* ---- through a real listener ---- */

static struct {
	unsigned accepted, closed, messages;
	size_t flood_max_queued;
	uint64_t flood_sent;
} srv;

struct conn {
	struct ws *ws;
	struct event *timer;
	uint64_t flood_left, flood_at;
};

static void c_message(struct ws *ws, bool binary, const uint8_t *data, size_t len, void *arg)
{
	(void)arg;
	srv.messages++;
	ws_send(ws, binary, data, len);
}

static void c_close(struct ws *ws, void *arg)
{
	struct conn *c = arg;

	(void)ws;
	srv.closed++;
	if (c->timer)
		event_free(c->timer);
	free(c);
}

static const struct ws_ops echo_ops = { .on_message = c_message, .on_close = c_close };

static struct conn *accept_with(struct http_req *r, const struct ws_ops *ops, size_t max)
{
	struct conn *c = calloc(1, sizeof(*c));

	c->ws = ws_accept(r, ops, c, max);
	if (!c->ws) {
		free(c);
		return NULL;
	}
	srv.accepted++;
	return c;
}

static void h_ws(struct http_req *r)
{
	accept_with(r, &echo_ops, WS_MAX_MESSAGE);
}

static void h_keepalive(struct http_req *r)
{
	struct conn *c = accept_with(r, &echo_ops, WS_MAX_MESSAGE);

	if (c)
		ws_set_keepalive(c->ws, 200, 700);
}

static void h_hello(struct http_req *r)
{
	struct conn *c = accept_with(r, &echo_ops, WS_MAX_MESSAGE);

	if (c) {
		ws_send(c->ws, false, "hello", 5);
		ws_close(c->ws, 1000, "bye");
	}
}

/* Sends 16 MiB in 64 KiB messages, never queueing more than 1 MiB. */
#define FLOOD (16u << 20)
#define FLOOD_MSG (64u << 10)

static uint8_t fpat(uint64_t i)
{
	return (uint8_t)(i ^ (i >> 11));
}

static void flood_more(struct ws *ws, void *arg)
{
	struct conn *c = arg;
	uint8_t msg[FLOOD_MSG];

	while (c->flood_left && ws_queued(ws) < (1u << 20)) {
		for (size_t i = 0; i < FLOOD_MSG; i++)
			msg[i] = fpat(c->flood_at + i);
		ws_send(ws, true, msg, FLOOD_MSG);
		c->flood_at += FLOOD_MSG;
		c->flood_left -= FLOOD_MSG;
		srv.flood_sent += FLOOD_MSG;
		if (ws_queued(ws) > srv.flood_max_queued)
			srv.flood_max_queued = ws_queued(ws);
	}
}

static const struct ws_ops flood_ops = { .on_message = c_message, .on_writable = flood_more, .on_close = c_close };

static void h_flood(struct http_req *r)
{
	struct conn *c = accept_with(r, &flood_ops, WS_MAX_MESSAGE);

	if (c) {
		c->flood_left = FLOOD;
		flood_more(c->ws, c);
	}
}

/* Each message pauses reading for 100 ms, then echoes. */
static void pause_over(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	(void)fd;
	(void)what;
	ws_pause_reading(c->ws, false);
}

static void p_message(struct ws *ws, bool binary, const uint8_t *data, size_t len, void *arg)
{
	struct conn *c = arg;
	struct timeval tv = { .tv_usec = 100000 };

	ws_send(ws, binary, data, len);
	ws_pause_reading(ws, true);
	evtimer_add(c->timer, &tv);
}

static const struct ws_ops pause_ops = { .on_message = p_message, .on_close = c_close };

static struct event_base *g_base;

static void h_pause(struct http_req *r)
{
	struct conn *c = accept_with(r, &pause_ops, WS_MAX_MESSAGE);

	if (c)
		c->timer = evtimer_new(g_base, pause_over, c);
}

static int allow_all(struct http_req *r)
{
	(void)r;
	return 0;
}

static void noop(struct http_req *r) { (void)r; }

static const struct http_route routes[] = {
	{ .method = EVHTTP_REQ_GET, .pattern = "/ws", .fn = h_ws },
	{ .method = EVHTTP_REQ_GET, .pattern = "/ws/keepalive", .fn = h_keepalive },
	{ .method = EVHTTP_REQ_GET, .pattern = "/ws/hello", .fn = h_hello },
	{ .method = EVHTTP_REQ_GET, .pattern = "/ws/flood", .fn = h_flood },
	{ .method = EVHTTP_REQ_GET, .pattern = "/ws/pause", .fn = h_pause },
	{ .method = EVHTTP_REQ_PUT, .pattern = "/v1/sandboxes/{}/files", .fn = noop },
};
static const struct http_route stream_routes[] = {
	{ .method = EVHTTP_REQ_PUT, .pattern = "/v1/sandboxes/{}/files", .fn = noop },
};

/* ---- the client ---- */

static int ws_open(uint16_t port, const char *path)
{
	int fd = cl_connect(port), status = 0;
	char head[4096], v[64];

	if (fd < 0)
		return -1;
	dprintf(fd, "GET %s HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
		    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", path);
	if (cl_head(fd, head, sizeof(head)) < 0 || sscanf(head, "HTTP/1.1 %d", &status) != 1 || status != 101 ||
	    !cl_header(head, "Sec-WebSocket-Accept", v, sizeof(v)) || strcmp(v, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=") != 0) {
		printf("# handshake for %s: %s\n", path, head);
		close(fd);
		return -1;
	}
	return fd;
}

static int wsc_send(int fd, bool fin, uint8_t op, const void *data, size_t len, bool masked)
{
	uint8_t *f = malloc(len + 14);
	int rc = cl_send(fd, f, mk_frame(f, fin, op, data, len, masked, 0));

	free(f);
	return rc;
}

/* One server frame: opcode, payload (malloc'd) and length; -1 on EOF or a masked frame. */
static int wsc_recv(int fd, uint8_t *op, uint8_t **data, size_t *len, uint8_t *lenbyte)
{
	uint8_t h[10];
	uint64_t n;

	if (cl_recv(fd, h, 2) < 0 || (h[1] & 0x80))
		return -1;
	n = h[1] & 0x7f;
	if (lenbyte)
		*lenbyte = (uint8_t)n;
	if (n == 126) {
		if (cl_recv(fd, h + 2, 2) < 0)
			return -1;
		n = (uint64_t)h[2] << 8 | h[3];
	} else if (n == 127) {
		if (cl_recv(fd, h + 2, 8) < 0)
			return -1;
		n = 0;
		for (int i = 0; i < 8; i++)
			n = n << 8 | h[2 + i];
	}
	*op = h[0] & 0x0f;
	*data = malloc(n + 1);
	*len = n;
	if (cl_recv(fd, *data, n) < 0) {
		free(*data);
		return -1;
	}
	return 0;
}

static bool expect_frame(int fd, uint8_t want_op, const void *want, size_t want_len)
{
	uint8_t op, *d = NULL;
	size_t n = 0;
	bool ok = wsc_recv(fd, &op, &d, &n, NULL) == 0 && op == want_op && n == want_len &&
		  (!want || memcmp(d, want, n) == 0);

	free(d);
	return ok;
}

static bool expect_close(int fd, uint16_t code)
{
	uint8_t op, *d = NULL;
	size_t n = 0;
	bool ok = wsc_recv(fd, &op, &d, &n, NULL) == 0 && op == WS_OP_CLOSE && n >= 2 &&
		  (uint16_t)(d[0] << 8 | d[1]) == code;

	free(d);
	return ok;
}

static void client_ws(struct test_server *ts)
{
	int fd = ws_open(ts->port, "/ws"), status = 0;
	uint8_t *big = malloc(1 << 20), op = 0, *d = NULL, lb = 0;
	char head[4096], v[64], *body = NULL;
	size_t n = 0;

	if (!CHECK(fd >= 0, "the handshake: 101 with the right Sec-WebSocket-Accept")) {
		free(big);
		return;
	}
	wsc_send(fd, true, WS_OP_TEXT, "hello", 5, true);
	CHECK(expect_frame(fd, WS_OP_TEXT, "hello", 5), "a text message is echoed");
	for (int i = 0; i < 1000; i++)
		big[i] = (uint8_t)i;
	wsc_send(fd, true, WS_OP_BINARY, big, 1000, true);
	CHECK(expect_frame(fd, WS_OP_BINARY, big, 1000), "a binary message is echoed");
	for (size_t i = 0; i < (1u << 20); i++)
		big[i] = (uint8_t)(i * 13 + (i >> 10));
	wsc_send(fd, true, WS_OP_BINARY, big, 1u << 20, true);
	CHECK(wsc_recv(fd, &op, &d, &n, &lb) == 0 && op == WS_OP_BINARY && n == (1u << 20) && lb == 127 &&
		      memcmp(d, big, n) == 0,
	      "a 1 MiB message is echoed, as one frame with a 64-bit length");
	free(d);
	d = NULL;
	wsc_send(fd, false, WS_OP_TEXT, "Hel", 3, true);
	wsc_send(fd, true, WS_OP_PING, "p", 1, true);
	wsc_send(fd, true, WS_OP_CONT, "lo", 2, true);
	CHECK(expect_frame(fd, WS_OP_PONG, "p", 1) && expect_frame(fd, WS_OP_TEXT, "Hello", 5),
	      "a ping between fragments is answered first, then the joined message");
	wsc_send(fd, true, WS_OP_PING, "abc", 3, true);
	CHECK(expect_frame(fd, WS_OP_PONG, "abc", 3), "ping -> pong with the same payload");
	wsc_send(fd, true, WS_OP_CLOSE, "\x03\xe9" "going", 7, true);
	CHECK(expect_close(fd, 1001) && cl_eof(fd), "the close handshake: our close code is echoed, then the server closes");
	close(fd);

	fd = ws_open(ts->port, "/ws");
	wsc_send(fd, true, WS_OP_TEXT, "hello", 5, false);
	CHECK(expect_close(fd, 1002) && cl_eof(fd), "an unmasked client frame: close 1002, then the connection ends");
	close(fd);

	fd = ws_open(ts->port, "/ws");
	wsc_send(fd, true, WS_OP_TEXT, "\xff\xfe", 2, true);
	CHECK(expect_close(fd, 1007) && cl_eof(fd), "text that is not UTF-8: close 1007");
	close(fd);

	fd = ws_open(ts->port, "/ws");
	wsc_send(fd, false, WS_OP_BINARY, big, 1u << 20, true);
	wsc_send(fd, true, WS_OP_CONT, "x", 1, true);
	CHECK(expect_close(fd, 1009) && cl_eof(fd), "a message over max_message: close 1009");
	close(fd);

	fd = cl_connect(ts->port);
	cl_sends(fd, "GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
		     "Sec-WebSocket-Version: 13\r\n\r\n");
	CHECK(cl_response(fd, &status, head, sizeof(head), &body, NULL) == 0 && status == 400 &&
		      strstr(body, "\"bad_request\""),
	      "no Sec-WebSocket-Key: 400 JSON");
	free(body);
	body = NULL;
	cl_sends(fd, "GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
		     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n");
	CHECK(cl_response(fd, &status, head, sizeof(head), &body, NULL) == 0 && status == 426 &&
		      cl_header(head, "Sec-WebSocket-Version", v, sizeof(v)) && strcmp(v, "13") == 0,
	      "version 8: 426 naming version 13, on the same keep-alive connection");
	free(body);
	body = NULL;
	close(fd);

	fd = ws_open(ts->port, "/ws/hello");
	CHECK(expect_frame(fd, WS_OP_TEXT, "hello", 5) && expect_close(fd, 1000),
	      "a server-initiated close: the message, then close 1000");
	wsc_send(fd, true, WS_OP_CLOSE, "\x03\xe8", 2, true);
	CHECK(cl_eof(fd), "... and once the client answers, the server closes");
	close(fd);

	fd = ws_open(ts->port, "/ws/keepalive");
	CHECK(expect_frame(fd, WS_OP_PING, NULL, 0), "an idle connection gets a ping");
	wsc_send(fd, true, WS_OP_PONG, NULL, 0, true);
	CHECK(expect_frame(fd, WS_OP_PING, NULL, 0), "... answered, it stays; the next ping comes");
	{
		uint8_t op2 = 0, *d2 = NULL;
		size_t n2 = 0;
		while (wsc_recv(fd, &op2, &d2, &n2, NULL) == 0) /* more pings, then the end */
			free(d2);
		CHECK(op2 == WS_OP_PING, "a client that never answers is dropped");
	}
	close(fd);

	fd = ws_open(ts->port, "/ws/flood");
	{
		uint64_t got = 0, bad = 0;
		usleep(200000); /* let the server fill its queue first */
		while (got < FLOOD && wsc_recv(fd, &op, &d, &n, NULL) == 0) {
			for (size_t i = 0; i < n; i++)
				bad += d[i] != fpat(got + i);
			got += n;
			free(d);
			d = NULL;
		}
		CHECK(got == FLOOD && bad == 0, "16 MiB sent as the client reads it, driven by on_writable");
	}
	wsc_send(fd, true, WS_OP_CLOSE, "\x03\xe8", 2, true);
	CHECK(expect_close(fd, 1000), "close after the flood");
	close(fd);

	fd = ws_open(ts->port, "/ws/pause");
	for (int i = 0; i < 3; i++) {
		char m[8];
		snprintf(m, sizeof(m), "m%d", i);
		wsc_send(fd, true, WS_OP_TEXT, m, strlen(m), true);
	}
	{
		bool ok = true;
		for (int i = 0; i < 3; i++) {
			char m[8];
			snprintf(m, sizeof(m), "m%d", i);
			ok &= expect_frame(fd, WS_OP_TEXT, m, strlen(m));
		}
		CHECK(ok, "reading paused and resumed between messages: all echoed, in order");
	}
	close(fd); /* gone without a close frame */

	fd = ws_open(ts->port, "/ws");
	wsc_send(fd, true, WS_OP_BINARY, big, 200000, true);
	close(fd); /* gone while its echo is being written */
	free(big);
}

/* Every way a connection ends here, with the HTTP timeouts at 1 s: clients that go without a
 * close frame (EOF; a reset with our output queued and unread; mid-frame; while an echo is being
 * written; right after their own close frame), and connections that end from inside libevent's
 * callbacks (the close handshake both ways: ws goes from its write callback once its close frame is
 * out; a `Connection: close` reply and an HTTP/1.0 one: evhttp frees those from its own). */
static void client_vanish(struct test_server *ts)
{
	uint8_t *big = calloc(1, 200000), frame[1100];
	int fd, status = 0;
	char *body = NULL;

	fd = ws_open(ts->port, "/ws");
	CHECK(fd >= 0, "a WebSocket whose client goes right after the handshake");
	close(fd);

	fd = ws_open(ts->port, "/ws");
	CHECK(fd >= 0 && cl_send(fd, frame, mk_frame(frame, true, WS_OP_BINARY, big, 1000, true, 0) / 2) == 0,
	      "a client that goes in the middle of a frame");
	usleep(50000);
	close(fd);

	fd = ws_open(ts->port, "/ws/flood");
	CHECK(fd >= 0, "a client that goes without reading what the server queued (1 MiB)");
	usleep(100000);
	close(fd); /* unread bytes: a reset */

	fd = ws_open(ts->port, "/ws");
	CHECK(fd >= 0 && wsc_send(fd, true, WS_OP_BINARY, big, 200000, true) == 0,
	      "a client that goes while its echo is being written");
	close(fd);

	fd = ws_open(ts->port, "/ws");
	CHECK(fd >= 0 && wsc_send(fd, true, WS_OP_CLOSE, "\x03\xe8", 2, true) == 0,
	      "a client that sends its close frame and goes without the answer");
	close(fd);

	fd = ws_open(ts->port, "/ws");
	wsc_send(fd, true, WS_OP_CLOSE, "\x03\xe8", 2, true);
	CHECK(expect_close(fd, 1000) && cl_eof(fd), "the close handshake: the server goes once its close is out");
	close(fd);

	fd = ws_open(ts->port, "/ws/hello");
	CHECK(expect_frame(fd, WS_OP_TEXT, "hello", 5) && expect_close(fd, 1000), "a server-initiated close");
	wsc_send(fd, true, WS_OP_CLOSE, "\x03\xe8", 2, true);
	CHECK(cl_eof(fd), "... answered: the server goes");
	close(fd);

	fd = cl_connect(ts->port);
	cl_sends(fd, "GET /nope HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
	CHECK(cl_response(fd, &status, NULL, 0, &body, NULL) == 0 && status == 404 && cl_eof(fd),
	      "a reply with Connection: close, then the close");
	free(body);
	body = NULL;
	close(fd);

	fd = cl_connect(ts->port);
	cl_sends(fd, "GET /nope HTTP/1.0\r\n\r\n");
	{
		char head[4096], sink[4096];
		ssize_t n = 0;
		bool ok = cl_head(fd, head, sizeof(head)) == 0 && sscanf(head, "HTTP/1.0 %d", &status) == 1 && status == 404;
		while (ok && (n = recv(fd, sink, sizeof(sink), 0)) > 0) /* its body ends with the connection */
			;
		CHECK(ok && n == 0, "an HTTP/1.0 reply, then the close");
	}
	close(fd);
	free(big);
}

/* The regression for a crash of spaced: through the stream filter, a connection freed from inside
 * libevent's filter left the filter's write timeout in the timer heap on freed memory, and the loop
 * ran it when it was due (stream.c, under_writecb). Runs the loop past every timeout they had. */
static void run_vanish(bool filtered)
{
	struct http_limits lim = { .max_conns = 64, .max_conns_per_client = 64, .request_timeout_s = 10 };
	struct test_server ts = { 0 };
	const char *how = filtered ? "through the stream filter" : "plain";
	int saved = http_timeout_s;

	memset(&srv, 0, sizeof(srv));
	http_timeout_s = 1;
	ts.plane.routes = routes;
	ts.plane.nroutes = sizeof(routes) / sizeof(routes[0]);
	ts.plane.auth = allow_all;
	if (filtered) {
		ts.plane.stream_routes = stream_routes;
		ts.plane.nstream_routes = 1;
	}
	if (CHECK(ts_start(&ts, &lim) == 0, "a listener with 1 s HTTP timeouts (%s)", how)) {
		g_base = ts.d.base;
		ts_run_client(&ts, client_vanish, 60);
		CHECK(ts_spin_until(&ts, ts_no_conns, 8000), "every connection ends (%s; %u left)", how,
		      http_conns_count(ts.d.conns));
		CHECK(srv.closed == srv.accepted && srv.accepted == 7, "on_close ran once for each of the %u WebSockets (%u)",
		      srv.accepted, srv.closed);
		CHECK(ts_freed_events(&ts) == 0, "no event of a freed connection is left in the loop (%s)", how);
		ts_run_for(&ts, 2500);
		CHECK(ts_freed_events(&ts) == 0 && http_conns_count(ts.d.conns) == 0,
		      "the loop runs past every timeout those connections had (%s)", how);
		ts_stop(&ts);
	}
	http_timeout_s = saved;
}

static void run_listener(bool filtered)
{
	struct http_limits lim = { .max_conns = 64, .max_conns_per_client = 64, .request_timeout_s = 10 };
	struct test_server ts = { 0 };
	unsigned before = srv.accepted;

	memset(&srv, 0, sizeof(srv));
	(void)before;
	ts.plane.routes = routes;
	ts.plane.nroutes = sizeof(routes) / sizeof(routes[0]);
	ts.plane.auth = allow_all;
	if (filtered) {
		ts.plane.stream_routes = stream_routes;
		ts.plane.nstream_routes = 1;
	}
	if (!CHECK(ts_start(&ts, &lim) == 0, "a listener (%s)", filtered ? "through the stream filter" : "plain"))
		return;
	g_base = ts.d.base;
	ts_run_client(&ts, client_ws, 120);
	bool none = ts_spin_until(&ts, ts_no_conns, 8000);
	CHECK(none, "conn.c's connection count returns to 0 (%u)", http_conns_count(ts.d.conns));
	CHECK(ts_freed_events(&ts) == 0, "no event of a freed connection is left in the loop");
	CHECK(srv.closed == srv.accepted && srv.accepted == 9, "on_close ran once for each of the %u WebSockets (%u)",
	      srv.accepted, srv.closed);
	CHECK(srv.flood_sent == FLOOD && srv.flood_max_queued < (1u << 20) + FLOOD_MSG + 64,
	      "the flood never queued more than 1 MiB + one message (%zu)", srv.flood_max_queued);
	ts_stop(&ts);
}

int main(void)
{
	if (getenv("SPACE_DEBUG"))
		log_set_level(LOG_DEBUG);
	RUN(test_accept_key);
	RUN(test_handshake);
	RUN(test_utf8);
	RUN(test_frame_header);
	RUN(test_rx_lengths);
	RUN(test_rx_fragments);
	RUN(test_rx_errors);
	run_listener(false);
	run_listener(true);
	run_vanish(false);
	run_vanish(true);
	return DONE();
}
