/* reconcile.c -- a node's periodic backstop: its rows against the VMs it runs, and secret
 * changes made by api processes pushed to its gateways (docs/design/cluster.md, "Reconciliation") */
#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "log.h"
#include "sandbox/runtime.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

/* This node's rows as the store has them (all but deleted). */
struct rows {
	struct spaced *d;
	struct row {
		char id[ID_LEN];
		enum sb_state state;
	} *v;
	size_t n, cap;
	bool oom;
};

static int row_seen(const struct sandbox_rec *r, void *arg)
{
	struct rows *rs = arg;
	space_err err = { 0 };

	if (r->role != ROLE_USER)
		return 0;
	if (rs->n == rs->cap) {
		size_t cap = rs->cap ? rs->cap * 2 : 64;
		struct row *v = realloc(rs->v, cap * sizeof(*v));

		if (!v) {
			rs->oom = true;
			return 1;
		}
		rs->v = v;
		rs->cap = cap;
	}
	snprintf(rs->v[rs->n].id, sizeof(rs->v[rs->n].id), "%s", r->id);
	rs->v[rs->n++].state = r->state;
	/* A row of ours we never heard of: a claim whose answer was lost on the way back. */
	if (!sandbox_find(rs->d, r->id) && r->state != SB_FAILED && r->state != SB_LOST) {
		log_warn("sandbox %s: this node's row (%s) is unknown to it: reconciling it as at start", r->id,
			 sb_state_name(r->state));
		if (sandbox_reconcile_row(rs->d, r, &err) < 0)
			log_error("sandbox %s: %s", r->id, err.msg);
	}
	return 0;
}

static const struct row *row_find(const struct rows *rs, const char *id)
{
	for (size_t i = 0; i < rs->n; i++)
		if (strcmp(rs->v[i].id, id) == 0)
			return &rs->v[i];
	return NULL;
}

/* Every RECONCILE_EVERY_MS, the periodic backstop: rows of this node it does not run are
 * reconciled (row_seen), and a VM it runs whose row is no longer its own, or was marked lost
 * (its lease lapsed while it was cut off), is stopped: the cluster has given up on it, and its
 * writes are fenced off already. */
static void reconcile_rows(struct spaced *d)
{
	struct rows rs = { .d = d };
	space_err err = { 0 };

	if (store_sandbox_each(d->store, 0, row_seen, &rs, &err) < 0 || rs.oom) {
		log_warn("node %s: reconciling: %s", d->cfg.node_id, rs.oom ? "out of memory" : err.msg);
		free(rs.v);
		return;
	}
	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next) {
		const struct row *r;

		if (sb->rec.role != ROLE_USER || !sb->vm || sb->rec.state == SB_DELETED)
			continue;
		r = row_find(&rs, sb->rec.id);
		if (r && r->state != SB_LOST)
			continue;
		log_error("sandbox %s: %s: stopping its VM (fenced)", sb->rec.id,
			  r ? "the cluster marked it lost" : "its row is no longer this node's");
		vm_kill(sb->vm);
	}
	free(rs.v);
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

static void reconcile_secrets(struct spaced *d)
{
	struct evbuffer *b = evbuffer_new();
	space_err err = { 0 };
	char *sig;

	if (!b)
		return;
	if (evbuffer_add(b, "\n", 1) < 0 || store_secret_each(d->store, add_secret, b, &err) < 0 ||
	    evbuffer_add(b, "", 1) < 0) {
		log_warn("node %s: reading secrets: %s", d->cfg.node_id, err.msg);
		evbuffer_free(b);
		return;
	}
	sig = strdup((const char *)evbuffer_pullup(b, -1));
	evbuffer_free(b);
	if (!sig)
		return;
	if (d->secrets_sig && strcmp(sig, d->secrets_sig) != 0) {
		changed_in(d, sig, d->secrets_sig);
		changed_in(d, d->secrets_sig, sig);
	}
	free(d->secrets_sig);
	d->secrets_sig = sig;
}

void cluster_reconcile(struct spaced *d)
{
	reconcile_rows(d);
	reconcile_secrets(d);
}
