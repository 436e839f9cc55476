/* store_sqlite_snapshots.c -- snapshots (ready, named, suspend, fork) in the SQLite back end */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_sql.h"

#define SNAP_COLS                                                                         \
	"id, kind, state, name, sandbox_id, template_ref, template_digest, vcpus, memory_mib," \
	" env, next_chan, dir, disk, bytes, created_ms, error, net"

static int read_snapshot(sqlite3_stmt *s, void *rec, space_err *err, const char *ctx)
{
	struct snapshot_rec *r = rec;
	int kind = 0, state = 0;

	memset(r, 0, sizeof(*r));
	sq_col_str(s, 0, r->id, sizeof(r->id));
	if (sq_col_state(s, 1, snap_kind_parse, &kind, err, ctx) < 0 ||
	    sq_col_state(s, 2, snap_state_parse, &state, err, ctx) < 0)
		return -1;
	r->kind = (enum snap_kind)kind;
	r->state = (enum snap_state)state;
	sq_col_str(s, 3, r->name, sizeof(r->name));
	sq_col_str(s, 4, r->sandbox_id, sizeof(r->sandbox_id));
	sq_col_str(s, 5, r->template_ref, sizeof(r->template_ref));
	sq_col_str(s, 6, r->template_digest, sizeof(r->template_digest));
	r->vcpus = sqlite3_column_int(s, 7);
	r->memory_mib = sqlite3_column_int(s, 8);
	r->next_chan = (uint32_t)sqlite3_column_int64(s, 10);
	sq_col_str(s, 11, r->dir, sizeof(r->dir));
	sq_col_str(s, 12, r->disk, sizeof(r->disk));
	r->bytes = sqlite3_column_int64(s, 13);
	r->created_ms = sqlite3_column_int64(s, 14);
	sq_col_str(s, 15, r->error, sizeof(r->error));
	r->net = sqlite3_column_int(s, 16) != 0;
	return sq_col_json(s, 9, false, &r->env, err, ctx);
}

static void clear_snapshot(void *rec)
{
	snapshot_rec_clear(rec);
}

int sq_snapshot_put(struct store *st, const struct snapshot_rec *r, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	char ctx[96];

	snprintf(ctx, sizeof(ctx), "put snapshot %s", r->id);
	if ((unsigned)r->kind >= SNAP__COUNT || (unsigned)r->state >= SNAPS__COUNT)
		return err_set(err, EINVAL, "store: %s: bad kind %d or state %d", ctx, (int)r->kind,
			       (int)r->state);
	if (sq_prepare(st, &s,
			  "INSERT INTO snapshots (" SNAP_COLS ", node_id) VALUES (?1, ?2, ?3, ?4, ?5,"
			  " ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)"
			  " ON CONFLICT (id) DO UPDATE SET kind = excluded.kind,"
			  " state = excluded.state, name = excluded.name,"
			  " sandbox_id = excluded.sandbox_id, template_ref = excluded.template_ref,"
			  " template_digest = excluded.template_digest, vcpus = excluded.vcpus,"
			  " memory_mib = excluded.memory_mib, env = excluded.env,"
			  " next_chan = excluded.next_chan, dir = excluded.dir, disk = excluded.disk,"
			  " bytes = excluded.bytes, created_ms = excluded.created_ms,"
			  " error = excluded.error, net = excluded.net,"
			  /* a scope stamps its node; without one the row keeps the node it has */
			  " node_id = CASE WHEN ?18 = '' THEN snapshots.node_id ELSE ?18 END",
			  err, ctx) < 0)
		return -1;
	if (sq_bind_text(s, 1, r->id) || sq_bind_text(s, 2, snap_kind_name(r->kind)) ||
	    sq_bind_text(s, 3, snap_state_name(r->state)) || sq_bind_text(s, 4, r->name) ||
	    sq_bind_text(s, 5, r->sandbox_id) || sq_bind_text(s, 6, r->template_ref) ||
	    sq_bind_text(s, 7, r->template_digest) || sqlite3_bind_int(s, 8, r->vcpus) ||
	    sqlite3_bind_int(s, 9, r->memory_mib) || sq_bind_json(s, 10, r->env) ||
	    sqlite3_bind_int64(s, 11, r->next_chan) || sq_bind_text(s, 12, r->dir) ||
	    sq_bind_text(s, 13, r->disk) || sqlite3_bind_int64(s, 14, r->bytes) ||
	    sqlite3_bind_int64(s, 15, r->created_ms) || sq_bind_text(s, 16, r->error) ||
	    sqlite3_bind_int(s, 17, r->net) || sq_bind_text(s, 18, sq_scope(st)))
		return sq_fail(st, err, ctx);
	if (sqlite3_step(s) != SQLITE_DONE) {
		if ((sqlite3_extended_errcode(sq_db(st)) & 0xff) == SQLITE_CONSTRAINT)
			return err_set(err, EEXIST, "a snapshot named '%.100s' exists already", r->name);
		return sq_fail(st, err, ctx);
	}
	return 0;
}

