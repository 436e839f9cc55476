/* cluster.h -- many spaced processes over one store (docs/design/cluster.md)
 *
 * --role node: registers itself (capacity, addresses) and renews a lease; claims creates and
 * restores that api processes wrote as intent; reconciles its own rows (the store's node scope).
 * --role api: serves the control plane from the store, writes creates as intent, and routes
 * everything about one sandbox (control and data plane) to the node that owns it (http/proxy.h).
 * Both roles expire the leases of nodes that stopped renewing: their sandboxes become lost, and
 * suspended ones are freed for any node to restore. --role all does none of this. */
#ifndef SPACE_CLUSTER_H
#define SPACE_CLUSTER_H

#include "daemon.h"
#include "http/http.h"

/* Bodies an api process relays whole (it does not stream uploads: larger ones go to the node's
 * own listener). */
#define CLUSTER_MAX_BODY (16u << 20)

/* At start, after the store is open: a node takes its scope and registers. */
int cluster_start(struct spaced *d, space_err *err);
/* Every tick (1 s), on the loop: what the worker may claim; a node's reconcile every 10 s.
 * Renewals, claims and expiry are the worker's (worker.h), off the loop. */
void cluster_tick(struct spaced *d);
/* A node's backstop, every 10 s from cluster_tick (reconcile.c): rows of this node it does not
 * run are reconciled as at start, VMs whose rows were moved or marked lost are stopped, and
 * secret changes are pushed to its gateways. */
void cluster_reconcile(struct spaced *d);
/* At shutdown, before the store closes: stops the worker (and what push.c listens to). */
void cluster_stop(struct spaced *d);
/* api and node roles over PostgreSQL (push.c): a node claims as soon as an intent is written,
 * an api process answers a long-poll as soon as its operation is done (LISTEN/NOTIFY), instead
 * of at the next look. A server that cannot be listened to yet is tried again every second;
 * fails only out of memory. */
int cluster_push_start(struct spaced *d, space_err *err);
void cluster_push_stop(struct spaced *d);

/* The route table of an api process's control (data false) or data plane, made from a role-all
 * table by each route's declaration (http.h: http_place): kept (served from the store),
 * replaced by an intent writer, or by a relay to the owning node; errors in the route's dialect.
 * The table is malloc'ed and lives as long as the process. */
struct http_route *cluster_routes(const struct http_route *routes, size_t n, bool data);

/* Where requests about sandbox sb_id go: its node's control (data=false) or data plane URL,
 * read on st (the store's thread). ENOENT: no such sandbox; EAGAIN: no node owns it (yet, or
 * any more), or its node is lost. */
int cluster_sandbox_url_on(struct store *st, const char *sb_id, bool data, char *url, size_t len,
			   space_err *err);

/* api role: creates written as intent (intent.c). */
void cluster_create(struct http_req *r);
/* api role: restore/wake/connect of a sandbox no node owns becomes a restore intent; one a
 * node owns goes to that node. */
void cluster_restore(struct http_req *r);
/* api role: delete goes to the owning node; one no live node owns (lost, or never claimed) is
 * closed in the store. */
void cluster_delete(struct http_req *r);

#endif
