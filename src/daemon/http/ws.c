/* ws.c -- WebSocket server connections: handshake, frames, close handshake, keepalive.
 *
 * libevent 2.1 has no WebSocket support and evhttp no upgrade hook, so ws_accept() takes the
 * connection over from inside a route handler: the request stays unanswered, the connection's
 * bufferevent gets our callbacks, and the end goes through evhttp_connection_free() like any
 * other connection (conn.c's close hook sees it, evhttp frees the request with it). The hold
 * (http_hold_begin) does the bookkeeping: it registers with conn.c's record (or evhttp's close
 * callback for an untracked connection), so that whoever frees the connection -- we, evhttp_free
 * at shutdown -- ends up in ws_gone() exactly once.
 *
 * Every path that frees the connection runs from one of our own libevent callbacks (socket,
 * timer, `wake`), never inside a ws_* call or a user callback, so a user may call ws_close or
 * ws_send from on_message. */
#include "ws.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "daemon.h"
#include "log.h"

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define PING_MS 30000
#define TIMEOUT_MS 60000
#define CLOSE_WAIT_MS 5000       /* for the client's close frame, or for our last bytes to go */
#define SINGLE_IO (256u << 10)

/* ---- pure parts ---- */

void ws_accept_key(const char *key, char out[WS_ACCEPT_LEN + 1])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char buf[128];
	size_t n = strlen(key);

	if (n > sizeof(buf) - sizeof(WS_GUID))
		n = sizeof(buf) - sizeof(WS_GUID);
	memcpy(buf, key, n);
	memcpy(buf + n, WS_GUID, sizeof(WS_GUID) - 1);
	if (!EVP_Digest(buf, n + sizeof(WS_GUID) - 1, md, &mdlen, EVP_sha1(), NULL) || mdlen != 20) {
		out[0] = '\0';
		return;
	}
	EVP_EncodeBlock((unsigned char *)out, md, 20); /* 28 characters and a NUL */
}

bool ws_header_has_token(const char *v, const char *token)
{
	size_t tl = strlen(token);

	while (v && *v) {
		size_t n;
		while (*v == ' ' || *v == '\t' || *v == ',')
			v++;
		n = strcspn(v, ",");
		size_t e = n;
		while (e > 0 && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e == tl && strncasecmp(v, token, tl) == 0)
			return true;
		v += n;
	}
	return false;
}

/* A Sec-WebSocket-Key is 16 bytes in base64: 22 characters and "==". */
static bool key_valid(const char *k)
{
	if (!k || strlen(k) != 24 || k[22] != '=' || k[23] != '=')
		return false;
	for (int i = 0; i < 22; i++) {
		char c = k[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/'))
			return false;
	}
	return true;
}

int ws_handshake_check(enum evhttp_cmd_type method, const struct evkeyvalq *headers,
		       char accept[WS_ACCEPT_LEN + 1], const char **why)
{
	const char *key = evhttp_find_header(headers, "Sec-WebSocket-Key");
	const char *version = evhttp_find_header(headers, "Sec-WebSocket-Version");

	if (method != EVHTTP_REQ_GET) {
		*why = "a WebSocket upgrade must be a GET";
		return 400;
	}
	if (!ws_header_has_token(evhttp_find_header(headers, "Upgrade"), "websocket")) {
		*why = "missing Upgrade: websocket";
		return 400;
	}
	if (!ws_header_has_token(evhttp_find_header(headers, "Connection"), "upgrade")) {
		*why = "missing Connection: Upgrade";
		return 400;
	}
	if (!version || strcmp(version, "13") != 0) {
		*why = "unsupported Sec-WebSocket-Version (want 13)";
		return 426;
	}
	if (!key_valid(key)) {
		*why = "Sec-WebSocket-Key must be 16 bytes in base64";
		return 400;
	}
	ws_accept_key(key, accept);
	return 0;
}

bool ws_utf8_valid(const uint8_t *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		uint8_t c = s[i];
		size_t need;
		uint32_t cp, min;

		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xe0) == 0xc0) {
			need = 1, cp = c & 0x1f, min = 0x80;
		} else if ((c & 0xf0) == 0xe0) {
			need = 2, cp = c & 0x0f, min = 0x800;
		} else if ((c & 0xf8) == 0xf0) {
			need = 3, cp = c & 0x07, min = 0x10000;
		} else {
			return false;
		}
		if (n - i - 1 < need)
			return false;
		for (size_t k = 1; k <= need; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += need + 1;
	}
	return true;
}

