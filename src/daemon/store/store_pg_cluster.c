/* store_pg_cluster.c -- the PostgreSQL back end's cluster calls: intents, claims (FOR UPDATE
 * SKIP LOCKED), nodes and their leases (docs/design/store.md, docs/design/cluster.md) */
#include "store_pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* States a lease's end turns into lost (the others are final, or suspended: kept). */
#define LOSABLE "state NOT IN ('suspended', 'deleted', 'failed', 'lost')"

/* ---- intents ---- */

struct intent_args {
	const struct sandbox_rec *sb;
	const struct op_rec *op;
	const json_t *intent;
	const char *sandbox_id;
};

static int intent_put_body(struct pg_tx *tx, void *arg, space_err *err, const char *ctx)
{
	struct intent_args *a = arg;
	_cleanup_params_ struct pg_params p = { 0 };

	pg_sandbox_params(&p, a->sb);
	pg_json(&p, a->intent);
	/* a plain insert: an id taken already is EEXIST (23505) */
	if (pg_exec_tx(tx,
		       "INSERT INTO sandboxes (" PG_SB_COLS ", intent) VALUES ($1, $2, $3, $4, $5,"
		       " $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20,"
		       " $21, $22, $23, $24, $25, $26, '', 1, $27)",
		       &p, NULL, err, ctx) < 0) {
		if (err->code == EEXIST)
			err_set(err, EEXIST, "store: %s: the sandbox exists already", ctx);
		return -1;
	}
	return pg_op_write(tx, a->op, "", err, ctx);
}

int pg_intent_put(struct store *st, const struct sandbox_rec *s, const struct op_rec *op,
		  const json_t *intent, space_err *err)
{
	struct intent_args a = { .sb = s, .op = op, .intent = intent };
	char ctx[96];

	snprintf(ctx, sizeof(ctx), "put intent for sandbox %s", s->id);
	if (pg_sandbox_check(s, err, ctx) < 0)
		return -1;
	if (s->state != SB_CREATING)
		return err_set(err, EINVAL, "store: %s: a create intent's sandbox must be creating",
			       ctx);
	if (!json_is_object(intent))
		return err_set(err, EINVAL, "store: %s: the intent is not an object", ctx);
	return pg_tx(st, intent_put_body, &a, err, ctx);
}

static int intent_restore_body(struct pg_tx *tx, void *arg, space_err *err, const char *ctx)
{
	struct intent_args *a = arg;
	_cleanup_params_ struct pg_params p = { 0 };
	_cleanup_pgres_ PGresult *r = NULL;

	pg_text(&p, a->sandbox_id);
	/* the row lock keeps a claim or another restore from slipping in between */
	if (pg_exec_tx(tx, "SELECT state, node_id FROM sandboxes WHERE id = $1 FOR UPDATE", &p, &r,
		       err, ctx) < 0)
		return -1;
	if (PQntuples(r) == 0)
		return err_set(err, ENOENT, "store: %s: not found", ctx);
	if (strcmp(pg_str(r, 0, 0), sb_state_name(SB_SUSPENDED)) || pg_str(r, 0, 1)[0])
		return err_set(err, EINVAL, "store: %s: it is %s%s%s", ctx, pg_str(r, 0, 0),
			       pg_str(r, 0, 1)[0] ? " on node " : "", pg_str(r, 0, 1));
	if (pg_exec_tx(tx,
		       "UPDATE sandboxes SET intent = '{\"kind\":\"restore\"}',"
		       " generation = generation + 1 WHERE id = $1",
		       &p, NULL, err, ctx) < 0)
		return -1;
	return pg_op_write(tx, a->op, "", err, ctx);
}

int pg_intent_restore(struct store *st, const char *sandbox_id, const struct op_rec *op,
		      space_err *err)
{
	struct intent_args a = { .op = op, .sandbox_id = sandbox_id };
	char ctx[96];

	snprintf(ctx, sizeof(ctx), "put restore intent for sandbox %.64s", sandbox_id);
	return pg_tx(st, intent_restore_body, &a, err, ctx);
}

