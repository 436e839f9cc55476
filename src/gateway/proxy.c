/* proxy.c -- every guest TCP connection: accept on :15001, the original destination, refusal
 * of reserved and host addresses, sniffing the first bytes (peeked, never consumed, so TLS
 * and relays read them again), the decision, and the upstream connect (egress.md). */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/listener.h>
#include <linux/netfilter_ipv4.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egress/rules.h"
#include "gw.h"
#include "log.h"
#include "sniff.h"

static void addr_str(uint32_t a, char *out, size_t len)
{
	snprintf(out, len, "%u.%u.%u.%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
}

bool gw_addr_refused(struct gw *g, uint32_t addr, uint16_t port, char *why, size_t len)
{
	const struct egress_entry *r = egress_cidrs_match(&g->refuse, addr);
	bool host = false;

	if (addr == EGRESS_GW_ADDR) {
		snprintf(why, len, "the gateway itself");
		return true;
	}
	/* The node's own ranges (a cluster's pods and services): before any allow, so that no
	 * policy, 0.0.0.0/0 or a CIDR naming them, opens them. */
	if (r) {
		snprintf(why, len, "refused by the node (--egress-refuse %s)", r->text);
		return true;
	}
	for (int i = 0; i < g->nhost_addrs; i++)
		host |= g->host_addrs[i] == addr;
	if (!host && !egress_addr_reserved(addr))
		return false;
	if (egress_cidr_names(g->policy, addr, port))
		return false;
	snprintf(why, len, "reserved or host address");
	return true;
}

static bool denied(const struct egress_verdict *v)
{
	return !v->allow && strncmp(v->reason, "denied", 6) == 0;
}

bool gw_cidr_allows(const struct gw_conn *c)
{
	return egress_check_addr(c->g->policy, c->addr, c->port).allow;
}

struct egress_verdict gw_decide_name(struct gw *g, const char *name, uint32_t addr, uint16_t port)
{
	struct egress_verdict nv = { .allow = false }, av;
	char a[INET_ADDRSTRLEN];

	if (name && *name) {
		nv = egress_check_name(g->policy, name, port);
		if (denied(&nv))
			return nv;
	}
	av = egress_check_addr(g->policy, addr, port);
	if (av.allow || denied(&av) || !name || !*name) {
		if (!av.allow && !denied(&av))
			snprintf(av.reason, sizeof(av.reason), "no name and no CIDR rule for the address");
		return av;
	}
	if (nv.allow && !gw_handout_has(g, addr, name)) {
		addr_str(addr, a, sizeof(a));
		nv.allow = false;
		snprintf(nv.reason, sizeof(nv.reason), "%s was not handed out for %s", a, name);
	}
	return nv;
}

/* ---- connection lifetime ---- */

static struct gw_conn *conn_new(struct gw *g, int fd, uint32_t addr, uint16_t port)
{
	struct gw_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->g = g;
	c->fd = fd;
	c->addr = addr;
	c->port = port;
	c->last = time(NULL);
	c->next = g->conns;
	if (g->conns)
		g->conns->prev = c;
	g->conns = c;
	g->nconns++;
	return c;
}

static void audit_conn(struct gw_conn *c, bool allow, const char *reason)
{
	struct gw_audit_rec r = {
		.proto = gw_proto_name(c->proto), .addr = c->addr, .port = c->port, .name = c->name,
		.allow = allow, .reason = reason, .bytes_out = c->bytes_out, .bytes_in = c->bytes_in,
	};

	gw_audit(c->g, &r);
}

/* Frees the connection; an allowed one (it got as far as a relay) is audited here. */
void gw_conn_free(struct gw_conn *c)
{
	struct gw *g = c->g;

	if (c->relaying)
		audit_conn(c, true, c->reason);
	if (c->sniff)
		event_free(c->sniff);
	if (c->http)
		gw_http_free(c->http);
	if (c->down) {
		gw_relay_unaccount(c, c->down);
		bufferevent_free(c->down);
	} else if (c->fd >= 0) {
		close(c->fd);
	}
	gw_relay_drop_up(c);
	if (c->prev)
		c->prev->next = c->next;
	else
		g->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	g->nconns--;
	free(c);
}

void gw_conn_refuse(struct gw_conn *c, const char *reason)
{
	c->relaying = false;
	audit_conn(c, false, reason);
	gw_conn_free(c);
}

static void refuse(struct gw_conn *c, const char *reason)
{
	gw_conn_refuse(c, reason);
}

struct bufferevent *gw_conn_connect(struct gw_conn *c, SSL *ssl)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(c->port),
				   .sin_addr.s_addr = htonl(c->addr) };
	struct bufferevent *b;
	int opts = BEV_OPT_CLOSE_ON_FREE;

	b = ssl ? bufferevent_openssl_socket_new(c->g->base, -1, ssl, BUFFEREVENT_SSL_CONNECTING, opts)
		: bufferevent_socket_new(c->g->base, -1, opts);
	if (!b) {
		if (ssl)
			SSL_free(ssl);
		return NULL;
	}
	if (bufferevent_socket_connect(b, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
		bufferevent_free(b);
		return NULL;
	}
	return b;
}

