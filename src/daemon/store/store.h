/* store.h -- persistent state: SQLite (WAL, the single-node default) or PostgreSQL (a cluster's
 * shared desired state), behind one interface (store_backend.h is the seam; docs/design/store.md) */
#ifndef SPACE_STORE_H
#define SPACE_STORE_H

#include "err.h"
#include "model/model.h"

struct store;

/* Opens (creating mode 0600 and migrating the schema as needed) the SQLite file <path>;
 * refuses a file whose schema is newer than this build knows. */
int store_open(struct store **out, const char *path, space_err *err);
/* --store: "sqlite:PATH", or "postgres://..." / "postgresql://..." (a libpq URI). Migrates
 * the schema as needed (PostgreSQL: under an advisory lock, so that processes starting
 * together migrate once); refuses a schema newer than this build. EINVAL for another scheme. */
int store_open_url(struct store **out, const char *url, space_err *err);
void store_close(struct store *st);
/* Moves what libpq would read from the environment as a secret (PGPASSWORD) into the store's
 * memory and out of the environment, so that no process the daemon starts (a gateway, a helper)
 * inherits it. Once, at start-up, before any thread. */
void store_take_env_secrets(void);
/* "sqlite" or "postgres". */
const char *store_backend(const struct store *st);
/* One round trip (readiness probes): 0 when the database answers. */
int store_ping(struct store *st, space_err *err);

/* Cluster scope (docs/design/cluster.md). A node sets its id once after opening; from then
 * on the store acts for that node only:
 *  - sandbox, op and snapshot puts stamp node_id with it;
 *  - store_sandbox_put updates a row only while it still belongs to this node and is not
 *    lost (ESTALE otherwise: another process moved it or marked it lost), a fence against a
 *    node that lost its lease and does not know it yet;
 *  - store_sandbox_each, store_op_each_open, store_session_each(NULL, ...) and
 *    store_snapshot_each return this node's rows only (gets by id see every row).
 * Without a scope ("", the default: --role all and --role api) every row is seen and puts
 * keep the node_id the record carries. */
void store_set_node(struct store *st, const char *node_id);
/* A node's own copy of each template: records read back have dir = <images>/<digest hex>
 * whichever node wrote the row last (every node imports templates into its own state dir;
 * the rows are shared by digest). "" (the default) leaves dir as stored. With write-behind
 * the writer's connection takes it too, behind what is queued (its reads: store_async). */
void store_set_images(struct store *st, const char *images);
const char *store_images(const struct store *st); /* "" when none */

/* Off the caller's thread (docs/design/store.md, "Write-behind"). A daemon's loop must never
 * wait on the database for the writes it makes on every change, so once write-behind is on:
 *  - store_sandbox_put, store_op_put and store_session_put copy the record, queue it and
 *    return 0 at once; a thread with a connection of its own (to url) writes rows in the order
 *    they were first put, a newer put of a row replacing the version still waiting;
 *  - gets of those rows answer with the newest version put (its generation is the one the
 *    caller gave), lists merge the versions not yet written into what the database returns;
 *  - a write that fails is tried again (newest version first, backing off to every 2 s) until
 *    the database takes it, except for its final answers: the fence (ESTALE), a record it
 *    refuses (EINVAL), a conflict (EEXIST), which are logged and the row's write dropped;
 *  - the conditional and cluster writes (store_sandbox_put_if, store_intent_*) wait for the
 *    queue first; store_close drains it (trying failed rows again for up to 10 s).
 * Without it (the default) every call is a round trip on the caller's thread. */
int store_write_behind(struct store *st, const char *url, space_err *err);
/* Reads (or anything) that must see every write queued before them, off the caller's thread:
 * fn runs on the writer's thread with its connection (after the writes queued before it);
 * then done(arg, true) is called by store_async_poll on the caller's thread, which polls when
 * store_async_fd becomes readable. done(arg, false) when the store closes first. Without
 * write-behind fn and done run at once. */
int store_async(struct store *st, void (*fn)(struct store *conn, void *arg),
		void (*done)(void *arg, bool ran), void *arg, space_err *err);
int store_async_fd(const struct store *st); /* -1 without write-behind */
void store_async_poll(struct store *st);
/* Waits up to timeout_ms for the queued writes to be tried; returns how many rows still wait
 * (0 without write-behind). */
int store_flush(struct store *st, int timeout_ms);
struct store_write_stats {
	uint64_t pending;  /* rows put and not yet written */
	uint64_t written;  /* writes the database took */
	uint64_t retried;  /* tries that failed and will be made again */
	uint64_t dropped;  /* writes given up (final answer, or exiting) */
};
/* All zero without write-behind. */
void store_write_stats(struct store *st, struct store_write_stats *out);

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
/* Every template of that name (tagged or not), newest first, each with its current tags: its
 * history. */
