/* store_sqlite_templates.c -- templates and their tags in the SQLite back end; references */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_ref.h"
#include "store_sql.h"

#define DIGEST_BUF 80 /* template_rec.digest */

#define TPL_COLS "digest, name, dir, vcpus, memory_mib, default_user, env, created_ms, image_bytes, network, config"

static int read_template(sqlite3_stmt *s, void *rec, space_err *err, const char *ctx)
{
	struct template_rec *t = rec;

	memset(t, 0, sizeof(*t));
	sq_col_str(s, 0, t->digest, sizeof(t->digest));
	sq_col_str(s, 1, t->name, sizeof(t->name));
	sq_col_str(s, 2, t->dir, sizeof(t->dir));
	t->vcpus = sqlite3_column_int(s, 3);
	t->memory_mib = sqlite3_column_int(s, 4);
	sq_col_str(s, 5, t->default_user, sizeof(t->default_user));
	t->created_ms = sqlite3_column_int64(s, 7);
	t->image_bytes = sqlite3_column_int64(s, 8);
	if (sq_col_json(s, 6, false, &t->env, err, ctx) < 0)
		return -1;
	if (sq_col_json(s, 9, false, &t->network, err, ctx) < 0 ||
	    sq_col_json(s, 10, false, &t->config, err, ctx) < 0) {
		template_rec_clear(t);
		return -1;
	}
	return 0;
}

static void clear_template(void *rec)
{
	template_rec_clear(rec);
}

/* A digest column: rec is a char[DIGEST_BUF]. */
static int read_digest(sqlite3_stmt *s, void *rec, space_err *err, const char *ctx)
{
	(void)err;
	(void)ctx;
	sq_col_str(s, 0, rec, DIGEST_BUF);
	return 0;
}

/* The tags now pointing at t->digest, sorted, into t->tags. */
static int read_tags(struct store *st, struct template_rec *t, space_err *err, const char *ctx)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	json_t *tags;
	int rc;

	if (sq_prepare(st, &s, "SELECT tag FROM template_tags WHERE digest = ?1 ORDER BY tag",
			  err, ctx) < 0)
		return -1;
	if (sq_bind_text(s, 1, t->digest) != SQLITE_OK)
		return sq_fail(st, err, ctx);
	if (!(tags = json_array()))
		return err_set(err, ENOMEM, "store: %s: out of memory", ctx);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW)
		json_array_append_new(tags, json_string((const char *)sqlite3_column_text(s, 0)));
	if (rc != SQLITE_DONE) {
		json_decref(tags);
		return sq_fail(st, err, ctx);
	}
	json_decref(t->tags);
	t->tags = tags;
	return 0;
}

static int template_by_digest(struct store *st, const char *digest, struct template_rec *out,
			      space_err *err, const char *ctx)
{
	memset(out, 0, sizeof(*out));
	if (sq_get_row(st, "SELECT " TPL_COLS " FROM templates WHERE digest = ?1", digest, out,
			  read_template, err, ctx) < 0)
		return -1;
	if (read_tags(st, out, err, ctx) < 0) {
		template_rec_clear(out);
		return -1;
	}
	return 0;
}

int sq_template_put(struct store *st, const struct template_rec *t, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	_cleanup_stmt_ sqlite3_stmt *tag = NULL;
	char ctx[160];
	size_t i;
	json_t *v;

	snprintf(ctx, sizeof(ctx), "put template %.80s", t->digest);
	if (!store_ref_is_digest(t->digest))
		return err_set(err, EINVAL, "store: %s: digest is not sha256:<64 hex>", ctx);
	if (!store_ref_is_word(t->name, strlen(t->name), STORE_NAME_MAX))
		return err_set(err, EINVAL, "store: %s: bad name '%s'", ctx, t->name);
	if (t->tags && !json_is_array(t->tags))
		return err_set(err, EINVAL, "store: %s: tags is not an array", ctx);
	json_array_foreach (t->tags, i, v) {
		if (!json_is_string(v) || !store_ref_is_tag(json_string_value(v)))
			return err_set(err, EINVAL, "store: %s: tag %zu is not name:tag", ctx, i);
	}

	if (sq_prepare(st, &s,
			  "INSERT INTO templates (" TPL_COLS ")"
			  " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
			  " ON CONFLICT (digest) DO UPDATE SET name = excluded.name,"
			  " dir = excluded.dir, vcpus = excluded.vcpus,"
			  " memory_mib = excluded.memory_mib, default_user = excluded.default_user,"
			  " env = excluded.env, created_ms = excluded.created_ms,"
			  " image_bytes = excluded.image_bytes, network = excluded.network,"
			  " config = excluded.config",
			  err, ctx) < 0 ||
	    sq_prepare(st, &tag,
			  "INSERT INTO template_tags (tag, digest) VALUES (?1, ?2)"
			  " ON CONFLICT (tag) DO UPDATE SET digest = excluded.digest",
			  err, ctx) < 0)
		return -1;
	if (sq_bind_text(s, 1, t->digest) || sq_bind_text(s, 2, t->name) ||
	    sq_bind_text(s, 3, t->dir) || sqlite3_bind_int(s, 4, t->vcpus) ||
	    sqlite3_bind_int(s, 5, t->memory_mib) || sq_bind_text(s, 6, t->default_user) ||
	    sq_bind_json(s, 7, t->env) || sqlite3_bind_int64(s, 8, t->created_ms) ||
	    sqlite3_bind_int64(s, 9, t->image_bytes) || sq_bind_json(s, 10, t->network) ||
	    sq_bind_json(s, 11, t->config))
		return sq_fail(st, err, ctx);

	/* One transaction: no reader sees the template without its tags, and a
	 * moved tag never points nowhere. */
	if (sq_exec(st, "BEGIN IMMEDIATE", err, ctx) < 0)
		return -1;
	if (sq_step_done(st, s, err, ctx) < 0)
		goto fail;
	json_array_foreach (t->tags, i, v) {
		sqlite3_reset(tag);
		if (sq_bind_text(tag, 1, json_string_value(v)) ||
		    sq_bind_text(tag, 2, t->digest)) {
			sq_fail(st, err, ctx);
			goto fail;
		}
		if (sq_step_done(st, tag, err, ctx) < 0)
			goto fail;
	}
	if (sq_exec(st, "COMMIT", err, ctx) < 0)
		goto fail;
	return 0;
fail:
	sq_rollback(st);
	return -1;
}

