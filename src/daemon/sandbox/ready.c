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

void ready_builder_up(struct sandbox *sb)
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

struct scan {
	struct spaced *d;
	bool started;
};

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
		if (sb->rec.state == SB_RUNNING && !sb->up_done && !sb->warm_done && !sb->capture)
			sandbox_start_delete(sb, "its ready-snapshot build was interrupted by a restart");
		busy = true;
	}
	return busy;
}

static int consider(const struct template_rec *t, void *arg)
{
	struct scan *s = arg;
	struct snapshot_rec snap;
	struct create_req req = { 0 };
	struct sandbox *sb;
	space_err err = { 0 };
	int vcpus = t->vcpus > 0 ? t->vcpus : 1, mem = t->memory_mib > 0 ? t->memory_mib : 256;

	if (snapshot_ready_for(s->d, t->digest, vcpus, mem, &snap) == 0) {
		snapshot_rec_clear(&snap);
		return 0;
	}
	if (capacity_admit(s->d, vcpus, mem, 1, &err) < 0)
		return 0;
	snprintf(req.template_ref, sizeof(req.template_ref), "%s", t->digest);
	req.timeout_set = true;
	log_info("template %s: booting a VM for its ready snapshot", t->name);
	if (sandbox_create_role(s->d, &req, ROLE_BUILDER, &sb, &err) < 0) {
		last_failure_ms = now_ms();
		log_warn("template %s: ready snapshot: %s", t->name, err.msg);
	}
	create_req_free(&req);
	s->started = true;
	return 1; /* one build at a time */
}

/* Ready snapshots of templates no name points at any more. Clones made from
 * them keep their memory mapped; only the files go. */
static int drop_stale(const struct snapshot_rec *snap, void *arg)
{
	struct spaced *d = arg;
	struct template_rec t = { 0 };
	space_err err = { 0 };

	if (snap->net != egress_enabled(d)) {
		log_info("ready snapshot %s: made %s the network device; rebuilding it", snap->id,
			 snap->net ? "with" : "without");
		snapshot_remove(d, snap);
		return 0;
	}
	if (store_template_resolve(d->store, snap->template_digest, &t, &err) == 0 && json_array_size(t.tags)) {
		template_rec_clear(&t);
		return 0;
	}
	template_rec_clear(&t);
	log_info("ready snapshot %s: its template %s was replaced; removing it", snap->id, snap->template_digest);
	snapshot_remove(d, snap);
	return 0;
}

void ready_tick(struct spaced *d)
{
	struct scan s = { .d = d };
	space_err err = { 0 };

	if (!d->cfg.ready_snapshots || building(d))
		return;
	if (last_failure_ms && now_ms() - last_failure_ms < RETRY_AFTER_MS)
		return;
	store_snapshot_each(d->store, 1u << SNAP_READY, drop_stale, d, &err);
	if (store_template_each(d->store, consider, &s, &err) < 0)
		log_warn("ready snapshots: %s", err.msg);
}