/* ---- the decision ---- */

/* Intercept TLS to `name`: our leaf for the guest, a verified TLS client upstream (offering
 * the ALPN the guest's side will select), connected at once; which relay runs inside is
 * decided by the first bytes (relay.c classify). */
static int start_intercept(struct gw_conn *c)
{
	space_err err;
	SSL *server = gw_tls_server(c->g->tls, c->name, &err), *client;

	if (!server) {
		log_warn("intercepting %s: %s", c->name, err.msg);
		return -1;
	}
	client = gw_tls_client(c->g->tls, c->name, c->alpn_http11, &err);
	if (!client) {
		log_warn("intercepting %s: %s", c->name, err.msg);
		SSL_free(server);
		return -1;
	}
	c->down = bufferevent_openssl_socket_new(c->g->base, c->fd, server, BUFFEREVENT_SSL_ACCEPTING,
						 BEV_OPT_CLOSE_ON_FREE);
	if (!c->down) {
		SSL_free(server);
		SSL_free(client);
		return -1;
	}
	c->fd = -1;
	c->up = gw_conn_connect(c, client);
	c->upstream_tls = true;
	c->proto = GW_HTTPS; /* until the first bytes say otherwise: TLS that is not HTTP */
	c->classifying = true;
	return c->up ? 0 : -1;
}

enum relay_mode {
	RELAY_OPAQUE,    /* bytes as they are (TLS passed through; TCP a CIDR or name:port allows) */
	RELAY_FIRST,     /* opaque after silence: whoever speaks first decides (relay.c classify) */
	RELAY_HTTP,      /* the HTTP relay, connecting on the first allowed request */
	RELAY_INTERCEPT, /* TLS terminated with the sandbox's CA */
};

/* Allowed: connect (opaque at once; HTTP on its first allowed request) and relay. */
static void start_relay(struct gw_conn *c, enum relay_mode mode)
{
	event_free(c->sniff);
	c->sniff = NULL;
	if (mode == RELAY_INTERCEPT) {
		if (start_intercept(c) < 0) {
			refuse(c, "interception failed");
			return;
		}
	} else {
		c->down = bufferevent_socket_new(c->g->base, c->fd, BEV_OPT_CLOSE_ON_FREE);
		if (!c->down) {
			refuse(c, "out of memory");
			return;
		}
		c->fd = -1;
		if (mode == RELAY_HTTP ? gw_http_new(c) < 0 : !(c->up = gw_conn_connect(c, NULL))) {
			refuse(c, "upstream connect failed");
			return;
		}
		c->classifying = mode == RELAY_FIRST;
	}
	gw_relay_start(c);
}

/* TLS is intercepted unless the allow entry says "tls": "passthrough" (and no inject rule
 * needs the plaintext), or there is no name to make a certificate for (a CIDR rule alone
 * allowed a ClientHello without SNI: any bytes may go to that address anyway). Without a CA
 * (a gateway given none) it is refused, never silently passed through. */
static void decide_tls(struct gw_conn *c, const struct gw_hello *hello)
{
	const struct egress_inject *inj[EGRESS_MAX_INJECT + 1];
	struct egress_verdict v;
	size_t r;

	c->proto = GW_TLS;
	c->alpn_http11 = hello->alpn_http11;
	if (*hello->sni && !egress_name_normalise(hello->sni, c->name)) {
		refuse(c, "bad SNI name");
		return;
	}
	v = gw_decide_name(c->g, c->name, c->addr, c->port);
	snprintf(c->reason, sizeof(c->reason), "%s", v.reason);
	if (!v.allow) {
		refuse(c, v.reason);
		return;
	}
	if (!c->name[0] || (v.passthrough && egress_injects_for(c->g->policy, c->name, inj) == 0)) {
		r = strlen(c->reason);
		snprintf(c->reason + r, sizeof(c->reason) - r, c->name[0] ? " (tls passthrough)" : " (no SNI)");
		start_relay(c, RELAY_OPAQUE);
		return;
	}
	if (!gw_tls_has_ca(c->g->tls)) {
		refuse(c, "no CA to intercept TLS with (only an entry marked tls: passthrough passes TLS untouched)");
		return;
	}
	start_relay(c, RELAY_INTERCEPT);
}

/* first: nothing came within the sniff window; if allowed, the relay starts and the first
 * bytes either way decide between HTTP and opaque. */
