/* node.c -- a node's side of the cluster: its registration and lease, claims of intents, and
 * the expiry every process runs (cluster.h; docs/design/cluster.md) */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "front/req.h"
#include "cluster.h"
#include "log.h"
#include "sandbox/sandbox.h"
#include "store/store.h"
#include "worker.h"

/* Claims per look of the worker (every 250 ms): one, and one more per GiB of room, at most
 * four; so a node with more room takes more of a burst. Each starts a VM on this loop. */
#define CLAIMS_MAX 4
/* The backstop: this node's rows against what it runs (reconcile_rows). */
#define RECONCILE_EVERY_MS 10000

static int node_record(struct spaced *d, struct node_rec *n)
{
	struct capacity c;
	int64_t now = now_ms();

	capacity_get(d, &c);
	memset(n, 0, sizeof(*n));
	snprintf(n->id, sizeof(n->id), "%s", d->cfg.node_id);
	n->state = NODE_UP;
	snprintf(n->api_url, sizeof(n->api_url), "%s", d->cfg.advertise_url);
	snprintf(n->data_url, sizeof(n->data_url), "%s", d->cfg.advertise_data_url);
	n->memory_mib = c.memory_budget_mib;
	n->vcpus = c.vcpu_budget;
	n->used_memory_mib = c.memory_used_mib;
	n->used_vcpus = c.vcpus_used;
	n->sandboxes = c.running;
	n->started_ms = d->started_ms;
	n->renewed_ms = now;
	n->lease_expires_ms = now + (int64_t)d->cfg.lease_s * 1000;
	return 0;
}

static int renew(struct spaced *d, space_err *err)
{
	struct node_rec n, was;
	bool lost = false;

	if (store_node_get(d->store, d->cfg.node_id, &was, err) == 0)
		lost = was.state == NODE_LOST;
	err_clear(err);
	node_record(d, &n);
	if (store_node_put(d->store, &n, err) < 0)
		return -1;
	if (lost)
		log_error("node %s: this node's lease had expired (was it cut off from the store?): its "
			  "sandboxes were marked lost and are no longer this node's to change",
			  d->cfg.node_id);
	return 0;
}

static void on_claims(struct spaced *d);

int cluster_start(struct spaced *d, space_err *err)
{
	if (d->cfg.role == DROLE_ALL || d->worker)
		return 0;
	if (d->cfg.role == DROLE_API)
		return worker_start(d, d->cfg.store_url, on_claims, &d->worker, err) < 0 ? -1 :
		       cluster_push_start(d, err);
	store_set_node(d->store, d->cfg.node_id);
	/* Registered before anything is served; renewals are the worker's from here on. */
	if (renew(d, err) < 0)
		return err_wrap(err, "registering node %s", d->cfg.node_id);
	/* It claims nothing until the first tick says what room there is (after reconcile). */
	if (worker_start(d, d->cfg.store_url, on_claims, &d->worker, err) < 0 ||
	    cluster_push_start(d, err) < 0)
		return -1;
	log_info("node %s: registered (control %s, data %s, lease %d s)", d->cfg.node_id, d->cfg.advertise_url,
		 d->cfg.advertise_data_url, d->cfg.lease_s);
	return 0;
}

/* Its operation fails on the store's thread (read, then written there: an operation row
 * this node never held). */
struct op_fail {
	char id[ID_LEN];
	char why[512];
};

static void op_fail_run(struct store *conn, void *arg)
{
	struct op_fail *f = arg;
	struct op_rec op;
	space_err err = { 0 };

	if (store_op_get(conn, f->id, &op, &err) < 0) {
		if (err.code != ENOENT)
			log_error("operation %s: %s", f->id, err.msg);
		return;
	}
	op.state = OP_FAILED;
	snprintf(op.error, sizeof(op.error), "%s", f->why);
	op.updated_ms = now_ms();
	if (store_op_put(conn, &op, &err) < 0)
		log_error("operation %s: %s", f->id, err.msg);
	op_rec_clear(&op);
}

static void op_fail_done(void *arg, bool ran)
{
	(void)ran;
	free(arg);
}

/* A claimed intent that cannot be acted on: its sandbox and operation fail with why. */
static void claim_failed(struct spaced *d, const struct sandbox_rec *rec, const char *op_id, const char *why)
{
	struct sandbox_rec s = *rec;
	struct op_fail *f;
	space_err err = { 0 };

	log_error("sandbox %s: claimed, but %s", rec->id, why);
	s.state = SB_FAILED;
	snprintf(s.error, sizeof(s.error), "%s", why);
	s.updated_ms = now_ms();
	if (store_sandbox_put(d->store, &s, &err) < 0)
		log_error("sandbox %s: %s", rec->id, err.msg);
	/* Known here from now on (delete works on it as on any failed sandbox). */
	if (sandbox_load_later(d, &s, false, NULL, NULL, &err) < 0)
		log_error("sandbox %s: %s", rec->id, err.msg);
	f = calloc(1, sizeof(*f));
	if (!f) {
		log_error("operation %s: out of memory; it stays open", op_id);
		return;
	}
	snprintf(f->id, sizeof(f->id), "%s", op_id);
	snprintf(f->why, sizeof(f->why), "%s", why);
	if (store_async(d->store, op_fail_run, op_fail_done, f, &err) < 0) {
		log_error("operation %s: %s; it stays open", op_id, err.msg);
		free(f);
	}
}

