/* store_sqlite_records.c -- sandboxes, operations and sessions in the SQLite back end */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_sql.h"

/* ---- sandboxes ---- */

/* The columns a put writes, in the order of its parameters ?1..?26 (?27 is node_id). */
#define SB_COLS                                                                         \
	"id, state, template_ref, template_digest, vcpus, memory_mib, env, metadata,"   \
	" timeout_s, created_ms, updated_ms, expires_ms, pid, pid_start, next_chan, error," \
	" disk, parent_id, snapshot_id, source_snapshot, start_kind, on_timeout, role, prev_state," \
	" jail_uid, network"
/* What a read returns: those, then node_id (26) and generation (27). */
#define SB_READ_COLS SB_COLS ", node_id, generation"
const char sq_sandbox_cols[] = SB_READ_COLS;

/* Every written column but id, from the parameters SB_COLS binds. */
#define SB_SET                                                                                \
	"state = ?2, template_ref = ?3, template_digest = ?4, vcpus = ?5, memory_mib = ?6,"   \
	" env = ?7, metadata = ?8, timeout_s = ?9, created_ms = ?10, updated_ms = ?11,"       \
	" expires_ms = ?12, pid = ?13, pid_start = ?14, next_chan = ?15, error = ?16,"        \
	" disk = ?17, parent_id = ?18, snapshot_id = ?19, source_snapshot = ?20,"             \
	" start_kind = ?21, on_timeout = ?22, role = ?23, prev_state = ?24, jail_uid = ?25,"  \
	" network = ?26, node_id = ?27"

/* The fence of a scoped store (store_set_node): ?28 is the scope, '' = none. */
#define SB_FENCE "(?28 = '' OR (sandboxes.node_id = ?28 AND sandboxes.state <> 'lost'))"

/* A name column parsed with parse(); unknown names are EIO. */
#define COL_ENUM(st_, i, parse, out)                                     \
	do {                                                             \
		int v_ = 0;                                              \
		if (sq_col_state(st_, i, parse, &v_, err, ctx) < 0)   \
			return -1;                                       \
		(out) = v_;                                              \
	} while (0)

int sq_read_sandbox(sqlite3_stmt *s, void *rec, space_err *err, const char *ctx)
{
	struct sandbox_rec *r = rec;

	memset(r, 0, sizeof(*r));
	sq_col_str(s, 0, r->id, sizeof(r->id));
	COL_ENUM(s, 1, sb_state_parse, r->state);
	sq_col_str(s, 2, r->template_ref, sizeof(r->template_ref));
	sq_col_str(s, 3, r->template_digest, sizeof(r->template_digest));
	r->vcpus = sqlite3_column_int(s, 4);
	r->memory_mib = sqlite3_column_int(s, 5);
	r->timeout_s = sqlite3_column_int64(s, 8);
	r->created_ms = sqlite3_column_int64(s, 9);
	r->updated_ms = sqlite3_column_int64(s, 10);
	r->expires_ms = sqlite3_column_int64(s, 11);
	r->pid = sqlite3_column_int(s, 12);
	r->pid_start = (uint64_t)sqlite3_column_int64(s, 13);
	r->next_chan = (uint32_t)sqlite3_column_int64(s, 14);
	sq_col_str(s, 15, r->error, sizeof(r->error));
	sq_col_str(s, 16, r->disk, sizeof(r->disk));
	sq_col_str(s, 17, r->parent_id, sizeof(r->parent_id));
	sq_col_str(s, 18, r->snapshot_id, sizeof(r->snapshot_id));
	sq_col_str(s, 19, r->source_snapshot, sizeof(r->source_snapshot));
	COL_ENUM(s, 20, start_kind_parse, r->start_kind);
	COL_ENUM(s, 21, on_timeout_parse, r->on_timeout);
	COL_ENUM(s, 22, sb_role_parse, r->role);
	COL_ENUM(s, 23, sb_state_parse, r->prev_state);
	r->jail_uid = (uint32_t)sqlite3_column_int64(s, 24);
	sq_col_str(s, 26, r->node_id, sizeof(r->node_id));
	r->generation = sqlite3_column_int64(s, 27);
	if (sq_col_json(s, 6, false, &r->env, err, ctx) < 0 ||
	    sq_col_json(s, 7, false, &r->metadata, err, ctx) < 0 ||
	    sq_col_json(s, 25, false, &r->network, err, ctx) < 0) {
		sandbox_rec_clear(r);
		return -1;
	}
	return 0;
}