/* ---- claims ---- */

struct claim_row {
	struct sandbox_rec sb;
	json_t *intent;
};

static void clear_claim(void *rec)
{
	struct claim_row *c = rec;

	sandbox_rec_clear(&c->sb);
	json_decref(c->intent);
}

struct claim_args {
	const char *node;
	int max, room;
	struct pg_vec taken; /* claim_row: filled by the transaction that committed */
};

/* Takes one locked candidate: its row (read back as it is now) and its open operations. */
static int take(struct pg_tx *tx, struct claim_args *a, const PGresult *cand, int i, space_err *err,
		const char *ctx)
{
	_cleanup_params_ struct pg_params p = { 0 };
	_cleanup_pgres_ PGresult *r = NULL;
	struct claim_row *row = pg_vec_at(&a->taken, a->taken.n);

	pg_text(&p, pg_str(cand, i, 0));
	pg_text(&p, a->node);
	if (pg_exec_tx(tx,
		       "UPDATE sandboxes SET node_id = $2, intent = NULL, generation = generation + 1"
		       " WHERE id = $1 RETURNING " PG_SB_COLS,
		       &p, &r, err, ctx) < 0 ||
	    pg_exec_tx(tx,
		       "UPDATE operations SET node_id = $2"
		       " WHERE sandbox_id = $1 AND state IN ('pending', 'running')",
		       &p, NULL, err, ctx) < 0)
		return -1;
	if (PQntuples(r) != 1)
		return err_set(err, EIO, "store: %s: a locked candidate vanished", ctx);
	if (pg_read_sandbox(r, 0, &row->sb, err, ctx) < 0)
		return -1;
	if (pg_col_json(cand, i, 28, false, &row->intent, err, ctx) < 0) {
		sandbox_rec_clear(&row->sb);
		return -1;
	}
	a->taken.n++;
	return 0;
}

static int claim_body(struct pg_tx *tx, void *arg, space_err *err, const char *ctx)
{
	struct claim_args *a = arg;
	_cleanup_params_ struct pg_params p = { 0 };
	_cleanup_pgres_ PGresult *r = NULL;
	int room = a->room;

	pg_vec_free(&a->taken); /* a retried transaction starts over */
	pg_int(&p, room);
	pg_int(&p, (int64_t)a->max + 64);
	/* Rows another claimer holds are skipped, not waited for; a few more candidates than
	 * max are locked so that a too-big one does not end the scan. */
	if (pg_exec_tx(tx,
		       "SELECT " PG_SB_COLS ", intent FROM sandboxes"
		       " WHERE intent IS NOT NULL AND node_id = ''"
		       " AND state IN ('creating', 'suspended') AND memory_mib <= $1"
		       " ORDER BY created_ms, seq LIMIT $2 FOR UPDATE SKIP LOCKED",
		       &p, &r, err, ctx) < 0)
		return -1;
	if (PQntuples(r) && !(a->taken.items = calloc((size_t)PQntuples(r), a->taken.size)))
		return err_set(err, ENOMEM, "store: %s: out of memory", ctx);
	for (int i = 0; i < PQntuples(r) && (int)a->taken.n < a->max; i++) {
		int mib = (int)pg_i64(r, i, 5);

		if (mib > room)
			continue; /* a smaller, younger one may still fit */
		if (take(tx, a, r, i, err, ctx) < 0)
			return -1;
		room -= mib;
	}
	return 0;
}

