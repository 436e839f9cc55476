/* pool.c -- warm pools: per template, a number of VMs kept ready (cloned from the template's
 * ready snapshot, identity applied) so that a create only has to hand one out. Pool VMs are
 * sandboxes of role "pool": hidden from clients, counted against capacity, refilled in the
 * background. The loop is single-threaded, so two creates never claim the same VM. */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "runtime.h"
#include "store/store.h"

struct pool {
	char name[64];        /* template name; the pool follows name:latest */
	int size;
	struct pool *next;
};

#define KV_PREFIX "pool:"

static struct pool *pool_find(struct spaced *d, const char *name)
{
	for (struct pool *p = d->pools; p; p = p->next)
		if (strcmp(p->name, name) == 0)
			return p;
	return NULL;
}

static int pool_put(struct spaced *d, const char *name, int size, space_err *err)
{
	struct pool *p = pool_find(d, name);

	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p)
			return err_set(err, ENOMEM, "out of memory");
		snprintf(p->name, sizeof(p->name), "%s", name);
		p->next = d->pools;
		d->pools = p;
	}
	p->size = size;
	return 0;
}

void pools_free(struct spaced *d)
{
	while (d->pools) {
		struct pool *p = d->pools;

		d->pools = p->next;
		free(p);
	}
}

static void refill_soon(struct spaced *d);

int pool_store_size(struct store *conn, const char *ref, int size, char name[SPEC_NAME_MAX + 1],
		    space_err *err)
{
	struct template_rec t = { 0 };
	char key[96], val[16];
	int rc;

	if (size < 0 || size > SPEC_POOL_MAX)
		return err_set(err, EINVAL, "size must be 0 to %d", SPEC_POOL_MAX);
	if (store_template_resolve(conn, ref, &t, err) < 0)
		return err_wrap(err, "template '%.100s'", ref);
	snprintf(key, sizeof(key), KV_PREFIX "%s", t.name);
	snprintf(val, sizeof(val), "%d", size);
	snprintf(name, SPEC_NAME_MAX + 1, "%s", t.name);
	rc = store_kv_set(conn, key, val, err);
	template_rec_clear(&t);
	return rc;
}

int pool_resize(struct spaced *d, const char *name, int size, space_err *err)
{
	if (pool_put(d, name, size, err) < 0)
		return -1;
	log_info("pool %s: size %d", name, size);
	refill_soon(d);
	return 0;
}

/* At start-up (--pool): before the loop serves anyone. */
static int pool_set_size(struct spaced *d, const char *ref, int size, space_err *err)
{
	char name[SPEC_NAME_MAX + 1];

	if (pool_store_size(d->store, ref, size, name, err) < 0)
		return -1;
	return pool_resize(d, name, size, err);
}

/* "base=2,minimal=1" */
static int parse_config(struct spaced *d, const char *spec, space_err *err)
{
	char buf[512], *save = NULL, *tok;

	snprintf(buf, sizeof(buf), "%s", spec);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '='), *end;
		long n;

		if (!eq)
			return err_set(err, EINVAL, "--pool: '%s' is not NAME=SIZE", tok);
		*eq = '\0';
		n = strtol(eq + 1, &end, 10);
		if (!tok[0] || *end || n < 0 || n > SPEC_POOL_MAX)
			return err_set(err, EINVAL, "--pool: bad size for '%s' (0 to %d)", tok, SPEC_POOL_MAX);
		if (pool_set_size(d, tok, (int)n, err) < 0)
			return -1;
	}
	return 0;
}

static int load_one(const struct template_rec *t, void *arg)
{
	struct spaced *d = arg;
	char key[96], val[16];
	space_err err = { 0 };

	snprintf(key, sizeof(key), KV_PREFIX "%s", t->name);
	if (store_kv_get(d->store, key, val, sizeof(val), &err) == 0 && atoi(val) > 0 && !pool_find(d, t->name))
		pool_put(d, t->name, atoi(val), &err);
	return 0;
}

int pools_init(struct spaced *d, space_err *err)
{
	if (store_template_each(d->store, load_one, d, err) < 0)
		return -1;
	/* Sizes on the command line win over the remembered ones. */
	return d->cfg.pools[0] ? parse_config(d, d->cfg.pools, err) : 0;
}

void pool_counts(struct spaced *d, const char *name, int *size, int *ready)
{
	struct pool *p = pool_find(d, name);

	*size = p ? p->size : 0;
	*ready = 0;
	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next)
		if (sb->rec.role == ROLE_POOL && sb->rec.state == SB_RUNNING && strcmp(sb->tmpl.name, name) == 0)
			(*ready)++;
}

void pool_each(struct spaced *d, void (*fn)(const char *name, int size, int ready, void *arg), void *arg)
{
	for (struct pool *p = d->pools; p; p = p->next) {
		int size, ready;

		pool_counts(d, p->name, &size, &ready);
		fn(p->name, size, ready, arg);
	}
}

struct sandbox *pool_claim(struct spaced *d, const char *digest, int vcpus, int memory_mib)
{
	struct sandbox *cold = NULL;

