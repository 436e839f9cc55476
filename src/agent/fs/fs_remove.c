/* fs_remove.c -- `remove PATH [-r]`.
 *
 * -r removes the tree without ever following a symlink: names are unlinked relative to the
 * directory fd being emptied (unlinkat), and a subdirectory is entered with
 * openat(O_NOFOLLOW | O_DIRECTORY), so a symlink to a directory elsewhere is removed as a
 * link and what it points to is untouched.
 *
 * Depth is not limited by file descriptors: one fd is held at a time.  Going down records the
 * parent's (device, inode) and where its listing stopped; coming back up opens ".." and checks
 * it is that same directory (else EBUSY: the tree was moved under us, and we stop rather than
 * remove anything outside it).  The walk stays on PATH's filesystem: a mount point inside the
 * tree fails the removal (EBUSY), as `rm -r --one-file-system` would.  "/" is never removed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fs.h"

#define RM_MAX_DEPTH (1 << 16)
#define RM_MAX_PASSES 64 /* listings of one directory before it is declared "still changing" */
#define RM_BUF (32 * 1024)

struct rm_level {
	dev_t dev;
	ino_t ino;
	off_t resume; /* where the parent's listing continues (the entry we went into) */
};

struct dirent64_rec {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

/* Remove one name in cur: 0 done, 1 it is a non-empty directory (go in), -1 error. */
static int rm_one(int cur, const char *name)
{
	int e;

	if (unlinkat(cur, name, 0) == 0 || errno == ENOENT)
		return 0;
	/* Linux answers EISDIR for a directory (POSIX allows EPERM). */
	if (errno != EISDIR && errno != EPERM)
		return -1;
	e = errno;
	if (unlinkat(cur, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
		return 0;
	if (errno == ENOTEMPTY || errno == EEXIST)
		return 1;
	if (errno == ENOTDIR)
		errno = e; /* the EPERM was about a file after all: report that */
	return -1;
}

/* Empty the directory top (its own fd stays open and unchanged). */
static int rm_tree(int top, const char *path, struct fs_fail *f)
{
	_cleanup_free_ char *buf = malloc(RM_BUF);
	_cleanup_free_ struct rm_level *stack = NULL;
	size_t depth = 0, cap = 0;
	struct stat cur_st, top_st;
	off_t pos = 0; /* offset of the next record in cur's listing */
	int cur, passes = 0;
	bool from_zero = true;
	size_t seen = 0;

	if (!buf)
		return fs_fail(f, ENOMEM, path, "remove: out of memory");
	if (fstat(top, &top_st) < 0)
		return fs_failsys(f, errno, path, "remove %s", path);
	cur = fcntl(top, F_DUPFD_CLOEXEC, 0);
	if (cur < 0)
		return fs_failsys(f, errno, path, "remove %s", path);
	cur_st = top_st;
	if (lseek(cur, 0, SEEK_SET) < 0)
		goto sys;
	for (;;) {
		ssize_t r;
		size_t o = 0;

		do
			r = getdents64(cur, buf, RM_BUF);
		while (r < 0 && errno == EINTR);
		if (r < 0)
			goto sys;
		if (r == 0) {
			/* End of a listing.  Offsets may shift as entries go (older tmpfs), so a
			 * directory is empty only when a listing from the start sees nothing. */
			if (!(from_zero && seen == 0)) {
				if (++passes > RM_MAX_PASSES) {
					close(cur);
					return fs_fail(f, ENOTEMPTY, path,
						       "remove %s: a directory keeps changing", path);
				}
				pos = 0;
				from_zero = true;
				seen = 0;
				if (lseek(cur, 0, SEEK_SET) < 0)
					goto sys;
				continue;
			}
			if (depth == 0)
				break;
			{
				int up = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK);
				struct stat st;

				if (up < 0)
					goto sys;
				if (fstat(up, &st) < 0 || st.st_dev != stack[depth - 1].dev ||
				    st.st_ino != stack[depth - 1].ino) {
					close(up);
					close(cur);
					return fs_fail(f, EBUSY, path,
						       "remove %s: a directory was moved during the removal",
						       path);
				}
				close(cur);
				cur = up;
				cur_st = st;
				depth--;
				pos = stack[depth].resume;
				from_zero = pos == 0;
				seen = 0;
				passes = 0;
				if (lseek(cur, pos, SEEK_SET) < 0)
					goto sys;
			}
			continue;
		}
		while (o < (size_t)r) {
			const struct dirent64_rec *d = (const void *)(buf + o);
			const char *name = d->d_name;
			int k;

			o += d->d_reclen;
			if (name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2]))) {
				pos = d->d_off;
				continue;
			}
			seen++;
			k = rm_one(cur, name);
			if (k < 0) {
				int e = errno;

				close(cur);
				return fs_failsys(f, e, path, "remove %s: %s", path, name);
			}
			if (k == 1) {
				int sub = openat(cur, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
							    O_CLOEXEC | O_NONBLOCK);
				struct stat st;

				if (sub < 0 || fstat(sub, &st) < 0) {
					int e = errno;

					if (sub >= 0)
						close(sub);
					close(cur);
					return fs_failsys(f, e, path, "remove %s: open %s", path, name);
				}
				if (st.st_dev != top_st.st_dev) {
					close(sub);
					close(cur);
					return fs_fail(f, EBUSY, path,
						       "remove %s: %s is a mount point", path, name);
				}
				if (depth >= RM_MAX_DEPTH) {
					close(sub);
					close(cur);
					return fs_fail(f, ELOOP, path,
						       "remove %s: more than %d levels", path,
						       RM_MAX_DEPTH);
				}
				if (depth == cap) {
					size_t nc = cap ? cap * 2 : 64;
					struct rm_level *ns = realloc(stack, nc * sizeof(*ns));

					if (!ns) {
						close(sub);
						close(cur);
						return fs_fail(f, ENOMEM, path, "remove: out of memory");
					}
					stack = ns;
					cap = nc;
				}
				stack[depth].dev = cur_st.st_dev;
				stack[depth].ino = cur_st.st_ino;
				stack[depth].resume = pos;
				depth++;
				close(cur);
				cur = sub;
				cur_st = st;
				pos = 0;
				from_zero = true;
				seen = 0;
				passes = 0;
				break;
			}
			pos = d->d_off;
		}
	}
	close(cur);
	return 0;
