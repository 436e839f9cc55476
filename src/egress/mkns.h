/* mkns.h -- making a sandbox's network namespace: `space-gw --make-netns PATH` does it (the
 * daemon spawns it instead of forking itself, which would copy its page tables on the event
 * loop), and reports a failure on this descriptor as one struct (docs/design/egress.md). */
#ifndef SPACE_EGRESS_MKNS_H
#define SPACE_EGRESS_MKNS_H

/* The descriptor (a pipe the daemon reads) a failure is written to. */
#define EGRESS_MKNS_FD 3

/* What a failed `--make-netns` writes on EGRESS_MKNS_FD before it exits 1: the errno and
 * the step ("create the TAP tap0", "loading the ruleset with nft ..."). Nothing on success
 * (exit 0). */
struct egress_mkns_fail {
	int err;
	char step[160];
};

#endif
