/* store_pg_records.c -- operations and sessions in the PostgreSQL store */
#include "store_pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- operations ---- */

#define OP_COLS "id, kind, sandbox_id, state, error, created_ms, updated_ms, result"

static int read_op(const PGresult *r, int i, void *rec, space_err *err, const char *ctx)
{
	struct op_rec *o = rec;
	int kind = 0, state = 0;

	memset(o, 0, sizeof(*o));
	pg_copy(r, i, 0, o->id, sizeof(o->id));
	if (pg_col_enum(r, i, 1, op_kind_parse, &kind, err, ctx) < 0 ||
	    pg_col_enum(r, i, 3, op_state_parse, &state, err, ctx) < 0)
		return -1;
	o->kind = (enum op_kind)kind;
	o->state = (enum op_state)state;
	pg_copy(r, i, 2, o->sandbox_id, sizeof(o->sandbox_id));
	pg_copy(r, i, 4, o->error, sizeof(o->error));
	o->created_ms = pg_i64(r, i, 5);
	o->updated_ms = pg_i64(r, i, 6);
	/* result is any JSON value or NULL: no shape to check here */
	return pg_col_any_json(r, i, 7, &o->result, err, ctx);
}

static void clear_op(void *rec)
{
	op_rec_clear(rec);
}

static int check_op(const struct op_rec *op, space_err *err, const char *ctx)
{
	if ((unsigned)op->state >= OP__COUNT || (unsigned)op->kind >= OPK__COUNT)
		return err_set(err, EINVAL, "store: %s: bad state %d or kind %d", ctx, (int)op->state,
			       (int)op->kind);
	return 0;
}

/* An op record carries no node: a scoped put stamps the scope, an unscoped one keeps the
 * row's owner on update (an api process failing an op does not take it from its node). */
static const char op_upsert[] =
	"INSERT INTO operations (" OP_COLS ", node_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
	" ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, sandbox_id = excluded.sandbox_id,"
	" state = excluded.state, error = excluded.error, created_ms = excluded.created_ms,"
	" updated_ms = excluded.updated_ms, result = excluded.result,"
	" node_id = CASE WHEN excluded.node_id = '' THEN operations.node_id"
	" ELSE excluded.node_id END";

static void op_params(struct pg_params *p, const struct op_rec *op, const char *node_id)
{
	pg_text(p, op->id);
	pg_text(p, op_kind_name(op->kind));
	pg_text(p, op->sandbox_id);
	pg_text(p, op_state_name(op->state));
	pg_text(p, op->error);
	pg_int(p, op->created_ms);
	pg_int(p, op->updated_ms);
	pg_json(p, op->result);
	pg_text(p, node_id);
}

int pg_op_write(struct pg_tx *tx, const struct op_rec *op, const char *node_id, space_err *err,
		const char *ctx)
{
	_cleanup_params_ struct pg_params p = { 0 };

	if (check_op(op, err, ctx) < 0)
		return -1;
	op_params(&p, op, node_id);
	return pg_exec_tx(tx, op_upsert, &p, NULL, err, ctx);
}

int pg_op_put(struct store *st, const struct op_rec *op, space_err *err)
{
	_cleanup_params_ struct pg_params p = { 0 };
	char ctx[96];

	snprintf(ctx, sizeof(ctx), "put operation %s", op->id);
	if (check_op(op, err, ctx) < 0)
		return -1;
	op_params(&p, op, st->node);
	return pg_exec(st, op_upsert, &p, NULL, err, ctx);
}

int pg_op_get(struct store *st, const char *id, struct op_rec *out, space_err *err)
{
	char ctx[96];

	memset(out, 0, sizeof(*out));
	snprintf(ctx, sizeof(ctx), "get operation %.64s", id);
	return pg_get_row(st, "SELECT " OP_COLS " FROM operations WHERE id = $1", id, out, read_op,
			  err, ctx);
}

int pg_op_each_open(struct store *st, int (*fn)(const struct op_rec *, void *), void *arg,
		    space_err *err)
{
	static const char ctx[] = "list open operations";
	_cleanup_params_ struct pg_params p = { 0 };
	_cleanup_pgvec_ struct pg_vec v = { .size = sizeof(struct op_rec), .clear = clear_op };

	pg_text(&p, op_state_name(OP_PENDING));
	pg_text(&p, op_state_name(OP_RUNNING));
	pg_scope(&p, st);
	if (pg_query_all(st,
			 "SELECT " OP_COLS " FROM operations WHERE state IN ($1, $2)"
			 " AND ($3::text = '' OR node_id = $3) ORDER BY created_ms, seq",
			 &p, &v, read_op, err, ctx) < 0)
		return -1;
	for (size_t i = 0; i < v.n; i++)
		if (fn(pg_vec_at(&v, i), arg))
			break;
	return 0;
}

/* ---- sessions ---- */

#define SESS_COLS                                                                           \
	"id, sandbox_id, chan, argv, env, cwd, \"user\", stdin_open, state, pid, exit_code," \
	" exit_signal, error, token_hash, token_expires_ms, created_ms, started_ms, ended_ms," \
	" kind, pty_rows, pty_cols, tag"

