/* tar_write.c -- an archive of a local tree, made as it is read (see tar.h) */
#include "tar.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "cp.h"

/* Directories open at once while walking: the deepest tree we take. */
#define MAX_DEPTH 512
#define USTAR_SIZE_MAX 077777777777ULL /* 11 octal digits: 8 GiB - 1 */

struct frame {
	int dirfd;
	char **names;
	size_t n, i;
	char *prefix; /* this directory's archive name and '/', "" for the top of contents */
};

struct tar_writer {
	/* Bytes ready to hand out: headers (pax and ustar). */
	char *hdr;
	size_t hdr_len, hdr_off, hdr_cap;
	/* The regular file whose data comes next. */
	int fd;
	unsigned long long left;
	char *cur; /* its archive name, for messages */
	size_t pad;
	struct frame *stack;
	size_t depth, cap;
	bool walked;        /* every entry is out */
	size_t trailer;     /* zero bytes of the end-of-archive marker still due */
	unsigned long long file_bytes;
	tar_warn_fn warn;
	void *warn_arg;
	bool failed;
};

static void warnf(struct tar_writer *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warnf(struct tar_writer *w, const char *fmt, ...)
{
	char msg[1200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (w->warn)
		w->warn(msg, w->warn_arg);
}

static int hdr_room(struct tar_writer *w, size_t more, space_err *e)
{
	if (w->hdr_len + more > w->hdr_cap) {
		size_t cap = (w->hdr_len + more) * 2;
		char *n = realloc(w->hdr, cap);

		if (!n)
			return err_set(e, ENOMEM, "out of memory");
		w->hdr = n;
		w->hdr_cap = cap;
	}
	return 0;
}

/* An octal field of len bytes: len-1 digits and a NUL. */
static void put_octal(char *field, size_t len, unsigned long long v)
{
	snprintf(field, len, "%0*llo", (int)len - 1, v);
}

static size_t digits(size_t n)
{
	size_t d = 1;

	while (n >= 10) {
		n /= 10;
		d++;
	}
	return d;
}

/* Append the pax record "<len> key=value\n" (len counts itself). */
static int pax_add(char **rec, size_t *len, const char *key, const char *value, space_err *e)
{
	size_t body = 1 + strlen(key) + 1 + strlen(value) + 1, total = body + 1, d;
	char *n;

	while ((d = digits(total)) + body != total)
		total = d + body;
	n = realloc(*rec, *len + total + 1);
	if (!n)
		return err_set(e, ENOMEM, "out of memory");
	snprintf(n + *len, total + 1, "%zu %s=%s\n", total, key, value);
	*rec = n;
	*len += total;
	return 0;
}

/* A ustar header block for name (already fitting) into out. */
static void ustar_block(char out[TAR_BLOCK], const char *name, size_t name_len,
			const char *prefix, size_t prefix_len, char type, unsigned mode,
			unsigned long long size, long long mtime, const char *linkname)
{
	unsigned sum = 0;
	size_t i;

	memset(out, 0, TAR_BLOCK);
	memcpy(out, name, name_len < 100 ? name_len : 100);
	put_octal(out + 100, 8, mode & 07777);
	put_octal(out + 108, 8, 0); /* uid */
	put_octal(out + 116, 8, 0); /* gid */
	put_octal(out + 124, 12, size <= USTAR_SIZE_MAX ? size : 0);
	put_octal(out + 136, 12, mtime >= 0 && (unsigned long long)mtime <= USTAR_SIZE_MAX ?
					 (unsigned long long)mtime : 0);
	memset(out + 148, ' ', 8);
	out[156] = type;
	if (linkname)
		memcpy(out + 157, linkname, strnlen(linkname, 100));
	memcpy(out + 257, "ustar", 6);
	memcpy(out + 263, "00", 2);
	memcpy(out + 265, "root", 4);
	memcpy(out + 297, "root", 4);
	if (prefix_len)
		memcpy(out + 345, prefix, prefix_len);
	for (i = 0; i < TAR_BLOCK; i++)
		sum += (unsigned char)out[i];
	snprintf(out + 148, 8, "%06o", sum);
	out[155] = ' ';
}

/* Split name into ustar's prefix (155) and name (100) at a '/': the
 * prefix's length, or -1 when it cannot be split so. */
static long ustar_split(const char *name, size_t len)
{
	size_t i;

	if (len <= 100)
		return 0;
	/* The last '/' within the prefix field's reach leaves the shortest
	 * name part. */
	for (i = len - 1 < 155 ? len - 1 : 155; i > 0; i--)
		if (name[i] == '/')
			break;
	if (i == 0 || len - i - 1 > 100 || len - i - 1 == 0)
		return -1;
	return (long)i;
}

/* Queue the headers of one entry. */
static int put_header(struct tar_writer *w, const char *name, char type, unsigned mode,
		      unsigned long long size, long long mtime, const char *linkname,
		      space_err *e)
{
	size_t len = strlen(name), rec_len = 0;
	long split = ustar_split(name, len);
	char *rec = NULL, num[32];
	int rc = 0;

	if (split < 0)
		rc = pax_add(&rec, &rec_len, "path", name, e);
	if (rc == 0 && linkname && strlen(linkname) > 100)
		rc = pax_add(&rec, &rec_len, "linkpath", linkname, e);
	if (rc == 0 && size > USTAR_SIZE_MAX) {
		snprintf(num, sizeof(num), "%llu", size);
		rc = pax_add(&rec, &rec_len, "size", num, e);
	}
	if (rc == 0 && (mtime < 0 || (unsigned long long)mtime > USTAR_SIZE_MAX)) {
		snprintf(num, sizeof(num), "%lld", mtime);
		rc = pax_add(&rec, &rec_len, "mtime", num, e);
	}
	if (rc < 0) {
		free(rec);
		return -1;
	}
	if (rec_len) {
		size_t padded = (rec_len + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;

		if (hdr_room(w, TAR_BLOCK + padded, e) < 0) {
			free(rec);
			return -1;
		}
		ustar_block(w->hdr + w->hdr_len, "././@PaxHeader", 14, NULL, 0, 'x', 0644,
			    rec_len, mtime, NULL);
		w->hdr_len += TAR_BLOCK;
		memset(w->hdr + w->hdr_len, 0, padded);
		memcpy(w->hdr + w->hdr_len, rec, rec_len);
		w->hdr_len += padded;
		free(rec);
	}
	if (hdr_room(w, TAR_BLOCK, e) < 0)
		return -1;
	if (split > 0)
		ustar_block(w->hdr + w->hdr_len, name + split + 1, len - (size_t)split - 1, name,
			    (size_t)split, type, mode, size, mtime, linkname);
	else /* fits, or the pax path says it: the start of it here */
		ustar_block(w->hdr + w->hdr_len, name, len, NULL, 0, type, mode, size, mtime,
			    linkname);
	w->hdr_len += TAR_BLOCK;
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* Push the directory open on dirfd (taken over), its names sorted. */
static int push_dir(struct tar_writer *w, int dirfd, const char *prefix, const char *what,
		    space_err *e)
{
	int dupfd = dup(dirfd);
	DIR *d = dupfd >= 0 ? fdopendir(dupfd) : NULL;
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	struct frame *f;

	if (!d) {
		int err = errno;

		if (dupfd >= 0)
			close(dupfd);
		close(dirfd);
		return err_sys(e, err, "%s", what);
	}
	if (w->depth >= MAX_DEPTH) {
		closedir(d);
		close(dirfd);
		return err_set(e, ELOOP, "%s: more than %d levels of directories", what, MAX_DEPTH);
	}
	errno = 0;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 32;
			char **nn = realloc(names, ncap * sizeof(*nn));

			if (!nn)
				goto oom;
			names = nn;
			cap = ncap;
		}
		if (!(names[n] = strdup(de->d_name)))
			goto oom;
		n++;
		errno = 0;
	}
	if (errno) {
		int err = errno;

		closedir(d);
		close(dirfd);
		free_names(names, n);
		return err_sys(e, err, "%s: reading the directory", what);
	}
	closedir(d);
	if (n > 1)
		qsort(names, n, sizeof(*names), by_name);
	if (w->depth == w->cap) {
		size_t ncap = w->cap ? w->cap * 2 : 8;
		struct frame *ns = realloc(w->stack, ncap * sizeof(*ns));

		if (!ns) {
			close(dirfd);
			free_names(names, n);
			return err_set(e, ENOMEM, "out of memory");
		}
		w->stack = ns;
		w->cap = ncap;
	}
	f = &w->stack[w->depth];
	f->prefix = strdup(prefix);
	if (!f->prefix) {
		close(dirfd);
		free_names(names, n);
		return err_set(e, ENOMEM, "out of memory");
	}
	f->dirfd = dirfd;
	f->names = names;
	f->n = n;
	f->i = 0;
	w->depth++;
	return 0;
oom:
	closedir(d);
	close(dirfd);
	free_names(names, n);
	return err_set(e, ENOMEM, "out of memory");
}

static void pop_dir(struct tar_writer *w)
{
	struct frame *f = &w->stack[--w->depth];

	close(f->dirfd);
	free_names(f->names, f->n);
	free(f->prefix);
}

static char *read_link(int dirfd, const char *name, size_t hint, space_err *e)
{
	size_t cap = hint + 1 > 256 ? hint + 1 : 256;

	for (;;) {
		char *buf = malloc(cap);
		ssize_t n;

		if (!buf) {
			err_set(e, ENOMEM, "out of memory");
			return NULL;
		}
		n = readlinkat(dirfd, name, buf, cap);
		if (n < 0) {
			err_sys(e, errno, "%s: reading the link", name);
			free(buf);
			return NULL;
		}
		if ((size_t)n < cap) {
			buf[n] = '\0';
			return buf;
		}
		free(buf);
		if (cap > (1u << 20)) {
			err_set(e, ENAMETOOLONG, "%s: link target too long", name);
			return NULL;
		}
		cap *= 2;
	}
}

/*
 * Queue the entry for `name` in dirfd, archived as `path`.  Returns 1 when an
 * entry was queued, 0 when it was skipped, -1 on error.
 */
static int add_entry(struct tar_writer *w, int dirfd, const char *name, const char *path,
		     space_err *e)
{
	struct stat st;
	long long mtime;
	int fd;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0; /* gone since it was listed */
		return err_sys(e, errno, "%s", path);
	}
	mtime = (long long)st.st_mtim.tv_sec;
	if (S_ISDIR(st.st_mode)) {
		_cleanup_free_ char *dname = NULL;

		fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return err_sys(e, errno, "%s", path);
		if (asprintf(&dname, "%s/", path) < 0) {
			close(fd);
			return err_set(e, ENOMEM, "out of memory");
		}
		if (put_header(w, dname, TAR_DIR, st.st_mode, 0, mtime, NULL, e) < 0) {
			close(fd);
			return -1;
		}
		return push_dir(w, fd, dname, path, e) < 0 ? -1 : 1;
	}
	if (S_ISREG(st.st_mode)) {
		/* O_NONBLOCK: should it have become a FIFO meanwhile, the open
		 * must not hang; it is then skipped below. */
		fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0)
			return err_sys(e, errno, "%s", path);
		if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			close(fd);
			warnf(w, "skipping %s: no longer a regular file", path);
			return 0;
		}
		if (put_header(w, path, TAR_FILE, st.st_mode, (unsigned long long)st.st_size,
			       (long long)st.st_mtim.tv_sec, NULL, e) < 0) {
			close(fd);
			return -1;
		}
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
		free(w->cur);
		w->cur = strdup(path);
		w->fd = fd;
		w->left = (unsigned long long)st.st_size;
		w->pad = (size_t)((TAR_BLOCK - w->left % TAR_BLOCK) % TAR_BLOCK);
		return 1;
	}
	if (S_ISLNK(st.st_mode)) {
		_cleanup_free_ char *target = read_link(dirfd, name, (size_t)st.st_size, e);

		if (!target)
			return err_wrap(e, "%s", path);
		return put_header(w, path, TAR_SYMLINK, 0777, 0, mtime, target, e) < 0 ? -1 : 1;
	}
	warnf(w, "skipping %s: not a regular file, directory or symbolic link", path);
	return 0;
}