size_t ws_frame_header(uint8_t out[WS_MAX_HEADER], uint8_t opcode, uint64_t len)
{
	out[0] = (uint8_t)(0x80 | (opcode & 0x0f));
	if (len <= 125) {
		out[1] = (uint8_t)len;
		return 2;
	}
	if (len <= 0xffff) {
		out[1] = 126;
		out[2] = (uint8_t)(len >> 8);
		out[3] = (uint8_t)len;
		return 4;
	}
	out[1] = 127;
	for (int i = 0; i < 8; i++)
		out[2 + i] = (uint8_t)(len >> (56 - 8 * i));
	return 10;
}

void ws_rx_init(struct ws_rx *rx, size_t max_message)
{
	memset(rx, 0, sizeof(*rx));
	rx->max_message = max_message;
	rx->hdr_need = 2;
}

void ws_rx_free(struct ws_rx *rx)
{
	free(rx->msg);
	rx->msg = NULL;
	rx->msg_cap = rx->msg_len = 0;
}

static enum ws_rx_ev rx_fail(struct ws_rx *rx, uint16_t code)
{
	rx->failed = true;
	rx->close_code = code;
	return WS_RX_ERROR;
}

static bool close_code_valid(uint16_t c)
{
	if (c >= 3000 && c <= 4999)
		return true;
	return (c >= 1000 && c <= 1003) || (c >= 1007 && c <= 1014);
}

/* The header in rx->hdr is whole: checks it and sets up the payload. */
static enum ws_rx_ev rx_header(struct ws_rx *rx)
{
	uint8_t b0 = rx->hdr[0], b1 = rx->hdr[1], op = b0 & 0x0f;
	size_t at = 2;
	uint64_t len = b1 & 0x7f;

	if (b0 & 0x70)
		return rx_fail(rx, WS_CLOSE_PROTOCOL); /* no extension was negotiated */
	if (!(b1 & 0x80))
		return rx_fail(rx, WS_CLOSE_PROTOCOL); /* client frames must be masked */
	if (len == 126) {
		len = (uint64_t)rx->hdr[2] << 8 | rx->hdr[3];
		at = 4;
	} else if (len == 127) {
		len = 0;
		for (int i = 0; i < 8; i++)
			len = len << 8 | rx->hdr[2 + i];
		if (len >> 63)
			return rx_fail(rx, WS_CLOSE_PROTOCOL);
		at = 10;
	}
	memcpy(rx->mask, rx->hdr + at, 4);
	rx->fin = b0 & 0x80;
	rx->opcode = op;
	rx->remaining = len;
	rx->pos = 0;
	switch (op) {
	case WS_OP_CLOSE:
	case WS_OP_PING:
	case WS_OP_PONG:
		if (!rx->fin || len > 125)
			return rx_fail(rx, WS_CLOSE_PROTOCOL);
		rx->ctl_len = 0;
		break;
	case WS_OP_TEXT:
	case WS_OP_BINARY:
		if (rx->in_message)
			return rx_fail(rx, WS_CLOSE_PROTOCOL); /* a new message inside a fragmented one */
		rx->in_message = true;
		rx->msg_op = op;
		rx->msg_len = 0;
		/* fall through */
	case WS_OP_CONT:
		if (!rx->in_message)
			return rx_fail(rx, WS_CLOSE_PROTOCOL); /* a continuation of nothing */
		if (len > rx->max_message - rx->msg_len)
			return rx_fail(rx, WS_CLOSE_TOO_BIG);
		if (rx->msg_len + len > rx->msg_cap) {
			size_t cap = rx->msg_cap ? rx->msg_cap : 4096;
			while (cap < rx->msg_len + len)
				cap *= 2;
			if (cap > rx->max_message)
				cap = rx->max_message;
			uint8_t *m = realloc(rx->msg, cap ? cap : 1);
			if (!m)
				return rx_fail(rx, WS_CLOSE_TOO_BIG);
			rx->msg = m;
			rx->msg_cap = cap;
		}
		break;
	default:
		return rx_fail(rx, WS_CLOSE_PROTOCOL);
	}
	rx->in_payload = true;
	return WS_RX_MORE;
}

