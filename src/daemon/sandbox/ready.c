/* ready.c -- ready snapshots: for each template, boot once, wait until the agent answers, and
 * snapshot that VM; creates then clone the snapshot (tens of milliseconds) instead of booting
 * (about a second under TCG). The VM booted for it is a sandbox of role "builder", hidden from
 * clients; it is deleted once its snapshot is taken. One build at a time, retried after a
 * pause when it fails. */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "runtime.h"
#include "vmm/memimg.h"
#include "store/store.h"

#define RETRY_AFTER_MS 60000

static int64_t last_failure_ms;

static void on_captured(struct sandbox *sb, struct snapshot_rec *snap, const char *error)
{
	if (error) {
		last_failure_ms = now_ms();
		log_warn("template %s: ready snapshot failed: %s (cold boots until it is retried)", sb->tmpl.name,
			 error);
	} else {
		log_info("template %s: ready snapshot %s (%lld MiB); creates clone it from now on",
			 sb->tmpl.name, snap->id, (long long)(snap->bytes >> 20));
		/* Jailed clones map a sealed copy of the image: made now, so the
		 * first clone does not wait for it. */
		char mem[PATH_MAX];
		space_err e = { 0 };
		snprintf(mem, sizeof(mem), "%s/mem", snap->dir);
		if (sb->d->cfg.jail && memimg_fd(mem, &e) < 0)
			log_warn("template %s: %s", sb->tmpl.name, e.msg);
	}
	sandbox_start_delete(sb, "its ready snapshot is taken");
}

static void take_ready(struct sandbox *sb);

static void on_start_ready(struct sandbox *sb, const char *error)
{
	if (error) {
		last_failure_ms = now_ms();
		log_warn("template %s: ready snapshot: %s", sb->tmpl.name, error);
		sandbox_start_delete(sb, "its template's start command did not get ready");
		return;
	}
	take_ready(sb);
}

/* After the warm-up: the template's start command, when it has one, is running and ready
 * before the snapshot is taken, so that every clone starts with it. */
void ready_builder_up(struct sandbox *sb)
{
	space_err err = { 0 };

	if (!start_cmd_wanted(sb)) {
		take_ready(sb);
		return;
	}
	if (start_cmd_begin(sb, on_start_ready, &err) < 0)
		on_start_ready(sb, err.msg);
}

static void take_ready(struct sandbox *sb)
{
	space_err err = { 0 };

	/* No disk freeze needed for the builder itself (it goes), but the
	 * snapshot needs a read-only layer and a seed: freeze. */
	if (capture_start(sb, SNAP_READY, NULL, true, false, on_captured, &err) < 0) {
		last_failure_ms = now_ms();
		log_warn("template %s: ready snapshot: %s", sb->tmpl.name, err.msg);
		sandbox_start_delete(sb, "its ready snapshot could not be taken");
	}
}

/* Is a build under way? A builder that runs with nothing left to do (no
 * bring-up, warm-up or capture: a daemon restart interrupted its build
 * after it booted, and the callbacks that would have taken its snapshot
 * died with the old daemon) would block every build until its timeout: it
 * is deleted, and the next tick builds again. */
static bool building(struct spaced *d)
{
	bool busy = false;

	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next) {
		if (sb->rec.role != ROLE_BUILDER || sb->rec.state == SB_DELETED)
			continue;
		if (sb->rec.state == SB_RUNNING && !sb->up_done && !sb->warm_done && !sb->capture && !sb->start)
			sandbox_start_delete(sb, "its ready-snapshot build was interrupted by a restart");
		busy = true;
	}
	return busy;
}

/* What ready_tick acts on, read on the store's thread (read_view): the ready snapshots, each
 * with whether a name still points at its template, and every template with a name. */
struct view {
	struct spaced *d;
	struct store *conn;        /* while reading: the store's own connection */
	struct snapshot_rec *snaps;
	bool *tagged;              /* per snapshot: its template still has a name */
	size_t ns, cs, ctag;
	struct template_rec *tmpls;
	size_t nt, ct;
	bool failed;
	space_err err;
};

static bool reading; /* a view is being read: ticks wait for it */

static bool grow(void **v, size_t *cap, size_t n, size_t size)
{
	size_t cap2 = *cap ? *cap * 2 : 8;
	void *nv;

	if (n < *cap)
		return true;
	if (!(nv = realloc(*v, cap2 * size)))
		return false;
	*v = nv;
	*cap = cap2;
	return true;
}

static int view_oom(struct view *v)
{
	v->failed = true;
	err_set(&v->err, ENOMEM, "out of memory");
	return 1;
}

static int keep_snap(const struct snapshot_rec *snap, void *arg)
{
	struct view *v = arg;
	struct template_rec t = { 0 };
	space_err err = { 0 };

	if (!grow((void **)&v->snaps, &v->cs, v->ns, sizeof(*v->snaps)) ||
	    !grow((void **)&v->tagged, &v->ctag, v->ns, sizeof(*v->tagged)))
		return view_oom(v);
	v->snaps[v->ns] = *snap;
	v->snaps[v->ns].env = json_deep_copy(snap->env);
	v->tagged[v->ns] = store_template_resolve(v->conn, snap->template_digest, &t, &err) == 0 &&
			   json_array_size(t.tags) > 0;
	template_rec_clear(&t);
	v->ns++;
	return 0;
}

