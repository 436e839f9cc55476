/* capture.c -- taking a snapshot of a running sandbox: pause the vCPUs, freeze the disk, save
 * memory and devices, then let the VM run again or leave it paused for its end.
 *
 * Steps, each completed from the event loop:
 *   0. the record (state creating) is stored
 *   1. vm_pause                   (one instant for memory and disk)
 *   2. vm_freeze_disk (optional)  QEMU moves the VM onto a new empty layer;
 *                                 the old one is the snapshot's disk, and a
 *                                 copy of the new one is its seed overlay
 *   3. vm_save                    memory image + device state (space-memcvt)
 *   4. vm_resume (optional)       when the VM was running before
 * The record's writes (steps 0, 2 and the end of 3) run on the store's thread (capture_put);
 * the capture goes on when the database has it. A failure at any step undoes what it can: the snapshot's files and record
 * go, the VM runs again if it ran before. The sandbox's disk moves to the
 * new layer at step 2 for good (that is what QEMU writes from then on). */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "runtime.h"
#include "store/store.h"
#include "vmm/proc.h"

struct capture {
	struct sandbox *sb;
	struct snapshot_rec snap;
	bool freeze, resume;
	bool was_running;      /* the vCPUs ran before step 1 */
	char new_top[PATH_MAX];
	capture_cb done;
	int64_t t0;
	unsigned seq;          /* d->captures_begun at its start: which capture a put was for */
};

/* ---- the record's writes, on the store's thread ---- */

struct put_job {
	struct spaced *d;
	char sb_id[ID_LEN];
	unsigned seq;
	struct snapshot_rec rec; /* a copy of its own (env deep-copied: no sharing across threads) */
	int rc;
	space_err err;
	void (*next)(struct capture *c);
	void (*failed)(struct capture *c, const char *what, const space_err *err);
	const char *what;
};

static void put_run(struct store *conn, void *arg)
{
	struct put_job *j = arg;

	j->rc = store_snapshot_put(conn, &j->rec, &j->err);
}

/* The capture it was for, if it is still under way (a deleted sandbox or a VM that died ended
 * it meanwhile; the daemon stopping leaves it to capture_drop). */
static void put_done(void *arg, bool ran)
{
	struct put_job *j = arg;
	struct sandbox *sb = ran ? sandbox_find(j->d, j->sb_id) : NULL;
	struct capture *c = sb ? sb->capture : NULL;

	if (c && c->seq == j->seq) {
		if (j->rc < 0)
			j->failed(c, j->what, &j->err);
		else
			j->next(c);
	}
	json_decref(j->rec.env);
	free(j);
}

/* Stores c's record as it is now; then next(c), or failed(c, what, err). -1 (neither will
 * run) when the write could not even be queued. */
static int capture_put_queue(struct capture *c, void (*next)(struct capture *c),
			     void (*failed)(struct capture *c, const char *what, const space_err *err),
			     const char *what, space_err *err)
{
	struct put_job *j = calloc(1, sizeof(*j));

	if (!j)
		return err_set(err, ENOMEM, "out of memory");
	j->d = c->sb->d;
	snprintf(j->sb_id, sizeof(j->sb_id), "%s", c->sb->rec.id);
	j->seq = c->seq;
	j->rec = c->snap;
	j->rec.env = c->snap.env ? json_deep_copy(c->snap.env) : NULL;
	j->next = next;
	j->failed = failed;
	j->what = what;
	if (c->snap.env && !j->rec.env) {
		free(j);
		return err_set(err, ENOMEM, "out of memory");
	}
	if (store_async(c->sb->d->store, put_run, put_done, j, err) < 0) {
		json_decref(j->rec.env);
		free(j);
		return -1;
	}
	return 0;
}

static void capture_put(struct capture *c, void (*next)(struct capture *c),
			void (*failed)(struct capture *c, const char *what, const space_err *err),
			const char *what)
{
	space_err e = { 0 };

	if (capture_put_queue(c, next, failed, what, &e) < 0)
		failed(c, what, &e);
}

static void capture_end(struct capture *c, const char *error)
{
	struct sandbox *sb = c->sb;
	capture_cb done = c->done;

	sb->capture = NULL;
	if (error) {
		log_warn("sandbox %s: snapshot %s failed: %s", sb->rec.id, c->snap.id, error);
		snapshot_remove(sb->d, &c->snap);
	} else {
		log_info("sandbox %s: snapshot %s (%s) taken in %lld ms, %lld MiB", sb->rec.id, c->snap.id,
			 snap_kind_name(c->snap.kind), (long long)(mono_ms() - c->t0),
			 (long long)(c->snap.bytes >> 20));
	}
	done(sb, error ? NULL : &c->snap, error);
	snapshot_rec_clear(&c->snap);
	free(c);
}

