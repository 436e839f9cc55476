/* act_suspend.c -- suspend and restore: memory and devices to disk and QEMU gone, then back
 * exactly as it was (processes, open files, sessions and their output offsets) */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "runtime.h"
#include "store/store.h"

/* The snapshot a sandbox was last restored from is superseded: its image is
 * only mapped by a VM that is quitting now. */
static void drop_previous(struct sandbox *sb, const char *keep)
{
	if (strcmp(sb->rec.snapshot_id, keep) != 0)
		snapshot_drop(sb->d, sb->rec.snapshot_id);
}

static void on_saved(struct sandbox *sb, struct snapshot_rec *snap, const char *error)
{
	if (error) {
		lifecycle_done(sb, error);
		return;
	}
	drop_previous(sb, snap->id);
	snprintf(sb->rec.snapshot_id, sizeof(sb->rec.snapshot_id), "%s", snap->id);
	sb->suspended_bytes = snap->bytes;
	sandbox_persist(sb);
	/* Suspended once QEMU is gone (act_suspend_vm_exited): a restore must
	 * not race the old QEMU for the sandbox's sockets. */
	vm_kill(sb->vm);
}

int act_suspend_start(struct sandbox *sb, const struct lc_args *a, space_err *err)
{
	(void)a;
	/* No disk freeze: nothing writes the sandbox's disk until it is
	 * restored onto that same disk. */
	return capture_start(sb, SNAP_SUSPEND, NULL, false, false, on_saved, err);
}

static void disk_shared(struct sandbox *sb, const char *error)
{
	if (error)
		log_warn("sandbox %s: %s; it can be restored on this node only", sb->rec.id, error);
	lifecycle_done(sb, NULL);
}

bool act_suspend_vm_exited(struct sandbox *sb)
{
	if (sb->capture || !sb->op.id[0] || sb->op.kind != OPK_SUSPEND || op_state_done(sb->op.state))
		return false;
	/* A node with a shared directory: its disk too, so that any node can restore it (its
	 * memory and devices are there already: path_snapshot_dir). Without it, only here. The
	 * suspend is done once the copy is. */
	if (sb->d->cfg.shared_dir[0]) {
		space_err err = { 0 };

		if (disk_share(sb, disk_shared, &err) == 0)
			return true;
		disk_shared(sb, err.msg);
		return true;
	}
	lifecycle_done(sb, NULL);
	return true;
}

static void on_restored(struct sandbox *sb, const char *error)
{
	/* A guest that ran may have written its disk: its saved memory no
	 * longer matches it, so the sandbox cannot go back to suspended. */
	if (error && sb->guest_ran) {
		sandbox_fail(sb, error);
		return;
	}
	if (!error && sb->rec.timeout_s)
		sb->rec.expires_ms = now_ms() + sb->rec.timeout_s * 1000;
	lifecycle_done(sb, error);
}

/* The saved state's record, read on the store's thread. */
static void restore_step(struct sandbox *sb, void *arg)
{
	struct snapshot_read *rr = arg;
	space_err e = { 0 };

	if (!sb)
		goto out;
	if (rr->rc < 0) {
		if (rr->err.code != ENOENT)
			log_warn("sandbox %s: reading its saved state: %s", sb->rec.id, rr->err.msg);
		lifecycle_done(sb, "its saved state is missing");
	} else if (!snapshot_files_ok(&rr->snap)) {
		lifecycle_done(sb, "the files of its saved state are missing");
	} else if (sandbox_launch(sb, &rr->snap, on_restored, &e) < 0) {
		lifecycle_done(sb, e.msg);
	}
out:
	snapshot_read_free(rr);
}

int act_restore_start(struct sandbox *sb, const struct lc_args *a, space_err *err)
{
	struct snapshot_read *rr;

	(void)a;
	if (!sb->rec.snapshot_id[0])
		return err_set(err, EIO, "sandbox %s: its saved state is missing", sb->rec.id);
	/* Restoring counts already: no VM beyond this one. */
	if (capacity_admit(sb->d, sb->rec.vcpus, sb->rec.memory_mib, 0, err) < 0)
		return -1;
	rr = snapshot_read_new(sb->rec.snapshot_id);
	if (!rr)
		return err_set(err, ENOMEM, "out of memory");
	if (act_read(sb, snapshot_read_run, restore_step, rr, err) < 0) {
		snapshot_read_free(rr);
		return -1;
	}
	return 0;
}

/* ---- after a restart ---- */

/* A suspend that saved everything before the daemon stopped: looked for on the store's thread
 * (act_read), with what it needs of the sandbox copied. */
struct newest {
	char sb_id[ID_LEN];
	char restored_from[ID_LEN];
	int64_t op_created_ms;
	char id[ID_LEN];
	int rc;
	space_err err;
};

