/* test_store_pg.c -- what only the PostgreSQL store has to show: claims from two connections
 * at once take disjoint rows and skip locked ones without waiting (SKIP LOCKED), lease
 * expiry from two processes at once changes each row once, processes starting together
 * migrate once, a newer schema is refused, and a statement after the server dropped the
 * connection, restarted, or was down for seconds still succeeds (reconnect and retry); a
 * listener hears an intent written and an operation done, from another connection, at commit.
 * Needs SPACE_TEST_STORE_PG (make unit starts a server: tests/pg/with-pg.sh); skips without.
 * It drives the back end through its table of functions (store_backend.h), as store.c does. */
#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon/store/store_backend.h"
#include "harness.h"
#include "store_pg_reset.h"

static const char *url;

static void pg_close(struct store *st)
{
	if (st)
		st->ops->close(st);
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct store *open_fresh(void)
{
	struct store *st = NULL;
	space_err err = { 0 };

	if (store_test_pg_reset(url) < 0 || store_pg_open(&st, url, &err) < 0) {
		NOTE("open %s: %s", url, err.msg);
		return NULL;
	}
	return st;
}

static struct store *open_again(void)
{
	struct store *st = NULL;
	space_err err = { 0 };

	if (store_pg_open(&st, url, &err) < 0)
		NOTE("open: %s", err.msg);
	return st;
}

/* A plain libpq connection beside the store's: locks rows, ends backends, reads tables. */
static PGconn *side(void)
{
	PGconn *c = PQconnectdb(url);

	if (PQstatus(c) != CONNECTION_OK)
		NOTE("side connection: %s", PQerrorMessage(c));
	return c;
}

static bool side_exec(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;

	if (!ok)
		NOTE("%s: %s", sql, PQerrorMessage(c));
	PQclear(r);
	return ok;
}

static long side_count(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	long n = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) ? atol(PQgetvalue(r, 0, 0)) : -1;

	PQclear(r);
	return n;
}

static int put_intent(struct store *st, int i, int memory_mib)
{
	struct sandbox_rec s = { 0 };
	struct op_rec op = { 0 };
	space_err err = { 0 };
	json_t *intent = json_pack("{s:s}", "kind", "create");
	int rc;

	snprintf(s.id, sizeof(s.id), "sb-%016x", i);
	s.state = SB_CREATING;
	s.memory_mib = memory_mib;
	s.created_ms = 1000 + i;
	snprintf(op.id, sizeof(op.id), "op-%016x", i);
	snprintf(op.sandbox_id, sizeof(op.sandbox_id), "%s", s.id);
	op.kind = OPK_CREATE;
	op.state = OP_PENDING;
	rc = st->ops->intent_put(st, &s, &op, intent, &err);
	if (rc < 0)
		NOTE("intent %d: %s", i, err.msg);
	json_decref(intent);
	return rc;
}

/* ---- claims ---- */

#define INTENTS 40

struct claimer {
	struct store *st;
	const char *node;
	int got[INTENTS];
	int n;
	bool failed;
};

static int note_claim(const struct sandbox_rec *s, const json_t *intent, void *arg)
{
	struct claimer *c = arg;

	if (strcmp(s->node_id, c->node) || !json_is_object(intent))
		c->failed = true;
	if (c->n < INTENTS)
		c->got[c->n++] = (int)strtol(s->id + 3, NULL, 16);
	return 0;
}

static void *claim_loop(void *arg)
{
	struct claimer *c = arg;
	space_err err = { 0 };

	for (int round = 0; round < 100; round++) {
		int before = c->n;

		if (c->st->ops->claim(c->st, c->node, 3, 1 << 20, note_claim, c, &err) < 0) {
			NOTE("claim %s: %s", c->node, err.msg);
			c->failed = true;
			break;
		}
		if (c->n == before && round > 2)
			break; /* nothing left (the other one may hold the rest: a few more rounds) */
	}
	return NULL;
}