static int keep_template(const struct template_rec *t, void *arg)
{
	struct view *v = arg;
	struct template_rec *c;

	if (!grow((void **)&v->tmpls, &v->ct, v->nt, sizeof(*v->tmpls)))
		return view_oom(v);
	c = &v->tmpls[v->nt++];
	template_rec_copy(c, t);
	return 0;
}

static void read_view(struct store *conn, void *arg)
{
	struct view *v = arg;

	v->conn = conn;
	if (store_snapshot_each(conn, 1u << SNAP_READY, keep_snap, v, &v->err) < 0 ||
	    (!v->failed && store_template_each(conn, keep_template, v, &v->err) < 0))
		v->failed = true;
	v->conn = NULL;
}

static void view_free(struct view *v)
{
	for (size_t i = 0; i < v->ns; i++)
		snapshot_rec_clear(&v->snaps[i]);
	for (size_t i = 0; i < v->nt; i++)
		template_rec_clear(&v->tmpls[i]);
	free(v->snaps);
	free(v->tagged);
	free(v->tmpls);
	free(v);
}

/* Ready snapshots of templates no name points at any more, or made with the network device
 * when VMs now get none (or the other way round), go. Clones made from them keep their
 * memory mapped; only the files go. Marks each one removed (tagged = false). */
static void drop_stale(struct spaced *d, struct view *v)
{
	for (size_t i = 0; i < v->ns; i++) {
		const struct snapshot_rec *snap = &v->snaps[i];

		if (snap->net != egress_enabled(d)) {
			log_info("ready snapshot %s: made %s the network device; rebuilding it", snap->id,
				 snap->net ? "with" : "without");
		} else if (!v->tagged[i]) {
			log_info("ready snapshot %s: its template %s was replaced; removing it", snap->id,
				 snap->template_digest);
		} else {
			continue;
		}
		v->tagged[i] = false;
		snapshot_remove(d, snap);
	}
}

static bool has_ready(struct spaced *d, const struct view *v, const char *digest, int vcpus, int mem)
{
	for (size_t i = 0; i < v->ns; i++)
		if (v->tagged[i] && snapshot_ready_match(&v->snaps[i], digest, vcpus, mem, egress_enabled(d)))
			return true;
	return false;
}

/* The first template without a ready snapshot gets a builder, room permitting: one build at
 * a time. */
static void build_one(struct spaced *d, const struct view *v)
{
	for (size_t i = 0; i < v->nt; i++) {
		const struct template_rec *t = &v->tmpls[i];
		struct create_req req = { 0 };
		struct sandbox *sb;
		space_err err = { 0 };
		int vcpus = t->vcpus > 0 ? t->vcpus : 1, mem = t->memory_mib > 0 ? t->memory_mib : 256;

		if (has_ready(d, v, t->digest, vcpus, mem))
			continue;
		if (capacity_admit(d, vcpus, mem, 1, &err) < 0)
			continue;
		snprintf(req.template_ref, sizeof(req.template_ref), "%s", t->digest);
		req.timeout_set = true;
		log_info("template %s: booting a VM for its ready snapshot", t->name);
		/* The template as the view read it (no read here). */
		struct create_reads pre = { .done = true, .ready_read = true };
		template_rec_copy(&pre.tmpl, t);
		if (sandbox_create_pre(d, &req, &pre, ROLE_BUILDER, &sb, &err) < 0) {
			last_failure_ms = now_ms();
			log_warn("template %s: ready snapshot: %s", t->name, err.msg);
		}
		create_reads_clear(&pre);
		create_req_free(&req);
		return;
	}
}

static void view_done(void *arg, bool ran)
{
	struct view *v = arg;
	struct spaced *d = v->d;

	reading = false;
	if (ran && v->failed)
		log_warn("ready snapshots: %s", v->err.msg);
	/* (a build may have begun while the view was read: the next tick looks again) */
	if (ran && !v->failed && !building(d)) {
		drop_stale(d, v);
		build_one(d, v);
	}
	view_free(v);
}

/* Each tick: the store is read on its own thread (store_async), and acted on here. */
void ready_tick(struct spaced *d)
{
	struct view *v;
	space_err err = { 0 };

	if (!d->cfg.ready_snapshots || reading || building(d))
		return;
	if (last_failure_ms && now_ms() - last_failure_ms < RETRY_AFTER_MS)
		return;
	if (!(v = calloc(1, sizeof(*v))))
		return;
	v->d = d;
	reading = true;
	if (store_async(d->store, read_view, view_done, v, &err) < 0) {
		reading = false;
		log_warn("ready snapshots: %s", err.msg);
		view_free(v);
	}
}
