/* reconcile.c -- a node's periodic backstop: its rows against the VMs it runs, and secret
 * changes made by api processes pushed to its gateways (docs/design/cluster.md, "Reconciliation") */
#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "log.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

/* A sandbox made this recently may have its first write still queued behind the read. */
#define FRESH_MS 5000

/* What the store's thread read for one reconcile (read_view), for the loop to act on
 * (view_done): this node's rows (all but deleted) and the secrets' signature. */
struct view {
	struct spaced *d;
	int64_t asked_ms;          /* when the loop queued the read */
	struct sandbox_rec *v;
	size_t n, cap;
	struct evbuffer *sig;
	bool failed;
	space_err err;
};

static int row_keep(const struct sandbox_rec *r, void *arg)
{
	struct view *vw = arg;
	struct sandbox_rec *c;

	if (r->role != ROLE_USER)
		return 0;
	if (vw->n == vw->cap) {
		size_t cap = vw->cap ? vw->cap * 2 : 64;
		struct sandbox_rec *v = realloc(vw->v, cap * sizeof(*v));

		if (!v)
			return err_set(&vw->err, ENOMEM, "out of memory"), vw->failed = true, 1;
		vw->v = v;
		vw->cap = cap;
	}
	c = &vw->v[vw->n++];
	*c = *r;
	c->env = json_deep_copy(r->env);
	c->metadata = json_deep_copy(r->metadata);
	c->network = json_deep_copy(r->network);
	return 0;
}

static const struct sandbox_rec *row_find(const struct view *vw, const char *id)
{
	for (size_t i = 0; i < vw->n; i++)
		if (strcmp(vw->v[i].id, id) == 0)
			return &vw->v[i];
	return NULL;
}

/* A row of ours we never heard of: a claim whose answer was lost on the way back. Not one
 * the loop let go of since the read was queued (its deletion may have been written after). */
static void adopt_unknown(struct spaced *d, const struct view *vw)
{
	space_err err = { 0 };

	for (size_t i = 0; i < vw->n; i++) {
		const struct sandbox_rec *r = &vw->v[i];

		if (sandbox_find(d, r->id) || r->state == SB_FAILED || r->state == SB_LOST ||
		    sandbox_reaped_since(d, r->id, vw->asked_ms))
			continue;
		log_warn("sandbox %s: this node's row (%s) is unknown to it: reconciling it as at start", r->id,
			 sb_state_name(r->state));
		if (sandbox_load_later(d, r, true, NULL, NULL, &err) < 0)
			log_error("sandbox %s: %s", r->id, err.msg);
		err_clear(&err);
	}
}

/* A VM it runs whose row is no longer its own, or was marked lost (its lease lapsed while it
 * was cut off), is stopped: the cluster has given up on it, and its writes are fenced off
 * already. Not one made since the read was queued (its first write may have come after). */
static const char *fenced_why(const struct sandbox_rec *rec, void *arg)
{
	const struct sandbox_rec *r = row_find(arg, rec->id);

	if (r && r->state != SB_LOST)
		return NULL;
	return r ? "the cluster marked it lost" : "its row is no longer this node's";
}

/* Secrets are written by api processes, whose gateways are elsewhere: a node sees each change
 * (a new value, a deletion) at its next reconcile and pushes it to the gateways that use the
 * name, as a single daemon does at once. The signature is "\n" then "name@updated_ms\n" per
 * secret: a line is looked for with the newline before it, so "a@1" is not found in "xa@1". */
static int add_secret(const struct secret_rec *r, void *arg)
{
	char line[128];
	struct evbuffer *b = arg;

	snprintf(line, sizeof(line), "%s@%lld\n", r->name, (long long)r->updated_ms);
	return evbuffer_add(b, line, strlen(line));
}

static void changed_in(struct spaced *d, const char *sig, const char *other)
{
	char name[96];

	for (const char *p = sig + (*sig == '\n'); *p;) {
		size_t n = strcspn(p, "\n");
		char line[130];

		snprintf(line, sizeof(line), "\n%.*s\n", (int)n, p);
		/* a line the other signature lacks: added, changed or deleted */
		if (!strstr(other, line)) {
			snprintf(name, sizeof(name), "%.*s", (int)strcspn(line + 1, "@"), line + 1);
			sandbox_secret_changed(d, name);
		}
		p += n + (p[n] == '\n');
	}
}

static void apply_secrets(struct spaced *d, struct view *vw)
{
	char *sig;

	if (evbuffer_add(vw->sig, "", 1) < 0 || !(sig = strdup((const char *)evbuffer_pullup(vw->sig, -1))))
		return;
	if (d->secrets_sig && strcmp(sig, d->secrets_sig) != 0) {
		changed_in(d, sig, d->secrets_sig);
		changed_in(d, d->secrets_sig, sig);
	}
	free(d->secrets_sig);
	d->secrets_sig = sig;
}

/* On the store's thread, after every write the loop queued before: no round trip on the loop. */
static void read_view(struct store *conn, void *arg)
{
	struct view *vw = arg;

	if (store_sandbox_each(conn, 0, row_keep, vw, &vw->err) < 0 || vw->failed) {
		vw->failed = true;
		return;
	}
	if (evbuffer_add(vw->sig, "\n", 1) < 0 || store_secret_each(conn, add_secret, vw->sig, &vw->err) < 0)
		vw->failed = true;
}

static void view_free(struct view *vw)
{
	for (size_t i = 0; i < vw->n; i++)
		sandbox_rec_clear(&vw->v[i]);
	free(vw->v);
	evbuffer_free(vw->sig);
	free(vw);
}

static void view_done(void *arg, bool ran)
{
	struct view *vw = arg;
	struct spaced *d = vw->d;

	d->reconciling = false;
	if (ran && vw->failed)
		log_warn("node %s: reconciling: %s", d->cfg.node_id, vw->err.msg);
	if (ran && !vw->failed) {
		adopt_unknown(d, vw);
		sandbox_fence(d, vw->asked_ms - FRESH_MS, fenced_why, (void *)vw);
		apply_secrets(d, vw);
	}
	view_free(vw);
}

void cluster_reconcile(struct spaced *d)
{
	struct view *vw;
	space_err err = { 0 };

	if (d->reconciling)
		return; /* the last read has not come back yet (the database is slow or away) */
	if (!(vw = calloc(1, sizeof(*vw))) || !(vw->sig = evbuffer_new())) {
		free(vw);
		log_error("node %s: reconciling: out of memory", d->cfg.node_id);
		return;
	}
	vw->d = d;
	vw->asked_ms = now_ms();
	d->reconciling = true;
	if (store_async(d->store, read_view, view_done, vw, &err) < 0) {
		d->reconciling = false;
		log_error("node %s: reconciling: %s", d->cfg.node_id, err.msg);
		view_free(vw);
	}
}
