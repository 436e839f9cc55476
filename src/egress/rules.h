/* rules.h -- the nftables ruleset of a sandbox's network namespace and the addresses of its
 * link (docs/design/egress.md): one text, used by the daemon for every sandbox and printed by
 * `space-gw --print-ruleset` for benchmarks that build the same namespace by hand. */
#ifndef SPACE_EGRESS_RULES_H
#define SPACE_EGRESS_RULES_H

#include <stdint.h>

#define EGRESS_TAP_NAME "tap0"
#define EGRESS_GUEST_ADDR 0xa9fe0015u   /* 169.254.0.21 */
#define EGRESS_GW_ADDR 0xa9fe0016u      /* 169.254.0.22 */
#define EGRESS_PREFIX_LEN 30
#define EGRESS_GUEST_MAC "52:54:00:a9:00:15"
/* The TAP's own (the gateway side's) MAC: the same in every sandbox, so a guest cloned, forked
 * or restored into a new namespace finds the gateway where its ARP cache says (a TAP's MAC is
 * random otherwise: a fork child's frames went to the parent's TAP address and were dropped
 * until the guest's ARP entry expired). */
#define EGRESS_GW_MAC { 0x52, 0x54, 0x00, 0xa9, 0x00, 0x16 }
#define EGRESS_DNS_PORT 53
#define EGRESS_PROXY_PORT 15001

/* The ruleset as `nft -f` reads it (static storage). */
const char *egress_ruleset(void);

#endif
