/* port_tunnel.c -- plain TCP to a sandbox's port over a WebSocket on the data plane (ports_front.h):
 * each binary message the client sends is written to the guest's connection, each read from it
 * comes back as one. Each direction stops reading while the other's queue is over TUNNEL_HIGH. */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "daemon.h"
#include "front/front.h"
#include "http/ws.h"
#include "log.h"
#include "ports_front.h"
#include "sandbox/ports.h"

#define TUNNEL_HIGH (1u << 20)
#define TUNNEL_CHUNK (64u << 10)

struct tunnel {
	struct spaced *d;
	struct ws *ws;
	struct port_conn *conn;
	struct bufferevent *ubev;
	char sb_id[ID_LEN];
	uint16_t port;
	bool closing;
	bool eof;        /* the client's input ended (an empty message): the guest is told once
			  * what came before it is written */
};

/* ---- who may open it ---- */

static int bad_port(struct http_req *r)
{
	http_req_error(r, 400, "bad_request", "'%.16s' is not a port (1..65535)", r->param[1]);
	return -1;
}

static int refuse(struct http_req *r, const space_err *e)
{
	if (e->code == ENOENT)
		http_req_error(r, 404, "not_found", "%s", e->msg);
	else if (e->code == EACCES)
		http_req_error(r, 401, "unauthorized", "%s", e->msg);
	else
		http_req_error(r, 503, "unavailable", "%s", e->msg);
	return -1;
}

static void check_read(struct store *conn, void *arg)
{
	port_check_read(conn, arg);
}

static int check_verdict(struct http_req *r, void *arg)
{
	space_err err = { 0 };

	if (port_check_verdict(r->d, arg, &err) < 0)
		return refuse(r, &err);
	return 0;
}

static int tunnel_auth(struct http_req *r)
{
	struct evkeyvalq *in = evhttp_request_get_input_headers(r->req);
	const char *h = evhttp_find_header(in, PORT_TOKEN_HEADER), *a = evhttp_find_header(in, "Authorization");
	struct port_cred cred = { 0 };
	struct port_check *pc;
	space_err err = { 0 };
	char bearer[80];
	int port = port_parse(r->param[1], strlen(r->param[1])), rc;

	if (port < 0)
		return bad_port(r);
	if (h)
		cred.token = h;
	else if (a && http_bearer(a, bearer, sizeof(bearer)) == 0)
		cred.token = bearer;
	if (!(pc = malloc(sizeof(*pc)))) {
		http_req_error(r, 503, "unavailable", "out of memory");
		return -1;
	}
	rc = port_check_begin(r->d, r->param[0], (uint16_t)port, &cred, pc, &err);
	explicit_bzero(bearer, sizeof(bearer));
	if (rc == 0) {
		free(pc);
		return 0;
	}
	if (rc < 0) {
		free(pc);
		return refuse(r, &err);
	}
	return api_step_read(r, check_read, check_verdict, free, pc);
}

/* ---- the bytes ---- */

static void tunnel_end(struct tunnel *t, uint16_t code, const char *why)
{
	if (t->closing)
		return;
	t->closing = true;
	ws_close(t->ws, code, why);
}

/* The guest's bytes, one message per read (at most TUNNEL_CHUNK). */
static void up_read(struct bufferevent *bev, void *arg)
{
	struct tunnel *t = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	unsigned char buf[TUNNEL_CHUNK];

	while (!t->closing && evbuffer_get_length(in)) {
		int n = evbuffer_remove(in, buf, sizeof(buf));

		if (n <= 0 || ws_send(t->ws, true, buf, (size_t)n) < 0)
			break;
	}
	if (ws_queued(t->ws) > TUNNEL_HIGH)
		bufferevent_disable(bev, EV_READ);
}

/* The client said its input ended: once the guest has every byte before it, its socket is
 * shut for writing (the guest reads an end of file; its answer still comes back). */
static void half_close(struct tunnel *t)
{
	if (evbuffer_get_length(bufferevent_get_output(t->ubev)) == 0)
		shutdown(bufferevent_getfd(t->ubev), SHUT_WR);
}

