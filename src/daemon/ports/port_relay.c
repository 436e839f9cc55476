/* port_relay.c -- a client's connection and the guest's port, relayed (ports_front.h): the
 * client's requests through port_rw, the guest's bytes back untouched; after an upgrade both
 * ways untouched. Each direction stops reading while the other side's queue is above
 * PROXY_QUEUE_HIGH, so a slow reader holds at most that much here. */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "daemon.h"
#include "http/proxy.h"
#include "log.h"
#include "ports_front.h"
#include "sandbox/ports.h"

struct port_relay {
	struct http_hold hold; /* first: relay_gone gets it */
	struct spaced *d;
	char sb_id[ID_LEN];    /* whose port: its connection counts as use while it lasts */
	uint16_t port;
	char token[80], traffic[80]; /* the credential that let it in ("": none) */
	struct evhttp_connection *evcon;
	struct bufferevent *cbev, *ubev;
	struct port_rw rw;
	bool raw;        /* upgraded: bytes pass untouched */
	bool draining;   /* one side is done: close once the client has what is queued */
	bool stopping;   /* the client's next request is not passed on: the guest answers the
			  * ones it has, then sees the end of its input */
	bool finishing;
};

static void finish(struct port_relay *p)
{
	if (p->finishing)
		return;
	p->finishing = true;
	evhttp_connection_free(p->evcon); /* relay_gone runs inside */
}

static void relay_gone(struct http_hold *h)
{
	struct port_relay *p = (struct port_relay *)h;

	if (p->ubev)
		bufferevent_free(p->ubev);
	port_rw_free(&p->rw);
	port_traffic(p->d, p->sb_id, -1);
	explicit_bzero(p->token, sizeof(p->token));
	explicit_bzero(p->traffic, sizeof(p->traffic));
	free(p);
}

/* Nothing more comes from one side: the client gets what is queued, then the connection ends. */
static void drain(struct port_relay *p)
{
	if (p->ubev) {
		bufferevent_free(p->ubev);
		p->ubev = NULL;
	}
	p->draining = true;
	bufferevent_disable(p->cbev, EV_READ);
	if (evbuffer_get_length(bufferevent_get_output(p->cbev)) == 0)
		finish(p);
	else
		bufferevent_setwatermark(p->cbev, EV_WRITE, 0, 0);
}

static void up_read(struct bufferevent *bev, void *arg)
{
	struct port_relay *p = arg;

	evbuffer_add_buffer(bufferevent_get_output(p->cbev), bufferevent_get_input(bev));
	if (evbuffer_get_length(bufferevent_get_output(p->cbev)) > PROXY_QUEUE_HIGH)
		bufferevent_disable(bev, EV_READ);
}

/* Once the guest has every byte of the requests passed on, it is told there are no more. */
static void half_close(struct port_relay *p)
{
	if (evbuffer_get_length(bufferevent_get_output(p->ubev)) == 0)
		shutdown(bufferevent_getfd(p->ubev), SHUT_WR);
}

static void up_write(struct bufferevent *bev, void *arg)
{
	struct port_relay *p = arg;

	(void)bev;
	if (p->stopping)
		half_close(p);
	else if (!p->draining)
		bufferevent_enable(p->cbev, EV_READ);
}

/* A request the relay will not pass (another host, malformed): the ones before it are answered
 * (within 30 s), then the connection ends. */
static void stop_client(struct port_relay *p, struct evbuffer *in)
{
	struct timeval tv = { .tv_sec = 30 };

	log_debug("ports: %s: %s; closing the connection after the replies", p->rw.host, p->rw.why);
	p->stopping = true;
	evbuffer_drain(in, evbuffer_get_length(in));
	bufferevent_disable(p->cbev, EV_READ);
	bufferevent_setwatermark(p->ubev, EV_WRITE, 0, 0);
	bufferevent_set_timeouts(p->ubev, &tv, &tv);
	half_close(p);
}

static void up_event(struct bufferevent *bev, short what, void *arg)
{
	struct port_relay *p = arg;

	if (what & BEV_EVENT_EOF)
		up_read(bev, p); /* bytes that came with it */
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
		drain(p);
}

