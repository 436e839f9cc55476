/* port_connect.c -- a connection to a port of a sandbox's guest, opened from the sandbox's netns:
 * the sandbox woken first when traffic finds it paused or suspended (ports_front.h) */
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon.h"
#include "log.h"
#include "net/net.h"
#include "ports_front.h"
#include "sandbox/ports.h"

struct port_conn {
	struct spaced *d;
	char sb_id[ID_LEN];
	uint16_t port;
	port_conn_cb cb;
	void *arg;
	struct bufferevent *ubev;
	struct event *ev;        /* the next look at a waking sandbox, or a failure told from the loop */
	int64_t wait_until_ms;
	int status;              /* a failure to tell (ev fires) */
	char why[400];
};

static void conn_free(struct port_conn *c)
{
	if (c->ubev)
		bufferevent_free(c->ubev);
	if (c->ev)
		event_free(c->ev);
	free(c);
}

void port_conn_cancel(struct port_conn *c)
{
	if (c)
		conn_free(c);
}

/* Tells the caller, once, and frees c (ubev becomes the caller's on success). */
static void tell(struct port_conn *c, struct bufferevent *ubev)
{
	port_conn_cb cb = c->cb;
	void *arg = c->arg;
	int status = c->status;
	char why[sizeof(c->why)];

	snprintf(why, sizeof(why), "%s", c->why);
	if (ubev)
		c->ubev = NULL;
	conn_free(c);
	cb(ubev, status, why, arg);
}

static void fire_cb(evutil_socket_t fd, short what, void *arg);

/* A failure, told from the loop (never inside port_conn_start). */
static void fail(struct port_conn *c, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(struct port_conn *c, int status, const char *fmt, ...)
{
	struct timeval now = { 0 };
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
	c->status = status;
	if (c->ubev) {
		bufferevent_free(c->ubev);
		c->ubev = NULL;
	}
	if (!c->ev)
		c->ev = evtimer_new(c->d->base, fire_cb, c);
	if (c->ev)
		evtimer_add(c->ev, &now);
	else
		log_error("ports: out of memory telling a failure (%s)", c->why); /* c stays until cancelled */
}

/* A guest that is gone (its sandbox deleted, its VM killed) never answers again: keepalive
 * probes and a user timeout end the connection within about PORT_DEAD_S, and with it what it
 * holds (the socket keeps the sandbox's netns alive), however long the client stays quiet. */
static void watch_guest(int fd)
{
	int on = 1, idle = PORT_KEEPIDLE_S, intvl = PORT_KEEPINTVL_S, cnt = PORT_KEEPCNT;
	unsigned timeout_ms = PORT_DEAD_S * 1000;

	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &timeout_ms, sizeof(timeout_ms));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
}

static void connected(struct bufferevent *bev, short what, void *arg)
{
	struct port_conn *c = arg;

	if (what & BEV_EVENT_CONNECTED) {
		watch_guest(bufferevent_getfd(bev));
		bufferevent_setcb(bev, NULL, NULL, NULL, NULL);
		bufferevent_set_timeouts(bev, NULL, NULL);
		c->status = 0;
		c->why[0] = '\0';
		tell(c, bev);
		return;
	}
	if (what & BEV_EVENT_TIMEOUT) {
		fail(c, 502, "port %u of sandbox %s did not accept a connection within %d s", (unsigned)c->port, c->sb_id,
		     PORT_CONNECT_TIMEOUT_S);
		return;
	}
	int e = EVUTIL_SOCKET_ERROR();

	fail(c, 502, "nothing accepts connections on port %u of sandbox %s (%s)", (unsigned)c->port, c->sb_id,
	     e ? evutil_socket_error_to_string(e) : "closed");
}

static void try_connect(struct port_conn *c)
{
	struct timeval tv = { .tv_sec = PORT_CONNECT_TIMEOUT_S }, poll = { .tv_usec = PORT_WAKE_POLL_MS * 1000 };
	struct sockaddr_in sa;
	space_err err = { 0 };
	int fd;

	switch (port_ready(c->d, c->sb_id, &err)) {
	case 0:
		break;
	case 1: /* on its way: look again shortly, until PORT_WAKE_WAIT_S have gone */
		if (!c->wait_until_ms)
			c->wait_until_ms = now_ms() + PORT_WAKE_WAIT_S * 1000;
		if (now_ms() >= c->wait_until_ms) {
			fail(c, 503, "sandbox %s is not running yet (waking it took longer than %d s); retry", c->sb_id,
			     PORT_WAKE_WAIT_S);
			return;
		}
		if (!c->ev && !(c->ev = evtimer_new(c->d->base, fire_cb, c))) {
			fail(c, 503, "out of memory");
			return;
		}
		evtimer_add(c->ev, &poll);
		return;
	default:
		fail(c, err.code == ENOENT ? 404 : 503, "%s", err.msg);
		return;
	}
	if ((fd = net_ingress_socket(c->d, c->sb_id, &err)) < 0) {
		fail(c, 503, "sandbox %s's network is not up: %s", c->sb_id, err.msg);
		return;
	}
	c->ubev = bufferevent_socket_new(c->d->base, fd, BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (!c->ubev) {
		close(fd);
		fail(c, 503, "out of memory");
		return;
	}
	net_ingress_addr(c->port, &sa);
	bufferevent_setcb(c->ubev, NULL, NULL, connected, c);
	bufferevent_set_timeouts(c->ubev, NULL, &tv);
	if (bufferevent_socket_connect(c->ubev, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		log_debug("ports: connecting to port %u of %s failed at once", (unsigned)c->port, c->sb_id);
}

static void fire_cb(evutil_socket_t fd, short what, void *arg)
{
	struct port_conn *c = arg;

	(void)fd;
	(void)what;
	if (c->status)
		tell(c, NULL);
	else
		try_connect(c);
}

struct port_conn *port_conn_start(struct spaced *d, const char *sb_id, uint16_t port, port_conn_cb cb, void *arg)
{
	struct port_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->d = d;
	snprintf(c->sb_id, sizeof(c->sb_id), "%s", sb_id);
	c->port = port;
	c->cb = cb;
	c->arg = arg;
	try_connect(c);
	return c;
}