void sq_clear_sandbox(void *rec)
{
	sandbox_rec_clear(rec);
}

static int check_sandbox(const struct sandbox_rec *r, space_err *err, const char *ctx)
{
	if ((unsigned)r->state >= SB__COUNT || (unsigned)r->prev_state >= SB__COUNT ||
	    (unsigned)r->start_kind >= START__COUNT || (unsigned)r->on_timeout >= ON_TIMEOUT__COUNT ||
	    (unsigned)r->role >= ROLE__COUNT)
		return err_set(err, EINVAL, "store: %s: a state or kind is out of range", ctx);
	return 0;
}

/* Binds ?1..?26 (SB_COLS), ?27 (node_id: the scope's, when there is one) and ?28 (the scope). */
static int bind_sandbox(struct store *st, sqlite3_stmt *s, const struct sandbox_rec *r)
{
	const char *node = sq_scope(st)[0] ? sq_scope(st) : r->node_id;

	return sq_bind_text(s, 1, r->id) || sq_bind_text(s, 2, sb_state_name(r->state)) ||
	       sq_bind_text(s, 3, r->template_ref) || sq_bind_text(s, 4, r->template_digest) ||
	       sqlite3_bind_int(s, 5, r->vcpus) || sqlite3_bind_int(s, 6, r->memory_mib) ||
	       sq_bind_json(s, 7, r->env) || sq_bind_json(s, 8, r->metadata) ||
	       sqlite3_bind_int64(s, 9, r->timeout_s) || sqlite3_bind_int64(s, 10, r->created_ms) ||
	       sqlite3_bind_int64(s, 11, r->updated_ms) || sqlite3_bind_int64(s, 12, r->expires_ms) ||
	       sqlite3_bind_int(s, 13, r->pid) || sqlite3_bind_int64(s, 14, (int64_t)r->pid_start) ||
	       sqlite3_bind_int64(s, 15, r->next_chan) || sq_bind_text(s, 16, r->error) ||
	       sq_bind_text(s, 17, r->disk) || sq_bind_text(s, 18, r->parent_id) ||
	       sq_bind_text(s, 19, r->snapshot_id) || sq_bind_text(s, 20, r->source_snapshot) ||
	       sq_bind_text(s, 21, start_kind_name(r->start_kind)) ||
	       sq_bind_text(s, 22, on_timeout_name(r->on_timeout)) ||
	       sq_bind_text(s, 23, sb_role_name(r->role)) ||
	       sq_bind_text(s, 24, sb_state_name(r->prev_state)) ||
	       sqlite3_bind_int64(s, 25, (int64_t)r->jail_uid) || sq_bind_json(s, 26, r->network) ||
	       sq_bind_text(s, 27, node) || sq_bind_text(s, 28, sq_scope(st));
}

/* Steps a write that returns the row's generation: 1 when it did, 0 when the condition left
 * the row alone, -1 on error. */
static int step_generation(struct store *st, sqlite3_stmt *s, int64_t *gen, space_err *err,
			   const char *ctx)
{
	int rc = sqlite3_step(s);

	if (rc == SQLITE_DONE)
		return 0;
	if (rc != SQLITE_ROW)
		return sq_fail(st, err, ctx);
	if (gen)
		*gen = sqlite3_column_int64(s, 0);
	if (sqlite3_step(s) != SQLITE_DONE)
		return sq_fail(st, err, ctx);
	return 1;
}

static int stale(struct store *st, space_err *err, const char *ctx)
{
	if (sq_scope(st)[0])
		return err_set(err, ESTALE,
			       "store: %s: the row changed under us (another writer, or it no longer"
			       " belongs to node %s)",
			       ctx, sq_scope(st));
	return err_set(err, ESTALE, "store: %s: the row changed under us (another writer)", ctx);
}

int sq_sandbox_put(struct store *st, const struct sandbox_rec *r, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	char ctx[96];
	int rc;

	snprintf(ctx, sizeof(ctx), "put sandbox %s", r->id);
	if (check_sandbox(r, err, ctx) < 0)
		return -1;
	/* Without a scope ?28 is '' and the fence always holds. */
	if (sq_prepare(st, &s,
		       "INSERT INTO sandboxes (" SB_COLS ", node_id, generation)"
		       " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,"
		       " ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, 1)"
		       " ON CONFLICT (id) DO UPDATE SET " SB_SET ", generation = generation + 1"
		       " WHERE " SB_FENCE " RETURNING generation",
		       err, ctx) < 0)
		return -1;
	if (bind_sandbox(st, s, r))
		return sq_fail(st, err, ctx);
	if ((rc = step_generation(st, s, NULL, err, ctx)) < 0)
		return -1;
	return rc ? 0 : stale(st, err, ctx);
}

