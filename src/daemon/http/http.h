/* http.h -- what the control-plane and data-plane listeners share: binding, routing, replies, auth */
#ifndef SPACE_HTTP_H
#define SPACE_HTTP_H

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct spaced;

#define HTTP_MAX_SEGS 12
#define HTTP_MAX_PARAMS 4
/* The longest path we route (anything longer is not ours: 404). */
#define HTTP_MAX_PATH 2048
/* Idle/read/write timeout of a connection (not of long-polls and streams). */
#define HTTP_TIMEOUT_S 120
/* What the listeners use: HTTP_TIMEOUT_S; unit tests shorten it to run the loop past it. */
extern int http_timeout_s;
#define HTTP_MAX_HEADERS (32u << 10)

/* Connection caps and the whole-request deadline (conn.c); 0 = no cap. */
struct http_limits {
	unsigned max_conns;            /* open connections, both planes together */
	unsigned max_conns_per_client; /* from one client address */
	int request_timeout_s;         /* a whole request (headers and body) must arrive within this */
	/* Body bytes of requests whose credentials are not yet known (preauth.c), in flight at
	 * once: in the daemon, and from one client address. 0: no budget (every such body waits
	 * for nothing: only tests that drive the filter alone). */
	uint64_t unauth_bytes, unauth_bytes_per_client;
};
struct http_conns;
struct http_conn;
struct evhttp_bound_socket;
struct http_hold;
struct http_body;
struct http_plane;

/* One request being dispatched. Lives on the dispatcher's stack: a handler
 * that answers later copies what it needs (req, d) before returning. */
struct http_req {
	struct spaced *d;
	struct evhttp_request *req;
	enum evhttp_cmd_type method;
	char path[HTTP_MAX_PATH];         /* decoded segments, NUL-separated */
	const char *seg[HTTP_MAX_SEGS];
	int nseg;
	const char *param[HTTP_MAX_PARAMS]; /* what the route's {} matched */
	int nparam;
	struct evkeyvalq query;           /* decoded ?k=v pairs */
	size_t max_body;
	void *obj;                        /* what the plane's auth step resolved (data plane: the session) */
	struct http_conn *conn;           /* conn.c's record of the connection, or NULL */
	struct http_body *body;           /* a streaming body (body.h: http_body_get), or NULL */
	void (*next)(struct http_req *r); /* the route's handler */
	const struct http_plane *plane;
	const struct http_route *route;     /* the route matched (NULL: none) */
	const struct http_dialect *dialect; /* the route's, else its path prefix's (NULL: SPACE's) */
	int stage;                        /* the steps run so far (http.c) */
	int withheld;                     /* !0: the filter did not read the body (preauth.c): the
					   * status the request is answered with if no step refuses */
	bool taken;                       /* its head was claimed by the plane's host_takes: no byte
					   * of its body has been read (http_take_over) */
};

/* What a plane's head check says of a request's credentials before a byte of its body is read
 * (http/preauth.c, docs/design/http.md "Before the body"). */
enum http_head_verdict {
	HTTP_HEAD_UNKNOWN, /* not decidable from memory (a token to read from the store): the body
			    * is read within the unauthenticated budget */
	HTTP_HEAD_AUTHED,  /* good credentials: the body is read as any */
	HTTP_HEAD_REFUSED, /* none, or known to be wrong: the body is never read; the request is
			    * answered 401 (by the plane's auth, in its own dialect) and the
			    * connection closed */
};

typedef void (*http_handler)(struct http_req *r);

/* A front end's error shape (its dialect): what the dispatcher's own answers (401, 404 no such
 * route, 405, 413, 429...) and a cluster's relays look like for a route of that front end, or
 * for a path no route matches under one of its prefixes (http_plane.prefixes). NULL: SPACE's
 * own, {"error": {"code", "message"}} (http_reply_error). */
struct http_dialect {
	const char *name; /* "space", "e2b", "connect"...: for log lines and tests */
	/* status, SPACE's code for it ("not_found"), the message. */
	void (*reply_error)(struct evhttp_request *req, int status, const char *code, const char *msg);
	/* What the front ends' kit attaches (front/dialect.h: how a cluster's intent writers answer
	 * in this dialect); http/ never looks at it. */
	const void *ext;
};

/* Where an api process (--role api: docs/design/cluster.md) answers a route: cluster/route.c
 * makes its tables from these, never from the handlers. A single daemon and a node run the
 * handler whatever the route says. */