int sq_snapshot_get(struct store *st, const char *id, struct snapshot_rec *out, space_err *err)
{
	char ctx[96];

	memset(out, 0, sizeof(*out));
	snprintf(ctx, sizeof(ctx), "get snapshot %.64s", id);
	return sq_get_row(st, "SELECT " SNAP_COLS " FROM snapshots WHERE id = ?1", id, out,
			     read_snapshot, err, ctx);
}

int sq_snapshot_get_by_name(struct store *st, const char *name, struct snapshot_rec *out,
			       space_err *err)
{
	char ctx[160];

	memset(out, 0, sizeof(*out));
	snprintf(ctx, sizeof(ctx), "get snapshot named %.128s", name);
	return sq_get_row(st, "SELECT " SNAP_COLS " FROM snapshots WHERE name = ?1 AND kind = 'named'",
			     name, out, read_snapshot, err, ctx);
}

int sq_snapshot_each(struct store *st, unsigned kinds, int (*fn)(const struct snapshot_rec *, void *),
			void *arg, space_err *err)
{
	static const char ctx[] = "list snapshots";
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	_cleanup_vec_ struct sq_vec v = { .size = sizeof(struct snapshot_rec),
					     .clear = clear_snapshot };

	if (sq_prepare(st, &s,
		       sq_scope(st)[0] ? "SELECT " SNAP_COLS " FROM snapshots WHERE node_id = ?1"
					 " ORDER BY created_ms, rowid"
				       : "SELECT " SNAP_COLS " FROM snapshots ORDER BY created_ms, rowid",
		       err, ctx) < 0)
		return -1;
	if (sq_scope(st)[0] && sq_bind_text(s, 1, sq_scope(st)))
		return sq_fail(st, err, ctx);
	if (sq_collect(st, s, &v, read_snapshot, err, ctx) < 0)
		return -1;
	for (size_t i = 0; i < v.n; i++) {
		const struct snapshot_rec *r = sq_vec_at(&v, i);

		if (kinds && !(kinds & (1u << r->kind)))
			continue;
		if (fn(r, arg))
			break;
	}
	return 0;
}

int sq_snapshot_delete(struct store *st, const char *id, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	char ctx[96];

	snprintf(ctx, sizeof(ctx), "delete snapshot %.64s", id);
	if (sq_prepare(st, &s, "DELETE FROM snapshots WHERE id = ?1", err, ctx) < 0)
		return -1;
	if (sq_bind_text(s, 1, id) != SQLITE_OK)
		return sq_fail(st, err, ctx);
	if (sq_step_done(st, s, err, ctx) < 0)
		return -1;
	if (sqlite3_changes(sq_db(st)) == 0)
		return err_set(err, ENOENT, "store: %s: not found", ctx);
	return 0;
}
