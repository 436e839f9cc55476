/* store.c -- the store's public face: picks a back end from the URL and hands every call of
 * store.h to it through st->ops (store_backend.h; docs/design/store.md) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store_backend.h"
#include "store_ref.h"
#include "writer.h"

#define DRAIN_MS 10000
#define FLUSH_MS 30000

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
	if (!st)
		return;
	writer_stop(st->writer, DRAIN_MS);
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
	if (st->writer)
		writer_set_node(st->writer, st->node);
}

/* ---- write-behind (writer.c does the work) ---- */

int store_write_behind(struct store *st, const char *url, space_err *err)
{
	struct store *conn;

	if (st->writer)
		return err_set(err, EEXIST, "store: write-behind is on already");
	if (store_open_url(&conn, url, err) < 0)
		return err_wrap(err, "store: the writer's connection");
	store_set_node(conn, st->node);
	store_set_images(conn, st->images);
	return writer_start(&st->writer, conn, err);
}

int store_async(struct store *st, void (*fn)(struct store *conn, void *arg),
		void (*done)(void *arg, bool ran), void *arg, space_err *err)
{
	if (st->writer)
		return writer_job(st->writer, fn, done, arg, err);
	fn(st, arg);
	done(arg, true);
	return 0;
}

int store_async_fd(const struct store *st)
{
	return st->writer ? writer_fd(st->writer) : -1;
}

void store_async_poll(struct store *st)
{
	if (st->writer)
		writer_poll(st->writer);
}

int store_flush(struct store *st, int timeout_ms)
{
	return st->writer ? writer_flush(st->writer, timeout_ms) : 0;
}

void store_write_stats(struct store *st, struct store_write_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (st->writer)
		writer_stats(st->writer, out);
}

/* A list of rows from the database with the versions not yet written put in their place, and
 * rows not yet written at all after them (the newest rows: creation order holds). */
struct merge {
	enum pend_kind kind;
	union pend_rec *v;
	size_t n;
	bool *seen;
	unsigned states;          /* sandboxes: as store_sandbox_each */
	const char *sandbox_id;   /* sessions: NULL = all */
	union {
		int (*sb)(const struct sandbox_rec *, void *);
		int (*op)(const struct op_rec *, void *);
		int (*ss)(const struct session_rec *, void *);
	} fn;
	void *arg;
	bool stopped;
};

static const char *pend_id(enum pend_kind kind, const union pend_rec *r)
{
	return kind == PEND_SANDBOX ? r->sb.id : kind == PEND_OP ? r->op.id : r->ss.id;
}

static bool merge_wants(const struct merge *m, const union pend_rec *r)
{
	switch (m->kind) {
	case PEND_SANDBOX:
		return m->states ? (m->states & (1u << r->sb.state)) != 0 : r->sb.state != SB_DELETED;
	case PEND_OP:
		return !op_state_done(r->op.state);
	default:
		return !m->sandbox_id || strcmp(m->sandbox_id, r->ss.sandbox_id) == 0;
	}
}

/* rec: a struct sandbox_rec, op_rec or session_rec, as m->kind says */
static int merge_call(struct merge *m, const void *rec)
{
	int rc = m->kind == PEND_SANDBOX ? m->fn.sb(rec, m->arg)
		 : m->kind == PEND_OP    ? m->fn.op(rec, m->arg)
					 : m->fn.ss(rec, m->arg);

	m->stopped = rc != 0;
	return rc;
}

/* A row from the database (as the list asked for it): its newer version instead if one
 * waits, and nothing if that version is not one the list wants. */
static int merge_row(struct merge *m, const char *id, const void *db)
{
	for (size_t i = 0; i < m->n; i++) {
		if (!m->seen[i] && strcmp(pend_id(m->kind, &m->v[i]), id) == 0) {
			m->seen[i] = true;
			return merge_wants(m, &m->v[i]) ? merge_call(m, &m->v[i]) : 0;
		}
	}
	return merge_call(m, db);
}

static int merge_sb(const struct sandbox_rec *r, void *arg)
{
	return merge_row(arg, r->id, r);
}

static int merge_op(const struct op_rec *r, void *arg)
{
	return merge_row(arg, r->id, r);
}

static int merge_ss(const struct session_rec *r, void *arg)
{
	return merge_row(arg, r->id, r);
}

/* After the database's rows: the waiting versions of rows it did not list (new rows, or rows
 * whose waiting version now belongs in this list). */
static int merge_run(struct merge *m, int rc_db)
{
	if (rc_db == 0 && !m->stopped)
		for (size_t i = 0; i < m->n && !m->stopped; i++)
			if (!m->seen[i] && merge_wants(m, &m->v[i]))
				merge_call(m, &m->v[i]);
	writer_list_free(m->kind, m->v, m->n);
	free(m->seen);
	return rc_db;
}

