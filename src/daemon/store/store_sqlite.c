/* store_sqlite.c -- the SQLite back end: opening, schema migrations, shared helpers, its table
 * of entry points (store_backend.h) */
#include "store_sql.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"

#define BUSY_TIMEOUT_MS 5000

/* ---- helpers (store_sql.h) ---- */

static int code_of(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return EAGAIN;
	case SQLITE_FULL:
		return ENOSPC;
	case SQLITE_NOMEM:
		return ENOMEM;
	default:
		return EIO;
	}
}

int sq_fail(struct store *st, space_err *err, const char *ctx)
{
	return err_set(err, code_of(sqlite3_extended_errcode(sq_db(st))), "store: %s: %s", ctx,
		       sqlite3_errmsg(sq_db(st)));
}

int sq_prepare(struct store *st, sqlite3_stmt **out, const char *sql, space_err *err,
		  const char *ctx)
{
	if (sqlite3_prepare_v2(sq_db(st), sql, -1, out, NULL) != SQLITE_OK)
		return sq_fail(st, err, ctx);
	return 0;
}

int sq_exec(struct store *st, const char *sql, space_err *err, const char *ctx)
{
	if (sqlite3_exec(sq_db(st), sql, NULL, NULL, NULL) != SQLITE_OK)
		return sq_fail(st, err, ctx);
	return 0;
}

int sq_step_done(struct store *st, sqlite3_stmt *s, space_err *err, const char *ctx)
{
	if (sqlite3_step(s) != SQLITE_DONE)
		return sq_fail(st, err, ctx);
	return 0;
}

void sq_rollback(struct store *st)
{
	if (!sqlite3_get_autocommit(sq_db(st)))
		sqlite3_exec(sq_db(st), "ROLLBACK", NULL, NULL, NULL);
}

int sq_bind_text(sqlite3_stmt *s, int i, const char *v)
{
	return sqlite3_bind_text(s, i, v, -1, SQLITE_TRANSIENT);
}

int sq_bind_json(sqlite3_stmt *s, int i, const json_t *v)
{
	char *text;

	if (!v)
		return sqlite3_bind_null(s, i);
	text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	if (!text)
		return SQLITE_NOMEM;
	return sqlite3_bind_text(s, i, text, -1, free); /* sqlite frees it, also on error */
}

void sq_col_str(sqlite3_stmt *s, int i, char *out, size_t outlen)
{
	const char *v = (const char *)sqlite3_column_text(s, i);
	size_t n = v ? strlen(v) : 0;

	if (n >= outlen)
		n = outlen - 1;
	if (n)
		memcpy(out, v, n);
	out[n] = '\0';
}

int sq_col_json(sqlite3_stmt *s, int i, bool array, json_t **out, space_err *err,
		   const char *ctx)
{
	const char *text = (const char *)sqlite3_column_text(s, i);
	json_error_t jerr;
	json_t *v;

	*out = NULL;
	if (!text) {
		*out = array ? json_array() : json_object();
		return 0;
	}
	v = json_loads(text, JSON_DECODE_ANY, &jerr);
	if (!v || (array ? !json_is_array(v) : !json_is_object(v))) {
		json_decref(v);
		return err_set(err, EIO, "store: %s: column %s holds bad JSON: %s", ctx,
			       sqlite3_column_name(s, i), v ? "wrong type" : jerr.text);
	}
	*out = v;
	return 0;
}

int sq_col_state(sqlite3_stmt *s, int i, int (*parse)(const char *), int *out, space_err *err,
		    const char *ctx)
{
	const char *name = (const char *)sqlite3_column_text(s, i);
	int v = parse(name);

	if (v < 0)
		return err_set(err, EIO, "store: %s: unknown state '%s'", ctx, name ? name : "");
	*out = v;
	return 0;
}

int sq_get_row(struct store *st, const char *sql, const char *key, void *out, sq_row_fn rd,
		  space_err *err, const char *ctx)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	int rc;

	if (sq_prepare(st, &s, sql, err, ctx) < 0)
		return -1;
	if (sq_bind_text(s, 1, key) != SQLITE_OK)
		return sq_fail(st, err, ctx);
	rc = sqlite3_step(s);
	if (rc == SQLITE_DONE)
		return err_set(err, ENOENT, "store: %s: not found", ctx);
	if (rc != SQLITE_ROW)
		return sq_fail(st, err, ctx);
	return rd(s, out, err, ctx);
}

