/* sandbox.c -- the live sandboxes: registry, state changes, failure, deletion, timeouts */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "events/events.h"
#include "log.h"
#include "net/net.h"
#include "ports.h"
#include "runtime.h"
#include "store/store.h"

/* A write that fails is not dropped: the sandbox stays marked and sandbox_tick writes it
 * again (the record in memory is the truth) until the store takes it. ESTALE is the node
 * scope's fence (store.h): another process owns the row now, and writing again would not
 * change that. */
void sandbox_persist(struct sandbox *sb)
{
	space_err err = { 0 };

	sb->rec.updated_ms = now_ms();
	if (store_sandbox_put(sb->d->store, &sb->rec, &err) == 0) {
		if (sb->unsaved)
			log_info("sandbox %s: written to the store again", sb->rec.id);
		sb->unsaved = false;
		return;
	}
	sb->unsaved = err.code != ESTALE;
	log_error("sandbox %s: %s%s", sb->rec.id, err.msg,
		  sb->unsaved ? " (kept; written again on the next tick)" : "");
}

/* Writes again what the store refused before (sandbox_persist, session_persist). */
static void persist_retry(struct spaced *d)
{
	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next) {
		if (sb->unsaved)
			sandbox_persist(sb);
		for (struct session *s = sb->sessions; s; s = s->next)
			if (s->unsaved)
				session_persist(s);
	}
	ops_retry(d);
}

void sandbox_set_state(struct sandbox *sb, enum sb_state to)
{
	if (sb->rec.state == to)
		return;
	/* Every path that moves a sandbox goes through the action table, which
	 * checked the move; one that the state machine does not know is a bug
	 * worth a loud line, and the state is still recorded as it really is. */
	if (!sb_transition_ok(sb->rec.state, to))
		log_error("sandbox %s: transition %s -> %s is not in the state machine", sb->rec.id,
			  sb_state_name(sb->rec.state), sb_state_name(to));
	log_info("sandbox %s: %s -> %s", sb->rec.id, sb_state_name(sb->rec.state), sb_state_name(to));
	enum sb_state from = sb->rec.state;
	sb->rec.state = to;
	sandbox_persist(sb);
	events_transition(sb, from, to);
}

struct sandbox *sandbox_find(struct spaced *d, const char *id)
{
	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next)
		if (strcmp(sb->rec.id, id) == 0)
			return sb->rec.state == SB_DELETED ? NULL : sb;
	return NULL;
}

int64_t sandbox_suspended_bytes(const struct sandbox *sb)
{
	return sb->rec.state == SB_SUSPENDED && sb->suspended_bytes > 0 ? sb->suspended_bytes : -1;
}

const struct sandbox_rec *sandbox_record(const struct sandbox *sb)
{
	return &sb->rec;
}

const char *sandbox_default_user(const struct sandbox *sb)
{
	return sb->tmpl.default_user;
}

bool sandbox_visible(const struct sandbox_rec *r)
{
	return r->role == ROLE_USER;
}

/* A sandbox this process runs is answered from memory (its record there is the newest: every
 * write starts from it), so the hottest read (clients polling a sandbox) makes no round trip to
 * the database; another (deleted and let go, another node's) from the record the control
 * plane read on the store's thread before the handler ran (d->sb_pre), else it is not known
 * here. */