sys: {
	int e = errno;

	close(cur);
	return fs_failsys(f, e, path, "remove %s", path);
}
}

int fs_op_remove(struct fs_out *o, const struct fs_args *a, struct fs_fail *f)
{
	const char *path = a->pos[0];
	char sbuf[FS_PATH_MAX + 2];
	const char *dir, *base;
	struct stat st;
	struct jbuf b;
	int rc;

	if (fs_check_path(f, path) < 0)
		return -1;
	if (lstat(path, &st) < 0)
		return fs_failsys(f, errno, path, "remove %s", path);
	fs_split(path, sbuf, &dir, &base);
	if (!base[0])
		return fs_fail(f, EBUSY, path, "remove /: refused");
	if (!S_ISDIR(st.st_mode)) {
		if (unlink(path) < 0)
			return fs_failsys(f, errno, path, "remove %s", path);
	} else if (!a->r) {
		if (rmdir(path) < 0)
			return fs_failsys(f, errno, path, "remove %s", path);
	} else {
		_cleanup_close_ int pfd = -1, fd = -1;

		if (strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
			return fs_fail(f, EINVAL, path, "remove %s: refusing . and ..", path);
		pfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (pfd < 0)
			return fs_failsys(f, errno, path, "remove %s: open %s", path, dir);
		fd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0) {
			if ((errno == ELOOP || errno == ENOTDIR) && unlinkat(pfd, base, 0) == 0)
				goto done; /* replaced by a symlink or a file meanwhile */
			return fs_failsys(f, errno, path, "remove %s", path);
		}
		if (rm_tree(fd, path, f) < 0)
			return -1;
		if (unlinkat(pfd, base, AT_REMOVEDIR) < 0)
			return fs_failsys(f, errno, path, "remove %s", path);
	}
done:
	jb_init(&b);
	jb_begin(&b);
	jb_kcstr(&b, "path", path);
	jb_end(&b);
	rc = fs_header(o, &b, f, path);
	jb_free(&b);
	return rc;
}
