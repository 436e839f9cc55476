/* disks.c -- the qcow2 layers of sandboxes and snapshots under <state>/disks.
 *
 * A sandbox writes the top layer of a chain: its own overlay, whose backing
 * file is a frozen layer (a snapshot's disk) or the template's raw image.
 * Layers are shared: a fork's children and every clone of a snapshot read
 * the same frozen layer. So no layer belongs to a sandbox's own directory;
 * all live here, and one that no sandbox or snapshot reaches through its
 * backing chain is garbage (disks_gc). New overlays are copies of a "seed":
 * an empty overlay made once, by QEMU itself when it freezes a disk or by
 * qemu-img for a template, so the hot path of a create runs no process. */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "runtime.h"
#include "vmm/proc_async.h"
#include "store/store.h"
#include "vmm/proc.h"
#include "vmm/qcow2.h"
#include "vmm/vm_argv.h"

#define QEMU_IMG_TIMEOUT_MS 20000
#define GC_MAX_LAYERS 65536

void disk_new_path(struct spaced *d, char out[PATH_MAX])
{
	char dir[PATH_MAX], id[ID_LEN];

	path_disks_dir(d, dir);
	id_new(id, "dk-");
	snprintf(out, PATH_MAX, "%s/%s.qcow2", dir, id);
}

static int copy_fd(int from, int to, space_err *err, const char *what)
{
	struct stat st;
	off_t off = 0;

	if (fstat(from, &st) < 0)
		return err_sys(err, errno, "stat %s", what);
	while (off < st.st_size) {
		ssize_t n = sendfile(to, from, &off, (size_t)(st.st_size - off));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return err_sys(err, n < 0 ? errno : EIO, "copying %s", what);
	}
	return 0;
}

/* Copies a small file (a seed overlay: a few hundred KiB) to a new name,
 * mode 0600, never over an existing file. */