int pg_claim(struct store *st, const char *node_id, int max, int room_mib,
	     int (*fn)(const struct sandbox_rec *, const json_t *intent, void *), void *arg,
	     space_err *err)
{
	struct claim_args a = { .node = node_id, .max = max, .room = room_mib,
				.taken = { .size = sizeof(struct claim_row), .clear = clear_claim } };
	char ctx[128];
	int rc;

	snprintf(ctx, sizeof(ctx), "claim for node %.64s", node_id ? node_id : "");
	if (!node_id || !node_id[0])
		return err_set(err, EINVAL, "store: claim: no node id");
	if (max <= 0 || room_mib < 0)
		return 0;
	rc = pg_tx(st, claim_body, &a, err, ctx);
	for (size_t i = 0; rc == 0 && fn && i < a.taken.n; i++) {
		struct claim_row *c = pg_vec_at(&a.taken, i);

		if (fn(&c->sb, c->intent, arg))
			break;
	}
	pg_vec_free(&a.taken);
	return rc;
}

/* ---- nodes ---- */

#define NODE_COLS                                                                        \
	"id, state, api_url, data_url, memory_mib, vcpus, used_memory_mib, used_vcpus,"  \
	" sandboxes, started_ms, renewed_ms, lease_expires_ms"

static int read_node(const PGresult *r, int i, void *rec, space_err *err, const char *ctx)
{
	struct node_rec *n = rec;
	int state = 0;

	memset(n, 0, sizeof(*n));
	pg_copy(r, i, 0, n->id, sizeof(n->id));
	if (pg_col_enum(r, i, 1, node_state_parse, &state, err, ctx) < 0)
		return -1;
	n->state = (enum node_state)state;
	pg_copy(r, i, 2, n->api_url, sizeof(n->api_url));
	pg_copy(r, i, 3, n->data_url, sizeof(n->data_url));
	n->memory_mib = (int)pg_i64(r, i, 4);
	n->vcpus = (int)pg_i64(r, i, 5);
	n->used_memory_mib = (int)pg_i64(r, i, 6);
	n->used_vcpus = (int)pg_i64(r, i, 7);
	n->sandboxes = (int)pg_i64(r, i, 8);
	n->started_ms = pg_i64(r, i, 9);
	n->renewed_ms = pg_i64(r, i, 10);
	n->lease_expires_ms = pg_i64(r, i, 11);
	return 0;
}

int pg_node_put(struct store *st, const struct node_rec *n, space_err *err)
{
	_cleanup_params_ struct pg_params p = { 0 };
	char ctx[96];

	snprintf(ctx, sizeof(ctx), "put node %.64s", n->id);
	if (!n->id[0])
		return err_set(err, EINVAL, "store: put node: no id");
	pg_text(&p, n->id);
	pg_text(&p, n->api_url);
	pg_text(&p, n->data_url);
	pg_int(&p, n->memory_mib);
	pg_int(&p, n->vcpus);
	pg_int(&p, n->used_memory_mib);
	pg_int(&p, n->used_vcpus);
	pg_int(&p, n->sandboxes);
	pg_int(&p, n->started_ms);
	pg_int(&p, n->renewed_ms);
	pg_int(&p, n->lease_expires_ms);
	return pg_exec(st,
		       "INSERT INTO nodes (" NODE_COLS ") VALUES ($1, 'up', $2, $3, $4, $5, $6, $7,"
		       " $8, $9, $10, $11)"
		       " ON CONFLICT (id) DO UPDATE SET state = 'up', api_url = excluded.api_url,"
		       " data_url = excluded.data_url, memory_mib = excluded.memory_mib,"
		       " vcpus = excluded.vcpus, used_memory_mib = excluded.used_memory_mib,"
		       " used_vcpus = excluded.used_vcpus, sandboxes = excluded.sandboxes,"
		       " started_ms = excluded.started_ms, renewed_ms = excluded.renewed_ms,"
		       " lease_expires_ms = excluded.lease_expires_ms",
		       &p, NULL, err, ctx);
}

int pg_node_get(struct store *st, const char *id, struct node_rec *out, space_err *err)
{
	char ctx[96];

	memset(out, 0, sizeof(*out));
	snprintf(ctx, sizeof(ctx), "get node %.64s", id);
	return pg_get_row(st, "SELECT " NODE_COLS " FROM nodes WHERE id = $1", id, out, read_node,
			  err, ctx);
}

