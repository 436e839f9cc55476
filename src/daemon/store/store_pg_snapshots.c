/* store_pg_snapshots.c -- snapshots (ready, named, suspend, fork) in the PostgreSQL store */
#include "store_pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SNAP_COLS                                                                              \
	"id, kind, state, name, sandbox_id, template_ref, template_digest, vcpus, memory_mib," \
	" env, next_chan, dir, disk, bytes, created_ms, error, net"

static int read_snapshot(const PGresult *r, int i, void *rec, space_err *err, const char *ctx)
{
	struct snapshot_rec *s = rec;
	int kind = 0, state = 0;

	memset(s, 0, sizeof(*s));
	pg_copy(r, i, 0, s->id, sizeof(s->id));
	if (pg_col_enum(r, i, 1, snap_kind_parse, &kind, err, ctx) < 0 ||
	    pg_col_enum(r, i, 2, snap_state_parse, &state, err, ctx) < 0)
		return -1;
	s->kind = (enum snap_kind)kind;
	s->state = (enum snap_state)state;
	pg_copy(r, i, 3, s->name, sizeof(s->name));
	pg_copy(r, i, 4, s->sandbox_id, sizeof(s->sandbox_id));
	pg_copy(r, i, 5, s->template_ref, sizeof(s->template_ref));
	pg_copy(r, i, 6, s->template_digest, sizeof(s->template_digest));
	s->vcpus = (int)pg_i64(r, i, 7);
	s->memory_mib = (int)pg_i64(r, i, 8);
	s->next_chan = (uint32_t)pg_i64(r, i, 10);
	pg_copy(r, i, 11, s->dir, sizeof(s->dir));
	pg_copy(r, i, 12, s->disk, sizeof(s->disk));
	s->bytes = pg_i64(r, i, 13);
	s->created_ms = pg_i64(r, i, 14);
	pg_copy(r, i, 15, s->error, sizeof(s->error));
	s->net = pg_i64(r, i, 16) != 0;
	return pg_col_json(r, i, 9, false, &s->env, err, ctx);
}

static void clear_snapshot(void *rec)
{
	snapshot_rec_clear(rec);
}

int pg_snapshot_put(struct store *st, const struct snapshot_rec *s, space_err *err)
{
	_cleanup_params_ struct pg_params p = { 0 };
	char ctx[96];

	snprintf(ctx, sizeof(ctx), "put snapshot %s", s->id);
	if ((unsigned)s->kind >= SNAP__COUNT || (unsigned)s->state >= SNAPS__COUNT)
		return err_set(err, EINVAL, "store: %s: bad kind %d or state %d", ctx, (int)s->kind,
			       (int)s->state);
	pg_text(&p, s->id);
	pg_text(&p, snap_kind_name(s->kind));
	pg_text(&p, snap_state_name(s->state));
	pg_text(&p, s->name);
	pg_text(&p, s->sandbox_id);
	pg_text(&p, s->template_ref);
	pg_text(&p, s->template_digest);
	pg_int(&p, s->vcpus);
	pg_int(&p, s->memory_mib);
	pg_json(&p, s->env);
	pg_int(&p, s->next_chan);
	pg_text(&p, s->dir);
	pg_text(&p, s->disk);
	pg_int(&p, s->bytes);
	pg_int(&p, s->created_ms);
	pg_text(&p, s->error);
	pg_int(&p, s->net);
	pg_scope(&p, st);
	/* Like operations, a snapshot record carries no node: the scope stamps one, an unscoped
	 * put keeps the row's. Another snapshot's name is the unique index's violation. */
	if (pg_exec(st,
		    "INSERT INTO snapshots (" SNAP_COLS ", node_id) VALUES ($1, $2, $3, $4, $5, $6,"
		    " $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)"
		    " ON CONFLICT (id) DO UPDATE SET (" SNAP_COLS ") = (excluded.id, excluded.kind,"
		    " excluded.state, excluded.name, excluded.sandbox_id, excluded.template_ref,"
		    " excluded.template_digest, excluded.vcpus, excluded.memory_mib, excluded.env,"
		    " excluded.next_chan, excluded.dir, excluded.disk, excluded.bytes,"
		    " excluded.created_ms, excluded.error, excluded.net),"
		    " node_id = CASE WHEN excluded.node_id = '' THEN snapshots.node_id"
		    " ELSE excluded.node_id END",
		    &p, NULL, err, ctx) < 0) {
		if (err->code == EEXIST)
			return err_set(err, EEXIST, "a snapshot named '%.100s' exists already", s->name);
		return -1;
	}
	return 0;
}

int pg_snapshot_get(struct store *st, const char *id, struct snapshot_rec *out, space_err *err)
{
	char ctx[96];

	memset(out, 0, sizeof(*out));
	snprintf(ctx, sizeof(ctx), "get snapshot %.64s", id);
	return pg_get_row(st, "SELECT " SNAP_COLS " FROM snapshots WHERE id = $1", id, out,
			  read_snapshot, err, ctx);
}

int pg_snapshot_get_by_name(struct store *st, const char *name, struct snapshot_rec *out,
			    space_err *err)
{
	char ctx[160];

	memset(out, 0, sizeof(*out));
	snprintf(ctx, sizeof(ctx), "get snapshot named %.128s", name);
	return pg_get_row(st, "SELECT " SNAP_COLS " FROM snapshots WHERE name = $1 AND kind = 'named'",
			  name, out, read_snapshot, err, ctx);
}

int pg_snapshot_each(struct store *st, unsigned kinds, int (*fn)(const struct snapshot_rec *, void *),
		     void *arg, space_err *err)
{
	static const char ctx[] = "list snapshots";
	_cleanup_params_ struct pg_params p = { 0 };
	_cleanup_pgvec_ struct pg_vec v = { .size = sizeof(struct snapshot_rec), .clear = clear_snapshot };

	pg_scope(&p, st);
	if (pg_query_all(st,
			 "SELECT " SNAP_COLS " FROM snapshots WHERE ($1::text = '' OR node_id = $1)"
			 " ORDER BY created_ms, seq",
			 &p, &v, read_snapshot, err, ctx) < 0)
		return -1;
	for (size_t i = 0; i < v.n; i++) {
		const struct snapshot_rec *s = pg_vec_at(&v, i);

		if (kinds && !(kinds & (1u << s->kind)))
			continue;
		if (fn(s, arg))
			break;
	}
	return 0;
}

int pg_snapshot_delete(struct store *st, const char *id, space_err *err)
{
	_cleanup_params_ struct pg_params p = { 0 };
	_cleanup_pgres_ PGresult *r = NULL;
	char ctx[96];

	snprintf(ctx, sizeof(ctx), "delete snapshot %.64s", id);
	pg_text(&p, id);
	if (pg_exec(st, "DELETE FROM snapshots WHERE id = $1", &p, &r, err, ctx) < 0)
		return -1;
	if (pg_changes(r) == 0)
		return err_set(err, ENOENT, "store: %s: not found", ctx);
	return 0;
}