static void test_claims_disjoint(void)
{
	struct store *a = open_fresh(), *b = open_again();
	struct claimer ca = { .st = a, .node = "node-a" }, cb = { .st = b, .node = "node-b" };
	int seen[INTENTS] = { 0 }, twice = 0, missing = 0;
	pthread_t ta, tb;

	if (!CHECK(a && b, "two stores on one database"))
		goto out;
	for (int i = 0; i < INTENTS; i++)
		if (put_intent(a, i, 256) < 0)
			goto out;
	pthread_create(&ta, NULL, claim_loop, &ca);
	pthread_create(&tb, NULL, claim_loop, &cb);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	for (int i = 0; i < ca.n; i++)
		seen[ca.got[i]]++;
	for (int i = 0; i < cb.n; i++)
		seen[cb.got[i]]++;
	for (int i = 0; i < INTENTS; i++) {
		twice += seen[i] > 1;
		missing += seen[i] == 0;
	}
	NOTE("node-a took %d, node-b took %d", ca.n, cb.n);
	CHECK(!ca.failed && !cb.failed, "both claimers got records stamped with their own node");
	CHECK(twice == 0, "no intent was claimed twice (%d were)", twice);
	CHECK(missing == 0 && ca.n + cb.n == INTENTS, "every intent was claimed once (%d missing)",
	      missing);
out:
	pg_close(a);
	pg_close(b);
}

/* A row another transaction holds is skipped at once, not waited for. */
static void test_claim_skips_locked(void)
{
	struct store *st = open_fresh();
	struct claimer c = { .node = "node-a" };
	PGconn *lock = NULL;
	space_err err = { 0 };
	int64_t t0;

	if (!CHECK(st && put_intent(st, 1, 256) == 0 && put_intent(st, 2, 256) == 0,
		   "two intents, oldest first"))
		goto out;
	lock = side();
	if (!side_exec(lock, "BEGIN") ||
	    !side_exec(lock, "SELECT 1 FROM sandboxes WHERE id = 'sb-0000000000000001' FOR UPDATE"))
		goto out;
	c.st = st;
	t0 = mono_ms();
	CHECK(st->ops->claim(st, "node-a", 2, 4096, note_claim, &c, &err) == 0, "claim %s", err.msg);
	CHECK(c.n == 1 && c.got[0] == 2, "the locked oldest row is skipped, the next one taken (%d)",
	      c.n ? c.got[0] : -1);
	CHECK(mono_ms() - t0 < 2000, "without waiting for the lock (%lld ms)",
	      (long long)(mono_ms() - t0));
	side_exec(lock, "ROLLBACK");
	c.n = 0;
	CHECK(st->ops->claim(st, "node-a", 2, 4096, note_claim, &c, &err) == 0 && c.n == 1 &&
		      c.got[0] == 1,
	      "once released it is claimable");
out:
	PQfinish(lock);
	pg_close(st);
}

/* ---- leases ---- */

struct expirer {
	struct store *st;
	int nodes, sandboxes;
	bool failed;
};

static void *expire_once(void *arg)
{
	struct expirer *e = arg;
	space_err err = { 0 };

	if (e->st->ops->nodes_expire(e->st, 10000, &e->nodes, &e->sandboxes, &err) < 0) {
		NOTE("expire: %s", err.msg);
		e->failed = true;
	}
	return NULL;
}

static void test_expire_concurrent(void)
{
	struct store *a = open_fresh(), *b = open_again();
	struct expirer ea = { .st = a }, eb = { .st = b };
	struct claimer c = { .node = "node-x" };
	struct node_rec n = { 0 };
	space_err err = { 0 };
	pthread_t ta, tb;

	if (!CHECK(a && b, "two stores"))
		goto out;
	for (int i = 0; i < 10; i++)
		put_intent(a, i, 128);
	c.st = a;
	a->ops->claim(a, "node-x", 10, 4096, note_claim, &c, &err);
	snprintf(n.id, sizeof(n.id), "node-x");
	n.lease_expires_ms = 5000;
	CHECK(c.n == 10 && a->ops->node_put(a, &n, &err) == 0, "a node with 10 sandboxes %s", err.msg);
	pthread_create(&ta, NULL, expire_once, &ea);
	pthread_create(&tb, NULL, expire_once, &eb);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	CHECK(!ea.failed && !eb.failed, "both expiries ran");
	CHECK(ea.nodes + eb.nodes == 1 && ea.sandboxes + eb.sandboxes == 10,
	      "the node and its sandboxes changed once between them (%d+%d nodes, %d+%d sandboxes)",
	      ea.nodes, eb.nodes, ea.sandboxes, eb.sandboxes);
out:
	pg_close(a);
	pg_close(b);
}

