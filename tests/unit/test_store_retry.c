/* test_store_retry.c -- a store write that fails is kept and written again, not dropped:
 * sandbox_persist marks the sandbox unsaved, op_finish keeps the operation for ops_retry;
 * the fence (ESTALE) is not retried. The store is broken for real: another connection moves
 * its tables away behind its back, then back. */
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/sandbox/runtime.h"
#include "daemon/store/store.h"
#include "harness.h"

static char dir[256], path[320];

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

static void break_store(void)
{
	sql("ALTER TABLE sandboxes RENAME TO sandboxes_away;"
	    "ALTER TABLE operations RENAME TO operations_away");
}

static void mend_store(void)
{
	sql("ALTER TABLE sandboxes_away RENAME TO sandboxes;"
	    "ALTER TABLE operations_away RENAME TO operations");
}

static struct sandbox *new_sandbox(struct spaced *d, const char *id)
{
	struct sandbox *sb = calloc(1, sizeof(*sb));

	sb->d = d;
	snprintf(sb->rec.id, sizeof(sb->rec.id), "%s", id);
	sb->rec.state = SB_RUNNING;
	snprintf(sb->rec.template_ref, sizeof(sb->rec.template_ref), "base");
	sb->rec.memory_mib = 128;
	sb->rec.vcpus = 1;
	return sb;
}

static enum sb_state stored_state(struct store *st, const char *id)
{
	struct sandbox_rec r;
	space_err err = { 0 };
	enum sb_state s;

	if (store_sandbox_get(st, id, &r, &err) < 0)
		return SB__COUNT;
	s = r.state;
	sandbox_rec_clear(&r);
	return s;
}

static void test_sandbox_kept(struct spaced *d)
{
	struct sandbox *sb = new_sandbox(d, "sb-0000000000000001");

	sandbox_persist(sb);
	CHECK(!sb->unsaved && stored_state(d->store, sb->rec.id) == SB_RUNNING, "written");
	break_store();
	sb->rec.state = SB_PAUSED;
	sandbox_persist(sb);
	CHECK(sb->unsaved, "a write the store refused leaves the sandbox marked unsaved");
	mend_store();
	CHECK(stored_state(d->store, sb->rec.id) == SB_RUNNING, "... the store still has the old state");
	sandbox_persist(sb); /* what sandbox_tick does with it */
	CHECK(!sb->unsaved && stored_state(d->store, sb->rec.id) == SB_PAUSED,
	      "written again: the new state is in, the mark gone");
	sandbox_rec_clear(&sb->rec);
	free(sb);
}

static void test_fence_not_retried(struct spaced *d)
{
	struct sandbox *sb = new_sandbox(d, "sb-0000000000000002");
	space_err err = { 0 };

	snprintf(sb->rec.node_id, sizeof(sb->rec.node_id), "node-2");
	CHECK(store_sandbox_put(d->store, &sb->rec, &err) == 0, "another node's sandbox %s", err.msg);
	store_set_node(d->store, "node-1");
	sb->rec.state = SB_STOPPED;
	sandbox_persist(sb);
	CHECK(!sb->unsaved && stored_state(d->store, sb->rec.id) == SB_RUNNING,
	      "fenced (ESTALE): not written, and not kept to write again");
	store_set_node(d->store, "");
	sandbox_rec_clear(&sb->rec);
	free(sb);
}

static void test_op_kept(struct spaced *d)
{
	struct op_rec op, got;
	space_err err = { 0 };

	CHECK(op_begin(d, OPK_PAUSE, "sb-0000000000000001", NULL, &op, &err) == 0, "op begun %s", err.msg);
	op_running(d, &op);
	break_store();
	op_finish(d, &op, NULL);
	CHECK(d->op_unsaved != NULL, "a finished operation the store refused is kept");
	ops_retry(d);
	CHECK(d->op_unsaved != NULL, "... while the store still refuses it");
	mend_store();
	CHECK(store_op_get(d->store, op.id, &got, &err) == 0 && got.state == OP_RUNNING,
	      "the store still says running");
	ops_retry(d);
	CHECK(d->op_unsaved == NULL && store_op_get(d->store, op.id, &got, &err) == 0 &&
		      got.state == OP_SUCCEEDED,
	      "written again by the retry: succeeded");

	/* a later write that succeeds supersedes a kept one */
	CHECK(op_begin(d, OPK_RESUME, "sb-0000000000000001", NULL, &op, &err) == 0, "another op");
	break_store();
	op_running(d, &op);
	mend_store();
	op_finish(d, &op, "it failed");
	CHECK(d->op_unsaved == NULL && store_op_get(d->store, op.id, &got, &err) == 0 &&
		      got.state == OP_FAILED,
	      "the later write went in and dropped the kept copy (no stale retry)");
	op_rec_clear(&op);
}

int main(void)
{
	struct spaced d;
	space_err err = { 0 };
	const char *tmp = getenv("TMPDIR");

	memset(&d, 0, sizeof(d));
	snprintf(dir, sizeof(dir), "%s/test_store_retry.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		SKIP_ALL("no temp dir");
	snprintf(path, sizeof(path), "%s/space.db", dir);
	if (!CHECK(store_open(&d.store, path, &err) == 0, "open %s", err.msg))
		return DONE();
	test_sandbox_kept(&d);
	test_fence_not_retried(&d);
	test_op_kept(&d);
	ops_unsaved_free(&d);
	store_close(d.store);
	for (const char *sfx = ""; sfx; sfx = !*sfx ? "-wal" : !strcmp(sfx, "-wal") ? "-shm" : NULL) {
		char p[340];

		snprintf(p, sizeof(p), "%s%s", path, sfx);
		unlink(p);
	}
	rmdir(dir);
	return DONE();
}
