/* conn.c -- every client connection of both HTTP planes: caps, the whole-request deadline,
 * the close hook held requests use, and backing off accept() at the fd limit.
 *
 * libevent 2.1's evhttp has no hook at accept time (evhttp_set_newreqcb is 2.2). What it does
 * offer: a callback that makes each connection's bufferevent (bevcb), called from evhttp's accept
 * callback just before the connection object is built. So bevcb only queues the new bufferevent
 * (holding a reference, so that it cannot vanish) and activates `inspect`, which runs in the same
 * loop turn, before any byte of that connection is read. By then evhttp has set the bufferevent's
 * callback argument to its connection object, which gives us the peer address and lets us set the
 * connection's close callback: our one destructor hook, called exactly once when evhttp frees
 * the connection (docs/design/http.md, "Connections").
 *
 * On a plane with stream routes, the bufferevent evhttp gets is a filter over the socket's
 * (stream.c), which finds the requests whose body streams.
 */
#include <errno.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http.h"
#include "log.h"
#include "stream.h"

/* How long accepting pauses when the process is out of fds. */
#define ACCEPT_BACKOFF_MS 250
#define MAX_LISTENERS 4
/* Connections accepted and not yet inspected, at most: past it the listeners pause until the
 * inspection (the next loop turn) has admitted or refused them, so a burst of connects cannot
 * take every descriptor before the caps are applied. */
#define PENDING_MAX 64

struct http_conn {
	struct http_conn *next, *prev;
	struct http_conns *owner;
	struct evhttp_connection *evcon; /* NULL while pending */
	struct bufferevent *bev;         /* referenced while pending only */
	struct sockaddr_storage peer;
	socklen_t peerlen;
	struct event *deadline;
	struct http_hold *hold;          /* a held request's close hook */
	struct http_sf *sf;              /* the stream filter, on planes with stream routes */
	const char *plane;               /* the listener's plane name ("api", "data") */
	uint64_t unauth;                 /* unauthenticated body bytes this connection holds */
	bool tls;                        /* its socket speaks TLS: nothing is written to it raw */
};

struct http_listener {
	struct http_conns *owner;
	const struct http_plane *plane;
	struct evconnlistener *l;
	struct event *resume;
	const char *name;
	bool backing_off;
};

/* libevent hands a listener's error callback evhttp's argument, not ours:
 * this maps the listener back (a handful, process-wide). */
static struct http_listener *listener_table[MAX_LISTENERS * 2];

struct http_conns {
	struct event_base *base;
	struct http_limits lim;
	struct http_conn *live;     /* admitted connections */
	struct http_conn *pending;  /* accepted, not yet inspected */
	unsigned nlive, npending;
	bool pending_paused;        /* listeners paused at PENDING_MAX until the inspection */
	struct event *inspect;
	struct http_listener listeners[MAX_LISTENERS];
	int nlisteners;
	uint64_t refused;           /* connections refused over a cap (for logs) */
	uint64_t unauth;            /* unauthenticated body bytes held by all connections */
	uint64_t unauth_released;   /* given back since http_conns_unauth_released last asked */
	uint64_t unauth_refused;    /* bodies refused over the budget (for logs) */
};

enum http_cap http_cap_check(unsigned used_total, unsigned used_group, unsigned max_total, unsigned max_group)
{
	if (max_total && used_total >= max_total)
		return HTTP_CAP_TOTAL;
	if (max_group && used_group >= max_group)
		return HTTP_CAP_GROUP;
	return HTTP_CAP_OK;
}

static void list_add(struct http_conn **head, struct http_conn *c)
{
	c->prev = NULL;
	c->next = *head;
	if (*head)
		(*head)->prev = c;
	*head = c;
}

static void list_del(struct http_conn **head, struct http_conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		*head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->next = c->prev = NULL;
}

static bool same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->ss_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			       &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr));
	return true; /* no address known: one client */
}

