/* act_fork.c -- fork: N new sandboxes whose memory and disk are the parent's at one instant,
 * copy-on-write; the parent keeps running. The children exist (creating) from the request on,
 * start from a fork snapshot once it is taken, and the operation succeeds when all run. */
#include <stdlib.h>
#include <string.h>

#include "events/events.h"
#include "log.h"
#include "runtime.h"
#include "store/store.h"

/* The parent's fork operation ends when no child is still creating. */
static void check_done(struct spaced *d, const char *parent_id)
{
	struct sandbox *parent = sandbox_find(d, parent_id);
	char errors[512] = "";
	size_t i, failed = 0, waiting = 0;
	json_t *ids, *v;

	if (!parent || !parent->op.id[0] || parent->op.kind != OPK_FORK || op_state_done(parent->op.state) ||
	    parent->capture)
		return;
	ids = json_object_get(parent->op.result, "children");
	json_array_foreach(ids, i, v) {
		struct sandbox *c = sandbox_find(d, json_string_value(v));

		if (c && c->rec.state == SB_CREATING)
			waiting++;
		else if (!c || c->rec.state != SB_RUNNING) {
			failed++;
			if (!errors[0] && c)
				snprintf(errors, sizeof(errors), "child %s: %s", c->rec.id, c->rec.error);
		}
	}
	if (waiting)
		return;
	/* Every child maps the fork snapshot's memory now: its files may go
	 * (the frozen disk layer stays while a chain reaches it). */
	snapshot_drop(d, json_string_value(json_object_get(parent->op.result, "snapshot_id")));
	if (!failed)
		events_emit(parent, EVT_FORKED, NULL, json_pack("{s:O}", "children", ids));
	lifecycle_done(parent, failed ? (errors[0] ? errors : "a child failed") : NULL);
}

static void on_child_up(struct sandbox *child, const char *error)
{
	char parent[ID_LEN];

	snprintf(parent, sizeof(parent), "%s", child->rec.parent_id);
	if (error) {
		sandbox_fail(child, error);
	} else {
		sandbox_set_state(child, SB_RUNNING);
		op_finish(child->d, &child->op, NULL);
		log_info("sandbox %s: running (fork of %s)", child->rec.id, parent);
	}
	check_done(child->d, parent);
}

void act_fork_child_go(struct sandbox *child, const struct snapshot_rec *snap, const char *error)
{
	char seed[PATH_MAX];
	space_err err = { 0 };

	if (child->rec.state != SB_CREATING)
		return; /* deleted meanwhile */
	if (error) {
		char why[512];

		snprintf(why, sizeof(why), "the fork failed: %s", error);
		sandbox_fail(child, why);
		return;
	}
	snprintf(seed, sizeof(seed), "%s/seed.qcow2", snap->dir);
	op_running(child->d, &child->op);
	if (disk_from_seed(child->d, seed, child->rec.disk, &err) < 0 ||
	    sandbox_launch(child, snap, on_child_up, &err) < 0) {
		sandbox_fail(child, err.msg);
		return;
	}
	/* The only child of a fork is the only VM that ever maps the fork
	 * snapshot's image: it needs no sealed copy (see launch.c). */
	struct sandbox *parent = sandbox_find(child->d, child->rec.parent_id);
	if (parent && json_array_size(json_object_get(parent->op.result, "children")) == 1)
		child->launch_snap_own = true;
}

static void on_captured(struct sandbox *sb, struct snapshot_rec *snap, const char *error)
{
	json_t *ids = json_object_get(sb->op.result, "children");
	size_t i;
	json_t *v;

	if (snap)
		json_object_set_new(sb->op.result, "snapshot_id", json_string(snap->id));
	json_array_foreach(ids, i, v) {
		struct sandbox *c = sandbox_find(sb->d, json_string_value(v));

		if (c)
			act_fork_child_go(c, snap, error);
	}
	if (error)
		lifecycle_done(sb, error);
	else
		check_done(sb->d, sb->rec.id);
}

int act_fork_start(struct sandbox *sb, const struct lc_args *a, space_err *err)
{
	json_decref(sb->op.result);
	sb->op.result = json_pack("{s:O}", "children", a->children);
	if (!sb->op.result)
		return err_set(err, ENOMEM, "out of memory");
	op_running(sb->d, &sb->op);
	if (capture_start(sb, SNAP_FORK, NULL, true, true, on_captured, err) < 0)
		return -1;
	return 0;
}

