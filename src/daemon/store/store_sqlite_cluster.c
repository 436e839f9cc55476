/* store_sqlite_cluster.c -- the SQLite back end's cluster calls: intents, claims, nodes and
 * their leases (docs/design/store.md). SQLite has one writer at a time: BEGIN IMMEDIATE takes
 * the write lock up front, which is what PostgreSQL's FOR UPDATE SKIP LOCKED gives per row. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_sql.h"

/* States a lease's end turns into lost (the others are final, or suspended: kept). */
#define LOSABLE "state NOT IN ('suspended', 'deleted', 'failed', 'lost')"

static int commit_or_rollback(struct store *st, int rc, space_err *err, const char *ctx)
{
	if (rc == 0 && sq_exec(st, "COMMIT", err, ctx) == 0)
		return 0;
	sq_rollback(st);
	return -1;
}

/* Runs sql with text parameters (NULL ends them), then reports how many rows it changed. */
static int run_text(struct store *st, const char *sql, int *changed, space_err *err,
		    const char *ctx, ...)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	const char *v;
	va_list ap;
	int i = 1;

	if (sq_prepare(st, &s, sql, err, ctx) < 0)
		return -1;
	va_start(ap, ctx);
	while ((v = va_arg(ap, const char *))) {
		if (sq_bind_text(s, i++, v) != SQLITE_OK) {
			va_end(ap);
			return sq_fail(st, err, ctx);
		}
	}
	va_end(ap);
	if (sq_step_done(st, s, err, ctx) < 0)
		return -1;
	if (changed)
		*changed = sqlite3_changes(sq_db(st));
	return 0;
}

/* ---- intents ---- */

int sq_intent_put(struct store *st, const struct sandbox_rec *s, const struct op_rec *op,
		  const json_t *intent, space_err *err)
{
	struct sandbox_rec row = *s; /* shallow: only node_id differs, nothing is freed */
	char ctx[96];
	int rc;

	snprintf(ctx, sizeof(ctx), "put intent for sandbox %s", s->id);
	if (s->state != SB_CREATING)
		return err_set(err, EINVAL, "store: %s: a create intent's sandbox must be creating",
			       ctx);
	if (!json_is_object(intent))
		return err_set(err, EINVAL, "store: %s: the intent is not an object", ctx);
	row.node_id[0] = '\0';
	if (sq_exec(st, "BEGIN IMMEDIATE", err, ctx) < 0)
		return -1;
	rc = sq_sandbox_insert(st, &row, intent, err, ctx);
	if (rc == 0)
		rc = sq_op_put(st, op, err);
	return commit_or_rollback(st, rc, err, ctx);
}

int sq_intent_restore(struct store *st, const char *sandbox_id, const struct op_rec *op,
		      space_err *err)
{
	struct sandbox_rec cur;
	char ctx[96];
	int changed = 0, rc;

	snprintf(ctx, sizeof(ctx), "put restore intent for sandbox %.64s", sandbox_id);
	if (sq_exec(st, "BEGIN IMMEDIATE", err, ctx) < 0)
		return -1;
	rc = run_text(st,
		      "UPDATE sandboxes SET intent = '{\"kind\":\"restore\"}',"
		      " generation = generation + 1"
		      " WHERE id = ?1 AND state = 'suspended' AND node_id = ''",
		      &changed, err, ctx, sandbox_id, NULL);
	if (rc == 0 && !changed) {
		/* say why: no such sandbox, or not one that may be restored anywhere */
		if ((rc = sq_sandbox_get(st, sandbox_id, &cur, err)) == 0) {
			rc = err_set(err, EINVAL, "store: %s: it is %s%s%s", ctx,
				     sb_state_name(cur.state), cur.node_id[0] ? " on node " : "",
				     cur.node_id);
			sandbox_rec_clear(&cur);
		}
	}
	if (rc == 0)
		rc = sq_op_put(st, op, err);
	return commit_or_rollback(st, rc, err, ctx);
}