int sandbox_get(struct spaced *d, const char *id, struct sandbox_rec *out, space_err *err)
{
	struct sandbox *sb;

	if (!id_valid(id, "sb-"))
		return err_set(err, ENOENT, "no sandbox '%.64s'", id);
	if ((sb = sandbox_find(d, id))) {
		sandbox_copy_out(sb, out, NULL);
	} else if (d->sb_pre && strcmp(d->sb_pre->id, id) == 0) {
		/* read on the store's thread before the handler ran */
		if (d->sb_pre->rc < 0) {
			if (d->sb_pre->err.code == ENOENT)
				return err_set(err, ENOENT, "no sandbox '%.64s'", id);
			*err = d->sb_pre->err;
			return -1;
		}
		*out = d->sb_pre->rec;
		out->env = json_incref(d->sb_pre->rec.env);
		out->metadata = json_incref(d->sb_pre->rec.metadata);
		out->network = json_incref(d->sb_pre->rec.network);
	} else {
		/* Never a read on the loop: a handler's sandbox is read before it runs (api.c);
		 * a later step (an operation's end) asks only about those held here. */
		return err_set(err, ENOENT, "no sandbox '%.64s'", id);
	}
	if (!sandbox_visible(out)) {
		sandbox_rec_clear(out);
		return err_set(err, ENOENT, "no sandbox '%.64s'", id);
	}
	return 0;
}

int sandbox_count(struct spaced *d, enum sb_role role, const char *digest, enum sb_state state)
{
	int n = 0;

	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next)
		if (sb->rec.role == role && sb->rec.state == state &&
		    (!digest || strcmp(sb->rec.template_digest, digest) == 0))
			n++;
	return n;
}

struct sandbox *sandbox_new(struct spaced *d)
{
	struct sandbox *sb = calloc(1, sizeof(*sb));

	if (!sb)
		return NULL;
	sb->d = d;
	sb->next = d->sandboxes;
	d->sandboxes = sb;
	return sb;
}

void sandbox_free(struct sandbox *sb)
{
	start_cmd_cancel(sb);
	capture_drop(sb);
	disk_share_cancel(sb);
	if (sb->act_timer)
		event_free(sb->act_timer);
	if (sb->launch_ev)
		event_free(sb->launch_ev);
	if (sb->vm)
		vm_free(sb->vm);
	net_ns_cancel(sb->net_op);
	gw_free(sb->gw); /* the process lives on, like QEMU */
	agent_free(sb->agent);
	if (sb->timer)
		event_free(sb->timer);
	sessions_free(sb);
	ports_free(sb);
	sandbox_rec_clear(&sb->rec);
	template_rec_clear(&sb->tmpl);
	op_rec_clear(&sb->op);
	free(sb);
}

void sandbox_copy_out(const struct sandbox *sb, struct sandbox_rec *out, struct op_rec *op)
{
	*out = sb->rec;
	out->env = json_incref(sb->rec.env);
	out->metadata = json_incref(sb->rec.metadata);
	out->network = json_incref(sb->rec.network);
	if (op)
		op_copy(op, &sb->op);
}

void sandbox_spec(struct sandbox *sb, struct vm_spec *spec, struct spec_bufs *b)
{
	struct spaced *d = sb->d;

	memset(b, 0, sizeof(*b));
	path_run_dir(d, sb->rec.id, b->run_dir);
	path_sock_dir(d, sb->rec.id, b->sock_dir);
	snprintf(b->kernel, sizeof(b->kernel), "%s/vmlinuz", sb->tmpl.dir);
	memset(spec, 0, sizeof(*spec));
	spec->id = sb->rec.id;
	spec->run_dir = b->run_dir;
	spec->sock_dir = b->sock_dir;
	spec->kernel = b->kernel;
	spec->disk = sb->rec.disk;
	spec->mem = VM_MEM_ANON;
	spec->vcpus = sb->rec.vcpus;
	spec->memory_mib = sb->rec.memory_mib;
	spec->accel = d->accel;
	spec->tb_size_mib = d->cfg.tb_size_mib;
	spec->netns = geteuid() == 0;
	/* The uid recorded is what adoption checks; a VM started without a
	 * jail (uid 0) is adopted only as such. */
	path_jail_dir(d, sb->rec.id, b->jail_dir);
	spec->jail = sb->rec.jail_uid != 0;
	spec->run_uid = sb->rec.jail_uid;
	spec->run_gid = sb->rec.jail_uid;
	spec->jail_dir = b->jail_dir;
	/* Layers live in <state>/disks, template images in <state>/images
	 * (state_dir is canonical: main.c resolves it). */
	path_disks_dir(d, b->disks);
	snprintf(b->images, sizeof(b->images), "%s/images", d->cfg.state_dir);
	b->layer_dirs[0] = b->disks;
	b->layer_dirs[1] = b->images;
	b->layer_dirs[2] = NULL;
	/* A node of a cluster: disks of suspended sandboxes, restorable by any node. */
	if (d->cfg.shared_dir[0]) {
		snprintf(b->shared, sizeof(b->shared), "%s/disks", d->cfg.shared_dir);
		b->layer_dirs[2] = b->shared;
		b->layer_dirs[3] = NULL;
	}
	spec->layer_dirs = b->layer_dirs;
	spec->cgroup_scope = geteuid() == 0 ? d->cgroup_scope : NULL;
}

