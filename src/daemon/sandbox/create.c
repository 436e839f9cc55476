/* create.c -- a new sandbox the fastest way there is: a warm pool's VM, a clone of a snapshot
 * (the template's ready snapshot or a named one), else a cold boot */
#include <stdlib.h>
#include <string.h>

#include "events/events.h"
#include "log.h"
#include "ports.h"
#include "runtime.h"
#include "store/store.h"

/* The store reads a create makes: the named snapshot asked for (it must be ready) and the
 * template (the snapshot's own when one is asked for). On any store: the loop's, or the
 * store's thread's (create_read). */
static int prepare_reads(struct store *st, const struct create_req *req, struct snapshot_rec *from,
			 struct template_rec *tmpl, space_err *err)
{
	const char *ref = req->template_ref;

	if (req->snapshot[0]) {
		if (snapshot_lookup(st, req->snapshot, from, err) < 0)
			return -1;
		if (from->kind != SNAP_NAMED || from->state != SNAPS_READY)
			return err_set(err, EBUSY, "snapshot %.100s is not a ready named snapshot", req->snapshot);
		ref = from->template_digest;
	}
	if (store_template_resolve(st, ref, tmpl, err) < 0)
		return err_wrap(err, "template '%.100s'", ref);
	return 0;
}

int create_read(struct store *conn, bool net, const struct create_req *req, struct create_reads *out,
		space_err *err)
{
	const struct template_rec *t = &out->tmpl;
	int vcpus, mem;

	memset(out, 0, sizeof(*out));
	if (prepare_reads(conn, req, &out->from, &out->tmpl, err) < 0)
		return -1;
	out->done = true;
	/* The ready snapshot the create would clone (a named snapshot is cloned itself). */
	vcpus = req->vcpus ? req->vcpus : (t->vcpus > 0 ? t->vcpus : 1);
	mem = req->memory_mib ? req->memory_mib : (t->memory_mib > 0 ? t->memory_mib : 256);
	if (!req->snapshot[0]) {
		if (snapshot_ready_in(conn, net, t->digest, vcpus, mem, &out->ready) < 0)
			memset(&out->ready, 0, sizeof(out->ready));
		out->ready_read = true;
	}
	/* The policy (as create_prepare picks it) with its secret values, for a warm-pool VM
	 * that takes it at once (claim); NULL if it injects none, or the read failed (then it
	 * is sent once they are read). */
	const json_t *policy = req->network ? req->network : (json_is_object(t->network) ? t->network : NULL);
	if (policy && egress_injects_secrets(policy)) {
		space_err e = { 0 };

		/* no secret goes to a host it is not bound to (the create is refused: 400) */
		if (egress_check_bindings(conn, policy, err) < 0)
			return -1;
		out->policy = egress_resolve(conn, policy, &e);
	}
	return 0;
}

struct create_job *create_job_new(struct spaced *d)
{
	struct create_job *j = calloc(1, sizeof(*j));

	if (j)
		j->net = egress_enabled(d);
	return j;
}

int create_job_read(struct store *conn, void *arg, space_err *err)
{
	struct create_job *j = arg;

	return create_read(conn, j->net, &j->req, &j->pre, err);
}

void create_job_free(void *arg)
{
	struct create_job *j = arg;

	create_req_free(&j->req);
	create_reads_clear(&j->pre);
	free(j);
}

void create_reads_clear(struct create_reads *c)
{
	snapshot_rec_clear(&c->from);
	snapshot_rec_clear(&c->ready);
	template_rec_clear(&c->tmpl);
	egress_resolved_free(c->policy);
	memset(c, 0, sizeof(*c));
}

/* The sandbox record a request asks for; template (or snapshot) resolved: read here, or
 * taken from pre (what create_read read; moved out of it). */
int create_prepare(struct spaced *d, const struct create_req *req, struct sandbox *sb,
		   struct snapshot_rec *from, struct create_reads *pre, space_err *err)
{
	struct sandbox_rec *r = &sb->rec;
	const char *ref = req->template_ref;
	int dvcpus, dmem;

