/* dns.c -- the guest's resolver (egress.md "DNS"): allowed names are resolved upstream (A
 * only) and their addresses remembered as handed out for that name, so later connections can
 * be checked against what this gateway told the guest; everything else is NXDOMAIN. */
#include <arpa/inet.h>
#include <event2/dns.h>
#include <event2/dns_struct.h>
#include <stdlib.h>
#include <string.h>

#include "gw.h"
#include "log.h"

/* One upstream resolution in flight; listed so shutdown can drop them all. */
struct gw_dns_query {
	struct gw *g;
	struct gw_dns_query *prev, *next;
	struct evdns_server_request *req;
	struct evdns_request *up;
	char qname[EGRESS_NAME_MAX + 2];   /* as the guest asked (answers must echo it) */
	char name[EGRESS_NAME_MAX + 1];    /* normalised */
	char reason[EGRESS_NAME_MAX + 48];
	bool any_name;                     /* allowed by "*" only: withhold refused addresses */
};



/* ---- the handed-out table ---- */

static bool live(const struct gw_handout *h, time_t now)
{
	return h->expires > now;
}

bool gw_handout_has(struct gw *g, uint32_t addr, const char *name)
{
	time_t now = time(NULL);

	for (int i = 0; i < GW_HANDOUT_MAX; i++)
		if (g->handout[i].addr == addr && live(&g->handout[i], now) &&
		    strcmp(g->handout[i].name, name) == 0)
			return true;
	return false;
}

const char *gw_handout_name_for_port(struct gw *g, uint32_t addr, uint16_t port)
{
	time_t now = time(NULL);

	for (int i = 0; i < GW_HANDOUT_MAX; i++) {
		struct gw_handout *h = &g->handout[i];

		if (h->addr == addr && live(h, now) && egress_name_has_port(g->policy, h->name, port) &&
		    egress_check_name(g->policy, h->name, port).allow)
			return h->name;
	}
	return NULL;
}

int gw_handout_count(struct gw *g)
{
	time_t now = time(NULL);
	int n = 0;

	for (int i = 0; i < GW_HANDOUT_MAX; i++)
		n += live(&g->handout[i], now);
	return n;
}

/* Remembers addr for name until now + ttl: refreshes the same pair, else takes a free or
 * expired slot, else evicts the oldest. */
void gw_handout_add(struct gw *g, uint32_t addr, const char *name, int ttl)
{
	time_t now = time(NULL);
	struct gw_handout *slot = NULL;

	for (int i = 0; i < GW_HANDOUT_MAX; i++) {
		struct gw_handout *h = &g->handout[i];

		if (live(h, now) && h->addr == addr && strcmp(h->name, name) == 0) {
			slot = h;
			break;
		}
		if (!slot || (live(slot, now) && (!live(h, now) || h->seq < slot->seq)))
			slot = h;
	}
	slot->addr = addr;
	slot->seq = ++g->handout_seq;
	/* a little longer than the guest may cache it, so a cached answer still connects */
	slot->expires = now + ttl + GW_TTL_MIN;
	snprintf(slot->name, sizeof(slot->name), "%s", name);
}

/* ---- the server ---- */

static void audit_query(struct gw *g, const char *name, bool allow, const char *reason)
{
	struct gw_audit_rec r = { .proto = "dns", .name = name, .allow = allow, .reason = reason };

	gw_audit(g, &r);
}

static void pending_free(struct gw_dns_query *p)
{
	if (p->prev)
		p->prev->next = p->next;
	else
		p->g->dns_queries = p->next;
	if (p->next)
		p->next->prev = p->prev;
	p->g->dns_pending--;
	free(p);
}

static int clamp_ttl(int ttl)
{
	return ttl < GW_TTL_MIN ? GW_TTL_MIN : ttl > GW_TTL_MAX ? GW_TTL_MAX : ttl;
}

bool gw_dns_addr_usable(struct gw *g, uint32_t addr, char *why, size_t len)
{
	struct egress_verdict v;

	if (gw_addr_refused(g, addr, 0, why, len))
		return false;
	v = egress_check_addr(g->policy, addr, 0);
	if (!v.allow && strncmp(v.reason, "denied", 6) == 0) {
		snprintf(why, len, "%s", v.reason);
		return false;
	}
	return true;
}

/* The upstream's addresses (network order) to the guest, each remembered for the name. A
 * name only "*" allows gets none that the gateway would refuse (reserved, the host's, the
 * node's --refuse, a deny CIDR): every public name resolves, but a name pointing into a
 * private network (DNS rebinding, a cluster's internal names) is answered without them. */
static void answer(struct gw_dns_query *p, const uint32_t *a, int count, int ttl)
{
	struct gw *g = p->g;
	uint32_t *keep = malloc((size_t)count * sizeof(*keep));
	char why[EGRESS_NAME_MAX + 48] = "", reason[2 * (EGRESS_NAME_MAX + 48)];
	int n = 0, withheld = 0;

	if (!keep) {
		audit_query(g, p->name, false, "out of memory");
		evdns_server_request_respond(p->req, DNS_ERR_SERVERFAILED);
		return;
	}
	for (int i = 0; i < count; i++) {
		if (p->any_name && !gw_dns_addr_usable(g, ntohl(a[i]), why, sizeof(why))) {
			withheld++;
			continue;
		}
		gw_handout_add(g, ntohl(a[i]), p->name, ttl);
		keep[n++] = a[i];
	}
	if (n > 0)
		evdns_server_request_add_a_reply(p->req, p->qname, n, keep, ttl);
	free(keep);
	if (withheld)
		snprintf(reason, sizeof(reason), "%s; %d of %d addresses withheld (%s)", p->reason, withheld,
			 count, why);
	else
		snprintf(reason, sizeof(reason), "%s", p->reason);
	audit_query(g, p->name, true, reason);
	evdns_server_request_respond(p->req, DNS_ERR_NONE);
}