/* ---- migrations ---- */

static void *open_close(void *arg)
{
	struct store *st = NULL;
	space_err err = { 0 };

	*(int *)arg = store_pg_open(&st, url, &err);
	if (*(int *)arg < 0)
		NOTE("concurrent open: %s", err.msg);
	pg_close(st);
	return NULL;
}

static void test_migrate_once(void)
{
	pthread_t t[4];
	int rc[4];
	PGconn *c;
	struct store *st = NULL;
	space_err err = { 0 };

	CHECK(store_test_pg_reset(url) == 0, "an empty database");
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, open_close, &rc[i]);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	CHECK(!rc[0] && !rc[1] && !rc[2] && !rc[3], "four processes opening together all succeed");
	c = side();
	CHECK(side_count(c, "SELECT count(*) FROM schema_version") == 5,
	      "and the schema was made once (one row per version)");
	side_exec(c, "INSERT INTO schema_version (version) VALUES (999)");
	CHECK(store_pg_open(&st, url, &err) < 0 && strstr(err.msg, "newer"),
	      "a newer schema is refused: %s", err.msg);
	pg_close(st);
	PQfinish(c);
}

/* ---- connection loss ---- */

static int kv_round_trip(struct store *st, const char *value, space_err *err)
{
	char got[64];

	if (st->ops->kv_set(st, "probe", value, err) < 0 || st->ops->kv_get(st, "probe", got, sizeof(got), err) < 0)
		return -1;
	return strcmp(got, value) ? err_set(err, EIO, "read back %s", got) : 0;
}