static unsigned count_from(const struct http_conns *cs, const struct sockaddr_storage *peer)
{
	unsigned n = 0;

	for (const struct http_conn *c = cs->live; c; c = c->next)
		n += same_host(&c->peer, peer);
	return n;
}

struct http_conn *http_conn_find(struct http_conns *cs, struct evhttp_connection *evcon)
{
	if (!cs || !evcon)
		return NULL;
	for (struct http_conn *c = cs->live; c; c = c->next)
		if (c->evcon == evcon)
			return c;
	return NULL;
}

unsigned http_conns_count(const struct http_conns *cs)
{
	return cs ? cs->nlive : 0;
}

const struct http_limits *http_conns_limits(const struct http_conns *cs)
{
	return &cs->lim;
}

/* ---- the unauthenticated body budget ---- */

static uint64_t unauth_from(const struct http_conns *cs, const struct sockaddr_storage *peer)
{
	uint64_t n = 0;

	for (const struct http_conn *c = cs->live; c; c = c->next)
		if (same_host(&c->peer, peer))
			n += c->unauth;
	return n;
}

bool http_conn_unauth_take(struct http_conn *c, uint64_t n)
{
	struct http_conns *cs = c->owner;
	const struct http_limits *lim = &cs->lim;

	if ((lim->unauth_bytes && cs->unauth + n > lim->unauth_bytes) ||
	    (lim->unauth_bytes_per_client && unauth_from(cs, &c->peer) + n > lim->unauth_bytes_per_client)) {
		if (cs->unauth_refused++ % 1000 == 0)
			log_warn("http: refusing request bodies of clients not yet authenticated: %llu bytes of "
				 "them in flight (%llu refused so far)", (unsigned long long)cs->unauth,
				 (unsigned long long)cs->unauth_refused);
		return false;
	}
	c->unauth += n;
	cs->unauth += n;
	return true;
}

void http_conn_unauth_give(struct http_conn *c)
{
	if (!c || !c->unauth)
		return;
	c->owner->unauth -= c->unauth;
	c->owner->unauth_released += c->unauth;
	c->unauth = 0;
}

uint64_t http_conns_unauth_held(const struct http_conns *cs)
{
	return cs ? cs->unauth : 0;
}

uint64_t http_conns_unauth_released(struct http_conns *cs)
{
	uint64_t n = cs ? cs->unauth_released : 0;

	if (cs)
		cs->unauth_released = 0;
	return n;
}

/* ---- per-connection lifetime ---- */

static void conn_free(struct http_conn *c)
{
	if (c->deadline)
		event_free(c->deadline);
	free(c);
}

/* evhttp is freeing the connection (client gone, error, timeout, our deadline). */
static void conn_closed(struct evhttp_connection *evcon, void *arg)
{
	struct http_conn *c = arg;
	struct http_hold *h = c->hold;

	(void)evcon;
	list_del(&c->owner->live, c);
	c->owner->nlive--;
	c->hold = NULL;
	if (h)
		http_hold_gone(h);
	if (c->sf) /* after the hold: its on_gone may still look at the body */
		http_sf_conn_gone(c->sf);
	http_conn_unauth_give(c);
	conn_free(c);
}

static void deadline_hit(evutil_socket_t fd, short what, void *arg)
{
	struct http_conn *c = arg;

	(void)fd;
	(void)what;
	log_debug("http: closing a connection that sent no whole request within %d s",
		  c->owner->lim.request_timeout_s);
	/* Not inside any evhttp callback: freeing here is what evhttp_free does. */
	evhttp_connection_free(c->evcon);
}

void http_conn_deadline_arm(struct http_conn *c)
{
	struct timeval tv = { .tv_sec = c->owner->lim.request_timeout_s };

	if (c->deadline && c->owner->lim.request_timeout_s > 0)
		evtimer_add(c->deadline, &tv);
}

void http_conn_deadline_stop(struct http_conn *c)
{
	if (c->deadline)
		evtimer_del(c->deadline);
}

void http_conn_set_hold(struct http_conn *c, struct http_hold *h)
{
	c->hold = h;
}

