/* body.h -- request bodies that stream (file uploads of any size) with bounded memory.
 *
 * evhttp 2.1 reads a whole body before it calls a handler. For the routes a plane lists in
 * http_plane.stream_routes, the connection's filter (stream.c) hands evhttp the request's head
 * with an empty body and keeps the body for the handler, which pulls it at its own pace; the
 * client is read no faster than that. docs/design/http.md, "Streaming request bodies".
 *
 * A handler of such a route:
 *     struct http_body *b = http_body_get(r);   (NULL: evhttp read the body whole, as for any
 *                                               route: use evhttp_request_get_input_buffer)
 *     http_hold_begin(&ctx->hold, r->req, on_gone, r->d->conns);   (it answers later)
 *     http_body_notify(b, on_body, ctx);
 *   on_body: http_body_failed(b)? answer 400 (or drop it); else http_body_read() what it can
 *   take; once http_body_done(b), finish and answer. Call http_hold_end() before answering.
 *
 * Lifetime: b is valid until the request is answered or the hold's on_gone runs (the client
 * went away; then b is failed and must not be touched again). Once the reply has started,
 * notifications stop. A handler that answers without reading the whole body (401, 404, early
 * errors) need not do anything: the rest is read and dropped so the connection stays usable (a
 * client that asked for `Expect: 100-continue` and was not told to go on is closed instead). */
#ifndef SPACE_HTTP_BODY_H
#define SPACE_HTTP_BODY_H

#include <event2/buffer.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http.h"

/* At most this much of a streaming body is buffered per connection; reading the socket pauses
 * above it. */
#define HTTP_BODY_BUFFER (1u << 20)

struct http_body;

/* The streaming body of this request, or NULL when evhttp read it whole (then use evhttp's input
 * buffer). Claims it: nothing of it is read from the client before, and `Expect: 100-continue`
 * is answered now. Call it once the request is authorised. */
struct http_body *http_body_get(struct http_req *r);
/* Moves up to max bytes of body into out; returns how many. */
size_t http_body_read(struct http_body *b, struct evbuffer *out, size_t max);
/* Bytes that http_body_read would give now. */
size_t http_body_buffered(const struct http_body *b);
/* All of it has been read by the handler. */
bool http_body_done(const struct http_body *b);
/* The client sent a malformed body or stopped sending it (no byte for the request timeout). */
bool http_body_failed(const struct http_body *b);
/* fn runs (from the event loop, never inside an http_body_* call) when there are more bytes,
 * when the body is complete, or when it failed; NULL stops it. */
void http_body_notify(struct http_body *b, void (*fn)(struct http_body *b, void *arg), void *arg);
/* Content-Length, or UINT64_MAX for a chunked body. */
uint64_t http_body_length(const struct http_body *b);

#endif
