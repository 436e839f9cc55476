/* front.h -- what every front end (api/, e2b/, dataplane/) shares to answer a request without
 * blocking the loop: reads on the store's thread (read_async.c) and replies sent once the
 * writes before them are made (reply_stored.c). Request parsing (req.h), the core's records
 * rendered (render.h) and the file-operation engine (fop.h) are this folder's too. */
#ifndef SPACE_FRONT_H
#define SPACE_FRONT_H

#include <jansson.h>

#include "err.h"
#include "events/webhook.h"
#include "http/http.h"

struct spaced;
struct store;

/* A listener's tables, as listeners.c assembles them from the front ends' own. */
struct front_tables {
	const struct http_route *routes;
	size_t nroutes;
	const struct http_route *stream_routes; /* bodies that stream (http_plane.stream_routes) */
	size_t nstream_routes;
	const struct http_prefix *prefixes;     /* dialects of unmatched paths */
	size_t nprefixes;
	bool relay;      /* an api process's (--role api): the routes relay or read the store */
	size_t max_body; /* 0: the listener's own limit */
	/* A front end addressed by Host (http_plane.host_takes, .host_handler; NULL: none). */
	bool (*host_takes)(const struct http_plane *plane, const char *host, size_t n);
	http_handler host_handler;
};

/* Sends status and body (the reference is taken) once every store write queued before now
 * was made (reply_stored.c): for replies that announce new rows. */
void api_reply_stored(struct http_req *r, int status, json_t *body);
void api_reply_stored_to(struct spaced *d, struct evhttp_request *req, int status, json_t *body);

/* Reads off the loop (read_async.c): read(conn, arg, err) runs on the store's thread, behind
 * every write queued before the call, touching only conn and arg; then, on the loop and only
 * if the client is still there, reply(d, req, arg, rc, err) with read's result answers. Last,
 * release(arg) (may be NULL), whatever happened. The request is held meanwhile. */
struct store;
typedef int (*api_read_fn)(struct store *conn, void *arg, space_err *err);
typedef void (*api_reply_fn)(struct spaced *d, struct evhttp_request *req, void *arg, int rc,
			     const space_err *err);
void api_read(struct http_req *r, api_read_fn read, api_reply_fn reply, void (*release)(void *arg), void *arg);
/* The same for a request already held once (from a reply: a second round on the store's
 * thread). Takes arg as api_read does. */
void api_read_to(struct spaced *d, struct evhttp_request *req, api_read_fn read, api_reply_fn reply,
		 void (*release)(void *arg), void *arg);
/* A step before a route's handler (http_plane.auth after routing, or .prepare) that must read
 * the store: read(conn, arg) runs on the store's thread, then on the loop, if the client is
 * still there, verdict(r, arg) answers 0 (the next steps and the handler run) or -1 (it
 * replied); release(arg) last (after the handler), whatever happened. Returns 1 (held: the step's answer to
 * http.c), or -1 having replied (arg released). */
int api_step_read(struct http_req *r, void (*read)(struct store *conn, void *arg),
		  int (*verdict)(struct http_req *r, void *arg), void (*release)(void *arg), void *arg);
/* A reply for api_read whose read answers nothing: 204, or the read's error. */
void api_reply_no_content(struct spaced *d, struct evhttp_request *req, void *arg, int rc, const space_err *err);
/* The same where the read renders the whole body: fn returns it (200) or NULL with err set
 * (answered as http_reply_err does). */
typedef json_t *(*api_json_fn)(struct store *conn, void *arg, space_err *err);
void api_read_json(struct http_req *r, api_json_fn fn, void (*release)(void *arg), void *arg);

/* A webhook create (webhook_hold.c): the request is held while the core checks the URL, then
 * reply(d, req, w, err) answers it (w NULL with err set when refused), unless the client left.
 * -1 (nothing held, nothing answered) when out of memory. */
typedef void (*front_webhook_reply_fn)(struct spaced *d, struct evhttp_request *req, const struct webhook *w,
				       const space_err *err);
int front_webhook_create(struct http_req *r, const struct webhook_req *req, front_webhook_reply_fn reply);

#endif
