/* store.h -- persistent state in SQLite (WAL) under the state directory */
#ifndef SPACE_STORE_H
#define SPACE_STORE_H

#include "err.h"
#include "model/model.h"

struct store;

/* Opens (creating mode 0600 and migrating the schema as needed) <path>;
 * refuses a file whose schema is newer than this build knows. */
int store_open(struct store **out, const char *path, space_err *err);
void store_close(struct store *st);

/* Every function below returns 0, or -1 with err set (ENOENT when a lookup
 * finds nothing; EINVAL for input the store refuses; EAGAIN when the database
 * stayed locked past the busy timeout; ENOSPC when the disk is full; EIO for
 * anything else, such as a row that no longer parses). Messages carry context:
 * "store: get sandbox sb-...: not found".
 *
 * Out-params are zeroed first (without freeing what they held) and, on
 * success, own their json members: release them with *_rec_clear(). A json
 * member put as NULL reads back as an empty object (argv: empty array), so a
 * record from the store never holds NULL json. On failure nothing is owned.
 *
 * The *_each functions read every matching row before the first callback, so
 * a callback may call any store function (even put the record it was given).
 * The record is lent for the call only. A callback returns 0 to go on, or
 * nonzero to stop early; stopping is not an error: the function returns 0. */

/* Templates: upsert by digest; tags move to the newest digest that claims them.
 * Tags are added, never dropped: a re-put with fewer tags keeps the others.
 * EINVAL unless digest is "sha256:<64 lowercase hex>", name is 1..63 of
 * [A-Za-z0-9._-] (not starting with '.' or '-') and each tag "name:tag" (the
 * tag part 1..127 of the same characters). A tag may name another template
 * name, as docker tags do. */
int store_template_put(struct store *st, const struct template_rec *t, space_err *err);
/* ref: "name" (= "name:latest"), "name:tag", "name@sha256:...", or "sha256:...".
 * EINVAL when malformed; ENOENT when nothing matches, including a name@digest
 * whose digest belongs to a template of another name. The record holds the
 * template's current tags (possibly none). */
int store_template_resolve(struct store *st, const char *ref, struct template_rec *out, space_err *err);
int store_template_get(struct store *st, const char *digest, struct template_rec *out, space_err *err);
/* Calls fn for each template that currently holds at least one tag, by name
 * then creation; the record includes its tags, sorted. */
int store_template_each(struct store *st, int (*fn)(const struct template_rec *, void *), void *arg, space_err *err);

/* Insert or update in place (the row keeps its place in creation order). */
int store_sandbox_put(struct store *st, const struct sandbox_rec *s, space_err *err);
int store_sandbox_get(struct store *st, const char *id, struct sandbox_rec *out, space_err *err);
/* Sandboxes ordered by creation; states: bitmask of 1<<sb_state, 0 = all but deleted. */
int store_sandbox_each(struct store *st, unsigned states, int (*fn)(const struct sandbox_rec *, void *), void *arg, space_err *err);

/* Insert or update. No foreign key: an operation may be written before the
 * sandbox it is about. */
int store_op_put(struct store *st, const struct op_rec *op, space_err *err);
int store_op_get(struct store *st, const char *id, struct op_rec *out, space_err *err);
/* Operations not yet done (pending or running), oldest first. */
int store_op_each_open(struct store *st, int (*fn)(const struct op_rec *, void *), void *arg, space_err *err);

/* Insert or update; the sandbox row must exist (EIO "FOREIGN KEY constraint
 * failed" otherwise). */
int store_session_put(struct store *st, const struct session_rec *s, space_err *err);
int store_session_get(struct store *st, const char *id, struct session_rec *out, space_err *err);
/* Sessions of one sandbox ordered by creation (sandbox_id NULL: all). */
int store_session_each(struct store *st, const char *sandbox_id, int (*fn)(const struct session_rec *, void *), void *arg, space_err *err);

/* Snapshots. put: insert or update; EEXIST when a named snapshot's name is
 * taken by another. get_by_name looks among named snapshots only. each: by
 * creation; kinds is a bitmask of 1 << snap_kind (0 = all). delete: ENOENT if
 * there is no such row. */
int store_snapshot_put(struct store *st, const struct snapshot_rec *s, space_err *err);
int store_snapshot_get(struct store *st, const char *id, struct snapshot_rec *out, space_err *err);
int store_snapshot_get_by_name(struct store *st, const char *name, struct snapshot_rec *out,
			       space_err *err);
int store_snapshot_each(struct store *st, unsigned kinds, int (*fn)(const struct snapshot_rec *, void *),
			void *arg, space_err *err);
int store_snapshot_delete(struct store *st, const char *id, space_err *err);

/* Data-plane tokens with a scope wider than one session (schema v5; docs/design/channels.md).
 * Only the token's SHA-256 (hex) is stored. get: ENOENT when unknown. prune: the sandbox's
 * tokens (sandbox_id NULL: none) and every expired one. */
int store_token_put(struct store *st, const char *hash, const char *sandbox_id, const char *scope,
		    int64_t expires_ms, space_err *err);
int store_token_get(struct store *st, const char *hash, char sandbox_id[ID_LEN], char *scope, size_t scope_len,
		    int64_t *expires_ms, space_err *err);
int store_tokens_prune(struct store *st, const char *sandbox_id, int64_t now, space_err *err);

/* Egress secrets (schema v4): values the gateways inject, never shown. put: insert or
 * replace the value (*created true when the name was new); the record's times are set by
 * the store. get: the metadata only unless value != NULL (then *value is malloc'ed: clear
 * and free it). delete: ENOENT if unknown. each: names and times, by name. */
struct secret_rec {
	char name[72];
	int64_t created_ms, updated_ms;
};
int store_secret_put(struct store *st, const char *name, const char *value, struct secret_rec *out,
		     bool *created, space_err *err);
int store_secret_get(struct store *st, const char *name, struct secret_rec *out, char **value,
		     space_err *err);
int store_secret_delete(struct store *st, const char *name, space_err *err);
int store_secret_each(struct store *st, int (*fn)(const struct secret_rec *, void *), void *arg,
		      space_err *err);

/* Small key/value table for host facts (accelerator probe result, api key).
 * kv_get: ENOENT for an unknown key, E2BIG if the value and its NUL do not fit
 * in outlen. */
int store_kv_get(struct store *st, const char *key, char *out, size_t outlen, space_err *err);
int store_kv_set(struct store *st, const char *key, const char *value, space_err *err);

#endif
