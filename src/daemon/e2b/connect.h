/* connect.h -- the Connect protocol (connectrpc.com/docs/protocol), server side, JSON codec only:
 * unary calls (application/json) and server streams (application/connect+json, enveloped).
 * The framing and the code/status table are pure and unit-tested (tests/unit/test_connect.c). */
#ifndef SPACE_E2B_CONNECT_H
#define SPACE_E2B_CONNECT_H

#include <event2/buffer.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "http/http.h"

/* Envelope flags. */
#define CONNECT_FLAG_COMPRESSED 0x01
#define CONNECT_FLAG_END 0x02
/* The largest request message we take (envd's are small; SendInput carries stdin). */
#define CONNECT_MAX_MESSAGE (4u << 20)

/* ---- pure ---- */
/* The HTTP status of a Connect error code ("not_found" -> 404); 500 for an unknown code. */
int connect_code_status(const char *code);
/* The Connect code for one of the core's errnos (ENOENT -> "not_found", EBUSY ->
 * "failed_precondition", EACCES -> "permission_denied", EEXIST -> "already_exists"...). */
const char *connect_code_of_errno(int e);
/* Appends one envelope: [flags][u32 big-endian length][compact JSON of msg]. -1: out of memory. */
int connect_envelope_add(struct evbuffer *out, uint8_t flags, const json_t *msg);
/* Parses one envelope from buf: 0 with *msg (a new object reference), *flags and *used set;
 * 1 when buf holds only part of one; -1 with EINVAL (compressed, oversized, not a JSON object). */
int connect_envelope_parse(const uint8_t *buf, size_t len, uint8_t *flags, json_t **msg, size_t *used,
			   space_err *err);
/* The end-of-stream message: {} or {"error":{"code":..,"message":..}} (code NULL: success). */
json_t *connect_end_message(const char *code, const char *message);

/* ---- requests ---- */
/* The request message of r as a JSON object: the whole body for a unary call (Content-Type
 * application/json), the one envelope of a server-streaming call (application/connect+json).
 * Answers the Connect error itself (invalid_argument, unimplemented for the binary codec) and
 * returns NULL. The caller owns the result. */
json_t *connect_request(struct http_req *r, bool streaming);
/* A unary reply: 200 application/json with msg (reference stolen). */
void connect_reply(struct evhttp_request *req, json_t *msg);
/* A unary error: the code's status, {"code":..,"message":..}. */
void connect_reply_error(struct evhttp_request *req, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The same from a space_err (code from its errno). */
void connect_reply_err(struct evhttp_request *req, const space_err *e);
/* A streaming call's error before the stream started: 200 application/connect+json with only the
 * end envelope carrying the error (what Connect servers send for an error before any message). */
void connect_stream_reply_error(struct evhttp_request *req, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- server streams ----
 * A held reply (http_hold) sending envelopes as chunks. The owner embeds nothing: it gets a
 * stream, sends with connect_stream_send, and ends with connect_stream_end (which frees it), or
 * is told by on_gone that the client left (the stream is freed right after on_gone returns).
 * While idle longer than the client's Keepalive-Ping-Interval (seconds; default 50, at least 1),
 * the keepalive message (if any) is sent. A client's Connect-Timeout-Ms is its deadline: once
 * past, the stream ends with deadline_exceeded (on_deadline). */
struct connect_stream;
struct connect_stream_ops {
	void (*on_gone)(struct connect_stream *cs, void *arg);
	/* The queued bytes drained below the high-water mark (see connect_stream_full). */
	void (*on_drain)(struct connect_stream *cs, void *arg);
	/* The client's Connect-Timeout-Ms passed: the owner lets go of the stream as on_gone (NULL:
	 * on_gone is called), then the stream ends with deadline_exceeded and is freed. */
	void (*on_deadline)(struct connect_stream *cs, void *arg);
};
/* Starts the reply (200, application/connect+json). keepalive: a message sent when idle (a new
 * reference is taken), or NULL. NULL when out of memory (then r is answered with 500). */
struct connect_stream *connect_stream_begin(struct http_req *r, const struct connect_stream_ops *ops, void *arg,
					    const json_t *keepalive);
/* Sends one message (0; -1 when out of memory: end the stream). */
int connect_stream_send(struct connect_stream *cs, const json_t *msg);
/* More than the high-water mark (1 MiB) is queued toward the client: stop reading your source
 * until on_drain. */
bool connect_stream_full(const struct connect_stream *cs);
/* Sends the end envelope (code NULL: success) and completes the reply; frees cs. */
void connect_stream_end(struct connect_stream *cs, const char *code, const char *message);
/* The client's Keepalive-Ping-Interval in seconds (1..3600; the default 50 when absent or
 * malformed): how long a stream may stay silent before a keepalive message goes out. */
unsigned connect_keepalive_s(struct evhttp_request *req);
/* The client's Connect-Timeout-Ms in ms, 0 when absent or malformed (pure helper:
 * connect_parse_timeout). */
int64_t connect_timeout_ms(struct evhttp_request *req);
int64_t connect_parse_timeout(const char *h);

#endif
