/* snapshots.c -- snapshot records and files: memory image, device state, seed overlay.
 *
 * A snapshot directory holds `mem` (the guest's memory image, sparse),
 * `state` (QEMU's device state without RAM) and `seed.qcow2` (an empty
 * overlay on the snapshot's frozen disk layer, copied for each clone). Ready
 * and fork snapshots live on tmpfs, named and suspend ones under the state
 * directory. A VM started from a snapshot maps `mem` privately, so a
 * snapshot's files may be removed while clones of it run: the kernel keeps
 * the pages they map. Its frozen disk layer is another matter: disks_gc
 * keeps it while any chain reaches it. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "runtime.h"
#include "store/store.h"
#include "vmm/memimg.h"

int snapshot_begin(struct spaced *d, struct sandbox *sb, enum snap_kind kind, const char *name,
		   struct snapshot_rec *out, space_err *err)
{
	struct snapshot_rec *s = out;

	memset(s, 0, sizeof(*s));
	id_new(s->id, "sn-");
	s->kind = kind;
	s->state = SNAPS_CREATING;
	snprintf(s->name, sizeof(s->name), "%s", name ? name : "");
	snprintf(s->sandbox_id, sizeof(s->sandbox_id), "%s", sb->rec.id);
	snprintf(s->template_ref, sizeof(s->template_ref), "%s", sb->rec.template_ref);
	snprintf(s->template_digest, sizeof(s->template_digest), "%s", sb->rec.template_digest);
	s->vcpus = sb->rec.vcpus;
	s->memory_mib = sb->rec.memory_mib;
	s->env = json_incref(sb->rec.env);
	s->next_chan = sb->rec.next_chan;
	s->net = sb->net_dev;
	s->created_ms = now_ms();
	path_snapshot_dir(d, kind, s->id, s->dir);
	if (path_mkdirs(s->dir, err) < 0) {
		snapshot_rec_clear(s);
		return -1;
	}
	/* The record is stored by the capture (capture_put), before anything else happens. A
	 * daemon killed before it lands leaves the directory: sweep_unrecorded. */
	return 0;
}

/* ---- removal, on the store's thread ---- */

/* Files and row: both on the store's thread (an unlink of a memory image of gigabytes takes
 * its time too), behind every write queued before. */
static void remove_files_and_row(struct store *st, const char *id, const char *dir)
{
	space_err err = { 0 };

	if (dir[0] && vm_rm_tree(dir, &err) < 0)
		log_warn("snapshot %s: %s", id, err.msg);
	err_clear(&err);
	if (store_snapshot_delete(st, id, &err) < 0 && err.code != ENOENT)
		log_warn("snapshot %s: %s", id, err.msg);
}

/* Its sealed copy goes (the loop's cache); VMs mapping it keep their pages. */
static void forget_image(const char *dir)
{
	char mem[PATH_MAX];

	if (!dir[0])
		return;
	snprintf(mem, sizeof(mem), "%s/mem", dir);
	memimg_forget(mem);
}

struct remove_job {
	struct spaced *d;
	char id[ID_LEN];
	char dir[PATH_MAX];
	bool by_id; /* the record is read first (snapshot_drop) */
	void (*then)(struct spaced *d, const char *sb_id);
	char sb_id[ID_LEN];
};

static void remove_run(struct store *conn, void *arg)
{
	struct remove_job *j = arg;

	if (j->by_id) {
		struct snapshot_rec snap;
		space_err err = { 0 };

		if (store_snapshot_get(conn, j->id, &snap, &err) < 0) {
			if (err.code != ENOENT)
				log_warn("snapshot %s: %s; its files stay until the next start", j->id, err.msg);
			j->dir[0] = '\0';
			return;
		}
		snprintf(j->dir, sizeof(j->dir), "%s", snap.dir);
		snapshot_rec_clear(&snap);
	}
	remove_files_and_row(conn, j->id, j->dir);
}