static void claim_create(struct spaced *d, struct claimed *c)
{
	space_err err = { 0 };

	if (c->pre_rc < 0) {
		claim_failed(d, &c->rec, c->op_id, c->why);
		return;
	}
	snprintf(c->req.claim_sb_id, sizeof(c->req.claim_sb_id), "%s", c->rec.id);
	snprintf(c->req.claim_op_id, sizeof(c->req.claim_op_id), "%s", c->op_id);
	if (sandbox_create_claimed(d, &c->req, &c->pre, &err) < 0)
		claim_failed(d, &c->rec, c->op_id, err.msg);
	else
		log_info("sandbox %s: claimed by node %s (operation %s)", c->rec.id, d->cfg.node_id, c->op_id);
}

/* A claimed restore: the sandbox is loaded here first (its reads on the store's thread). */
struct restore_claim {
	struct sandbox_rec rec;
	char op_id[ID_LEN];
};

static void restore_claim_free(struct restore_claim *q)
{
	sandbox_rec_clear(&q->rec);
	free(q);
}

static void restore_loaded(struct spaced *d, const char *id, void *arg, const space_err *lerr)
{
	struct restore_claim *q = arg;
	space_err err = { 0 };

	(void)id;
	if (lerr)
		claim_failed(d, &q->rec, q->op_id, lerr->msg);
	else if (sandbox_restore_claimed(d, q->rec.id, q->op_id, &err) < 0)
		claim_failed(d, &q->rec, q->op_id, err.msg);
	else
		log_info("sandbox %s: restoring here, on node %s (operation %s)", q->rec.id, d->cfg.node_id,
			 q->op_id);
	restore_claim_free(q);
}

static void claim_restore(struct spaced *d, const struct sandbox_rec *rec, const char *op_id)
{
	struct restore_claim *q = calloc(1, sizeof(*q));
	space_err err = { 0 };

	if (!q) {
		claim_failed(d, rec, op_id, "out of memory");
		return;
	}
	q->rec = *rec;
	q->rec.env = json_deep_copy(rec->env);
	q->rec.metadata = json_deep_copy(rec->metadata);
	q->rec.network = json_deep_copy(rec->network);
	snprintf(q->op_id, sizeof(q->op_id), "%s", op_id);
	if (sandbox_load_later(d, rec, false, restore_loaded, q, &err) < 0) {
		claim_failed(d, rec, op_id, err.msg);
		restore_claim_free(q);
	}
}

/* The worker read what acting on it needs (worker.h, struct claimed). */
static void on_claim(struct spaced *d, struct claimed *c)
{
	if (!c->kind || !c->op_id[0]) {
		claim_failed(d, &c->rec, c->op_id, "its intent is malformed");
		return;
	}
	if (strcmp(c->kind, "create") == 0)
		claim_create(d, c);
	else
		claim_restore(d, &c->rec, c->op_id);
}

/* At most one bring-up per core at a time (at least two): a burst of intents waits in the
 * store, where another node with less to do may take it, rather than in this node's queue
 * of network namespaces and boots, where it would only time out. */
static int inflight_max(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	return cpus > 2 ? (int)cpus : 2;
}

/* What the worker may claim now: nothing while this node is full or busy bringing VMs up;
 * else one, and one more per GiB of room (at most CLAIMS_MAX and what bring-ups allow), with
 * each VM's overhead, which the store does not count, taken off the room. */
static void publish(struct spaced *d)
{
	struct capacity c;
	struct node_rec self;
	int room, busy = sandbox_bringing_up(d), claims = 0;

	if (!d->worker)
		return;
	if (d->cfg.role != DROLE_NODE) {
		worker_publish(d->worker, NULL, 0, 0);
		return;
	}
	node_record(d, &self);
	capacity_get(d, &c);
	room = c.memory_budget_mib - c.memory_used_mib;
	if (c.running < c.max_sandboxes && busy < inflight_max() && room > capacity_overhead_mib()) {
		claims = 1 + room / 1024;
		if (claims > CLAIMS_MAX)
			claims = CLAIMS_MAX;
		if (claims > inflight_max() - busy)
			claims = inflight_max() - busy;
		if (claims > c.max_sandboxes - c.running)
			claims = c.max_sandboxes - c.running;
		room -= claims * capacity_overhead_mib();
	}
	worker_publish(d->worker, &self, room > 0 ? claims : 0, room > 0 ? room : 0);
}

/* The worker claimed intents: act on them here, then say what may be claimed next. */
static void on_claims(struct spaced *d)
{
	size_t n;
	struct claimed *c = worker_take(d->worker, &n);

	for (size_t i = 0; i < n; i++)
		on_claim(d, &c[i]);
	claimed_free(c, n);
	publish(d);
}

static void node_tick(struct spaced *d, int64_t now)
{
	if (now - d->reconciled_ms >= RECONCILE_EVERY_MS) {
		d->reconciled_ms = now;
		cluster_reconcile(d);
	}
}

void cluster_tick(struct spaced *d)
{
	if (d->cfg.role != DROLE_NODE)
		return;
	node_tick(d, now_ms());
	publish(d);
}

void cluster_stop(struct spaced *d)
{
	cluster_push_stop(d);
	worker_stop(d->worker);
	d->worker = NULL;
}