static int merge_begin(struct store *st, struct merge *m, space_err *err)
{
	m->v = writer_list(st->writer, m->kind, &m->n);
	m->seen = calloc(m->n ? m->n : 1, sizeof(*m->seen));
	if (!m->seen) {
		writer_list_free(m->kind, m->v, m->n);
		return err_set(err, ENOMEM, "store: list: out of memory");
	}
	return 0;
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

/* The writer's connection learns it behind what is queued (it is the writer thread's). */
static void images_job(struct store *conn, void *arg)
{
	store_set_images(conn, arg);
}

static void images_done(void *arg, bool ran)
{
	(void)ran;
	free(arg);
}

void store_set_images(struct store *st, const char *images)
{
	space_err err = { 0 };
	char *copy;

	snprintf(st->images, sizeof(st->images), "%s", images ? images : "");
	if (!st->writer)
		return;
	if (!(copy = strdup(st->images)) || writer_job(st->writer, images_job, images_done, copy, &err) < 0) {
		free(copy);
		log_error("store: the writer's connection keeps no images directory: %s", err.msg);
	}
}

const char *store_images(const struct store *st)
{
	return st->images;
}

/* The node's own copy of the template (store_set_images). */
static void local_dir(const struct store *st, struct template_rec *t)
{
	if (st->images[0] && strncmp(t->digest, "sha256:", 7) == 0)
		snprintf(t->dir, sizeof(t->dir), "%s/%s", st->images, t->digest + 7);
}

int store_template_resolve(struct store *st, const char *ref, struct template_rec *out, space_err *err)
{
	if (st->ops->template_resolve(st, ref, out, err) < 0)
		return -1;
	local_dir(st, out);
	return 0;
}

int store_template_get(struct store *st, const char *digest, struct template_rec *out, space_err *err)
{
	if (st->ops->template_get(st, digest, out, err) < 0)
		return -1;
	local_dir(st, out);
	return 0;
}

struct local_each {
	const struct store *st;
	int (*fn)(const struct template_rec *, void *);
	void *arg;
};

static int each_local(const struct template_rec *t, void *arg)
{
	struct local_each *l = arg;
	struct template_rec copy = *t; /* json members lent, as t's are */

	local_dir(l->st, &copy);
	return l->fn(&copy, l->arg);
}

int store_template_each(struct store *st, int (*fn)(const struct template_rec *, void *), void *arg,
			space_err *err)
{
	struct local_each l = { st, fn, arg };

	return st->ops->template_each(st, st->images[0] ? each_local : fn, st->images[0] ? (void *)&l : arg, err);
}

int store_template_named(struct store *st, const char *name, int (*fn)(const struct template_rec *, void *),
			 void *arg, space_err *err)
{
	struct local_each l = { st, fn, arg };

	return st->ops->template_named(st, name, st->images[0] ? each_local : fn, st->images[0] ? (void *)&l : arg,
				       err);
}

int store_template_untag(struct store *st, const char *ref, int *removed, space_err *err)
{
	*removed = 0;
	if (strchr(ref, ':') ? !store_ref_is_tag(ref) : !store_ref_is_word(ref, strlen(ref), STORE_NAME_MAX))
		return err_set(err, EINVAL, "store: untag: '%.128s' is not a name or name:tag", ref);
	return st->ops->template_untag(st, ref, removed, err);
}

/* ---- the rows write-behind holds: queued puts, gets and lists that see them ---- */

int store_sandbox_put(struct store *st, const struct sandbox_rec *s, space_err *err)
{
	if (st->writer)
		return writer_put(st->writer, PEND_SANDBOX, s, err);
	return st->ops->sandbox_put(st, s, err);
}

/* The generation the caller read may be one a queued write is about to bump: wait for them. */
int store_sandbox_put_if(struct store *st, const struct sandbox_rec *s, int64_t generation,
			 int64_t *new_generation, space_err *err)
{
	store_flush(st, FLUSH_MS);
	return st->ops->sandbox_put_if(st, s, generation, new_generation, err);
}

int store_sandbox_get(struct store *st, const char *id, struct sandbox_rec *out, space_err *err)
{
	if (st->writer && writer_get(st->writer, PEND_SANDBOX, id, out))
		return 0;
	return st->ops->sandbox_get(st, id, out, err);
}

int store_sandbox_each(struct store *st, unsigned states, int (*fn)(const struct sandbox_rec *, void *),
		       void *arg, space_err *err)
{
	struct merge m = { .kind = PEND_SANDBOX, .states = states, .fn.sb = fn, .arg = arg };

	if (!st->writer)
		return st->ops->sandbox_each(st, states, fn, arg, err);
	if (merge_begin(st, &m, err) < 0)
		return -1;
	return merge_run(&m, st->ops->sandbox_each(st, states, merge_sb, &m, err));
}

int store_op_put(struct store *st, const struct op_rec *op, space_err *err)
{
	if (st->writer)
		return writer_put(st->writer, PEND_OP, op, err);
	return st->ops->op_put(st, op, err);
}

int store_op_get(struct store *st, const char *id, struct op_rec *out, space_err *err)
{
	if (st->writer && writer_get(st->writer, PEND_OP, id, out))
		return 0;
	return st->ops->op_get(st, id, out, err);
}

int store_op_each_open(struct store *st, int (*fn)(const struct op_rec *, void *), void *arg,
		       space_err *err)
{
	struct merge m = { .kind = PEND_OP, .fn.op = fn, .arg = arg };

	if (!st->writer)
		return st->ops->op_each_open(st, fn, arg, err);
	if (merge_begin(st, &m, err) < 0)
		return -1;
	return merge_run(&m, st->ops->op_each_open(st, merge_op, &m, err));
}

int store_session_put(struct store *st, const struct session_rec *s, space_err *err)
{
	if (st->writer)
		return writer_put(st->writer, PEND_SESSION, s, err);
	return st->ops->session_put(st, s, err);
}

int store_session_get(struct store *st, const char *id, struct session_rec *out, space_err *err)
{
	if (st->writer && writer_get(st->writer, PEND_SESSION, id, out))
		return 0;
	return st->ops->session_get(st, id, out, err);
}

int store_session_each(struct store *st, const char *sandbox_id,
		       int (*fn)(const struct session_rec *, void *), void *arg, space_err *err)
{
	struct merge m = { .kind = PEND_SESSION, .sandbox_id = sandbox_id, .fn.ss = fn, .arg = arg };

	if (!st->writer)
		return st->ops->session_each(st, sandbox_id, fn, arg, err);
	if (merge_begin(st, &m, err) < 0)
		return -1;
	return merge_run(&m, st->ops->session_each(st, sandbox_id, merge_ss, &m, err));
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

int store_tokens_each(struct store *st, const char *sandbox_id, store_token_fn fn, void *arg, space_err *err)
{
	return st->ops->tokens_each(st, sandbox_id, fn, arg, err);
}

int store_token_delete(struct store *st, const char *hash, space_err *err)
{
	return st->ops->token_delete(st, hash, err);
}

int store_secret_put(struct store *st, const char *name, const char *value, const char *hosts,
		     struct secret_rec *out, bool *created, space_err *err)
{
	return st->ops->secret_put(st, name, value, hosts, out, created, err);
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
	store_flush(st, FLUSH_MS);
	return st->ops->intent_put(st, s, op, intent, err);
}

int store_intent_restore(struct store *st, const char *sandbox_id, const struct op_rec *op,
			 space_err *err)
{
	store_flush(st, FLUSH_MS);
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

/* ---- lifecycle events and webhooks ---- */

int store_event_put(struct store *st, const struct event_row *e, space_err *err)
{
	return st->ops->event_put(st, e, err);
}

int store_events_each(struct store *st, int64_t after, const char *sandbox_id, int limit, store_event_fn fn,
		      void *arg, space_err *err)
{
	return st->ops->events_each(st, after, sandbox_id, limit, fn, arg, err);
}

int store_events_max(struct store *st, int64_t *seq, space_err *err)
{
	return st->ops->events_max(st, seq, err);
}

int store_events_prune(struct store *st, int64_t before_ms, space_err *err)
{
	return st->ops->events_prune(st, before_ms, err);
}

int store_webhook_put(struct store *st, const char *id, int64_t cursor, const char *body, space_err *err)
{
	return st->ops->webhook_put(st, id, cursor, body, err);
}

int store_webhook_cursor(struct store *st, const char *id, int64_t cursor, space_err *err)
{
	return st->ops->webhook_cursor(st, id, cursor, err);
}

int store_webhook_delete(struct store *st, const char *id, space_err *err)
{
	return st->ops->webhook_delete(st, id, err);
}

int store_webhooks_each(struct store *st, store_webhook_fn fn, void *arg, space_err *err)
{
	return st->ops->webhooks_each(st, fn, arg, err);
}

int store_delivery_put(struct store *st, const char *webhook_id, int64_t time_ms, const char *body,
		       space_err *err)
{
	return st->ops->delivery_put(st, webhook_id, time_ms, body, err);
}

int store_deliveries_each(struct store *st, const char *webhook_id, int limit, store_delivery_fn fn, void *arg,
			  space_err *err)
{
	return st->ops->deliveries_each(st, webhook_id, limit, fn, arg, err);
}