struct http_sf *http_conn_sf(struct http_conn *c)
{
	return c ? c->sf : NULL;
}

const char *http_conn_plane(const struct http_conn *c)
{
	return c ? c->plane : NULL;
}

/* From an event of our own, never inside an evhttp callback. */
void http_conn_close(struct http_conn *c)
{
	evhttp_connection_free(c->evcon);
}

/* ---- admission ---- */

/* Frees a refused connection and closes its socket now. A filtered connection's socket is
 * closed by its bufferevent only when libevent finalizes it, a loop turn or two later: during a
 * burst of refusals (one client opening more than its cap) those descriptors would pile up and
 * push accept() into EMFILE, which the caps sized from the fd limit exist to prevent. The socket's
 * bufferevent is told it has no descriptor any more, so nothing closes the number twice. */
static void refuse_close(struct http_conn *c, int fd)
{
	struct bufferevent *under = c->sf ? bufferevent_get_underlying(c->bev) : NULL;

	evhttp_connection_free(c->evcon); /* shutdown(fd); the filter is freed later */
	if (under && fd >= 0 && bufferevent_getfd(under) == fd) {
		bufferevent_setfd(under, -1);
		close(fd);
	}
}

/* Over a cap, before evhttp has read anything: answer 429 ourselves and
 * close. What the client already sent is read and dropped first, so that the
 * close is a FIN rather than a reset that could destroy the answer. */
