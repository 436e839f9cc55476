/* store_sql.h -- SQLite helpers shared by store.c, store_template.c and store_records.c */
#ifndef SPACE_STORE_SQL_H
#define SPACE_STORE_SQL_H

#include <sqlite3.h>
#include <stdbool.h>

#include "store.h"

struct store {
	sqlite3 *db;
};

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
int store_fail(struct store *st, space_err *err, const char *ctx);
int store_prepare(struct store *st, sqlite3_stmt **out, const char *sql, space_err *err,
		  const char *ctx);
int store_exec(struct store *st, const char *sql, space_err *err, const char *ctx);
/* Steps a statement that returns no rows. */
int store_step_done(struct store *st, sqlite3_stmt *s, space_err *err, const char *ctx);
/* Rolls back the open transaction, if any. */
void store_rollback(struct store *st);

/* Bind helpers return a SQLite result code (SQLITE_OK == 0). */
int store_bind_text(sqlite3_stmt *s, int i, const char *v);
/* Compact JSON text; NULL is stored as SQL NULL. */
int store_bind_json(sqlite3_stmt *s, int i, const json_t *v);

/* Copies a text column into a fixed buffer (NULL reads as ""). */
void store_col_str(sqlite3_stmt *s, int i, char *out, size_t outlen);
/* Parses a JSON column that must hold an array (or an object); NULL reads as
 * an empty one, so records never carry NULL json members. */
int store_col_json(sqlite3_stmt *s, int i, bool array, json_t **out, space_err *err,
		   const char *ctx);
/* Parses a state-name column with parse(); unknown names are EIO. */
int store_col_state(sqlite3_stmt *s, int i, int (*parse)(const char *), int *out, space_err *err,
		    const char *ctx);

/* Reads the current row into rec; on failure leaves no json owned by rec. */
typedef int (*store_row_fn)(sqlite3_stmt *s, void *rec, space_err *err, const char *ctx);

/* Binds key to ?1 of sql and reads the one row into out (zeroed first);
 * ENOENT when there is none. */
int store_get_row(struct store *st, const char *sql, const char *key, void *out, store_row_fn rd,
		  space_err *err, const char *ctx);

/* Records read by a query, all of them, before any callback runs: a
 * callback may then write to the store (reconcile does) without disturbing
 * the scan. */
struct store_vec {
	void *items;
	size_t n, cap, size;
	void (*clear)(void *rec); /* releases what one record owns; NULL: nothing */
};
/* Steps s to the end, reading each row into a new zeroed slot of v. */
int store_collect(struct store *st, sqlite3_stmt *s, struct store_vec *v, store_row_fn rd,
		  space_err *err, const char *ctx);
static inline void *store_vec_at(const struct store_vec *v, size_t i)
{
	return (char *)v->items + i * v->size;
}
/* Clears every record read into v and frees the slots. */
void store_vec_free(struct store_vec *v);
#define _cleanup_vec_ __attribute__((cleanup(store_vec_free)))

#endif