enum http_place {
	HTTP_PLACE_LOCAL = 0,   /* the handler, here (reads the store as a single daemon would) */
	HTTP_PLACE_SANDBOX,     /* relayed to the node of the sandbox param[0] names */
	HTTP_PLACE_SESSION,     /* ... of the session param[0] names */
	HTTP_PLACE_SANDBOX_HDR, /* ... of the sandbox the E2b-Sandbox-Id header names (E2B's envd) */
	HTTP_PLACE_SNAPSHOT,    /* ... of the sandbox snapshot param[0] was taken from */
	HTTP_PLACE_ROOM,        /* ... to the node that is up with the most free memory */
	HTTP_PLACE_CREATE,      /* written as a create intent for a node to claim */
	HTTP_PLACE_RESTORE,     /* a restore intent when no node holds the sandbox, else relayed */
	HTTP_PLACE_DELETE,      /* relayed to its node, else closed in the store */
	HTTP_PLACE_NODE_ONLY,   /* refused (400): a node's own setting (a warm pool) */
};

/* http_route.flags */
/* param[0] names a sandbox ("sb-..."): one this process does not hold is read on the store's
 * thread before the handler runs (api.c's prepare step), where its place is LOCAL. */
#define HTTP_ROUTE_SANDBOX_PRE (1u << 0)

struct http_route {
	enum evhttp_cmd_type method;
	const char *pattern; /* "/v1/sandboxes/{}/sessions": {} matches one segment */
	http_handler fn;
	const struct http_dialect *dialect; /* NULL: SPACE's */
	enum http_place place;
	unsigned flags;
	/* The route's own authorisation steps, instead of the plane's (same contracts as
	 * http_plane.auth and .head_auth; NULL: the plane's): a front end beside another on one
	 * listener (E2B's envd beside /v1's sessions) checks its own credentials. */
	int (*auth)(struct http_req *r);
	enum http_head_verdict (*head_auth)(struct http_req *r, struct evkeyvalq *hdrs);
};

/* The dialect of paths whose first segment is seg that no route matches (and of refusals
 * before routing). */
struct http_prefix {
	const char *seg;
	const struct http_dialect *dialect;
};

/* ---- connections (conn.c) ---- */
/* Which cap a new connection or stream would break (pure; unit-tested). */
enum http_cap { HTTP_CAP_OK, HTTP_CAP_TOTAL, HTTP_CAP_GROUP };
enum http_cap http_cap_check(unsigned used_total, unsigned used_group, unsigned max_total, unsigned max_group);
/* The daemon's table of connections; shared by its listeners. */
struct http_conns *http_conns_new(struct event_base *base, const struct http_limits *lim);
/* Call after evhttp_free() of the listeners attached. */
void http_conns_free(struct http_conns *cs);
/* Counts, caps and deadlines the connections of `http` (bound once), which serves plane (its
 * name for log lines; its stream routes get a filter on each connection: stream.h). */
int http_conns_attach(struct http_conns *cs, struct evhttp *http, struct evhttp_bound_socket *bound,
		      const struct http_plane *plane, space_err *err);
unsigned http_conns_count(const struct http_conns *cs);
const struct http_limits *http_conns_limits(const struct http_conns *cs);
/* The name of the plane whose listener accepted c ("api", "data"), or NULL. */
const char *http_conn_plane(const struct http_conn *c);
/* The admitted connection evhttp knows as evcon, or NULL. */
struct http_conn *http_conn_find(struct http_conns *cs, struct evhttp_connection *evcon);
/* The deadline runs while a request is being read: from accept (or the end
 * of the previous reply) until it is dispatched. */
void http_conn_deadline_arm(struct http_conn *c);
void http_conn_deadline_stop(struct http_conn *c);
/* While set, the connection's end calls http_hold_gone(h). */
void http_conn_set_hold(struct http_conn *c, struct http_hold *h);
/* The budget of unauthenticated body bytes (http_limits.unauth_bytes*): take n for c (false,
 * taking nothing, when the daemon's or c's client address's share would go over), give back
 * all c holds (when its request's reply has gone, or it closes). */
bool http_conn_unauth_take(struct http_conn *c, uint64_t n);
void http_conn_unauth_give(struct http_conn *c);
/* Unauthenticated body bytes in flight now, and released since the last call (main's tick
 * gives freed memory back to the system when that grew). */
uint64_t http_conns_unauth_held(const struct http_conns *cs);
uint64_t http_conns_unauth_released(struct http_conns *cs);


