/* fs_read.c -- `read PATH [OFFSET [LENGTH]]`: a header with the file's size, then exactly
 * `length` bytes of it.  Only regular files: the path is checked with stat before it is
 * opened (a device or FIFO is never opened), opened non-blocking, and checked again. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fs.h"

int fs_op_read(struct fs_out *o, const struct fs_args *a, struct fs_fail *f)
{
	const char *path = a->pos[0];
	_cleanup_close_ int fd = -1;
	uint64_t off = 0, len = UINT64_MAX, size, left;
	struct stat st, st2;
	struct jbuf b;
	int rc;

	if (fs_check_path(f, path) < 0)
		return -1;
	if ((a->npos > 1 && fs_parse_u64(a->pos[1], &off) < 0) ||
	    (a->npos > 2 && fs_parse_u64(a->pos[2], &len) < 0))
		return fs_fail(f, EINVAL, path, "read: offset and length must be decimal numbers");
	if (stat(path, &st) < 0)
		return fs_failsys(f, errno, path, "stat %s", path);
	if (S_ISDIR(st.st_mode))
		return fs_fail(f, EISDIR, path, "read %s: is a directory", path);
	if (!S_ISREG(st.st_mode))
		return fs_fail(f, EINVAL, path, "read %s: not a regular file", path);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return fs_failsys(f, errno, path, "open %s", path);
	if (fstat(fd, &st2) < 0)
		return fs_failsys(f, errno, path, "stat %s", path);
	if (!S_ISREG(st2.st_mode) || st2.st_ino != st.st_ino || st2.st_dev != st.st_dev)
		return fs_fail(f, EINVAL, path, "read %s: not a regular file", path);
	size = (uint64_t)(st2.st_size > 0 ? st2.st_size : 0);
	if (off > size)
		return fs_fail(f, ERANGE, path, "read %s: offset %llu is past the end (%llu bytes)",
			       path, (unsigned long long)off, (unsigned long long)size);
	if (len > size - off)
		len = size - off;

	jb_init(&b);
	jb_begin(&b);
	jb_ku64(&b, "size", size);
	jb_ku64(&b, "offset", off);
	jb_ku64(&b, "length", len);
	jb_ku64(&b, "mode", st2.st_mode & 07777);
	jb_ktime(&b, "mtime", &st2.st_mtim);
	jb_end(&b);
	rc = fs_header(o, &b, f, path);
	jb_free(&b);
	if (rc < 0)
		return -1;

	/* Straight into the output buffer: one copy from the page cache to the pipe's. */
	for (left = len; left;) {
		size_t room;
		char *p = fs_out_space(o, &room);
		ssize_t r;

		if (!p)
			return fs_failsys(f, errno, path, "read: write stdout");
		if (room > left)
			room = (size_t)left;
		do
			r = pread(fd, p, room, (off_t)off);
		while (r < 0 && errno == EINTR);
		if (r < 0)
			return fs_failsys(f, errno, path, "read %s", path);
		if (r == 0)
			return fs_fail(f, EIO, path, "read %s: the file shrank while it was read",
				       path);
		fs_out_commit(o, (size_t)r);
		off += (uint64_t)r;
		left -= (uint64_t)r;
	}
	return 0;
}
