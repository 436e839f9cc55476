/* store_pg_sandboxes.c -- sandboxes in the PostgreSQL store: puts with their generation and
 * the node-scope fence, conditional puts, gets and listings */
#include "store_pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A name column parsed with parse(); unknown names are EIO. */
#define COL_ENUM(r, row, col, parse, out)                                        \
	do {                                                                     \
		int v_ = 0;                                                      \
		if (pg_col_enum(r, row, col, parse, &v_, err, ctx) < 0)          \
			return -1;                                               \
		(out) = v_;                                                      \
	} while (0)

int pg_read_sandbox(const PGresult *r, int i, void *rec, space_err *err, const char *ctx)
{
	struct sandbox_rec *s = rec;

	memset(s, 0, sizeof(*s));
	pg_copy(r, i, 0, s->id, sizeof(s->id));
	COL_ENUM(r, i, 1, sb_state_parse, s->state);
	pg_copy(r, i, 2, s->template_ref, sizeof(s->template_ref));
	pg_copy(r, i, 3, s->template_digest, sizeof(s->template_digest));
	s->vcpus = (int)pg_i64(r, i, 4);
	s->memory_mib = (int)pg_i64(r, i, 5);
	s->timeout_s = pg_i64(r, i, 8);
	s->created_ms = pg_i64(r, i, 9);
	s->updated_ms = pg_i64(r, i, 10);
	s->expires_ms = pg_i64(r, i, 11);
	s->pid = (int)pg_i64(r, i, 12);
	s->pid_start = (uint64_t)pg_i64(r, i, 13);
	s->next_chan = (uint32_t)pg_i64(r, i, 14);
	pg_copy(r, i, 15, s->error, sizeof(s->error));
	pg_copy(r, i, 16, s->disk, sizeof(s->disk));
	pg_copy(r, i, 17, s->parent_id, sizeof(s->parent_id));
	pg_copy(r, i, 18, s->snapshot_id, sizeof(s->snapshot_id));
	pg_copy(r, i, 19, s->source_snapshot, sizeof(s->source_snapshot));
	COL_ENUM(r, i, 20, start_kind_parse, s->start_kind);
	COL_ENUM(r, i, 21, on_timeout_parse, s->on_timeout);
	COL_ENUM(r, i, 22, sb_role_parse, s->role);
	COL_ENUM(r, i, 23, sb_state_parse, s->prev_state);
	s->jail_uid = (uint32_t)pg_i64(r, i, 24);
	pg_copy(r, i, 26, s->node_id, sizeof(s->node_id));
	s->generation = pg_i64(r, i, 27);
	if (pg_col_json(r, i, 6, false, &s->env, err, ctx) < 0 ||
	    pg_col_json(r, i, 7, false, &s->metadata, err, ctx) < 0 ||
	    pg_col_json(r, i, 25, false, &s->network, err, ctx) < 0) {
		sandbox_rec_clear(s);
		return -1;
	}
	return 0;
}

static void clear_sandbox(void *rec)
{
	sandbox_rec_clear(rec);
}

int pg_sandbox_check(const struct sandbox_rec *s, space_err *err, const char *ctx)
{
	if ((unsigned)s->state >= SB__COUNT || (unsigned)s->prev_state >= SB__COUNT ||
	    (unsigned)s->start_kind >= START__COUNT || (unsigned)s->on_timeout >= ON_TIMEOUT__COUNT ||
	    (unsigned)s->role >= ROLE__COUNT)
		return err_set(err, EINVAL, "store: %s: a state or kind is out of range", ctx);
	return 0;
}

void pg_sandbox_params(struct pg_params *p, const struct sandbox_rec *s)
{
	pg_text(p, s->id);
	pg_text(p, sb_state_name(s->state));
	pg_text(p, s->template_ref);
	pg_text(p, s->template_digest);
	pg_int(p, s->vcpus);
	pg_int(p, s->memory_mib);
	pg_json(p, s->env);
	pg_json(p, s->metadata);
	pg_int(p, s->timeout_s);
	pg_int(p, s->created_ms);
	pg_int(p, s->updated_ms);
	pg_int(p, s->expires_ms);
	pg_int(p, s->pid);
	pg_int(p, (int64_t)s->pid_start);
	pg_int(p, s->next_chan);
	pg_text(p, s->error);
	pg_text(p, s->disk);
	pg_text(p, s->parent_id);
	pg_text(p, s->snapshot_id);
	pg_text(p, s->source_snapshot);
	pg_text(p, start_kind_name(s->start_kind));
	pg_text(p, on_timeout_name(s->on_timeout));
	pg_text(p, sb_role_name(s->role));
	pg_text(p, sb_state_name(s->prev_state));
	pg_int(p, (int64_t)s->jail_uid);
	pg_json(p, s->network);
}

/* $1..$26 the record, $27 the node_id to stamp, $28 the scope (see store_set_node). */
static void put_params(struct pg_params *p, struct store *st, const struct sandbox_rec *s)
{
	pg_sandbox_params(p, s);
	pg_text(p, st->node[0] ? st->node : s->node_id);
	pg_scope(p, st);
}

#define SB_VALUES                                                                              \
	"$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19,"    \
	" $20, $21, $22, $23, $24, $25, $26, $27"
#define SB_WRITE_COLS                                                                          \
	"id, state, template_ref, template_digest, vcpus, memory_mib, env, metadata,"          \
	" timeout_s, created_ms, updated_ms, expires_ms, pid, pid_start, next_chan, error,"    \
	" disk, parent_id, snapshot_id, source_snapshot, start_kind, on_timeout, role,"        \
	" prev_state, jail_uid, network, node_id"
