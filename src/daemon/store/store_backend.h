/* store_backend.h -- the seam between store.h and its back ends (SQLite, PostgreSQL)
 *
 * store.c owns the public functions of store.h: each one checks nothing of its own and calls
 * the back end's entry of the same name through st->ops. A back end keeps its SQL dialect,
 * its connection and its migrations to itself; what they must agree on is store.h's contract
 * (tests/unit/test_store.c runs the same cases against both). */
#ifndef SPACE_STORE_BACKEND_H
#define SPACE_STORE_BACKEND_H

#include <limits.h>

#include "store.h"

struct store_ops {
	const char *name; /* "sqlite" | "postgres" */
	void (*close)(struct store *st);
	int (*ping)(struct store *st, space_err *err);

	int (*template_put)(struct store *st, const struct template_rec *t, space_err *err);
	int (*template_resolve)(struct store *st, const char *ref, struct template_rec *out, space_err *err);
	int (*template_get)(struct store *st, const char *digest, struct template_rec *out, space_err *err);
	int (*template_each)(struct store *st, int (*fn)(const struct template_rec *, void *), void *arg,
			     space_err *err);
	int (*template_named)(struct store *st, const char *name, int (*fn)(const struct template_rec *, void *),
			      void *arg, space_err *err);
	int (*template_untag)(struct store *st, const char *ref, int *removed, space_err *err);

	int (*sandbox_put)(struct store *st, const struct sandbox_rec *s, space_err *err);
	int (*sandbox_put_if)(struct store *st, const struct sandbox_rec *s, int64_t generation,
			      int64_t *new_generation, space_err *err);
	int (*sandbox_get)(struct store *st, const char *id, struct sandbox_rec *out, space_err *err);
	int (*sandbox_each)(struct store *st, unsigned states, int (*fn)(const struct sandbox_rec *, void *),
			    void *arg, space_err *err);

	int (*op_put)(struct store *st, const struct op_rec *op, space_err *err);
	int (*op_get)(struct store *st, const char *id, struct op_rec *out, space_err *err);
	int (*op_each_open)(struct store *st, int (*fn)(const struct op_rec *, void *), void *arg,
			    space_err *err);

	int (*session_put)(struct store *st, const struct session_rec *s, space_err *err);
	int (*session_get)(struct store *st, const char *id, struct session_rec *out, space_err *err);
	int (*session_each)(struct store *st, const char *sandbox_id,
			    int (*fn)(const struct session_rec *, void *), void *arg, space_err *err);

	int (*snapshot_put)(struct store *st, const struct snapshot_rec *s, space_err *err);
	int (*snapshot_get)(struct store *st, const char *id, struct snapshot_rec *out, space_err *err);
	int (*snapshot_get_by_name)(struct store *st, const char *name, struct snapshot_rec *out,
				    space_err *err);
	int (*snapshot_each)(struct store *st, unsigned kinds, int (*fn)(const struct snapshot_rec *, void *),
			     void *arg, space_err *err);
	int (*snapshot_delete)(struct store *st, const char *id, space_err *err);

	int (*token_put)(struct store *st, const char *hash, const char *sandbox_id, const char *scope,
			 int64_t expires_ms, space_err *err);
	int (*token_get)(struct store *st, const char *hash, char sandbox_id[ID_LEN], char *scope,
			 size_t scope_len, int64_t *expires_ms, space_err *err);
	int (*tokens_prune)(struct store *st, const char *sandbox_id, int64_t now, space_err *err);
	int (*tokens_each)(struct store *st, const char *sandbox_id, store_token_fn fn, void *arg, space_err *err);
	int (*token_delete)(struct store *st, const char *hash, space_err *err);

	int (*event_put)(struct store *st, const struct event_row *e, space_err *err);
	int (*events_each)(struct store *st, int64_t after, const char *sandbox_id, int limit, store_event_fn fn,
			   void *arg, space_err *err);
	int (*events_max)(struct store *st, int64_t *seq, space_err *err);
	int (*events_prune)(struct store *st, int64_t before_ms, space_err *err);
	int (*webhook_put)(struct store *st, const char *id, int64_t cursor, const char *body, space_err *err);
	int (*webhook_cursor)(struct store *st, const char *id, int64_t cursor, space_err *err);
	int (*webhook_delete)(struct store *st, const char *id, space_err *err);
	int (*webhooks_each)(struct store *st, store_webhook_fn fn, void *arg, space_err *err);
	int (*delivery_put)(struct store *st, const char *webhook_id, int64_t time_ms, const char *body,
			    space_err *err);
	int (*deliveries_each)(struct store *st, const char *webhook_id, int limit, store_delivery_fn fn, void *arg,
			       space_err *err);

	int (*secret_put)(struct store *st, const char *name, const char *value, const char *hosts,
			  struct secret_rec *out, bool *created, space_err *err);
	int (*secret_get)(struct store *st, const char *name, struct secret_rec *out, char **value,
			  space_err *err);
	int (*secret_delete)(struct store *st, const char *name, space_err *err);
	int (*secret_each)(struct store *st, int (*fn)(const struct secret_rec *, void *), void *arg,
			   space_err *err);

	int (*intent_put)(struct store *st, const struct sandbox_rec *s, const struct op_rec *op,
			  const json_t *intent, space_err *err);
	int (*intent_restore)(struct store *st, const char *sandbox_id, const struct op_rec *op,
			      space_err *err);
	int (*claim)(struct store *st, const char *node_id, int max, int room_mib,
		     int (*fn)(const struct sandbox_rec *, const json_t *intent, void *), void *arg,
		     space_err *err);
	int (*node_put)(struct store *st, const struct node_rec *n, space_err *err);
	int (*node_get)(struct store *st, const char *id, struct node_rec *out, space_err *err);
	int (*node_each)(struct store *st, int (*fn)(const struct node_rec *, void *), void *arg,
			 space_err *err);
	int (*nodes_expire)(struct store *st, int64_t now, int *nodes, int *sandboxes, space_err *err);

	int (*kv_get)(struct store *st, const char *key, char *out, size_t outlen, space_err *err);
	int (*kv_set)(struct store *st, const char *key, const char *value, space_err *err);
};

/* What every back end's store begins with; a back end's own struct embeds it first
 * (struct sqlite_store { struct store base; sqlite3 *db; ... }). */
struct store {
	const struct store_ops *ops;
	char node[64]; /* the cluster scope, "" = none (store_set_node) */
	char images[PATH_MAX]; /* where this node keeps template files, "" = as stored (store_set_images) */
	struct store_writer *writer; /* write-behind (store_write_behind), NULL = none */
};

/* The back ends' openers (store.c picks one from the URL). */
int store_sqlite_open(struct store **out, const char *path, space_err *err);
int store_pg_open(struct store **out, const char *conninfo, space_err *err);

#endif