/* ---- claims ---- */

struct claim_row {
	struct sandbox_rec sb;
	json_t *intent;
	bool taken;
};

static int read_claim(sqlite3_stmt *s, void *rec, space_err *err, const char *ctx)
{
	struct claim_row *r = rec;

	if (sq_read_sandbox(s, &r->sb, err, ctx) < 0)
		return -1;
	if (sq_col_json(s, 28, false, &r->intent, err, ctx) < 0) {
		sandbox_rec_clear(&r->sb);
		return -1;
	}
	return 0;
}

static void clear_claim(void *rec)
{
	struct claim_row *r = rec;

	sandbox_rec_clear(&r->sb);
	json_decref(r->intent);
}

/* Takes one candidate for node: its row and its open operations. */
static int take(struct store *st, struct claim_row *r, const char *node, space_err *err,
		const char *ctx)
{
	int changed = 0;

	if (run_text(st,
		     "UPDATE sandboxes SET node_id = ?2, intent = NULL, generation = generation + 1"
		     " WHERE id = ?1 AND node_id = '' AND intent IS NOT NULL",
		     &changed, err, ctx, r->sb.id, node, NULL) < 0)
		return -1;
	if (!changed) /* cannot happen under the write lock; skip it rather than guess */
		return 0;
	if (run_text(st,
		     "UPDATE operations SET node_id = ?2"
		     " WHERE sandbox_id = ?1 AND state IN ('pending', 'running')",
		     NULL, err, ctx, r->sb.id, node, NULL) < 0)
		return -1;
	snprintf(r->sb.node_id, sizeof(r->sb.node_id), "%s", node);
	r->sb.generation++;
	r->taken = true;
	return 0;
}

int sq_claim(struct store *st, const char *node_id, int max, int room_mib,
	     int (*fn)(const struct sandbox_rec *, const json_t *intent, void *), void *arg,
	     space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	_cleanup_vec_ struct sq_vec v = { .size = sizeof(struct claim_row), .clear = clear_claim };
	char ctx[128];
	int n = 0, rc = 0;

	snprintf(ctx, sizeof(ctx), "claim for node %.64s", node_id);
	if (!node_id || !node_id[0])
		return err_set(err, EINVAL, "store: claim: no node id");
	if (max <= 0 || room_mib < 0)
		return 0;
	if (sq_exec(st, "BEGIN IMMEDIATE", err, ctx) < 0)
		return -1;
	rc = sq_prepare(st, &s,
			"SELECT " /* sq_sandbox_cols, then the intent (28) */
			"id, state, template_ref, template_digest, vcpus, memory_mib, env, metadata,"
			" timeout_s, created_ms, updated_ms, expires_ms, pid, pid_start, next_chan,"
			" error, disk, parent_id, snapshot_id, source_snapshot, start_kind,"
			" on_timeout, role, prev_state, jail_uid, network, node_id, generation, intent"
			" FROM sandboxes WHERE intent IS NOT NULL AND node_id = ''"
			" AND state IN ('creating', 'suspended') AND memory_mib <= ?1"
			" ORDER BY created_ms, rowid",
			err, ctx);
	if (rc == 0 && sqlite3_bind_int(s, 1, room_mib) != SQLITE_OK)
		rc = sq_fail(st, err, ctx);
	if (rc == 0)
		rc = sq_collect(st, s, &v, read_claim, err, ctx);
	for (size_t i = 0; rc == 0 && i < v.n && n < max; i++) {
		struct claim_row *r = sq_vec_at(&v, i);

		if (r->sb.memory_mib > room_mib)
			continue; /* a smaller, younger one may still fit */
		if ((rc = take(st, r, node_id, err, ctx)) == 0 && r->taken) {
			room_mib -= r->sb.memory_mib;
			n++;
		}
	}
	if (commit_or_rollback(st, rc, err, ctx) < 0)
		return -1;
	for (size_t i = 0; i < v.n; i++) {
		struct claim_row *r = sq_vec_at(&v, i);

		if (r->taken && fn && fn(&r->sb, r->intent, arg))
			break;
	}
	return 0;
}

