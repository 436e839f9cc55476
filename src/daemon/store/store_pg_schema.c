/* store_pg_schema.c -- the PostgreSQL schema and its versioned migrations
 *
 * schema_version holds one row per step applied. All pending steps run in one transaction
 * that first takes a transaction-scoped advisory lock: processes that start together queue
 * on it, and each one after the first finds the steps done. DDL is transactional in
 * PostgreSQL, so a step that fails leaves nothing half made. Append steps; never edit one
 * that has shipped. */
#include "store_pg.h"

#include <stdio.h>

#include "log.h"

/* pg_advisory_xact_lock's key: "SPACE" in ASCII, shared by every spaced on the database. */
#define MIGRATE_LOCK_KEY "357895668549"

/* 1: the schema SQLite reaches at its version 7 (store_sqlite's migrations 1..7): templates
 * and tags, sandboxes (with their node, generation and intent), operations and snapshots
 * (with their node), sessions, tokens, secrets, kv and nodes. seq keeps creation order
 * among rows of the same created_ms (SQLite's rowid); an upsert keeps a row's seq. JSON
 * members are text. "user" is quoted: it is a keyword here. */
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
	" created_ms BIGINT NOT NULL,"
	" image_bytes BIGINT NOT NULL,"
	" network TEXT);"
	"CREATE INDEX templates_name ON templates(name);"
	"CREATE TABLE template_tags ("
	" tag TEXT PRIMARY KEY,"
	" digest TEXT NOT NULL REFERENCES templates(digest));"
	"CREATE INDEX template_tags_digest ON template_tags(digest);"
	"CREATE TABLE sandboxes ("
	" seq BIGINT GENERATED ALWAYS AS IDENTITY,"
	" id TEXT PRIMARY KEY,"
	" state TEXT NOT NULL,"
	" template_ref TEXT NOT NULL,"
	" template_digest TEXT NOT NULL,"
	" vcpus INTEGER NOT NULL,"
	" memory_mib INTEGER NOT NULL,"
	" env TEXT,"
	" metadata TEXT,"
	" timeout_s BIGINT NOT NULL,"
	" created_ms BIGINT NOT NULL,"
	" updated_ms BIGINT NOT NULL,"
	" expires_ms BIGINT NOT NULL,"
	" pid INTEGER NOT NULL,"
	" pid_start BIGINT NOT NULL,"
	" next_chan BIGINT NOT NULL,"
	" error TEXT NOT NULL,"
	" disk TEXT NOT NULL DEFAULT '',"
	" parent_id TEXT NOT NULL DEFAULT '',"
	" snapshot_id TEXT NOT NULL DEFAULT '',"
	" source_snapshot TEXT NOT NULL DEFAULT '',"
	" start_kind TEXT NOT NULL DEFAULT 'boot',"
	" on_timeout TEXT NOT NULL DEFAULT 'delete',"
	" role TEXT NOT NULL DEFAULT 'user',"
	" prev_state TEXT NOT NULL DEFAULT 'running',"
	" jail_uid BIGINT NOT NULL DEFAULT 0,"
	" network TEXT,"
	" node_id TEXT NOT NULL DEFAULT '',"
	" generation BIGINT NOT NULL DEFAULT 1,"
	" intent TEXT);"
	"CREATE INDEX sandboxes_state ON sandboxes(state);"
	"CREATE INDEX sandboxes_created ON sandboxes(created_ms, seq);"
	"CREATE INDEX sandboxes_node ON sandboxes(node_id, state);"
	"CREATE INDEX sandboxes_intent ON sandboxes(created_ms, seq)"
	" WHERE intent IS NOT NULL AND node_id = '';"
	"CREATE TABLE operations ("
	" seq BIGINT GENERATED ALWAYS AS IDENTITY,"
	" id TEXT PRIMARY KEY,"
	" kind TEXT NOT NULL,"
	" sandbox_id TEXT NOT NULL,"
	" state TEXT NOT NULL,"
	" error TEXT NOT NULL,"
	" created_ms BIGINT NOT NULL,"
	" updated_ms BIGINT NOT NULL,"
	" result TEXT,"
	" node_id TEXT NOT NULL DEFAULT '');"
	"CREATE INDEX operations_state ON operations(state, created_ms, seq);"
	"CREATE INDEX operations_sandbox ON operations(sandbox_id);"
	"CREATE TABLE sessions ("
	" seq BIGINT GENERATED ALWAYS AS IDENTITY,"
	" id TEXT PRIMARY KEY,"
	" sandbox_id TEXT NOT NULL REFERENCES sandboxes(id),"
	" chan BIGINT NOT NULL,"
	" argv TEXT,"
	" env TEXT,"
	" cwd TEXT NOT NULL,"
	" \"user\" TEXT NOT NULL,"
	" stdin_open INTEGER NOT NULL,"
	" state TEXT NOT NULL,"
	" pid INTEGER NOT NULL,"
	" exit_code INTEGER NOT NULL,"
	" exit_signal INTEGER NOT NULL,"
	" error TEXT NOT NULL,"
	" token_hash TEXT NOT NULL,"
	" token_expires_ms BIGINT NOT NULL,"
	" created_ms BIGINT NOT NULL,"
	" started_ms BIGINT NOT NULL,"
	" ended_ms BIGINT NOT NULL,"
	" kind TEXT NOT NULL DEFAULT 'process',"
	" pty_rows INTEGER NOT NULL DEFAULT 0,"
	" pty_cols INTEGER NOT NULL DEFAULT 0,"
	" tag TEXT NOT NULL DEFAULT '');"
	"CREATE INDEX sessions_sandbox ON sessions(sandbox_id, created_ms, seq);"
	"CREATE TABLE snapshots ("
	" seq BIGINT GENERATED ALWAYS AS IDENTITY,"
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
	" next_chan BIGINT NOT NULL,"
	" dir TEXT NOT NULL,"
	" disk TEXT NOT NULL,"
	" bytes BIGINT NOT NULL,"
	" created_ms BIGINT NOT NULL,"
	" error TEXT NOT NULL,"
	" net INTEGER NOT NULL DEFAULT 0,"
	" node_id TEXT NOT NULL DEFAULT '');"
	"CREATE UNIQUE INDEX snapshots_name ON snapshots(name) WHERE name <> '';"
	"CREATE INDEX snapshots_kind ON snapshots(kind, template_digest);"
	"CREATE TABLE tokens ("
	" hash TEXT PRIMARY KEY,"
	" sandbox_id TEXT NOT NULL,"
	" scope TEXT NOT NULL,"
	" expires_ms BIGINT NOT NULL);"
	"CREATE INDEX tokens_sandbox ON tokens(sandbox_id);"
	"CREATE TABLE secrets ("
	" name TEXT PRIMARY KEY,"
	" value TEXT NOT NULL,"
	" created_ms BIGINT NOT NULL,"
	" updated_ms BIGINT NOT NULL);"
	"CREATE TABLE kv ("
	" key TEXT PRIMARY KEY,"
	" value TEXT NOT NULL);"
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
	" started_ms BIGINT NOT NULL,"
	" renewed_ms BIGINT NOT NULL,"
	" lease_expires_ms BIGINT NOT NULL);"
	"CREATE INDEX nodes_lease ON nodes(state, lease_expires_ms);";
