/* lifecycle.c -- operations as data: one table says, for each kind, the states it may start
 * from, the state it holds while under way, where it ends, and who starts and reconciles it.
 *
 * Rules over the whole table: one operation at a time per sandbox (delete
 * alone may cut in: it cancels the one in flight); an operation that cannot
 * start now is refused with a conflict naming the current state and the
 * operation in flight, never logged and carried on; an action that fails
 * without losing its VM returns the sandbox to where it started (done_fail =
 * SB__COUNT), so no sandbox is failed just because a snapshot could not be
 * written. The states a kind moves through are checked against the state
 * machine in model.c by tests/unit/test_lifecycle.c. */
#include <string.h>

#include "events/events.h"
#include "log.h"
#include "runtime.h"

#define T(s) (1u << (s))

struct lc_action {
	unsigned from;           /* states it may start from */
	enum sb_state transient; /* while under way (SB__COUNT: stays where it is) */
	enum sb_state done_ok;   /* on success (SB__COUNT: back where it started) */
	enum sb_state done_fail; /* on failure with the VM intact (SB__COUNT: back) */
	int (*start)(struct sandbox *sb, const struct lc_args *a, space_err *err);
	void (*on_reconcile)(struct sandbox *sb);
};

/* Create and delete have their own paths (sandbox_create, sandbox_start_delete);
 * they are listed for their states and reconciliation. */
static const struct lc_action actions[OPK__COUNT] = {
	[OPK_CREATE] = { 0, SB_CREATING, SB_RUNNING, SB_FAILED, NULL, act_boot_reconcile },
	[OPK_DELETE] = { ~(T(SB_DELETING) | T(SB_DELETED)), SB_DELETING, SB_DELETED, SB_FAILED, NULL, NULL },
	[OPK_PAUSE] = { T(SB_RUNNING), SB_PAUSING, SB_PAUSED, SB__COUNT, act_pause_start,
			act_pause_reconcile },
	[OPK_RESUME] = { T(SB_PAUSED), SB__COUNT, SB_RUNNING, SB__COUNT, act_resume_start,
			 act_resume_reconcile },
	[OPK_SUSPEND] = { T(SB_RUNNING) | T(SB_PAUSED), SB_SUSPENDING, SB_SUSPENDED, SB__COUNT,
			  act_suspend_start, act_capture_reconcile },
	[OPK_RESTORE] = { T(SB_SUSPENDED), SB_RESTORING, SB_RUNNING, SB_SUSPENDED, act_restore_start,
			  act_restore_reconcile },
	[OPK_STOP] = { T(SB_RUNNING) | T(SB_PAUSED) | T(SB_SUSPENDED), SB_STOPPING, SB_STOPPED, SB__COUNT,
		       act_stop_start, act_stop_reconcile },
	[OPK_START] = { T(SB_STOPPED), SB_CREATING, SB_RUNNING, SB_STOPPED, act_start_start,
			act_boot_reconcile },
	[OPK_FORK] = { T(SB_RUNNING) | T(SB_PAUSED), SB__COUNT, SB__COUNT, SB__COUNT, act_fork_start,
		       act_capture_reconcile },
	[OPK_SNAPSHOT] = { T(SB_RUNNING) | T(SB_PAUSED), SB__COUNT, SB__COUNT, SB__COUNT,
			   act_snapshot_start, act_capture_reconcile },
};

static bool op_in_flight(const struct sandbox *sb)
{
	return sb->op.id[0] && !op_state_done(sb->op.state);
}

/* "running" or "running or paused" */
static void state_list(unsigned mask, char *out, size_t len)
{
	size_t used = 0;
	int n = 0;

	out[0] = '\0';
	for (int s = 0; s < SB__COUNT; s++) {
		if (!(mask & T(s)))
			continue;
		used += (size_t)snprintf(out + used, used < len ? len - used : 0, "%s%s", n ? " or " : "",
					 sb_state_name((enum sb_state)s));
		n++;
	}
}