/* ---- nodes ---- */

#define NODE_COLS                                                                           \
	"id, state, api_url, data_url, memory_mib, vcpus, used_memory_mib, used_vcpus,"     \
	" sandboxes, started_ms, renewed_ms, lease_expires_ms"

static int read_node(sqlite3_stmt *s, void *rec, space_err *err, const char *ctx)
{
	struct node_rec *r = rec;
	int state = 0;

	memset(r, 0, sizeof(*r));
	sq_col_str(s, 0, r->id, sizeof(r->id));
	if (sq_col_state(s, 1, node_state_parse, &state, err, ctx) < 0)
		return -1;
	r->state = (enum node_state)state;
	sq_col_str(s, 2, r->api_url, sizeof(r->api_url));
	sq_col_str(s, 3, r->data_url, sizeof(r->data_url));
	r->memory_mib = sqlite3_column_int(s, 4);
	r->vcpus = sqlite3_column_int(s, 5);
	r->used_memory_mib = sqlite3_column_int(s, 6);
	r->used_vcpus = sqlite3_column_int(s, 7);
	r->sandboxes = sqlite3_column_int(s, 8);
	r->started_ms = sqlite3_column_int64(s, 9);
	r->renewed_ms = sqlite3_column_int64(s, 10);
	r->lease_expires_ms = sqlite3_column_int64(s, 11);
	return 0;
}

int sq_node_put(struct store *st, const struct node_rec *n, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	char ctx[96];

	snprintf(ctx, sizeof(ctx), "put node %.64s", n->id);
	if (!n->id[0])
		return err_set(err, EINVAL, "store: put node: no id");
	if (sq_prepare(st, &s,
		       "INSERT INTO nodes (" NODE_COLS ") VALUES (?1, 'up', ?2, ?3, ?4, ?5, ?6, ?7,"
		       " ?8, ?9, ?10, ?11)"
		       " ON CONFLICT (id) DO UPDATE SET state = 'up', api_url = excluded.api_url,"
		       " data_url = excluded.data_url, memory_mib = excluded.memory_mib,"
		       " vcpus = excluded.vcpus, used_memory_mib = excluded.used_memory_mib,"
		       " used_vcpus = excluded.used_vcpus, sandboxes = excluded.sandboxes,"
		       " started_ms = excluded.started_ms, renewed_ms = excluded.renewed_ms,"
		       " lease_expires_ms = excluded.lease_expires_ms",
		       err, ctx) < 0)
		return -1;
	if (sq_bind_text(s, 1, n->id) || sq_bind_text(s, 2, n->api_url) ||
	    sq_bind_text(s, 3, n->data_url) || sqlite3_bind_int(s, 4, n->memory_mib) ||
	    sqlite3_bind_int(s, 5, n->vcpus) || sqlite3_bind_int(s, 6, n->used_memory_mib) ||
	    sqlite3_bind_int(s, 7, n->used_vcpus) || sqlite3_bind_int(s, 8, n->sandboxes) ||
	    sqlite3_bind_int64(s, 9, n->started_ms) || sqlite3_bind_int64(s, 10, n->renewed_ms) ||
	    sqlite3_bind_int64(s, 11, n->lease_expires_ms))
		return sq_fail(st, err, ctx);
	return sq_step_done(st, s, err, ctx);
}

int sq_node_get(struct store *st, const char *id, struct node_rec *out, space_err *err)
{
	char ctx[96];

	memset(out, 0, sizeof(*out));
	snprintf(ctx, sizeof(ctx), "get node %.64s", id);
	return sq_get_row(st, "SELECT " NODE_COLS " FROM nodes WHERE id = ?1", id, out, read_node,
			  err, ctx);
}