/* The frame's payload is all in: what does it make? */
static enum ws_rx_ev rx_frame_done(struct ws_rx *rx)
{
	rx->in_payload = false;
	rx->hdr_have = 0;
	rx->hdr_need = 2;
	switch (rx->opcode) {
	case WS_OP_PING:
		return WS_RX_PING;
	case WS_OP_PONG:
		return WS_RX_PONG;
	case WS_OP_CLOSE:
		rx->close_code = 0;
		if (rx->ctl_len == 1)
			return rx_fail(rx, WS_CLOSE_PROTOCOL);
		if (rx->ctl_len >= 2) {
			uint16_t c = (uint16_t)(rx->ctl[0] << 8 | rx->ctl[1]);
			if (!close_code_valid(c))
				return rx_fail(rx, WS_CLOSE_PROTOCOL);
			if (!ws_utf8_valid(rx->ctl + 2, rx->ctl_len - 2))
				return rx_fail(rx, WS_CLOSE_BAD_DATA);
			rx->close_code = c;
		}
		return WS_RX_CLOSE;
	default:
		if (!rx->fin)
			return WS_RX_MORE;
		rx->in_message = false;
		if (rx->msg_op == WS_OP_TEXT) {
			if (!ws_utf8_valid(rx->msg, rx->msg_len))
				return rx_fail(rx, WS_CLOSE_BAD_DATA);
			return WS_RX_TEXT;
		}
		return WS_RX_BINARY;
	}
}

enum ws_rx_ev ws_rx_feed(struct ws_rx *rx, const uint8_t *data, size_t len, size_t *used)
{
	size_t i = 0;
	enum ws_rx_ev ev;

	*used = 0;
	if (rx->failed)
		return WS_RX_ERROR;
	for (;;) {
		if (!rx->in_payload) {
			while (rx->hdr_have < rx->hdr_need && i < len)
				rx->hdr[rx->hdr_have++] = data[i++];
			if (rx->hdr_have < rx->hdr_need)
				break;
			if (rx->hdr_need == 2) {
				uint8_t l7 = rx->hdr[1] & 0x7f;
				rx->hdr_need = 2 + (l7 == 126 ? 2 : l7 == 127 ? 8 : 0) + ((rx->hdr[1] & 0x80) ? 4 : 0);
				if (!(rx->hdr[1] & 0x80)) {
					*used = i;
					return rx_fail(rx, WS_CLOSE_PROTOCOL);
				}
				continue;
			}
			ev = rx_header(rx);
			if (ev == WS_RX_ERROR) {
				*used = i;
				return ev;
			}
		}
		if (rx->remaining) {
			size_t n = len - i;
			if (n > rx->remaining)
				n = (size_t)rx->remaining;
			if (!n)
				break;
			uint8_t *dst = (rx->opcode & 0x8) ? rx->ctl + rx->ctl_len : rx->msg + rx->msg_len;
			for (size_t k = 0; k < n; k++)
				dst[k] = data[i + k] ^ rx->mask[(rx->pos + k) & 3];
			if (rx->opcode & 0x8)
				rx->ctl_len += n;
			else
				rx->msg_len += n;
			rx->pos += n;
			rx->remaining -= n;
			i += n;
			if (rx->remaining)
				break;
		}
		ev = rx_frame_done(rx);
		if (ev != WS_RX_MORE) {
			*used = i;
			return ev;
		}
	}
	*used = i;
	return WS_RX_MORE;
}

