/* ws.h -- WebSocket server connections (RFC 6455, version 13) taken over from an evhttp request.
 *
 * A route handler that gets `GET ... Upgrade: websocket` calls ws_accept(). It checks the
 * handshake (invalid: it answers 400 JSON itself and returns NULL), writes the 101 and from then
 * on owns the connection: evhttp never reads or writes it again. The connection stays counted by
 * conn.c until it is freed (through evhttp_connection_free, which also frees the unanswered
 * request). docs/design/http.md, "WebSocket".
 *
 * Lifetime: on_close runs exactly once, when the connection is gone (closed by either side, a
 * protocol error, the keepalive, or the daemon freeing its listeners); ws is freed right after it
 * returns. Callbacks never run inside a ws_* call. */
#ifndef SPACE_WS_H
#define SPACE_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http.h"

#define WS_MAX_MESSAGE (1u << 20)   /* a sensible max_message */
#define WS_LOW_MARK (256u << 10)    /* on_writable: the queue went from above this to at most this */

/* Close codes (RFC 6455 7.4.1). */
#define WS_CLOSE_NORMAL 1000
#define WS_CLOSE_GOING_AWAY 1001
#define WS_CLOSE_PROTOCOL 1002
#define WS_CLOSE_BAD_DATA 1007      /* text that is not UTF-8 */
#define WS_CLOSE_TOO_BIG 1009
#define WS_CLOSE_INTERNAL 1011

struct ws;
struct ws_ops {
	/* One whole message (fragments joined). data is valid during the call only. */
	void (*on_message)(struct ws *ws, bool binary, const uint8_t *data, size_t len, void *arg);
	/* The output queue went below WS_LOW_MARK after having been above it (optional). */
	void (*on_writable)(struct ws *ws, void *arg);
	/* The connection is gone; ws is freed after this returns. */
	void (*on_close)(struct ws *ws, void *arg);
};

/* Answers 400 itself and returns NULL when r is not a valid upgrade (426 when only the version
 * is wrong). max_message: a bigger message (fragments together) closes with 1009. */
struct ws *ws_accept(struct http_req *r, const struct ws_ops *ops, void *arg, size_t max_message);
/* Queues one message (one frame, unmasked). -1 once closing. Memory is the caller's to bound:
 * check ws_queued() and wait for on_writable. */
int ws_send(struct ws *ws, bool binary, const void *data, size_t len);
/* Bytes not yet written to the socket. */
size_t ws_queued(const struct ws *ws);
/* Stops (true) or resumes reading from the client (backpressure). No keepalive close while paused. */
void ws_pause_reading(struct ws *ws, bool paused);
/* Starts the close handshake (reason: at most 123 bytes are sent); on_close follows once the
 * client has answered, or after 5 s. No message is delivered after this. */
void ws_close(struct ws *ws, uint16_t code, const char *reason);
/* A ping after ping_ms without a frame from the client, and the connection dropped after
 * timeout_ms without one (defaults 30 s and 60 s). */
void ws_set_keepalive(struct ws *ws, unsigned ping_ms, unsigned timeout_ms);

/* ---- pure parts (unit-tested) ---- */
#define WS_ACCEPT_LEN 28
/* Sec-WebSocket-Accept for a key: base64(SHA-1(key + GUID)); out gets 28 characters + NUL. */
void ws_accept_key(const char *key, char out[WS_ACCEPT_LEN + 1]);
/* Checks an upgrade request's method and headers. 0 with accept filled, or the HTTP status to
 * answer (400, or 426 for a version other than 13) with *why saying what is wrong. */
int ws_handshake_check(enum evhttp_cmd_type method, const struct evkeyvalq *headers,
		       char accept[WS_ACCEPT_LEN + 1], const char **why);
/* Whether a comma-separated header value holds token (case-insensitive), as in "keep-alive, Upgrade". */
bool ws_header_has_token(const char *value, const char *token);
bool ws_utf8_valid(const uint8_t *s, size_t n);

#define WS_OP_CONT 0x0
#define WS_OP_TEXT 0x1
#define WS_OP_BINARY 0x2
#define WS_OP_CLOSE 0x8
#define WS_OP_PING 0x9
#define WS_OP_PONG 0xA
#define WS_MAX_HEADER 14
/* A frame header (FIN set, no mask: the server's) for len payload bytes, shortest length
 * encoding; returns its size (2, 4 or 10). */
size_t ws_frame_header(uint8_t out[WS_MAX_HEADER], uint8_t opcode, uint64_t len);

/* The receiving side: client frames in, whole messages and control frames out. */
enum ws_rx_ev {
	WS_RX_MORE,   /* everything given was consumed; feed more */
	WS_RX_TEXT,   /* rx->msg, rx->msg_len: a whole text message (valid UTF-8) */
	WS_RX_BINARY, /* rx->msg, rx->msg_len */
	WS_RX_PING,   /* rx->ctl, rx->ctl_len: the payload to echo in a pong */
	WS_RX_PONG,
	WS_RX_CLOSE,  /* rx->close_code (0: none given), rx->ctl + 2: the reason */
	WS_RX_ERROR,  /* rx->close_code: 1002, 1007 or 1009; every later call returns this again */
};
struct ws_rx {
	size_t max_message;
	/* the frame being read */
	uint8_t hdr[WS_MAX_HEADER];
	size_t hdr_have, hdr_need;
	bool in_payload, fin;
	uint8_t opcode, mask[4];
	uint64_t remaining, pos;
	/* the data message being joined */
	bool in_message;
	uint8_t msg_op;
	uint8_t *msg;
	size_t msg_len, msg_cap;
	/* the control frame being read */
	uint8_t ctl[125];
	size_t ctl_len;
	uint16_t close_code;
	bool failed;
};
void ws_rx_init(struct ws_rx *rx, size_t max_message);
void ws_rx_free(struct ws_rx *rx);
/* Consumes from data until one event is complete or all of it is used (*used: how much). A
 * message's bytes stay valid until the next call. */
enum ws_rx_ev ws_rx_feed(struct ws_rx *rx, const uint8_t *data, size_t len, size_t *used);

#endif
