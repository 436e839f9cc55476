/* store_sqlite_events.c -- lifecycle events, webhooks and their deliveries (schema v10):
 * each row's record is JSON text whose shape events.c owns; the columns are what is looked
 * up or ordered by */
#include <stdio.h>
#include <string.h>

#include "store_sql.h"

int sq_event_put(struct store *st, const struct event_row *e, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	static const char ctx[] = "put event";

	if (sq_prepare(st, &s, "INSERT OR REPLACE INTO events (seq, time_ms, sandbox_id, body) VALUES (?1, ?2, ?3, ?4)",
		       err, ctx) < 0)
		return -1;
	if (sqlite3_bind_int64(s, 1, e->seq) || sqlite3_bind_int64(s, 2, e->time_ms) ||
	    sq_bind_text(s, 3, e->sandbox_id) || sq_bind_text(s, 4, e->body))
		return sq_fail(st, err, ctx);
	return sq_step_done(st, s, err, ctx);
}

int sq_events_each(struct store *st, int64_t after, const char *sandbox_id, int limit, store_event_fn fn,
		   void *arg, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	static const char ctx[] = "list events";
	int rc;

	if (sq_prepare(st, &s,
		       sandbox_id ? "SELECT seq, time_ms, sandbox_id, body FROM events WHERE seq > ?1 AND sandbox_id = ?2"
				    " ORDER BY seq LIMIT ?3"
				  : "SELECT seq, time_ms, sandbox_id, body FROM events WHERE seq > ?1 ORDER BY seq LIMIT ?3",
		       err, ctx) < 0)
		return -1;
	if (sqlite3_bind_int64(s, 1, after) || (sandbox_id && sq_bind_text(s, 2, sandbox_id)) ||
	    sqlite3_bind_int64(s, 3, limit > 0 ? limit : -1))
		return sq_fail(st, err, ctx);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct event_row e = { .seq = sqlite3_column_int64(s, 0), .time_ms = sqlite3_column_int64(s, 1) };
		int r;

		sq_col_str(s, 2, e.sandbox_id, sizeof(e.sandbox_id));
		e.body = (const char *)sqlite3_column_text(s, 3);
		if (!e.body)
			e.body = "{}";
		if ((r = fn(&e, arg)) != 0)
			return r;
	}
	if (rc != SQLITE_DONE)
		return sq_fail(st, err, ctx);
	return 0;
}

int sq_events_max(struct store *st, int64_t *seq, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	static const char ctx[] = "read the last event";

	if (sq_prepare(st, &s, "SELECT coalesce(max(seq), 0) FROM events", err, ctx) < 0)
		return -1;
	if (sqlite3_step(s) != SQLITE_ROW)
		return sq_fail(st, err, ctx);
	*seq = sqlite3_column_int64(s, 0);
	return 0;
}

static int delete_before(struct store *st, const char *sql, int64_t before_ms, space_err *err, const char *ctx)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;

	if (sq_prepare(st, &s, sql, err, ctx) < 0)
		return -1;
	if (sqlite3_bind_int64(s, 1, before_ms))
		return sq_fail(st, err, ctx);
	return sq_step_done(st, s, err, ctx);
}

int sq_events_prune(struct store *st, int64_t before_ms, space_err *err)
{
	if (delete_before(st, "DELETE FROM events WHERE time_ms < ?1", before_ms, err, "prune events") < 0)
		return -1;
	return delete_before(st, "DELETE FROM webhook_deliveries WHERE time_ms < ?1", before_ms, err,
			     "prune webhook deliveries");
}

int sq_webhook_put(struct store *st, const char *id, int64_t cursor, const char *body, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	static const char ctx[] = "put webhook";

	if (sq_prepare(st, &s, "INSERT OR REPLACE INTO webhooks (id, cursor, body) VALUES (?1, ?2, ?3)", err, ctx) < 0)
		return -1;
	if (sq_bind_text(s, 1, id) || sqlite3_bind_int64(s, 2, cursor) || sq_bind_text(s, 3, body))
		return sq_fail(st, err, ctx);
	return sq_step_done(st, s, err, ctx);
}

