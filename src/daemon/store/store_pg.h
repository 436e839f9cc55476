/* store_pg.h -- the PostgreSQL back end's private helpers (store_pg*.c; docs/design/store.md)
 *
 * Every statement is sent with PQexecParams: values travel as text parameters, never inside
 * the SQL. JSON members are stored as text (as SQLite keeps them), so they read back exactly as
 * written. A lost connection is reopened and the statement (or the whole transaction) sent
 * again, for up to PG_RETRY_MS; then the call fails with EAGAIN "database unreachable". */
#ifndef SPACE_STORE_PG_H
#define SPACE_STORE_PG_H

#include <libpq-fe.h>
#include <pthread.h>
#include <stdbool.h>

#include "store_backend.h"

#define PG_RETRY_MS 30000 /* how long a call keeps reconnecting before EAGAIN */

struct pg_store {
	struct store base; /* first: a struct store * is a struct pg_store * */
	PGconn *conn;
	char *conninfo;
	/* One statement or one transaction at a time: a PGconn is not shared between threads. */
	pthread_mutex_t lock;
	bool opening; /* store_pg_open: a server that does not answer fails at once */
};

/* A new connection with the back end's defaults (timeouts, keepalives, application name, the
 * password taken from PGPASSWORD at start-up); NULL only out of memory: check PQstatus. */
PGconn *pg_connect(const char *conninfo);

static inline struct pg_store *pg_of(struct store *st)
{
	return (struct pg_store *)st;
}

static inline void cleanup_pgresp(PGresult **r)
{
	if (*r)
		PQclear(*r);
}
#define _cleanup_pgres_ __attribute__((cleanup(cleanup_pgresp)))

/* Parameters of one statement, all as text (PostgreSQL casts them to the column's type). */
#define PG_MAX_PARAMS 40
struct pg_params {
	int n;
	const char *v[PG_MAX_PARAMS];
	char num[PG_MAX_PARAMS][24]; /* numbers' text */
	char *owned[PG_MAX_PARAMS];  /* JSON text, freed by pg_params_free */
	bool nomem;                  /* a JSON value could not be encoded */
};
void pg_params_free(struct pg_params *p);
#define _cleanup_params_ __attribute__((cleanup(pg_params_free)))
void pg_text(struct pg_params *p, const char *v); /* NULL: SQL NULL */
void pg_int(struct pg_params *p, int64_t v);
/* Compact JSON text; NULL is SQL NULL. */
void pg_json(struct pg_params *p, const json_t *v);
/* The scope stamped on puts: the node's id, "" without one. */
void pg_scope(struct pg_params *p, struct store *st);

/* Runs one statement in autocommit, retrying over reconnects (see above). *out (may be NULL)
 * receives a PGRES_TUPLES_OK / PGRES_COMMAND_OK result to PQclear. Errors are
 * "store: <ctx>: <what>" coded by pg_code. */
int pg_exec(struct store *st, const char *sql, const struct pg_params *p, PGresult **out,
	    space_err *err, const char *ctx);
/* A transaction in progress (pg_tx). */
struct pg_tx {
	PGconn *c;
	bool retry; /* set by pg_exec_tx: the connection broke, or a serialization failure */
};
/* Inside a pg_tx body: one attempt, no retry (the transaction is retried whole). p NULL:
 * sql is constant text, possibly several statements (migrations). */
int pg_exec_tx(struct pg_tx *tx, const char *sql, const struct pg_params *p, PGresult **out,
	       space_err *err, const char *ctx);
/* BEGIN; body(tx, arg); COMMIT -- under the lock, retried whole (body runs again) when the
 * connection breaks or the server reports a serialization failure or deadlock, for up to
 * PG_RETRY_MS. body returns 0, or -1 with err set (then the transaction is rolled back). */
int pg_tx(struct store *st, int (*body)(struct pg_tx *tx, void *arg, space_err *err, const char *ctx),
	  void *arg, space_err *err, const char *ctx);
/* Like pg_exec, without retry and without waiting (a readiness probe fails fast). */
int pg_ping(struct store *st, space_err *err);

