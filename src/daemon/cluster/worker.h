/* worker.h -- the cluster's database work off the event loop (worker.c)
 *
 * The round trips a cluster adds run on a thread of their own with its own store connection:
 * lease renewals and claims (a node), lease expiry (every api and node process). The loop
 * publishes what the thread needs (the node's record, its room) with worker_publish(); claimed
 * intents come back through a pipe and are acted on by the loop (worker_take). So a slow or
 * restarting database delays claims and renewals, never the requests the loop serves. */
#ifndef SPACE_CLUSTER_WORKER_H
#define SPACE_CLUSTER_WORKER_H

#include "daemon.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

struct cluster_worker;

/* One intent the thread claimed, now the loop's: rec and intent are owned. What acting on it
 * reads from the store was read by the thread too (the loop makes no round trip for it): the
 * operation (a restore intent names none: the sandbox's open restore), and for a create its
 * request and what create_read reads (pre_rc < 0: why it cannot be made, in why). */
struct claimed {
	struct sandbox_rec rec;
	json_t *intent;
	const char *kind;            /* "create", "restore", or NULL (malformed); in intent */
	char op_id[ID_LEN];          /* "" none, or malformed */
	bool req_ok;                 /* create: req holds the request */
	struct create_req req;
	struct create_reads pre;
	int pre_rc;
	char why[256];
};

/* Opens the thread's own store (url) and starts it; ready() runs on the loop whenever claims
 * wait in the queue. */
int worker_start(struct spaced *d, const char *url, void (*ready)(struct spaced *d),
		 struct cluster_worker **out, space_err *err);
/* What the thread works with from now on: the node's record as it should be renewed (NULL:
 * not a node), and how many intents of how much memory in all it may claim (0: none). */
void worker_publish(struct cluster_worker *w, const struct node_rec *self, int claims, int room_mib);
/* Look now (claims, from the thread): an intent was written (its NOTIFY), or room opened. */
void worker_poke(struct cluster_worker *w);
/* The claimed intents queued so far (malloc'ed array, *n of them; NULL when none). */
struct claimed *worker_take(struct cluster_worker *w, size_t *n);
void claimed_free(struct claimed *c, size_t n);
/* Stops the thread, waits for it, closes its store. Claims it made that the loop never took
 * are left to the node's reconcile (their rows are this node's). */
void worker_stop(struct cluster_worker *w);

#endif