static void *vec_push(struct sq_vec *v)
{
	void *slot;

	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 16;
		void *p = reallocarray(v->items, cap, v->size);
		if (!p)
			return NULL;
		v->items = p;
		v->cap = cap;
	}
	slot = sq_vec_at(v, v->n++);
	memset(slot, 0, v->size);
	return slot;
}

int sq_collect(struct store *st, sqlite3_stmt *s, struct sq_vec *v, sq_row_fn rd,
		  space_err *err, const char *ctx)
{
	int rc;

	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		void *rec = vec_push(v);
		if (!rec)
			return err_set(err, ENOMEM, "store: %s: out of memory", ctx);
		if (rd(s, rec, err, ctx) < 0) {
			v->n--; /* the reader left nothing owned in it */
			return -1;
		}
	}
	if (rc != SQLITE_DONE)
		return sq_fail(st, err, ctx);
	sqlite3_reset(s); /* ends the read before callbacks may write */
	return 0;
}

void sq_vec_free(struct sq_vec *v)
{
	for (size_t i = 0; i < v->n && v->clear; i++)
		v->clear(sq_vec_at(v, i));
	free(v->items);
	v->items = NULL;
	v->n = v->cap = 0;
}

/* ---- schema ---- */

/*
 * Migrations, applied in order, each in its own transaction that also sets
 * PRAGMA user_version to its index + 1.  Append new steps; never edit one that
 * has shipped.  A step may be SQL, a function (for data rewrites), or both.
 */
struct migration {
	const char *sql;
	int (*fn)(struct store *st, space_err *err);
};

/* 1: the first schema.  No foreign key from operations to sandboxes: an
 * operation may be recorded before its sandbox row, and later kinds need not
 * have a sandbox at all. */
/* clang-format off */
static const char schema_v1[] =
	"CREATE TABLE templates ("
	" digest TEXT PRIMARY KEY,"
	" name TEXT NOT NULL,"
	" dir TEXT NOT NULL,"
	" vcpus INTEGER NOT NULL,"
	" memory_mib INTEGER NOT NULL,"
	" default_user TEXT NOT NULL,"
	" env TEXT,"
	" created_ms INTEGER NOT NULL,"
	" image_bytes INTEGER NOT NULL);"
	"CREATE INDEX templates_name ON templates(name);"
	"CREATE TABLE template_tags ("
	" tag TEXT PRIMARY KEY,"
	" digest TEXT NOT NULL REFERENCES templates(digest));"
	"CREATE INDEX template_tags_digest ON template_tags(digest);"
	"CREATE TABLE sandboxes ("
	" id TEXT PRIMARY KEY,"
	" state TEXT NOT NULL,"
	" template_ref TEXT NOT NULL,"
	" template_digest TEXT NOT NULL,"
	" vcpus INTEGER NOT NULL,"
	" memory_mib INTEGER NOT NULL,"
	" env TEXT,"
	" metadata TEXT,"
	" timeout_s INTEGER NOT NULL,"
	" created_ms INTEGER NOT NULL,"
	" updated_ms INTEGER NOT NULL,"
	" expires_ms INTEGER NOT NULL,"
	" pid INTEGER NOT NULL,"
	" pid_start INTEGER NOT NULL,"
	" next_chan INTEGER NOT NULL,"
	" error TEXT NOT NULL);"
	"CREATE INDEX sandboxes_state ON sandboxes(state);"
	"CREATE INDEX sandboxes_created ON sandboxes(created_ms);"
	"CREATE TABLE operations ("
	" id TEXT PRIMARY KEY,"
	" kind TEXT NOT NULL,"
	" sandbox_id TEXT NOT NULL,"
	" state TEXT NOT NULL,"
	" error TEXT NOT NULL,"
	" created_ms INTEGER NOT NULL,"
	" updated_ms INTEGER NOT NULL);"
	"CREATE INDEX operations_state ON operations(state, created_ms);"
	"CREATE INDEX operations_sandbox ON operations(sandbox_id);"
	"CREATE TABLE sessions ("
	" id TEXT PRIMARY KEY,"
	" sandbox_id TEXT NOT NULL REFERENCES sandboxes(id),"
	" chan INTEGER NOT NULL,"
	" argv TEXT,"
	" env TEXT,"
	" cwd TEXT NOT NULL,"
	" user TEXT NOT NULL,"
	" stdin_open INTEGER NOT NULL,"
	" state TEXT NOT NULL,"
	" pid INTEGER NOT NULL,"
	" exit_code INTEGER NOT NULL,"
	" exit_signal INTEGER NOT NULL,"
	" error TEXT NOT NULL,"
	" token_hash TEXT NOT NULL,"
	" token_expires_ms INTEGER NOT NULL,"
	" created_ms INTEGER NOT NULL,"
	" started_ms INTEGER NOT NULL,"
	" ended_ms INTEGER NOT NULL);"
	"CREATE INDEX sessions_sandbox ON sessions(sandbox_id, created_ms);"
	"CREATE TABLE kv ("
	" key TEXT PRIMARY KEY,"
	" value TEXT NOT NULL);";

