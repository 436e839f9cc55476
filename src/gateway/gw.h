/* gw.h -- the gateway's internals shared by its files (docs/design/egress.md): the process
 * context, the handed-out DNS table, the audit log and the proxy's connections. One thread,
 * one libevent base; nothing here is locked. */
#ifndef SPACE_GW_H
#define SPACE_GW_H

#include <event2/bufferevent.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "egress/policy.h"
#include "err.h"
#include "tls.h"

#define GW_HANDOUT_MAX 4096      /* names x addresses remembered from DNS answers */
#define GW_TTL_MIN 60
#define GW_TTL_MAX 3600
#define GW_DNS_PENDING_MAX 256   /* upstream resolutions in flight */
#define GW_SNIFF_MAX 16384       /* first bytes looked at */
#define GW_SNIFF_SECONDS 5
#define GW_IDLE_SECONDS 600
#define GW_BUF_HIGH (256 * 1024) /* per direction: reading stops past this much queued */
#define GW_MAX_CONNS_DEFAULT 4096
#define GW_MAX_BUFFER_DEFAULT (64 << 20) /* bytes queued in all connections together */
#define GW_HOST_ADDRS_MAX 256
#define GW_CONTROL_CLIENTS_MAX 8
#define GW_CONTROL_LINE_MAX (1024 * 1024)
#define GW_AUDIT_ROTATE (4 * 1024 * 1024)

struct gw_handout {
	uint32_t addr;
	time_t expires;          /* 0: free slot */
	uint64_t seq;            /* insertion order, to evict the oldest */
	char name[EGRESS_NAME_MAX + 1];
};

struct gw_audit {
	int dirfd, fd;
	off_t size;
	const char *sandbox;
	uid_t uid;   /* the log is this uid's (-1: left as made), so that the gateway can */
	gid_t gid;   /* rotate it after dropping privileges and the daemon can tell it is its */
};

struct gw_conn;
struct gw_control_client;
struct gw_dns_query;

struct gw {
	struct event_base *base;
	struct evdns_base *dns;
	struct evdns_server_port *dns_port;
	struct evconnlistener *listener, *control;
	struct event *sigterm, *sigint;
	struct gw_tls *tls;
	struct gw_audit audit;
	const char *sandbox;
	int udp_fd;

	struct egress_policy *policy;   /* never NULL: an empty policy denies everything */
	long long generation;

	uint32_t host_addrs[GW_HOST_ADDRS_MAX];
	int nhost_addrs;
	struct egress_cidrs refuse;     /* --refuse: never connected to, whatever the policy says */

	/* Bytes queued in every connection's buffers (both sides, both directions), kept by
	 * evbuffer callbacks (relay.c). Past max_buffer no connection reads and no new one is
	 * accepted; below 3/4 of it `resume` wakes the connections that stopped. */
	uint64_t buffered, max_buffer;
	bool buffer_full;
	struct event *resume;

	struct gw_handout *handout;     /* GW_HANDOUT_MAX slots */
	uint64_t handout_seq;
	int dns_pending;
	struct gw_dns_query *dns_queries; /* upstream resolutions in flight (dns.c) */

	struct gw_conn *conns;          /* all live proxy connections (list, for teardown) */
	int nconns, max_conns;
	struct gw_control_client *clients;
	int nclients;
	uint8_t peek[GW_SNIFF_MAX];     /* scratch for MSG_PEEK sniffing */
};

/* A proxied TCP connection (proxy.c accepts and decides, relay.c moves the bytes). Freed
 * exactly once, by gw_conn_free, never from inside http-parser's callbacks. */
enum gw_proto { GW_TCP, GW_TLS, GW_HTTP, GW_HTTPS };

struct gw_http;

struct gw_conn {
	struct gw *g;
	struct gw_conn *prev, *next;
	int fd;                          /* the guest's socket until `down` owns it */
	struct event *sniff;
	uint32_t addr;                   /* original destination, host order */
	uint16_t port;
	enum gw_proto proto;
	char name[EGRESS_NAME_MAX + 1];  /* SNI (TLS) or a name rule's (opaque); "" if none */
	char reason[EGRESS_NAME_MAX + 48];
	struct bufferevent *down, *up;   /* guest side, upstream side (NULL until connected) */
	bool down_eof, up_eof, down_shut, up_shut;
	bool closing;                    /* a final answer is queued to the guest: free once sent */
	bool down_paused, up_paused;     /* reading stopped for back-pressure */
	bool upstream_tls;
	bool relaying;                   /* allowed and relaying: audited when freed */
	/* Relaying, but which relay (HTTP or opaque) waits for the first bytes: intercepted TLS
	 * after its handshake, plain TCP after the guest stayed silent; upstream bytes first
	 * mean opaque (a server that speaks first), guest bytes are sniffed. */
	bool classifying;
	bool alpn_http11;                /* the guest's ClientHello offered http/1.1 */
	struct evbuffer_cb_entry *acct[4]; /* buffer accounting: down in/out, up in/out */
	time_t last;                     /* last byte either way (idle timeout) */
	uint64_t bytes_out, bytes_in;
	struct gw_http *http;            /* HTTP request relay, NULL for opaque */
};

/* proxy.c */
void gw_conn_free(struct gw_conn *c);
/* A plain upstream connection to the original destination (HTTP relays connect on the first
 * allowed request). NULL on failure. */
struct bufferevent *gw_conn_connect(struct gw_conn *c, SSL *ssl);

/* Audits a deny for the connection and frees it. */
void gw_conn_refuse(struct gw_conn *c, const char *reason);

