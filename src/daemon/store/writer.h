/* writer.h -- write-behind for one store (writer.c; store.h "Off the caller's thread")
 *
 * Private to the store: store.c hands sandbox, operation and session puts to the writer, asks
 * it first on gets, and merges what it holds into lists. The writer keeps, per row, the newest
 * record not yet committed (the overlay), writes rows in the order they were first put on a
 * thread with a connection of its own, and keeps a row that failed to try it again. */
#ifndef SPACE_STORE_WRITER_H
#define SPACE_STORE_WRITER_H

#include <stdbool.h>

#include "store.h"

struct store_writer;

enum pend_kind { PEND_SANDBOX, PEND_OP, PEND_SESSION, PEND__ROWS, PEND_JOB = PEND__ROWS };

/* conn is the thread's own connection (owned from now on, closed by writer_stop). */
int writer_start(struct store_writer **out, struct store *conn, space_err *err);
/* Drains (retrying what fails for up to drain_ms), stops the thread, closes its connection;
 * jobs whose done() was not called get done(arg, false). */
void writer_stop(struct store_writer *w, int drain_ms);

/* Queues rec (a struct sandbox_rec, op_rec or session_rec, copied deeply). */
int writer_put(struct store_writer *w, enum pend_kind kind, const void *rec, space_err *err);
/* The newest record put and not yet committed, copied into out: true; false when none. */
bool writer_get(struct store_writer *w, enum pend_kind kind, const char *id, void *out);
/* Every uncommitted record of a kind: a malloc'ed array of deep copies (each
 * sizeof(union pend_rec) bytes), *n of them; free with writer_list_free. */
union pend_rec {
	struct sandbox_rec sb;
	struct op_rec op;
	struct session_rec ss;
};
union pend_rec *writer_list(struct store_writer *w, enum pend_kind kind, size_t *n);
void writer_list_free(enum pend_kind kind, union pend_rec *v, size_t n);
void pend_rec_clear(enum pend_kind kind, union pend_rec *r);

int writer_job(struct store_writer *w, void (*fn)(struct store *conn, void *arg),
	       void (*done)(void *arg, bool ran), void *arg, space_err *err);
int writer_fd(const struct store_writer *w);
void writer_poll(struct store_writer *w);
int writer_flush(struct store_writer *w, int timeout_ms);
void writer_stats(struct store_writer *w, struct store_write_stats *out);
void writer_set_node(struct store_writer *w, const char *node_id);

#endif
