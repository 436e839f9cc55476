/* store_sqlite_secrets.c -- egress secrets in the SQLite back end: values kept for the
 * gateways, never listed */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_sql.h"

static void read_meta(sqlite3_stmt *s, struct secret_rec *r)
{
	memset(r, 0, sizeof(*r));
	sq_col_str(s, 0, r->name, sizeof(r->name));
	r->created_ms = sqlite3_column_int64(s, 1);
	r->updated_ms = sqlite3_column_int64(s, 2);
	sq_col_str(s, 3, r->hosts, sizeof(r->hosts));
}

int sq_secret_put(struct store *st, const char *name, const char *value, const char *hosts,
		  struct secret_rec *out, bool *created, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	char ctx[128];
	int64_t now = now_ms();

	snprintf(ctx, sizeof(ctx), "put secret %.72s", name);
	_cleanup_stmt_ sqlite3_stmt *q = NULL;
	if (sq_prepare(st, &q, "SELECT 1 FROM secrets WHERE name = ?1", err, ctx) < 0)
		return -1;
	if (sq_bind_text(q, 1, name))
		return sq_fail(st, err, ctx);
	int rc = sqlite3_step(q);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return sq_fail(st, err, ctx);
	*created = rc == SQLITE_DONE;
	sqlite3_reset(q);
	if (sq_prepare(st, &s,
			  "INSERT INTO secrets (name, value, created_ms, updated_ms, hosts) VALUES (?1, ?2, ?3, ?3, ?4)"
			  " ON CONFLICT (name) DO UPDATE SET value = excluded.value,"
			  " updated_ms = excluded.updated_ms, hosts = excluded.hosts"
			  " RETURNING name, created_ms, updated_ms, hosts",
			  err, ctx) < 0)
		return -1;
	if (sq_bind_text(s, 1, name) || sq_bind_text(s, 2, value) || sqlite3_bind_int64(s, 3, now) ||
	    sq_bind_text(s, 4, hosts))
		return sq_fail(st, err, ctx);
	if (sqlite3_step(s) != SQLITE_ROW)
		return sq_fail(st, err, ctx);
	read_meta(s, out);
	if (sqlite3_step(s) != SQLITE_DONE)
		return sq_fail(st, err, ctx);
	return 0;
}

int sq_secret_get(struct store *st, const char *name, struct secret_rec *out, char **value, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	char ctx[128];
	int rc;

	memset(out, 0, sizeof(*out));
	if (value)
		*value = NULL;
	snprintf(ctx, sizeof(ctx), "get secret %.72s", name);
	if (sq_prepare(st, &s, "SELECT name, created_ms, updated_ms, hosts, value FROM secrets WHERE name = ?1", err,
			  ctx) < 0)
		return -1;
	if (sq_bind_text(s, 1, name))
		return sq_fail(st, err, ctx);
	rc = sqlite3_step(s);
	if (rc == SQLITE_DONE)
		return err_set(err, ENOENT, "no secret '%.72s'", name);
	if (rc != SQLITE_ROW)
		return sq_fail(st, err, ctx);
	read_meta(s, out);
	if (value) {
		const char *v = (const char *)sqlite3_column_text(s, 4);
		*value = strdup(v ? v : "");
		if (!*value)
			return err_set(err, ENOMEM, "store: %s: out of memory", ctx);
	}
	return 0;
}

int sq_secret_delete(struct store *st, const char *name, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	char ctx[128];

	snprintf(ctx, sizeof(ctx), "delete secret %.72s", name);
	if (sq_prepare(st, &s, "DELETE FROM secrets WHERE name = ?1", err, ctx) < 0)
		return -1;
	if (sq_bind_text(s, 1, name))
		return sq_fail(st, err, ctx);
	if (sq_step_done(st, s, err, ctx) < 0)
		return -1;
	if (sqlite3_changes(sq_db(st)) == 0)
		return err_set(err, ENOENT, "no secret '%.72s'", name);
	return 0;
}

static int read_secret(sqlite3_stmt *s, void *rec, space_err *err, const char *ctx)
{
	(void)err;
	(void)ctx;
	read_meta(s, rec);
	return 0;
}

int sq_secret_each(struct store *st, int (*fn)(const struct secret_rec *, void *), void *arg, space_err *err)
{
	static const char ctx[] = "list secrets";
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	_cleanup_vec_ struct sq_vec v = { .size = sizeof(struct secret_rec) };

	if (sq_prepare(st, &s, "SELECT name, created_ms, updated_ms, hosts FROM secrets ORDER BY name", err, ctx) < 0)
		return -1;
	if (sq_collect(st, s, &v, read_secret, err, ctx) < 0)
		return -1;
	for (size_t i = 0; i < v.n; i++)
		if (fn(sq_vec_at(&v, i), arg))
			break;
	return 0;
}
