/* sandbox.c -- sandbox lifecycle: create, boot, fail, delete, expire, and reconcile at start-up */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "vmm/proc.h"
#include "runtime.h"
#include "store/store.h"

#define BOOT_TIMEOUT_S 60

static void vm_exited(struct vm *vm, const char *reason, void *arg);

void sandbox_persist(struct sandbox *sb)
{
	space_err err = { 0 };

	sb->rec.updated_ms = now_ms();
	if (store_sandbox_put(sb->d->store, &sb->rec, &err) < 0)
		log_error("sandbox %s: %s", sb->rec.id, err.msg);
}

static void set_state(struct sandbox *sb, enum sb_state to)
{
	if (sb->rec.state == to)
		return;
	if (!sb_transition_ok(sb->rec.state, to))
		log_warn("sandbox %s: unexpected transition %s -> %s", sb->rec.id,
			 sb_state_name(sb->rec.state), sb_state_name(to));
	log_info("sandbox %s: %s -> %s", sb->rec.id, sb_state_name(sb->rec.state), sb_state_name(to));
	sb->rec.state = to;
	sandbox_persist(sb);
}

struct sandbox *sandbox_find(struct spaced *d, const char *id)
{
	struct sandbox *sb;

	for (sb = d->sandboxes; sb; sb = sb->next)
		if (strcmp(sb->rec.id, id) == 0)
			return sb->rec.state == SB_DELETED ? NULL : sb;
	return NULL;
}

int sandbox_count_running(struct spaced *d)
{
	struct sandbox *sb;
	int n = 0;

	for (sb = d->sandboxes; sb; sb = sb->next)
		if (sb_state_has_vm(sb->rec.state) && sb->rec.state != SB_DELETING)
			n++;
	return n;
}

/* Paths and sizes QEMU needs for this sandbox; the buffers live in `bufs`. */
struct spec_bufs {
	char run_dir[PATH_MAX], sock_dir[PATH_MAX], mem[PATH_MAX], kernel[PATH_MAX], image[PATH_MAX];
	char cmdline[128];
};

static void sandbox_spec(struct sandbox *sb, struct vm_spec *spec, struct spec_bufs *b)
{
	struct spaced *d = sb->d;

	path_run_dir(d, sb->rec.id, b->run_dir);
	path_sock_dir(d, sb->rec.id, b->sock_dir);
	path_mem_file(d, sb->rec.id, b->mem);
	snprintf(b->kernel, sizeof(b->kernel), "%s/vmlinuz", sb->tmpl.dir);
	snprintf(b->image, sizeof(b->image), "%s/rootfs.ext4", sb->tmpl.dir);
	snprintf(b->cmdline, sizeof(b->cmdline), "space.hostname=%s", sb->rec.id);
	memset(spec, 0, sizeof(*spec));
	spec->id = sb->rec.id;
	spec->run_dir = b->run_dir;
	spec->sock_dir = b->sock_dir;
	spec->mem_path = b->mem;
	spec->kernel = b->kernel;
	spec->base_image = b->image;
	spec->vcpus = sb->rec.vcpus;
	spec->memory_mib = sb->rec.memory_mib;
	spec->accel = d->accel;
	spec->tb_size_mib = d->cfg.tb_size_mib;
	spec->cmdline_extra = b->cmdline;
	spec->netns = geteuid() == 0;
}

static void stop_timer(struct sandbox *sb)
{
	if (sb->timer) {
		event_free(sb->timer);
		sb->timer = NULL;
	}
}

/* Everything that ends a sandbox's VM life but deletion: it becomes failed. */
static void sandbox_fail(struct sandbox *sb, const char *why)
{
	char msg[512];

	snprintf(msg, sizeof(msg), "%s", why);
	log_warn("sandbox %s failed: %s", sb->rec.id, msg);
	stop_timer(sb);
	agent_free(sb->agent);
	sb->agent = NULL;
	snprintf(sb->rec.error, sizeof(sb->rec.error), "%s", msg);
	sb->rec.pid = 0;
	set_state(sb, SB_FAILED);
	sessions_abort(sb, msg);
	if (sb->op.id[0] && strcmp(sb->op.kind, "create") == 0)
		op_finish(sb->d, &sb->op, msg);
	if (sb->vm)
		vm_kill(sb->vm); /* exit callback frees it */
}

static void boot_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct sandbox *sb = arg;
	char why[128];

	(void)fd;
	(void)what;
	if (sb->rec.state != SB_CREATING)
		return;
	snprintf(why, sizeof(why), "the guest agent did not answer within %d s of boot (see the console log)",
		 BOOT_TIMEOUT_S);
	sandbox_fail(sb, why);
}

