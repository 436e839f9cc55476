/* net.h -- a sandbox's network (docs/design/egress.md): its named netns with the TAP and the
 * ruleset (netns.c), and its egress gateway process, space-gw (gw.c). Knows paths and
 * processes, not sandboxes: the sandbox core (sandbox/egress.c) decides when. */
#ifndef SPACE_NET_H
#define SPACE_NET_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon.h"
#include "err.h"

/* ---- netns.c ---- */

/* /run/netns/space-<state_tag>-<sb_id> */
void net_ns_path(const struct spaced *d, const char *sb_id, char out[PATH_MAX]);
/* Makes the sandbox's netns unless it exists (a netns mount there): lo up, the persistent
 * TAP tap0 with 169.254.0.22/30 and its fixed MAC up, the ruleset loaded with nft.
 * `space-gw --make-netns` does it (a few tens of ms, nft included) while the loop goes on: returns 1 if the netns
 * is there already (cb is not called), 0 when the child runs (cb(NULL or why, arg) comes
 * from the loop; *op until then, for net_ns_cancel), -1 if it could not start. On failure
 * nothing is left behind and the error names the step. */
struct net_ns_op;
typedef void (*net_ns_cb)(const space_err *err, void *arg);
/* The helper also makes the sandbox's CA at these paths if cert does not exist (NULL: no). */
struct net_ns_ca {
	const char *cert, *key, *name;
};
int net_ns_begin(struct spaced *d, const char *sb_id, const struct net_ns_ca *ca, net_ns_cb cb, void *arg,
		 struct net_ns_op **op, space_err *err);
/* Stops a netns being made (its child killed, the path removed); cb is not called. */
void net_ns_cancel(struct net_ns_op *op);
/* Detaches and unlinks it (the netns and its TAP go with the last process in it). ENOENT
 * is not an error. */
int net_ns_remove(struct spaced *d, const char *sb_id, space_err *err);
/* Start-up: removes every /run/netns/space-<tag>-* whose sandbox `keep` does not name;
 * returns how many. */
int net_ns_sweep(struct spaced *d, bool (*keep)(const char *sb_id, void *arg), void *arg);

/* ---- ingress.c ---- */

struct sockaddr_in;
/* Opens the daemon's own netns for coming back to (at start-up, before any other netns is
 * entered; net_ingress_socket does it on first use otherwise). */
int net_ingress_init(space_err *err);
/* A non-blocking TCP socket made inside sb_id's netns (the loop's thread enters it for the
 * socket() call alone), to connect to the guest at net_ingress_addr. */
int net_ingress_socket(const struct spaced *d, const char *sb_id, space_err *err);
/* The guest's address, port `port` (169.254.0.21). */
void net_ingress_addr(uint16_t port, struct sockaddr_in *sa);

/* ---- spares.c ---- */

/* Netns made ahead for launches to take (want of them ready; want <= 0: none, NULL). busy
 * (may be NULL): true while a start is in flight; refills wait for it (at most 2 s). */
struct net_spares;
struct net_spares *net_spares_new(struct spaced *d, int want, bool (*busy)(struct spaced *d));
/* Starts children for the spares missing (from the sandbox tick, after the start-up sweep). */
void net_spares_fill(struct net_spares *s);
/* Moves a ready spare onto sb_id's netns path: true if it did (the path is a netns now);
 * false with none ready, or if sb_id has its netns already. Schedules a refill either way. */
bool net_spares_take(struct net_spares *s, const char *sb_id);
/* At shutdown: children killed, spares removed. */
void net_spares_free(struct net_spares *s);

/* ---- gw.c ---- */

struct gw;
/* Called from the loop when a gateway this daemon watches is gone (not after gw_stop). */
typedef void (*gw_exit_cb)(struct gw *g, const char *why, void *arg);

struct gw_spec {
	const char *id;         /* sandbox id */
	const char *run_dir;    /* gw.pid, gw.log, egress/ (the audit dir) */
	const char *sock_dir;   /* gw.sock */
	const char *netns;      /* net_ns_path */
	uid_t uid;              /* what it drops to after opening its sockets (0: stays root) */
	gid_t gid;
};

/* space-gw: $SPACE_GW, else next to the running binary. */
const char *gw_binary(void);
/* Adopts the sandbox's live gateway (gw.pid: pid and start time, /proc/PID/comm "space-gw",
 * its command line naming the sandbox), else starts one (setsid, outliving the daemon;
 * with root, moved into the cgroup leaf space-<tag>-gw/<id> at once, memory
 * --egress-max-buffer + 128 MiB; an empty environment but for the sanitizer's options) and
 * writes gw.pid. Watches it: exited() if it dies (its leaf is removed once it is gone, also
 * after gw_stop; a leaf a newer gateway of the sandbox is in stays). */
int gw_start(struct spaced *d, const struct gw_spec *spec, gw_exit_cb exited, void *arg, struct gw **out,
	     space_err *err);
/* Sends the policy (with inject values) and the sandbox's CA, and waits (at most 2 s) for
 * the gateway's acknowledgement: from then on new connections see it. */
int gw_push(struct gw *g, uint64_t generation, const json_t *policy, const char *ca_cert, const char *ca_key,
	    space_err *err);
/* The same from the loop, for a gateway just spawned (which answers once it has started,
 * tens of ms later): returns at once; cb(g, NULL or why, arg) when the gateway has
 * acknowledged, failed or not answered within 5 s. At most one at a time; gw_stop and
 * gw_free cancel it (cb is not called). */
typedef void (*gw_push_cb)(struct gw *g, const space_err *err, void *arg);
int gw_push_async(struct gw *g, uint64_t generation, const json_t *policy, const char *ca_cert,
		  const char *ca_key, gw_push_cb cb, void *arg, space_err *err);
bool gw_push_pending(const struct gw *g);
int gw_pid(const struct gw *g);
/* SIGTERM, then SIGKILL after a moment; frees g. */
void gw_stop(struct gw *g);
/* Gateways gw_stop left ending from the loop: awaited now (at shutdown). */
void gw_reapers_finish(void);
/* Stops watching and frees; the process lives on (daemon shutdown). */
void gw_free(struct gw *g);
/* A gateway no daemon watches (its sandbox is going): killed by its gw.pid, if that still
 * names it; its cgroup leaf removed. */
void gw_kill_stale(const struct spaced *d, const char *run_dir, const char *sb_id);
/* Start-up: removes the cgroup leaves of gateways (scope space-<tag>-gw) whose sandbox `keep`
 * does not name; a leaf with a process left in it stays. Returns how many went. */
int gw_cgroup_sweep(const struct spaced *d, bool (*keep)(const char *sb_id, void *arg), void *arg);

/* Start-up: every space-gw whose --netns lies under ns_prefix (this daemon's) and whose
 * sandbox `keep` does not name is killed; returns how many. */
int gw_sweep(const char *ns_prefix, bool (*keep)(const char *sb_id, void *arg), void *arg);

/* ---- audit.c ---- */

#define NET_AUDIT_LINE_MAX 4096
#define NET_AUDIT_LIMIT_MAX 10000
/* The gateway's audit records in dir (audit.log.1, then audit.log: oldest first), the last
 * `limit` of them. The files are the gateway's, so hostile: only regular files owned by
 * the directory's owner, read from their last few MiB, lines that are not a JSON object
 * or longer than NET_AUDIT_LINE_MAX skipped. No files: an empty array. */
int net_audit_read(const char *dir, size_t limit, json_t **out, space_err *err);

#endif