int lifecycle_refuse(struct sandbox *sb, enum op_kind kind, space_err *err)
{
	char want[160];

	if (op_in_flight(sb))
		return err_set(err, EBUSY, "sandbox %s is %s with operation %s (%s) in flight; %s must wait for it",
			       sb->rec.id, sb_state_name(sb->rec.state), sb->op.id, op_kind_name(sb->op.kind),
			       op_kind_name(kind));
	state_list(actions[kind].from, want, sizeof(want));
	return err_set(err, EBUSY, "sandbox %s is %s; %s needs it %s", sb->rec.id, sb_state_name(sb->rec.state),
		       op_kind_name(kind), want);
}

int lifecycle_begin(struct sandbox *sb, enum op_kind kind, const struct lc_args *args, space_err *err)
{
	const struct lc_action *a = &actions[kind];
	static const struct lc_args none;

	if ((unsigned)kind >= OPK__COUNT || !a->start)
		return err_set(err, EINVAL, "operation %s is not a lifecycle action", op_kind_name(kind));
	if (op_in_flight(sb) || !(a->from & T(sb->rec.state)))
		return lifecycle_refuse(sb, kind, err);
	op_rec_clear(&sb->op);
	if (op_begin(sb->d, kind, sb->rec.id, args ? args->op_id : NULL, &sb->op, err) < 0)
		return -1;
	sb->rec.prev_state = sb->rec.state;
	if (a->transient != SB__COUNT)
		sandbox_set_state(sb, a->transient);
	else
		sandbox_persist(sb);
	op_running(sb->d, &sb->op);
	log_info("sandbox %s: %s (operation %s)", sb->rec.id, op_kind_name(kind), sb->op.id);
	if (a->start(sb, args ? args : &none, err) < 0) {
		/* "QEMU is not running" from the VMM is not an unknown sandbox. */
		if (err->code == ESRCH)
			err->code = EBUSY;
		/* Nothing was changed that the action's own failure path would not
		 * undo: back to where it started, the operation failed. */
		lifecycle_done(sb, err->msg);
		return -1;
	}
	return 0;
}

void lifecycle_done(struct sandbox *sb, const char *error)
{
	const struct lc_action *a;
	enum sb_state to;

	if (!op_in_flight(sb))
		return;
	a = &actions[sb->op.kind];
	to = error ? a->done_fail : a->done_ok;
	/* "Back to where it was": an action without a transient state never left it (and
	 * prev_state may be older than the operation: a daemon killed between storing the
	 * operation and the sandbox row left the previous one's). */
	if (to == SB__COUNT)
		to = a->transient == SB__COUNT ? sb->rec.state : sb->rec.prev_state;
	/* A VM that died meanwhile made the sandbox failed or deleting: that
	 * outcome stands. */
	if (sb->rec.state != SB_FAILED && sb->rec.state != SB_DELETING && sb->rec.state != SB_DELETED)
		sandbox_set_state(sb, to);
	if (error)
		log_warn("sandbox %s: %s failed: %s", sb->rec.id, op_kind_name(sb->op.kind), error);
	op_finish(sb->d, &sb->op, error);
}

void lifecycle_reconcile(struct sandbox *sb)
{
	const struct lc_action *a;

	if (!op_in_flight(sb))
		return;
	a = &actions[sb->op.kind];
	/* The operation is stored before the sandbox row: a daemon killed between the two left
	 * the sandbox in the state it was in (not the action's transient one) with the previous
	 * action's prev_state. Nothing of the action ran; it failed, the sandbox stays as it is. */
	if (a->start && a->transient != SB__COUNT && sb->rec.state != a->transient) {
		sb->rec.prev_state = sb->rec.state;
		sandbox_persist(sb);
		log_warn("sandbox %s: %s failed: interrupted by a daemon restart before it began",
			 sb->rec.id, op_kind_name(sb->op.kind));
		op_finish(sb->d, &sb->op, "interrupted by a daemon restart before it began");
		return;
	}
	if (a->on_reconcile)
		a->on_reconcile(sb);
}

/* For the unit test: the table's states, so it can check them against the
 * state machine without linking the actions. */
void lifecycle_table_states(enum op_kind kind, unsigned *from, int *transient, int *ok, int *fail);
void lifecycle_table_states(enum op_kind kind, unsigned *from, int *transient, int *ok, int *fail)
{
	*from = actions[kind].from;
	*transient = actions[kind].transient;
	*ok = actions[kind].done_ok;
	*fail = actions[kind].done_fail;
}

