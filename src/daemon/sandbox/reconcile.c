/* reconcile.c -- start-up: load sandboxes and their operations, adopt the QEMUs that outlived the
 * last daemon, and let each interrupted operation's action decide what becomes of it */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "runtime.h"
#include "store/store.h"
#include "vmm/cgroup.h"
#include "vmm/proc.h"

static int load_one(const struct sandbox_rec *r, void *arg)
{
	struct spaced *d = arg;
	struct sandbox *sb = sandbox_new(d);
	space_err err = { 0 };

	if (!sb)
		return -1;
	sb->rec = *r;
	sb->rec.env = json_incref(r->env);
	sb->rec.metadata = json_incref(r->metadata);
	sb->rec.network = json_incref(r->network);
	/* Sandboxes of the first schema wrote an overlay in their own directory. */
	if (!sb->rec.disk[0]) {
		path_run_dir(d, r->id, sb->rec.disk);
		strncat(sb->rec.disk, "/overlay.qcow2", sizeof(sb->rec.disk) - strlen(sb->rec.disk) - 1);
	}
	if (store_template_get(d->store, r->template_digest, &sb->tmpl, &err) < 0)
		log_warn("sandbox %s: %s", r->id, err.msg);
	if (sessions_load(sb, &err) < 0)
		log_warn("sandbox %s: loading sessions: %s", r->id, err.msg);
	return 0;
}

static int attach_op(const struct op_rec *op, void *arg)
{
	struct spaced *d = arg;
	struct sandbox *sb = sandbox_find(d, op->sandbox_id);
	struct op_rec o;

	op_copy(&o, op);
	if (sb) {
		/* Oldest first: one attached before is older than this one. */
		if (sb->op.id[0]) {
			op_finish(d, &sb->op, "interrupted by a daemon restart");
			op_rec_clear(&sb->op);
		}
		sb->op = o;
		return 0;
	}
	/* An operation whose sandbox is gone. */
	op_finish(d, &o, "interrupted by a daemon restart");
	op_rec_clear(&o);
	return 0;
}

/* The QEMU of sandbox `id`, found by the id on its command line (-name
 * guest=<id>,...), or 0. Catches a QEMU whose pid was never recorded: the
 * daemon died between starting it and writing the pid down. */
static int find_qemu_by_id(const char *id)
{
	_cleanup_closedir_ DIR *proc = opendir("/proc");
	char want[ID_LEN + 8];
	struct dirent *de;

	if (!proc)
		return 0;
	snprintf(want, sizeof(want), "guest=%s", id);
	while ((de = readdir(proc))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);

		if (*end || pid <= 1)
			continue;
		if (proc_cmdline_has((pid_t)pid, "-name", want))
			return (int)pid;
	}
	return 0;
}

static int adopt(struct sandbox *sb, const struct vm_spec *spec, space_err *err)
{
	int pid;

	if (sb->rec.pid && vm_adopt(sb->d->base, spec, sb->rec.pid, sb->rec.pid_start, &sandbox_vm_events, sb,
				    &sb->vm, err) == 0)
		return 0;
	pid = find_qemu_by_id(sb->rec.id);
	if (!pid || pid == sb->rec.pid)
		return err->code ? -1 : err_set(err, ESRCH, "no qemu process recorded");
	log_info("sandbox %s: found its qemu (pid %d) by id", sb->rec.id, pid);
	err_clear(err);
	if (vm_adopt(sb->d->base, spec, pid, proc_start_time(pid), &sandbox_vm_events, sb, &sb->vm, err) < 0)
		return -1;
	sb->rec.pid = pid;
	sb->rec.pid_start = vm_pid_start(sb->vm);
	sandbox_persist(sb);
	return 0;
}

/* A jail root or cgroup leaf is kept while its sandbox has a QEMU. */
static bool has_vm(const char *id, void *arg)
{
	struct sandbox *sb = sandbox_find(arg, id);

	return sb && sb->vm;
}

/* Jails and cgroups of VMs that ended while no daemon watched them. */
static void clean_orphans(struct spaced *d)
{
	char dir[PATH_MAX];
	int jails, cgroups = 0;

	path_jail_root(d, dir);
	jails = jail_clean_orphans(dir, has_vm, d);
	if (geteuid() == 0)
		cgroups = cgroup_clean_orphans(d->cgroup_scope, has_vm, d);
	if (jails || cgroups)
		log_info("removed %d orphaned jail root(s) and %d cgroup leaf(s)", jails, cgroups);
}

static bool op_in_flight(const struct sandbox *sb)
{
	return sb->op.id[0] && !op_state_done(sb->op.state);
}