static int sandbox_exists(struct store *st, const char *id, space_err *err, const char *ctx)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	int rc;

	if (sq_prepare(st, &s, "SELECT 1 FROM sandboxes WHERE id = ?1", err, ctx) < 0)
		return -1;
	if (sq_bind_text(s, 1, id))
		return sq_fail(st, err, ctx);
	rc = sqlite3_step(s);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return sq_fail(st, err, ctx);
	return rc == SQLITE_ROW;
}

int sq_sandbox_put_if(struct store *st, const struct sandbox_rec *r, int64_t generation,
		      int64_t *new_generation, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	char ctx[96];
	int rc;

	snprintf(ctx, sizeof(ctx), "put sandbox %s if at generation %lld", r->id,
		 (long long)generation);
	if (check_sandbox(r, err, ctx) < 0)
		return -1;
	if (sq_prepare(st, &s,
		       "UPDATE sandboxes SET " SB_SET ", generation = generation + 1"
		       " WHERE id = ?1 AND generation = ?29 AND " SB_FENCE " RETURNING generation",
		       err, ctx) < 0)
		return -1;
	if (bind_sandbox(st, s, r) || sqlite3_bind_int64(s, 29, generation))
		return sq_fail(st, err, ctx);
	if ((rc = step_generation(st, s, new_generation, err, ctx)) != 0)
		return rc < 0 ? -1 : 0;
	if ((rc = sandbox_exists(st, r->id, err, ctx)) < 0)
		return -1;
	if (!rc)
		return err_set(err, ENOENT, "store: %s: not found", ctx);
	return stale(st, err, ctx);
}

int sq_sandbox_insert(struct store *st, const struct sandbox_rec *r, const json_t *intent,
		      space_err *err, const char *ctx)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;

	if (check_sandbox(r, err, ctx) < 0)
		return -1;
	if (sq_prepare(st, &s,
		       "INSERT INTO sandboxes (" SB_COLS ", node_id, generation, intent)"
		       " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,"
		       " ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, 1, ?29)",
		       err, ctx) < 0)
		return -1;
	/* node_id as the record has it, scope or not (?28 goes unused) */
	if (bind_sandbox(st, s, r) || sq_bind_text(s, 27, r->node_id) || sq_bind_json(s, 29, intent))
		return sq_fail(st, err, ctx);
	if (sqlite3_step(s) != SQLITE_DONE) {
		if ((sqlite3_extended_errcode(sq_db(st)) & 0xff) == SQLITE_CONSTRAINT)
			return err_set(err, EEXIST, "store: %s: the sandbox exists already", ctx);
		return sq_fail(st, err, ctx);
	}
	return 0;
}

int sq_sandbox_get(struct store *st, const char *id, struct sandbox_rec *out, space_err *err)
{
	char ctx[96];

	memset(out, 0, sizeof(*out));
	snprintf(ctx, sizeof(ctx), "get sandbox %.64s", id);
	return sq_get_row(st, "SELECT " SB_READ_COLS " FROM sandboxes WHERE id = ?1", id, out,
			  sq_read_sandbox, err, ctx);
}

