/* store_sql.h -- the SQLite back end's private header: its store, its helpers and its entry
 * points (store_sqlite.c gathers them into its struct store_ops). Nothing outside
 * store_sqlite*.c includes this but the SQLite-only unit tests. */
#ifndef SPACE_STORE_SQL_H
#define SPACE_STORE_SQL_H

#include <sqlite3.h>
#include <stdbool.h>

#include "store_backend.h"

struct sqlite_store {
	struct store base; /* first: a struct store * is a struct sqlite_store * */
	sqlite3 *db;
};

static inline sqlite3 *sq_db(struct store *st)
{
	return ((struct sqlite_store *)st)->db;
}

/* The node scope (store_set_node), "" = none. */
static inline const char *sq_scope(const struct store *st)
{
	return st->node;
}

/* Kept here rather than in cleanup.h: only the daemon links libsqlite3. */
static inline void cleanup_stmtp(sqlite3_stmt **s)
{
	if (*s)
		sqlite3_finalize(*s);
}
#define _cleanup_stmt_ __attribute__((cleanup(cleanup_stmtp)))

/*
 * Every helper that fails fills err as "store: <ctx>: <what>" and returns -1,
 * where ctx names the request ("get sandbox sb-0123456789abcdef").
 */

/* "store: <ctx>: <sqlite message>", coded from the connection's last error
 * (busy/locked: EAGAIN, disk full: ENOSPC, otherwise EIO). */
int sq_fail(struct store *st, space_err *err, const char *ctx);
int sq_prepare(struct store *st, sqlite3_stmt **out, const char *sql, space_err *err,
		  const char *ctx);
int sq_exec(struct store *st, const char *sql, space_err *err, const char *ctx);
/* Steps a statement that returns no rows. */
int sq_step_done(struct store *st, sqlite3_stmt *s, space_err *err, const char *ctx);
/* Rolls back the open transaction, if any. */
void sq_rollback(struct store *st);

/* Bind helpers return a SQLite result code (SQLITE_OK == 0). */
int sq_bind_text(sqlite3_stmt *s, int i, const char *v);
/* Compact JSON text; NULL is stored as SQL NULL. */
int sq_bind_json(sqlite3_stmt *s, int i, const json_t *v);

/* Copies a text column into a fixed buffer (NULL reads as ""). */
void sq_col_str(sqlite3_stmt *s, int i, char *out, size_t outlen);
/* Parses a JSON column that must hold an array (or an object); NULL reads as
 * an empty one, so records never carry NULL json members. */
int sq_col_json(sqlite3_stmt *s, int i, bool array, json_t **out, space_err *err,
		   const char *ctx);
/* Parses a state-name column with parse(); unknown names are EIO. */
int sq_col_state(sqlite3_stmt *s, int i, int (*parse)(const char *), int *out, space_err *err,
		    const char *ctx);

/* Reads the current row into rec; on failure leaves no json owned by rec. */
typedef int (*sq_row_fn)(sqlite3_stmt *s, void *rec, space_err *err, const char *ctx);

/* Binds key to ?1 of sql and reads the one row into out (zeroed first);
 * ENOENT when there is none. */
int sq_get_row(struct store *st, const char *sql, const char *key, void *out, sq_row_fn rd,
		  space_err *err, const char *ctx);

/* Records read by a query, all of them, before any callback runs: a
 * callback may then write to the store (reconcile does) without disturbing
 * the scan. */
struct sq_vec {
	void *items;
	size_t n, cap, size;
	void (*clear)(void *rec); /* releases what one record owns; NULL: nothing */
};
/* Steps s to the end, reading each row into a new zeroed slot of v. */
int sq_collect(struct store *st, sqlite3_stmt *s, struct sq_vec *v, sq_row_fn rd,
		  space_err *err, const char *ctx);
static inline void *sq_vec_at(const struct sq_vec *v, size_t i)
{
	return (char *)v->items + i * v->size;
}
/* Clears every record read into v and frees the slots. */
void sq_vec_free(struct sq_vec *v);
#define _cleanup_vec_ __attribute__((cleanup(sq_vec_free)))

/* ---- entry points (store.h has their contracts) ---- */

int sq_template_put(struct store *st, const struct template_rec *t, space_err *err);
int sq_template_resolve(struct store *st, const char *ref, struct template_rec *out, space_err *err);
int sq_template_get(struct store *st, const char *digest, struct template_rec *out, space_err *err);
int sq_template_each(struct store *st, int (*fn)(const struct template_rec *, void *), void *arg,
		     space_err *err);
int sq_template_named(struct store *st, const char *name, int (*fn)(const struct template_rec *, void *),
		      void *arg, space_err *err);
int sq_template_untag(struct store *st, const char *ref, int *removed, space_err *err);

int sq_sandbox_put(struct store *st, const struct sandbox_rec *s, space_err *err);
int sq_sandbox_put_if(struct store *st, const struct sandbox_rec *s, int64_t generation,
		      int64_t *new_generation, space_err *err);