/* Column readers of a text-format result. */
const char *pg_str(const PGresult *r, int row, int col); /* NULL reads as "" */
void pg_copy(const PGresult *r, int row, int col, char *out, size_t outlen);
int64_t pg_i64(const PGresult *r, int row, int col);
/* Parses a JSON column that must hold an object (or an array); NULL reads as an empty one. */
int pg_col_json(const PGresult *r, int row, int col, bool array, json_t **out, space_err *err,
		const char *ctx);
/* Any JSON value, or NULL for SQL NULL. */
int pg_col_any_json(const PGresult *r, int row, int col, json_t **out, space_err *err,
		    const char *ctx);
int pg_col_enum(const PGresult *r, int row, int col, int (*parse)(const char *), int *out,
		space_err *err, const char *ctx);

/* Reads row `row` of r into rec (zeroed first); on failure leaves nothing owned by rec. */
typedef int (*pg_row_fn)(const PGresult *r, int row, void *rec, space_err *err, const char *ctx);
/* One row by key ($1): ENOENT "store: <ctx>: not found" when there is none. */
int pg_get_row(struct store *st, const char *sql, const char *key, void *out, pg_row_fn rd,
	       space_err *err, const char *ctx);

/* Records read by a query, all of them, before any callback runs. */
struct pg_vec {
	void *items;
	size_t n, size;
	void (*clear)(void *rec);
};
int pg_collect(const PGresult *r, struct pg_vec *v, pg_row_fn rd, space_err *err, const char *ctx);
static inline void *pg_vec_at(const struct pg_vec *v, size_t i)
{
	return (char *)v->items + i * v->size;
}
void pg_vec_free(struct pg_vec *v);
#define _cleanup_pgvec_ __attribute__((cleanup(pg_vec_free)))
/* Runs sql, reads every row into v: the *_each functions call back only afterwards. */
int pg_query_all(struct store *st, const char *sql, const struct pg_params *p, struct pg_vec *v,
		 pg_row_fn rd, space_err *err, const char *ctx);

/* Rows changed by a command result. */
int pg_changes(const PGresult *r);

/* Migrations (store_pg_schema.c): under pg_advisory_lock. */
int pg_migrate(struct store *st, space_err *err);

/* The back end's entries, one file per concern. */
int pg_template_put(struct store *st, const struct template_rec *t, space_err *err);
int pg_template_resolve(struct store *st, const char *ref, struct template_rec *out, space_err *err);
int pg_template_get(struct store *st, const char *digest, struct template_rec *out, space_err *err);
int pg_template_each(struct store *st, int (*fn)(const struct template_rec *, void *), void *arg,
		     space_err *err);
int pg_template_named(struct store *st, const char *name, int (*fn)(const struct template_rec *, void *),
		      void *arg, space_err *err);
int pg_template_untag(struct store *st, const char *ref, int *removed, space_err *err);

int pg_sandbox_put(struct store *st, const struct sandbox_rec *s, space_err *err);
int pg_sandbox_put_if(struct store *st, const struct sandbox_rec *s, int64_t generation,
		      int64_t *new_generation, space_err *err);
int pg_sandbox_get(struct store *st, const char *id, struct sandbox_rec *out, space_err *err);
int pg_sandbox_each(struct store *st, unsigned states, int (*fn)(const struct sandbox_rec *, void *),
		    void *arg, space_err *err);
/* Shared with the cluster calls: the sandbox columns and their reader. */
#define PG_SB_COLS                                                                             \
	"id, state, template_ref, template_digest, vcpus, memory_mib, env, metadata,"          \
	" timeout_s, created_ms, updated_ms, expires_ms, pid, pid_start, next_chan, error,"    \
	" disk, parent_id, snapshot_id, source_snapshot, start_kind, on_timeout, role,"        \
	" prev_state, jail_uid, network, node_id, generation"
int pg_read_sandbox(const PGresult *r, int row, void *rec, space_err *err, const char *ctx);
/* Checks a record's enums; EINVAL "store: <ctx>: ..." when one is out of range. */
int pg_sandbox_check(const struct sandbox_rec *s, space_err *err, const char *ctx);
/* Appends the 26 value columns of PG_SB_COLS (id .. network) to p. */
void pg_sandbox_params(struct pg_params *p, const struct sandbox_rec *s);

int pg_op_put(struct store *st, const struct op_rec *op, space_err *err);
int pg_op_get(struct store *st, const char *id, struct op_rec *out, space_err *err);
int pg_op_each_open(struct store *st, int (*fn)(const struct op_rec *, void *), void *arg,
		    space_err *err);