static int read_session(const PGresult *r, int i, void *rec, space_err *err, const char *ctx)
{
	struct session_rec *s = rec;
	int state = 0, kind = 0;

	memset(s, 0, sizeof(*s));
	pg_copy(r, i, 0, s->id, sizeof(s->id));
	pg_copy(r, i, 1, s->sandbox_id, sizeof(s->sandbox_id));
	s->chan = (uint32_t)pg_i64(r, i, 2);
	pg_copy(r, i, 5, s->cwd, sizeof(s->cwd));
	pg_copy(r, i, 6, s->user, sizeof(s->user));
	s->stdin_open = pg_i64(r, i, 7) != 0;
	if (pg_col_enum(r, i, 8, sess_state_parse, &state, err, ctx) < 0 ||
	    pg_col_enum(r, i, 18, sess_kind_parse, &kind, err, ctx) < 0)
		return -1;
	s->state = (enum sess_state)state;
	s->kind = (enum sess_kind)kind;
	s->pid = (int)pg_i64(r, i, 9);
	s->exit_code = (int)pg_i64(r, i, 10);
	s->exit_signal = (int)pg_i64(r, i, 11);
	pg_copy(r, i, 12, s->error, sizeof(s->error));
	pg_copy(r, i, 13, s->token_hash, sizeof(s->token_hash));
	s->token_expires_ms = pg_i64(r, i, 14);
	s->created_ms = pg_i64(r, i, 15);
	s->started_ms = pg_i64(r, i, 16);
	s->ended_ms = pg_i64(r, i, 17);
	s->pty_rows = (uint16_t)pg_i64(r, i, 19);
	s->pty_cols = (uint16_t)pg_i64(r, i, 20);
	pg_copy(r, i, 21, s->tag, sizeof(s->tag));
	if (pg_col_json(r, i, 3, true, &s->argv, err, ctx) < 0 ||
	    pg_col_json(r, i, 4, false, &s->env, err, ctx) < 0) {
		session_rec_clear(s);
		return -1;
	}
	return 0;
}

static void clear_session(void *rec)
{
	session_rec_clear(rec);
}

int pg_session_put(struct store *st, const struct session_rec *s, space_err *err)
{
	_cleanup_params_ struct pg_params p = { 0 };
	char ctx[96];

	snprintf(ctx, sizeof(ctx), "put session %s", s->id);
	if ((unsigned)s->state >= SESS__COUNT || (unsigned)s->kind >= SESS_KIND__COUNT)
		return err_set(err, EINVAL, "store: %s: bad state %d", ctx, (int)s->state);
	pg_text(&p, s->id);
	pg_text(&p, s->sandbox_id);
	pg_int(&p, s->chan);
	pg_json(&p, s->argv);
	pg_json(&p, s->env);
	pg_text(&p, s->cwd);
	pg_text(&p, s->user);
	pg_int(&p, s->stdin_open);
	pg_text(&p, sess_state_name(s->state));
	pg_int(&p, s->pid);
	pg_int(&p, s->exit_code);
	pg_int(&p, s->exit_signal);
	pg_text(&p, s->error);
	pg_text(&p, s->token_hash);
	pg_int(&p, s->token_expires_ms);
	pg_int(&p, s->created_ms);
	pg_int(&p, s->started_ms);
	pg_int(&p, s->ended_ms);
	pg_text(&p, sess_kind_name(s->kind));
	pg_int(&p, s->pty_rows);
	pg_int(&p, s->pty_cols);
	pg_text(&p, s->tag);
	return pg_exec(st,
		       "INSERT INTO sessions (" SESS_COLS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8,"
		       " $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22)"
		       " ON CONFLICT (id) DO UPDATE SET (" SESS_COLS ") = (excluded.id,"
		       " excluded.sandbox_id, excluded.chan, excluded.argv, excluded.env,"
		       " excluded.cwd, excluded.\"user\", excluded.stdin_open, excluded.state,"
		       " excluded.pid, excluded.exit_code, excluded.exit_signal, excluded.error,"
		       " excluded.token_hash, excluded.token_expires_ms, excluded.created_ms,"
		       " excluded.started_ms, excluded.ended_ms, excluded.kind, excluded.pty_rows,"
		       " excluded.pty_cols, excluded.tag)",
		       &p, NULL, err, ctx);
}

int pg_session_get(struct store *st, const char *id, struct session_rec *out, space_err *err)
{
	char ctx[96];

	memset(out, 0, sizeof(*out));
	snprintf(ctx, sizeof(ctx), "get session %.64s", id);
	return pg_get_row(st, "SELECT " SESS_COLS " FROM sessions WHERE id = $1", id, out,
			  read_session, err, ctx);
}

int pg_session_each(struct store *st, const char *sandbox_id,
		    int (*fn)(const struct session_rec *, void *), void *arg, space_err *err)
{
	static const char ctx[] = "list sessions";
	_cleanup_params_ struct pg_params p = { 0 };
	_cleanup_pgvec_ struct pg_vec v = { .size = sizeof(struct session_rec), .clear = clear_session };

	const char *sql;

	/* one sandbox's sessions; or (NULL) all of them, with a scope its sandboxes' ones */
	if (sandbox_id) {
		pg_text(&p, sandbox_id);
		sql = "SELECT " SESS_COLS " FROM sessions WHERE sandbox_id = $1 ORDER BY created_ms, seq";
	} else if (st->node[0]) {
		pg_scope(&p, st);
		sql = "SELECT " SESS_COLS " FROM sessions WHERE sandbox_id IN"
		      " (SELECT id FROM sandboxes WHERE node_id = $1) ORDER BY created_ms, seq";
	} else {
		sql = "SELECT " SESS_COLS " FROM sessions ORDER BY created_ms, seq";
	}
	if (pg_query_all(st, sql, &p, &v, read_session, err, ctx) < 0)
		return -1;
	for (size_t i = 0; i < v.n; i++)
		if (fn(pg_vec_at(&v, i), arg))
			break;
	return 0;
}
