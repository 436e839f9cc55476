/* test_gw_decide.c -- the gateway's decisions for the policy "*" (every name) and E2B's
 * internet (["0.0.0.0/0", "*"]): an address is reachable under a name only when the gateway's
 * DNS handed it out for that name, reserved, host and --refuse addresses stay refused (and are
 * never handed out for a name only "*" allows), deny names and CIDRs win (src/gateway/proxy.c
 * gw_decide_name, gw_addr_refused; dns.c gw_dns_addr_usable; docs/design/egress.md). */
#include <stdlib.h>
#include <string.h>

#include "gw.h"
#include "harness.h"

#define A(a, b, c, d) ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (uint32_t)(d))

static struct gw g;

/* A gateway context with `policy`, --refuse 192.0.2.0/24, host address 198.51.100.1 and an
 * empty handed-out table; false if it could not be made. */
static bool setup(const char *policy)
{
	json_t *j = json_loads(policy, 0, NULL);
	space_err err = { 0 };
	bool ok;

	memset(&g, 0, sizeof(g));
	g.handout = calloc(GW_HANDOUT_MAX, sizeof(*g.handout));
	g.host_addrs[g.nhost_addrs++] = A(198, 51, 100, 1);
	ok = j && g.handout && egress_policy_parse(j, true, &g.policy, &err) == 0 &&
	     egress_cidrs_parse("192.0.2.0/24", &g.refuse, &err) == 0;
	json_decref(j);
	return CHECK(ok, "setup %s: %s", policy, err.msg);
}

static void teardown(void)
{
	egress_policy_free(g.policy);
	free(g.handout);
	memset(&g, 0, sizeof(g));
}

/* "*" alone: a name resolves, and its address is reachable under that name only. */
static void any_name_is_dns_attributed(void)
{
	struct egress_verdict v;

	if (!setup("{\"allow\":[\"*\"]}"))
		return;
	EXPECT(egress_check_name(g.policy, "unlisted.example", 0).allow); /* DNS resolves it */
	gw_handout_add(&g, A(198, 51, 100, 10), "unlisted.example", 60);
	v = gw_decide_name(&g, "unlisted.example", A(198, 51, 100, 10), 443);
	EXPECT(v.allow && v.any_name && strcmp(v.reason, "allowed by *") == 0);
	/* the same address under a name it was not resolved for */
	v = gw_decide_name(&g, "other.example", A(198, 51, 100, 10), 443);
	EXPECT(!v.allow && strcmp(v.reason, "198.51.100.10 was not handed out for other.example") == 0);
	/* the name at an address the gateway never gave it */
	v = gw_decide_name(&g, "unlisted.example", A(198, 51, 100, 11), 80);
	EXPECT(!v.allow && strstr(v.reason, "was not handed out"));
	/* no name at all: only a CIDR could allow it */
	EXPECT(!gw_decide_name(&g, "", A(198, 51, 100, 10), 443).allow);
	teardown();
}

/* A name that resolves into a reserved, host or refused range: withheld by the DNS, refused
 * at connect even if it were handed out. */
static void reserved_stays_refused(void)
{
	static const uint32_t refused[] = { A(10, 1, 2, 3), A(127, 0, 0, 1), A(169, 254, 169, 254),
					    A(192, 168, 1, 1), A(100, 64, 0, 1), A(192, 0, 2, 7),
					    A(198, 51, 100, 1), A(169, 254, 0, 22) };
	char why[128];

	if (!setup("{\"allow\":[\"0.0.0.0/0\",\"*\"]}"))
		return;
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		EXPECT(!gw_dns_addr_usable(&g, refused[i], why, sizeof(why)));
		EXPECT(gw_addr_refused(&g, refused[i], 443, why, sizeof(why)));
	}
	EXPECT(gw_addr_refused(&g, A(192, 0, 2, 7), 80, why, sizeof(why)) &&
	       strcmp(why, "refused by the node (--egress-refuse 192.0.2.0/24)") == 0);
	EXPECT(gw_addr_refused(&g, A(10, 1, 2, 3), 80, why, sizeof(why)) &&
	       strcmp(why, "reserved or host address") == 0);
	EXPECT(gw_dns_addr_usable(&g, A(198, 51, 100, 10), why, sizeof(why)));
	EXPECT(!gw_addr_refused(&g, A(198, 51, 100, 10), 443, why, sizeof(why)));
	teardown();
	/* a CIDR naming a reserved block explicitly opens it, to the DNS as to connections */
	if (!setup("{\"allow\":[\"*\",\"10.1.0.0/16\"]}"))
		return;
	EXPECT(gw_dns_addr_usable(&g, A(10, 1, 2, 3), why, sizeof(why)));
	EXPECT(!gw_dns_addr_usable(&g, A(10, 2, 0, 1), why, sizeof(why)));
	teardown();
}

/* E2B's internet with denyOut: the denied name is neither resolved nor reachable (even at an
 * address handed out for it, even where the CIDR allows the address); the denied CIDR is not
 * reachable under any name nor handed out. */
static void deny_wins(void)
{
	struct egress_verdict v;
	char why[128];

	if (!setup("{\"allow\":[\"0.0.0.0/0\",\"*\"],\"deny\":[\"blocked.example\",\"203.0.113.0/24\"]}"))
		return;
	EXPECT(!egress_check_name(g.policy, "blocked.example", 0).allow);
	gw_handout_add(&g, A(198, 51, 100, 11), "blocked.example", 60);
	v = gw_decide_name(&g, "blocked.example", A(198, 51, 100, 11), 443);
	EXPECT(!v.allow && strcmp(v.reason, "denied by blocked.example") == 0);
	gw_handout_add(&g, A(203, 0, 113, 10), "ok.example", 60);
	v = gw_decide_name(&g, "ok.example", A(203, 0, 113, 10), 443);
	EXPECT(!v.allow && strcmp(v.reason, "denied by 203.0.113.0/24") == 0);
	EXPECT(!gw_decide_name(&g, "", A(203, 0, 113, 10), 80).allow);
	EXPECT(!gw_dns_addr_usable(&g, A(203, 0, 113, 10), why, sizeof(why)) &&
	       strcmp(why, "denied by 203.0.113.0/24") == 0);
	/* everything else public: by address (the CIDR), and by name */
	EXPECT(gw_decide_name(&g, "", A(198, 51, 100, 20), 80).allow);
	EXPECT(gw_decide_name(&g, "unlisted.example", A(198, 51, 100, 20), 443).allow);
	teardown();
}

int main(void)
{
	RUN(any_name_is_dns_attributed);
	RUN(reserved_stays_refused);
	RUN(deny_wins);
	return harness_done();
}