int sandbox_jail_uid(struct sandbox *sb, space_err *err)
{
	struct spaced *d = sb->d;
	uint32_t used[4096], uid;
	size_t n = 0;

	if (!d->cfg.jail) {
		sb->rec.jail_uid = 0;
		return 0;
	}
	/* Uids of every other sandbox that may have a QEMU; capped by
	 * max_sandboxes in practice, by the array here in any case. */
	for (struct sandbox *o = d->sandboxes; o && n < sizeof(used) / sizeof(used[0]); o = o->next)
		if (o != sb && o->rec.jail_uid && (o->vm || o->rec.pid))
			used[n++] = o->rec.jail_uid;
	if (sb->rec.jail_uid >= d->cfg.jail_uid_base &&
	    sb->rec.jail_uid - d->cfg.jail_uid_base < d->cfg.jail_uid_count) {
		bool taken = false;
		for (size_t i = 0; i < n && !taken; i++)
			taken = used[i] == sb->rec.jail_uid;
		if (!taken)
			return 0; /* keeps its uid across restarts of its VM */
	}
	if (jail_uid_pick(d->cfg.jail_uid_base, d->cfg.jail_uid_count, used, n, &uid) < 0)
		return err_set(err, EAGAIN, "no free jail uid (%u in use)", (unsigned)n);
	sb->rec.jail_uid = uid;
	return 0;
}

static void stop_timer(struct sandbox *sb)
{
	if (sb->timer) {
		event_free(sb->timer);
		sb->timer = NULL;
	}
}

/* Everything that ends a sandbox's VM life but deletion: it becomes failed. */
void sandbox_fail(struct sandbox *sb, const char *why)
{
	char msg[512];

	snprintf(msg, sizeof(msg), "%s", why);
	log_warn("sandbox %s failed: %s", sb->rec.id, msg);
	stop_timer(sb);
	capture_abort(sb, msg);
	agent_free(sb->agent);
	sb->agent = NULL;
	if (sb->up_done) {
		bringup_cb done = sb->up_done;

		sb->up_done = NULL;
		done(sb, msg);
	}
	if (sb->rec.state == SB_DELETING || sb->rec.state == SB_DELETED)
		return;
	snprintf(sb->rec.error, sizeof(sb->rec.error), "%s", msg);
	sb->rec.pid = 0;
	sandbox_set_state(sb, SB_FAILED);
	sessions_abort(sb, msg);
	if (sb->op.id[0] && !op_state_done(sb->op.state))
		op_finish(sb->d, &sb->op, msg);
	if (sb->vm)
		vm_kill(sb->vm); /* exit callback frees it */
}

/* A deleted sandbox's token rows go on the store's thread (what they open is gone already:
 * token_forget_sandbox, and the sandbox is not found). */
struct tokens_prune {
	char id[ID_LEN];
	space_err err;
	int rc;
};