/* Only one this suspend made: newer than its operation, and not the one the
 * sandbox was last restored from (kept while it ran). */
static int newest_suspend(const struct snapshot_rec *s, void *arg)
{
	struct newest *n = arg;

	if (s->state == SNAPS_READY && strcmp(s->sandbox_id, n->sb_id) == 0 &&
	    strcmp(s->id, n->restored_from) != 0 && s->created_ms >= n->op_created_ms)
		snprintf(n->id, sizeof(n->id), "%s", s->id); /* by creation: the last wins */
	return 0;
}

static void newest_read(struct store *conn, void *arg)
{
	struct newest *n = arg;

	n->rc = store_snapshot_each(conn, 1u << SNAP_SUSPEND, newest_suspend, n, &n->err);
}

static void newest_step(struct sandbox *sb, void *arg)
{
	struct newest *n = arg;

	if (!sb) {
		/* gone, or its operation ended meanwhile */
	} else if (n->rc == 0 && n->id[0]) {
		drop_previous(sb, n->id);
		snprintf(sb->rec.snapshot_id, sizeof(sb->rec.snapshot_id), "%s", n->id);
		lifecycle_done(sb, NULL);
	} else {
		sandbox_fail(sb, "its QEMU was gone after a daemon restart");
	}
	free(n);
}

static void on_capture_status(struct vm *vm, const char *status, const space_err *err, void *arg);

static void on_top(struct vm *vm, const char *file, const space_err *err, void *arg)
{
	struct sandbox *sb = arg;
	space_err e = { 0 };

	/* Where QEMU writes is the truth, whether the freeze finished or not. */
	if (!err && file && strcmp(file, sb->rec.disk) != 0) {
		log_info("sandbox %s: its disk is %s now", sb->rec.id, file);
		snprintf(sb->rec.disk, sizeof(sb->rec.disk), "%s", file);
		sandbox_persist(sb);
	}
	if (vm_status(vm, on_capture_status, sb, &e) < 0)
		lifecycle_done(sb, "interrupted by a daemon restart");
}

static void on_cont(struct vm *vm, const space_err *err, void *arg)
{
	struct sandbox *sb = arg;

	(void)vm;
	(void)err;
	sandbox_send_clock(sb);
	lifecycle_done(sb, "interrupted by a daemon restart");
}

static void on_capture_status(struct vm *vm, const char *status, const space_err *err, void *arg)
{
	struct sandbox *sb = arg;
	space_err e = { 0 };

	/* The snapshot itself is gone (snapshots_reconcile); the VM runs again
	 * if it ran before, or the sandbox stays as the client left it. */
	if (!err && status && strcmp(status, "running") != 0 && sb->rec.prev_state == SB_RUNNING) {
		vm_qmp(vm, "migrate_cancel", NULL, NULL, NULL, &e);
		if (vm_resume(vm, on_cont, sb, &e) == 0)
			return;
	}
	lifecycle_done(sb, "interrupted by a daemon restart");
}

void act_capture_reconcile(struct sandbox *sb)
{
	space_err err = { 0 };
	struct newest *n;

	if (sb->vm) {
		if (vm_disk_top(sb->vm, on_top, sb, &err) < 0)
			lifecycle_done(sb, "interrupted by a daemon restart");
		return;
	}
	/* No QEMU: a suspend whose save had finished is done. */
	if (sb->op.kind == OPK_SUSPEND && (n = calloc(1, sizeof(*n)))) {
		snprintf(n->sb_id, sizeof(n->sb_id), "%s", sb->rec.id);
		snprintf(n->restored_from, sizeof(n->restored_from), "%s", sb->rec.snapshot_id);
		n->op_created_ms = sb->op.created_ms;
		if (act_read(sb, newest_read, newest_step, n, &err) == 0)
			return;
		free(n);
	}
	sandbox_fail(sb, "its QEMU was gone after a daemon restart");
}

static void on_restore_status(struct vm *vm, const char *status, const space_err *err, void *arg)
{
	struct sandbox *sb = arg;

	/* A guest that ran has written its disk: it can only go on. One that
	 * never ran is dropped, and the saved state is as good as before. */
	if (!err && status && strcmp(status, "running") == 0) {
		sandbox_bringup_adopted(sb, on_restored);
		return;
	}
	vm_kill(vm);
	lifecycle_done(sb, "interrupted by a daemon restart; restore it again");
}

void act_restore_reconcile(struct sandbox *sb)
{
	space_err err = { 0 };

	if (!sb->vm || vm_status(sb->vm, on_restore_status, sb, &err) < 0)
		lifecycle_done(sb, "interrupted by a daemon restart; restore it again");
}
