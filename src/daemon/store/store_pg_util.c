/* store_pg_util.c -- the PostgreSQL back end's parameters, column readers and row vectors */
#include "store_pg.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- parameters ---- */

static int next_slot(struct pg_params *p)
{
	if (p->n >= PG_MAX_PARAMS) {
		p->nomem = true; /* a programming error, reported as a failed statement */
		return -1;
	}
	return p->n++;
}

void pg_text(struct pg_params *p, const char *v)
{
	int i = next_slot(p);

	if (i >= 0)
		p->v[i] = v;
}

void pg_int(struct pg_params *p, int64_t v)
{
	int i = next_slot(p);

	if (i < 0)
		return;
	snprintf(p->num[i], sizeof(p->num[i]), "%" PRId64, v);
	p->v[i] = p->num[i];
}

void pg_json(struct pg_params *p, const json_t *v)
{
	int i = next_slot(p);

	if (i < 0)
		return;
	p->v[i] = NULL;
	if (!v)
		return;
	p->owned[i] = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	if (!p->owned[i])
		p->nomem = true;
	p->v[i] = p->owned[i];
}

void pg_scope(struct pg_params *p, struct store *st)
{
	pg_text(p, st->node);
}

void pg_params_free(struct pg_params *p)
{
	for (int i = 0; i < p->n; i++)
		free(p->owned[i]);
	p->n = 0;
}

/* ---- columns ---- */

const char *pg_str(const PGresult *r, int row, int col)
{
	return PQgetisnull(r, row, col) ? "" : PQgetvalue(r, row, col);
}

void pg_copy(const PGresult *r, int row, int col, char *out, size_t outlen)
{
	snprintf(out, outlen, "%s", pg_str(r, row, col));
}

int64_t pg_i64(const PGresult *r, int row, int col)
{
	return PQgetisnull(r, row, col) ? 0 : strtoll(PQgetvalue(r, row, col), NULL, 10);
}

int pg_col_any_json(const PGresult *r, int row, int col, json_t **out, space_err *err,
		    const char *ctx)
{
	json_error_t jerr;

	*out = NULL;
	if (PQgetisnull(r, row, col))
		return 0;
	*out = json_loads(PQgetvalue(r, row, col), JSON_DECODE_ANY, &jerr);
	if (!*out)
		return err_set(err, EIO, "store: %s: column %s holds bad JSON: %s", ctx,
			       PQfname(r, col), jerr.text);
	return 0;
}

int pg_col_json(const PGresult *r, int row, int col, bool array, json_t **out, space_err *err,
		const char *ctx)
{
	json_t *v;

	if (pg_col_any_json(r, row, col, &v, err, ctx) < 0)
		return -1;
	if (!v) {
		*out = array ? json_array() : json_object();
		return *out ? 0 : err_set(err, ENOMEM, "store: %s: out of memory", ctx);
	}
	if (array ? !json_is_array(v) : !json_is_object(v)) {
		json_decref(v);
		return err_set(err, EIO, "store: %s: column %s holds bad JSON: wrong type", ctx,
			       PQfname(r, col));
	}
	*out = v;
	return 0;
}

int pg_col_enum(const PGresult *r, int row, int col, int (*parse)(const char *), int *out,
		space_err *err, const char *ctx)
{
	const char *name = pg_str(r, row, col);
	int v = parse(name);

	if (v < 0)
		return err_set(err, EIO, "store: %s: unknown state '%s'", ctx, name);
	*out = v;
	return 0;
}

int pg_changes(const PGresult *r)
{
	const char *n = PQcmdTuples((PGresult *)r);

	return n && *n ? atoi(n) : 0;
}

/* ---- rows ---- */

int pg_get_row(struct store *st, const char *sql, const char *key, void *out, pg_row_fn rd,
	       space_err *err, const char *ctx)
{
	_cleanup_params_ struct pg_params p = { 0 };
	_cleanup_pgres_ PGresult *r = NULL;

	pg_text(&p, key);
	if (pg_exec(st, sql, &p, &r, err, ctx) < 0)
		return -1;
	if (PQntuples(r) == 0)
		return err_set(err, ENOENT, "store: %s: not found", ctx);
	return rd(r, 0, out, err, ctx);
}

int pg_collect(const PGresult *r, struct pg_vec *v, pg_row_fn rd, space_err *err, const char *ctx)
{
	int rows = PQntuples(r);

	if (rows == 0)
		return 0;
	v->items = calloc((size_t)rows, v->size);
	if (!v->items)
		return err_set(err, ENOMEM, "store: %s: out of memory", ctx);
	for (int i = 0; i < rows; i++) {
		if (rd(r, i, pg_vec_at(v, v->n), err, ctx) < 0)
			return -1; /* the reader left nothing owned in the slot */
		v->n++;
	}
	return 0;
}

void pg_vec_free(struct pg_vec *v)
{
	for (size_t i = 0; i < v->n && v->clear; i++)
		v->clear(pg_vec_at(v, i));
	free(v->items);
	v->items = NULL;
	v->n = 0;
}

int pg_query_all(struct store *st, const char *sql, const struct pg_params *p, struct pg_vec *v,
		 pg_row_fn rd, space_err *err, const char *ctx)
{
	_cleanup_pgres_ PGresult *r = NULL;

	if (pg_exec(st, sql, p, &r, err, ctx) < 0)
		return -1;
	return pg_collect(r, v, rd, err, ctx);
}
