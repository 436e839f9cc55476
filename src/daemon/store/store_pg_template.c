/* store_pg_template.c -- templates and their tags in the PostgreSQL store; references */
#include "store_pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_ref.h"

/* A template and its current tags (sorted bytewise, as SQLite does), in one statement. */
#define TPL_SELECT                                                                           \
	"SELECT digest, name, dir, vcpus, memory_mib, default_user, env, created_ms,"        \
	" image_bytes, network, config, (SELECT json_agg(g.tag ORDER BY g.tag COLLATE \"C\")"         \
	" FROM template_tags g WHERE g.digest = t.digest)::text FROM templates t"

static int read_template(const PGresult *r, int i, void *rec, space_err *err, const char *ctx)
{
	struct template_rec *t = rec;

	memset(t, 0, sizeof(*t));
	pg_copy(r, i, 0, t->digest, sizeof(t->digest));
	pg_copy(r, i, 1, t->name, sizeof(t->name));
	pg_copy(r, i, 2, t->dir, sizeof(t->dir));
	t->vcpus = (int)pg_i64(r, i, 3);
	t->memory_mib = (int)pg_i64(r, i, 4);
	pg_copy(r, i, 5, t->default_user, sizeof(t->default_user));
	t->created_ms = pg_i64(r, i, 7);
	t->image_bytes = pg_i64(r, i, 8);
	if (pg_col_json(r, i, 6, false, &t->env, err, ctx) < 0 ||
	    pg_col_json(r, i, 9, false, &t->network, err, ctx) < 0 ||
	    pg_col_json(r, i, 10, false, &t->config, err, ctx) < 0 ||
	    pg_col_json(r, i, 11, true, &t->tags, err, ctx) < 0) {
		template_rec_clear(t);
		return -1;
	}
	return 0;
}

static void clear_template(void *rec)
{
	template_rec_clear(rec);
}

static int by_digest(struct store *st, const char *digest, struct template_rec *out, space_err *err,
		     const char *ctx)
{
	memset(out, 0, sizeof(*out));
	return pg_get_row(st, TPL_SELECT " WHERE digest = $1", digest, out, read_template, err, ctx);
}

static int put_body(struct pg_tx *tx, void *arg, space_err *err, const char *ctx)
{
	const struct template_rec *t = arg;
	_cleanup_params_ struct pg_params p = { 0 };
	size_t i;
	json_t *v;

	pg_text(&p, t->digest);
	pg_text(&p, t->name);
	pg_text(&p, t->dir);
	pg_int(&p, t->vcpus);
	pg_int(&p, t->memory_mib);
	pg_text(&p, t->default_user);
	pg_json(&p, t->env);
	pg_int(&p, t->created_ms);
	pg_int(&p, t->image_bytes);
	pg_json(&p, t->network);
	pg_json(&p, t->config);
	if (pg_exec_tx(tx,
		       "INSERT INTO templates (digest, name, dir, vcpus, memory_mib, default_user,"
		       " env, created_ms, image_bytes, network, config)"
		       " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
		       " ON CONFLICT (digest) DO UPDATE SET name = excluded.name,"
		       " dir = excluded.dir, vcpus = excluded.vcpus,"
		       " memory_mib = excluded.memory_mib, default_user = excluded.default_user,"
		       " env = excluded.env, created_ms = excluded.created_ms,"
		       " image_bytes = excluded.image_bytes, network = excluded.network,"
		       " config = excluded.config",
		       &p, NULL, err, ctx) < 0)
		return -1;
	/* tags move to the newest digest that claims them; others are kept */
	json_array_foreach (t->tags, i, v) {
		_cleanup_params_ struct pg_params tp = { 0 };

		pg_text(&tp, json_string_value(v));
		pg_text(&tp, t->digest);
		if (pg_exec_tx(tx,
			       "INSERT INTO template_tags (tag, digest) VALUES ($1, $2)"
			       " ON CONFLICT (tag) DO UPDATE SET digest = excluded.digest",
			       &tp, NULL, err, ctx) < 0)
			return -1;
	}
	return 0;
}

int pg_template_put(struct store *st, const struct template_rec *t, space_err *err)
{
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
	/* one transaction: no reader sees the template without its tags */
	return pg_tx(st, put_body, (void *)t, err, ctx);
}

int pg_template_get(struct store *st, const char *digest, struct template_rec *out, space_err *err)
{
	char ctx[160];

	snprintf(ctx, sizeof(ctx), "get template %.80s", digest);
	return by_digest(st, digest, out, err, ctx);
}

int pg_template_resolve(struct store *st, const char *ref, struct template_rec *out, space_err *err)
{
	struct store_ref parsed;
	char ctx[320];

	memset(out, 0, sizeof(*out));
	snprintf(ctx, sizeof(ctx), "resolve template %.256s", ref);
	if (store_ref_parse(ref, &parsed) < 0)
		return err_set(err, EINVAL,
			       "store: %s: malformed reference (want name, name:tag, "
			       "name@sha256:<64 hex> or sha256:<64 hex>)",
			       ctx);
	if (parsed.tag[0])
		return pg_get_row(st,
				  TPL_SELECT " WHERE digest = (SELECT digest FROM template_tags WHERE tag = $1)",
				  parsed.tag, out, read_template, err, ctx);
	if (by_digest(st, parsed.digest, out, err, ctx) < 0)
		return -1;
	/* name@digest pins both: that digest under another name is not it */
	if (parsed.name[0] && strcmp(out->name, parsed.name) != 0) {
		template_rec_clear(out);
		return err_set(err, ENOENT, "store: %s: not found", ctx);
	}
	return 0;
}

int pg_template_each(struct store *st, int (*fn)(const struct template_rec *, void *), void *arg,
		     space_err *err)
{
	_cleanup_pgvec_ struct pg_vec v = { .size = sizeof(struct template_rec), .clear = clear_template };

	if (pg_query_all(st,
			 TPL_SELECT " WHERE EXISTS (SELECT 1 FROM template_tags g WHERE g.digest = t.digest)"
			 " ORDER BY name COLLATE \"C\", created_ms, digest",
			 NULL, &v, read_template, err, "list templates") < 0)
		return -1;
	for (size_t i = 0; i < v.n; i++)
		if (fn(pg_vec_at(&v, i), arg))
			break;
	return 0;
}

int pg_template_named(struct store *st, const char *name, int (*fn)(const struct template_rec *, void *),
		      void *arg, space_err *err)
{
	_cleanup_pgvec_ struct pg_vec v = { .size = sizeof(struct template_rec), .clear = clear_template };
	_cleanup_params_ struct pg_params p = { 0 };

	pg_text(&p, name);
	if (pg_query_all(st, TPL_SELECT " WHERE name = $1 ORDER BY created_ms DESC, digest", &p, &v, read_template,
			 err, "list a template's history") < 0)
		return -1;
	for (size_t i = 0; i < v.n; i++)
		if (fn(pg_vec_at(&v, i), arg))
			break;
	return 0;
}

int pg_template_untag(struct store *st, const char *ref, int *removed, space_err *err)
{
	_cleanup_params_ struct pg_params p = { 0 };
	_cleanup_pgres_ PGresult *r = NULL;
	bool all = !strchr(ref, ':');

	pg_text(&p, ref);
	if (pg_exec(st,
		    all ? "DELETE FROM template_tags WHERE substr(tag, 1, length($1) + 1) = $1 || ':'"
			: "DELETE FROM template_tags WHERE tag = $1",
		    &p, &r, err, "untag a template") < 0)
		return -1;
	*removed = atoi(PQcmdTuples(r));
	return 0;
}