/* A child: the parent's record, a new identity, no sessions (processes the
 * parent ran go on in the child's guest, detached from any session). */
static struct sandbox *new_child(struct sandbox *parent, space_err *err)
{
	struct sandbox *c = sandbox_new(parent->d);
	struct sandbox_rec *r;

	if (!c) {
		err_set(err, ENOMEM, "out of memory");
		return NULL;
	}
	r = &c->rec;
	*r = parent->rec;
	r->env = json_deep_copy(parent->rec.env);
	r->metadata = json_deep_copy(parent->rec.metadata);
	/* Forks inherit the policy; each gets its own netns, CA and gateway at launch. */
	r->network = json_deep_copy(parent->rec.network);
	id_new(r->id, "sb-");
	snprintf(r->parent_id, sizeof(r->parent_id), "%s", parent->rec.id);
	r->state = r->prev_state = SB_CREATING;
	r->start_kind = START_FORK;
	r->role = ROLE_USER;
	r->disk[0] = r->snapshot_id[0] = r->source_snapshot[0] = r->error[0] = '\0';
	r->pid = 0;
	r->pid_start = 0;
	r->created_ms = r->updated_ms = now_ms();
	r->expires_ms = r->timeout_s ? r->created_ms + r->timeout_s * 1000 : 0;
	/* Its parent's template, as the parent holds it (no read). */
	template_rec_copy(&c->tmpl, &parent->tmpl);
	if (strcmp(c->tmpl.digest, r->template_digest) != 0)
		log_warn("sandbox %s: its template %s is not known here", r->id, r->template_digest);
	sandbox_persist(c);
	if (op_begin(parent->d, OPK_CREATE, r->id, NULL, &c->op, err) < 0) {
		sandbox_start_delete(c, "its fork could not be recorded");
		return NULL;
	}
	events_emit(c, EVT_CREATED, "forked", json_pack("{s:s,s:s}", "start_kind", "fork", "parent_id", parent->rec.id));
	return c;
}

/* A fork refused after some children existed: they never were the client's. */
static void drop_children(struct spaced *d, json_t *ids, const char *why)
{
	size_t i;
	json_t *v;

	json_array_foreach(ids, i, v) {
		struct sandbox *m = sandbox_find(d, json_string_value(v));

		if (m)
			sandbox_start_delete(m, why);
	}
	json_decref(ids);
}

int sandbox_fork(struct spaced *d, const char *id, int count, struct sandbox_rec *out, struct op_rec *op,
		 json_t **children, space_err *err)
{
	struct sandbox *sb = sandbox_find_for(d, id, OPK_FORK, err);
	struct lc_args args = { .count = count };
	json_t *ids;

	if (!sb)
		return -1;
	if (count < 1 || count > SPEC_FORK_MAX)
		return err_set(err, EINVAL, "count must be 1 to %d", SPEC_FORK_MAX);
	/* Refused before any child exists: the state, the room, the snapshot. */
	if ((sb->op.id[0] && !op_state_done(sb->op.state)) ||
	    (sb->rec.state != SB_RUNNING && sb->rec.state != SB_PAUSED))
		return lifecycle_refuse(sb, OPK_FORK, err);
	if (capacity_admit(d, sb->rec.vcpus, sb->rec.memory_mib, count, err) < 0 ||
	    capture_check(sb, SNAP_FORK, true, err) < 0)
		return -1;
	ids = json_array();
	if (!ids)
		return err_set(err, ENOMEM, "out of memory");
	for (int i = 0; i < count; i++) {
		struct sandbox *c = new_child(sb, err);

		if (!c || json_array_append_new(ids, json_string(c->rec.id)) < 0) {
			if (!err->code)
				err_set(err, ENOMEM, "out of memory");
			drop_children(d, ids, "its fork was refused");
			return -1;
		}
	}
	args.children = ids;
	if (lifecycle_begin(sb, OPK_FORK, &args, err) < 0) {
		drop_children(d, ids, "its fork was refused");
		return -1;
	}
	sandbox_copy_out(sb, out, op);
	*children = ids;
	return 0;
}