/* 2: lifecycle. Sandboxes learn their disk layer, lineage, how they started,
 * what their timeout does and who they are for; operations keep what they
 * made; snapshots (ready, named, suspend, fork) get a table. A named
 * snapshot's name is unique among named ones. */
static const char schema_v2[] =
	"ALTER TABLE sandboxes ADD COLUMN disk TEXT NOT NULL DEFAULT '';"
	"ALTER TABLE sandboxes ADD COLUMN parent_id TEXT NOT NULL DEFAULT '';"
	"ALTER TABLE sandboxes ADD COLUMN snapshot_id TEXT NOT NULL DEFAULT '';"
	"ALTER TABLE sandboxes ADD COLUMN source_snapshot TEXT NOT NULL DEFAULT '';"
	"ALTER TABLE sandboxes ADD COLUMN start_kind TEXT NOT NULL DEFAULT 'boot';"
	"ALTER TABLE sandboxes ADD COLUMN on_timeout TEXT NOT NULL DEFAULT 'delete';"
	"ALTER TABLE sandboxes ADD COLUMN role TEXT NOT NULL DEFAULT 'user';"
	"ALTER TABLE sandboxes ADD COLUMN prev_state TEXT NOT NULL DEFAULT 'running';"
	"ALTER TABLE operations ADD COLUMN result TEXT;"
	"CREATE TABLE snapshots ("
	" id TEXT PRIMARY KEY,"
	" kind TEXT NOT NULL,"
	" state TEXT NOT NULL,"
	" name TEXT NOT NULL,"
	" sandbox_id TEXT NOT NULL,"
	" template_ref TEXT NOT NULL,"
	" template_digest TEXT NOT NULL,"
	" vcpus INTEGER NOT NULL,"
	" memory_mib INTEGER NOT NULL,"
	" env TEXT,"
	" next_chan INTEGER NOT NULL,"
	" dir TEXT NOT NULL,"
	" disk TEXT NOT NULL,"
	" bytes INTEGER NOT NULL,"
	" created_ms INTEGER NOT NULL,"
	" error TEXT NOT NULL);"
	"CREATE UNIQUE INDEX snapshots_name ON snapshots(name) WHERE name <> '';"
	"CREATE INDEX snapshots_kind ON snapshots(kind, template_digest);";
/* 3: the jail. A sandbox records the uid its QEMU runs as, so that
 * adoption after a restart can refuse a process of any other uid. */
static const char schema_v3[] =
	"ALTER TABLE sandboxes ADD COLUMN jail_uid INTEGER NOT NULL DEFAULT 0;";
/* 4: egress (docs/design/egress.md). A sandbox keeps its policy (secret names only), a
 * template its default one; snapshots say whether their VM had the network device (those
 * from before never did: 0); secrets get a table of their own. */
static const char schema_v4[] =
	"ALTER TABLE sandboxes ADD COLUMN network TEXT;"
	"ALTER TABLE templates ADD COLUMN network TEXT;"
	"ALTER TABLE snapshots ADD COLUMN net INTEGER NOT NULL DEFAULT 0;"
	"CREATE TABLE secrets ("
	" name TEXT PRIMARY KEY,"
	" value TEXT NOT NULL,"
	" created_ms INTEGER NOT NULL,"
	" updated_ms INTEGER NOT NULL);";
