/* store_sqlite_kv.c -- the SQLite back end's small key/value table (host facts, the api key) */
#include <stdio.h>
#include <string.h>

#include "store_sql.h"

int sq_kv_get(struct store *st, const char *key, char *out, size_t outlen, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	char ctx[160];
	const char *v;
	size_t n;
	int rc;

	snprintf(ctx, sizeof(ctx), "get key %.128s", key);
	if (sq_prepare(st, &s, "SELECT value FROM kv WHERE key = ?1", err, ctx) < 0)
		return -1;
	sq_bind_text(s, 1, key);
	rc = sqlite3_step(s);
	if (rc == SQLITE_DONE)
		return err_set(err, ENOENT, "store: %s: not found", ctx);
	if (rc != SQLITE_ROW)
		return sq_fail(st, err, ctx);
	v = (const char *)sqlite3_column_text(s, 0);
	n = v ? strlen(v) : 0;
	if (n >= outlen)
		return err_set(err, E2BIG, "store: %s: value of %zu bytes does not fit in %zu", ctx,
			       n, outlen);
	memcpy(out, v ? v : "", n + 1);
	return 0;
}

int sq_kv_set(struct store *st, const char *key, const char *value, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	char ctx[160];

	snprintf(ctx, sizeof(ctx), "set key %.128s", key);
	if (sq_prepare(st, &s,
			  "INSERT INTO kv (key, value) VALUES (?1, ?2)"
			  " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
			  err, ctx) < 0)
		return -1;
	if (sq_bind_text(s, 1, key) || sq_bind_text(s, 2, value))
		return sq_fail(st, err, ctx);
	return sq_step_done(st, s, err, ctx);
}