/* The op upsert, inside a transaction (intents write one with their sandbox row). node_id:
 * the owner to stamp ("" keeps the row's on update). */
int pg_op_write(struct pg_tx *tx, const struct op_rec *op, const char *node_id, space_err *err,
		const char *ctx);

int pg_session_put(struct store *st, const struct session_rec *s, space_err *err);
int pg_session_get(struct store *st, const char *id, struct session_rec *out, space_err *err);
int pg_session_each(struct store *st, const char *sandbox_id,
		    int (*fn)(const struct session_rec *, void *), void *arg, space_err *err);

int pg_snapshot_put(struct store *st, const struct snapshot_rec *s, space_err *err);
int pg_snapshot_get(struct store *st, const char *id, struct snapshot_rec *out, space_err *err);
int pg_snapshot_get_by_name(struct store *st, const char *name, struct snapshot_rec *out,
			    space_err *err);
int pg_snapshot_each(struct store *st, unsigned kinds, int (*fn)(const struct snapshot_rec *, void *),
		     void *arg, space_err *err);
int pg_snapshot_delete(struct store *st, const char *id, space_err *err);

int pg_token_put(struct store *st, const char *hash, const char *sandbox_id, const char *scope,
		 int64_t expires_ms, space_err *err);
int pg_token_get(struct store *st, const char *hash, char sandbox_id[ID_LEN], char *scope,
		 size_t scope_len, int64_t *expires_ms, space_err *err);
int pg_tokens_prune(struct store *st, const char *sandbox_id, int64_t now, space_err *err);
int pg_tokens_each(struct store *st, const char *sandbox_id, store_token_fn fn, void *arg, space_err *err);
int pg_token_delete(struct store *st, const char *hash, space_err *err);

int pg_event_put(struct store *st, const struct event_row *e, space_err *err);
int pg_events_each(struct store *st, int64_t after, const char *sandbox_id, int limit, store_event_fn fn,
		   void *arg, space_err *err);
int pg_events_max(struct store *st, int64_t *seq, space_err *err);
int pg_events_prune(struct store *st, int64_t before_ms, space_err *err);
int pg_webhook_put(struct store *st, const char *id, int64_t cursor, const char *body, space_err *err);
int pg_webhook_cursor(struct store *st, const char *id, int64_t cursor, space_err *err);
int pg_webhook_delete(struct store *st, const char *id, space_err *err);
int pg_webhooks_each(struct store *st, store_webhook_fn fn, void *arg, space_err *err);
int pg_delivery_put(struct store *st, const char *webhook_id, int64_t time_ms, const char *body, space_err *err);
int pg_deliveries_each(struct store *st, const char *webhook_id, int limit, store_delivery_fn fn, void *arg,
		       space_err *err);

int pg_secret_put(struct store *st, const char *name, const char *value, const char *hosts,
		  struct secret_rec *out, bool *created, space_err *err);
int pg_secret_get(struct store *st, const char *name, struct secret_rec *out, char **value,
		  space_err *err);
int pg_secret_delete(struct store *st, const char *name, space_err *err);
int pg_secret_each(struct store *st, int (*fn)(const struct secret_rec *, void *), void *arg,
		   space_err *err);

int pg_intent_put(struct store *st, const struct sandbox_rec *s, const struct op_rec *op,
		  const json_t *intent, space_err *err);
int pg_intent_restore(struct store *st, const char *sandbox_id, const struct op_rec *op,
		      space_err *err);
int pg_claim(struct store *st, const char *node_id, int max, int room_mib,
	     int (*fn)(const struct sandbox_rec *, const json_t *intent, void *), void *arg,
	     space_err *err);
int pg_node_put(struct store *st, const struct node_rec *n, space_err *err);
int pg_node_get(struct store *st, const char *id, struct node_rec *out, space_err *err);
int pg_node_each(struct store *st, int (*fn)(const struct node_rec *, void *), void *arg,
		 space_err *err);
int pg_nodes_expire(struct store *st, int64_t now, int *nodes, int *sandboxes, space_err *err);

int pg_kv_get(struct store *st, const char *key, char *out, size_t outlen, space_err *err);
int pg_kv_set(struct store *st, const char *key, const char *value, space_err *err);

#endif