/* 2: a secret is bound to the hosts it may be sent to (SQLite's version 8). */
static const char schema_v2[] =
	"ALTER TABLE secrets ADD COLUMN hosts TEXT NOT NULL DEFAULT '[]';";
/* 3: nobody polls for claims or results: a row waiting for a node, and an operation that is
 * done, NOTIFY at commit (store.h, "Notifications"; nodes LISTEN for intents, api processes
 * for operations). */
static const char schema_v3[] =
	"CREATE FUNCTION space_notify_intent() RETURNS trigger LANGUAGE plpgsql AS"
	" $$BEGIN PERFORM pg_notify('" STORE_CHANNEL_INTENT "', ''); RETURN NULL; END$$;"
	"CREATE TRIGGER sandboxes_intent_notify AFTER INSERT OR UPDATE ON sandboxes"
	" FOR EACH ROW WHEN (NEW.intent IS NOT NULL AND NEW.node_id = '')"
	" EXECUTE FUNCTION space_notify_intent();"
	"CREATE FUNCTION space_notify_op() RETURNS trigger LANGUAGE plpgsql AS"
	" $$BEGIN PERFORM pg_notify('" STORE_CHANNEL_OP "', NEW.id); RETURN NULL; END$$;"
	"CREATE TRIGGER operations_done_notify AFTER INSERT OR UPDATE ON operations"
	" FOR EACH ROW WHEN (NEW.state IN ('succeeded', 'failed'))"
	" EXECUTE FUNCTION space_notify_op();";