/* ---- connections ---- */

enum ws_state {
	WS_OPEN,
	WS_CLOSING, /* we sent a close frame; waiting for the client's */
	WS_CLOSED,  /* nothing more to say: the connection goes once our output has drained */
};

struct ws {
	struct http_hold hold; /* first: ws_gone gets it */
	struct bufferevent *bev;
	struct evhttp_connection *evcon;
	const struct ws_ops *ops;
	void *arg;
	struct ws_rx rx;
	struct event *timer;   /* keepalive; the close wait */
	struct event *wake;    /* deferred work: reading after a resume, finishing */
	enum ws_state state;
	bool paused, above_low, finishing;
	unsigned ping_ms, timeout_ms;
	int64_t last_rx_ms, last_ping_ms;
};

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void arm_timer(struct ws *ws, unsigned ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	evtimer_add(ws->timer, &tv);
}

/* Frees the connection; ws_gone() runs inside and frees ws. Only from our own callbacks. */
static void ws_finish(struct ws *ws)
{
	if (ws->finishing)
		return;
	ws->finishing = true;
	evhttp_connection_free(ws->evcon);
}

/* conn.c (or evhttp's close callback) says the connection is going: the last word. */
static void ws_gone(struct http_hold *h)
{
	struct ws *ws = (struct ws *)h;

	ws->finishing = true;
	if (ws->ops->on_close)
		ws->ops->on_close(ws, ws->arg);
	event_free(ws->timer);
	event_free(ws->wake);
	ws_rx_free(&ws->rx);
	free(ws);
}

static void send_frame(struct ws *ws, uint8_t op, const void *data, size_t len)
{
	struct evbuffer *out = bufferevent_get_output(ws->bev);
	uint8_t hdr[WS_MAX_HEADER];

	evbuffer_add(out, hdr, ws_frame_header(hdr, op, len));
	if (len)
		evbuffer_add(out, data, len);
	if (evbuffer_get_length(out) > WS_LOW_MARK)
		ws->above_low = true;
}

static void send_close(struct ws *ws, uint16_t code, const char *reason, size_t rlen)
{
	uint8_t p[125];
	size_t n = 0;

	if (code) {
		p[0] = (uint8_t)(code >> 8);
		p[1] = (uint8_t)code;
		n = 2;
		if (rlen > sizeof(p) - 2)
			rlen = sizeof(p) - 2;
		if (rlen)
			memcpy(p + 2, reason, rlen);
		n += rlen;
	}
	send_frame(ws, WS_OP_CLOSE, p, n);
}

/* Nothing more will be said: go once the output has drained (or after CLOSE_WAIT_MS). */
static void enter_closed(struct ws *ws)
{
	ws->state = WS_CLOSED;
	bufferevent_setwatermark(ws->bev, EV_WRITE, 0, 0);
	arm_timer(ws, CLOSE_WAIT_MS);
	if (evbuffer_get_length(bufferevent_get_output(ws->bev)) == 0)
		event_active(ws->wake, EV_TIMEOUT, 0);
}