static void start_timer(struct sandbox *sb, int seconds)
{
	struct timeval tv = { seconds, 0 };

	stop_timer(sb);
	sb->timer = evtimer_new(sb->d->base, boot_deadline, sb);
	if (sb->timer)
		evtimer_add(sb->timer, &tv);
}

void sandbox_agent_ready(struct sandbox *sb)
{
	if (sb->rec.state != SB_CREATING)
		return;
	stop_timer(sb);
	set_state(sb, SB_RUNNING);
	if (sb->op.id[0] && strcmp(sb->op.kind, "create") == 0)
		op_finish(sb->d, &sb->op, NULL);
}

void sandbox_agent_lost(struct sandbox *sb, const char *why)
{
	log_warn("sandbox %s: agent channel lost (%s); reconnecting", sb->rec.id, why);
}

static void attach_agent(struct sandbox *sb)
{
	sb->agent = agent_new(sb, vm_agent_path(sb->vm));
	if (!sb->agent)
		sandbox_fail(sb, "cannot set up the agent channel");
}

static void finish_delete(struct sandbox *sb)
{
	struct vm_spec spec;
	struct spec_bufs b;
	space_err err = { 0 };

	sandbox_spec(sb, &spec, &b);
	if (vm_remove_files(&spec, &err) < 0)
		log_warn("sandbox %s: removing files: %s", sb->rec.id, err.msg);
	sb->rec.pid = 0;
	set_state(sb, SB_DELETED);
	if (sb->op.id[0] && strcmp(sb->op.kind, "delete") == 0)
		op_finish(sb->d, &sb->op, NULL);
}

static void vm_exited(struct vm *vm, const char *reason, void *arg)
{
	struct sandbox *sb = arg;
	char why[512];

	vm_free(vm);
	sb->vm = NULL;
	if (sb->rec.state == SB_DELETING) {
		finish_delete(sb);
		return;
	}
	{
		/* Guest RAM lives on tmpfs: a dead VM's memory file only costs. */
		struct vm_spec spec;
		struct spec_bufs b;

		sandbox_spec(sb, &spec, &b);
		unlink(b.mem);
	}
	if (sb->rec.state == SB_FAILED)
		return;
	snprintf(why, sizeof(why), "qemu %s", reason);
	sandbox_fail(sb, why);
}

static void launch(struct sandbox *sb)
{
	struct vm_spec spec;
	struct spec_bufs b;
	space_err err = { 0 };

	sandbox_spec(sb, &spec, &b);
	op_running(sb->d, &sb->op);
	if (vm_launch(sb->d->base, &spec, vm_exited, sb, &sb->vm, &err) < 0) {
		err_wrap(&err, "starting vm");
		sandbox_fail(sb, err.msg);
		return;
	}
	sb->rec.pid = vm_pid(sb->vm);
	sb->rec.pid_start = vm_pid_start(sb->vm);
	sandbox_persist(sb);
	start_timer(sb, BOOT_TIMEOUT_S);
	attach_agent(sb);
}

/* ---- request validation ---- */

static int check_string_map(json_t *v, const char *what, space_err *err)
{
	const char *k;
	json_t *x;

	if (!json_is_object(v))
		return err_set(err, EINVAL, "%s must be an object of strings", what);
	if (json_object_size(v) > 128)
		return err_set(err, EINVAL, "%s has more than 128 entries", what);
	json_object_foreach(v, k, x) {
		if (!*k || strlen(k) > 128)
			return err_set(err, EINVAL, "%s keys must be 1 to 128 characters", what);
		if (!json_is_string(x) || json_string_length(x) > 4096)
			return err_set(err, EINVAL, "%s.%.64s must be a string of at most 4096 bytes", what, k);
		if (!strcmp(what, "env") && strchr(k, '='))
			return err_set(err, EINVAL, "env: invalid variable name '%.64s'", k);
	}
	return 0;
}

static int get_int(json_t *req, const char *key, long long lo, long long hi, long long *out, space_err *err)
{
	json_t *v = json_object_get(req, key);

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return err_set(err, EINVAL, "%s must be an integer from %lld to %lld", key, lo, hi);
	*out = json_integer_value(v);
	return 0;
}

