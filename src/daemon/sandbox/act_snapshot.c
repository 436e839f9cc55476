/* act_snapshot.c -- a named snapshot of a running sandbox: memory and disk, outliving it */
#include <stdlib.h>
#include <string.h>

#include "events/events.h"
#include "log.h"
#include "runtime.h"
#include "store/store.h"

static void on_captured(struct sandbox *sb, struct snapshot_rec *snap, const char *error)
{
	if (snap) {
		json_decref(sb->op.result);
		sb->op.result = json_pack("{s:s,s:s}", "snapshot_id", snap->id, "name", snap->name);
		if (!error)
			events_emit(sb, EVT_SNAPSHOTTED, NULL,
				    json_pack("{s:s,s:s}", "snapshot_id", snap->id, "name", snap->name));
	}
	lifecycle_done(sb, error);
}

int act_snapshot_start(struct sandbox *sb, const struct lc_args *a, space_err *err)
{
	return capture_start(sb, SNAP_NAMED, a->name, true, true, on_captured, err);
}

int sandbox_snapshot(struct spaced *d, const char *id, const char *name, struct sandbox_rec *out,
		     struct op_rec *op, struct snapshot_rec *snap, space_err *err)
{
	struct sandbox *sb = sandbox_find_for(d, id, OPK_SNAPSHOT, err);
	struct lc_args args = { .name = name };

	if (!sb)
		return -1;
	if (spec_check_snapshot_name(name, err) < 0)
		return -1;
	if (lifecycle_begin(sb, OPK_SNAPSHOT, &args, err) < 0)
		return -1;
	/* The record exists from the start (state creating). */
	memset(snap, 0, sizeof(*snap));
	if (sb->capture)
		capture_record(sb, snap);
	sandbox_copy_out(sb, out, op);
	return 0;
}

int snapshot_name_free(struct store *conn, const char *name, space_err *err)
{
	struct snapshot_rec taken;

	if (spec_check_snapshot_name(name, err) < 0)
		return -1;
	if (store_snapshot_get_by_name(conn, name, &taken, err) == 0) {
		err_set(err, EEXIST, "a snapshot named '%s' exists already (%s)", name, taken.id);
		snapshot_rec_clear(&taken);
		return -1;
	}
	if (err->code != ENOENT)
		return -1;
	err_clear(err);
	return 0;
}

struct snapshot_req *snapshot_req_new(const char *sb_id)
{
	struct snapshot_req *q = calloc(1, sizeof(*q));

	if (q && !(q->id = strdup(sb_id))) {
		free(q);
		q = NULL;
	}
	return q;
}

int snapshot_req_read(struct store *conn, void *arg, space_err *err)
{
	return snapshot_name_free(conn, ((struct snapshot_req *)arg)->name, err);
}

void snapshot_req_free(void *arg)
{
	struct snapshot_req *q = arg;

	if (q)
		free(q->id);
	free(q);
}