static void up_write(struct bufferevent *bev, void *arg)
{
	struct tunnel *t = arg;

	(void)bev;
	if (t->eof)
		half_close(t);
	else if (!t->closing)
		ws_pause_reading(t->ws, false);
}

static void up_event(struct bufferevent *bev, short what, void *arg)
{
	struct tunnel *t = arg;

	if (what & BEV_EVENT_EOF)
		up_read(bev, t);
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
		tunnel_end(t, WS_CLOSE_NORMAL, what & BEV_EVENT_EOF ? "the guest closed the connection"
								  : "the connection to the guest failed");
}

static void on_message(struct ws *ws, bool binary, const uint8_t *data, size_t len, void *arg)
{
	struct tunnel *t = arg;
	struct evbuffer *out;

	if (!binary) {
		tunnel_end(t, WS_CLOSE_PROTOCOL, "a tunnel carries binary messages only");
		return;
	}
	if (!t->ubev || t->closing || t->eof)
		return;
	if (len == 0) { /* the end of the client's input */
		t->eof = true;
		bufferevent_setwatermark(t->ubev, EV_WRITE, 0, 0);
		half_close(t);
		return;
	}
	out = bufferevent_get_output(t->ubev);
	evbuffer_add(out, data, len);
	if (evbuffer_get_length(out) > TUNNEL_HIGH)
		ws_pause_reading(ws, true);
}

static void on_writable(struct ws *ws, void *arg)
{
	struct tunnel *t = arg;

	(void)ws;
	if (t->ubev && !t->closing)
		bufferevent_enable(t->ubev, EV_READ);
}

static void on_close(struct ws *ws, void *arg)
{
	struct tunnel *t = arg;

	(void)ws;
	port_conn_cancel(t->conn);
	if (t->ubev) {
		bufferevent_free(t->ubev);
		port_traffic(t->d, t->sb_id, -1);
	}
	free(t);
}

static const struct ws_ops tunnel_ops = {
	.on_message = on_message,
	.on_writable = on_writable,
	.on_close = on_close,
};

static void connected(struct bufferevent *ubev, int status, const char *why, void *arg)
{
	struct tunnel *t = arg;

	t->conn = NULL;
	if (!ubev) {
		log_debug("ports: tunnel to port %u of %s: %d %s", (unsigned)t->port, t->sb_id, status, why);
		tunnel_end(t, WS_CLOSE_INTERNAL, why);
		return;
	}
	t->ubev = ubev;
	port_traffic(t->d, t->sb_id, +1);
	bufferevent_setcb(ubev, up_read, up_write, up_event, t);
	bufferevent_setwatermark(ubev, EV_WRITE, TUNNEL_HIGH / 2, 0);
	bufferevent_enable(ubev, EV_READ | EV_WRITE);
	ws_pause_reading(t->ws, false);
}

static void port_tunnel(struct http_req *r)
{
	struct tunnel *t = calloc(1, sizeof(*t));
	int port = port_parse(r->param[1], strlen(r->param[1]));

	if (!t) {
		http_req_error(r, 503, "unavailable", "out of memory");
		return;
	}
	t->d = r->d;
	t->port = (uint16_t)port;
	snprintf(t->sb_id, sizeof(t->sb_id), "%s", r->param[0]);
	if (!(t->ws = ws_accept(r, &tunnel_ops, t, WS_MAX_MESSAGE))) {
		free(t); /* answered */
		return;
	}
	/* nothing is read from the client before the guest's connection is open */
	ws_pause_reading(t->ws, true);
	if (!(t->conn = port_conn_start(r->d, t->sb_id, t->port, connected, t)))
		tunnel_end(t, WS_CLOSE_INTERNAL, "out of memory");
}

const struct http_route port_dp_routes[] = {
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{}/ports/{}/tunnel", port_tunnel, NULL, HTTP_PLACE_SANDBOX, 0, tunnel_auth, NULL },
};
const size_t port_dp_nroutes = sizeof(port_dp_routes) / sizeof(port_dp_routes[0]);