static int parse_create(struct spaced *d, json_t *req, struct sandbox_rec *r, struct template_rec *t,
			space_err *err)
{
	static const char *known[] = { "template", "vcpus", "memory_mib", "env", "metadata", "timeout_s", NULL };
	const char *k, *ref;
	json_t *v;
	long long vcpus = 0, mem = 0, timeout = d->cfg.default_timeout_s;

	if (!json_is_object(req))
		return err_set(err, EINVAL, "request body must be a JSON object");
	json_object_foreach(req, k, v) {
		int i;
		for (i = 0; known[i] && strcmp(known[i], k); i++)
			;
		if (!known[i])
			return err_set(err, EINVAL, "unknown field '%.64s'", k);
	}
	v = json_object_get(req, "template");
	if (!json_is_string(v) || !json_string_length(v) || json_string_length(v) >= sizeof(r->template_ref))
		return err_set(err, EINVAL, "template is required: a template reference such as \"base\"");
	ref = json_string_value(v);
	if (get_int(req, "vcpus", 1, 16, &vcpus, err) < 0 || get_int(req, "memory_mib", 64, 65536, &mem, err) < 0 ||
	    get_int(req, "timeout_s", 0, 604800, &timeout, err) < 0)
		return -1;
	v = json_object_get(req, "env");
	if (v && !json_is_null(v) && check_string_map(v, "env", err) < 0)
		return -1;
	r->env = v && !json_is_null(v) ? json_deep_copy(v) : json_object();
	v = json_object_get(req, "metadata");
	if (v && !json_is_null(v) && check_string_map(v, "metadata", err) < 0)
		return -1;
	r->metadata = v && !json_is_null(v) ? json_deep_copy(v) : json_object();
	if (store_template_resolve(d->store, ref, t, err) < 0)
		return err_wrap(err, "template '%.100s'", ref);
	snprintf(r->template_ref, sizeof(r->template_ref), "%s", ref);
	snprintf(r->template_digest, sizeof(r->template_digest), "%s", t->digest);
	r->vcpus = vcpus ? (int)vcpus : (t->vcpus > 0 ? t->vcpus : 1);
	r->memory_mib = mem ? (int)mem : (t->memory_mib > 0 ? t->memory_mib : 256);
	r->timeout_s = timeout;
	return 0;
}

static struct sandbox *sandbox_new(struct spaced *d)
{
	struct sandbox *sb = calloc(1, sizeof(*sb));

	if (!sb)
		return NULL;
	sb->d = d;
	sb->next = d->sandboxes;
	d->sandboxes = sb;
	return sb;
}

static void copy_out(const struct sandbox *sb, struct sandbox_rec *out, struct op_rec *op)
{
	*out = sb->rec;
	out->env = json_incref(sb->rec.env);
	out->metadata = json_incref(sb->rec.metadata);
	*op = sb->op;
}

