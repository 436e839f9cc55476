/* store.h -- persistent state in SQLite (WAL) under the state directory */
#ifndef SPACE_STORE_H
#define SPACE_STORE_H

#include "err.h"
#include "model.h"

struct store;

/* Opens (creating and migrating the schema as needed) <path>. */
int store_open(struct store **out, const char *path, space_err *err);
void store_close(struct store *st);

/* Every function below returns 0, or -1 with err set (ENOENT when a lookup
 * finds nothing). Records returned through out-params own their json members:
 * release them with *_rec_clear(). */

/* Templates: upsert by digest; tags move to the newest digest that claims them. */
int store_template_put(struct store *st, const struct template_rec *t, space_err *err);
/* ref: "name", "name:tag", "name@sha256:...", or "sha256:..." */
int store_template_resolve(struct store *st, const char *ref, struct template_rec *out, space_err *err);
int store_template_get(struct store *st, const char *digest, struct template_rec *out, space_err *err);
/* Calls fn for each template that currently holds at least one tag. */
int store_template_each(struct store *st, int (*fn)(const struct template_rec *, void *), void *arg, space_err *err);

int store_sandbox_put(struct store *st, const struct sandbox_rec *s, space_err *err); /* insert or replace */
int store_sandbox_get(struct store *st, const char *id, struct sandbox_rec *out, space_err *err);
/* Sandboxes ordered by creation; states: bitmask of 1<<sb_state, 0 = all but deleted. */
int store_sandbox_each(struct store *st, unsigned states, int (*fn)(const struct sandbox_rec *, void *), void *arg, space_err *err);

int store_op_put(struct store *st, const struct op_rec *op, space_err *err);
int store_op_get(struct store *st, const char *id, struct op_rec *out, space_err *err);
/* Operations not yet done (pending or running), oldest first. */
int store_op_each_open(struct store *st, int (*fn)(const struct op_rec *, void *), void *arg, space_err *err);

int store_session_put(struct store *st, const struct session_rec *s, space_err *err);
int store_session_get(struct store *st, const char *id, struct session_rec *out, space_err *err);
/* Sessions of one sandbox ordered by creation (sandbox_id NULL: all). */
int store_session_each(struct store *st, const char *sandbox_id, int (*fn)(const struct session_rec *, void *), void *arg, space_err *err);

/* Small key/value table for host facts (accelerator probe result, api key). */
int store_kv_get(struct store *st, const char *key, char *out, size_t outlen, space_err *err);
int store_kv_set(struct store *st, const char *key, const char *value, space_err *err);

#endif