int store_template_named(struct store *st, const char *name, int (*fn)(const struct template_rec *, void *),
			 void *arg, space_err *err);
/* ref "name:tag": that tag goes; "name": every tag of that name. The templates stay (their
 * files too: sandboxes made from them keep running); *removed: how many tags went. */
int store_template_untag(struct store *st, const char *ref, int *removed, space_err *err);
/* Calls fn for each template that currently holds at least one tag, by name
 * then creation; the record includes its tags, sorted. */
int store_template_each(struct store *st, int (*fn)(const struct template_rec *, void *), void *arg, space_err *err);

/* Insert or update in place (the row keeps its place in creation order). Every write adds one
 * to the row's generation (the record's generation is ignored). ESTALE: see store_set_node. */
int store_sandbox_put(struct store *st, const struct sandbox_rec *s, space_err *err);
/* The conditional update: writes s only if the row's generation is still `generation`
 * (ESTALE otherwise, nothing written; ENOENT when there is no such row; in a scoped store
 * the fence applies too); on success *new_generation (may be NULL) is the row's generation
 * now. */
int store_sandbox_put_if(struct store *st, const struct sandbox_rec *s, int64_t generation,
			 int64_t *new_generation, space_err *err);
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
/* Every token row of one sandbox (expired ones too), in no set order: fn returns 0 to go on,
 * anything else to stop (returned). delete: ENOENT when there is no such row. */
typedef int (*store_token_fn)(const char *hash, const char *scope, int64_t expires_ms, void *arg);
int store_tokens_each(struct store *st, const char *sandbox_id, store_token_fn fn, void *arg, space_err *err);
int store_token_delete(struct store *st, const char *hash, space_err *err);

/* Lifecycle events (schema v10; docs/design/events.md). seq is the event's cursor, given by
 * events.c (one past the largest stored at start); body is the event as JSON text, whole.
 * each: rows with seq > after, ascending, of one sandbox (NULL: all), at most limit (0: no
 * bound); fn returns 0 to go on. prune: rows older than before_ms, and deliveries too. */
struct event_row {
	int64_t seq, time_ms;
	char sandbox_id[ID_LEN];
	const char *body;
};
typedef int (*store_event_fn)(const struct event_row *e, void *arg);
int store_event_put(struct store *st, const struct event_row *e, space_err *err);
int store_events_each(struct store *st, int64_t after, const char *sandbox_id, int limit, store_event_fn fn,
		      void *arg, space_err *err);
int store_events_max(struct store *st, int64_t *seq, space_err *err);
int store_events_prune(struct store *st, int64_t before_ms, space_err *err);
/* Webhooks: id, the cursor of the last event it is done with, and its record (JSON text: url,
 * events, format, secret, created). put inserts or replaces; delete takes its deliveries too
 * (ENOENT: none). Deliveries: one row per attempt, newest first, at most limit. */
typedef int (*store_webhook_fn)(const char *id, int64_t cursor, const char *body, void *arg);
int store_webhook_put(struct store *st, const char *id, int64_t cursor, const char *body, space_err *err);
int store_webhook_cursor(struct store *st, const char *id, int64_t cursor, space_err *err);
int store_webhook_delete(struct store *st, const char *id, space_err *err);
int store_webhooks_each(struct store *st, store_webhook_fn fn, void *arg, space_err *err);
typedef int (*store_delivery_fn)(int64_t time_ms, const char *body, void *arg);
int store_delivery_put(struct store *st, const char *webhook_id, int64_t time_ms, const char *body,
		       space_err *err);
int store_deliveries_each(struct store *st, const char *webhook_id, int limit, store_delivery_fn fn, void *arg,
			  space_err *err);

/* Egress secrets (schema v4; hosts v8): values the gateways inject, never shown, and the hosts
 * each may be sent to (a JSON array of names and *.suffix patterns, as text; "[]" for one
 * stored before bindings: it is sent nowhere). put: insert or replace the value and hosts
 * (*created true when the name was new); the record's times are set by the store. get: the
 * metadata (hosts included) only unless value != NULL (then *value is malloc'ed: clear and free
 * it). delete: ENOENT if unknown. each: names, hosts and times, by name. */
#define SECRET_HOSTS_MAX 4096
struct secret_rec {
	char name[72];
	int64_t created_ms, updated_ms;
	char hosts[SECRET_HOSTS_MAX];
};
int store_secret_put(struct store *st, const char *name, const char *value, const char *hosts,
		     struct secret_rec *out, bool *created, space_err *err);
int store_secret_get(struct store *st, const char *name, struct secret_rec *out, char **value,
		     space_err *err);
int store_secret_delete(struct store *st, const char *name, space_err *err);
int store_secret_each(struct store *st, int (*fn)(const struct secret_rec *, void *), void *arg,
		      space_err *err);

