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

/* A sandbox from its row, its template and its sessions (moved out of tmpl and ss). */
static struct sandbox *load_with(struct spaced *d, const struct sandbox_rec *r, struct template_rec *tmpl,
				 struct session_rec *ss, size_t nss)
{
	struct sandbox *sb = sandbox_new(d);
	space_err err = { 0 };

	if (!sb)
		return NULL;
	sb->rec = *r;
	sb->rec.env = json_incref(r->env);
	sb->rec.metadata = json_incref(r->metadata);
	sb->rec.network = json_incref(r->network);
	/* Sandboxes of the first schema wrote an overlay in their own directory. */
	if (!sb->rec.disk[0]) {
		path_run_dir(d, r->id, sb->rec.disk);
		strncat(sb->rec.disk, "/overlay.qcow2", sizeof(sb->rec.disk) - strlen(sb->rec.disk) - 1);
	}
	if (tmpl) {
		sb->tmpl = *tmpl;
		memset(tmpl, 0, sizeof(*tmpl));
	}
	for (size_t i = 0; i < nss; i++) {
		err_clear(&err);
		if (!session_alloc(sb, &ss[i], &err))
			log_error("sandbox %s: loading session %s: %s", r->id, ss[i].id, err.msg);
	}
	return sb;
}

/* At start-up, before the loop serves: the reads are made here. */
static int load_one(const struct sandbox_rec *r, void *arg)
{
	struct spaced *d = arg;
	struct template_rec t = { 0 };
	space_err err = { 0 };
	struct sandbox *sb;
	bool have = store_template_get(d->store, r->template_digest, &t, &err) == 0;

	if (!have)
		log_warn("sandbox %s: %s", r->id, err.msg);
	if (!(sb = load_with(d, r, have ? &t : NULL, NULL, 0)))
		return -1;
	err_clear(&err);
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
	egress_start(d);
	return 0;
}

int sandbox_restore_claimed(struct spaced *d, const char *sb_id, const char *op_id, space_err *err)
{
	const struct lc_args args = { .op_id = op_id };
	struct sandbox *sb;

	if (!sandbox_find(d, sb_id))
		return err_set(err, ENOENT, "sandbox %s is not loaded here", sb_id);
	if (!(sb = sandbox_find_for(d, sb_id, OPK_RESTORE, err)))
		return -1;
	return lifecycle_begin(sb, OPK_RESTORE, &args, err);
}

/* ---- a row loaded while the loop serves: its reads on the store's thread ---- */

struct load_job {
	struct spaced *d;
	struct sandbox_rec rec;       /* a deep copy of the row */
	bool reconcile;               /* attach its open operations and reconcile it (as at start) */
	struct template_rec tmpl;
	bool have_tmpl;
	struct session_rec *ss;
	size_t nss, capss;
	struct op_rec *ops;
	size_t nops, capops;
	space_err err;                /* the first read that failed */
	sandbox_loaded_fn then;
	void *arg;
};

static int keep_session(const struct session_rec *r, void *arg)
{
	struct load_job *j = arg;
	struct session_rec *c;

	if (j->nss == j->capss) {
		size_t cap = j->capss ? j->capss * 2 : 16;
		struct session_rec *v = realloc(j->ss, cap * sizeof(*v));

		if (!v)
			return err_set(&j->err, ENOMEM, "out of memory");
		j->ss = v;
		j->capss = cap;
	}
	c = &j->ss[j->nss++];
	*c = *r;
	c->argv = json_deep_copy(r->argv);
	c->env = json_deep_copy(r->env);
	return 0;
}

static int keep_op(const struct op_rec *o, void *arg)
{
	struct load_job *j = arg;

	if (strcmp(o->sandbox_id, j->rec.id) != 0)
		return 0;
	if (j->nops == j->capops) {
		size_t cap = j->capops ? j->capops * 2 : 4;
		struct op_rec *v = realloc(j->ops, cap * sizeof(*v));

		if (!v)
			return err_set(&j->err, ENOMEM, "out of memory");
		j->ops = v;
		j->capops = cap;
	}
	j->ops[j->nops] = *o;
	j->ops[j->nops].result = json_deep_copy(o->result);
	j->nops++;
	return 0;
}

static void load_read(struct store *conn, void *arg)
{
	struct load_job *j = arg;
	space_err e = { 0 };

	j->have_tmpl = store_template_get(conn, j->rec.template_digest, &j->tmpl, &e) == 0;
	if (!j->have_tmpl)
		log_warn("sandbox %s: %s", j->rec.id, e.msg);
	err_clear(&e);
	if (store_session_each(conn, j->rec.id, keep_session, j, &e) < 0 && !j->err.code)
		j->err = e;
	err_clear(&e);
	if (j->reconcile && store_op_each_open(conn, keep_op, j, &e) < 0 && !j->err.code)
		j->err = e;
}

static void load_job_free(struct load_job *j)
{
	sandbox_rec_clear(&j->rec);
	template_rec_clear(&j->tmpl);
	for (size_t i = 0; i < j->nss; i++)
		session_rec_clear(&j->ss[i]);
	for (size_t i = 0; i < j->nops; i++)
		op_rec_clear(&j->ops[i]);
	free(j->ss);
	free(j->ops);
	free(j);
}

static void load_done(void *arg, bool ran)
{
	struct load_job *j = arg;
	struct spaced *d = j->d;
	struct sandbox *sb = sandbox_find(d, j->rec.id);
	space_err err = { 0 };

	if (!ran) {
		err_set(&err, ECANCELED, "the daemon is stopping");
	} else if (j->err.code) {
		err = j->err;
	} else if (!sb) {
		/* (known meanwhile: then it stays as it is) */
		sb = load_with(d, &j->rec, j->have_tmpl ? &j->tmpl : NULL, j->ss, j->nss);
		if (!sb) {
			err_set(&err, ENOMEM, "out of memory");
		} else if (j->reconcile) {
			for (size_t i = 0; i < j->nops; i++)
				attach_op(&j->ops[i], d);
			reconcile_one(sb);
		}
	}
	if (j->then)
		j->then(d, j->rec.id, j->arg, err.code ? &err : NULL);
	else if (err.code)
		log_error("sandbox %s: loading it: %s", j->rec.id, err.msg);
	load_job_free(j);
}

int sandbox_load_later(struct spaced *d, const struct sandbox_rec *rec, bool reconcile, sandbox_loaded_fn then,
		       void *arg, space_err *err)
{
	struct load_job *j = calloc(1, sizeof(*j));

	if (!j)
		return err_set(err, ENOMEM, "out of memory");
	j->d = d;
	j->rec = *rec;
	j->rec.env = json_deep_copy(rec->env);
	j->rec.metadata = json_deep_copy(rec->metadata);
	j->rec.network = json_deep_copy(rec->network);
	j->reconcile = reconcile;
	j->then = then;
	j->arg = arg;
	if (store_async(d->store, load_read, load_done, j, err) < 0) {
		load_job_free(j);
		return -1;
	}
	return 0;
}