/* 5: channel kinds (docs/design/channels.md). A session says what its channel is and, for a
 * terminal, its size; data-plane tokens with a scope other than one session get a table. */
static const char schema_v5[] =
	"ALTER TABLE sessions ADD COLUMN kind TEXT NOT NULL DEFAULT 'process';"
	"ALTER TABLE sessions ADD COLUMN pty_rows INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE sessions ADD COLUMN pty_cols INTEGER NOT NULL DEFAULT 0;"
	"CREATE TABLE tokens ("
	" hash TEXT PRIMARY KEY,"
	" sandbox_id TEXT NOT NULL,"
	" scope TEXT NOT NULL,"
	" expires_ms INTEGER NOT NULL);"
	"CREATE INDEX tokens_sandbox ON tokens(sandbox_id);";
/* 6: a session may carry a tag its client finds it by (E2B's process tag). */
static const char schema_v6[] =
	"ALTER TABLE sessions ADD COLUMN tag TEXT NOT NULL DEFAULT '';";
/* 7: the cluster (docs/design/store.md, docs/design/cluster.md). A sandbox has the node that
 * owns it, a generation bumped on every write (conditional updates compare it) and the intent
 * a node acts on once it claims the row (NULL: none); operations and snapshots have the node
 * that runs or holds them; nodes register in a table of their own with their lease. The
 * partial index serves claims (rows with an intent and no node, oldest first). */
static const char schema_v7[] =
	"ALTER TABLE sandboxes ADD COLUMN node_id TEXT NOT NULL DEFAULT '';"
	"ALTER TABLE sandboxes ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN intent TEXT;"
	"ALTER TABLE operations ADD COLUMN node_id TEXT NOT NULL DEFAULT '';"
	"ALTER TABLE snapshots ADD COLUMN node_id TEXT NOT NULL DEFAULT '';"
	"CREATE TABLE nodes ("
	" id TEXT PRIMARY KEY,"
	" state TEXT NOT NULL,"
	" api_url TEXT NOT NULL,"
	" data_url TEXT NOT NULL,"
	" memory_mib INTEGER NOT NULL,"
	" vcpus INTEGER NOT NULL,"
	" used_memory_mib INTEGER NOT NULL,"
	" used_vcpus INTEGER NOT NULL,"
	" sandboxes INTEGER NOT NULL,"
	" started_ms INTEGER NOT NULL,"
	" renewed_ms INTEGER NOT NULL,"
	" lease_expires_ms INTEGER NOT NULL);"
	"CREATE INDEX sandboxes_node ON sandboxes(node_id, state);"
	"CREATE INDEX sandboxes_intent ON sandboxes(created_ms) WHERE intent IS NOT NULL;"
	"CREATE INDEX operations_node ON operations(node_id, state);"
	"CREATE INDEX snapshots_node ON snapshots(node_id, created_ms);"
	"CREATE INDEX nodes_lease ON nodes(state, lease_expires_ms);";
/* 8: a secret is bound to the hosts it may be sent to (docs/design/egress.md "Secrets"); one
 * stored before is bound to none, so it is sent nowhere until it is put again with hosts. */
static const char schema_v8[] =
	"ALTER TABLE secrets ADD COLUMN hosts TEXT NOT NULL DEFAULT '[]';";
/* 9: a template's defaults beyond env and user (a build's workdir, start command, exposed
 * ports, labels: template.json's), as one JSON object; NULL for the ones make builds. */
static const char schema_v9[] =
	"ALTER TABLE templates ADD COLUMN config TEXT;";
/* 10: lifecycle events (their cursor is seq), webhooks (the cursor of the last event each is
 * done with) and a log of their delivery attempts (docs/design/events.md). */