/* pg-server.sh ACTION DIR, as the harness started the server (with-pg.sh). */
static int harness(const char *action)
{
	const char *dir = getenv("SPACE_TEST_PG_DIR");
	int status;
	pid_t pid;

	if (!dir)
		return -1;
	if ((pid = fork()) == 0) {
		execl("tests/pg/pg-server.sh", "pg-server.sh", action, dir, (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) < 0)
		return -1;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static void test_reconnect(void)
{
	struct store *st = open_fresh();
	space_err err = { 0 };
	PGconn *c = side();
	int status;
	pid_t pid;

	if (!CHECK(st && kv_round_trip(st, "one", &err) == 0, "a store %s", err.msg))
		goto out;
	/* the server ends our backend (as an administrator or a failover would) */
	CHECK(side_count(c, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
			    " WHERE application_name = 'spaced'") >= 1,
	      "the store's backend was terminated");
	CHECK(kv_round_trip(st, "two", &err) == 0, "the next statement reconnects and succeeds %s",
	      err.msg);
	PQfinish(c);
	c = NULL;
	if (!getenv("SPACE_TEST_PG_DIR")) {
		NOTE("SPACE_TEST_PG_DIR unset: no server restart (run through tests/pg/with-pg.sh)");
		goto out;
	}
	CHECK(harness("restart") == 0, "the server restarted");
	CHECK(kv_round_trip(st, "three", &err) == 0, "a statement after the restart succeeds %s",
	      err.msg);
	/* down for a few seconds: the statement waits for it instead of failing */
	CHECK(harness("stop-keep") == 0, "the server stopped (its files kept)");
	if ((pid = fork()) == 0) {
		sleep(3);
		_exit(harness("start") == 0 ? 0 : 1);
	}
	int64_t t0 = mono_ms();
	CHECK(kv_round_trip(st, "four", &err) == 0, "a statement while the server is down waits for it %s",
	      err.msg);
	NOTE("it waited %lld ms", (long long)(mono_ms() - t0));
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && !WEXITSTATUS(status),
	      "the server came back");
out:
	PQfinish(c);
	pg_close(st);
}

/* ---- notifications ---- */

struct heard {
	int intents, ops;
	char last_op[ID_LEN];
};

static void note_heard(const char *channel, const char *payload, void *arg)
{
	struct heard *h = arg;

	if (!strcmp(channel, STORE_CHANNEL_INTENT))
		h->intents++;
	if (!strcmp(channel, STORE_CHANNEL_OP)) {
		h->ops++;
		snprintf(h->last_op, sizeof(h->last_op), "%s", payload);
	}
}

/* What the listener has after waiting up to ms for its socket (drained once it is readable). */
static struct heard listen_for(struct store_listener *l, int ms)
{
	struct heard h = { 0 };
	struct pollfd p = { .fd = store_listener_fd(l), .events = POLLIN };
	space_err err = { 0 };
	int64_t until = mono_ms() + ms;

	while (mono_ms() < until && poll(&p, 1, (int)(until - mono_ms())) > 0) {
		if (store_listener_drain(l, note_heard, &h, &err) < 0) {
			NOTE("drain: %s", err.msg);
			break;
		}
	}
	return h;
}

static void test_notifications(void)
{
	const char *channels[] = { STORE_CHANNEL_INTENT, STORE_CHANNEL_OP };
	struct store *st = open_fresh();
	struct store_listener *l = NULL;
	struct op_rec op = { 0 };
	space_err err = { 0 };
	struct heard h;

	CHECK(store_listener_open("sqlite:/tmp/x.db", channels, 2, &l, &err) < 0 && err.code == ENOTSUP,
	      "a SQLite store has nothing to listen to");
	err_clear(&err);
	CHECK(st && store_listener_open(url, channels, 2, &l, &err) == 0, "listening: %s", err.msg);
	if (!st || !l) {
		pg_close(st);
		return;
	}
	CHECK(put_intent(st, 7, 256) == 0, "an intent written");
	h = listen_for(l, 2000);
	CHECK(h.intents >= 1 && h.ops == 0, "its NOTIFY is heard (intents %d, ops %d)", h.intents, h.ops);
	snprintf(op.id, sizeof(op.id), "op-%016x", 7);
	snprintf(op.sandbox_id, sizeof(op.sandbox_id), "sb-%016x", 7);
	op.kind = OPK_CREATE;
	op.state = OP_RUNNING;
	CHECK(st->ops->op_put(st, &op, &err) == 0, "op running: %s", err.msg);
	h = listen_for(l, 300);
	CHECK(h.ops == 0, "an operation still running is not announced (%d)", h.ops);
	op.state = OP_SUCCEEDED;
	CHECK(st->ops->op_put(st, &op, &err) == 0, "op succeeded: %s", err.msg);
	h = listen_for(l, 2000);
	CHECK(h.ops == 1 && !strcmp(h.last_op, op.id), "a done operation is announced with its id (%d, %s)",
	      h.ops, h.last_op);
	CHECK(st->ops->claim(st, "node-a", 4, 4096, NULL, NULL, &err) >= 0, "claimed: %s", err.msg);
	h = listen_for(l, 300);
	CHECK(h.intents == 0, "a claim announces no intent (%d)", h.intents);
	store_listener_close(l);
	pg_close(st);
}

int main(void)
{
	url = getenv("SPACE_TEST_STORE_PG");
	if (!url || !*url)
		SKIP_ALL("SPACE_TEST_STORE_PG unset (make unit starts a PostgreSQL: tests/pg/with-pg.sh)");
	RUN(test_migrate_once);
	RUN(test_claims_disjoint);
	RUN(test_claim_skips_locked);
	RUN(test_expire_concurrent);
	RUN(test_notifications);
	RUN(test_reconnect);
	return DONE();
}