	/* A warmed VM first. The pool refills at the next tick, not now: a
	 * new clone starting this instant would take the CPU the claimed VM's
	 * first command needs. */
	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next) {
		if (sb->rec.role != ROLE_POOL || sb->rec.state != SB_RUNNING ||
		    (sb->op.id[0] && !op_state_done(sb->op.state)) || !sb->agent ||
		    strcmp(sb->rec.template_digest, digest) != 0 || sb->rec.vcpus != vcpus ||
		    sb->rec.memory_mib != memory_mib)
			continue;
		if (sandbox_warm(sb))
			return sb;
		if (!cold)
			cold = sb;
	}
	return cold;
}

/* ---- refilling ---- */

/* Each pool's template and ready snapshot are read on the store's thread (create_read, one
 * read of every pool at a time); the pool is judged and refilled on the loop with them. */
struct pool_read {
	char name[64];
	int rc;                     /* 0: the template was found */
	struct create_reads pre;    /* the template (pre.tmpl) and the ready snapshot to clone */
};

struct pools_read {
	struct spaced *d;
	bool net;
	size_t n;
	struct pool_read *v;
};

static bool pools_reading;

static void fill_one(struct spaced *d, struct pool *p, struct pool_read *pr)
{
	struct create_req req = { 0 };
	struct sandbox *sb;
	space_err err = { 0 };

	snprintf(req.template_ref, sizeof(req.template_ref), "%s", pr->pre.tmpl.digest);
	req.timeout_set = true; /* a pool VM waits as long as it takes */
	if (sandbox_create_pre(d, &req, &pr->pre, ROLE_POOL, &sb, &err) < 0)
		log_warn("pool %s: %s", p->name, err.msg);
	create_req_free(&req);
}

static void tick_pool(struct spaced *d, struct pool *p, struct pool_read *pr)
{
	const struct template_rec *t = &pr->pre.tmpl;
	space_err err = { 0 };
	int have = 0, filling = 0;

	if (pr->rc < 0)
		return;
	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next) {
		if (sb->rec.role != ROLE_POOL || sb->rec.state == SB_DELETING || sb->rec.state == SB_DELETED ||
		    strcmp(sb->tmpl.name, p->name) != 0)
			continue;
		/* Failed fills, VMs of an older build of the template, and what
		 * a smaller pool no longer needs go. */
		if (sb->rec.state == SB_FAILED || strcmp(sb->rec.template_digest, t->digest) != 0 ||
		    (sb->rec.state == SB_RUNNING && have >= p->size)) {
			sandbox_start_delete(sb, "not needed by its pool");
			continue;
		}
		have++;
		filling += sb->rec.state == SB_CREATING;
	}
	/* Pool VMs are clones: wait for the ready snapshot (unless there are
	 * none: then they boot). One at a time, so a refill never starves the
	 * clients' own creates of CPU. */
	if (have < p->size && filling == 0 && (!d->cfg.ready_snapshots || pr->pre.ready.id[0]) &&
	    capacity_admit(d, t->vcpus > 0 ? t->vcpus : 1, t->memory_mib > 0 ? t->memory_mib : 256, 1, &err) == 0)
		fill_one(d, p, pr);
}

static void pools_read(struct store *conn, void *arg)
{
	struct pools_read *q = arg;

	for (size_t i = 0; i < q->n; i++) {
		struct pool_read *pr = &q->v[i];
		struct create_req req = { 0 };
		struct template_rec t = { 0 };
		space_err err = { 0 };

		/* The pool follows its template's name: the create is of the digest it names now. */
		pr->rc = store_template_resolve(conn, pr->name, &t, &err);
		if (pr->rc == 0) {
			snprintf(req.template_ref, sizeof(req.template_ref), "%s", t.digest);
			pr->rc = create_read(conn, q->net, &req, &pr->pre, &err);
		}
		template_rec_clear(&t);
	}
}

static void pools_read_free(struct pools_read *q)
{
	for (size_t i = 0; i < q->n; i++)
		create_reads_clear(&q->v[i].pre);
	free(q->v);
	free(q);
}

static void pools_read_done(void *arg, bool ran)
{
	struct pools_read *q = arg;

	pools_reading = false;
	for (size_t i = 0; ran && i < q->n; i++) {
		struct pool *p = pool_find(q->d, q->v[i].name); /* (one removed since is not judged) */

		if (p)
			tick_pool(q->d, p, &q->v[i]);
	}
	pools_read_free(q);
}

void pools_tick(struct spaced *d)
{
	struct pools_read *q;
	space_err err = { 0 };
	size_t n = 0;

	for (struct pool *p = d->pools; p; p = p->next)
		n++;
	if (!n || pools_reading || !(q = calloc(1, sizeof(*q))))
		return;
	q->d = d;
	q->net = sandbox_net(d);
	if (!(q->v = calloc(n, sizeof(*q->v)))) {
		free(q);
		return;
	}
	for (struct pool *p = d->pools; p; p = p->next)
		snprintf(q->v[q->n++].name, sizeof(q->v[0].name), "%s", p->name);
	pools_reading = true;
	if (store_async(d->store, pools_read, pools_read_done, q, &err) < 0) {
		log_warn("pools: %s", err.msg);
		pools_reading = false;
		pools_read_free(q);
	}
}

static void on_refill(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	pools_tick(arg);
}

/* After a claim: refill from the loop, not inside the create. */
static void refill_soon(struct spaced *d)
{
	event_base_once(d->base, -1, EV_TIMEOUT, on_refill, d, NULL);
}