/* Reads frames until the input is used up, reading is paused, or the connection is done. */
static void ws_process(struct ws *ws)
{
	struct evbuffer *in = bufferevent_get_input(ws->bev);

	while (!ws->paused && ws->state != WS_CLOSED) {
		struct evbuffer_iovec v;
		size_t used = 0;
		enum ws_rx_ev ev;

		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1 || v.iov_len == 0)
			break;
		ev = ws_rx_feed(&ws->rx, v.iov_base, v.iov_len, &used);
		evbuffer_drain(in, used);
		ws->last_rx_ms = mono_ms();
		switch (ev) {
		case WS_RX_MORE:
		case WS_RX_PONG:
			break;
		case WS_RX_TEXT:
		case WS_RX_BINARY:
			if (ws->state == WS_OPEN && ws->ops->on_message)
				ws->ops->on_message(ws, ev == WS_RX_BINARY, ws->rx.msg ? ws->rx.msg : (const uint8_t *)"",
						    ws->rx.msg_len, ws->arg);
			break;
		case WS_RX_PING:
			if (ws->state == WS_OPEN)
				send_frame(ws, WS_OP_PONG, ws->rx.ctl, ws->rx.ctl_len);
			break;
		case WS_RX_CLOSE:
			if (ws->state == WS_OPEN) /* echo the client's code */
				send_close(ws, ws->rx.close_code, NULL, 0);
			enter_closed(ws);
			break;
		case WS_RX_ERROR:
			log_debug("ws: closing with %u (bad frame from the client)", ws->rx.close_code);
			if (ws->state == WS_OPEN)
				send_close(ws, ws->rx.close_code, NULL, 0);
			enter_closed(ws);
			break;
		}
	}
	if (ws->state == WS_CLOSED)
		evbuffer_drain(in, evbuffer_get_length(in));
}

static void ws_readcb(struct bufferevent *bev, void *arg)
{
	(void)bev;
	ws_process(arg);
}

static void ws_writecb(struct bufferevent *bev, void *arg)
{
	struct ws *ws = arg;
	size_t queued = evbuffer_get_length(bufferevent_get_output(bev));

	if (ws->state == WS_CLOSED) {
		if (queued == 0)
			ws_finish(ws);
		return;
	}
	if (ws->above_low && queued <= WS_LOW_MARK) {
		ws->above_low = false;
		if (ws->state == WS_OPEN && ws->ops->on_writable)
			ws->ops->on_writable(ws, ws->arg);
	}
}

static void ws_eventcb(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	ws_finish(arg); /* EOF, an error or the write timeout: nobody to say goodbye to */
}

static void ws_wake(evutil_socket_t fd, short what, void *arg)
{
	struct ws *ws = arg;

	(void)fd;
	(void)what;
	if (ws->state == WS_CLOSED) {
		if (evbuffer_get_length(bufferevent_get_output(ws->bev)) == 0)
			ws_finish(ws);
		return;
	}
	ws_process(ws);
	if (ws->state == WS_CLOSED && evbuffer_get_length(bufferevent_get_output(ws->bev)) == 0)
		ws_finish(ws);
}

static void ws_tick(evutil_socket_t fd, short what, void *arg)
{
	struct ws *ws = arg;
	int64_t now = mono_ms();

	(void)fd;
	(void)what;
	if (ws->state != WS_OPEN) { /* the close wait is over */
		ws_finish(ws);
		return;
	}
	if (ws->paused) {
		ws->last_rx_ms = now;
	} else if (now - ws->last_rx_ms >= ws->timeout_ms) {
		log_debug("ws: nothing from the client for %u ms; dropping it", ws->timeout_ms);
		ws_finish(ws);
		return;
	} else if (now - ws->last_rx_ms >= ws->ping_ms && now - ws->last_ping_ms >= ws->ping_ms) {
		send_frame(ws, WS_OP_PING, NULL, 0);
		ws->last_ping_ms = now;
	}
	arm_timer(ws, ws->ping_ms < 1000 ? ws->ping_ms : 1000);
}

struct ws *ws_accept(struct http_req *r, const struct ws_ops *ops, void *arg, size_t max_message)
{
	struct evkeyvalq *oh = evhttp_request_get_output_headers(r->req);
	char accept[WS_ACCEPT_LEN + 1];
	const char *why = NULL;
	struct ws *ws;
	int status;