static int copy_file(const char *from, const char *to, space_err *err)
{
	_cleanup_close_ int in = open(from, O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int out = -1;

	if (in < 0)
		return err_sys(err, errno == ENOENT ? EIO : errno, "open %s", from);
	out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (out < 0)
		return err_sys(err, errno, "create %s", to);
	if (copy_fd(in, out, err, from) < 0) {
		unlink(to);
		return -1;
	}
	return 0;
}

int disk_from_seed(struct spaced *d, const char *seed, char out[PATH_MAX], space_err *err)
{
	char dir[PATH_MAX];

	path_disks_dir(d, dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return err_sys(err, errno, "creating %s", dir);
	disk_new_path(d, out);
	if (copy_file(seed, out, err) < 0)
		return err_wrap(err, "the sandbox's disk");
	if (qcow2_backing_copy_record(seed, out, err) < 0) {
		unlink(out);
		return err_wrap(err, "the sandbox's disk");
	}
	return 0;
}

/* A suspended sandbox's disk copied to the shared directory, by a qemu-img the loop does not
 * wait for (a disk of gigabytes takes its time). */
struct disk_share {
	struct sandbox *sb;
	struct proc_job *job;
	char dir[PATH_MAX], out[PATH_MAX], tmp[PATH_MAX + 8];
	disk_shared_cb done;
};

static void share_done(const space_err *err, void *arg)
{
	struct disk_share *s = arg;
	struct sandbox *sb = s->sb;
	struct sandbox_rec *r = &sb->rec;
	disk_shared_cb done = s->done;
	char old[PATH_MAX];
	space_err e = { 0 };

	sb->share = NULL;
	if (err) {
		e = *err;
		err_wrap(&e, "copying the disk of %s to the shared directory", r->id);
		unlink(s->tmp);
	} else if (rename(s->tmp, s->out) < 0) {
		err_sys(&e, errno, "rename %s", s->tmp);
		unlink(s->tmp);
	} else {
		snprintf(old, sizeof(old), "%s", r->disk);
		snprintf(r->disk, sizeof(r->disk), "%s", s->out);
		/* A layer shared by an earlier suspend is nobody's now (local ones go by disks_gc). */
		if (strncmp(old, s->dir, strlen(s->dir)) == 0 && old[strlen(s->dir)] == '/')
			unlink(old);
	}
	free(s);
	done(sb, e.code ? e.msg : NULL);
}

int disk_share(struct sandbox *sb, disk_shared_cb done, space_err *err)
{
	struct disk_share *s;
	char id[ID_LEN];

	if (sb->share)
		return err_set(err, EBUSY, "sandbox %s: its disk is being shared already", sb->rec.id);
	s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(err, ENOMEM, "out of memory");
	snprintf(s->dir, sizeof(s->dir), "%s/disks", sb->d->cfg.shared_dir);
	if (path_mkdirs(s->dir, err) < 0) {
		free(s);
		return err_wrap(err, "the shared disk directory");
	}
	id_new(id, "dk-");
	snprintf(s->out, sizeof(s->out), "%s/%s.qcow2", s->dir, id);
	snprintf(s->tmp, sizeof(s->tmp), "%s.tmp", s->out);
	s->sb = sb;
	s->done = done;
	/* The whole chain in one layer, backed by nothing: what it stood on (this node's ready
	 * snapshot on tmpfs, its copy of the template) is nowhere else. Zeroes stay holes. */
	char *argv[] = { (char *)vm_qemu_img_binary(), "convert", "-q", "-O", "qcow2", sb->rec.disk, s->tmp, NULL };
	if (proc_job_start(sb->d->base, argv, QEMU_IMG_TIMEOUT_MS * 10, share_done, s, &s->job, err) < 0) {
		free(s);
		return err_wrap(err, "copying the disk of %s to the shared directory", sb->rec.id);
	}
	sb->share = s;
	return 0;
}

void disk_share_cancel(struct sandbox *sb)
{
	struct disk_share *s = sb->share;

	if (!s)
		return;
	sb->share = NULL;
	proc_job_cancel(s->job);
	unlink(s->tmp);
	free(s);
}

int disk_template_seed(struct spaced *d, const struct template_rec *t, char out[PATH_MAX], space_err *err)
{
	char image[PATH_MAX], tmp[PATH_MAX + 8], base[PATH_MAX];

	(void)d;
	snprintf(out, PATH_MAX, "%s/seed.qcow2", t->dir);
	snprintf(image, sizeof(image), "%s/rootfs.ext4", t->dir);
	/* qemu-img records the backing path as given: absolute, so a copy of
	 * the seed works from anywhere. */
	if (!realpath(image, base))
		return err_sys(err, EIO, "template image %s", image);
	if (access(out, R_OK) == 0) {
		char had[PATH_MAX];
		/* A seed made before backing records existed gets one. */
		return qcow2_backing_recorded(out, had) == 1 ? 0 : qcow2_backing_record(out, base, err);
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", out);
	unlink(tmp);
	char *argv[] = { (char *)vm_qemu_img_binary(), "create", "-q", "-f", "qcow2", "-F", "raw",
			 "-b", base, tmp, NULL };
	if (proc_run(argv, -1, QEMU_IMG_TIMEOUT_MS, err) < 0) {
		unlink(tmp);
		return err_wrap(err, "creating the seed overlay of template %s", t->name);
	}
	if (qcow2_backing_record(out, base, err) < 0) {
		unlink(tmp);
		return -1;
	}
	if (rename(tmp, out) < 0) {
		int e = errno;
		unlink(tmp);
		return err_sys(err, e, "rename %s", tmp);
	}
	return 0;
}

/* ---- backing chains ---- */

struct marks {
	char **paths;
	size_t n, cap;
	bool incomplete; /* something could not be followed: delete nothing */
};

static bool marked(const struct marks *m, const char *p)
{
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->paths[i], p) == 0)
			return true;
	return false;
}

/* The layer below cur: our record of it, else what its header names
 * (a layer made before records existed). */
static int layer_below(const char *cur, char next[PATH_MAX])
{
	int r = qcow2_backing_recorded(cur, next);

	return r != 0 ? (r > 0 ? 0 : -1) : qcow2_backing_of(cur, next);
}

/* Marks path and every layer below it. */
static void mark_chain(struct marks *m, const char *path)
{
	char cur[PATH_MAX], next[PATH_MAX];
	int depth = 0;

	snprintf(cur, sizeof(cur), "%s", path);
	while (cur[0] && depth++ < 256 && !marked(m, cur)) {
		if (m->n == m->cap) {
			size_t cap = m->cap ? m->cap * 2 : 64;
			char **p = realloc(m->paths, cap * sizeof(*p));
			if (!p) {
				m->incomplete = true;
				return;
			}
			m->paths = p;
			m->cap = cap;
		}
		if (!(m->paths[m->n] = strdup(cur))) {
			m->incomplete = true;
			return;
		}
		m->n++;
		if (layer_below(cur, next) < 0) {
			m->incomplete = true;
			return;
		}
		memcpy(cur, next, sizeof(cur));
	}
}

static void mark_snapshot(struct marks *m, const char *disk, const char *dir)
{
	char seed[PATH_MAX];

	mark_chain(m, disk);
	snprintf(seed, sizeof(seed), "%s/seed.qcow2", dir);
	mark_chain(m, seed);
}

/* The snapshots' disks and directories, read on the store's thread (gc_read). */
struct gc_view {
	struct spaced *d;
	unsigned captures;         /* d->captures_begun when the read was queued */
	char **disks, **dirs;
	size_t n, cap;
	bool failed;
	space_err err;
};

static bool gc_reading;

static int gc_keep(const struct snapshot_rec *s, void *arg)
{
	struct gc_view *v = arg;

	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 32;
		char **disks = realloc(v->disks, cap * sizeof(*disks)), **dirs;

		if (disks)
			v->disks = disks;
		if (!disks || !(dirs = realloc(v->dirs, cap * sizeof(*dirs))))
			goto oom;
		v->dirs = dirs;
		v->cap = cap;
	}
	v->disks[v->n] = strdup(s->disk);
	v->dirs[v->n] = strdup(s->dir);
	if (!v->disks[v->n] || !v->dirs[v->n]) {
		free(v->disks[v->n]);
		free(v->dirs[v->n]);
		goto oom;
	}
	v->n++;
	return 0;
oom:
	v->failed = true;
	err_set(&v->err, ENOMEM, "out of memory");
	return 1;
}