struct tar_writer *tarw_new(const char *src, const char *top, tar_warn_fn warn, void *warn_arg,
			    space_err *e)
{
	struct tar_writer *w = calloc(1, sizeof(*w));
	_cleanup_free_ char *dir = NULL, *base = NULL;
	struct stat st;
	int dirfd, rc;

	if (!w) {
		err_set(e, ENOMEM, "out of memory");
		return NULL;
	}
	w->fd = -1;
	w->warn = warn;
	w->warn_arg = warn_arg;
	w->trailer = 2 * TAR_BLOCK;
	if (lstat(src, &st) < 0) {
		err_sys(e, errno, "%s", src);
		goto fail;
	}
	if (!top) {
		if (!S_ISDIR(st.st_mode)) {
			err_set(e, ENOTDIR, "%s: not a directory", src);
			goto fail;
		}
		dirfd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dirfd < 0) {
			err_sys(e, errno, "%s", src);
			goto fail;
		}
		if (push_dir(w, dirfd, "", src, e) < 0)
			goto fail;
		return w;
	}
	/* The top entry: src itself, looked at from its directory. */
	base = cp_base(src);
	dir = cp_dir(src);
	if (!base || !dir) {
		err_set(e, ENOMEM, "out of memory");
		goto fail;
	}
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		err_sys(e, errno, "%s", dir);
		goto fail;
	}
	rc = add_entry(w, dirfd, base, top, e);
	close(dirfd);
	if (rc < 0)
		goto fail;
	if (rc == 0) {
		err_set(e, EINVAL, "%s: not a regular file, directory or symbolic link", src);
		goto fail;
	}
	return w;