static void refuse(struct http_conns *cs, struct http_conn *c, enum http_cap why)
{
	int fd = bufferevent_getfd(c->bev);
	json_t *body = http_error_body("at_capacity", why == HTTP_CAP_TOTAL
							      ? "too many connections to this server; retry later"
							      : "too many connections from your address; retry later");
	char *s = body ? json_dumps(body, JSON_COMPACT) : NULL;
	char reply[512], sink[4096];
	int n = -1;

	json_decref(body);
	if (cs->refused++ % 1000 == 0)
		log_warn("http: refusing connections over the %s cap (%u open; %llu refused so far)",
			 why == HTTP_CAP_TOTAL ? "per-daemon" : "per-client", cs->nlive,
			 (unsigned long long)cs->refused);
	for (int i = 0; i < 16 && !c->tls && recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; i++)
		;
	if (s && !c->tls) /* a TLS client just sees the close (these are a node's api processes) */
		n = snprintf(reply, sizeof(reply),
			     "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
			     "Cache-Control: no-store\r\nRetry-After: 1\r\nConnection: close\r\n"
			     "Content-Length: %zu\r\n\r\n%s\n",
			     strlen(s) + 1, s);
	free(s);
	/* Best effort: a fresh socket's buffer takes these few hundred bytes. */
	if (n > 0 && (size_t)n < sizeof(reply))
		(void)!send(fd, reply, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
	refuse_close(c, fd);
}

static void admit_one(struct http_conns *cs, struct http_conn *c)
{
	bufferevent_data_cb rcb, wcb;
	bufferevent_event_cb ecb;
	const struct sockaddr *sa;
	void *arg = NULL;

	bufferevent_getcb(c->bev, &rcb, &wcb, &ecb, &arg);
	/* bufferevent_free clears the callbacks: NULL means evhttp already
	 * gave the connection up (it could not allocate its first request). */
	if (!arg || evhttp_connection_get_bufferevent(arg) != c->bev) {
		bufferevent_decref(c->bev);
		conn_free(c);
		return;
	}
	c->evcon = arg;
	sa = evhttp_connection_get_addr(c->evcon);
	/* libevent keeps room for an IPv4 or IPv6 address only; our listeners
	 * are TCP. Anything else stays zero: such clients count as one. */
	if (sa && (sa->sa_family == AF_INET || sa->sa_family == AF_INET6)) {
		c->peerlen = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
		memcpy(&c->peer, sa, c->peerlen);
	}
	enum http_cap why = http_cap_check(cs->nlive, count_from(cs, &c->peer), cs->lim.max_conns,
					   cs->lim.max_conns_per_client);
	if (why != HTTP_CAP_OK) {
		refuse(cs, c, why);
		bufferevent_decref(c->bev);
		conn_free(c);
		return;
	}
	c->deadline = evtimer_new(cs->base, deadline_hit, c);
	if (c->sf)
		http_sf_set_conn(c->sf, c, cs->lim.request_timeout_s);
	list_add(&cs->live, c);
	cs->nlive++;
	evhttp_connection_set_closecb(c->evcon, conn_closed, c);
	http_conn_deadline_arm(c);
	bufferevent_decref(c->bev);
	c->bev = NULL;
}

static void inspect(evutil_socket_t fd, short what, void *arg)
{
	struct http_conns *cs = arg;
	struct http_conn *c;

	(void)fd;
	(void)what;
	while ((c = cs->pending)) {
		list_del(&cs->pending, c);
		admit_one(cs, c);
	}
	cs->npending = 0;
	if (cs->pending_paused) {
		cs->pending_paused = false;
		for (int i = 0; i < cs->nlisteners; i++)
			if (!cs->listeners[i].backing_off)
				evconnlistener_enable(cs->listeners[i].l);
	}
}

/* The socket's bufferevent wrapped in the stream filter. It closes the fd when it is freed (after
 * evhttp's shutdown(), once its events are gone): evhttp closes only a bufferevent's fd that is
 * not BEV_OPT_CLOSE_ON_FREE. NULL: no memory (the connection then goes unfiltered). */
static struct bufferevent *socket_bev(struct event_base *base, const struct http_plane *plane)
{
	SSL *ssl;

	if (!plane->tls)
		return bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	/* evhttp gives it the socket (bufferevent_setfd), and the handshake starts then */
	if (!(ssl = SSL_new(plane->tls)))
		return NULL;
	return bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
}

static struct bufferevent *make_filtered(struct event_base *base, const struct http_plane *plane,
					 struct http_sf **sfp)
{
	struct bufferevent *under = socket_bev(base, plane), *f = NULL;
	struct http_sf *sf = under ? http_sf_new(plane->stream_routes, plane->nstream_routes, HTTP_BODY_BUFFER) : NULL;

	if (sf) {
		http_sf_set_plane(sf, plane);
		f = http_sf_wrap(sf, base, under); /* frees both on failure */
	}
	else if (under)
		bufferevent_free(under);
	if (!f)
		return NULL;
	*sfp = sf;
	return f;
}

static struct bufferevent *make_bev(struct event_base *base, void *arg)
{
	struct http_listener *hl = arg;
	struct http_conns *cs = hl->owner;
	struct http_conn *c = calloc(1, sizeof(*c));
	struct bufferevent *bev = NULL;

	if (c && hl->plane && (hl->plane->nstream_routes || hl->plane->head_auth || hl->plane->tls))
		bev = make_filtered(base, hl->plane, &c->sf);
	if (!bev && hl->plane && hl->plane->tls)
		bev = socket_bev(base, hl->plane);
	else if (!bev)
		bev = bufferevent_socket_new(base, -1, 0);
	if (!bev) {
		free(c);
		return NULL; /* evhttp makes its own; that connection goes uncounted */
	}
	if (!c)
		return bev;
	c->owner = cs;
	c->bev = bev;
	c->plane = hl->name;
	c->tls = hl->plane && hl->plane->tls;
	bufferevent_incref(bev);
	list_add(&cs->pending, c);
	event_active(cs->inspect, EV_TIMEOUT, 0);
	if (++cs->npending >= PENDING_MAX && !cs->pending_paused) {
		cs->pending_paused = true;
		for (int i = 0; i < cs->nlisteners; i++)
			evconnlistener_disable(cs->listeners[i].l);
	}
	for (int i = 0; i < cs->nlisteners; i++) {
		struct http_listener *l = &cs->listeners[i];
		if (l->backing_off && !event_pending(l->resume, EV_TIMEOUT, NULL)) {
			l->backing_off = false;
			log_info("%s: accepting connections again", l->name);
		}
	}
	return bev;
}

/* ---- accept() errors ---- */

static void listener_resume(evutil_socket_t fd, short what, void *arg)
{
	struct http_listener *hl = arg;

	(void)fd;
	(void)what;
	evconnlistener_enable(hl->l);
}

/* libevent keeps a listener enabled after an accept() error, and the
 * pending connection keeps the socket readable: at EMFILE it would spin.
 * Pause accepting instead; the episode is logged once (make_bev logs its
 * end). */
static void listener_error(struct evconnlistener *l, void *arg)
{
	struct http_listener *hl = NULL;
	struct timeval tv = { .tv_usec = ACCEPT_BACKOFF_MS * 1000 };
	int e = errno;

	(void)arg;
	for (size_t i = 0; i < sizeof(listener_table) / sizeof(*listener_table); i++)
		if (listener_table[i] && listener_table[i]->l == l)
			hl = listener_table[i];
	if (!hl)
		return;
	evconnlistener_disable(l);
	evtimer_add(hl->resume, &tv);
	if (!hl->backing_off)
		log_warn("%s: accept: %s (%u connections open); pausing accepts for %d ms at a time",
			 hl->name, strerror(e), hl->owner->nlive, ACCEPT_BACKOFF_MS);
	hl->backing_off = true;
}

int http_conns_attach(struct http_conns *cs, struct evhttp *http, struct evhttp_bound_socket *bound,
		      const struct http_plane *plane, space_err *err)
{
	const char *name = plane->name;
	struct http_listener *hl;

	if (cs->nlisteners == MAX_LISTENERS)
		return err_set(err, ENOSPC, "%s: too many listeners", name);
	hl = &cs->listeners[cs->nlisteners];
	hl->owner = cs;
	hl->plane = plane;
	hl->name = name;
	hl->l = evhttp_bound_socket_get_listener(bound);
	hl->resume = evtimer_new(cs->base, listener_resume, hl);
	if (!hl->resume)
		return err_set(err, ENOMEM, "%s: out of memory", name);
	for (size_t i = 0; i < sizeof(listener_table) / sizeof(*listener_table); i++) {
		if (!listener_table[i]) {
			listener_table[i] = hl;
			break;
		}
	}
	cs->nlisteners++;
	evconnlistener_set_error_cb(hl->l, listener_error);
	evhttp_set_bevcb(http, make_bev, hl);
	return 0;
}

struct http_conns *http_conns_new(struct event_base *base, const struct http_limits *lim)
{
	struct http_conns *cs = calloc(1, sizeof(*cs));

	if (!cs)
		return NULL;
	cs->base = base;
	cs->lim = *lim;
	/* Before any other event of the turn: no byte is read before admission. */
	cs->inspect = event_new(base, -1, 0, inspect, cs);
	if (!cs->inspect) {
		free(cs);
		return NULL;
	}
	event_priority_set(cs->inspect, 0);
	return cs;
}

/* After evhttp_free of every listener (which closes their connections
 * through conn_closed). */
void http_conns_free(struct http_conns *cs)
{
	struct http_conn *c;

	if (!cs)
		return;
	while ((c = cs->pending)) {
		list_del(&cs->pending, c);
		bufferevent_decref(c->bev);
		conn_free(c);
	}
	while ((c = cs->live)) { /* a listener not freed: forget, do not touch */
		list_del(&cs->live, c);
		if (c->sf)
			http_sf_set_conn(c->sf, NULL, 0);
		conn_free(c);
	}
	for (int i = 0; i < cs->nlisteners; i++) {
		for (size_t j = 0; j < sizeof(listener_table) / sizeof(*listener_table); j++)
			if (listener_table[j] == &cs->listeners[i])
				listener_table[j] = NULL;
		event_free(cs->listeners[i].resume);
	}
	event_free(cs->inspect);
	free(cs);
}
