/* act_power.c -- stop and start: the guest shuts down cleanly and its disk is kept; start boots
 * that disk again. Also what a restart does with an interrupted create or start. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "runtime.h"
#include "store/store.h"

/* How long a guest may take to shut down before its VM is ended for it. */
#define STOP_GRACE_S 10

static void clear_act_timer(struct sandbox *sb)
{
	if (sb->act_timer) {
		event_free(sb->act_timer);
		sb->act_timer = NULL;
	}
}

static void stop_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct sandbox *sb = arg;

	(void)fd;
	(void)what;
	log_warn("sandbox %s: the guest did not shut down within %d s; ending its VM", sb->rec.id, STOP_GRACE_S);
	if (sb->vm)
		vm_kill(sb->vm);
}

/* Saved memory (of a suspended sandbox, or the one a running sandbox was
 * restored from) means nothing once it is stopped. */
static void discard_saved_state(struct sandbox *sb)
{
	if (!sb->rec.snapshot_id[0])
		return;
	snapshot_drop(sb->d, sb->rec.snapshot_id);
	sb->rec.snapshot_id[0] = '\0';
	sandbox_persist(sb);
}

bool act_stop_vm_exited(struct sandbox *sb)
{
	if (!sb->op.id[0] || sb->op.kind != OPK_STOP || op_state_done(sb->op.state))
		return false;
	clear_act_timer(sb);
	discard_saved_state(sb);
	sessions_abort(sb, "the sandbox was stopped");
	lifecycle_done(sb, NULL);
	return true;
}

static void shutdown_guest(struct sandbox *sb)
{
	uint8_t mode[4] = { 1, 0, 0, 0 }; /* clean: SIGTERM, grace, sync, read-only root */
	struct timeval tv = { STOP_GRACE_S, 0 };

	clear_act_timer(sb);
	sb->act_timer = evtimer_new(sb->d->base, stop_deadline, sb);
	if (sb->act_timer)
		evtimer_add(sb->act_timer, &tv);
	if (agent_send(sb->agent, H_SHUTDOWN, 0, mode, sizeof(mode)) < 0) {
		log_info("sandbox %s: agent not connected; ending its VM", sb->rec.id);
		vm_kill(sb->vm);
	}
}

static void on_resumed_for_stop(struct vm *vm, const space_err *err, void *arg)
{
	struct sandbox *sb = arg;

	if (err) {
		vm_kill(vm);
		return;
	}
	shutdown_guest(sb);
}

int act_stop_start(struct sandbox *sb, const struct lc_args *a, space_err *err)
{
	(void)a;
	if (!sb->vm) {
		discard_saved_state(sb);
		sessions_abort(sb, "the sandbox was stopped");
		lifecycle_done(sb, NULL);
		return 0;
	}
	/* A paused guest cannot shut itself down: it runs for that. */
	if (sb->rec.prev_state == SB_PAUSED)
		return vm_resume(sb->vm, on_resumed_for_stop, sb, err);
	shutdown_guest(sb);
	return 0;
}

static void on_started(struct sandbox *sb, const char *error)
{
	if (!error && sb->rec.timeout_s)
		sb->rec.expires_ms = now_ms() + sb->rec.timeout_s * 1000;
	lifecycle_done(sb, error);
}

int act_start_start(struct sandbox *sb, const struct lc_args *a, space_err *err)
{
	(void)a;
	/* Creating (where start is) counts already: no VM beyond this one. */
	if (capacity_admit(sb->d, sb->rec.vcpus, sb->rec.memory_mib, 0, err) < 0)
		return -1;
	sb->rec.error[0] = '\0';
	return sandbox_launch(sb, NULL, on_started, err);
}

/* ---- after a restart ---- */

void act_stop_reconcile(struct sandbox *sb)
{
	if (sb->vm) {
		vm_kill(sb->vm); /* act_stop_vm_exited finishes */
		return;
	}
	sessions_abort(sb, "the sandbox was stopped");
	lifecycle_done(sb, NULL);
}

