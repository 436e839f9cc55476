/* rules.c -- the nftables ruleset of a sandbox's network namespace (docs/design/egress.md).
 * The ether saddr line is kept: `nft -c -f` and a real load into a fresh netns accept it
 * (nftables 1.0.6, Debian 12), and it stops a guest spoofing another MAC on the TAP.
 * DNS is accepted without "ct status dnat": a query sent to 169.254.0.22:53 itself (the
 * guest's resolv.conf) is redirected onto the same address and port, a NAT binding that
 * changes nothing, so the kernel never sets IPS_DST_NAT on it and the rule would drop it.
 * Ingress (a sandbox's ports): the daemon connects to the guest from this netns; the guest's
 * packets of such a connection are its conntrack entry's reply direction, which nothing the
 * guest opens ever is, and the nat chain never sees them (NAT binds a connection's first
 * packet only). */
#include "egress/rules.h"

#define STR_(x) #x
#define STR(x) STR_(x)

static const char ruleset[] =
	"table inet space {\n"
	"  chain raw_pre {\n"
	"    type filter hook prerouting priority raw; policy accept;\n"
	"    iifname \"" EGRESS_TAP_NAME "\" ether saddr != " EGRESS_GUEST_MAC " drop\n"
	"    iifname \"" EGRESS_TAP_NAME "\" meta nfproto ipv6 drop\n"
	"    iifname \"" EGRESS_TAP_NAME "\" ip saddr != 169.254.0.21 drop\n"
	"  }\n"
	"  chain nat_pre {\n"
	"    type nat hook prerouting priority dstnat; policy accept;\n"
	"    iifname \"" EGRESS_TAP_NAME "\" udp dport 53 redirect to :" STR(EGRESS_DNS_PORT) "\n"
	"    iifname \"" EGRESS_TAP_NAME "\" meta l4proto tcp redirect to :" STR(EGRESS_PROXY_PORT) "\n"
	"  }\n"
	"  chain input {\n"
	"    type filter hook input priority filter; policy accept;\n"
	"    iifname \"" EGRESS_TAP_NAME "\" udp dport " STR(EGRESS_DNS_PORT) " accept\n"
	"    iifname \"" EGRESS_TAP_NAME "\" tcp dport " STR(EGRESS_PROXY_PORT) " ct status dnat accept\n"
	/* a port's traffic (ingress.c): the guest answering a connection opened from this netns */
	"    iifname \"" EGRESS_TAP_NAME "\" meta l4proto tcp ct direction reply ct state established accept\n"
	"    iifname \"" EGRESS_TAP_NAME "\" icmp type echo-request ip daddr 169.254.0.22 "
	"limit rate 10/second accept\n"
	"    iifname \"" EGRESS_TAP_NAME "\" drop\n"
	"  }\n"
	"  chain forward { type filter hook forward priority filter; policy drop; }\n"
	"}\n";

const char *egress_ruleset(void)
{
	return ruleset;
}