static const char schema_v10[] =
	"CREATE TABLE events ("
	" seq INTEGER PRIMARY KEY,"
	" time_ms INTEGER NOT NULL,"
	" sandbox_id TEXT NOT NULL,"
	" body TEXT NOT NULL);"
	"CREATE INDEX events_sandbox ON events(sandbox_id, seq);"
	"CREATE INDEX events_time ON events(time_ms);"
	"CREATE TABLE webhooks ("
	" id TEXT PRIMARY KEY,"
	" cursor INTEGER NOT NULL,"
	" body TEXT NOT NULL);"
	"CREATE TABLE webhook_deliveries ("
	" n INTEGER PRIMARY KEY AUTOINCREMENT,"
	" webhook_id TEXT NOT NULL,"
	" time_ms INTEGER NOT NULL,"
	" body TEXT NOT NULL);"
	"CREATE INDEX webhook_deliveries_hook ON webhook_deliveries(webhook_id, n);"
	"CREATE INDEX webhook_deliveries_time ON webhook_deliveries(time_ms);";
/* clang-format on */

static const struct migration migrations[] = {
	{ .sql = schema_v1 },
	{ .sql = schema_v2 },
	{ .sql = schema_v3 },
	{ .sql = schema_v4 },
	{ .sql = schema_v5 },
	{ .sql = schema_v6 },
	{ .sql = schema_v7 },
	{ .sql = schema_v8 },
	{ .sql = schema_v9 },
	{ .sql = schema_v10 },
};

#define SCHEMA_VERSION ((int)(sizeof(migrations) / sizeof(migrations[0])))

static int user_version(struct store *st, int *out, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;

	if (sq_prepare(st, &s, "PRAGMA user_version", err, "read schema version") < 0)
		return -1;
	if (sqlite3_step(s) != SQLITE_ROW)
		return sq_fail(st, err, "read schema version");
	*out = sqlite3_column_int(s, 0);
	return 0;
}

static int migrate_one(struct store *st, int to, space_err *err)
{
	const struct migration *m = &migrations[to - 1];
	char ctx[64], sql[64];
	int have;

	snprintf(ctx, sizeof(ctx), "migrate schema to version %d", to);
	/* IMMEDIATE: a second daemon opening the same file waits, then sees
	 * the step done and skips it. */
	if (sq_exec(st, "BEGIN IMMEDIATE", err, ctx) < 0)
		return -1;
	if (user_version(st, &have, err) < 0)
		goto fail;
	if (have >= to)
		return sq_exec(st, "COMMIT", err, ctx);
	if (m->sql && sq_exec(st, m->sql, err, ctx) < 0)
		goto fail;
	if (m->fn && m->fn(st, err) < 0) {
		err_wrap(err, "store: %s", ctx);
		goto fail;
	}
	/* PRAGMA takes no parameters; `to` is our own constant, not input. */
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", to);
	if (sq_exec(st, sql, err, ctx) < 0 || sq_exec(st, "COMMIT", err, ctx) < 0)
		goto fail;
	return 0;
fail:
	sq_rollback(st);
	return -1;
}

static int migrate(struct store *st, space_err *err)
{
	int v;

	if (user_version(st, &v, err) < 0)
		return -1;
	if (v > SCHEMA_VERSION)
		return err_set(err, EIO,
			       "store: schema version %d is newer than this spaced knows (%d)", v,
			       SCHEMA_VERSION);
	for (int to = v + 1; to <= SCHEMA_VERSION; to++) {
		if (migrate_one(st, to, err) < 0)
			return -1;
		if (to > 1)
			log_info("store: migrated schema to version %d", to);
	}
	return 0;
}

static const struct store_ops sqlite_ops;