int sq_template_get(struct store *st, const char *digest, struct template_rec *out,
		       space_err *err)
{
	char ctx[160];

	snprintf(ctx, sizeof(ctx), "get template %.80s", digest);
	return template_by_digest(st, digest, out, err, ctx);
}

int sq_template_resolve(struct store *st, const char *ref, struct template_rec *out,
			   space_err *err)
{
	struct store_ref parsed;
	char ctx[320], digest[DIGEST_BUF];

	memset(out, 0, sizeof(*out));
	snprintf(ctx, sizeof(ctx), "resolve template %.256s", ref);
	if (store_ref_parse(ref, &parsed) < 0)
		return err_set(err, EINVAL,
			       "store: %s: malformed reference (want name, name:tag, "
			       "name@sha256:<64 hex> or sha256:<64 hex>)",
			       ctx);
	if (parsed.tag[0]) {
		if (sq_get_row(st, "SELECT digest FROM template_tags WHERE tag = ?1", parsed.tag, digest,
			       read_digest, err, ctx) < 0)
			return -1;
		return template_by_digest(st, digest, out, err, ctx);
	}
	if (template_by_digest(st, parsed.digest, out, err, ctx) < 0)
		return -1;
	/* name@digest pins both: that digest under another name is not it */
	if (parsed.name[0] && strcmp(out->name, parsed.name) != 0) {
		template_rec_clear(out);
		return err_set(err, ENOENT, "store: %s: not found", ctx);
	}
	return 0;
}

/* The rows s selects, each with its tags, to fn until it returns non-zero. */
static int each_row(struct store *st, sqlite3_stmt *s, int (*fn)(const struct template_rec *, void *), void *arg,
		    space_err *err, const char *ctx)
{
	_cleanup_vec_ struct sq_vec v = { .size = sizeof(struct template_rec), .clear = clear_template };

	if (sq_collect(st, s, &v, read_template, err, ctx) < 0)
		return -1;
	for (size_t i = 0; i < v.n; i++)
		if (read_tags(st, sq_vec_at(&v, i), err, ctx) < 0)
			return -1;
	for (size_t i = 0; i < v.n; i++)
		if (fn(sq_vec_at(&v, i), arg))
			break;
	return 0;
}

int sq_template_each(struct store *st, int (*fn)(const struct template_rec *, void *), void *arg,
			space_err *err)
{
	static const char ctx[] = "list templates";
	_cleanup_stmt_ sqlite3_stmt *s = NULL;

	if (sq_prepare(st, &s,
			  "SELECT " TPL_COLS " FROM templates t WHERE EXISTS"
			  " (SELECT 1 FROM template_tags g WHERE g.digest = t.digest)"
			  " ORDER BY name, created_ms, digest",
			  err, ctx) < 0)
		return -1;
	return each_row(st, s, fn, arg, err, ctx);
}

int sq_template_named(struct store *st, const char *name, int (*fn)(const struct template_rec *, void *),
		      void *arg, space_err *err)
{
	static const char ctx[] = "list a template's history";
	_cleanup_stmt_ sqlite3_stmt *s = NULL;

	if (sq_prepare(st, &s, "SELECT " TPL_COLS " FROM templates WHERE name = ?1 ORDER BY created_ms DESC, digest",
		       err, ctx) < 0)
		return -1;
	if (sq_bind_text(s, 1, name) != SQLITE_OK)
		return sq_fail(st, err, ctx);
	return each_row(st, s, fn, arg, err, ctx);
}

int sq_template_untag(struct store *st, const char *ref, int *removed, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	bool all = !strchr(ref, ':');
	char ctx[200];

	snprintf(ctx, sizeof(ctx), "untag %.128s", ref);
	/* A name: every tag "name:..." (compared as text: no LIKE wildcards in names). */
	if (sq_prepare(st, &s,
		       all ? "DELETE FROM template_tags WHERE substr(tag, 1, length(?1) + 1) = ?1 || ':'"
			   : "DELETE FROM template_tags WHERE tag = ?1",
		       err, ctx) < 0)
		return -1;
	if (sq_bind_text(s, 1, ref) != SQLITE_OK)
		return sq_fail(st, err, ctx);
	if (sq_step_done(st, s, err, ctx) < 0)
		return -1;
	*removed = sqlite3_changes(sq_db(st));
	return 0;
}