static void on_resumed(struct vm *vm, const space_err *err, void *arg)
{
	struct capture *c = arg;

	(void)vm;
	if (err)
		log_warn("sandbox %s: running again after the snapshot: %s", c->sb->rec.id, err->msg);
	else
		sandbox_send_clock(c->sb);
	capture_end(c, NULL);
}

/* Undo: the VM runs again if it did before; the snapshot goes. */
static void on_failed_resume(struct vm *vm, const space_err *err, void *arg)
{
	struct capture *c = arg;

	(void)vm;
	(void)err;
	capture_end(c, c->snap.error);
}

static void fail(struct capture *c, const char *what, const space_err *err)
{
	space_err e = { 0 };

	snprintf(c->snap.error, sizeof(c->snap.error), "%s: %s", what, err ? err->msg : "failed");
	if (c->was_running && c->sb->vm && vm_resume(c->sb->vm, on_failed_resume, c, &e) == 0)
		return;
	capture_end(c, c->snap.error);
}

static int64_t file_bytes(const char *dir, const char *name)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return stat(path, &st) == 0 ? (int64_t)st.st_blocks * 512 : 0;
}

static int finish_files(struct capture *c, space_err *err)
{
	char from[PATH_MAX], to[PATH_MAX];
	static const char *const names[] = { "mem", "state" };

	for (size_t i = 0; i < 2; i++) {
		snprintf(from, sizeof(from), "%s/%s.tmp", c->snap.dir, names[i]);
		snprintf(to, sizeof(to), "%s/%s", c->snap.dir, names[i]);
		if (rename(from, to) < 0)
			return err_sys(err, errno, "rename %s", from);
	}
	c->snap.bytes = file_bytes(c->snap.dir, "mem") + file_bytes(c->snap.dir, "state") +
			file_bytes(c->snap.dir, "seed.qcow2");
	c->snap.state = SNAPS_READY;
	return 0;
}

/* Recorded ready: the VM runs again if it ran before. */
static void after_ready(struct capture *c)
{
	space_err e = { 0 };

	if (c->resume && c->was_running && c->sb->vm && vm_resume(c->sb->vm, on_resumed, c, &e) == 0)
		return;
	capture_end(c, NULL);
}

static void on_saved(struct vm *vm, const space_err *err, void *arg)
{
	struct capture *c = arg;
	space_err e = { 0 };

	if (err) {
		fail(c, "saving memory and devices", err);
		return;
	}
	(void)vm;
	if (finish_files(c, &e) < 0) {
		fail(c, "recording the snapshot", &e);
		return;
	}
	capture_put(c, after_ready, fail, "recording the snapshot");
}

static int open_new(const char *dir, const char *name, space_err *err)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return err_sys(err, errno, "create %s", path);
	return fd;
}

static void save(struct capture *c)
{
	space_err e = { 0 };
	int img = open_new(c->snap.dir, "mem.tmp", &e);
	int st = img < 0 ? -1 : open_new(c->snap.dir, "state.tmp", &e);

	if (img < 0 || st < 0) {
		if (img >= 0)
			close(img);
		fail(c, "saving memory and devices", &e);
		return;
	}
	if (vm_save(c->sb->vm, img, st, on_saved, c, &e) < 0)
		fail(c, "saving memory and devices", &e);
}