static void on_boot_up(struct sandbox *sb, const char *error)
{
	if (sb->op.kind == OPK_START) {
		on_started(sb, error);
		return;
	}
	if (error) {
		sandbox_fail(sb, error);
		return;
	}
	sandbox_set_state(sb, SB_RUNNING);
	op_finish(sb->d, &sb->op, NULL);
	warm_if_daemons(sb);
}

/* A clone whose state was still loading when the daemon stopped starts over
 * from its snapshot, once that QEMU is gone: its guest never ran, so its disk
 * is as the snapshot left it. The snapshot's record is read on the store's thread. */
static void relaunch_step(struct sandbox *sb, void *arg)
{
	struct snapshot_read *q = arg;
	space_err err = { 0 };

	if (!sb) {
		/* gone, or its operation ended meanwhile */
	} else if (q->rc < 0) {
		on_boot_up(sb, "interrupted by a daemon restart before its VM ran; its snapshot is gone");
	} else {
		log_info("sandbox %s: starting it again from snapshot %s", sb->rec.id, q->snap.id);
		if (sandbox_launch(sb, &q->snap, on_boot_up, &err) < 0)
			on_boot_up(sb, err.msg);
	}
	snapshot_read_free(q);
}

static void relaunch(struct sandbox *sb, const char *error)
{
	struct snapshot_read *q;
	space_err err = { 0 };

	(void)error;
	if (sb->rec.start_kind == START_BOOT || sb->op.kind == OPK_START) {
		log_info("sandbox %s: booting it (its VM had not started)", sb->rec.id);
		if (sandbox_launch(sb, NULL, on_boot_up, &err) < 0)
			on_boot_up(sb, err.msg);
		return;
	}
	if (!sb->rec.source_snapshot[0] || !(q = snapshot_read_new(sb->rec.source_snapshot))) {
		on_boot_up(sb, "interrupted by a daemon restart before its VM ran; its snapshot is gone");
		return;
	}
	if (act_read(sb, snapshot_read_run, relaunch_step, q, &err) < 0) {
		snapshot_read_free(q);
		on_boot_up(sb, err.msg);
	}
}

static void on_boot_cont(struct vm *vm, const space_err *err, void *arg)
{
	struct sandbox *sb = arg;

	(void)vm;
	if (err)
		on_boot_up(sb, err->msg);
	else
		sandbox_bringup_adopted(sb, on_boot_up);
}

static void on_boot_status(struct vm *vm, const char *status, const space_err *err, void *arg)
{
	struct sandbox *sb = arg;
	space_err e = { 0 };

	/* A guest that runs goes on; one whose state loaded gets its vCPUs;
	 * one still loading starts over. */
	if (!err && status && strcmp(status, "running") == 0) {
		sandbox_bringup_adopted(sb, on_boot_up);
		return;
	}
	if (!err && status && strcmp(status, "paused") == 0 && vm_resume(vm, on_boot_cont, sb, &e) == 0)
		return;
	if (!err && status && strcmp(status, "inmigrate") == 0 && sb->rec.start_kind != START_BOOT) {
		sb->up_done = relaunch; /* called once this QEMU has exited */
		vm_kill(vm);
		return;
	}
	vm_kill(vm);
	on_boot_up(sb, "interrupted by a daemon restart before its VM ran");
}

void act_boot_reconcile(struct sandbox *sb)
{
	space_err err = { 0 };

	/* Intent is on disk before QEMU starts: a create or start whose VM was
	 * never spawned (or whose disk was never made) is carried out now. */
	if (!sb->vm) {
		if (sb->rec.disk[0] && access(sb->rec.disk, R_OK | W_OK) == 0) {
			relaunch(sb, NULL);
			return;
		}
		on_boot_up(sb, "interrupted by a daemon restart before its disk was made");
		return;
	}
	if (vm_status(sb->vm, on_boot_status, sb, &err) < 0)
		on_boot_up(sb, err.msg);
}