int sq_sandbox_get(struct store *st, const char *id, struct sandbox_rec *out, space_err *err);
int sq_sandbox_each(struct store *st, unsigned states, int (*fn)(const struct sandbox_rec *, void *),
		    void *arg, space_err *err);
int sq_op_put(struct store *st, const struct op_rec *op, space_err *err);
int sq_op_get(struct store *st, const char *id, struct op_rec *out, space_err *err);
int sq_op_each_open(struct store *st, int (*fn)(const struct op_rec *, void *), void *arg,
		    space_err *err);
int sq_session_put(struct store *st, const struct session_rec *s, space_err *err);
int sq_session_get(struct store *st, const char *id, struct session_rec *out, space_err *err);
int sq_session_each(struct store *st, const char *sandbox_id,
		    int (*fn)(const struct session_rec *, void *), void *arg, space_err *err);

int sq_snapshot_put(struct store *st, const struct snapshot_rec *s, space_err *err);
int sq_snapshot_get(struct store *st, const char *id, struct snapshot_rec *out, space_err *err);
int sq_snapshot_get_by_name(struct store *st, const char *name, struct snapshot_rec *out,
			    space_err *err);
int sq_snapshot_each(struct store *st, unsigned kinds, int (*fn)(const struct snapshot_rec *, void *),
		     void *arg, space_err *err);
int sq_snapshot_delete(struct store *st, const char *id, space_err *err);

int sq_token_put(struct store *st, const char *hash, const char *sandbox_id, const char *scope,
		 int64_t expires_ms, space_err *err);
int sq_token_get(struct store *st, const char *hash, char sandbox_id[ID_LEN], char *scope,
		 size_t scope_len, int64_t *expires_ms, space_err *err);
int sq_tokens_prune(struct store *st, const char *sandbox_id, int64_t now, space_err *err);
int sq_tokens_each(struct store *st, const char *sandbox_id, store_token_fn fn, void *arg, space_err *err);
int sq_token_delete(struct store *st, const char *hash, space_err *err);

int sq_event_put(struct store *st, const struct event_row *e, space_err *err);
int sq_events_each(struct store *st, int64_t after, const char *sandbox_id, int limit, store_event_fn fn,
		   void *arg, space_err *err);
int sq_events_max(struct store *st, int64_t *seq, space_err *err);
int sq_events_prune(struct store *st, int64_t before_ms, space_err *err);
int sq_webhook_put(struct store *st, const char *id, int64_t cursor, const char *body, space_err *err);
int sq_webhook_cursor(struct store *st, const char *id, int64_t cursor, space_err *err);
int sq_webhook_delete(struct store *st, const char *id, space_err *err);
int sq_webhooks_each(struct store *st, store_webhook_fn fn, void *arg, space_err *err);
int sq_delivery_put(struct store *st, const char *webhook_id, int64_t time_ms, const char *body, space_err *err);
int sq_deliveries_each(struct store *st, const char *webhook_id, int limit, store_delivery_fn fn, void *arg,
		       space_err *err);

int sq_secret_put(struct store *st, const char *name, const char *value, const char *hosts,
		  struct secret_rec *out, bool *created, space_err *err);
int sq_secret_get(struct store *st, const char *name, struct secret_rec *out, char **value,
		  space_err *err);
int sq_secret_delete(struct store *st, const char *name, space_err *err);
int sq_secret_each(struct store *st, int (*fn)(const struct secret_rec *, void *), void *arg,
		   space_err *err);

int sq_intent_put(struct store *st, const struct sandbox_rec *s, const struct op_rec *op,
		  const json_t *intent, space_err *err);
int sq_intent_restore(struct store *st, const char *sandbox_id, const struct op_rec *op,
		      space_err *err);
int sq_claim(struct store *st, const char *node_id, int max, int room_mib,
	     int (*fn)(const struct sandbox_rec *, const json_t *intent, void *), void *arg,
	     space_err *err);
int sq_node_put(struct store *st, const struct node_rec *n, space_err *err);
int sq_node_get(struct store *st, const char *id, struct node_rec *out, space_err *err);
int sq_node_each(struct store *st, int (*fn)(const struct node_rec *, void *), void *arg,
		 space_err *err);
int sq_nodes_expire(struct store *st, int64_t now, int *nodes, int *sandboxes, space_err *err);

int sq_kv_get(struct store *st, const char *key, char *out, size_t outlen, space_err *err);
int sq_kv_set(struct store *st, const char *key, const char *value, space_err *err);

/* store_sqlite_records.c, for the cluster file: the sandbox row's columns and their reader,
 * and the op writer inside a caller's transaction. */
extern const char sq_sandbox_cols[];
int sq_read_sandbox(sqlite3_stmt *s, void *rec, space_err *err, const char *ctx);
void sq_clear_sandbox(void *rec);
/* Inserts the sandbox row (node_id as given, generation 1, intent as given, may be NULL). */
int sq_sandbox_insert(struct store *st, const struct sandbox_rec *r, const json_t *intent,
		      space_err *err, const char *ctx);

#endif
