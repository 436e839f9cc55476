/* api_metrics.c -- GET /metrics: the daemon's state and counters in Prometheus text format 0.0.4
 * (docs/design/metrics.md). Gauges are read at scrape time from what the daemon holds; counters
 * and histograms come from the registry code paths feed (metrics/metrics.c). */
#include <event2/buffer.h>
#include <event2/http.h>
#include <stdlib.h>

#include "api.h"
#include "daemon.h"
#include "log.h"
#include "metrics/metrics.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

static void write_info(struct mx_out *o, const struct spaced *d)
{
	const char *l[] = { "version", SPACE_VERSION, "role", daemon_role_name(d->cfg.role), "store",
			    store_backend(d->store), NULL };

	mx_family(o, "space_build_info", "gauge", "Always 1: the daemon's version, role and store back end.");
	mx_sample(o, "space_build_info", l, 1);
	mx_family(o, "space_start_time_seconds", "gauge", "When the daemon started, in seconds since the Unix epoch.");
	mx_sample(o, "space_start_time_seconds", NULL, (double)d->started_ms / 1000.0);
}

static int count_state(const struct sandbox_rec *sb, void *arg)
{
	unsigned *n = arg;

	if (sb->role == ROLE_USER && (unsigned)sb->state < SB__COUNT)
		n[sb->state]++;
	return 0;
}

/* Every state but deleted (a record of the past, kept without bound: reading them all on each
 * scrape would grow with the daemon's age; space_operations_total{kind="delete"} counts them). */
static void write_sandboxes(struct mx_out *o, const unsigned n[SB__COUNT])
{
	mx_family(o, "space_sandboxes", "gauge", "Sandboxes (users', not warm-pool VMs) by state; deleted ones are not counted.");
	for (int s = 0; s < SB__COUNT; s++) {
		const char *l[] = { "state", sb_state_name((enum sb_state)s), NULL };

		if (s != SB_DELETED)
			mx_sample(o, "space_sandboxes", l, n[s]);
	}
}

struct pools_out {
	struct mx_out *o;
	const char *name;
	bool ready; /* the ready count, else the target */
};

static void pool_one(const char *name, int size, int ready, void *arg)
{
	struct pools_out *p = arg;
	const char *l[] = { "template", name, NULL };

	mx_sample(p->o, p->name, l, p->ready ? ready : size);
}

static void write_pools(struct mx_out *o, struct spaced *d)
{
	struct pools_out p = { o, "space_pool_ready", true };

	mx_family(o, "space_pool_ready", "gauge", "Warm-pool VMs ready to hand out, by template.");
	pool_each(d, pool_one, &p);
	p = (struct pools_out){ o, "space_pool_target", false };
	mx_family(o, "space_pool_target", "gauge", "Warm-pool size asked for, by template.");
	pool_each(d, pool_one, &p);
}

static void gauge(struct mx_out *o, const char *name, const char *help, double v)
{
	mx_family(o, name, "gauge", help);
	mx_sample(o, name, NULL, v);
}

static void write_node(struct mx_out *o, struct spaced *d)
{
	struct capacity c;

	capacity_get(d, &c);
	gauge(o, "space_node_memory_budget_bytes", "Memory the node's VMs may take together.",
	      (double)c.memory_budget_mib * 1048576.0);
	gauge(o, "space_node_memory_used_bytes", "Memory the node's VMs take (guest RAM and per-VM overhead).",
	      (double)c.memory_used_mib * 1048576.0);
	gauge(o, "space_node_vcpus", "vCPUs the node's VMs may have together.", c.vcpu_budget);
	gauge(o, "space_node_vcpus_used", "vCPUs the node's VMs have.", c.vcpus_used);
	gauge(o, "space_node_vms", "VMs that exist on the node (sandboxes, pool and builder VMs).", c.running);
	gauge(o, "space_node_vms_max", "The most VMs the node runs at once (--max-sandboxes).", c.max_sandboxes);
	gauge(o, "space_sessions_live", "Command sessions not yet ended, in every sandbox.", sessions_live(d));
	write_pools(o, d);
}

/* The cluster as the store has it (every role but all): nodes by state, and each node's
 * capacity and use as of its last renewal (one series per node: bounded by the fleet). */
static const char *const node_fam[] = { NULL, "space_cluster_node_memory_bytes",
					 "space_cluster_node_memory_used_bytes", "space_cluster_node_sandboxes",
					 "space_cluster_node_up" };

/* What a scrape reads from the store, on the store's thread (api_read): sandboxes by state
 * and, in a cluster, the nodes' rows. The loop renders. */
struct scrape {
	unsigned n[SB__COUNT];
	bool cluster;
	struct node_rec *nodes;
	size_t nn, cap;
};