	status = ws_handshake_check(evhttp_request_get_command(r->req), evhttp_request_get_input_headers(r->req),
				    accept, &why);
	if (status) {
		if (status == 426) {
			evhttp_add_header(oh, "Sec-WebSocket-Version", "13");
			evhttp_add_header(oh, "Upgrade", "websocket");
		}
		http_reply_error(r->req, status, "bad_request", "%s", why);
		return NULL;
	}
	ws = calloc(1, sizeof(*ws));
	if (ws) {
		ws->timer = evtimer_new(r->d->base, ws_tick, ws);
		ws->wake = event_new(r->d->base, -1, 0, ws_wake, ws);
	}
	if (!ws || !ws->timer || !ws->wake) {
		if (ws) {
			if (ws->timer)
				event_free(ws->timer);
			if (ws->wake)
				event_free(ws->wake);
			free(ws);
		}
		http_reply_error(r->req, 500, "internal", "out of memory");
		return NULL;
	}
	ws->ops = ops;
	ws->arg = arg;
	ws->ping_ms = PING_MS;
	ws->timeout_ms = TIMEOUT_MS;
	ws->last_rx_ms = ws->last_ping_ms = mono_ms();
	ws_rx_init(&ws->rx, max_message ? max_message : WS_MAX_MESSAGE);
	ws->evcon = evhttp_request_get_connection(r->req);
	ws->bev = evhttp_connection_get_bufferevent(ws->evcon);
	/* Registers the connection's end with conn.c; reading on with no read timeout and the
	 * input bounded (we drain it as it comes). The request is never answered: evhttp frees
	 * it with the connection. */
	http_hold_begin(&ws->hold, r->req, ws_gone, r->d->conns);
	bufferevent_setcb(ws->bev, ws_readcb, ws_writecb, ws_eventcb, ws);
	bufferevent_setwatermark(ws->bev, EV_WRITE, WS_LOW_MARK, 0);
	bufferevent_set_max_single_write(ws->bev, SINGLE_IO);
	evbuffer_add_printf(bufferevent_get_output(ws->bev),
			    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
			    "Sec-WebSocket-Accept: %s\r\n\r\n",
			    accept);
	bufferevent_enable(ws->bev, EV_READ | EV_WRITE);
	arm_timer(ws, 1000);
	/* Frames the client sent right behind its request are already in the input. */
	if (evbuffer_get_length(bufferevent_get_input(ws->bev)))
		event_active(ws->wake, EV_TIMEOUT, 0);
	return ws;
}

int ws_send(struct ws *ws, bool binary, const void *data, size_t len)
{
	if (ws->state != WS_OPEN)
		return -1;
	send_frame(ws, binary ? WS_OP_BINARY : WS_OP_TEXT, data, len);
	return 0;
}

size_t ws_queued(const struct ws *ws)
{
	return evbuffer_get_length(bufferevent_get_output(ws->bev));
}

void ws_pause_reading(struct ws *ws, bool paused)
{
	if (ws->paused == paused || ws->state == WS_CLOSED)
		return;
	ws->paused = paused;
	if (paused) {
		bufferevent_disable(ws->bev, EV_READ);
	} else {
		ws->last_rx_ms = mono_ms();
		bufferevent_enable(ws->bev, EV_READ);
		if (evbuffer_get_length(bufferevent_get_input(ws->bev)))
			event_active(ws->wake, EV_TIMEOUT, 0);
	}
}

void ws_close(struct ws *ws, uint16_t code, const char *reason)
{
	if (ws->state != WS_OPEN)
		return;
	send_close(ws, code, reason ? reason : "", reason ? strlen(reason) : 0);
	ws->state = WS_CLOSING;
	if (ws->paused) { /* the client's close must be read */
		ws->paused = false;
		bufferevent_enable(ws->bev, EV_READ);
		if (evbuffer_get_length(bufferevent_get_input(ws->bev)))
			event_active(ws->wake, EV_TIMEOUT, 0);
	}
	arm_timer(ws, CLOSE_WAIT_MS);
}

void ws_set_keepalive(struct ws *ws, unsigned ping_ms, unsigned timeout_ms)
{
	ws->ping_ms = ping_ms ? ping_ms : PING_MS;
	ws->timeout_ms = timeout_ms ? timeout_ms : TIMEOUT_MS;
	if (ws->state == WS_OPEN)
		arm_timer(ws, ws->ping_ms < 1000 ? ws->ping_ms : 1000);
}