	memset(from, 0, sizeof(*from));
	if (pre && pre->done) {
		*from = pre->from;
		sb->tmpl = pre->tmpl;
		memset(&pre->from, 0, sizeof(pre->from));
		memset(&pre->tmpl, 0, sizeof(pre->tmpl));
		pre->done = false;
	} else {
		/* Every caller reads first, on the store's thread (create_read). */
		return err_set(err, EINVAL, "the create's template was not read");
	}
	if (from->id[0])
		ref = from->template_digest;
	dvcpus = from->id[0] ? from->vcpus : (sb->tmpl.vcpus > 0 ? sb->tmpl.vcpus : 1);
	dmem = from->id[0] ? from->memory_mib : (sb->tmpl.memory_mib > 0 ? sb->tmpl.memory_mib : 256);
	if (from->id[0] && ((req->vcpus && req->vcpus != dvcpus) || (req->memory_mib && req->memory_mib != dmem)))
		return err_set(err, EINVAL, "a sandbox from snapshot %s has its size: %d vcpus, %d MiB", from->id,
			       dvcpus, dmem);
	/* A create a node claimed keeps the id the api process gave it. */
	if (req->claim_sb_id[0])
		snprintf(r->id, sizeof(r->id), "%s", req->claim_sb_id);
	else
		id_new(r->id, "sb-");
	snprintf(r->template_ref, sizeof(r->template_ref), "%s", from->id[0] ? from->template_ref : ref);
	snprintf(r->template_digest, sizeof(r->template_digest), "%s", sb->tmpl.digest);
	r->vcpus = req->vcpus ? req->vcpus : dvcpus;
	r->memory_mib = req->memory_mib ? req->memory_mib : dmem;
	r->env = strmap_to_json(&req->env);
	r->metadata = strmap_to_json(&req->metadata);
	if (!r->env || !r->metadata)
		return err_set(err, ENOMEM, "out of memory");
	/* A snapshot's env is the base; the request's own entries win. */
	if (from->id[0] && json_is_object(from->env)) {
		json_t *env = json_deep_copy(from->env);

		if (!env || json_object_update(env, r->env) < 0) {
			json_decref(env);
			return err_set(err, ENOMEM, "out of memory");
		}
		json_decref(r->env);
		r->env = env;
	}
	/* The request's egress policy, else its template's default (none: deny-all). */
	r->network = req->network ? json_deep_copy(req->network)
				  : json_deep_copy(json_is_object(sb->tmpl.network) ? sb->tmpl.network : json_object());
	if (!r->network)
		return err_set(err, ENOMEM, "out of memory");
	r->timeout_s = req->timeout_set ? req->timeout_s : d->cfg.default_timeout_s;
	r->on_timeout = req->on_timeout_set ? req->on_timeout : ON_TIMEOUT_DELETE;
	r->state = SB_CREATING;
	r->prev_state = SB_CREATING;
	r->created_ms = r->updated_ms = now_ms();
	r->expires_ms = r->timeout_s ? r->created_ms + r->timeout_s * 1000 : 0;
	r->next_chan = from->id[0] ? from->next_chan : 1;
	r->role = ROLE_USER;
	if (from->id[0])
		snprintf(r->source_snapshot, sizeof(r->source_snapshot), "%s", from->id);
	return 0;
}

void warm_if_daemons(struct sandbox *sb)
{
	space_err err = { 0 };

	if (sb->rec.role == ROLE_USER)
		return;
	if (sb->rec.role == ROLE_BUILD) {
		build_vm_up(sb, NULL);
		return;
	}
	/* The builder's snapshot is taken once its warm-up is done. */
	if (sandbox_warm_up(sb, sb->rec.role == ROLE_BUILDER ? ready_builder_up : NULL, &err) < 0) {
		log_warn("%s", err.msg);
		if (sb->rec.role == ROLE_BUILDER)
			ready_builder_up(sb);
	}
}

/* Up and, where its template has a start command, ready: the create is done. */
static void on_ready(struct sandbox *sb, const char *error)
{
	if (error) {
		log_warn("sandbox %s: %s", sb->rec.id, error);
		sandbox_fail(sb, error);
		if (sb->op.id[0] && sb->op.kind == OPK_CREATE)
			op_finish(sb->d, &sb->op, error);
		return;
	}
	if (sb->op.id[0] && sb->op.kind == OPK_CREATE)
		op_finish(sb->d, &sb->op, NULL);
	log_info("sandbox %s: running (%s)", sb->rec.id, start_kind_name(sb->rec.start_kind));
	warm_if_daemons(sb);
}

static void on_up(struct sandbox *sb, const char *error)
{
	space_err err = { 0 };

	if (error) {
		sandbox_fail(sb, error);
		if (sb->rec.role == ROLE_BUILD)
			build_vm_up(sb, error);
		return;
	}
	sandbox_set_state(sb, SB_RUNNING);
	/* Booted, not cloned: its template's start command runs now (a ready snapshot's
	 * builder runs it after its warm-up; a build's VM never: it is building the template). */
	if (sb->rec.start_kind == START_BOOT && sb->rec.role != ROLE_BUILD && sb->rec.role != ROLE_BUILDER &&
	    start_cmd_wanted(sb)) {
		if (start_cmd_begin(sb, on_ready, &err) < 0)
			on_ready(sb, err.msg);
		return;
	}
	on_ready(sb, NULL);
}

