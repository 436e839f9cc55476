/* store.c -- the SQLite store: opening, schema migrations, shared helpers, key/value */
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

int store_fail(struct store *st, space_err *err, const char *ctx)
{
	return err_set(err, code_of(sqlite3_extended_errcode(st->db)), "store: %s: %s", ctx,
		       sqlite3_errmsg(st->db));
}

int store_prepare(struct store *st, sqlite3_stmt **out, const char *sql, space_err *err,
		  const char *ctx)
{
	if (sqlite3_prepare_v2(st->db, sql, -1, out, NULL) != SQLITE_OK)
		return store_fail(st, err, ctx);
	return 0;
}

int store_exec(struct store *st, const char *sql, space_err *err, const char *ctx)
{
	if (sqlite3_exec(st->db, sql, NULL, NULL, NULL) != SQLITE_OK)
		return store_fail(st, err, ctx);
	return 0;
}

int store_step_done(struct store *st, sqlite3_stmt *s, space_err *err, const char *ctx)
{
	if (sqlite3_step(s) != SQLITE_DONE)
		return store_fail(st, err, ctx);
	return 0;
}

void store_rollback(struct store *st)
{
	if (!sqlite3_get_autocommit(st->db))
		sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
}

int store_bind_text(sqlite3_stmt *s, int i, const char *v)
{
	return sqlite3_bind_text(s, i, v, -1, SQLITE_TRANSIENT);
}

int store_bind_json(sqlite3_stmt *s, int i, const json_t *v)
{
	char *text;

	if (!v)
		return sqlite3_bind_null(s, i);
	text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	if (!text)
		return SQLITE_NOMEM;
	return sqlite3_bind_text(s, i, text, -1, free); /* sqlite frees it, also on error */
}

void store_col_str(sqlite3_stmt *s, int i, char *out, size_t outlen)
{
	const char *v = (const char *)sqlite3_column_text(s, i);
	size_t n = v ? strlen(v) : 0;

	if (n >= outlen)
		n = outlen - 1;
	if (n)
		memcpy(out, v, n);
	out[n] = '\0';
}

int store_col_json(sqlite3_stmt *s, int i, bool array, json_t **out, space_err *err,
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

int store_col_state(sqlite3_stmt *s, int i, int (*parse)(const char *), int *out, space_err *err,
		    const char *ctx)
{
	const char *name = (const char *)sqlite3_column_text(s, i);
	int v = parse(name);

	if (v < 0)
		return err_set(err, EIO, "store: %s: unknown state '%s'", ctx, name ? name : "");
	*out = v;
	return 0;
}

int store_get_row(struct store *st, const char *sql, const char *key, void *out, store_row_fn rd,
		  space_err *err, const char *ctx)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	int rc;

	if (store_prepare(st, &s, sql, err, ctx) < 0)
		return -1;
	if (store_bind_text(s, 1, key) != SQLITE_OK)
		return store_fail(st, err, ctx);
	rc = sqlite3_step(s);
	if (rc == SQLITE_DONE)
		return err_set(err, ENOENT, "store: %s: not found", ctx);
	if (rc != SQLITE_ROW)
		return store_fail(st, err, ctx);
	return rd(s, out, err, ctx);
}

static void *vec_push(struct store_vec *v)
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
	slot = store_vec_at(v, v->n++);
	memset(slot, 0, v->size);
	return slot;
}

int store_collect(struct store *st, sqlite3_stmt *s, struct store_vec *v, store_row_fn rd,
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
		return store_fail(st, err, ctx);
	sqlite3_reset(s); /* ends the read before callbacks may write */
	return 0;
}