/* The fence: a scoped process writes only rows still its own and not lost. */
#define SB_FENCE "($28::text = '' OR (sandboxes.node_id = $28 AND sandboxes.state <> 'lost'))"

static int stale(struct store *st, space_err *err, const char *ctx)
{
	if (st->node[0])
		return err_set(err, ESTALE,
			       "store: %s: the row changed under us (another writer, or it no longer"
			       " belongs to node %s)",
			       ctx, st->node);
	return err_set(err, ESTALE, "store: %s: the row changed under us (another writer)", ctx);
}

int pg_sandbox_put(struct store *st, const struct sandbox_rec *s, space_err *err)
{
	_cleanup_params_ struct pg_params p = { 0 };
	_cleanup_pgres_ PGresult *r = NULL;
	char ctx[96];

	snprintf(ctx, sizeof(ctx), "put sandbox %s", s->id);
	if (pg_sandbox_check(s, err, ctx) < 0)
		return -1;
	put_params(&p, st, s);
	/* An upsert whose update half carries the fence: no row back means the row exists and
	 * is not ours to write (an insert or an allowed update both return one). */
	if (pg_exec(st,
		    "INSERT INTO sandboxes (" SB_WRITE_COLS ", generation) VALUES (" SB_VALUES ", 1)"
		    " ON CONFLICT (id) DO UPDATE SET (" SB_WRITE_COLS ") = (excluded.id,"
		    " excluded.state, excluded.template_ref, excluded.template_digest,"
		    " excluded.vcpus, excluded.memory_mib, excluded.env, excluded.metadata,"
		    " excluded.timeout_s, excluded.created_ms, excluded.updated_ms,"
		    " excluded.expires_ms, excluded.pid, excluded.pid_start, excluded.next_chan,"
		    " excluded.error, excluded.disk, excluded.parent_id, excluded.snapshot_id,"
		    " excluded.source_snapshot, excluded.start_kind, excluded.on_timeout,"
		    " excluded.role, excluded.prev_state, excluded.jail_uid, excluded.network,"
		    " excluded.node_id), generation = sandboxes.generation + 1"
		    " WHERE " SB_FENCE " RETURNING generation",
		    &p, &r, err, ctx) < 0)
		return -1;
	if (PQntuples(r) == 0)
		return stale(st, err, ctx);
	return 0;
}

int pg_sandbox_put_if(struct store *st, const struct sandbox_rec *s, int64_t generation,
		      int64_t *new_generation, space_err *err)
{
	_cleanup_params_ struct pg_params p = { 0 };
	_cleanup_pgres_ PGresult *r = NULL;
	_cleanup_params_ struct pg_params id = { 0 };
	_cleanup_pgres_ PGresult *r2 = NULL;
	char ctx[96];

	snprintf(ctx, sizeof(ctx), "put sandbox %s if at generation %lld", s->id,
		 (long long)generation);
	if (pg_sandbox_check(s, err, ctx) < 0)
		return -1;
	pg_text(&id, s->id);
	put_params(&p, st, s);
	pg_int(&p, generation);
	if (pg_exec(st,
		    "UPDATE sandboxes SET (" SB_WRITE_COLS ") = (" SB_VALUES "),"
		    " generation = sandboxes.generation + 1"
		    " WHERE id = $1 AND generation = $29 AND " SB_FENCE " RETURNING generation",
		    &p, &r, err, ctx) < 0)
		return -1;
	if (PQntuples(r) == 1) {
		if (new_generation)
			*new_generation = pg_i64(r, 0, 0);
		return 0;
	}
	/* why not: gone, or moved on (another writer, or fenced off) */
	if (pg_exec(st, "SELECT 1 FROM sandboxes WHERE id = $1", &id, &r2, err, ctx) < 0)
		return -1;
	if (PQntuples(r2) == 0)
		return err_set(err, ENOENT, "store: %s: not found", ctx);
	return stale(st, err, ctx);
}

int pg_sandbox_get(struct store *st, const char *id, struct sandbox_rec *out, space_err *err)
{
	char ctx[96];

	memset(out, 0, sizeof(*out));
	snprintf(ctx, sizeof(ctx), "get sandbox %.64s", id);
	return pg_get_row(st, "SELECT " PG_SB_COLS " FROM sandboxes WHERE id = $1", id, out,
			  pg_read_sandbox, err, ctx);
}

int pg_sandbox_each(struct store *st, unsigned states, int (*fn)(const struct sandbox_rec *, void *),
		    void *arg, space_err *err)
{
	static const char ctx[] = "list sandboxes";
	_cleanup_params_ struct pg_params p = { 0 };
	_cleanup_pgvec_ struct pg_vec v = { .size = sizeof(struct sandbox_rec), .clear = clear_sandbox };
	char names[512] = "{";

	if (states == 0)
		states = ((1u << SB__COUNT) - 1) & ~(1u << SB_DELETED);
	/* the wanted states travel as one array parameter: {running,paused} (our own names) */
	for (int i = 0; i < SB__COUNT; i++)
		if (states & (1u << i))
			snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
				 names[1] ? "," : "", sb_state_name((enum sb_state)i));
	snprintf(names + strlen(names), sizeof(names) - strlen(names), "}");
	pg_text(&p, names);
	pg_scope(&p, st);
	if (pg_query_all(st,
			 "SELECT " PG_SB_COLS " FROM sandboxes WHERE state = ANY($1::text[])"
			 " AND ($2::text = '' OR node_id = $2) ORDER BY created_ms, seq",
			 &p, &v, pg_read_sandbox, err, ctx) < 0)
		return -1;
	for (size_t i = 0; i < v.n; i++)
		if (fn(pg_vec_at(&v, i), arg))
			break;
	return 0;
}