int store_sqlite_open(struct store **out, const char *path, space_err *err)
{
	_cleanup_free_ struct sqlite_store *sq = calloc(1, sizeof(*sq));
	struct store *st;
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	const char *mode;
	int fd, rc;

	if (!sq)
		return err_sys(err, ENOMEM, "store: open %s", path);
	st = &sq->base;
	st->ops = &sqlite_ops;
	/* Create it private before SQLite does (it would honour the umask):
	 * the kv table holds the API key.  SQLite gives -wal and -shm the
	 * database file's mode. */
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return err_sys(err, errno, "store: open %s", path);
	close(fd);

	rc = sqlite3_open_v2(path, &sq->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
	if (rc != SQLITE_OK) {
		err_set(err, code_of(rc), "store: open %s: %s", path,
			sq_db(st) ? sqlite3_errmsg(sq_db(st)) : sqlite3_errstr(rc));
		sqlite3_close(sq_db(st));
		return -1;
	}
	sqlite3_busy_timeout(sq_db(st), BUSY_TIMEOUT_MS);
	sqlite3_db_config(sq_db(st), SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
	sqlite3_db_config(sq_db(st), SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL);

	/* WAL: readers never block the writer and a commit is one append;
	 * NORMAL: a power cut may lose the last commits but never corrupts. */
	if (sq_prepare(st, &s, "PRAGMA journal_mode = WAL", err, "set journal mode") < 0)
		goto fail;
	if (sqlite3_step(s) != SQLITE_ROW) {
		sq_fail(st, err, "set journal mode");
		goto fail;
	}
	mode = (const char *)sqlite3_column_text(s, 0);
	if (!mode || strcmp(mode, "wal") != 0)
		log_warn("store: %s: WAL unavailable here, journal mode is %s", path,
			 mode ? mode : "unknown");
	sqlite3_finalize(s);
	s = NULL;
	if (sq_exec(st, "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON", err,
		       "set pragmas") < 0)
		goto fail;
	if (migrate(st, err) < 0)
		goto fail;
	*out = &((struct sqlite_store *)steal_pointer(&sq))->base;
	return 0;
fail:
	err_wrap(err, "opening %s", path);
	sqlite3_finalize(steal_pointer(&s));
	sqlite3_close(sq_db(st));
	return -1;
}

static void sq_close(struct store *st)
{
	sqlite3_exec(sq_db(st), "PRAGMA optimize", NULL, NULL, NULL);
	if (sqlite3_close(sq_db(st)) != SQLITE_OK)
		log_warn("store: close: %s", sqlite3_errmsg(sq_db(st)));
	free(st);
}

static int sq_ping(struct store *st, space_err *err)
{
	return sq_exec(st, "SELECT 1", err, "ping");
}

static const struct store_ops sqlite_ops = {
	.name = "sqlite",
	.close = sq_close,
	.ping = sq_ping,
	.template_put = sq_template_put,
	.template_resolve = sq_template_resolve,
	.template_get = sq_template_get,
	.template_each = sq_template_each,
	.template_named = sq_template_named,
	.template_untag = sq_template_untag,
	.sandbox_put = sq_sandbox_put,
	.sandbox_put_if = sq_sandbox_put_if,
	.sandbox_get = sq_sandbox_get,
	.sandbox_each = sq_sandbox_each,
	.op_put = sq_op_put,
	.op_get = sq_op_get,
	.op_each_open = sq_op_each_open,
	.session_put = sq_session_put,
	.session_get = sq_session_get,
	.session_each = sq_session_each,
	.snapshot_put = sq_snapshot_put,
	.snapshot_get = sq_snapshot_get,
	.snapshot_get_by_name = sq_snapshot_get_by_name,
	.snapshot_each = sq_snapshot_each,
	.snapshot_delete = sq_snapshot_delete,
	.token_put = sq_token_put,
	.token_get = sq_token_get,
	.tokens_prune = sq_tokens_prune,
	.tokens_each = sq_tokens_each,
	.token_delete = sq_token_delete,
	.event_put = sq_event_put,
	.events_each = sq_events_each,
	.events_max = sq_events_max,
	.events_prune = sq_events_prune,
	.webhook_put = sq_webhook_put,
	.webhook_cursor = sq_webhook_cursor,
	.webhook_delete = sq_webhook_delete,
	.webhooks_each = sq_webhooks_each,
	.delivery_put = sq_delivery_put,
	.deliveries_each = sq_deliveries_each,
	.secret_put = sq_secret_put,
	.secret_get = sq_secret_get,
	.secret_delete = sq_secret_delete,
	.secret_each = sq_secret_each,
	.intent_put = sq_intent_put,
	.intent_restore = sq_intent_restore,
	.claim = sq_claim,
	.node_put = sq_node_put,
	.node_get = sq_node_get,
	.node_each = sq_node_each,
	.nodes_expire = sq_nodes_expire,
	.kv_get = sq_kv_get,
	.kv_set = sq_kv_set,
};