static int node_copy(const struct node_rec *n, void *arg)
{
	struct scrape *q = arg;

	if (q->nn == q->cap) {
		size_t cap = q->cap ? q->cap * 2 : 16;
		struct node_rec *v = realloc(q->nodes, cap * sizeof(*v));

		if (!v)
			return -1;
		q->nodes = v;
		q->cap = cap;
	}
	q->nodes[q->nn++] = *n;
	return 0;
}

static int scrape_read(struct store *conn, void *arg, space_err *err)
{
	struct scrape *q = arg;

	if (store_sandbox_each(conn, 0, count_state, q->n, err) < 0)
		return err_wrap(err, "counting sandboxes");
	if (q->cluster && store_node_each(conn, node_copy, q, err) < 0)
		return err->code ? -1 : err_set(err, ENOMEM, "out of memory reading nodes");
	return 0;
}

static void write_cluster(struct mx_out *o, const struct scrape *q)
{
	static const char *const help[] = { NULL, "Memory for sandboxes on each node.",
					    "Memory its VMs take, as of its last renewal.",
					    "VMs on each node, as of its last renewal.",
					    "1 while the node holds its lease, 0 once it is lost." };
	const char *up[] = { "state", "up", NULL }, *lost[] = { "state", "lost", NULL };
	int nup = 0, nlost = 0;

	for (size_t i = 0; i < q->nn; i++) {
		nup += q->nodes[i].state == NODE_UP;
		nlost += q->nodes[i].state == NODE_LOST;
	}
	mx_family(o, "space_cluster_nodes", "gauge", "Nodes of the cluster by state.");
	mx_sample(o, "space_cluster_nodes", up, nup);
	mx_sample(o, "space_cluster_nodes", lost, nlost);
	for (int f = 1; f <= 4; f++) {
		mx_family(o, node_fam[f], "gauge", help[f]);
		for (size_t i = 0; i < q->nn; i++) {
			const struct node_rec *n = &q->nodes[i];
			const char *l[] = { "node", n->id, NULL };
			double v[] = { 0, (double)n->memory_mib * 1048576.0, (double)n->used_memory_mib * 1048576.0,
				       n->sandboxes, n->state == NODE_UP };

			mx_sample(o, node_fam[f], l, v[f]);
		}
	}
}

/* Write-behind (store.md, "Off the loop"): what waits to be written, and what became of tries. */
static void write_store(struct mx_out *o, struct spaced *d)
{
	static const char *const result[] = { "written", "retried", "dropped" };
	struct store_write_stats w;
	double v[3];

	store_write_stats(d->store, &w);
	v[0] = (double)w.written;
	v[1] = (double)w.retried;
	v[2] = (double)w.dropped;
	mx_family(o, "space_store_writes_pending", "gauge",
		  "Sandbox, operation and session rows put and not yet written to the store.");
	mx_sample(o, "space_store_writes_pending", NULL, (double)w.pending);
	mx_family(o, "space_store_writes_total", "counter",
		  "Write-behind's writes by result: written, retried (a try failed; made again), dropped.");
	for (int i = 0; i < 3; i++) {
		const char *l[] = { "result", result[i], NULL };

		mx_sample(o, "space_store_writes_total", l, v[i]);
	}
}

static void scrape_reply(struct spaced *d, struct evhttp_request *req, void *arg, int rc, const space_err *err)
{
	struct scrape *q = arg;
	struct evbuffer *buf;
	struct mx_out o = { 0 };

	if (rc < 0) {
		log_warn("metrics: %s", err->msg);
		http_reply_err(req, err);
		return;
	}
	if (!(buf = evbuffer_new())) {
		http_reply_error(req, 500, "internal", "out of memory");
		return;
	}
	o.buf = buf;
	write_info(&o, d);
	write_sandboxes(&o, q->n);
	/* Only a process that runs VMs has a node's capacity, pools and sessions. */
	if (d->cfg.role != DROLE_API)
		write_node(&o, d);
	if (q->cluster)
		write_cluster(&o, q);
	write_store(&o, d);
	metrics_write_counters(&o);
	if (o.failed) {
		evbuffer_free(buf);
		http_reply_error(req, 500, "internal", "out of memory");
		return;
	}
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", CONTENT_TYPE);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Cache-Control", "no-store");
	evhttp_send_reply(req, 200, "OK", buf);
	evbuffer_free(buf);
}

static void scrape_free(void *arg)
{
	struct scrape *q = arg;

	free(q->nodes);
	free(q);
}

void api_metrics_get(struct http_req *r)
{
	struct scrape *q = calloc(1, sizeof(*q));

	if (!q) {
		http_reply_error(r->req, 500, "internal", "out of memory");
		return;
	}
	q->cluster = r->d->cfg.role != DROLE_ALL;
	api_read(r, scrape_read, scrape_reply, scrape_free, q);
}