/* ---- cluster (schema v7, docs/design/cluster.md) ---- */

/* Notifications: what other processes wrote, pushed (PostgreSQL LISTEN/NOTIFY; its schema v3
 * has the triggers). STORE_CHANNEL_INTENT: a row waits for a node to claim it (payload "");
 * STORE_CHANNEL_OP: an operation is done (payload: its id). Sent at commit, so a reader woken
 * by one sees the row. */
#define STORE_CHANNEL_INTENT "space_intent"
#define STORE_CHANNEL_OP "space_op"
struct store_listener;
/* A connection of its own that listens on channels[0..n): ENOTSUP for a store URL that is not
 * PostgreSQL's (one process, nothing to hear), EAGAIN when the server cannot be reached. */
int store_listener_open(const char *url, const char *const *channels, int n,
			struct store_listener **out, space_err *err);
/* Readable when notifications (or the connection's end) arrived: watch it on the loop. */
int store_listener_fd(const struct store_listener *l);
/* Calls fn for each notification that arrived, without blocking. -1 when the connection is
 * gone (close, and open again: what was sent meanwhile is lost). */
int store_listener_drain(struct store_listener *l,
			 void (*fn)(const char *channel, const char *payload, void *arg), void *arg,
			 space_err *err);
void store_listener_close(struct store_listener *l);

/* A create written as intent by an api process: the sandbox row (state creating, node_id "")
 * and its pending create operation, in one transaction. intent is what a node needs to act:
 * {"kind": "create", "request": <the create request body, as validated>}. EEXIST when the
 * sandbox exists (nothing written); EINVAL unless s is creating and intent an object. */
int store_intent_put(struct store *st, const struct sandbox_rec *s, const struct op_rec *op,
		     const json_t *intent, space_err *err);
/* A restore of a suspended sandbox that no node owns (node_id ""): sets the intent
 * {"kind": "restore"} and writes op (pending; the claim moves it to the claiming node with
 * the sandbox, where it is the sandbox's open restore operation), so that any node may
 * claim it. EINVAL when the
 * sandbox is not suspended or a node owns it. */
int store_intent_restore(struct store *st, const char *sandbox_id, const struct op_rec *op,
			 space_err *err);
/* Claims up to max rows (creating or suspended) with an intent and no node, oldest first,
 * whose memory_mib fits in
 * room_mib (each one counted against it in turn), for node_id: sets their node_id, clears
 * the intent, moves their open operations to node_id too, one transaction. PostgreSQL
 * locks the candidates with FOR UPDATE SKIP LOCKED, so two nodes claiming at once never
 * take the same row and never wait for each other. fn is called after the commit with
 * each claimed record (node_id set) and its intent (lent for the call). */
int store_claim(struct store *st, const char *node_id, int max, int room_mib,
		int (*fn)(const struct sandbox_rec *, const json_t *intent, void *), void *arg,
		space_err *err);

enum node_state { NODE_UP, NODE_LOST, NODE__COUNT };
const char *node_state_name(enum node_state s);
int node_state_parse(const char *name);

struct node_rec {
	char id[64];
	enum node_state state;
	char api_url[256];        /* its control plane, as api processes reach it */
	char data_url[256];       /* its data plane, as api processes reach it */
	int memory_mib, vcpus;    /* capacity for sandboxes */
	int used_memory_mib, used_vcpus, sandboxes; /* taken now (as of its last renewal) */
	int64_t started_ms, renewed_ms, lease_expires_ms;
};
/* Registers or renews (upsert; state up). */
int store_node_put(struct store *st, const struct node_rec *n, space_err *err);
int store_node_get(struct store *st, const char *id, struct node_rec *out, space_err *err);
/* Every node, by id. */
int store_node_each(struct store *st, int (*fn)(const struct node_rec *, void *), void *arg,
		    space_err *err);
/* Every node still up whose lease ended before now becomes lost, and in the same
 * transaction each of its sandboxes: those suspended (their state is on shared storage)
 * keep their state and lose their node (node_id "", so another node may restore them);
 * the others not deleted, failed or lost become lost with error "node <id> lost: lease
 * expired at <ms>" and their open operations fail with that reason. Safe to run from many
 * processes at once. *nodes and *sandboxes (may be NULL) count what changed. */
int store_nodes_expire(struct store *st, int64_t now, int *nodes, int *sandboxes, space_err *err);

/* Small key/value table for host facts (accelerator probe result, api key).
 * kv_get: ENOENT for an unknown key, E2BIG if the value and its NUL do not fit
 * in outlen. */
int store_kv_get(struct store *st, const char *key, char *out, size_t outlen, space_err *err);
int store_kv_set(struct store *st, const char *key, const char *value, space_err *err);

#endif
