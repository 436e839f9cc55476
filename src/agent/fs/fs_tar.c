/* fs_tar.c -- `tar-out PATH` and `tar-in DIR`.
 *
 * tar-out: PATH and (for a directory) everything below it, entries named under basename(PATH)
 * ("proj/", "proj/a.txt", ...; PATH "/" gives "./", "./bin/", ...), sorted by name within a
 * directory.  Regular files, directories and symlinks; other types are skipped.  Symlinks are
 * archived as links, never followed (the walk opens each directory with O_NOFOLLOW relative to
 * its parent).  Hard links are not detected: each name is archived as a regular file with its
 * data.  At most FS_TREE_MAX_DEPTH levels below PATH (deeper: ELOOP).  A file that cannot be
 * read, or that shrinks while it is archived, ends the stream with an error (EIO for the
 * shrinking): the archive is cut short rather than silently incomplete.
 *
 * tar-in: extraction into the existing directory DIR, through directory fds only.  Every name
 * is normalised (tar_name_clean: "./" and empty components dropped); an absolute name or a ".."
 * component is refused (EINVAL), and so is a name whose directories pass through a symlink:
 * each directory component is opened with openat(O_NOFOLLOW | O_DIRECTORY) relative to the
 * previous one, starting at DIR (missing ones are created, 0755).  The last component is
 * never followed either: an existing file, symlink or hard link there is unlinked first and
 * the new file created with O_CREAT | O_EXCL | O_NOFOLLOW, so extraction cannot write through
 * a link into another file.  Hard links ('1') are made with linkat to a target that is itself
 * resolved inside DIR the same way.  The first refused entry ends the extraction (nothing more
 * is extracted).  Modes and mtimes are set; owners (numeric uid/gid) only when running as root.
 * Directories get their mode, mtime and owner at the end (children first), so a read-only
 * directory in the archive can still be filled.  The entry "./" (DIR itself) is skipped: DIR's
 * own mode and times are left alone.  Other entry types (devices, FIFOs, ...) are skipped.
 * After the end of the archive, up to TAR_DRAIN_MAX more bytes of stdin are read and dropped
 * (the padding writers add), so the sender does not see a broken pipe. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fs.h"
#include "tar.h"

#define TAR_DRAIN_MAX (16 << 20)
#define TAR_DEFER_MAX_BYTES (16 << 20)

/* ---- tar-out */

struct tout {
	struct tar_writer w;
	const char *path; /* PATH, for messages */
	char *name;	  /* the entry name being built */
	size_t cap;
	char target[FS_PATH_MAX + 1];
};

static void fill_entry(struct tar_entry *e, const struct stat *st)
{
	char ub[24], gb[24];

	e->mode = st->st_mode & 07777;
	e->uid = st->st_uid;
	e->gid = st->st_gid;
	e->mtime = st->st_mtim.tv_sec;
	e->mtime_nsec = 0;
	e->size = 0;
	e->linkname = "";
	snprintf(e->uname, sizeof(e->uname), "%s", fs_owner_name(st->st_uid, ub));
	snprintf(e->gname, sizeof(e->gname), "%s", fs_group_name(st->st_gid, gb));
}

static int out_file(struct tout *t, int dfd, const char *name, struct tar_entry *e,
		    const struct stat *st, struct fs_fail *f)
{
	_cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
							   O_CLOEXEC);
	struct stat fst;
	uint64_t left;

	if (fd < 0) {
		if (errno == ENOENT)
			return 0; /* gone since the directory was read */
		return fs_failsys(f, errno, t->path, "tar-out: open %s", t->name);
	}
	if (fstat(fd, &fst) < 0)
		return fs_failsys(f, errno, t->path, "tar-out: stat %s", t->name);
	if (!S_ISREG(fst.st_mode) || fst.st_ino != st->st_ino || fst.st_dev != st->st_dev)
		return 0; /* replaced by something else meanwhile */
	fill_entry(e, &fst);
	e->type = TAR_FILE;
	e->size = (uint64_t)(fst.st_size > 0 ? fst.st_size : 0);
	if (tar_write_header(&t->w, e) < 0)
		return fs_failsys(f, errno, t->path, "tar-out: write stdout");
	for (left = e->size; left;) {
		size_t room;
		char *p = tar_write_space(&t->w, &room);
		ssize_t r;

		if (!p)
			return fs_failsys(f, errno, t->path, "tar-out: write stdout");
		if (room > left)
			room = (size_t)left;
		r = fs_read_some(fd, p, room);
		if (r < 0)
			return fs_failsys(f, errno, t->path, "tar-out: read %s", t->name);
		if (r == 0)
			return fs_fail(f, EIO, t->path, "tar-out: %s shrank while it was archived",
				       t->name);
		tar_write_commit(&t->w, (size_t)r);
		left -= (uint64_t)r;
	}
	if (tar_write_pad(&t->w) < 0)
		return fs_failsys(f, errno, t->path, "tar-out: write stdout");
	return 0;
}