/* Starts sb's VM from snap (a clone) or by booting (snap NULL). */
static int start_vm(struct sandbox *sb, const struct snapshot_rec *snap, space_err *err)
{
	char seed[PATH_MAX];

	if (snap)
		snprintf(seed, sizeof(seed), "%s/seed.qcow2", snap->dir);
	else if (disk_template_seed(sb->d, &sb->tmpl, seed, err) < 0)
		return -1;
	if (disk_from_seed(sb->d, seed, sb->rec.disk, err) < 0)
		return -1;
	sandbox_persist(sb);
	op_running(sb->d, &sb->op);
	return sandbox_launch(sb, snap, on_up, err);
}

/* A warm-pool VM becomes the client's: no VM work at all. */
static void claim(struct sandbox *pooled, struct sandbox *want, const json_t *policy)
{
	struct sandbox_rec *r = &pooled->rec;
	space_err err = { 0 };

	r->role = ROLE_USER;
	r->start_kind = START_POOL;
	/* Its start, as a client sees it, is this claim. */
	phases_begin(&pooled->phases);
	phases_mark(&pooled->phases, PH_UP);
	/* A warm-up still running ends on its own (its channel is an orphan's);
	 * nothing waits for it any more. */
	pooled->warm_done = NULL;
	pooled->warm_chan = 0;
	if (pooled->act_timer) {
		event_free(pooled->act_timer);
		pooled->act_timer = NULL;
	}
	snprintf(r->template_ref, sizeof(r->template_ref), "%s", want->rec.template_ref);
	json_decref(r->env);
	json_decref(r->metadata);
	r->env = json_incref(want->rec.env);
	r->metadata = json_incref(want->rec.metadata);
	/* It waited in the pool denied everything; the create's policy takes over before the
	 * client hears of it. A gateway that cannot take it keeps denying (the safe way). */
	bool same = r->network && want->rec.network ? json_equal(r->network, want->rec.network)
						     : !r->network && !want->rec.network;
	json_decref(r->network);
	r->network = json_incref(want->rec.network);
	/* The push waits for the gateway's answer (egress.c): only when the policy changes. */
	if (!same && egress_push(pooled, policy, &err) < 0)
		log_error("sandbox %s: %s", r->id, err.msg);
	r->timeout_s = want->rec.timeout_s;
	r->on_timeout = want->rec.on_timeout;
	r->created_ms = now_ms();
	r->expires_ms = r->timeout_s ? r->created_ms + r->timeout_s * 1000 : 0;
	op_rec_clear(&pooled->op);
	if (op_begin(pooled->d, OPK_CREATE, r->id, NULL, &pooled->op, &err) < 0)
		log_error("sandbox %s: %s", r->id, err.msg);
	sandbox_persist(pooled);
	events_emit(pooled, EVT_CREATED, "claimed from the warm pool", json_pack("{s:s}", "start_kind", "pool"));
	op_finish(pooled->d, &pooled->op, NULL);
	events_emit(pooled, EVT_RUNNING, NULL, json_pack("{s:s}", "start_kind", "pool"));
	/* It may have idled in the pool: its clock must be right from now. */
	sandbox_send_clock(pooled);
	log_info("sandbox %s: claimed from the %s pool", r->id, pooled->tmpl.name);
}

/* Starts a sandbox that create_prepare filled: boot, or clone from snap, under operation
 * op_id (a claimed create's; "": a new one). */
static int launch_new(struct sandbox *sb, const struct snapshot_rec *snap, const char *op_id, space_err *err)
{
	/* Intent first: the sandbox and its operation are on disk before QEMU starts. */
	sandbox_persist(sb);
	if (op_begin(sb->d, OPK_CREATE, sb->rec.id, op_id, &sb->op, err) < 0) {
		sb->rec.state = SB_FAILED;
		snprintf(sb->rec.error, sizeof(sb->rec.error), "%s", err->msg);
		sandbox_persist(sb);
		return -1;
	}
	sb->rec.start_kind = snap ? START_CLONE : START_BOOT;
	if (snap)
		snprintf(sb->rec.source_snapshot, sizeof(sb->rec.source_snapshot), "%s", snap->id);
	events_emit(sb, EVT_CREATED, NULL,
		    json_pack("{s:s,s:s?}", "start_kind", start_kind_name(sb->rec.start_kind), "from_snapshot",
			      sb->rec.source_snapshot[0] ? sb->rec.source_snapshot : NULL));
	log_info("sandbox %s: creating from %s (%s), %d vcpu, %d MiB, by %s%s%s", sb->rec.id,
		 sb->rec.template_ref, sb->tmpl.digest, sb->rec.vcpus, sb->rec.memory_mib,
		 start_kind_name(sb->rec.start_kind), snap ? " of " : "", snap ? snap->id : "");
	if (start_vm(sb, snap, err) < 0) {
		sandbox_fail(sb, err->msg);
		return 0; /* accepted: the operation reports the failure */
	}
	return 0;
}