int sq_node_each(struct store *st, int (*fn)(const struct node_rec *, void *), void *arg,
		 space_err *err)
{
	static const char ctx[] = "list nodes";
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	_cleanup_vec_ struct sq_vec v = { .size = sizeof(struct node_rec) };

	if (sq_prepare(st, &s, "SELECT " NODE_COLS " FROM nodes ORDER BY id", err, ctx) < 0)
		return -1;
	if (sq_collect(st, s, &v, read_node, err, ctx) < 0)
		return -1;
	for (size_t i = 0; i < v.n; i++)
		if (fn(sq_vec_at(&v, i), arg))
			break;
	return 0;
}

/* ---- leases ---- */

/* One node whose lease ended: its open operations fail, its sandboxes are lost or (suspended)
 * let go, and it is lost itself. */
static int expire_one(struct store *st, const struct node_rec *n, int64_t now, int *sandboxes,
		      space_err *err, const char *ctx)
{
	char why[160], at[24];
	int lost = 0, freed = 0;

	snprintf(why, sizeof(why), "node %s lost: lease expired at %lld", n->id,
		 (long long)n->lease_expires_ms);
	snprintf(at, sizeof(at), "%lld", (long long)now);
	if (run_text(st,
		     "UPDATE operations SET state = 'failed', error = ?2, updated_ms = CAST(?3 AS INTEGER)"
		     " WHERE state IN ('pending', 'running') AND (node_id = ?1 OR sandbox_id IN"
		     " (SELECT id FROM sandboxes WHERE node_id = ?1 AND " LOSABLE "))",
		     NULL, err, ctx, n->id, why, at, NULL) < 0 ||
	    run_text(st,
		     "UPDATE sandboxes SET prev_state = state, state = 'lost', error = ?2,"
		     " updated_ms = CAST(?3 AS INTEGER), generation = generation + 1"
		     " WHERE node_id = ?1 AND " LOSABLE,
		     &lost, err, ctx, n->id, why, at, NULL) < 0 ||
	    run_text(st,
		     "UPDATE sandboxes SET node_id = '', generation = generation + 1"
		     " WHERE node_id = ?1 AND state = 'suspended'",
		     &freed, err, ctx, n->id, NULL) < 0 ||
	    run_text(st, "UPDATE nodes SET state = 'lost' WHERE id = ?1", NULL, err, ctx, n->id,
		     NULL) < 0)
		return -1;
	*sandboxes += lost + freed;
	return 0;
}

int sq_nodes_expire(struct store *st, int64_t now, int *nodes, int *sandboxes, space_err *err)
{
	static const char ctx[] = "expire node leases";
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	_cleanup_vec_ struct sq_vec v = { .size = sizeof(struct node_rec) };
	int nsb = 0, rc;

	if (nodes)
		*nodes = 0;
	if (sandboxes)
		*sandboxes = 0;
	if (sq_exec(st, "BEGIN IMMEDIATE", err, ctx) < 0)
		return -1;
	rc = sq_prepare(st, &s,
			"SELECT " NODE_COLS " FROM nodes WHERE state = 'up' AND lease_expires_ms < ?1"
			" ORDER BY id",
			err, ctx);
	if (rc == 0 && sqlite3_bind_int64(s, 1, now) != SQLITE_OK)
		rc = sq_fail(st, err, ctx);
	if (rc == 0)
		rc = sq_collect(st, s, &v, read_node, err, ctx);
	for (size_t i = 0; rc == 0 && i < v.n; i++)
		rc = expire_one(st, sq_vec_at(&v, i), now, &nsb, err, ctx);
	if (commit_or_rollback(st, rc, err, ctx) < 0)
		return -1;
	if (nodes)
		*nodes = (int)v.n;
	if (sandboxes)
		*sandboxes = nsb;
	return 0;
}
