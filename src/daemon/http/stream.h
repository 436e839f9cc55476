/* stream.h -- the connection filter behind streaming request bodies (internal: conn.c, http.c and
 * the unit tests; handlers use body.h).
 *
 * One `struct http_sf` per connection of a plane with stream routes sits in a filter
 * bufferevent between the socket and evhttp. Input: it finds request boundaries with
 * http-parser, passes every request through byte for byte except those of a stream route, whose
 * head evhttp gets with an empty body (and HTTP_SF_HEADER naming the stream) while the decoded
 * body goes to a buffer the handler pulls from. It takes one request at a time: after a request
 * it waits until evhttp has sent the reply (http_sf_reply_done). Anything it does not fully
 * understand (a parse error, an upgrade, a head outside a strict subset of HTTP/1.1) switches the
 * connection to raw: everything passes through untouched and evhttp alone decides.
 * Output: bytes stay in the filter's output buffer (which evhttp and ws.c watch) until the
 * kernel has taken them, as with a socket bufferevent. docs/design/http.md. */
#ifndef SPACE_HTTP_STREAM_H
#define SPACE_HTTP_STREAM_H

#include <event2/buffer.h>
#include <event2/util.h>
#include <stdbool.h>
#include <stddef.h>

#include "body.h"
#include "http.h"

/* The header the filter adds to a streaming request (and strips from every client's). Its value
 * is the stream's id, or one of these for a request whose body it did not read (preauth.h):
 * its credentials were refused, or the unauthenticated budget was spent. */
#define HTTP_SF_HEADER "X-Space-Body-Stream"
#define HTTP_SF_REFUSED "refused"
#define HTTP_SF_BUSY "busy"
#define HTTP_SF_TAKE "take" /* a head host_takes claimed (HTTP_SF_TAKEN) */
/* A head longer than this passes through raw (evhttp refuses it). */
#define HTTP_SF_HEAD_MAX (2 * HTTP_MAX_HEADERS)
/* On a plane with a head check, what passes raw after a head the filter could not read. */
#define HTTP_SF_RAW_CAP (64u << 10)

enum http_sf_state {
	HTTP_SF_HEAD,    /* reading a request's head */
	HTTP_SF_PASS,    /* passing a request's body through to evhttp */
	HTTP_SF_STREAM,  /* decoding a streaming body into its buffer */
	HTTP_SF_DISCARD, /* dropping the rest of a streaming body that was answered early */
	HTTP_SF_WAIT,    /* the request is whole: waiting for evhttp's reply */
	HTTP_SF_RAW,     /* everything passes through untouched, for good */
	HTTP_SF_DEAD,    /* a streaming body was malformed: input is dropped; the connection closes */
	HTTP_SF_TAKEN,   /* a head the plane's host_takes claimed: evhttp has it with no body, every
			  * byte after it (body included) waits, unread, for http_sf_release (its
			  * front end takes the connection over) or the reply (which closes it) */
};

struct http_sf;
struct bufferevent;
struct event_base;

/* routes: the plane's stream routes (method + pattern; fn unused). body_max: the body buffer's
 * bound (HTTP_BODY_BUFFER). */
struct http_sf *http_sf_new(const struct http_route *routes, size_t nroutes, size_t body_max);
void http_sf_free(struct http_sf *sf);
/* The pure core: consumes src, appends to dst what evhttp should read (at most lim bytes of
 * passed-through data when lim >= 0; a head may go over) and decoded streaming bodies to the
 * current body. Returns the bytes appended to dst. */
size_t http_sf_input(struct http_sf *sf, struct evbuffer *src, struct evbuffer *dst, ev_ssize_t lim);
/* The reply to the request last read has gone out: read the next one. */
void http_sf_reply_done(struct http_sf *sf);
enum http_sf_state http_sf_state(const struct http_sf *sf);
/* The current streaming body, or NULL. */
struct http_body *http_sf_body(struct http_sf *sf);
/* The most body bytes that were ever buffered at once (tests check the bound). */
size_t http_sf_peak(const struct http_sf *sf);

/* ---- on a connection (conn.c) ---- */
/* Wraps a socket bufferevent (made with BEV_OPT_CLOSE_ON_FREE, fd -1) in the filter; sf and under
 * then belong to the returned bufferevent (freed with it). NULL on failure (both are freed). */
struct bufferevent *http_sf_wrap(struct http_sf *sf, struct event_base *base, struct bufferevent *under);
/* The plane whose head check (http_plane.head_auth) runs before a body is passed to evhttp. */
void http_sf_set_plane(struct http_sf *sf, const struct http_plane *plane);
/* The connection record (for closing it after a malformed body) and how long a streaming body
 * may go without a byte before it fails (0: forever). */
void http_sf_set_conn(struct http_sf *sf, struct http_conn *c, int idle_s);
/* conn.c: the connection is being freed; no callback of a body runs after this. */
void http_sf_conn_gone(struct http_sf *sf);
/* conn.c */
struct http_sf *http_conn_sf(struct http_conn *c);
void http_conn_close(struct http_conn *c);

/* A front end takes the connection of the request the filter holds in HTTP_SF_TAKEN over: the
 * filter goes raw, and what the client sent from the head's first byte on (the original head,
 * as it came) is put back in the filter's input for the new owner to read. false when the
 * filter is not holding such a request. */
bool http_sf_release(struct http_sf *sf);

/* http.c's dispatch: a request that came with HTTP_SF_HEADER. Returns its body (or NULL, when the
 * header does not name the stream the filter is on), strips the header and, when the client
 * waits for `100 Continue`, marks the reply to close the connection until the body is claimed.
 * *withheld: 0, or the status a request whose body the filter did not read is answered with
 * (401: its credentials were refused; 429: the unauthenticated budget is spent); its reply
 * closes the connection. *taken: the head was one host_takes claimed (HTTP_SF_TAKEN); its reply,
 * if it gets one instead of being taken over, closes the connection. */
struct http_body *http_sf_dispatch(struct http_conn *c, struct evhttp_request *req, int *withheld, bool *taken);

#endif
