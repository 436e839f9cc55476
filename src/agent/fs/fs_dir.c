/* fs_dir.c -- directory helpers shared by the operations: a directory's names (sorted, read
 * with getdents64 on an fd we opened without following symlinks), path splitting, mkdir -p. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fs.h"

#define DIR_READ_BUF (32 * 1024)
#define DIR_NAMES_BYTES_MAX ((size_t)256 << 20)

struct dirent64_hdr {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

ssize_t fs_dir_names(int dfd, char ***names)
{
	_cleanup_free_ char *dbuf = malloc(DIR_READ_BUF), *strs = NULL;
	size_t slen = 0, scap = 0, n = 0, i;
	char **out, *p;

	*names = NULL;
	if (!dbuf)
		return -1;
	if (lseek(dfd, 0, SEEK_SET) < 0)
		return -1;
	for (;;) {
		ssize_t r = getdents64(dfd, dbuf, DIR_READ_BUF);
		size_t off = 0;

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		while (off + offsetof(struct dirent64_hdr, d_name) < (size_t)r) {
			const struct dirent64_hdr *d = (const void *)(dbuf + off);
			size_t nl;

			size_t nmax;

			if (d->d_reclen <= offsetof(struct dirent64_hdr, d_name) ||
			    off + d->d_reclen > (size_t)r) {
				errno = EIO;
				return -1;
			}
			off += d->d_reclen;
			nmax = d->d_reclen - offsetof(struct dirent64_hdr, d_name);
			nl = strnlen(d->d_name, nmax);
			if (nl == nmax) {
				errno = EIO; /* no terminating NUL inside the record */
				return -1;
			}
			if ((nl == 1 && d->d_name[0] == '.') ||
			    (nl == 2 && d->d_name[0] == '.' && d->d_name[1] == '.'))
				continue;
			if (n >= FS_DIR_MAX_ENTRIES || slen + nl + 1 > DIR_NAMES_BYTES_MAX) {
				errno = E2BIG;
				return -1;
			}
			if (slen + nl + 1 > scap) {
				size_t nc = scap ? scap * 2 : 4096;
				char *ns;

				while (nc < slen + nl + 1)
					nc *= 2;
				ns = realloc(strs, nc);
				if (!ns)
					return -1;
				strs = ns;
				scap = nc;
			}
			memcpy(strs + slen, d->d_name, nl + 1);
			slen += nl + 1;
			n++;
		}
	}
	out = malloc(n * sizeof(char *) + slen + 1);
	if (!out)
		return -1;
	p = (char *)(out + n);
	if (slen)
		memcpy(p, strs, slen);
	for (i = 0; i < n; i++) {
		out[i] = p;
		p += strlen(p) + 1;
	}
	qsort(out, n, sizeof(char *), cmp_names);
	*names = out;
	return (ssize_t)n;
}

void fs_split(const char *path, char *buf, const char **dir, const char **base)
{
	size_t n = strlen(path);
	char *slash;

	memcpy(buf, path, n + 1);
	while (n > 1 && buf[n - 1] == '/')
		buf[--n] = '\0';
	if (n == 1 && buf[0] == '/') {
		*dir = buf;
		*base = buf + 1; /* "" */
		return;
	}
	slash = strrchr(buf, '/');
	if (!slash) { /* not absolute: callers check before, but stay defined */
		*dir = ".";
		*base = buf;
		return;
	}
	*base = slash + 1;
	/* The directory part, its trailing slashes dropped ("/a//b" -> "/a"; "/b" -> "/"). */
	while (slash > buf && slash[-1] == '/')
		slash--;
	if (slash == buf) {
		/* buf is "/" followed by base: keep one '/' in front of base */
		memmove(buf + 2, *base, strlen(*base) + 1);
		buf[1] = '\0';
		*base = buf + 2;
		*dir = buf;
		return;
	}
	*slash = '\0';
	*dir = buf;
}

int fs_mkdir_p(struct fs_fail *f, const char *path, mode_t mode, bool *created)
{
	char buf[FS_PATH_MAX + 2];
	size_t n = strlen(path), i;
	struct stat st;

	*created = false;
	if (n > FS_PATH_MAX)
		return fs_fail(f, ENAMETOOLONG, path, "path too long");
	memcpy(buf, path, n + 1);
	while (n > 1 && buf[n - 1] == '/')
		buf[--n] = '\0';
	for (i = 1; i <= n; i++) {
		bool last = i == n;

		if (!last && buf[i] != '/')
			continue;
		if (!last && buf[i - 1] == '/')
			continue; /* "//" */
		buf[i] = '\0';
		if (mkdir(buf, last ? mode : 0755) == 0) {
			if (last)
				*created = true;
		} else {
			int e = errno;

			/* EEXIST, but also EACCES / EROFS on an existing directory: what counts is
			 * whether a directory is there now. */
			if (stat(buf, &st) == 0) {
				if (!S_ISDIR(st.st_mode)) {
					if (last)
						return fs_fail(f, EEXIST, path,
							       "mkdir %s: exists and is not a directory", buf);
					return fs_fail(f, ENOTDIR, path, "mkdir %s: not a directory", buf);
				}
			} else
				return fs_failsys(f, e, path, "mkdir %s", buf);
		}
		if (!last)
			buf[i] = '/';
	}
	return 0;
}