/* The client's bytes, through the rewriter until an upgrade. */
static void client_read(struct bufferevent *bev, void *arg)
{
	struct port_relay *p = arg;
	struct evbuffer *in = bufferevent_get_input(bev), *out;

	if (!p->ubev || p->stopping) {
		evbuffer_drain(in, evbuffer_get_length(in));
		return;
	}
	out = bufferevent_get_output(p->ubev);
	while (!p->raw && evbuffer_get_length(in)) {
		struct evbuffer_iovec v;
		size_t used;

		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1 || !v.iov_len)
			break;
		used = port_rw_feed(&p->rw, v.iov_base, v.iov_len, out);
		evbuffer_drain(in, used);
		if (p->rw.status == PORT_RW_RAW) {
			p->raw = true;
		} else if (p->rw.status == PORT_RW_STOP) {
			stop_client(p, in);
			return;
		}
	}
	if (p->raw)
		evbuffer_add_buffer(out, in);
	if (evbuffer_get_length(out) > PROXY_QUEUE_HIGH)
		bufferevent_disable(bev, EV_READ);
}

static void client_write(struct bufferevent *bev, void *arg)
{
	struct port_relay *p = arg;

	if (p->draining) {
		if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
			finish(p);
		return;
	}
	if (p->ubev && !p->finishing)
		bufferevent_enable(p->ubev, EV_READ);
}

static void client_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
		finish(arg);
}

/* Before each later request: does what let the connection in still open the port? */
static bool still_open(void *arg)
{
	struct port_relay *p = arg;
	struct port_cred cred = { .token = p->token[0] ? p->token : NULL, .traffic = p->traffic[0] ? p->traffic : NULL };

	return port_still_open(p->d, p->sb_id, p->port, &cred);
}

int port_relay_start(struct spaced *d, struct evhttp_request *req, struct bufferevent *cbev,
		     struct bufferevent *ubev, const char *sb_id, uint16_t port, const struct port_cred *cred,
		     const char *host, const char *peer, bool tls)
{
	struct port_relay *p = calloc(1, sizeof(*p));

	if (!p || port_rw_init(&p->rw, host, peer, tls ? "https" : "http", d->cfg.api_key) < 0) {
		free(p);
		return -1;
	}
	p->d = d;
	snprintf(p->sb_id, sizeof(p->sb_id), "%s", sb_id);
	p->port = port;
	snprintf(p->token, sizeof(p->token), "%s", cred && cred->token ? cred->token : "");
	snprintf(p->traffic, sizeof(p->traffic), "%s", cred && cred->traffic ? cred->traffic : "");
	p->rw.allow = still_open;
	p->rw.allow_arg = p;
	port_traffic(d, sb_id, +1);
	p->evcon = evhttp_request_get_connection(req);
	p->cbev = cbev;
	/* bytes go on as they come: a reply split in two is not held back for an ACK (the guest's
	 * side is set so by port_connect.c) */
	setsockopt(bufferevent_getfd(cbev), IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));

	p->ubev = ubev;
	http_hold_begin(&p->hold, req, relay_gone, d->conns);
	bufferevent_setcb(cbev, client_read, client_write, client_event, p);
	bufferevent_setwatermark(cbev, EV_READ, 0, 0);
	bufferevent_setwatermark(cbev, EV_WRITE, PROXY_QUEUE_HIGH / 2, 0);
	bufferevent_set_timeouts(cbev, NULL, NULL);
	bufferevent_setcb(ubev, up_read, up_write, up_event, p);
	bufferevent_setwatermark(ubev, EV_WRITE, PROXY_QUEUE_HIGH / 2, 0);
	bufferevent_set_timeouts(ubev, NULL, NULL);
	bufferevent_enable(ubev, EV_READ | EV_WRITE);
	bufferevent_enable(cbev, EV_READ | EV_WRITE);
	if (evbuffer_get_length(bufferevent_get_input(cbev)))
		client_read(cbev, p); /* may end it (and free p) */
	return 0;
}