void store_vec_free(struct store_vec *v)
{
	for (size_t i = 0; i < v->n && v->clear; i++)
		v->clear(store_vec_at(v, i));
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
/* clang-format on */

static const struct migration migrations[] = {
	{ .sql = schema_v1 },
	{ .sql = schema_v2 },
	{ .sql = schema_v3 },
	{ .sql = schema_v4 },
	{ .sql = schema_v5 },
	{ .sql = schema_v6 },
};

#define SCHEMA_VERSION ((int)(sizeof(migrations) / sizeof(migrations[0])))

static int user_version(struct store *st, int *out, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;

	if (store_prepare(st, &s, "PRAGMA user_version", err, "read schema version") < 0)
		return -1;
	if (sqlite3_step(s) != SQLITE_ROW)
		return store_fail(st, err, "read schema version");
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
	if (store_exec(st, "BEGIN IMMEDIATE", err, ctx) < 0)
		return -1;
	if (user_version(st, &have, err) < 0)
		goto fail;
	if (have >= to)
		return store_exec(st, "COMMIT", err, ctx);
	if (m->sql && store_exec(st, m->sql, err, ctx) < 0)
		goto fail;
	if (m->fn && m->fn(st, err) < 0) {
		err_wrap(err, "store: %s", ctx);
		goto fail;
	}
	/* PRAGMA takes no parameters; `to` is our own constant, not input. */
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", to);
	if (store_exec(st, sql, err, ctx) < 0 || store_exec(st, "COMMIT", err, ctx) < 0)
		goto fail;
	return 0;
fail:
	store_rollback(st);
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

int store_open(struct store **out, const char *path, space_err *err)
{
	_cleanup_free_ struct store *st = calloc(1, sizeof(*st));
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	const char *mode;
	int fd, rc;

	if (!st)
		return err_sys(err, ENOMEM, "store: open %s", path);
	/* Create it private before SQLite does (it would honour the umask):
	 * the kv table holds the API key.  SQLite gives -wal and -shm the
	 * database file's mode. */
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return err_sys(err, errno, "store: open %s", path);
	close(fd);

	rc = sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
	if (rc != SQLITE_OK) {
		err_set(err, code_of(rc), "store: open %s: %s", path,
			st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc));
		sqlite3_close(st->db);
		return -1;
	}
	sqlite3_busy_timeout(st->db, BUSY_TIMEOUT_MS);
	sqlite3_db_config(st->db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
	sqlite3_db_config(st->db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL);

	/* WAL: readers never block the writer and a commit is one append;
	 * NORMAL: a power cut may lose the last commits but never corrupts. */
	if (store_prepare(st, &s, "PRAGMA journal_mode = WAL", err, "set journal mode") < 0)
		goto fail;
	if (sqlite3_step(s) != SQLITE_ROW) {
		store_fail(st, err, "set journal mode");
		goto fail;
	}
	mode = (const char *)sqlite3_column_text(s, 0);
	if (!mode || strcmp(mode, "wal") != 0)
		log_warn("store: %s: WAL unavailable here, journal mode is %s", path,
			 mode ? mode : "unknown");
	sqlite3_finalize(s);
	s = NULL;
	if (store_exec(st, "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON", err,
		       "set pragmas") < 0)
		goto fail;
	if (migrate(st, err) < 0)
		goto fail;
	*out = steal_pointer(&st);
	return 0;
fail:
	err_wrap(err, "opening %s", path);
	sqlite3_finalize(steal_pointer(&s));
	sqlite3_close(st->db);
	return -1;
}

void store_close(struct store *st)
{
	if (!st)
		return;
	sqlite3_exec(st->db, "PRAGMA optimize", NULL, NULL, NULL);
	if (sqlite3_close(st->db) != SQLITE_OK)
		log_warn("store: close: %s", sqlite3_errmsg(st->db));
	free(st);
}

/* ---- key/value ---- */

int store_kv_get(struct store *st, const char *key, char *out, size_t outlen, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	char ctx[160];
	const char *v;
	size_t n;
	int rc;

	snprintf(ctx, sizeof(ctx), "get key %.128s", key);
	if (store_prepare(st, &s, "SELECT value FROM kv WHERE key = ?1", err, ctx) < 0)
		return -1;
	store_bind_text(s, 1, key);
	rc = sqlite3_step(s);
	if (rc == SQLITE_DONE)
		return err_set(err, ENOENT, "store: %s: not found", ctx);
	if (rc != SQLITE_ROW)
		return store_fail(st, err, ctx);
	v = (const char *)sqlite3_column_text(s, 0);
	n = v ? strlen(v) : 0;
	if (n >= outlen)
		return err_set(err, E2BIG, "store: %s: value of %zu bytes does not fit in %zu", ctx,
			       n, outlen);
	memcpy(out, v ? v : "", n + 1);
	return 0;
}

int store_kv_set(struct store *st, const char *key, const char *value, space_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	char ctx[160];

	snprintf(ctx, sizeof(ctx), "set key %.128s", key);
	if (store_prepare(st, &s,
			  "INSERT INTO kv (key, value) VALUES (?1, ?2)"
			  " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
			  err, ctx) < 0)
		return -1;
	if (store_bind_text(s, 1, key) || store_bind_text(s, 2, value))
		return store_fail(st, err, ctx);
	return store_step_done(st, s, err, ctx);
}
