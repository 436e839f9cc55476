/* store.c -- the store's public face: picks a back end from the URL and hands every call of
 * store.h to it through st->ops (store_backend.h; docs/design/store.md) */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "store_backend.h"

/* Replaced by store_pg.c's definition in builds that have the PostgreSQL back end. Only
 * where objects are linked one by one (spaced): the unit tests link libdaemon.a, where a weak
 * definition in store.o already satisfies the reference and store_pg.o is never pulled in,
 * so once store_pg.c exists this stand-in should go. */
__attribute__((weak)) int store_pg_open(struct store **out, const char *conninfo, space_err *err)
{
	(void)out;
	(void)conninfo;
	return err_set(err, ENOTSUP, "store: this build has no PostgreSQL back end");
}

int store_open(struct store **out, const char *path, space_err *err)
{
	return store_sqlite_open(out, path, err);
}

int store_open_url(struct store **out, const char *url, space_err *err)
{
	if (strncmp(url, "sqlite:", 7) == 0) {
		if (!url[7])
			return err_set(err, EINVAL, "store: %s: no path after sqlite:", url);
		return store_sqlite_open(out, url + 7, err);
	}
	if (strncmp(url, "postgres://", 11) == 0 || strncmp(url, "postgresql://", 13) == 0)
		return store_pg_open(out, url, err);
	/* the URL may hold a password: name the scheme only */
	return err_set(err, EINVAL, "store: '%.*s': want sqlite:PATH or postgres://...",
		       (int)strcspn(url, ":"), url);
}

void store_close(struct store *st)
{
	if (st)
		st->ops->close(st);
}

const char *store_backend(const struct store *st)
{
	return st->ops->name;
}

int store_ping(struct store *st, space_err *err)
{
	return st->ops->ping(st, err);
}

void store_set_node(struct store *st, const char *node_id)
{
	snprintf(st->node, sizeof(st->node), "%s", node_id ? node_id : "");
}

static const char *const node_state_names[NODE__COUNT] = { "up", "lost" };

const char *node_state_name(enum node_state s)
{
	return (unsigned)s < NODE__COUNT ? node_state_names[s] : "unknown";
}

int node_state_parse(const char *name)
{
	for (int i = 0; name && i < NODE__COUNT; i++)
		if (strcmp(name, node_state_names[i]) == 0)
			return i;
	return -1;
}

/* ---- every other call goes to the back end as it is ---- */

int store_template_put(struct store *st, const struct template_rec *t, space_err *err)
{
	return st->ops->template_put(st, t, err);
}

int store_template_resolve(struct store *st, const char *ref, struct template_rec *out, space_err *err)
{
	return st->ops->template_resolve(st, ref, out, err);
}

int store_template_get(struct store *st, const char *digest, struct template_rec *out, space_err *err)
{
	return st->ops->template_get(st, digest, out, err);
}

int store_template_each(struct store *st, int (*fn)(const struct template_rec *, void *), void *arg,
			space_err *err)
{
	return st->ops->template_each(st, fn, arg, err);
}

int store_sandbox_put(struct store *st, const struct sandbox_rec *s, space_err *err)
{
	return st->ops->sandbox_put(st, s, err);
}

int store_sandbox_put_if(struct store *st, const struct sandbox_rec *s, int64_t generation,
			 int64_t *new_generation, space_err *err)
{
	return st->ops->sandbox_put_if(st, s, generation, new_generation, err);
}

int store_sandbox_get(struct store *st, const char *id, struct sandbox_rec *out, space_err *err)
{
	return st->ops->sandbox_get(st, id, out, err);
}

int store_sandbox_each(struct store *st, unsigned states, int (*fn)(const struct sandbox_rec *, void *),
		       void *arg, space_err *err)
{
	return st->ops->sandbox_each(st, states, fn, arg, err);
}

int store_op_put(struct store *st, const struct op_rec *op, space_err *err)
{
	return st->ops->op_put(st, op, err);
}

int store_op_get(struct store *st, const char *id, struct op_rec *out, space_err *err)
{
	return st->ops->op_get(st, id, out, err);
}

int store_op_each_open(struct store *st, int (*fn)(const struct op_rec *, void *), void *arg,
		       space_err *err)
{
	return st->ops->op_each_open(st, fn, arg, err);
}

int store_session_put(struct store *st, const struct session_rec *s, space_err *err)
{
	return st->ops->session_put(st, s, err);
}