/* The entry `name` in dfd (already lstat'ed into st); t->name[0..len) is its archive name. */
static int out_entry(struct tout *t, int dfd, const char *name, const struct stat *st,
		     size_t len, unsigned depth, struct fs_fail *f)
{
	struct tar_entry e;

	memset(&e, 0, sizeof(e));
	e.name = t->name;
	if (S_ISREG(st->st_mode))
		return out_file(t, dfd, name, &e, st, f);
	if (S_ISLNK(st->st_mode)) {
		ssize_t tl = readlinkat(dfd, name, t->target, sizeof(t->target) - 1);

		if (tl < 0)
			return errno == ENOENT ? 0
					       : fs_failsys(f, errno, t->path, "tar-out: readlink %s",
							    t->name);
		t->target[tl] = '\0';
		fill_entry(&e, st);
		e.type = TAR_SYMLINK;
		e.linkname = t->target;
		if (tar_write_header(&t->w, &e) < 0)
			return fs_failsys(f, errno, t->path, "tar-out: write stdout");
		return 0;
	}
	if (S_ISDIR(st->st_mode)) {
		_cleanup_close_ int sub = -1;
		_cleanup_free_ char **names = NULL;
		ssize_t n, i;

		if (depth > FS_TREE_MAX_DEPTH)
			return fs_fail(f, ELOOP, t->path, "tar-out: more than %d directory levels",
				       FS_TREE_MAX_DEPTH);
		sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (sub < 0)
			return errno == ENOENT ? 0
					       : fs_failsys(f, errno, t->path, "tar-out: open %s",
							    t->name);
		n = fs_dir_names(sub, &names);
		if (n < 0)
			return fs_failsys(f, errno, t->path, "tar-out: read directory %s", t->name);
		t->name[len] = '/';
		t->name[len + 1] = '\0';
		fill_entry(&e, st);
		e.type = TAR_DIR;
		if (tar_write_header(&t->w, &e) < 0)
			return fs_failsys(f, errno, t->path, "tar-out: write stdout");
		for (i = 0; i < n; i++) {
			size_t nl = strlen(names[i]);
			struct stat cst;

			if (len + 1 + nl + 2 > t->cap)
				return fs_fail(f, ENAMETOOLONG, t->path, "tar-out: name too long");
			if (fstatat(sub, names[i], &cst, AT_SYMLINK_NOFOLLOW) < 0)
				continue;
			memcpy(t->name + len + 1, names[i], nl + 1);
			if (out_entry(t, sub, names[i], &cst, len + 1 + nl, depth + 1, f) < 0)
				return -1;
		}
		t->name[len] = '\0';
		return 0;
	}
	return 0; /* devices, FIFOs, sockets: skipped */
}

int fs_op_tar_out(struct fs_out *o, const struct fs_args *a, struct fs_fail *f)
{
	const char *path = a->pos[0];
	char sbuf[FS_PATH_MAX + 2];
	const char *dir, *base;
	_cleanup_close_ int pfd = -1;
	struct tout t = { .path = path };
	struct stat st;
	struct jbuf b;
	int rc;

	if (fs_check_path(f, path) < 0)
		return -1;
	if (lstat(path, &st) < 0)
		return fs_failsys(f, errno, path, "tar-out %s", path);
	fs_split(path, sbuf, &dir, &base);
	if (!base[0])
		base = ".";
	pfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0)
		return fs_failsys(f, errno, path, "tar-out %s: open %s", path, dir);
	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return fs_failsys(f, errno, path, "tar-out %s", path);
	t.cap = FS_PATH_MAX + 2 + (size_t)(FS_TREE_MAX_DEPTH + 2) * 257;
	t.name = malloc(t.cap);
	if (!t.name)
		return fs_fail(f, ENOMEM, path, "tar-out: out of memory");
	memcpy(t.name, base, strlen(base) + 1);

	jb_init(&b);
	jb_begin(&b);
	jb_kcstr(&b, "path", path);
	jb_end(&b);
	rc = fs_header(o, &b, f, path);
	jb_free(&b);
	tar_writer_init(&t.w, o);
	if (rc == 0)
		rc = out_entry(&t, pfd, base, &st, strlen(base), 0, f);
	if (rc == 0 && tar_write_end(&t.w) < 0)
		rc = fs_failsys(f, errno, path, "tar-out: write stdout");
	tar_writer_free(&t.w);
	free(t.name);
	return rc;
}

