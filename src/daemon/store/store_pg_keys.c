/* store_pg_keys.c -- the PostgreSQL store's keyed tables: data-plane tokens (their SHA-256
 * only), egress secrets (values never listed) and the host-facts key/value table */
#include "store_pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- tokens ---- */

int pg_token_put(struct store *st, const char *hash, const char *sandbox_id, const char *scope,
		 int64_t expires_ms, space_err *err)
{
	_cleanup_params_ struct pg_params p = { 0 };

	pg_text(&p, hash);
	pg_text(&p, sandbox_id);
	pg_text(&p, scope);
	pg_int(&p, expires_ms);
	return pg_exec(st, "INSERT INTO tokens (hash, sandbox_id, scope, expires_ms) VALUES ($1, $2, $3, $4)",
		       &p, NULL, err, "put token");
}

int pg_token_get(struct store *st, const char *hash, char sandbox_id[ID_LEN], char *scope,
		 size_t scope_len, int64_t *expires_ms, space_err *err)
{
	_cleanup_params_ struct pg_params p = { 0 };
	_cleanup_pgres_ PGresult *r = NULL;

	pg_text(&p, hash);
	if (pg_exec(st, "SELECT sandbox_id, scope, expires_ms FROM tokens WHERE hash = $1", &p, &r,
		    err, "get token") < 0)
		return -1;
	if (PQntuples(r) == 0)
		return err_set(err, ENOENT, "no such token");
	pg_copy(r, 0, 0, sandbox_id, ID_LEN);
	pg_copy(r, 0, 1, scope, scope_len);
	*expires_ms = pg_i64(r, 0, 2);
	return 0;
}

int pg_tokens_prune(struct store *st, const char *sandbox_id, int64_t now, space_err *err)
{
	_cleanup_params_ struct pg_params p = { 0 };

	pg_int(&p, now);
	if (!sandbox_id)
		return pg_exec(st, "DELETE FROM tokens WHERE expires_ms <= $1", &p, NULL, err,
			       "prune tokens");
	pg_text(&p, sandbox_id);
	return pg_exec(st, "DELETE FROM tokens WHERE sandbox_id = $2 OR expires_ms <= $1", &p, NULL,
		       err, "prune tokens");
}

int pg_tokens_each(struct store *st, const char *sandbox_id, store_token_fn fn, void *arg, space_err *err)
{
	_cleanup_params_ struct pg_params p = { 0 };
	_cleanup_pgres_ PGresult *r = NULL;
	char hash[65], scope[64];

	pg_text(&p, sandbox_id);
	if (pg_exec(st, "SELECT hash, scope, expires_ms FROM tokens WHERE sandbox_id = $1", &p, &r, err,
		    "list tokens") < 0)
		return -1;
	for (int i = 0; i < PQntuples(r); i++) {
		int rc;

		pg_copy(r, i, 0, hash, sizeof(hash));
		pg_copy(r, i, 1, scope, sizeof(scope));
		if ((rc = fn(hash, scope, pg_i64(r, i, 2), arg)) != 0)
			return rc;
	}
	return 0;
}

int pg_token_delete(struct store *st, const char *hash, space_err *err)
{
	_cleanup_params_ struct pg_params p = { 0 };
	_cleanup_pgres_ PGresult *r = NULL;

	pg_text(&p, hash);
	if (pg_exec(st, "DELETE FROM tokens WHERE hash = $1", &p, &r, err, "delete token") < 0)
		return -1;
	if (pg_changes(r) == 0)
		return err_set(err, ENOENT, "store: delete token: not found");
	return 0;
}

/* ---- secrets ---- */

static void read_meta(const PGresult *r, int i, struct secret_rec *out)
{
	memset(out, 0, sizeof(*out));
	pg_copy(r, i, 0, out->name, sizeof(out->name));
	out->created_ms = pg_i64(r, i, 1);
	out->updated_ms = pg_i64(r, i, 2);
	pg_copy(r, i, 3, out->hosts, sizeof(out->hosts));
}

int pg_secret_put(struct store *st, const char *name, const char *value, const char *hosts,
		  struct secret_rec *out, bool *created, space_err *err)
{
	_cleanup_params_ struct pg_params p = { 0 };
	_cleanup_pgres_ PGresult *r = NULL;
	char ctx[128];