static void prune_tokens(struct store *conn, void *arg)
{
	struct tokens_prune *p = arg;

	p->rc = store_tokens_prune(conn, p->id, now_ms(), &p->err);
}

static void tokens_pruned(void *arg, bool ran)
{
	struct tokens_prune *p = arg;

	if (ran && p->rc < 0)
		log_warn("sandbox %s: removing its tokens: %s", p->id, p->err.msg);
	free(p);
}

static void tokens_prune_later(struct spaced *d, const char *sb_id)
{
	struct tokens_prune *p = calloc(1, sizeof(*p));
	space_err err = { 0 };

	if (!p)
		return;
	snprintf(p->id, sizeof(p->id), "%s", sb_id);
	if (store_async(d->store, prune_tokens, tokens_pruned, p, &err) < 0) {
		log_warn("sandbox %s: removing its tokens: %s", sb_id, err.msg);
		free(p);
	}
}

static void deleted(struct sandbox *sb)
{
	sandbox_set_state(sb, SB_DELETED);
	if (sb->op.id[0] && sb->op.kind == OPK_DELETE)
		op_finish(sb->d, &sb->op, NULL);
}

static void delete_done(struct spaced *d, const char *sb_id)
{
	struct sandbox *sb = sandbox_find(d, sb_id);

	if (sb && sb->rec.state == SB_DELETING)
		deleted(sb);
}

void sandbox_finish_delete(struct sandbox *sb)
{
	struct vm_spec spec;
	struct spec_bufs b;
	space_err err = { 0 };

	sandbox_spec(sb, &spec, &b);
	/* The gateway's pid file is in its run_dir: first. */
	egress_remove(sb);
	vm_remove_confinement(&spec);
	if (vm_remove_files(&spec, &err) < 0)
		log_warn("sandbox %s: removing files: %s", sb->rec.id, err.msg);
	token_forget_sandbox(sb->d, sb->rec.id);
	tokens_prune_later(sb->d, sb->rec.id);
	sb->rec.pid = 0;
	/* Its suspend image is its own (named snapshots taken from it live on): removed on the
	 * store's thread, and the deletion is done once it is gone. */
	if (sb->rec.snapshot_id[0]) {
		int rc = snapshot_drop_then(sb->d, sb->rec.snapshot_id, delete_done, sb->rec.id);

		sb->rec.snapshot_id[0] = '\0';
		if (rc == 0)
			return;
	}
	deleted(sb);
}

void sandbox_start_delete(struct sandbox *sb, const char *why)
{
	static const char cancelled[] = "cancelled: the sandbox is being deleted";
	space_err err = { 0 };

	capture_abort(sb, cancelled);
	disk_share_cancel(sb);
	if (sb->op.id[0] && !op_state_done(sb->op.state))
		op_finish(sb->d, &sb->op, cancelled);
	op_rec_clear(&sb->op);
	if (op_begin(sb->d, OPK_DELETE, sb->rec.id, NULL, &sb->op, &err) < 0)
		log_error("sandbox %s: %s", sb->rec.id, err.msg);
	op_running(sb->d, &sb->op);
	log_info("sandbox %s: deleting (%s)", sb->rec.id, why);
	snprintf(sb->event_reason, sizeof(sb->event_reason), "%s", why ? why : "");
	stop_timer(sb);
	sandbox_set_state(sb, SB_DELETING);
	/* A bring-up in progress learns it is over (a fork's parent counts its
	 * children); the sandbox is deleting already, so nothing fails it. */
	if (sb->up_done) {
		bringup_cb done = sb->up_done;

		sb->up_done = NULL;
		done(sb, cancelled);
	}
	agent_free(sb->agent);
	sb->agent = NULL;
	sessions_abort(sb, "the sandbox was deleted");
	if (sb->vm)
		vm_kill(sb->vm);
	else
		sandbox_finish_delete(sb);
}

/* ---- timeouts ---- */