int store_session_get(struct store *st, const char *id, struct session_rec *out, space_err *err)
{
	return st->ops->session_get(st, id, out, err);
}

int store_session_each(struct store *st, const char *sandbox_id,
		       int (*fn)(const struct session_rec *, void *), void *arg, space_err *err)
{
	return st->ops->session_each(st, sandbox_id, fn, arg, err);
}

int store_snapshot_put(struct store *st, const struct snapshot_rec *s, space_err *err)
{
	return st->ops->snapshot_put(st, s, err);
}

int store_snapshot_get(struct store *st, const char *id, struct snapshot_rec *out, space_err *err)
{
	return st->ops->snapshot_get(st, id, out, err);
}

int store_snapshot_get_by_name(struct store *st, const char *name, struct snapshot_rec *out,
			       space_err *err)
{
	return st->ops->snapshot_get_by_name(st, name, out, err);
}

int store_snapshot_each(struct store *st, unsigned kinds, int (*fn)(const struct snapshot_rec *, void *),
			void *arg, space_err *err)
{
	return st->ops->snapshot_each(st, kinds, fn, arg, err);
}

int store_snapshot_delete(struct store *st, const char *id, space_err *err)
{
	return st->ops->snapshot_delete(st, id, err);
}

int store_token_put(struct store *st, const char *hash, const char *sandbox_id, const char *scope,
		    int64_t expires_ms, space_err *err)
{
	return st->ops->token_put(st, hash, sandbox_id, scope, expires_ms, err);
}

int store_token_get(struct store *st, const char *hash, char sandbox_id[ID_LEN], char *scope,
		    size_t scope_len, int64_t *expires_ms, space_err *err)
{
	return st->ops->token_get(st, hash, sandbox_id, scope, scope_len, expires_ms, err);
}

int store_tokens_prune(struct store *st, const char *sandbox_id, int64_t now, space_err *err)
{
	return st->ops->tokens_prune(st, sandbox_id, now, err);
}

int store_secret_put(struct store *st, const char *name, const char *value, struct secret_rec *out,
		     bool *created, space_err *err)
{
	return st->ops->secret_put(st, name, value, out, created, err);
}

int store_secret_get(struct store *st, const char *name, struct secret_rec *out, char **value,
		     space_err *err)
{
	return st->ops->secret_get(st, name, out, value, err);
}

int store_secret_delete(struct store *st, const char *name, space_err *err)
{
	return st->ops->secret_delete(st, name, err);
}

int store_secret_each(struct store *st, int (*fn)(const struct secret_rec *, void *), void *arg,
		      space_err *err)
{
	return st->ops->secret_each(st, fn, arg, err);
}

int store_intent_put(struct store *st, const struct sandbox_rec *s, const struct op_rec *op,
		     const json_t *intent, space_err *err)
{
	return st->ops->intent_put(st, s, op, intent, err);
}

int store_intent_restore(struct store *st, const char *sandbox_id, const struct op_rec *op,
			 space_err *err)
{
	return st->ops->intent_restore(st, sandbox_id, op, err);
}

int store_claim(struct store *st, const char *node_id, int max, int room_mib,
		int (*fn)(const struct sandbox_rec *, const json_t *intent, void *), void *arg,
		space_err *err)
{
	return st->ops->claim(st, node_id, max, room_mib, fn, arg, err);
}

int store_node_put(struct store *st, const struct node_rec *n, space_err *err)
{
	return st->ops->node_put(st, n, err);
}

int store_node_get(struct store *st, const char *id, struct node_rec *out, space_err *err)
{
	return st->ops->node_get(st, id, out, err);
}

int store_node_each(struct store *st, int (*fn)(const struct node_rec *, void *), void *arg,
		    space_err *err)
{
	return st->ops->node_each(st, fn, arg, err);
}

int store_nodes_expire(struct store *st, int64_t now, int *nodes, int *sandboxes, space_err *err)
{
	return st->ops->nodes_expire(st, now, nodes, sandboxes, err);
}

int store_kv_get(struct store *st, const char *key, char *out, size_t outlen, space_err *err)
{
	return st->ops->kv_get(st, key, out, outlen, err);
}

int store_kv_set(struct store *st, const char *key, const char *value, space_err *err)
{
	return st->ops->kv_set(st, key, value, err);
}