/* A listener's routes and its authorisation step. */
struct http_plane {
	const char *name;               /* "api", "data": for log lines */
	const struct http_route *routes;
	size_t nroutes;
	/* The dialects of paths no route matches, by first segment (NULL/0: SPACE's for all). */
	const struct http_prefix *prefixes;
	size_t nprefixes;
	/* Returns 0 to go on, or -1 having answered (401...). Called before
	 * routing when auth_first (so unknown routes also need the key), else
	 * after a route matched. NULL: none here (an api process relays the data plane to the
	 * node, which checks the token). After a route matched it may also return 1: it holds
	 * r (a read on the store's thread) and calls http_auth_done(r, ...) once, later. */
	int (*auth)(struct http_req *r);
	bool auth_first;
	/* After the route matched and auth passed, before the handler: the same three answers
	 * (0 go on, -1 answered, 1 held until http_auth_done). NULL: none. */
	int (*prepare)(struct http_req *r);
	size_t max_body;
	struct spaced *d;               /* set by whoever starts the listener */
	/* Routes (method + pattern, as in routes; fn unused) whose request body streams: the
	 * handler pulls it with http_body_get() (body.h) instead of evhttp reading it whole, so
	 * max_body does not apply. Any size, memory bounded. */
	const struct http_route *stream_routes;
	size_t nstream_routes;
	/* The head check (NULL: none; every body is read as evhttp reads it). Called for a request
	 * with a body, from its head alone, before a byte of the body is read: r is routed (seg,
	 * param, query; HTTP_MATCH or not: r->next is the route's handler or NULL) but has no
	 * evhttp request (r->req NULL); hdrs are the head's header lines. Must answer from memory. */
	enum http_head_verdict (*head_auth)(struct http_req *r, struct evkeyvalq *hdrs);
	/* A listener only its cluster's api processes may reach (a node's): every request must
	 * carry HTTP_PEER_HEADER equal to peer_key (compared in constant time), before anything
	 * else is looked at, except those peer_exempt says (the probes). NULL: anyone. */
	const char *peer_key;
	bool (*peer_exempt)(const struct http_req *r);
	/* Served over TLS with this server context (tls.h; NULL: plain HTTP). */
	struct ssl_ctx_st *tls;
	/* A front end addressed by Host rather than path (a sandbox's ports: {port}-{id}.{domain}).
	 * host_takes (pure, from the head's Host value, n bytes, not NUL-terminated) says whether a
	 * request is its; the stream filter then reads nothing after the head, and host_handler gets
	 * the request (r->taken; no route, no plane auth) to answer it or http_take_over() it. NULL:
	 * none. Needs the filter (the plane has stream routes). */
	bool (*host_takes)(const struct http_plane *plane, const char *host, size_t n);
	http_handler host_handler;
};

/* The header an api process puts its cluster credential in (and drops from a client's). */
#define HTTP_PEER_HEADER "X-Space-Cluster-Key"
/* Does hdrs carry the plane's peer key (true when the plane needs none)? */
bool http_peer_ok(const struct http_plane *plane, struct evkeyvalq *hdrs);

/* Binds "ADDR:PORT" ("127.0.0.1:7070", "[::1]:7070", ":7070" = every
 * address) and serves `plane` on base. max_body plus slack is also handed to
 * libevent as its hard cap (see docs/design/http.md). */
struct evhttp *http_listen(struct event_base *base, const char *addr_port, const struct http_plane *plane,
			   space_err *err);
/* Splits "ADDR:PORT". host gets "" for ":PORT". */
int http_parse_addr(const char *s, char *host, size_t hostlen, uint16_t *port, space_err *err);

/* ---- routing (pure; unit-tested) ---- */
enum http_match { HTTP_MATCH, HTTP_NO_ROUTE, HTTP_BAD_METHOD };
/* Decodes %XX escapes of one path segment in place. -1 on a bad escape or
 * an escaped NUL or '/'. */
int http_pct_decode(char *s);
/* Splits an undecoded path ("/v1/x/y") into decoded segments stored in r
 * (r->path, r->seg, r->nseg). A trailing '/' is ignored. -1: not a path
 * we can route (too long, too many segments, bad escape). */
int http_split_path(struct http_req *r, const char *path);
/* Finds the route for method + r->seg; fills r->param. On HTTP_BAD_METHOD,
 * `allow` (if not NULL) gets the methods the path does accept ("GET, POST"). */