int sq_webhook_cursor(struct store *st, const char *id, int64_t cursor, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	static const char ctx[] = "move a webhook's cursor";

	if (sq_prepare(st, &s, "UPDATE webhooks SET cursor = ?2 WHERE id = ?1 AND cursor < ?2", err, ctx) < 0)
		return -1;
	if (sq_bind_text(s, 1, id) || sqlite3_bind_int64(s, 2, cursor))
		return sq_fail(st, err, ctx);
	return sq_step_done(st, s, err, ctx);
}

int sq_webhook_delete(struct store *st, const char *id, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL, *d = NULL;
	static const char ctx[] = "delete webhook";

	if (sq_prepare(st, &s, "DELETE FROM webhooks WHERE id = ?1", err, ctx) < 0)
		return -1;
	if (sq_bind_text(s, 1, id))
		return sq_fail(st, err, ctx);
	if (sq_step_done(st, s, err, ctx) < 0)
		return -1;
	if (sqlite3_changes(sq_db(st)) == 0)
		return err_set(err, ENOENT, "store: %s: not found", ctx);
	if (sq_prepare(st, &d, "DELETE FROM webhook_deliveries WHERE webhook_id = ?1", err, ctx) < 0)
		return -1;
	if (sq_bind_text(d, 1, id))
		return sq_fail(st, err, ctx);
	return sq_step_done(st, d, err, ctx);
}

int sq_webhooks_each(struct store *st, store_webhook_fn fn, void *arg, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	static const char ctx[] = "list webhooks";
	char id[ID_LEN];
	int rc;

	if (sq_prepare(st, &s, "SELECT id, cursor, body FROM webhooks ORDER BY id", err, ctx) < 0)
		return -1;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		const char *body = (const char *)sqlite3_column_text(s, 2);
		int r;

		sq_col_str(s, 0, id, sizeof(id));
		if ((r = fn(id, sqlite3_column_int64(s, 1), body ? body : "{}", arg)) != 0)
			return r;
	}
	if (rc != SQLITE_DONE)
		return sq_fail(st, err, ctx);
	return 0;
}

int sq_delivery_put(struct store *st, const char *webhook_id, int64_t time_ms, const char *body, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	static const char ctx[] = "put webhook delivery";

	if (sq_prepare(st, &s, "INSERT INTO webhook_deliveries (webhook_id, time_ms, body) VALUES (?1, ?2, ?3)", err,
		       ctx) < 0)
		return -1;
	if (sq_bind_text(s, 1, webhook_id) || sqlite3_bind_int64(s, 2, time_ms) || sq_bind_text(s, 3, body))
		return sq_fail(st, err, ctx);
	return sq_step_done(st, s, err, ctx);
}

int sq_deliveries_each(struct store *st, const char *webhook_id, int limit, store_delivery_fn fn, void *arg,
		       space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	static const char ctx[] = "list webhook deliveries";
	int rc;

	if (sq_prepare(st, &s,
		       "SELECT time_ms, body FROM webhook_deliveries WHERE webhook_id = ?1 ORDER BY n DESC LIMIT ?2",
		       err, ctx) < 0)
		return -1;
	if (sq_bind_text(s, 1, webhook_id) || sqlite3_bind_int64(s, 2, limit > 0 ? limit : -1))
		return sq_fail(st, err, ctx);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		const char *body = (const char *)sqlite3_column_text(s, 1);
		int r;

		if ((r = fn(sqlite3_column_int64(s, 0), body ? body : "{}", arg)) != 0)
			return r;
	}
	if (rc != SQLITE_DONE)
		return sq_fail(st, err, ctx);
	return 0;
}
