/* test_store_writer.c -- write-behind (store.h "Off the caller's thread"): puts return at once
 * and land in order; gets and lists see what is still queued; a write the database refuses
 * for a while is tried again until it lands; the fence is final; a read queued with
 * store_async sees every write queued before it; closing drains the queue. The database is
 * held up for real: another connection holds SQLite's write lock, or moves tables away. */
#include <poll.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/store/store.h"
#include "harness.h"

static char dir[256], path[320], url[340];
static struct store *st, *other; /* the store under test (write-behind on), a plain reader */
static sqlite3 *locker;

static int sql(const char *text)
{
	sqlite3 *db = NULL;
	int rc = sqlite3_open(path, &db);

	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, text, NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		NOTE("%s: %s", text, db ? sqlite3_errmsg(db) : "no db");
	sqlite3_close(db);
	return rc;
}

/* Another connection takes the write lock and keeps it: the writer's puts wait. */
static void hold_lock(void)
{
	if (sqlite3_open(path, &locker) != SQLITE_OK ||
	    sqlite3_exec(locker, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		NOTE("locking: %s", sqlite3_errmsg(locker));
}

static void release_lock(void)
{
	sqlite3_exec(locker, "ROLLBACK", NULL, NULL, NULL);
	sqlite3_close(locker);
	locker = NULL;
}

static struct sandbox_rec sandbox(const char *id, enum sb_state state)
{
	struct sandbox_rec r = { .state = state, .memory_mib = 128, .vcpus = 1 };

	snprintf(r.id, sizeof(r.id), "%s", id);
	snprintf(r.template_ref, sizeof(r.template_ref), "base");
	return r;
}

static int stored_state(struct store *s, const char *id)
{
	struct sandbox_rec r;
	space_err err = { 0 };
	int state;

	if (store_sandbox_get(s, id, &r, &err) < 0)
		return -1;
	state = (int)r.state;
	sandbox_rec_clear(&r);
	return state;
}

struct seen {
	const char *want;
	int found;
};

static int saw_sandbox(const struct sandbox_rec *r, void *arg)
{
	struct seen *s = arg;

	s->found += strcmp(r->id, s->want) == 0;
	return 0;
}

static int saw_op(const struct op_rec *r, void *arg)
{
	struct seen *s = arg;

	s->found += strcmp(r->id, s->want) == 0;
	return 0;
}

static int saw_session(const struct session_rec *r, void *arg)
{
	struct seen *s = arg;

	s->found += strcmp(r->id, s->want) == 0;
	return 0;
}

static int listed(unsigned states, const char *id)
{
	struct seen s = { id, 0 };
	space_err err = { 0 };

	if (store_sandbox_each(st, states, saw_sandbox, &s, &err) < 0)
		NOTE("list: %s", err.msg);
	return s.found;
}

static struct store_write_stats stats(void)
{
	struct store_write_stats w;

	store_write_stats(st, &w);
	return w;
}

/* Waits (up to 10 s) until no row waits to be written. */
static bool settled(void)
{
	for (int i = 0; i < 1000; i++) {
		if (store_flush(st, 10) == 0)
			return true;
		usleep(10000);
	}
	return false;
}

static void test_written(void)
{
	struct sandbox_rec a = sandbox("sb-00000000000000a1", SB_RUNNING);
	space_err err = { 0 };

	CHECK(store_sandbox_put(st, &a, &err) == 0, "a put returns at once %s", err.msg);
	CHECK(stored_state(st, a.id) == SB_RUNNING, "its own store sees it at once");
	CHECK(settled() && stored_state(other, a.id) == SB_RUNNING, "another connection sees it once written");
}

static void test_overlay(void)
{
	struct sandbox_rec a = sandbox("sb-00000000000000a1", SB_PAUSED), b = sandbox("sb-00000000000000b1", SB_RUNNING);
	struct op_rec op = { .kind = OPK_CREATE, .state = OP_PENDING };
	struct session_rec ss = { .chan = 1, .state = SESS_RUNNING };
	struct seen s_op = { "op-00000000000000b1", 0 }, s_ss = { "ss-00000000000000b1", 0 };
	space_err err = { 0 };

	snprintf(op.id, sizeof(op.id), "op-00000000000000b1");
	snprintf(op.sandbox_id, sizeof(op.sandbox_id), "%s", b.id);
	snprintf(ss.id, sizeof(ss.id), "ss-00000000000000b1");
	snprintf(ss.sandbox_id, sizeof(ss.sandbox_id), "%s", b.id);
	hold_lock();
	CHECK(store_sandbox_put(st, &b, &err) == 0 && store_op_put(st, &op, &err) == 0 &&
		      store_session_put(st, &ss, &err) == 0 && store_sandbox_put(st, &a, &err) == 0,
	      "four puts return while another connection holds the write lock");
	CHECK(stats().pending == 4, "four rows wait (%llu)", (unsigned long long)stats().pending);
	CHECK(stored_state(other, b.id) == -1 && stored_state(other, a.id) == SB_RUNNING,
	      "the database has none of them yet");
	CHECK(stored_state(st, b.id) == SB_RUNNING && stored_state(st, a.id) == SB_PAUSED,
	      "gets answer with the waiting versions");
	CHECK(listed(0, b.id) == 1 && listed(1u << SB_RUNNING, b.id) == 1, "a new row is listed");
	CHECK(listed(1u << SB_RUNNING, a.id) == 0 && listed(1u << SB_PAUSED, a.id) == 1,
	      "a row is listed by its waiting state, not the database's");
	store_op_each_open(st, saw_op, &s_op, &err);
	store_session_each(st, b.id, saw_session, &s_ss, &err);
	CHECK(s_op.found == 1 && s_ss.found == 1, "open operations and sessions list the waiting ones");
	op.state = OP_SUCCEEDED;
	s_op.found = 0;
	store_op_put(st, &op, &err);
	store_op_each_open(st, saw_op, &s_op, &err);
	CHECK(s_op.found == 0 && stats().pending == 4, "a newer version replaces the waiting one");
	release_lock();
	CHECK(settled(), "all written once the lock is gone");
	CHECK(stored_state(other, b.id) == SB_RUNNING && stored_state(other, a.id) == SB_PAUSED,
	      "the database has the newest versions");
	s_op.found = 0;
	store_op_each_open(other, saw_op, &s_op, &err);
	CHECK(s_op.found == 0, "... the operation as succeeded");
}

static void test_retried(void)
{
	struct sandbox_rec a = sandbox("sb-00000000000000a1", SB_STOPPED);
	uint64_t retried = stats().retried;
	space_err err = { 0 };
	int i;

	sql("ALTER TABLE sandboxes RENAME TO sandboxes_away");
	CHECK(store_sandbox_put(st, &a, &err) == 0, "a put while the table is away returns");
	for (i = 0; i < 200 && stats().retried < retried + 2; i++)
		usleep(10000);
	CHECK(stats().retried >= retried + 2 && stats().pending == 1,
	      "the write failed, was tried again and still waits");
	sql("ALTER TABLE sandboxes_away RENAME TO sandboxes");
	CHECK(settled() && stored_state(other, a.id) == SB_STOPPED, "written once the table is back");
}

static void test_fence_final(void)
{
	struct sandbox_rec c = sandbox("sb-00000000000000c1", SB_RUNNING);
	uint64_t dropped = stats().dropped;
	space_err err = { 0 };

	snprintf(c.node_id, sizeof(c.node_id), "node-2");
	CHECK(store_sandbox_put(other, &c, &err) == 0, "another node's sandbox %s", err.msg);
	store_set_node(st, "node-1");
	c.state = SB_STOPPED;
	CHECK(store_sandbox_put(st, &c, &err) == 0, "the fenced put returns");
	CHECK(settled() && stats().dropped == dropped + 1, "the fence (ESTALE) is final: dropped, not retried");
	CHECK(stored_state(st, c.id) == SB_RUNNING, "the database's version stands");
	store_set_node(st, "");
}

struct read_back {
	int state;
	int done;
};

static void read_it(struct store *conn, void *arg)
{
	struct read_back *rb = arg;

	rb->state = stored_state(conn, "sb-00000000000000d1");
}

static void read_done(void *arg, bool ran)
{
	((struct read_back *)arg)->done = ran ? 1 : -1;
}

static void test_async_after_writes(void)
{
	struct sandbox_rec d = sandbox("sb-00000000000000d1", SB_RUNNING);
	struct read_back rb = { -2, 0 };
	struct pollfd pfd = { .fd = store_async_fd(st), .events = POLLIN };
	space_err err = { 0 };

	hold_lock();
	store_sandbox_put(st, &d, &err);
	CHECK(store_async(st, read_it, read_done, &rb, &err) == 0, "a read queued behind a waiting write");
	usleep(100000);
	store_async_poll(st);
	CHECK(rb.done == 0, "it waits behind the write");
	release_lock();
	for (int i = 0; i < 100 && !rb.done; i++) {
		poll(&pfd, 1, 100);
		store_async_poll(st);
	}
	CHECK(rb.done == 1 && rb.state == SB_RUNNING, "it ran after the write, and done() on the caller's thread");
}

static void test_close_drains(void)
{
	struct sandbox_rec e = sandbox("sb-00000000000000e1", SB_RUNNING);
	space_err err = { 0 };

	store_sandbox_put(st, &e, &err);
	store_close(st);
	st = NULL;
	CHECK(stored_state(other, e.id) == SB_RUNNING, "closing wrote what was queued");
}

int main(void)
{
	space_err err = { 0 };
	const char *tmp = getenv("TMPDIR");

	snprintf(dir, sizeof(dir), "%s/test_store_writer.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		SKIP_ALL("no temp dir");
	snprintf(path, sizeof(path), "%s/space.db", dir);
	snprintf(url, sizeof(url), "sqlite:%s", path);
	if (!CHECK(store_open_url(&st, url, &err) == 0 && store_write_behind(st, url, &err) == 0 &&
			   store_open(&other, path, &err) == 0,
		   "open %s", err.msg))
		return DONE();
	RUN(test_written);
	RUN(test_overlay);
	RUN(test_retried);
	RUN(test_fence_final);
	RUN(test_async_after_writes);
	RUN(test_close_drains);
	store_close(other);
	for (const char *sfx = ""; sfx; sfx = !*sfx ? "-wal" : !strcmp(sfx, "-wal") ? "-shm" : NULL) {
		char p[340];

		snprintf(p, sizeof(p), "%s%s", path, sfx);
		unlink(p);
	}
	rmdir(dir);
	return DONE();
}