/* Copies the VM's new (still empty) top layer: clones start on a copy of it. */
static int make_seed(struct capture *c, space_err *err)
{
	char seed[PATH_MAX];
	_cleanup_close_ int in = open(c->new_top, O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int out = -1;
	char buf[65536];
	ssize_t n;

	snprintf(seed, sizeof(seed), "%s/seed.qcow2", c->snap.dir);
	if (in < 0)
		return err_sys(err, errno, "open %s", c->new_top);
	out = open(seed, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (out < 0)
		return err_sys(err, errno, "create %s", seed);
	while ((n = read(in, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || write(out, buf, (size_t)n) != n)
			return err_sys(err, n < 0 ? errno : EIO, "copying %s", c->new_top);
	}
	/* Clones of the seed have the same backing file: our record of it. */
	return qcow2_backing_copy_record(c->new_top, seed, err);
}

static void on_frozen(struct vm *vm, const space_err *err, void *arg)
{
	struct capture *c = arg;
	struct sandbox *sb = c->sb;
	space_err e = { 0 };

	(void)vm;
	if (err) {
		fail(c, "freezing the disk", err);
		return;
	}
	/* QEMU writes the new layer from now on, whatever happens next. */
	snprintf(c->snap.disk, sizeof(c->snap.disk), "%s", sb->rec.disk);
	snprintf(sb->rec.disk, sizeof(sb->rec.disk), "%s", c->new_top);
	sandbox_persist(sb);
	if (make_seed(c, &e) < 0) {
		fail(c, "the snapshot's seed overlay", &e);
		return;
	}
	capture_put(c, save, fail, "recording the snapshot's disk");
}

static void on_paused(struct vm *vm, const space_err *err, void *arg)
{
	struct capture *c = arg;
	space_err e = { 0 };

	if (err) {
		fail(c, "pausing the VM", err);
		return;
	}
	if (!c->freeze) {
		save(c);
		return;
	}
	disk_new_path(c->sb->d, c->new_top);
	if (vm_freeze_disk(vm, c->new_top, on_frozen, c, &e) < 0)
		fail(c, "freezing the disk", &e);
}

int capture_check(struct sandbox *sb, enum snap_kind kind, bool freeze, space_err *err)
{
	char disks[PATH_MAX];

	if (!sb->vm)
		return err_set(err, EBUSY, "sandbox %s has no VM to snapshot", sb->rec.id);
	if (sb->capture)
		return err_set(err, EBUSY, "sandbox %s: a snapshot is already being taken", sb->rec.id);
	/* A disk of the first schema lives in the sandbox's own directory,
	 * which its deletion removes: no other chain may come to rely on it. */
	path_disks_dir(sb->d, disks);
	if (freeze && strncmp(sb->rec.disk, disks, strlen(disks)) != 0)
		return err_set(err, EBUSY, "sandbox %s was created by an earlier spaced; recreate it to snapshot it",
			       sb->rec.id);
	return capacity_snapshot_room(sb->d, kind, sb->rec.memory_mib, err);
}

/* Step 0 failed: nothing ran yet, the VM was not touched. */
static void intent_failed(struct capture *c, const char *what, const space_err *err)
{
	snprintf(c->snap.error, sizeof(c->snap.error), "%s: %s", what, err ? err->msg : "failed");
	capture_end(c, c->snap.error);
}

/* The record is stored: a restart finds it and cleans up after us. */
static void intent_stored(struct capture *c)
{
	space_err e = { 0 };

	if (!c->sb->vm) {
		err_set(&e, ESRCH, "sandbox %s has no VM to snapshot", c->sb->rec.id);
		intent_failed(c, "pausing the VM", &e);
	} else if (vm_pause(c->sb->vm, on_paused, c, &e) < 0) {
		intent_failed(c, "pausing the VM", &e);
	}
}

int capture_start(struct sandbox *sb, enum snap_kind kind, const char *name, bool freeze, bool resume,
		  capture_cb done, space_err *err)
{
	struct capture *c;

	if (capture_check(sb, kind, freeze, err) < 0)
		return -1;
	c = calloc(1, sizeof(*c));
	if (!c)
		return err_set(err, ENOMEM, "out of memory");
	c->seq = ++sb->d->captures_begun;
	if (snapshot_begin(sb->d, sb, kind, name, &c->snap, err) < 0) {
		free(c);
		return -1;
	}
	c->sb = sb;
	c->freeze = freeze;
	c->resume = resume;
	c->done = done;
	c->t0 = mono_ms();
	/* A sandbox a client paused stays paused after a fork or snapshot. */
	c->was_running = sb->rec.prev_state == SB_RUNNING || sb->rec.state == SB_RUNNING;
	sb->capture = c;
	if (capture_put_queue(c, intent_stored, intent_failed, "recording the snapshot", err) < 0) {
		sb->capture = NULL;
		rmdir(c->snap.dir);
		snapshot_rec_clear(&c->snap);
		free(c);
		return -1;
	}
	return 0;
}

void capture_record(const struct sandbox *sb, struct snapshot_rec *out)
{
	*out = sb->capture->snap;
	out->env = json_incref(sb->capture->snap.env);
}

void capture_abort(struct sandbox *sb, const char *why)
{
	struct capture *c = sb->capture;

	if (!c)
		return;
	/* The VM is going (failed or deleted): nothing to resume. Its pending
	 * control calls must not come back to a freed capture. */
	vm_forget(sb->vm, c);
	c->was_running = false;
	snprintf(c->snap.error, sizeof(c->snap.error), "%s", why);
	capture_end(c, why);
}

void capture_drop(struct sandbox *sb)
{
	struct capture *c = sb->capture;

	if (!c)
		return;
	vm_forget(sb->vm, c);
	sb->capture = NULL;
	snapshot_rec_clear(&c->snap);
	free(c);
}