fail:
	tarw_free(w);
	return NULL;
}

/* Queue the next entry, or mark the walk done. */
static int next_entry(struct tar_writer *w, space_err *e)
{
	while (w->depth) {
		struct frame *f = &w->stack[w->depth - 1];
		_cleanup_free_ char *path = NULL;
		const char *name;
		int rc;

		if (f->i == f->n) {
			pop_dir(w);
			continue;
		}
		name = f->names[f->i++];
		if (asprintf(&path, "%s%s", f->prefix, name) < 0)
			return err_set(e, ENOMEM, "out of memory");
		rc = add_entry(w, f->dirfd, name, path, e);
		if (rc != 0)
			return rc < 0 ? -1 : 0;
	}
	w->walked = true;
	return 0;
}

ssize_t tarw_read(struct tar_writer *w, char *buf, size_t n, space_err *e)
{
	size_t out = 0;

	if (w->failed)
		return err_set(e, EIO, "the archive already failed");
	while (out < n) {
		if (w->hdr_off < w->hdr_len) {
			size_t k = w->hdr_len - w->hdr_off;

			if (k > n - out)
				k = n - out;
			memcpy(buf + out, w->hdr + w->hdr_off, k);
			w->hdr_off += k;
			out += k;
			if (w->hdr_off == w->hdr_len)
				w->hdr_off = w->hdr_len = 0;
		} else if (w->fd >= 0 && w->left) {
			size_t k = n - out;
			ssize_t r;

			if (k > w->left)
				k = (size_t)w->left;
			r = read(w->fd, buf + out, k);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				err_sys(e, errno, "reading %s", w->cur);
				goto fail;
			}
			if (r == 0) {
				err_set(e, EIO, "%s: the file shrank while it was being read", w->cur);
				goto fail;
			}
			out += (size_t)r;
			w->left -= (unsigned long long)r;
			w->file_bytes += (unsigned long long)r;
		} else if (w->fd >= 0) {
			close(w->fd); /* all its bytes are out; growth since is not */
			w->fd = -1;
		} else if (w->pad) {
			size_t k = w->pad < n - out ? w->pad : n - out;

			memset(buf + out, 0, k);
			w->pad -= k;
			out += k;
		} else if (!w->walked) {
			if (next_entry(w, e) < 0)
				goto fail;
		} else if (w->trailer) {
			size_t k = w->trailer < n - out ? w->trailer : n - out;

			memset(buf + out, 0, k);
			w->trailer -= k;
			out += k;
		} else {
			break;
		}
	}
	return (ssize_t)out;
fail:
	w->failed = true;
	return -1;
}

unsigned long long tarw_file_bytes(const struct tar_writer *w)
{
	return w->file_bytes;
}

void tarw_free(struct tar_writer *w)
{
	if (!w)
		return;
	while (w->depth)
		pop_dir(w);
	if (w->fd >= 0)
		close(w->fd);
	free(w->stack);
	free(w->hdr);
	free(w->cur);
	free(w);
}

static long long tree_total;

static int tree_add(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)path;
	(void)flag;
	(void)ftw;
	if (S_ISREG(st->st_mode))
		tree_total += st->st_size;
	return 0;
}

long long tar_tree_bytes(const char *src)
{
	tree_total = 0;
	if (nftw(src, tree_add, 64, FTW_PHYS) != 0)
		return -1;
	return tree_total;
}
