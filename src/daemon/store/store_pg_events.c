/* store_pg_events.c -- the PostgreSQL store's lifecycle events, webhooks and deliveries
 * (schema v5; SQLite's v10): the same rows as store_sqlite_events.c */
#include <stdio.h>
#include <string.h>

#include "store_pg.h"

int pg_event_put(struct store *st, const struct event_row *e, space_err *err)
{
	_cleanup_params_ struct pg_params p = { 0 };

	pg_int(&p, e->seq);
	pg_int(&p, e->time_ms);
	pg_text(&p, e->sandbox_id);
	pg_text(&p, e->body);
	return pg_exec(st,
		       "INSERT INTO events (seq, time_ms, sandbox_id, body) VALUES ($1, $2, $3, $4)"
		       " ON CONFLICT (seq) DO UPDATE SET time_ms = $2, sandbox_id = $3, body = $4",
		       &p, NULL, err, "put event");
}

int pg_events_each(struct store *st, int64_t after, const char *sandbox_id, int limit, store_event_fn fn,
		   void *arg, space_err *err)
{
	_cleanup_params_ struct pg_params p = { 0 };
	_cleanup_pgres_ PGresult *r = NULL;

	pg_int(&p, after);
	pg_int(&p, limit > 0 ? limit : INT32_MAX);
	pg_text(&p, sandbox_id);
	if (pg_exec(st,
		    "SELECT seq, time_ms, sandbox_id, body FROM events WHERE seq > $1"
		    " AND ($3::text IS NULL OR sandbox_id = $3) ORDER BY seq LIMIT $2",
		    &p, &r, err, "list events") < 0)
		return -1;
	for (int i = 0; i < PQntuples(r); i++) {
		struct event_row e = { .seq = pg_i64(r, i, 0), .time_ms = pg_i64(r, i, 1), .body = pg_str(r, i, 3) };
		int rc;

		pg_copy(r, i, 2, e.sandbox_id, sizeof(e.sandbox_id));
		if ((rc = fn(&e, arg)) != 0)
			return rc;
	}
	return 0;
}

int pg_events_max(struct store *st, int64_t *seq, space_err *err)
{
	_cleanup_pgres_ PGresult *r = NULL;

	if (pg_exec(st, "SELECT coalesce(max(seq), 0) FROM events", NULL, &r, err, "read the last event") < 0)
		return -1;
	*seq = pg_i64(r, 0, 0);
	return 0;
}

int pg_events_prune(struct store *st, int64_t before_ms, space_err *err)
{
	_cleanup_params_ struct pg_params p = { 0 };

	pg_int(&p, before_ms);
	if (pg_exec(st, "DELETE FROM events WHERE time_ms < $1", &p, NULL, err, "prune events") < 0)
		return -1;
	return pg_exec(st, "DELETE FROM webhook_deliveries WHERE time_ms < $1", &p, NULL, err,
		       "prune webhook deliveries");
}

int pg_webhook_put(struct store *st, const char *id, int64_t cursor, const char *body, space_err *err)
{
	_cleanup_params_ struct pg_params p = { 0 };

	pg_text(&p, id);
	pg_int(&p, cursor);
	pg_text(&p, body);
	return pg_exec(st,
		       "INSERT INTO webhooks (id, cursor, body) VALUES ($1, $2, $3)"
		       " ON CONFLICT (id) DO UPDATE SET cursor = $2, body = $3",
		       &p, NULL, err, "put webhook");
}

int pg_webhook_cursor(struct store *st, const char *id, int64_t cursor, space_err *err)
{
	_cleanup_params_ struct pg_params p = { 0 };

	pg_text(&p, id);
	pg_int(&p, cursor);
	return pg_exec(st, "UPDATE webhooks SET cursor = $2 WHERE id = $1 AND cursor < $2", &p, NULL, err,
		       "move a webhook's cursor");
}

int pg_webhook_delete(struct store *st, const char *id, space_err *err)
{
	_cleanup_params_ struct pg_params p = { 0 };
	_cleanup_pgres_ PGresult *r = NULL;

	pg_text(&p, id);
	if (pg_exec(st, "DELETE FROM webhooks WHERE id = $1", &p, &r, err, "delete webhook") < 0)
		return -1;
	if (pg_changes(r) == 0)
		return err_set(err, ENOENT, "store: delete webhook: not found");
	return pg_exec(st, "DELETE FROM webhook_deliveries WHERE webhook_id = $1", &p, NULL, err,
		       "delete webhook");
}

int pg_webhooks_each(struct store *st, store_webhook_fn fn, void *arg, space_err *err)
{
	_cleanup_pgres_ PGresult *r = NULL;
	char id[ID_LEN];

	if (pg_exec(st, "SELECT id, cursor, body FROM webhooks ORDER BY id", NULL, &r, err, "list webhooks") < 0)
		return -1;
	for (int i = 0; i < PQntuples(r); i++) {
		int rc;

		pg_copy(r, i, 0, id, sizeof(id));
		if ((rc = fn(id, pg_i64(r, i, 1), pg_str(r, i, 2), arg)) != 0)
			return rc;
	}
	return 0;
}

int pg_delivery_put(struct store *st, const char *webhook_id, int64_t time_ms, const char *body, space_err *err)
{
	_cleanup_params_ struct pg_params p = { 0 };

	pg_text(&p, webhook_id);
	pg_int(&p, time_ms);
	pg_text(&p, body);
	return pg_exec(st, "INSERT INTO webhook_deliveries (webhook_id, time_ms, body) VALUES ($1, $2, $3)", &p,
		       NULL, err, "put webhook delivery");
}

int pg_deliveries_each(struct store *st, const char *webhook_id, int limit, store_delivery_fn fn, void *arg,
		       space_err *err)
{
	_cleanup_params_ struct pg_params p = { 0 };
	_cleanup_pgres_ PGresult *r = NULL;

	pg_text(&p, webhook_id);
	pg_int(&p, limit > 0 ? limit : INT32_MAX);
	if (pg_exec(st,
		    "SELECT time_ms, body FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY n DESC LIMIT $2",
		    &p, &r, err, "list webhook deliveries") < 0)
		return -1;
	for (int i = 0; i < PQntuples(r); i++) {
		int rc;

		if ((rc = fn(pg_i64(r, i, 0), pg_str(r, i, 1), arg)) != 0)
			return rc;
	}
	return 0;
}