/* No QEMU, or one we cannot keep: what that means for the state it is in. */
static void no_vm(struct sandbox *sb, enum sb_state st)
{
	if (st == SB_DELETING) {
		sandbox_finish_delete(sb);
		return;
	}
	/* Those whose action expects the VM gone, or finds out, decide. */
	if (op_in_flight(sb) && (st == SB_SUSPENDING || st == SB_STOPPING || st == SB_RESTORING ||
				 st == SB_CREATING)) {
		lifecycle_reconcile(sb);
		return;
	}
	sandbox_fail(sb, sb->rec.pid ? "qemu was gone when the daemon restarted" : "no qemu process recorded");
}

static void reconcile_one(struct sandbox *sb)
{
	struct vm_spec spec;
	struct spec_bufs b;
	space_err err = { 0 };
	enum sb_state st = sb->rec.state;

	/* A delete is stored before the sandbox row: a daemon killed between the two left the
	 * row in its old state. The client may have had its 202: the delete goes on. */
	if (op_in_flight(sb) && sb->op.kind == OPK_DELETE && st != SB_DELETING && st != SB_DELETED) {
		log_info("sandbox %s: a delete was asked before the restart; deleting", sb->rec.id);
		sandbox_set_state(sb, SB_DELETING);
		st = SB_DELETING;
	}
	if (!sb_state_has_vm(st)) {
		/* A stop from suspended, or a finished one, has nothing to adopt. */
		if (op_in_flight(sb) && st != SB_FAILED)
			lifecycle_reconcile(sb);
		else if (sb->op.id[0])
			op_finish(sb->d, &sb->op, st == SB_FAILED ? sb->rec.error : NULL);
		return;
	}
	if (!sb->tmpl.dir[0]) {
		sandbox_fail(sb, "its template is no longer known to this daemon");
		return;
	}
	sandbox_spec(sb, &spec, &b);
	if (adopt(sb, &spec, &err) < 0) {
		log_warn("sandbox %s: not adopting: %s", sb->rec.id, err.msg);
		no_vm(sb, st);
		return;
	}
	log_info("sandbox %s: adopted qemu pid %d (%s)", sb->rec.id, sb->rec.pid, sb_state_name(st));
	if (st == SB_DELETING) {
		vm_kill(sb->vm);
		return;
	}
	/* A VM being brought up gets its agent and identity from the bring-up
	 * its action restarts; any other reconnects its agent now. Its identity
	 * was applied before; a reconnect needs none. */
	if (st != SB_CREATING && st != SB_RESTORING) {
		sb->identity_done = true;
		sb->agent = agent_adopt(sb, vm_agent_path(sb->vm));
		if (!sb->agent) {
			sandbox_fail(sb, "cannot set up the agent channel");
			return;
		}
	}
	if (op_in_flight(sb))
		lifecycle_reconcile(sb);
}

int sandbox_reconcile(struct spaced *d, space_err *err)
{
	struct sandbox *sb;

	if (store_sandbox_each(d->store, 0, load_one, d, err) < 0)
		return err_wrap(err, "loading sandboxes");
	if (store_op_each_open(d->store, attach_op, d, err) < 0)
		return err_wrap(err, "loading operations");
	/* Snapshots being taken are finished by nobody; their actions are
	 * reconciled below. */
	snapshots_reconcile(d);
	for (sb = d->sandboxes; sb; sb = sb->next)
		reconcile_one(sb);
	clean_orphans(d);
	egress_reconcile(d);
	return 0;
}

int sandbox_restore_claimed(struct spaced *d, const struct sandbox_rec *rec, const char *op_id, space_err *err)
{
	struct sandbox_rec out = { 0 };
	struct op_rec op = { 0 };
	int rc;

	if (!sandbox_find(d, rec->id) && load_one(rec, d) < 0)
		return err_set(err, ENOMEM, "out of memory");
	snprintf(d->claim_op_id, sizeof(d->claim_op_id), "%s", op_id);
	rc = sandbox_act(d, rec->id, OPK_RESTORE, &out, &op, err);
	d->claim_op_id[0] = '\0';
	sandbox_rec_clear(&out);
	op_rec_clear(&op);
	return rc;
}

int sandbox_load(struct spaced *d, const struct sandbox_rec *rec)
{
	return sandbox_find(d, rec->id) ? 0 : load_one(rec, d);
}

struct one_op {
	struct spaced *d;
	const char *sb_id;
};

static int attach_op_of(const struct op_rec *op, void *arg)
{
	struct one_op *o = arg;

	return strcmp(op->sandbox_id, o->sb_id) == 0 ? attach_op(op, o->d) : 0;
}

int sandbox_reconcile_row(struct spaced *d, const struct sandbox_rec *rec, space_err *err)
{
	struct one_op o = { d, rec->id };
	struct sandbox *sb;

	if (sandbox_find(d, rec->id))
		return 0;
	if (load_one(rec, d) < 0)
		return err_set(err, ENOMEM, "out of memory");
	if (store_op_each_open(d->store, attach_op_of, &o, err) < 0)
		return -1;
	if ((sb = sandbox_find(d, rec->id)))
		reconcile_one(sb);
	return 0;
}