static void resolved(int result, char type, int count, int ttl, void *addrs, void *arg)
{
	struct gw_dns_query *p = arg;
	struct gw *g = p->g;
	const uint32_t *a = addrs;
	int err = DNS_ERR_NONE;

	if (result == DNS_ERR_NONE && type == DNS_IPv4_A && count > 0) {
		answer(p, a, count, clamp_ttl(ttl));
		pending_free(p);
		return;
	}
	if (result == DNS_ERR_NOTEXIST || result == DNS_ERR_NONE || result == DNS_ERR_NODATA) {
		err = result == DNS_ERR_NOTEXIST ? DNS_ERR_NOTEXIST : DNS_ERR_NONE;
		audit_query(g, p->name, true, p->reason);
	} else {
		err = DNS_ERR_SERVERFAILED;
		audit_query(g, p->name, false, "upstream resolution failed");
	}
	evdns_server_request_respond(p->req, err);
	pending_free(p);
}

static void resolve(struct gw *g, struct evdns_server_request *req, const char *qname, const char *name,
		    const struct egress_verdict *v)
{
	struct gw_dns_query *p;

	if (g->dns_pending >= GW_DNS_PENDING_MAX || !(p = calloc(1, sizeof(*p)))) {
		audit_query(g, name, false, "too many queries in flight");
		evdns_server_request_respond(req, DNS_ERR_SERVERFAILED);
		return;
	}
	p->g = g;
	p->req = req;
	snprintf(p->qname, sizeof(p->qname), "%s", qname);
	snprintf(p->name, sizeof(p->name), "%s", name);
	snprintf(p->reason, sizeof(p->reason), "%s", v->reason);
	p->any_name = v->any_name;
	p->next = g->dns_queries;
	if (g->dns_queries)
		g->dns_queries->prev = p;
	g->dns_queries = p;
	g->dns_pending++;
	p->up = evdns_base_resolve_ipv4(g->dns, name, DNS_QUERY_NO_SEARCH, resolved, p);
	if (!p->up) {
		audit_query(g, name, false, "upstream resolution failed");
		evdns_server_request_respond(req, DNS_ERR_SERVERFAILED);
		pending_free(p);
	}
}

static void query_cb(struct evdns_server_request *req, void *arg)
{
	struct gw *g = arg;
	char name[EGRESS_NAME_MAX + 1];
	const struct evdns_server_question *q;
	struct egress_verdict v;

	if (req->nquestions != 1 || req->questions[0]->dns_question_class != EVDNS_CLASS_INET ||
	    strlen(req->questions[0]->name) > EGRESS_NAME_MAX + 1) {
		audit_query(g, "", false, "malformed query");
		evdns_server_request_respond(req, DNS_ERR_REFUSED);
		return;
	}
	q = req->questions[0];
	if (!egress_name_normalise(q->name, name)) {
		audit_query(g, "", false, "bad name");
		evdns_server_request_respond(req, DNS_ERR_NOTEXIST);
		return;
	}
	v = egress_check_name(g->policy, name, 0);
	if (!v.allow) {
		audit_query(g, name, false, v.reason);
		evdns_server_request_respond(req, DNS_ERR_NOTEXIST);
	} else if (q->type != EVDNS_TYPE_A) {
		audit_query(g, name, true, v.reason);  /* NOERROR, no answers: A records only */
		evdns_server_request_respond(req, DNS_ERR_NONE);
	} else {
		resolve(g, req, q->name, name, &v);
	}
}

int gw_dns_start(struct gw *g, const char *upstream, space_err *err)
{
	g->dns = evdns_base_new(g->base, 0);
	if (!g->dns)
		return err_set(err, EIO, "evdns_base_new");
	/* the upstream's answers are matched case-insensitively by us; 0x20 randomisation only
	 * confuses simple upstreams */
	evdns_base_set_option(g->dns, "randomize-case:", "0");
	evdns_base_set_option(g->dns, "timeout:", "3");
	evdns_base_set_option(g->dns, "attempts:", "2");
	if (upstream ? evdns_base_nameserver_ip_add(g->dns, upstream) != 0
		     : evdns_base_resolv_conf_parse(g->dns, DNS_OPTION_NAMESERVERS, "/etc/resolv.conf") != 0 ||
			       evdns_base_count_nameservers(g->dns) == 0)
		return err_set(err, EINVAL, "DNS upstream %s: unusable", upstream ? upstream : "/etc/resolv.conf");
	g->handout = calloc(GW_HANDOUT_MAX, sizeof(*g->handout));
	if (!g->handout)
		return err_set(err, ENOMEM, "handout table");
	g->dns_port = evdns_add_server_port_with_base(g->base, g->udp_fd, 0, query_cb, g);
	if (!g->dns_port)
		return err_set(err, EIO, "DNS server port");
	return 0;
}

/* Upstream resolutions are dropped without their callbacks (evdns_base_free(.., 0)), so each
 * pending guest query is dropped here, then the port closes. */
void gw_dns_stop(struct gw *g)
{
	if (g->dns)
		evdns_base_free(g->dns, 0);
	g->dns = NULL;
	while (g->dns_queries) {
		evdns_server_request_drop(g->dns_queries->req);
		pending_free(g->dns_queries);
	}
	if (g->dns_port)
		evdns_close_server_port(g->dns_port);
	g->dns_port = NULL;
	free(g->handout);
	g->handout = NULL;
}