int sandbox_create(struct spaced *d, json_t *req, struct sandbox_rec *out, struct op_rec *op, space_err *err)
{
	struct sandbox_rec r = { 0 };
	struct template_rec t = { 0 };
	struct sandbox *sb;

	if (parse_create(d, req, &r, &t, err) < 0)
		goto fail;
	if (sandbox_count_running(d) >= d->cfg.max_sandboxes) {
		err_set(err, EAGAIN, "at capacity: %d sandboxes running (max_sandboxes)", d->cfg.max_sandboxes);
		goto fail;
	}
	id_new(r.id, "sb-");
	r.state = SB_CREATING;
	r.created_ms = r.updated_ms = now_ms();
	r.expires_ms = r.timeout_s ? r.created_ms + r.timeout_s * 1000 : 0;
	r.next_chan = 1;
	sb = sandbox_new(d);
	if (!sb) {
		err_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	sb->rec = r;
	sb->tmpl = t;
	/* Intent first: the sandbox and its operation are on disk before QEMU starts. */
	sandbox_persist(sb);
	if (op_begin(d, "create", r.id, &sb->op, err) < 0) {
		sb->rec.state = SB_FAILED;
		snprintf(sb->rec.error, sizeof(sb->rec.error), "%s", err->msg);
		sandbox_persist(sb);
		return -1;
	}
	log_info("sandbox %s: creating from %s (%s), %d vcpu, %d MiB", r.id, r.template_ref, t.digest, r.vcpus,
		 r.memory_mib);
	launch(sb);
	copy_out(sb, out, op);
	return 0;
fail:
	sandbox_rec_clear(&r);
	template_rec_clear(&t);
	return -1;
}

static void start_delete(struct sandbox *sb, const char *why)
{
	space_err err = { 0 };

	if (sb->op.id[0] && !op_state_done(sb->op.state))
		op_finish(sb->d, &sb->op, "cancelled: the sandbox is being deleted");
	if (op_begin(sb->d, "delete", sb->rec.id, &sb->op, &err) < 0)
		log_error("sandbox %s: %s", sb->rec.id, err.msg);
	op_running(sb->d, &sb->op);
	log_info("sandbox %s: deleting (%s)", sb->rec.id, why);
	stop_timer(sb);
	agent_free(sb->agent);
	sb->agent = NULL;
	set_state(sb, SB_DELETING);
	sessions_abort(sb, "the sandbox was deleted");
	if (sb->vm)
		vm_kill(sb->vm);
	else
		finish_delete(sb);
}

int sandbox_delete(struct spaced *d, const char *id, struct sandbox_rec *out, struct op_rec *op, space_err *err)
{
	struct sandbox *sb = sandbox_find(d, id);

	if (!sb) {
		struct sandbox_rec r;

		if (store_sandbox_get(d->store, id, &r, err) < 0)
			return -1;
		sandbox_rec_clear(&r);
		return err_set(err, EBUSY, "sandbox %s is already deleted", id);
	}
	if (sb->rec.state == SB_DELETING)
		return err_set(err, EBUSY, "sandbox %s is already being deleted", id);
	start_delete(sb, "requested");
	copy_out(sb, out, op);
	return 0;
}

void sandbox_tick(struct spaced *d)
{
	struct sandbox *sb;
	int64_t now = now_ms();

	for (sb = d->sandboxes; sb; sb = sb->next) {
		if (sb->rec.state == SB_DELETED || sb->rec.state == SB_DELETING)
			continue;
		if (sb->rec.expires_ms && now >= sb->rec.expires_ms)
			start_delete(sb, "timeout reached");
	}
}

/* ---- start-up reconciliation ---- */

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
	struct op_rec o = *op;

	if (sb && !sb->op.id[0]) {
		sb->op = o;
		return 0;
	}
	/* An operation whose sandbox is gone or already has a newer one. */
	op_finish(d, &o, "interrupted by a daemon restart");
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

	if (sb->rec.pid &&
	    vm_adopt(sb->d->base, spec, sb->rec.pid, sb->rec.pid_start, vm_exited, sb, &sb->vm, err) == 0)
		return 0;
	pid = find_qemu_by_id(sb->rec.id);
	if (!pid || pid == sb->rec.pid)
		return err->code ? -1 : err_set(err, ESRCH, "no qemu process recorded");
	log_info("sandbox %s: found its qemu (pid %d) by id", sb->rec.id, pid);
	err_clear(err);
	if (vm_adopt(sb->d->base, spec, pid, proc_start_time(pid), vm_exited, sb, &sb->vm, err) < 0)
		return -1;
	sb->rec.pid = pid;
	sb->rec.pid_start = vm_pid_start(sb->vm);
	sandbox_persist(sb);
	return 0;
}

static void reconcile_one(struct sandbox *sb)
{
	struct vm_spec spec;
	struct spec_bufs b;
	space_err err = { 0 };
	enum sb_state st = sb->rec.state;

	if (!sb_state_has_vm(st)) {
		if (sb->op.id[0])
			op_finish(sb->d, &sb->op, st == SB_FAILED ? sb->rec.error : NULL);
		return;
	}
	if (!sb->tmpl.dir[0]) {
		sandbox_fail(sb, "its template is no longer known to this daemon");
		return;
	}
	sandbox_spec(sb, &spec, &b);
	if (adopt(sb, &spec, &err) < 0) {
		if (st == SB_DELETING) {
			finish_delete(sb);
			return;
		}
		sandbox_fail(sb, sb->rec.pid ? "qemu was gone when the daemon restarted" : "no qemu process recorded");
		return;
	}
	log_info("sandbox %s: adopted qemu pid %d (%s)", sb->rec.id, sb->rec.pid, sb_state_name(st));
	if (st == SB_DELETING) {
		vm_kill(sb->vm);
		return;
	}
	if (st == SB_CREATING)
		start_timer(sb, BOOT_TIMEOUT_S);
	attach_agent(sb);
}

int sandbox_reconcile(struct spaced *d, space_err *err)
{
	struct sandbox *sb;

	if (store_sandbox_each(d->store, 0, load_one, d, err) < 0)
		return err_wrap(err, "loading sandboxes");
	if (store_op_each_open(d->store, attach_op, d, err) < 0)
		return err_wrap(err, "loading operations");
	for (sb = d->sandboxes; sb; sb = sb->next)
		reconcile_one(sb);
	return 0;
}
