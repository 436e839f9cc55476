/* act_read.c -- an action's read of the store on the store's thread, its next step on the loop
 *
 * A lifecycle action that needs a record it does not hold (the snapshot a restore launches
 * from) reads it behind every write queued before (store_async) and goes on when it is back.
 * Meanwhile the sandbox may have been deleted or its operation ended (a delete cancels it):
 * the step then gets NULL and only frees what it was given. */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "runtime.h"
#include "store/store.h"

struct act_job {
	struct spaced *d;
	char sb_id[ID_LEN];
	char op_id[ID_LEN];
	void (*read)(struct store *conn, void *arg);
	void (*step)(struct sandbox *sb, void *arg);
	void *arg;
};

static void job_read(struct store *conn, void *arg)
{
	struct act_job *j = arg;

	j->read(conn, j->arg);
}

static void job_done(void *arg, bool ran)
{
	struct act_job *j = arg;
	struct sandbox *sb = ran ? sandbox_find(j->d, j->sb_id) : NULL;

	if (sb && (strcmp(sb->op.id, j->op_id) != 0 || op_state_done(sb->op.state)))
		sb = NULL;
	j->step(sb, j->arg);
	free(j);
}

int act_read(struct sandbox *sb, void (*read)(struct store *conn, void *arg),
	     void (*step)(struct sandbox *sb, void *arg), void *arg, space_err *err)
{
	struct act_job *j = calloc(1, sizeof(*j));

	if (!j)
		return err_set(err, ENOMEM, "out of memory");
	j->d = sb->d;
	snprintf(j->sb_id, sizeof(j->sb_id), "%s", sb->rec.id);
	snprintf(j->op_id, sizeof(j->op_id), "%s", sb->op.id);
	j->read = read;
	j->step = step;
	j->arg = arg;
	if (store_async(sb->d->store, job_read, job_done, j, err) < 0) {
		free(j);
		return -1;
	}
	return 0;
}

struct snapshot_read *snapshot_read_new(const char *id)
{
	struct snapshot_read *q = calloc(1, sizeof(*q));

	if (q)
		snprintf(q->id, sizeof(q->id), "%s", id);
	return q;
}

void snapshot_read_run(struct store *conn, void *arg)
{
	struct snapshot_read *q = arg;

	q->rc = store_snapshot_get(conn, q->id, &q->snap, &q->err);
}

void snapshot_read_free(struct snapshot_read *q)
{
	if (!q)
		return;
	snapshot_rec_clear(&q->snap);
	free(q);
}