static void expire(struct sandbox *sb)
{
	space_err err = { 0 };

	if ((sb->rec.on_timeout == ON_TIMEOUT_SUSPEND || sb->rec.on_timeout == ON_TIMEOUT_SUSPEND_IDLE) &&
	    (sb->rec.state == SB_RUNNING || sb->rec.state == SB_PAUSED)) {
		if (sb->rec.on_timeout == ON_TIMEOUT_SUSPEND_IDLE)
			log_info("sandbox %s: idle for %lld s (no session running, no port traffic): suspending",
				 sb->rec.id, (long long)sb->rec.timeout_s);
		else
			log_info("sandbox %s: timeout reached: suspending", sb->rec.id);
		snprintf(sb->event_reason, sizeof(sb->event_reason), "%s",
			 sb->rec.on_timeout == ON_TIMEOUT_SUSPEND_IDLE ? "idle timeout reached" : "timeout reached");
		if (lifecycle_begin(sb, OPK_SUSPEND, NULL, &err) == 0)
			return;
		log_warn("sandbox %s: suspend on timeout: %s; deleting instead", sb->rec.id, err.msg);
	}
	sandbox_start_delete(sb, "timeout reached");
}

/* Is it in use: a session running, or a port's connection open (ports.c counts them)? */
static bool in_use(const struct sandbox *sb)
{
	if (sb->port_conns > 0)
		return true;
	for (const struct session *s = sb->sessions; s; s = s->next)
		if (s->rec.state == SESS_RUNNING)
			return true;
	return false;
}

/* suspend_idle: the timeout counts from the last activity seen (a restart or a wake starts a
 * new count); expires_ms shows when it will act if nothing happens. */
static bool idle_expired(struct sandbox *sb, int64_t now)
{
	if (!sb->active_ms || in_use(sb))
		sb->active_ms = now;
	sb->rec.expires_ms = sb->rec.timeout_s ? sb->active_ms + sb->rec.timeout_s * 1000 : 0;
	return sb->rec.expires_ms && now >= sb->rec.expires_ms;
}

/* Once per deadline: a client may extend the sandbox's time before it acts. */
static void timeout_warn(struct sandbox *sb, int64_t now)
{
	int64_t warn_ms = (int64_t)sb->d->cfg.timeout_warning_s * 1000;
	char at[32];

	if (!sb->rec.expires_ms || sb->warned_expiry == sb->rec.expires_ms || now < sb->rec.expires_ms - warn_ms ||
	    now >= sb->rec.expires_ms)
		return;
	sb->warned_expiry = sb->rec.expires_ms;
	fmt_time(at, sb->rec.expires_ms);
	events_emit(sb, EVT_TIMEOUT_WARNING, "the sandbox's timeout is near",
		    json_pack("{s:s,s:I,s:s}", "expires_at", at, "seconds_left",
			      (json_int_t)((sb->rec.expires_ms - now + 999) / 1000), "on_timeout",
			      on_timeout_name(sb->rec.on_timeout)));
}

static void tick_timeouts(struct spaced *d)
{
	int64_t now = now_ms();

	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next) {
		enum sb_state st = sb->rec.state;

		if (st != SB_RUNNING && st != SB_PAUSED)
			sb->active_ms = 0;

		/* Only a sandbox that runs (or is paused) uses the node; the
		 * others wait for a client, and an action in flight ends first. */
		if (sb->rec.role != ROLE_USER || (st != SB_RUNNING && st != SB_PAUSED))
			continue;
		if (sb->op.id[0] && !op_state_done(sb->op.state))
			continue;
		if (sb->rec.on_timeout == ON_TIMEOUT_SUSPEND_IDLE) {
			if (idle_expired(sb, now)) {
				sb->active_ms = now; /* again in a while if the suspend fails */
				expire(sb);
			}
			continue;
		}
		timeout_warn(sb, now);
		if (sb->rec.expires_ms && now >= sb->rec.expires_ms) {
			/* Tried again in a minute if a suspend fails and leaves it
			 * running; a suspended or restored one gets its own time. */
			sb->rec.expires_ms = now + 60000;
			expire(sb);
		}
	}
}