/* The ready snapshot create_read found is still the one to clone: this sandbox's template
 * and size, and its files still there (ready_tick may have replaced it since the read). */
static bool ready_still(const struct snapshot_rec *r, const struct sandbox *sb)
{
	return strcmp(r->template_digest, sb->rec.template_digest) == 0 && r->vcpus == sb->rec.vcpus &&
	       r->memory_mib == sb->rec.memory_mib && snapshot_files_ok(r);
}

int sandbox_create_pre(struct spaced *d, const struct create_req *req, struct create_reads *pre,
		       enum sb_role role, struct sandbox **out, space_err *err)
{
	struct snapshot_rec from = { 0 }, ready = { 0 };
	struct sandbox *sb = calloc(1, sizeof(*sb)), *pooled;
	const struct snapshot_rec *snap = NULL;
	int rc = -1;

	if (!sb)
		return err_set(err, ENOMEM, "out of memory");
	sb->d = d;
	if (create_prepare(d, req, sb, &from, pre, err) < 0)
		goto out;
	sb->rec.role = role;
	if (role == ROLE_POOL || role == ROLE_BUILDER) {
		/* Pool and builder VMs reach nothing (a pool VM gets its policy when claimed); a
		 * build's VM has the build's policy (build_vm_start). */
		json_decref(sb->rec.network);
		if (!(sb->rec.network = json_object())) {
			err_set(err, ENOMEM, "out of memory");
			goto out;
		}
	}
	/* A claimed create has its id already: a pool VM (another id) cannot be it. */
	if (role == ROLE_USER && !from.id[0] && !req->claim_sb_id[0] &&
	    (pooled = pool_claim(d, sb->rec.template_digest, sb->rec.vcpus, sb->rec.memory_mib))) {
		claim(pooled, sb, pre ? pre->policy : NULL);
		*out = pooled;
		rc = 0;
		goto out;
	}
	if (capacity_admit(d, sb->rec.vcpus, sb->rec.memory_mib, 1, err) < 0)
		goto out;
	if (from.id[0])
		snap = &from;
	else if (role != ROLE_BUILDER && pre && pre->ready.id[0] && ready_still(&pre->ready, sb)) {
		/* read on the store's thread with the rest (create_read); moved out */
		ready = pre->ready;
		memset(&pre->ready, 0, sizeof(pre->ready));
		snap = &ready;
	} else if (role != ROLE_BUILDER && pre && pre->ready.id[0]) {
		/* Gone or replaced since the read: this one boots (the upkeep makes another). */
		log_info("sandbox %s: ready snapshot %s is no longer there; booting it", sb->rec.id, pre->ready.id);
	}
	if (role != ROLE_USER)
		/* Shown by name when a client gets it from the pool. */
		snprintf(sb->rec.template_ref, sizeof(sb->rec.template_ref), "%s", sb->tmpl.name);
	sb->next = d->sandboxes;
	d->sandboxes = sb;
	rc = launch_new(sb, snap, req->claim_op_id, err);
	*out = sb;
	sb = NULL;
out:
	snapshot_rec_clear(&from);
	snapshot_rec_clear(&ready);
	if (sb)
		sandbox_free(sb);
	return rc;
}

int sandbox_create_read(struct spaced *d, const struct create_req *req, struct create_reads *pre,
			struct sandbox_rec *out, struct op_rec *op, space_err *err)
{
	struct sandbox *sb;

	if (sandbox_create_pre(d, req, pre, ROLE_USER, &sb, err) < 0)
		return -1;
	if (req->ports_public && port_set_public(d, sb->rec.id, 0, true, err) < 0)
		log_warn("sandbox %s: its ports stay private: %s", sb->rec.id, err->msg);
	err_clear(err);
	sandbox_copy_out(sb, out, op);
	return 0;
}

int sandbox_create_record(struct spaced *d, const struct create_req *req, struct create_reads *pre,
			  struct sandbox_rec *out, space_err *err)
{
	struct snapshot_rec from = { 0 };
	struct sandbox *sb = calloc(1, sizeof(*sb));
	int rc = -1;

	if (!sb)
		return err_set(err, ENOMEM, "out of memory");
	sb->d = d;
	if (create_prepare(d, req, sb, &from, pre, err) == 0) {
		sandbox_copy_out(sb, out, NULL);
		rc = 0;
	}
	snapshot_rec_clear(&from);
	sandbox_free(sb);
	return rc;
}

int sandbox_create_claimed(struct spaced *d, const struct create_req *req, struct create_reads *pre,
			   space_err *err)
{
	struct sandbox *sb;

	if (!req->claim_sb_id[0] || !req->claim_op_id[0])
		return err_set(err, EINVAL, "a claimed create names its sandbox and operation");
	return sandbox_create_pre(d, req, pre, ROLE_USER, &sb, err);
}