static void remove_done(void *arg, bool ran)
{
	struct remove_job *j = arg;

	if (ran) {
		forget_image(j->dir);
		if (j->then)
			j->then(j->d, j->sb_id);
	}
	free(j);
}

static int remove_later(struct spaced *d, const char *id, const char *dir,
			void (*then)(struct spaced *d, const char *sb_id), const char *sb_id)
{
	struct remove_job *j = calloc(1, sizeof(*j));
	space_err err = { 0 };

	if (!j) {
		log_error("snapshot %s: out of memory; its files stay until the next start", id);
		return -1;
	}
	j->d = d;
	j->then = then;
	snprintf(j->sb_id, sizeof(j->sb_id), "%s", sb_id ? sb_id : "");
	snprintf(j->id, sizeof(j->id), "%s", id);
	if (dir)
		snprintf(j->dir, sizeof(j->dir), "%s", dir);
	j->by_id = !dir;
	if (store_async(d->store, remove_run, remove_done, j, &err) < 0) {
		log_warn("snapshot %s: %s; its files stay until the next start", id, err.msg);
		free(j);
		return -1;
	}
	return 0;
}

void snapshot_remove(struct spaced *d, const struct snapshot_rec *snap)
{
	forget_image(snap->dir);
	remove_later(d, snap->id, snap->dir, NULL, NULL);
}

void snapshot_drop(struct spaced *d, const char *id)
{
	if (id && id[0])
		remove_later(d, id, NULL, NULL, NULL);
}

int snapshot_drop_then(struct spaced *d, const char *id, void (*then)(struct spaced *d, const char *sb_id),
		       const char *sb_id)
{
	return remove_later(d, id, NULL, then, sb_id);
}

bool snapshot_files_ok(const struct snapshot_rec *snap)
{
	static const char *const files[] = { "mem", "state", "seed.qcow2" };
	char path[PATH_MAX];

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		/* A suspend snapshot resumes on the sandbox's own disk: no seed. */
		if (snap->kind == SNAP_SUSPEND && i == 2)
			continue;
		snprintf(path, sizeof(path), "%s/%s", snap->dir, files[i]);
		if (access(path, R_OK) < 0)
			return false;
	}
	return true;
}

struct ready_find {
	const char *digest;
	int vcpus, memory_mib;
	struct snapshot_rec *out;
	bool found;
	bool net;
};

bool snapshot_ready_match(const struct snapshot_rec *s, const char *digest, int vcpus, int memory_mib,
			  bool net)
{
	/* A clone gets the device its snapshot's VM had; every new sandbox must have the
	 * network device when this daemon gives VMs one, so one made without it (before
	 * schema v4) is never cloned: ready_tick replaces it. */
	return s->state == SNAPS_READY && strcmp(s->template_digest, digest) == 0 && s->vcpus == vcpus &&
	       s->memory_mib == memory_mib && s->net == net;
}

static int ready_one(const struct snapshot_rec *s, void *arg)
{
	struct ready_find *f = arg;

	if (!snapshot_ready_match(s, f->digest, f->vcpus, f->memory_mib, f->net))
		return 0;
	*f->out = *s;
	f->out->env = json_incref(s->env);
	f->found = true;
	return 1;
}

int snapshot_ready_in(struct store *st, bool net, const char *digest, int vcpus, int memory_mib,
		      struct snapshot_rec *out)
{
	struct ready_find f = { digest, vcpus, memory_mib, out, false, net };
	space_err err = { 0 };

	if (store_snapshot_each(st, 1u << SNAP_READY, ready_one, &f, &err) < 0) {
		log_warn("looking for a ready snapshot: %s", err.msg);
		return -1;
	}
	return f.found ? 0 : -1;
}