enum http_match http_route_find(const struct http_route *routes, size_t n, struct http_req *r,
				const struct http_route **out, char *allow, size_t allowlen);
const char *http_method_name(enum evhttp_cmd_type m);

/* ---- requests ---- */
/* The body as a JSON object (an empty body reads as {}). Answers 400/413
 * itself and returns NULL. The caller owns the result. */
json_t *http_body_json(struct http_req *r);
/* Pure part of http_body_json: parse, with messages like "malformed JSON at
 * line 1 col 5: ...". */
json_t *http_parse_json_object(const char *buf, size_t len, space_err *err);
/* Query parameter (decoded) or NULL. */
const char *http_query(struct http_req *r, const char *key);
/* "Authorization: Bearer X" -> X (copied into out). 0, or -1 if absent or
 * malformed. */
int http_bearer(const char *header, char *out, size_t outlen);
/* Compares secrets in time independent of where they differ (and of their
 * lengths: both are hashed first). */
bool http_secret_equal(const char *a, const char *b);
/* Copies a request URI for a log line with the value of every `token`
 * query parameter replaced by "REDACTED" (pure; unit-tested). */
void http_redact_uri(const char *uri, char *out, size_t outlen);
/* Strict unsigned decimal: digits only, no sign or spaces, no overflow. */
int http_parse_u64(const char *s, uint64_t *out);

/* ---- replies ---- */
/* Sends j (and drops the caller's reference) as application/json. */
void http_reply_json(struct evhttp_request *req, int status, json_t *j);
void http_reply_error(struct evhttp_request *req, int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Status and code from e->code (err_http_status / err_code_name). */
void http_reply_err(struct evhttp_request *req, const space_err *e);
void http_reply_empty(struct evhttp_request *req, int status);
/* evhttp_send_reply_start for a streamed reply (no Content-Length): chunked to HTTP/1.1, and
 * ended by closing the connection to HTTP/1.0, never unframed on a kept-alive connection. */
void http_reply_start(struct evhttp_request *req, int status, const char *reason);
/* An error in r's dialect (r->dialect: its route's, else its path prefix's). */
void http_req_error(struct http_req *r, int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void http_req_err(struct http_req *r, const space_err *e);
/* The same in dialect dl (NULL: SPACE's), for a request no longer on the dispatcher's stack. */
void http_dialect_error(const struct http_dialect *dl, struct evhttp_request *req, int status, const char *code,
			const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void http_dialect_err(const struct http_dialect *dl, struct evhttp_request *req, const space_err *e);
/* The dialect of a path no route matched: the plane's prefix for r->seg[0], or NULL (pure). */
const struct http_dialect *http_prefix_dialect(const struct http_plane *plane, const struct http_req *r);
/* The body an error reply carries (pure; unit-tested). */
json_t *http_error_body(const char *code, const char *message);

/* An auth or prepare step that returned 1 is done: go_on runs the next steps and the route's
 * handler (the step holds the request no more); false only frees r (the step answered, or the
 * client left: r->req is not touched). */
void http_auth_done(struct http_req *r, bool go_on);

/* ---- replies that are answered later (long-poll, streams) ----
 * While a handler holds a request, the connection is watched for the client
 * going away; on_gone runs once (the request is already released then:
 * never touch it again). Before the final reply, call http_hold_end(). */
struct http_hold {
	struct evhttp_request *req;
	struct evhttp_connection *evcon;
	void (*on_gone)(struct http_hold *h);
	struct http_conn *conn; /* NULL: untracked, evhttp's close callback is used */
	bool active;
};
/* Lifts the connection's read timeout while held (long-polls and streams
 * may be silent for longer than it). */
void http_hold_begin(struct http_hold *h, struct evhttp_request *req, void (*on_gone)(struct http_hold *h),
		     struct http_conns *cs);
void http_hold_end(struct http_hold *h);
/* The held request's connection is going away (conn.c calls this). */
void http_hold_gone(struct http_hold *h);

/* A held request (r->taken when it came, http_hold_begin done) whose connection its handler now owns: what
 * the client sent from the request's first byte on is in the returned bufferevent's input (the
 * head as it came, the body, whatever followed), and the handler sets its callbacks; the
 * request is never answered through evhttp. Ends with evhttp_connection_free() of the request's
 * connection (the hold's on_gone runs inside). NULL (nothing changed) when it cannot be. */
struct bufferevent *http_take_over(struct http_conns *cs, struct evhttp_request *req);

#endif