/* relay.c */
void gw_relay_start(struct gw_conn *c);
/* Frees the upstream side (its buffers leave the accounting). */
void gw_relay_drop_up(struct gw_conn *c);
/* Counts b's buffers into g->buffered (gw_relay_start and gw_relay_attach_up do it). */
void gw_relay_account(struct gw_conn *c, struct bufferevent *b);
/* Takes b's buffers out of the accounting, before b is freed. */
void gw_relay_unaccount(struct gw_conn *c, struct bufferevent *b);
int gw_relay_init(struct gw *g, space_err *err);
void gw_relay_fini(struct gw *g);
bool gw_relay_settle(struct gw_conn *c);
void gw_relay_pump(struct gw_conn *c, struct bufferevent *from, struct bufferevent *to);
void gw_relay_backpressure(struct gw_conn *c, struct bufferevent *from, struct bufferevent *to);
/* Wires the upstream bufferevent's callbacks (after a lazy connect). */
void gw_relay_attach_up(struct gw_conn *c);

/* http.c: the guest->upstream direction of HTTP (plain, or decrypted when intercepted),
 * request by request: each authority checked, injection, re-chunked bodies; the other
 * direction framed (http_resp.c) to know when the upstream accepted an Upgrade/CONNECT. */
int gw_http_new(struct gw_conn *c);
void gw_http_free(struct gw_http *h);
/* Feeds what the guest sent to the parser; true if that freed c. */
bool gw_http_feed(struct gw_conn *c);
/* After the upstream accepted an Upgrade/CONNECT: bytes pass through unparsed. */
bool gw_http_raw(const struct gw_http *h);
/* Guest bytes wait, unparsed, for the answer to an Upgrade/CONNECT (or for answers to the
 * requests already relayed). */
bool gw_http_holding(const struct gw_http *h);
enum gw_http_up {
	GW_HTTP_UP_PASS,   /* relay the upstream's bytes on */
	GW_HTTP_UP_SWITCH, /* the upstream switched protocols: raw both ways from now */
	GW_HTTP_UP_RESUME, /* the guest's held bytes may be parsed again (gw_http_resume) */
	GW_HTTP_UP_BAD,    /* not HTTP framing: end the connection */
};
/* Frames what the upstream sent (c->up's input, left in place). */
enum gw_http_up gw_http_upstream(struct gw_conn *c);
/* After GW_HTTP_UP_SWITCH: the held guest bytes go upstream as they are. */
void gw_http_switch(struct gw_conn *c);
/* After GW_HTTP_UP_RESUME: parse the held guest bytes; true if that freed c. */
bool gw_http_resume(struct gw_conn *c);
const char *gw_proto_name(enum gw_proto p);

/* audit.c */
struct gw_audit_rec {
	const char *proto;              /* dns tcp tls http https */
	uint32_t addr;                  /* host order; 0: no dst */
	uint16_t port;
	const char *name;               /* NULL or "" for none */
	bool allow;
	const char *reason;
	uint64_t bytes_out, bytes_in;
	const char *const *injected;    /* header names only, n_injected of them */
	int n_injected;
};
int gw_audit_open(struct gw_audit *a, const char *dir, const char *sandbox, uid_t uid, gid_t gid,
		  space_err *err);
void gw_audit_close(struct gw_audit *a);
void gw_audit(struct gw *g, const struct gw_audit_rec *r);

/* dns.c */
int gw_dns_start(struct gw *g, const char *upstream, space_err *err);
void gw_dns_stop(struct gw *g);
/* Was addr handed out for name (and not expired)? */
bool gw_handout_has(struct gw *g, uint32_t addr, const char *name);
/* A name handed out with addr that an allow entry names with exactly this port (opaque TCP);
 * NULL if none. */
const char *gw_handout_name_for_port(struct gw *g, uint32_t addr, uint16_t port);
int gw_handout_count(struct gw *g);
/* Remembers addr (host order) as handed out for name for ttl seconds (+ GW_TTL_MIN). */
void gw_handout_add(struct gw *g, uint32_t addr, const char *name, int ttl);
/* May the DNS hand out addr (host order) for a name only "*" allows? Not if the gateway would
 * refuse it (gw_addr_refused for any port) or a deny CIDR denies it; why says which. */
bool gw_dns_addr_usable(struct gw *g, uint32_t addr, char *why, size_t len);

/* control.c */
/* mkns.c: `--make-netns PATH [--ca-cert F --ca-key F --ca-name CN]` (egress/mkns.h); exits
 * 0, or 1 with the failure on fd 3. */
struct gw_mkns {
	const char *path, *ca_cert, *ca_key, *ca_name;
};
__attribute__((noreturn)) void gw_make_netns(const struct gw_mkns *m);

int gw_control_start(struct gw *g, int fd, space_err *err);
void gw_control_stop(struct gw *g);

/* proxy.c */
int gw_proxy_start(struct gw *g, int fd, space_err *err);
void gw_proxy_stop(struct gw *g);
/* Is the address one the gateway never connects to: in --refuse (whatever the policy says),
 * or reserved, the host's, the gateway's unless a CIDR names it? The reason goes to why. */
bool gw_addr_refused(struct gw *g, uint32_t addr, uint16_t port, char *why, size_t len);
/* Does a CIDR rule allow the connection's destination (any bytes may go there, named or not)? */
bool gw_cidr_allows(const struct gw_conn *c);
/* The verdict for a connection to addr:port made for `name` (SNI or Host; "" for none):
 * deny by name wins; an allowed CIDR; the name allowed for the port with addr handed out
 * for it. */
struct egress_verdict gw_decide_name(struct gw *g, const char *name, uint32_t addr, uint16_t port);

#endif