int pg_node_each(struct store *st, int (*fn)(const struct node_rec *, void *), void *arg,
		 space_err *err)
{
	_cleanup_pgvec_ struct pg_vec v = { .size = sizeof(struct node_rec) };

	if (pg_query_all(st, "SELECT " NODE_COLS " FROM nodes ORDER BY id COLLATE \"C\"", NULL, &v,
			 read_node, err, "list nodes") < 0)
		return -1;
	for (size_t i = 0; i < v.n; i++)
		if (fn(pg_vec_at(&v, i), arg))
			break;
	return 0;
}

/* ---- leases ---- */

struct expire_args {
	int64_t now;
	int nodes, sandboxes;
};

/* One node whose lease ended (its row is locked and already lost): its open operations
 * fail, its sandboxes are lost or (suspended) let go. */
static int expire_one(struct pg_tx *tx, struct expire_args *a, const char *id, int64_t expired,
		      space_err *err, const char *ctx)
{
	_cleanup_params_ struct pg_params p = { 0 };
	_cleanup_params_ struct pg_params q = { 0 };
	_cleanup_pgres_ PGresult *lost = NULL;
	_cleanup_pgres_ PGresult *freed = NULL;
	char why[160];

	snprintf(why, sizeof(why), "node %s lost: lease expired at %lld", id, (long long)expired);
	pg_text(&p, id);
	pg_text(&p, why);
	pg_int(&p, a->now);
	pg_text(&q, id);
	if (pg_exec_tx(tx,
		       "UPDATE operations SET state = 'failed', error = $2, updated_ms = $3"
		       " WHERE state IN ('pending', 'running') AND (node_id = $1 OR sandbox_id IN"
		       " (SELECT id FROM sandboxes WHERE node_id = $1 AND " LOSABLE "))",
		       &p, NULL, err, ctx) < 0 ||
	    pg_exec_tx(tx,
		       "UPDATE sandboxes SET prev_state = state, state = 'lost', error = $2,"
		       " updated_ms = $3, generation = generation + 1"
		       " WHERE node_id = $1 AND " LOSABLE,
		       &p, &lost, err, ctx) < 0 ||
	    pg_exec_tx(tx,
		       "UPDATE sandboxes SET node_id = '', generation = generation + 1"
		       " WHERE node_id = $1 AND state = 'suspended'",
		       &q, &freed, err, ctx) < 0)
		return -1;
	a->sandboxes += pg_changes(lost) + pg_changes(freed);
	return 0;
}

static int expire_body(struct pg_tx *tx, void *arg, space_err *err, const char *ctx)
{
	struct expire_args *a = arg;
	_cleanup_params_ struct pg_params p = { 0 };
	_cleanup_pgres_ PGresult *r = NULL;

	a->nodes = a->sandboxes = 0; /* a retried transaction starts over */
	pg_int(&p, a->now);
	/* Marking the nodes first takes their row locks: a second process expiring at the same
	 * time waits on them, then finds them lost already (READ COMMITTED re-checks the WHERE)
	 * and changes nothing. */
	if (pg_exec_tx(tx,
		       "UPDATE nodes SET state = 'lost' WHERE state = 'up' AND lease_expires_ms < $1"
		       " RETURNING id, lease_expires_ms",
		       &p, &r, err, ctx) < 0)
		return -1;
	for (int i = 0; i < PQntuples(r); i++)
		if (expire_one(tx, a, pg_str(r, i, 0), pg_i64(r, i, 1), err, ctx) < 0)
			return -1;
	a->nodes = PQntuples(r);
	return 0;
}

int pg_nodes_expire(struct store *st, int64_t now, int *nodes, int *sandboxes, space_err *err)
{
	struct expire_args a = { .now = now };

	if (nodes)
		*nodes = 0;
	if (sandboxes)
		*sandboxes = 0;
	if (pg_tx(st, expire_body, &a, err, "expire node leases") < 0)
		return -1;
	if (nodes)
		*nodes = a.nodes;
	if (sandboxes)
		*sandboxes = a.sandboxes;
	return 0;
}