/* ---- tar-in */

struct deferred_dir {
	char *name;
	uint32_t mode;
	int64_t mtime;
	uint32_t nsec;
	uint64_t uid, gid;
};

struct tin {
	int root;
	const char *dir; /* DIR, for messages */
	bool as_root;
	struct tar_reader r;
	char *buf;
	char clean[TAR_NAME_MAX + 1], lclean[TAR_NAME_MAX + 1];
	struct deferred_dir *defer;
	size_t ndefer, capdefer, defer_bytes;
	uint64_t entries, bytes;
};

static ssize_t read_stdin(void *ctx, void *buf, size_t n)
{
	(void)ctx;
	return fs_read_some(0, buf, n);
}

/* Open the directory holding rel's last component, walking from DIR without following any
 * symlink (missing directories are created when create).  Returns the fd and points *last at
 * the last component in rel; -1 with f filled. */
static int walk_parent(struct tin *t, char *rel, bool create, const char **last,
		       struct fs_fail *f)
{
	int cur = fcntl(t->root, F_DUPFD_CLOEXEC, 0);
	char *p = rel, *slash;

	if (cur < 0)
		return fs_failsys(f, errno, t->dir, "tar-in");
	while ((slash = strchr(p, '/'))) {
		int next;

		*slash = '\0';
		next = openat(cur, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0 && errno == ENOENT && create) {
			if (mkdirat(cur, p, 0755) < 0 && errno != EEXIST)
				goto fail;
			next = openat(cur, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (next < 0)
			goto fail;
		*slash = '/';
		close(cur);
		cur = next;
		p = slash + 1;
	}
	*last = p;
	return cur;
fail: {
	int e = errno;
	struct stat st;

	if ((e == ELOOP || e == ENOTDIR) && fstatat(cur, p, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISLNK(st.st_mode)) {
		*slash = '/';
		close(cur);
		return fs_fail(f, EINVAL, t->dir, "tar-in: %.1024s passes through a symlink", rel);
	}
	*slash = '/';
	close(cur);
	return fs_failsys(f, e, t->dir, "tar-in: %.1024s", rel);
}
}

/* Make room for a new non-directory at last: whatever non-directory is there goes. */
static int clear_slot(struct tin *t, int parent, const char *last, struct fs_fail *f)
{
	if (unlinkat(parent, last, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno == EISDIR || errno == EPERM) {
		struct stat st;

		if (fstatat(parent, last, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
			return fs_fail(f, EISDIR, t->dir, "tar-in: %.1024s: a directory is in the way",
				       t->clean);
	}
	return fs_failsys(f, errno, t->dir, "tar-in: replace %.1024s", t->clean);
}

static void times_of(const struct tar_entry *e, struct timespec ts[2])
{
	ts[0].tv_sec = 0;
	ts[0].tv_nsec = UTIME_OMIT;
	ts[1].tv_sec = (time_t)e->mtime;
	ts[1].tv_nsec = e->mtime_nsec < 1000000000u ? (long)e->mtime_nsec : 0;
}

static int in_file(struct tin *t, const struct tar_entry *e, struct fs_fail *f)
{
	const char *last;
	_cleanup_close_ int parent = walk_parent(t, t->clean, true, &last, f), fd = -1;
	struct timespec ts[2];

	if (parent < 0 || clear_slot(t, parent, last, f) < 0)
		return -1;
	fd = openat(parent, last, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return fs_failsys(f, errno, t->dir, "tar-in: create %.1024s", t->clean);
	for (;;) {
		ssize_t n = tar_read_data(&t->r, t->buf, FS_BUF_SIZE, &f->e);

		if (n < 0) {
			f->path = t->dir;
			unlinkat(parent, last, 0);
			return -1;
		}
		if (n == 0)
			break;
		if (fs_write_all(fd, t->buf, (size_t)n) < 0) {
			int err = errno;

			unlinkat(parent, last, 0);
			return fs_failsys(f, err, t->dir, "tar-in: write %.1024s", t->clean);
		}
		t->bytes += (uint64_t)n;
	}
	times_of(e, ts);
	if ((t->as_root && fchown(fd, (uid_t)e->uid, (gid_t)e->gid) < 0) ||
	    fchmod(fd, e->mode & 07777) < 0 || futimens(fd, ts) < 0)
		return fs_failsys(f, errno, t->dir, "tar-in: set the attributes of %.1024s",
				  t->clean);
	return 0;
}

static int in_symlink(struct tin *t, const struct tar_entry *e, struct fs_fail *f)
{
	const char *last;
	_cleanup_close_ int parent = walk_parent(t, t->clean, true, &last, f);
	struct timespec ts[2];

	if (parent < 0 || clear_slot(t, parent, last, f) < 0)
		return -1;
	if (symlinkat(e->linkname, parent, last) < 0)
		return fs_failsys(f, errno, t->dir, "tar-in: symlink %.1024s", t->clean);
	times_of(e, ts);
	if (t->as_root &&
	    fchownat(parent, last, (uid_t)e->uid, (gid_t)e->gid, AT_SYMLINK_NOFOLLOW) < 0)
		return fs_failsys(f, errno, t->dir, "tar-in: chown %.1024s", t->clean);
	utimensat(parent, last, ts, AT_SYMLINK_NOFOLLOW); /* not every filesystem can */
	return 0;
}

static int in_hardlink(struct tin *t, const struct tar_entry *e, struct fs_fail *f)
{
	const char *last, *tlast;
	_cleanup_close_ int tparent = -1, parent = -1;

	if (tar_name_clean(e->linkname, t->lclean, &f->e) < 0) {
		f->path = t->dir;
		return -1;
	}
	if (!t->lclean[0])
		return fs_fail(f, EINVAL, t->dir, "tar-in: hard link %.1024s to the target directory",
			       t->clean);
	if (strcmp(t->lclean, t->clean) == 0)
		return 0; /* a link to itself: already there */
	tparent = walk_parent(t, t->lclean, false, &tlast, f);
	if (tparent < 0)
		return -1;
	parent = walk_parent(t, t->clean, true, &last, f);
	if (parent < 0 || clear_slot(t, parent, last, f) < 0)
		return -1;
	if (linkat(tparent, tlast, parent, last, 0) < 0)
		return fs_failsys(f, errno, t->dir, "tar-in: link %.1024s to %.1024s", t->clean,
				  t->lclean);
	return 0;
}

static void dir_attrs(struct tin *t, const struct deferred_dir *d)
{
	char rel[TAR_NAME_MAX + 1];
	const char *last;
	struct fs_fail ignored;
	_cleanup_close_ int parent = -1, fd = -1;
	struct timespec ts[2];

	/* Best effort: a directory replaced or removed by a later entry is left alone, and a
	 * directory that existed before and belongs to someone else keeps its mode (EPERM). */
	memcpy(rel, d->name, strlen(d->name) + 1);
	parent = walk_parent(t, rel, false, &last, &ignored);
	if (parent < 0)
		return;
	fd = openat(parent, last, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	if (t->as_root)
		(void)!fchown(fd, (uid_t)d->uid, (gid_t)d->gid);
	(void)!fchmod(fd, d->mode & 07777);
	ts[0].tv_sec = 0;
	ts[0].tv_nsec = UTIME_OMIT;
	ts[1].tv_sec = (time_t)d->mtime;
	ts[1].tv_nsec = d->nsec < 1000000000u ? (long)d->nsec : 0;
	futimens(fd, ts);
}

static void apply_deferred(struct tin *t)
{
	while (t->ndefer) {
		struct deferred_dir *d = &t->defer[--t->ndefer];

		dir_attrs(t, d);
		free(d->name);
	}
	free(t->defer);
	t->defer = NULL;
	t->capdefer = 0;
}

static int in_dir(struct tin *t, const struct tar_entry *e, struct fs_fail *f)
{
	const char *last;
	_cleanup_close_ int parent = walk_parent(t, t->clean, true, &last, f);
	struct stat st;
	struct deferred_dir d;
	size_t nl = strlen(t->clean);

	if (parent < 0)
		return -1;
	if (mkdirat(parent, last, 0700) < 0) {
		if (errno != EEXIST)
			return fs_failsys(f, errno, t->dir, "tar-in: mkdir %.1024s", t->clean);
		if (fstatat(parent, last, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return fs_failsys(f, errno, t->dir, "tar-in: mkdir %.1024s", t->clean);
		if (!S_ISDIR(st.st_mode)) {
			if (unlinkat(parent, last, 0) < 0 || mkdirat(parent, last, 0700) < 0)
				return fs_failsys(f, errno, t->dir, "tar-in: mkdir %.1024s",
						  t->clean);
		}
	}
	d = (struct deferred_dir){ NULL, e->mode, e->mtime, e->mtime_nsec, e->uid, e->gid };
	if (t->defer_bytes + sizeof(d) + nl + 1 > TAR_DEFER_MAX_BYTES) {
		d.name = t->clean;
		dir_attrs(t, &d); /* too many to remember: now */
		return 0;
	}
	if (t->ndefer == t->capdefer) {
		size_t nc = t->capdefer ? t->capdefer * 2 : 64;
		struct deferred_dir *nd = realloc(t->defer, nc * sizeof(*nd));

		if (!nd)
			return fs_fail(f, ENOMEM, t->dir, "tar-in: out of memory");
		t->defer = nd;
		t->capdefer = nc;
	}
	d.name = strdup(t->clean);
	if (!d.name)
		return fs_fail(f, ENOMEM, t->dir, "tar-in: out of memory");
	t->defer[t->ndefer++] = d;
	t->defer_bytes += sizeof(d) + nl + 1;
	return 0;
}

static int extract(struct tin *t, struct fs_fail *f)
{
	for (;;) {
		struct tar_entry e;
		int rc = tar_next(&t->r, &e, &f->e);

		if (rc < 0) {
			f->path = t->dir;
			return -1;
		}
		if (rc == 0)
			return 0;
		if (e.type == TAR_OTHER)
			continue;
		if (tar_name_clean(e.name, t->clean, &f->e) < 0) {
			f->path = t->dir;
			return -1;
		}
		if (!t->clean[0])
			continue; /* DIR itself ("./") */
		switch (e.type) {
		case TAR_DIR: rc = in_dir(t, &e, f); break;
		case TAR_FILE: rc = in_file(t, &e, f); break;
		case TAR_SYMLINK: rc = in_symlink(t, &e, f); break;
		case TAR_HARDLINK: rc = in_hardlink(t, &e, f); break;
		default: rc = 0; break;
		}
		if (rc < 0)
			return -1;
		t->entries++;
	}
}

int fs_op_tar_in(struct fs_out *o, const struct fs_args *a, struct fs_fail *f)
{
	const char *path = a->pos[0];
	struct tin t = { .dir = path, .as_root = geteuid() == 0 };
	struct jbuf b;
	int rc;

	if (fs_check_path(f, path) < 0)
		return -1;
	t.root = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (t.root < 0)
		return fs_failsys(f, errno, path, "tar-in %s", path);
	t.buf = malloc(FS_BUF_SIZE);
	if (!t.buf || tar_reader_init(&t.r, read_stdin, NULL, FS_BUF_SIZE) < 0) {
		free(t.buf);
		close(t.root);
		return fs_fail(f, ENOMEM, path, "tar-in: out of memory");
	}
	rc = extract(&t, f);
	apply_deferred(&t);
	if (rc == 0) {
		/* Drop what follows the end of the archive (record padding). */
		uint64_t drained = 0;
		ssize_t n;

		while (drained < TAR_DRAIN_MAX && (n = fs_read_some(0, t.buf, FS_BUF_SIZE)) > 0)
			drained += (uint64_t)n;
		jb_init(&b);
		jb_begin(&b);
		jb_kcstr(&b, "path", path);
		jb_ku64(&b, "entries", t.entries);
		jb_ku64(&b, "bytes", t.bytes);
		jb_end(&b);
		rc = fs_header(o, &b, f, path);
		jb_free(&b);
	}
	tar_reader_free(&t.r);
	free(t.buf);
	close(t.root);
	return rc;
}