/* 4: a template's defaults beyond env and user (SQLite's version 9). */
static const char schema_v4[] =
	"ALTER TABLE templates ADD COLUMN config TEXT;";
/* 5: lifecycle events, webhooks and their deliveries (SQLite's version 10). */
static const char schema_v5[] =
	"CREATE TABLE events ("
	" seq BIGINT PRIMARY KEY,"
	" time_ms BIGINT NOT NULL,"
	" sandbox_id TEXT NOT NULL,"
	" body TEXT NOT NULL);"
	"CREATE INDEX events_sandbox ON events(sandbox_id, seq);"
	"CREATE INDEX events_time ON events(time_ms);"
	"CREATE TABLE webhooks ("
	" id TEXT PRIMARY KEY,"
	" cursor BIGINT NOT NULL,"
	" body TEXT NOT NULL);"
	"CREATE TABLE webhook_deliveries ("
	" n BIGSERIAL PRIMARY KEY,"
	" webhook_id TEXT NOT NULL,"
	" time_ms BIGINT NOT NULL,"
	" body TEXT NOT NULL);"
	"CREATE INDEX webhook_deliveries_hook ON webhook_deliveries(webhook_id, n);"
	"CREATE INDEX webhook_deliveries_time ON webhook_deliveries(time_ms);";
/* clang-format on */

static const char *const migrations[] = {
	schema_v1,
	schema_v2,
	schema_v3,
	schema_v4,
	schema_v5,
};

#define PG_SCHEMA_VERSION ((int)(sizeof(migrations) / sizeof(migrations[0])))

struct migrate_state {
	int from, to;
};

static int migrate_body(struct pg_tx *tx, void *arg, space_err *err, const char *ctx)
{
	_cleanup_params_ struct pg_params key = { 0 };
	_cleanup_pgres_ PGresult *r = NULL;
	struct migrate_state *m = arg;

	pg_text(&key, MIGRATE_LOCK_KEY);
	if (pg_exec_tx(tx, "SELECT pg_advisory_xact_lock($1::bigint)", &key, NULL, err, ctx) < 0 ||
	    pg_exec_tx(tx, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY)",
		       NULL, NULL, err, ctx) < 0 ||
	    pg_exec_tx(tx, "SELECT coalesce(max(version), 0) FROM schema_version", NULL, &r, err,
		       ctx) < 0)
		return -1;
	m->from = m->to = (int)pg_i64(r, 0, 0);
	if (m->from > PG_SCHEMA_VERSION)
		return err_set(err, EIO,
			       "store: schema version %d is newer than this spaced knows (%d)",
			       m->from, PG_SCHEMA_VERSION);
	for (int to = m->from + 1; to <= PG_SCHEMA_VERSION; to++) {
		_cleanup_params_ struct pg_params v = { 0 };
		char step[64];

		snprintf(step, sizeof(step), "%s: to version %d", ctx, to);
		pg_int(&v, to);
		if (pg_exec_tx(tx, migrations[to - 1], NULL, NULL, err, step) < 0 ||
		    pg_exec_tx(tx, "INSERT INTO schema_version (version) VALUES ($1)", &v, NULL, err,
			       step) < 0)
			return -1;
		m->to = to;
	}
	return 0;
}

int pg_migrate(struct store *st, space_err *err)
{
	struct migrate_state m = { 0 };

	if (pg_tx(st, migrate_body, &m, err, "migrate schema") < 0)
		return -1;
	if (m.to > m.from)
		log_info("store: postgres schema migrated from version %d to %d", m.from, m.to);
	return 0;
}
