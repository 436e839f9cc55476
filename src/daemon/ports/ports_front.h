/* ports_front.h -- the port proxy: a front end on the data plane addressed by Host,
 * {port}-{sandbox id}.{--ports-domain}, that relays HTTP (keep-alive, chunked, server-sent
 * events, WebSocket upgrades) to that TCP port in that sandbox's guest (docs/design/ports.md).
 * It parses and relays; who may pass is the core's (sandbox/ports.h). */
#ifndef SPACE_PORTS_FRONT_H
#define SPACE_PORTS_FRONT_H

#include <event2/buffer.h>
#include <http_parser.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "front/port_names.h"
#include "http/http.h"
#include "model/model.h"

struct spaced;

/* The cookie a browser gets for ?space_token= (host-scoped: one port of one sandbox). */
#define PORT_COOKIE "space_port_token"
#define PORT_TOKEN_HEADER "X-Space-Token"
#define PORT_TOKEN_QUERY "space_token"
#define PORT_E2B_TRAFFIC_HEADER "e2b-traffic-access-token"
/* How long a guest may take to accept the connection. */
#define PORT_CONNECT_TIMEOUT_S 10
/* How long a request waits for a sandbox it woke (paused, suspended) before a 503. */
#define PORT_WAKE_WAIT_S 30
#define PORT_WAKE_POLL_MS 50
/* A connection to a guest that stopped answering ends within about PORT_DEAD_S (port_connect.c). */
#define PORT_KEEPIDLE_S 20
#define PORT_KEEPINTVL_S 5
#define PORT_KEEPCNT 3
#define PORT_DEAD_S 35

/* ---- port_host.c (pure; unit-tested) ---- */
/* Is host ("8000-sb-0123456789abcdef.localhost:7071", n bytes) one of domain's port names: a
 * single label with a '-' in it, then "." domain (any case), then an optional ":port"? */
bool port_host_is(const char *host, size_t n, const char *domain);
/* Its port and sandbox id: 0; -1 with err (EINVAL: the port is not 1..65535; ENOENT: the rest
 * is not a sandbox id). */
int port_host_parse(const char *host, size_t n, const char *domain, uint16_t *port, char id[ID_LEN],
		    space_err *err);
/* The plane's host_takes. */
bool port_host_takes(const struct http_plane *plane, const char *host, size_t n);
/* The value of cookie `name` in a Cookie header (NULL: none), copied into out. */
bool port_cookie_get(const char *cookie, const char *name, char *out, size_t len);

/* ---- port_rw.c: the client's requests as the guest gets them (pure; unit-tested) ----
 * Each request is parsed (http-parser) and written again: the same request line and headers,
 * less hop-by-hop ones, X-Forwarded-*, every credential of SPACE's (PORT_TOKEN_HEADER, E2B's
 * traffic token, the cluster key, the PORT_COOKIE cookie, any header carrying the API key), with
 * X-Forwarded-For/-Proto/-Host of our own, and a body framed as it came (Content-Length, or
 * chunked, re-chunked as it arrives). Every request on the connection must name the same Host. */
enum port_rw_status {
	PORT_RW_OK,      /* go on feeding */
	PORT_RW_RAW,     /* an upgrade: what follows the bytes consumed passes untouched, both ways */
	PORT_RW_STOP,    /* a request for another host, or a malformed one: the connection ends */
};
struct port_rw {
	http_parser p;
	enum port_rw_status status;
	char why[160];
	struct evbuffer *out;          /* the current feed's */
	char host[256];                /* the Host every request must carry */
	char peer[64];                 /* X-Forwarded-For */
	const char *proto;             /* X-Forwarded-Proto: "http" or "https" */
	const char *api_key;           /* a header whose value holds it is dropped ("": none) */
	/* the request being read */
	struct evbuffer *url, *field, *value, *hdrs;
	bool in_value, in_body, chunked;
	int nhost;
	bool host_ok;
	char upgrade[64];
	size_t head_bytes;
	uint64_t requests;             /* heads written so far */
	/* Asked before each request after the first is passed on (NULL: none): false stops the
	 * connection (its credential no longer opens the port). */
	bool (*allow)(void *arg);
	void *allow_arg;
};
int port_rw_init(struct port_rw *rw, const char *host, const char *peer, const char *proto, const char *api_key);
void port_rw_free(struct port_rw *rw);
/* Feeds n bytes; appends what the guest is to get to out. Returns the bytes consumed (all of
 * them unless the status is no longer PORT_RW_OK). */
size_t port_rw_feed(struct port_rw *rw, const char *buf, size_t n, struct evbuffer *out);

/* ---- port_connect.c ---- */
/* A connection to port of sb_id's guest, from its netns (net/ingress.c): the sandbox woken when
 * it is paused or suspended (waited for up to PORT_WAKE_WAIT_S). cb runs once, from the loop,
 * never inside port_conn_start: ubev connected (the caller's from then on; no callbacks set),
 * or NULL with status (404, 502, 503) and why. NULL: out of memory (cb never runs). */
typedef void (*port_conn_cb)(struct bufferevent *ubev, int status, const char *why, void *arg);
struct port_conn;
struct port_conn *port_conn_start(struct spaced *d, const char *sb_id, uint16_t port, port_conn_cb cb, void *arg);
/* Before cb: it will not run. */
void port_conn_cancel(struct port_conn *c);

/* ---- port_tunnel.c ---- */
/* GET /v1/sandboxes/{id}/ports/{port}/tunnel on the data plane: a WebSocket whose binary
 * messages are the bytes of one TCP connection to that port (spacectl port-forward); an empty
 * one from the client ends its input (the guest reads an end of file, its answer still comes
 * back); the guest closing ends the WebSocket. Opened by the port's token (Authorization:
 * Bearer, or X-Space-Token) or its public mark. */
extern const struct http_route port_dp_routes[];
extern const size_t port_dp_nroutes;

/* ---- port_relay.c ---- */
/* Relays, from now on, the client's connection (cbev: what http_take_over gave for req, its
 * input holding the client's bytes from its first request's head on) and ubev (connected to
 * the guest's port): both are the relay's, which frees them and the client's connection at the
 * end (it holds req: http_hold_begin; the caller holds it no more). cred (copied): what let the
 * connection in, asked again before each later request on it (port_still_open). -1 (nothing
 * taken) when memory is short. */
struct port_cred;
int port_relay_start(struct spaced *d, struct evhttp_request *req, struct bufferevent *cbev,
		     struct bufferevent *ubev, const char *sb_id, uint16_t port, const struct port_cred *cred,
		     const char *host, const char *peer, bool tls);

/* ---- port_handler.c ---- */
/* The data plane's host_handler: a request the filter found addressed to a port. */
void port_handle(struct http_req *r);

#endif