static void gc_read(struct store *conn, void *arg)
{
	struct gc_view *v = arg;

	if (store_snapshot_each(conn, 0, gc_keep, v, &v->err) < 0)
		v->failed = true;
}

static void gc_view_free(struct gc_view *v)
{
	for (size_t i = 0; i < v->n; i++) {
		free(v->disks[i]);
		free(v->dirs[i]);
	}
	free(v->disks);
	free(v->dirs);
	free(v);
}

/* Every layer in the disks dir that no sandbox and no snapshot reaches goes. */
static void gc_sweep(struct spaced *d, const struct gc_view *v)
{
	_cleanup_closedir_ DIR *dd = NULL;
	struct marks m = { 0 };
	char dir[PATH_MAX], path[PATH_MAX];
	struct dirent *de;
	int removed = 0;

	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next)
		if (sb->rec.state != SB_DELETED && sb->rec.disk[0])
			mark_chain(&m, sb->rec.disk);
	for (size_t i = 0; i < v->n; i++)
		mark_snapshot(&m, v->disks[i], v->dirs[i]);
	if (m.incomplete) {
		log_warn("disk gc skipped: a backing chain could not be followed");
		goto out;
	}
	path_disks_dir(d, dir);
	dd = opendir(dir);
	if (!dd)
		goto out;
	while ((de = readdir(dd))) {
		size_t n = strlen(de->d_name);

		if (n < 7 || strcmp(de->d_name + n - 6, ".qcow2") != 0 || strncmp(de->d_name, "dk-", 3) != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (marked(&m, path))
			continue;
		if (unlink(path) == 0) {
			qcow2_backing_forget(path);
			removed++;
		}
		else
			log_warn("disk gc: unlink %s: %s", path, strerror(errno));
	}
	if (removed)
		log_info("disk gc: removed %d unused layer(s)", removed);
out:
	for (size_t i = 0; i < m.n; i++)
		free(m.paths[i]);
	free(m.paths);
}

/* Without the full picture nothing may go: not when the read failed, and not when a capture
 * began since it was queued (its snapshot's new layer may be missing from what was read) or an
 * action is under way. */
static void gc_done(void *arg, bool ran)
{
	struct gc_view *v = arg;
	struct spaced *d = v->d;

	gc_reading = false;
	if (ran && v->failed)
		log_warn("disk gc skipped: %s", v->err.msg);
	else if (ran && v->captures == d->captures_begun && !sandbox_busy(d))
		gc_sweep(d, v);
	gc_view_free(v);
}

/* The snapshots are read on the store's thread (store_async); the sweep runs on the loop. */
void disks_gc(struct spaced *d)
{
	struct gc_view *v;
	space_err err = { 0 };

	if (gc_reading || !(v = calloc(1, sizeof(*v))))
		return;
	v->d = d;
	v->captures = d->captures_begun;
	gc_reading = true;
	if (store_async(d->store, gc_read, gc_done, v, &err) < 0) {
		gc_reading = false;
		log_warn("disk gc skipped: %s", err.msg);
		gc_view_free(v);
	}
}