int sq_sandbox_each(struct store *st, unsigned states,
		       int (*fn)(const struct sandbox_rec *, void *), void *arg, space_err *err)
{
	static const char ctx[] = "list sandboxes";
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	_cleanup_vec_ struct sq_vec v = { .size = sizeof(struct sandbox_rec),
					  .clear = sq_clear_sandbox };
	json_t *names;
	int rc;

	if (states == 0)
		states = ((1u << SB__COUNT) - 1) & ~(1u << SB_DELETED);
	if (!(names = json_array()))
		return err_set(err, ENOMEM, "store: %s: out of memory", ctx);
	for (int i = 0; i < SB__COUNT; i++)
		if (states & (1u << i))
			json_array_append_new(names, json_string(sb_state_name((enum sb_state)i)));
	/* the wanted states travel as one bound JSON array; a scoped store sees its node's */
	rc = sq_prepare(st, &s,
			sq_scope(st)[0]
				? "SELECT " SB_READ_COLS " FROM sandboxes WHERE node_id = ?2 AND state IN"
				  " (SELECT value FROM json_each(?1)) ORDER BY created_ms, rowid"
				: "SELECT " SB_READ_COLS " FROM sandboxes WHERE state IN"
				  " (SELECT value FROM json_each(?1)) ORDER BY created_ms, rowid",
			err, ctx);
	if (rc == 0 && (sq_bind_json(s, 1, names) != SQLITE_OK ||
			(sq_scope(st)[0] && sq_bind_text(s, 2, sq_scope(st)) != SQLITE_OK)))
		rc = sq_fail(st, err, ctx);
	json_decref(names);
	if (rc < 0)
		return -1;
	if (sq_collect(st, s, &v, sq_read_sandbox, err, ctx) < 0)
		return -1;
	for (size_t i = 0; i < v.n; i++)
		if (fn(sq_vec_at(&v, i), arg))
			break;
	return 0;
}

/* ---- operations ---- */

#define OP_COLS "id, kind, sandbox_id, state, error, created_ms, updated_ms, result"

static int read_op(sqlite3_stmt *s, void *rec, space_err *err, const char *ctx)
{
	struct op_rec *r = rec;

	memset(r, 0, sizeof(*r));
	sq_col_str(s, 0, r->id, sizeof(r->id));
	COL_ENUM(s, 1, op_kind_parse, r->kind);
	sq_col_str(s, 2, r->sandbox_id, sizeof(r->sandbox_id));
	COL_ENUM(s, 3, op_state_parse, r->state);
	sq_col_str(s, 4, r->error, sizeof(r->error));
	r->created_ms = sqlite3_column_int64(s, 5);
	r->updated_ms = sqlite3_column_int64(s, 6);
	/* result is any JSON value or NULL: no shape to check here */
	if (sqlite3_column_type(s, 7) != SQLITE_NULL) {
		json_error_t jerr;

		r->result = json_loads((const char *)sqlite3_column_text(s, 7), JSON_DECODE_ANY, &jerr);
		if (!r->result)
			return err_set(err, EIO, "store: %s: column result holds bad JSON: %s", ctx,
				       jerr.text);
	}
	return 0;
}

static void clear_op(void *rec)
{
	op_rec_clear(rec);
}

int sq_op_put(struct store *st, const struct op_rec *op, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	char ctx[96];

	snprintf(ctx, sizeof(ctx), "put operation %s", op->id);
	if ((unsigned)op->state >= OP__COUNT || (unsigned)op->kind >= OPK__COUNT)
		return err_set(err, EINVAL, "store: %s: bad state %d or kind %d", ctx, (int)op->state,
			       (int)op->kind);
	if (sq_prepare(st, &s,
			  "INSERT INTO operations (" OP_COLS ", node_id)"
			  " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
			  " ON CONFLICT (id) DO UPDATE SET kind = excluded.kind,"
			  " sandbox_id = excluded.sandbox_id, state = excluded.state,"
			  " error = excluded.error, created_ms = excluded.created_ms,"
			  " updated_ms = excluded.updated_ms, result = excluded.result,"
			  /* a scope stamps its node; without one the row keeps the node it has */
			  " node_id = CASE WHEN ?9 = '' THEN operations.node_id ELSE ?9 END",
			  err, ctx) < 0)
		return -1;
	if (sq_bind_text(s, 1, op->id) || sq_bind_text(s, 2, op_kind_name(op->kind)) ||
	    sq_bind_text(s, 3, op->sandbox_id) ||
	    sq_bind_text(s, 4, op_state_name(op->state)) || sq_bind_text(s, 5, op->error) ||
	    sqlite3_bind_int64(s, 6, op->created_ms) || sqlite3_bind_int64(s, 7, op->updated_ms) ||
	    sq_bind_json(s, 8, op->result) || sq_bind_text(s, 9, sq_scope(st)))
		return sq_fail(st, err, ctx);
	return sq_step_done(st, s, err, ctx);
}

int sq_op_get(struct store *st, const char *id, struct op_rec *out, space_err *err)
{
	char ctx[96];

	memset(out, 0, sizeof(*out));
	snprintf(ctx, sizeof(ctx), "get operation %.64s", id);
	return sq_get_row(st, "SELECT " OP_COLS " FROM operations WHERE id = ?1", id, out,
			     read_op, err, ctx);
}