	snprintf(ctx, sizeof(ctx), "put secret %.72s", name);
	pg_text(&p, name);
	pg_text(&p, value);
	pg_int(&p, now_ms());
	pg_text(&p, hosts);
	/* xmax is 0 on a row this statement inserted: created, in the same round trip */
	if (pg_exec(st,
		    "INSERT INTO secrets (name, value, created_ms, updated_ms, hosts) VALUES ($1, $2, $3, $3, $4)"
		    " ON CONFLICT (name) DO UPDATE SET value = excluded.value,"
		    " updated_ms = excluded.updated_ms, hosts = excluded.hosts"
		    " RETURNING name, created_ms, updated_ms, hosts, (xmax = 0)",
		    &p, &r, err, ctx) < 0)
		return -1;
	if (PQntuples(r) != 1)
		return err_set(err, EIO, "store: %s: no row came back", ctx);
	read_meta(r, 0, out);
	*created = !strcmp(pg_str(r, 0, 4), "t");
	return 0;
}

int pg_secret_get(struct store *st, const char *name, struct secret_rec *out, char **value,
		  space_err *err)
{
	_cleanup_params_ struct pg_params p = { 0 };
	_cleanup_pgres_ PGresult *r = NULL;
	char ctx[128];

	memset(out, 0, sizeof(*out));
	if (value)
		*value = NULL;
	snprintf(ctx, sizeof(ctx), "get secret %.72s", name);
	pg_text(&p, name);
	if (pg_exec(st, "SELECT name, created_ms, updated_ms, hosts, value FROM secrets WHERE name = $1", &p,
		    &r, err, ctx) < 0)
		return -1;
	if (PQntuples(r) == 0)
		return err_set(err, ENOENT, "no secret '%.72s'", name);
	read_meta(r, 0, out);
	if (value && !(*value = strdup(pg_str(r, 0, 4))))
		return err_set(err, ENOMEM, "store: %s: out of memory", ctx);
	return 0;
}

int pg_secret_delete(struct store *st, const char *name, space_err *err)
{
	_cleanup_params_ struct pg_params p = { 0 };
	_cleanup_pgres_ PGresult *r = NULL;
	char ctx[128];

	snprintf(ctx, sizeof(ctx), "delete secret %.72s", name);
	pg_text(&p, name);
	if (pg_exec(st, "DELETE FROM secrets WHERE name = $1", &p, &r, err, ctx) < 0)
		return -1;
	if (pg_changes(r) == 0)
		return err_set(err, ENOENT, "no secret '%.72s'", name);
	return 0;
}

static int read_secret(const PGresult *r, int i, void *rec, space_err *err, const char *ctx)
{
	(void)err;
	(void)ctx;
	read_meta(r, i, rec);
	return 0;
}

int pg_secret_each(struct store *st, int (*fn)(const struct secret_rec *, void *), void *arg,
		   space_err *err)
{
	_cleanup_pgvec_ struct pg_vec v = { .size = sizeof(struct secret_rec) };

	if (pg_query_all(st, "SELECT name, created_ms, updated_ms, hosts FROM secrets ORDER BY name COLLATE \"C\"", NULL,
			 &v, read_secret, err, "list secrets") < 0)
		return -1;
	for (size_t i = 0; i < v.n; i++)
		if (fn(pg_vec_at(&v, i), arg))
			break;
	return 0;
}

/* ---- key/value ---- */

int pg_kv_get(struct store *st, const char *key, char *out, size_t outlen, space_err *err)
{
	_cleanup_params_ struct pg_params p = { 0 };
	_cleanup_pgres_ PGresult *r = NULL;
	char ctx[160];
	size_t n;

	snprintf(ctx, sizeof(ctx), "get key %.128s", key);
	pg_text(&p, key);
	if (pg_exec(st, "SELECT value FROM kv WHERE key = $1", &p, &r, err, ctx) < 0)
		return -1;
	if (PQntuples(r) == 0)
		return err_set(err, ENOENT, "store: %s: not found", ctx);
	n = strlen(pg_str(r, 0, 0));
	if (n >= outlen)
		return err_set(err, E2BIG, "store: %s: value of %zu bytes does not fit in %zu", ctx,
			       n, outlen);
	memcpy(out, pg_str(r, 0, 0), n + 1);
	return 0;
}

int pg_kv_set(struct store *st, const char *key, const char *value, space_err *err)
{
	_cleanup_params_ struct pg_params p = { 0 };
	char ctx[160];

	snprintf(ctx, sizeof(ctx), "set key %.128s", key);
	pg_text(&p, key);
	pg_text(&p, value);
	return pg_exec(st,
		       "INSERT INTO kv (key, value) VALUES ($1, $2)"
		       " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
		       &p, NULL, err, ctx);
}