static void decide_opaque(struct gw_conn *c, bool first)
{
	struct egress_verdict v = egress_check_addr(c->g->policy, c->addr, c->port);
	const char *name;

	c->proto = GW_TCP;
	if (!v.allow && !denied(&v)) {
		name = gw_handout_name_for_port(c->g, c->addr, c->port);
		if (name) {
			snprintf(c->name, sizeof(c->name), "%s", name);
			v = egress_check_name(c->g->policy, name, c->port);
		} else {
			snprintf(v.reason, sizeof(v.reason),
				 "not TLS or HTTP: needs a CIDR rule or a name:port rule");
		}
	}
	snprintf(c->reason, sizeof(c->reason), "%s", v.reason);
	if (!v.allow) {
		refuse(c, v.reason);
		return;
	}
	start_relay(c, first ? RELAY_FIRST : RELAY_OPAQUE);
}

/* Classifies what has been peeked; false: wait for more. final: the sniff window is over. A
 * request line still incomplete then goes to the HTTP relay (whose parser waits for the rest),
 * an incomplete ClientHello is refused: either would otherwise pass as opaque bytes a name rule
 * never saw. Where a CIDR rule allows the address (anything may go there) bytes that are not
 * yet a request line are opaque at once. */
static bool classify(struct gw_conn *c, size_t n, bool final)
{
	struct gw_hello hello;
	int t, h;

	if (n == 0) {
		if (final)
			decide_opaque(c, true);
		return final;
	}
	t = gw_tls_peek_hello(c->g->peek, n, &hello);
	if (t == 1) {
		decide_tls(c, &hello);
		return true;
	}
	if (t == 0) {
		if (!final && n < GW_SNIFF_MAX)
			return false;
		refuse(c, "incomplete TLS ClientHello");
		return true;
	}
	h = gw_sniff_http(c->g->peek, n);
	if (h == 0 && gw_cidr_allows(c))
		h = -1; /* anything may go there: no need to wait for the rest of a request line */
	if (h == 0 && !final && n < GW_SNIFF_MAX)
		return false;
	if (h >= 0) {
		c->proto = GW_HTTP;
		snprintf(c->reason, sizeof(c->reason), "http");
		start_relay(c, RELAY_HTTP);
		return true;
	}
	decide_opaque(c, false);
	return true;
}

static void sniff_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gw_conn *c = arg;
	ssize_t n = 0;

	if (what & EV_READ) {
		n = recv(fd, c->g->peek, sizeof(c->g->peek), MSG_PEEK | MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			refuse(c, "closed by the guest before deciding");
			return;
		}
		if (n < 0)
			return;
		classify(c, (size_t)n, false);
		return;
	}
	/* 5 s without a decision: whatever arrived is all we look at */
	n = recv(fd, c->g->peek, sizeof(c->g->peek), MSG_PEEK | MSG_DONTWAIT);
	classify(c, n > 0 ? (size_t)n : 0, true);
}

/* ---- accept ---- */

static int original_dst(int fd, uint32_t *addr, uint16_t *port)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);

	if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &sin, &len) < 0 || sin.sin_family != AF_INET)
		return -1;
	*addr = ntohl(sin.sin_addr.s_addr);
	*port = ntohs(sin.sin_port);
	return 0;
}

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
		      void *arg)
{
	struct timeval tv = { .tv_sec = GW_SNIFF_SECONDS };
	struct gw *g = arg;
	struct gw_conn *c;
	uint32_t addr;
	uint16_t port;

	(void)l, (void)sa, (void)salen;
	if (original_dst(fd, &addr, &port) < 0) {
		close(fd);
		return;
	}
	c = conn_new(g, fd, addr, port);
	if (!c) {
		close(fd);
		return;
	}
	if (g->nconns > g->max_conns) {
		refuse(c, "too many connections");
		return;
	}
	if (g->buffer_full) {
		refuse(c, "the gateway's buffers are full");
		return;
	}
	if (gw_addr_refused(g, addr, port, c->reason, sizeof(c->reason))) {
		refuse(c, c->reason);
		return;
	}
	/* Edge-triggered: a peek leaves the bytes queued, so only new bytes wake us again. */
	c->sniff = event_new(g->base, fd, EV_READ | EV_PERSIST | EV_ET, sniff_cb, c);
	if (!c->sniff || event_add(c->sniff, &tv) < 0)
		refuse(c, "out of memory");
}

static void accept_error_cb(struct evconnlistener *l, void *arg)
{
	(void)l, (void)arg;
	log_warn("accept: %s", strerror(errno)); /* EMFILE and the like: the listener retries */
}

int gw_proxy_start(struct gw *g, int fd, space_err *err)
{
	g->listener = evconnlistener_new(g->base, accept_cb, g,
					 LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
	if (!g->listener)
		return err_set(err, EIO, "proxy listener");
	evconnlistener_set_error_cb(g->listener, accept_error_cb);
	return 0;
}

void gw_proxy_stop(struct gw *g)
{
	while (g->conns)
		gw_conn_free(g->conns);
	if (g->listener)
		evconnlistener_free(g->listener);
	g->listener = NULL;
}