int sq_op_each_open(struct store *st, int (*fn)(const struct op_rec *, void *), void *arg,
		       space_err *err)
{
	static const char ctx[] = "list open operations";
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	_cleanup_vec_ struct sq_vec v = { .size = sizeof(struct op_rec), .clear = clear_op };

	if (sq_prepare(st, &s,
			  sq_scope(st)[0] ? "SELECT " OP_COLS " FROM operations WHERE node_id = ?3"
					    " AND state IN (?1, ?2) ORDER BY created_ms, rowid"
					  : "SELECT " OP_COLS " FROM operations WHERE state IN (?1, ?2)"
					    " ORDER BY created_ms, rowid",
			  err, ctx) < 0)
		return -1;
	if (sq_bind_text(s, 1, op_state_name(OP_PENDING)) ||
	    sq_bind_text(s, 2, op_state_name(OP_RUNNING)) ||
	    (sq_scope(st)[0] && sq_bind_text(s, 3, sq_scope(st))))
		return sq_fail(st, err, ctx);
	if (sq_collect(st, s, &v, read_op, err, ctx) < 0)
		return -1;
	for (size_t i = 0; i < v.n; i++)
		if (fn(sq_vec_at(&v, i), arg))
			break;
	return 0;
}

/* ---- sessions ---- */

#define SESS_COLS                                                                        \
	"id, sandbox_id, chan, argv, env, cwd, user, stdin_open, state, pid, exit_code," \
	" exit_signal, error, token_hash, token_expires_ms, created_ms, started_ms, ended_ms," \
	" kind, pty_rows, pty_cols, tag"
/* The same, of the table named q. */
#define SESS_COLS_Q                                                                           \
	"q.id, q.sandbox_id, q.chan, q.argv, q.env, q.cwd, q.user, q.stdin_open, q.state, q.pid," \
	" q.exit_code, q.exit_signal, q.error, q.token_hash, q.token_expires_ms, q.created_ms,"  \
	" q.started_ms, q.ended_ms, q.kind, q.pty_rows, q.pty_cols, q.tag"

static int read_session(sqlite3_stmt *s, void *rec, space_err *err, const char *ctx)
{
	struct session_rec *r = rec;
	int state = 0;

	memset(r, 0, sizeof(*r));
	sq_col_str(s, 0, r->id, sizeof(r->id));
	sq_col_str(s, 1, r->sandbox_id, sizeof(r->sandbox_id));
	r->chan = (uint32_t)sqlite3_column_int64(s, 2);
	sq_col_str(s, 5, r->cwd, sizeof(r->cwd));
	sq_col_str(s, 6, r->user, sizeof(r->user));
	r->stdin_open = sqlite3_column_int(s, 7) != 0;
	if (sq_col_state(s, 8, sess_state_parse, &state, err, ctx) < 0)
		return -1;
	r->state = (enum sess_state)state;
	r->pid = sqlite3_column_int(s, 9);
	r->exit_code = sqlite3_column_int(s, 10);
	r->exit_signal = sqlite3_column_int(s, 11);
	sq_col_str(s, 12, r->error, sizeof(r->error));
	sq_col_str(s, 13, r->token_hash, sizeof(r->token_hash));
	r->token_expires_ms = sqlite3_column_int64(s, 14);
	r->created_ms = sqlite3_column_int64(s, 15);
	r->started_ms = sqlite3_column_int64(s, 16);
	r->ended_ms = sqlite3_column_int64(s, 17);
	if (sq_col_state(s, 18, sess_kind_parse, &state, err, ctx) < 0)
		return -1;
	r->kind = (enum sess_kind)state;
	r->pty_rows = (uint16_t)sqlite3_column_int(s, 19);
	r->pty_cols = (uint16_t)sqlite3_column_int(s, 20);
	sq_col_str(s, 21, r->tag, sizeof(r->tag));
	if (sq_col_json(s, 3, true, &r->argv, err, ctx) < 0 ||
	    sq_col_json(s, 4, false, &r->env, err, ctx) < 0) {
		session_rec_clear(r);
		return -1;
	}
	return 0;
}

static void clear_session(void *rec)
{
	session_rec_clear(rec);
}

