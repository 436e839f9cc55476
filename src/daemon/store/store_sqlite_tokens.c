/* store_sqlite_tokens.c -- data-plane tokens whose scope is not one session (schema v5): only their
 * SHA-256 is kept, with the sandbox and scope they open and when they expire */
#include <stdio.h>
#include <string.h>

#include "store_sql.h"

int sq_token_put(struct store *st, const char *hash, const char *sandbox_id, const char *scope,
		    int64_t expires_ms, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	static const char ctx[] = "put token";

	if (sq_prepare(st, &s, "INSERT INTO tokens (hash, sandbox_id, scope, expires_ms) VALUES (?1, ?2, ?3, ?4)",
			  err, ctx) < 0)
		return -1;
	if (sq_bind_text(s, 1, hash) || sq_bind_text(s, 2, sandbox_id) || sq_bind_text(s, 3, scope) ||
	    sqlite3_bind_int64(s, 4, expires_ms))
		return sq_fail(st, err, ctx);
	return sq_step_done(st, s, err, ctx);
}

int sq_token_get(struct store *st, const char *hash, char sandbox_id[ID_LEN], char *scope, size_t scope_len,
		    int64_t *expires_ms, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	static const char ctx[] = "get token";
	int rc;

	if (sq_prepare(st, &s, "SELECT sandbox_id, scope, expires_ms FROM tokens WHERE hash = ?1", err, ctx) < 0)
		return -1;
	if (sq_bind_text(s, 1, hash))
		return sq_fail(st, err, ctx);
	rc = sqlite3_step(s);
	if (rc == SQLITE_DONE)
		return err_set(err, ENOENT, "no such token");
	if (rc != SQLITE_ROW)
		return sq_fail(st, err, ctx);
	sq_col_str(s, 0, sandbox_id, ID_LEN);
	sq_col_str(s, 1, scope, scope_len);
	*expires_ms = sqlite3_column_int64(s, 2);
	return 0;
}

int sq_tokens_prune(struct store *st, const char *sandbox_id, int64_t now, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	static const char ctx[] = "prune tokens";

	if (sq_prepare(st, &s,
			  sandbox_id ? "DELETE FROM tokens WHERE sandbox_id = ?1 OR expires_ms <= ?2"
				     : "DELETE FROM tokens WHERE expires_ms <= ?2",
			  err, ctx) < 0)
		return -1;
	if ((sandbox_id && sq_bind_text(s, 1, sandbox_id)) || sqlite3_bind_int64(s, 2, now))
		return sq_fail(st, err, ctx);
	return sq_step_done(st, s, err, ctx);
}

int sq_tokens_each(struct store *st, const char *sandbox_id, store_token_fn fn, void *arg, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	static const char ctx[] = "list tokens";
	char hash[65], scope[64];
	int rc;

	if (sq_prepare(st, &s, "SELECT hash, scope, expires_ms FROM tokens WHERE sandbox_id = ?1", err, ctx) < 0)
		return -1;
	if (sq_bind_text(s, 1, sandbox_id))
		return sq_fail(st, err, ctx);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		int r;

		sq_col_str(s, 0, hash, sizeof(hash));
		sq_col_str(s, 1, scope, sizeof(scope));
		if ((r = fn(hash, scope, sqlite3_column_int64(s, 2), arg)) != 0)
			return r;
	}
	if (rc != SQLITE_DONE)
		return sq_fail(st, err, ctx);
	return 0;
}

int sq_token_delete(struct store *st, const char *hash, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	static const char ctx[] = "delete token";

	if (sq_prepare(st, &s, "DELETE FROM tokens WHERE hash = ?1", err, ctx) < 0)
		return -1;
	if (sq_bind_text(s, 1, hash))
		return sq_fail(st, err, ctx);
	if (sq_step_done(st, s, err, ctx) < 0)
		return -1;
	if (sqlite3_changes(sq_db(st)) == 0)
		return err_set(err, ENOENT, "store: %s: not found", ctx);
	return 0;
}