int snapshot_lookup(struct store *st, const char *ref, struct snapshot_rec *out, space_err *err)
{
	int rc;

	if (id_valid(ref, "sn-"))
		rc = store_snapshot_get(st, ref, out, err);
	else if (spec_check_snapshot_name(ref, err) < 0)
		return err_set(err, ENOENT, "no snapshot '%.100s'", ref);
	else
		rc = store_snapshot_get_by_name(st, ref, out, err);
	if (rc < 0 && err->code == ENOENT)
		err_set(err, ENOENT, "no snapshot '%.100s'", ref);
	return rc;
}


int snapshot_delete_on(struct store *conn, const char *ref, char dir[PATH_MAX], space_err *err)
{
	struct snapshot_rec snap;

	dir[0] = '\0';
	if (snapshot_lookup(conn, ref, &snap, err) < 0)
		return -1;
	if (snap.kind != SNAP_NAMED) {
		snapshot_rec_clear(&snap);
		return err_set(err, EBUSY, "snapshot %s is a %s snapshot: the daemon deletes it itself", snap.id,
			       snap_kind_name(snap.kind));
	}
	if (snap.state == SNAPS_CREATING) {
		snapshot_rec_clear(&snap);
		return err_set(err, EBUSY, "snapshot %s is still being taken", snap.id);
	}
	log_info("snapshot %s (%s): deleted", snap.id, snap.name);
	snprintf(dir, PATH_MAX, "%s", snap.dir);
	remove_files_and_row(conn, snap.id, snap.dir);
	snapshot_rec_clear(&snap);
	return 0;
}

void snapshot_forget_image(const char *dir)
{
	forget_image(dir);
}

/* ---- start-up ---- */

static int reconcile_one(const struct snapshot_rec *s, void *arg)
{
	struct spaced *d = arg;

	/* One being taken when the daemon stopped is finished by nobody: its
	 * action is reconciled (failed) separately; so is a fork's, which only
	 * lives while its children start. Ready snapshots on tmpfs are gone
	 * after a host reboot; they are made again. */
	if (s->state == SNAPS_CREATING || s->state == SNAPS_FAILED || s->kind == SNAP_FORK ||
	    (s->kind != SNAP_SUSPEND && !snapshot_files_ok(s))) {
		log_info("snapshot %s (%s): %s; removing it", s->id, snap_kind_name(s->kind),
			 s->state == SNAPS_READY ? "its files are gone" : "it was never finished");
		snapshot_remove(d, s);
	}
	return 0;
}

/* A directory under `parent` named like a snapshot that has no record: snapshot_begin makes
 * the directory just before it stores the record, so a daemon killed between the two leaves
 * one behind. At start-up nothing is being taken, so none of them is anyone's. */
static void sweep_unrecorded(struct spaced *d, const char *parent)
{
	_cleanup_closedir_ DIR *dir = opendir(parent);
	struct dirent *de;

	while (dir && (de = readdir(dir))) {
		struct snapshot_rec rec = { 0 };
		space_err err = { 0 };

		if (!id_valid(de->d_name, "sn-"))
			continue;
		if (store_snapshot_get(d->store, de->d_name, &rec, &err) == 0) {
			snapshot_rec_clear(&rec);
			continue;
		}
		if (err.code != ENOENT)
			continue;
		snprintf(rec.id, sizeof(rec.id), "%s", de->d_name);
		snprintf(rec.dir, sizeof(rec.dir), "%s/%s", parent, de->d_name);
		log_info("snapshot %s: a directory without a record (a start cut short); removing it", rec.id);
		snapshot_remove(d, &rec);
	}
}

void snapshots_reconcile(struct spaced *d)
{
	space_err err = { 0 };
	char dir[PATH_MAX];

	if (store_snapshot_each(d->store, 0, reconcile_one, d, &err) < 0)
		log_warn("reconciling snapshots: %s", err.msg);
	for (int tmpfs = 0; tmpfs < 2; tmpfs++) {
		path_snapshot_dir(d, tmpfs ? SNAP_FORK : SNAP_NAMED, "", dir);
		dir[strlen(dir) - 1] = '\0'; /* ".../snapshots/" -> ".../snapshots" */
		sweep_unrecorded(d, dir);
	}
}
