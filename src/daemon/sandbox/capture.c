/* capture.c -- taking a snapshot of a running sandbox: pause the vCPUs, freeze the disk, save
 * memory and devices, then let the VM run again or leave it paused for its end.
 *
 * Steps, each completed from the event loop:
 *   1. vm_pause                   (one instant for memory and disk)
 *   2. vm_freeze_disk (optional)  QEMU moves the VM onto a new empty layer;
 *                                 the old one is the snapshot's disk, and a
 *                                 copy of the new one is its seed overlay
 *   3. vm_save                    memory image + device state (space-memcvt)
 *   4. vm_resume (optional)       when the VM was running before
 * A failure at any step undoes what it can: the snapshot's files and record
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
};

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
	return store_snapshot_put(c->sb->d->store, &c->snap, err);
}

static void on_saved(struct vm *vm, const space_err *err, void *arg)
{
	struct capture *c = arg;
	space_err e = { 0 };

	if (err) {
		fail(c, "saving memory and devices", err);
		return;
	}
	if (finish_files(c, &e) < 0) {
		fail(c, "recording the snapshot", &e);
		return;
	}
	if (c->resume && c->was_running && vm_resume(vm, on_resumed, c, &e) == 0)
		return;
	capture_end(c, NULL);
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
	if (make_seed(c, &e) < 0 || store_snapshot_put(sb->d->store, &c->snap, &e) < 0) {
		fail(c, "the snapshot's seed overlay", &e);
		return;
	}
	save(c);
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

int capture_start(struct sandbox *sb, enum snap_kind kind, const char *name, bool freeze, bool resume,
		  capture_cb done, space_err *err)
{
	struct capture *c;

	if (capture_check(sb, kind, freeze, err) < 0)
		return -1;
	c = calloc(1, sizeof(*c));
	if (!c)
		return err_set(err, ENOMEM, "out of memory");
	sb->d->captures_begun++;
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
	if (vm_pause(sb->vm, on_paused, c, err) < 0) {
		snapshot_remove(sb->d, &c->snap);
		snapshot_rec_clear(&c->snap);
		free(c);
		return -1;
	}
	sb->capture = c;
	return 0;
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