int sq_session_put(struct store *st, const struct session_rec *r, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	char ctx[96];

	snprintf(ctx, sizeof(ctx), "put session %s", r->id);
	if ((unsigned)r->state >= SESS__COUNT)
		return err_set(err, EINVAL, "store: %s: bad state %d", ctx, (int)r->state);
	if (sq_prepare(
		    st, &s,
		    "INSERT INTO sessions (" SESS_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8,"
		    " ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22)"
		    " ON CONFLICT (id) DO UPDATE SET sandbox_id = excluded.sandbox_id,"
		    " chan = excluded.chan, argv = excluded.argv, env = excluded.env,"
		    " cwd = excluded.cwd, user = excluded.user, stdin_open = excluded.stdin_open,"
		    " state = excluded.state, pid = excluded.pid, exit_code = excluded.exit_code,"
		    " exit_signal = excluded.exit_signal, error = excluded.error,"
		    " token_hash = excluded.token_hash,"
		    " token_expires_ms = excluded.token_expires_ms,"
		    " created_ms = excluded.created_ms, started_ms = excluded.started_ms,"
		    " ended_ms = excluded.ended_ms, kind = excluded.kind,"
		    " pty_rows = excluded.pty_rows, pty_cols = excluded.pty_cols, tag = excluded.tag",
		    err, ctx) < 0)
		return -1;
	if (sq_bind_text(s, 1, r->id) || sq_bind_text(s, 2, r->sandbox_id) ||
	    sqlite3_bind_int64(s, 3, r->chan) || sq_bind_json(s, 4, r->argv) ||
	    sq_bind_json(s, 5, r->env) || sq_bind_text(s, 6, r->cwd) ||
	    sq_bind_text(s, 7, r->user) || sqlite3_bind_int(s, 8, r->stdin_open) ||
	    sq_bind_text(s, 9, sess_state_name(r->state)) || sqlite3_bind_int(s, 10, r->pid) ||
	    sqlite3_bind_int(s, 11, r->exit_code) || sqlite3_bind_int(s, 12, r->exit_signal) ||
	    sq_bind_text(s, 13, r->error) || sq_bind_text(s, 14, r->token_hash) ||
	    sqlite3_bind_int64(s, 15, r->token_expires_ms) ||
	    sqlite3_bind_int64(s, 16, r->created_ms) || sqlite3_bind_int64(s, 17, r->started_ms) ||
	    sqlite3_bind_int64(s, 18, r->ended_ms) || sq_bind_text(s, 19, sess_kind_name(r->kind)) ||
	    sqlite3_bind_int(s, 20, r->pty_rows) || sqlite3_bind_int(s, 21, r->pty_cols) || sq_bind_text(s, 22, r->tag))
		return sq_fail(st, err, ctx);
	return sq_step_done(st, s, err, ctx);
}

int sq_session_get(struct store *st, const char *id, struct session_rec *out, space_err *err)
{
	char ctx[96];

	memset(out, 0, sizeof(*out));
	snprintf(ctx, sizeof(ctx), "get session %.64s", id);
	return sq_get_row(st, "SELECT " SESS_COLS " FROM sessions WHERE id = ?1", id, out,
			     read_session, err, ctx);
}

int sq_session_each(struct store *st, const char *sandbox_id,
		       int (*fn)(const struct session_rec *, void *), void *arg, space_err *err)
{
	static const char ctx[] = "list sessions";
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	_cleanup_vec_ struct sq_vec v = { .size = sizeof(struct session_rec),
					     .clear = clear_session };

	if (sq_prepare(st, &s,
			  sandbox_id ? "SELECT " SESS_COLS " FROM sessions WHERE sandbox_id = ?1"
				       " ORDER BY created_ms, rowid"
			  : sq_scope(st)[0]
				  /* a scoped store: the sessions of its node's sandboxes */
				  ? "SELECT " SESS_COLS_Q " FROM sessions q JOIN sandboxes b"
				    " ON b.id = q.sandbox_id WHERE b.node_id = ?2"
				    " ORDER BY q.created_ms, q.rowid"
				  : "SELECT " SESS_COLS " FROM sessions ORDER BY created_ms, rowid",
			  err, ctx) < 0)
		return -1;
	if (sandbox_id ? sq_bind_text(s, 1, sandbox_id)
		       : sq_scope(st)[0] && sq_bind_text(s, 2, sq_scope(st)))
		return sq_fail(st, err, ctx);
	if (sq_collect(st, s, &v, read_session, err, ctx) < 0)
		return -1;
	for (size_t i = 0; i < v.n; i++)
		if (fn(sq_vec_at(&v, i), arg))
			break;
	return 0;
}