/* ---- the core's entry points for front ends ---- */

/* The live sandbox a client names: ENOENT unknown (or not theirs), EBUSY deleted. */
struct sandbox *sandbox_find_for(struct spaced *d, const char *id, enum op_kind kind, space_err *err)
{
	struct sandbox *sb = sandbox_find(d, id);
	struct sandbox_rec r;

	if (sb && sandbox_visible(&sb->rec))
		return sb;
	if (sb || sandbox_get(d, id, &r, err) < 0) {
		if (!err->code)
			err_set(err, ENOENT, "no sandbox '%.64s'", id);
		return NULL;
	}
	sandbox_rec_clear(&r);
	err_set(err, EBUSY, "sandbox %s is already deleted%s", id, kind == OPK_DELETE ? "" : "; nothing to do");
	return NULL;
}

int sandbox_act(struct spaced *d, const char *id, enum op_kind kind, struct sandbox_rec *out, struct op_rec *op,
		space_err *err)
{
	struct sandbox *sb = sandbox_find_for(d, id, kind, err);

	if (!sb)
		return -1;
	if (kind == OPK_DELETE) {
		if (sb->rec.state == SB_DELETING)
			return err_set(err, EBUSY, "sandbox %s is already being deleted", id);
		sandbox_start_delete(sb, "requested");
	} else if (lifecycle_begin(sb, kind, NULL, err) < 0) {
		return -1;
	}
	sandbox_copy_out(sb, out, op);
	return 0;
}

int sandbox_wake(struct spaced *d, const char *id, struct sandbox_rec *out, struct op_rec *op, space_err *err)
{
	struct sandbox *sb = sandbox_find_for(d, id, OPK_RESUME, err);
	enum op_kind kind;

	if (!sb)
		return -1;
	switch (sb->rec.state) {
	case SB_RUNNING:
		/* Awake already (a fork or snapshot may be under way). */
		sandbox_copy_out(sb, out, NULL);
		memset(op, 0, sizeof(*op));
		return 0;
	case SB_PAUSED:
		kind = OPK_RESUME;
		goto act;
	case SB_SUSPENDED:
		kind = OPK_RESTORE;
		goto act;
	case SB_STOPPED:
		kind = OPK_START;
		goto act;
	default:
		break;
	}
	/* Creating, or on its way somewhere: wake has nothing to start. */
	return err_set(err, EBUSY, "sandbox %s is %s%s%s%s; wake needs it paused, suspended or stopped", id,
		       sb_state_name(sb->rec.state), op_in_flight(sb) ? " with operation " : "",
		       op_in_flight(sb) ? sb->op.id : "", op_in_flight(sb) ? " in flight" : "");
act:
	if (lifecycle_begin(sb, kind, NULL, err) < 0)
		return -1;
	sandbox_copy_out(sb, out, op);
	return 0;
}

int sandbox_set_timeout(struct spaced *d, const char *id, const struct timeout_req *req, struct sandbox_rec *out,
			space_err *err)
{
	struct sandbox *sb = sandbox_find_for(d, id, OPK_RESUME, err);

	if (!sb)
		return -1;
	if (sb->rec.state == SB_DELETING || sb->rec.state == SB_FAILED)
		return err_set(err, EBUSY, "sandbox %s is %s; its timeout no longer matters", id,
			       sb_state_name(sb->rec.state));
	sb->rec.timeout_s = req->timeout_s;
	sb->rec.expires_ms = req->timeout_s ? now_ms() + req->timeout_s * 1000 : 0;
	if (req->on_timeout_set)
		sb->rec.on_timeout = req->on_timeout;
	sandbox_persist(sb);
	{
		char at[32] = "";

		if (sb->rec.expires_ms)
			fmt_time(at, sb->rec.expires_ms);
		events_emit(sb, EVT_TIMEOUT_SET, NULL,
			    json_pack("{s:I,s:s?,s:s}", "timeout_s", (json_int_t)sb->rec.timeout_s, "expires_at",
				      at[0] ? at : NULL, "on_timeout", on_timeout_name(sb->rec.on_timeout)));
	}
	sandbox_copy_out(sb, out, NULL);
	return 0;
}