/* Deleted sandboxes leave the runtime: their rows stay in the store. */
static bool any_unsaved(const struct sandbox *sb)
{
	if (sb->unsaved)
		return true;
	for (const struct session *s = sb->sessions; s; s = s->next)
		if (s->unsaved)
			return true;
	return false;
}

static void reap_deleted(struct spaced *d)
{
	struct sandbox **pp = &d->sandboxes;

	while (*pp) {
		struct sandbox *sb = *pp;

		/* (not while its deletion, or a session's end, is still to be written) */
		if (sb->rec.state == SB_DELETED && !sb->vm && !any_unsaved(sb) &&
		    (!sb->op.id[0] || op_state_done(sb->op.state))) {
			struct reaped *r = &d->reaped[d->reaped_next++ % (sizeof(d->reaped) / sizeof(d->reaped[0]))];

			snprintf(r->id, sizeof(r->id), "%s", sb->rec.id);
			r->ms = now_ms();
			*pp = sb->next;
			sandbox_free(sb);
			continue;
		}
		pp = &sb->next;
	}
}

bool sandbox_reaped_since(const struct spaced *d, const char *id, int64_t since_ms)
{
	for (size_t i = 0; i < sizeof(d->reaped) / sizeof(d->reaped[0]); i++)
		if (d->reaped[i].ms >= since_ms && strcmp(d->reaped[i].id, id) == 0)
			return true;
	return false;
}

bool sandbox_busy(struct spaced *d)
{
	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next)
		if ((sb->op.id[0] && !op_state_done(sb->op.state)) || sb->capture)
			return true;
	return false;
}

void sandbox_tick(struct spaced *d)
{
	static int64_t last_gc;
	int64_t now = now_ms();

	persist_retry(d);
	tick_timeouts(d);
	sessions_tick(d);
	ready_tick(d);
	pools_tick(d);
	build_vm_reap(d);
	reap_deleted(d);
	egress_tick(d);
	/* Unused disk layers go when nothing is half-made: a layer a capture
	 * just created is referenced only once the capture records it. */
	if (now - last_gc > 30000 && !sandbox_busy(d)) {
		last_gc = now;
		disks_gc(d);
	}
}

void sandbox_shutdown(struct spaced *d)
{
	struct sandbox *sb, *next;

	persist_retry(d); /* a last chance for what the store refused */
	for (sb = d->sandboxes; sb; sb = next) {
		next = sb->next;
		if (sb->unsaved)
			log_warn("sandbox %s: exiting before the store took its last state", sb->rec.id);
		/* QEMU lives on; a capture's converter does not (vm_free). */
		sandbox_free(sb);
	}
	d->sandboxes = NULL;
	ops_unsaved_free(d);
	pools_free(d);
	tokens_free(d);
	egress_shutdown(d);
}

int sandbox_bringing_up(const struct spaced *d)
{
	int n = 0;

	for (const struct sandbox *sb = d->sandboxes; sb; sb = sb->next)
		n += sb->rec.role == ROLE_USER && (sb->rec.state == SB_CREATING || sb->rec.state == SB_RESTORING);
	return n;
}

void sandbox_fence(struct spaced *d, int64_t since_ms, sandbox_fence_fn why, void *arg)
{
	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next) {
		const char *reason;

		if (sb->rec.role != ROLE_USER || !sb->vm || sb->rec.state == SB_DELETED || sb->rec.created_ms >= since_ms)
			continue;
		if (!(reason = why(&sb->rec, arg)))
			continue;
		log_error("sandbox %s: %s: stopping its VM (fenced)", sb->rec.id, reason);
		vm_kill(sb->vm);
	}
}
