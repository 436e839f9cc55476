/* fs_list.c -- the Entry object, and the `list` and `stat` operations.  lstat semantics: a
 * symlink is reported as itself, and `list` never descends through one (subdirectories are
 * opened relative to their parent with O_NOFOLLOW). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fs.h"

void fs_permissions(mode_t m, char out[11])
{
	char t;

	switch (m & S_IFMT) {
	case S_IFREG: t = '-'; break;
	case S_IFDIR: t = 'd'; break;
	case S_IFLNK: t = 'l'; break;
	case S_IFCHR: t = 'c'; break;
	case S_IFBLK: t = 'b'; break;
	case S_IFIFO: t = 'p'; break;
	case S_IFSOCK: t = 's'; break;
	default: t = '?'; break;
	}
	out[0] = t;
	out[1] = m & S_IRUSR ? 'r' : '-';
	out[2] = m & S_IWUSR ? 'w' : '-';
	out[3] = m & S_ISUID ? (m & S_IXUSR ? 's' : 'S') : (m & S_IXUSR ? 'x' : '-');
	out[4] = m & S_IRGRP ? 'r' : '-';
	out[5] = m & S_IWGRP ? 'w' : '-';
	out[6] = m & S_ISGID ? (m & S_IXGRP ? 's' : 'S') : (m & S_IXGRP ? 'x' : '-');
	out[7] = m & S_IROTH ? 'r' : '-';
	out[8] = m & S_IWOTH ? 'w' : '-';
	out[9] = m & S_ISVTX ? (m & S_IXOTH ? 't' : 'T') : (m & S_IXOTH ? 'x' : '-');
	out[10] = '\0';
}

const char *fs_type_name(mode_t m)
{
	if (S_ISREG(m))
		return "file";
	if (S_ISDIR(m))
		return "dir";
	if (S_ISLNK(m))
		return "symlink";
	return "other";
}

void fs_entry_json(struct jbuf *b, const char *name, size_t nlen, const char *path, size_t plen,
		   const struct stat *st, const char *target, size_t tlen)
{
	char perm[11], ub[24], gb[24];

	fs_permissions(st->st_mode, perm);
	jb_begin(b);
	jb_kstr(b, "name", name, nlen);
	jb_kstr(b, "path", path, plen);
	jb_kcstr(b, "type", fs_type_name(st->st_mode));
	jb_ku64(b, "size", (uint64_t)(st->st_size > 0 ? st->st_size : 0));
	jb_ku64(b, "mode", st->st_mode & 07777);
	jb_kcstr(b, "permissions", perm);
	jb_ku64(b, "uid", st->st_uid);
	jb_ku64(b, "gid", st->st_gid);
	jb_kcstr(b, "owner", fs_owner_name(st->st_uid, ub));
	jb_kcstr(b, "group", fs_group_name(st->st_gid, gb));
	jb_ktime(b, "mtime", &st->st_mtim);
	if (S_ISLNK(st->st_mode) && target)
		jb_kstr(b, "symlink_target", target, tlen);
	jb_end(b);
}

/* ---- list */

struct lister {
	struct fs_out *o;
	struct jbuf b;
	char *path; /* the directory being listed, then "/name" while an entry is written */
	size_t cap;
	unsigned max_depth;
	char target[FS_PATH_MAX + 1];
};

/* Entries of the directory dfd whose path is l->path[0..plen); names already read. */
static int list_names(struct lister *l, int dfd, char **names, size_t n, size_t plen,
		      unsigned depth, struct fs_fail *f)
{
	size_t i;

	for (i = 0; i < n; i++) {
		const char *name = names[i];
		size_t nl = strlen(name), len = plen;
		ssize_t tl = 0;
		struct stat st;

		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* gone since it was read, or not ours to see */
		if (S_ISLNK(st.st_mode)) {
			tl = readlinkat(dfd, name, l->target, sizeof(l->target));
			if (tl < 0)
				tl = 0;
		}
		if (len + 1 + nl + 1 > l->cap)
			continue; /* cannot happen: depth and NAME_MAX bound it */
		if (!(len == 1 && l->path[0] == '/'))
			l->path[len++] = '/';
		memcpy(l->path + len, name, nl);
		len += nl;
		jb_reset(&l->b);
		fs_entry_json(&l->b, name, nl, l->path, len, &st, l->target, (size_t)tl);
		jb_raw(&l->b, "\n", 1);
		if (l->b.oom)
			return fs_fail(f, ENOMEM, NULL, "list: out of memory");
		if (fs_out_put(l->o, l->b.p, l->b.len) < 0)
			return fs_failsys(f, errno, NULL, "list: write stdout");
		if (S_ISDIR(st.st_mode) && depth < l->max_depth) {
			_cleanup_close_ int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
							       O_CLOEXEC | O_NONBLOCK);
			_cleanup_free_ char **sn = NULL;
			ssize_t k;

			/* A subdirectory that cannot be read is listed but not descended into. */
			if (sub < 0 || (k = fs_dir_names(sub, &sn)) < 0)
				continue;
			if (list_names(l, sub, sn, (size_t)k, len, depth + 1, f) < 0)
				return -1;
		}
	}
	return 0;
}

int fs_op_list(struct fs_out *o, const struct fs_args *a, struct fs_fail *f)
{
	const char *path = a->pos[0];
	_cleanup_close_ int dfd = -1;
	_cleanup_free_ char **names = NULL;
	struct lister l = { .o = o };
	uint64_t depth = 1;
	size_t plen;
	ssize_t n;
	int rc;

	if (fs_check_path(f, path) < 0)
		return -1;
	if (a->npos > 1 && (fs_parse_u64(a->pos[1], &depth) < 0 || depth < 1 ||
			    depth > FS_LIST_MAX_DEPTH))
		return fs_fail(f, EINVAL, path, "list: depth must be 1..%d", FS_LIST_MAX_DEPTH);
	dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK);
	if (dfd < 0)
		return fs_failsys(f, errno, path, "open %s", path);
	n = fs_dir_names(dfd, &names);
	if (n < 0)
		return fs_failsys(f, errno, path, "read directory %s", path);
	l.max_depth = (unsigned)depth;
	l.cap = FS_PATH_MAX + 1 + (FS_LIST_MAX_DEPTH + 1) * 257;
	l.path = malloc(l.cap);
	if (!l.path)
		return fs_fail(f, ENOMEM, path, "list: out of memory");
	plen = strlen(path);
	memcpy(l.path, path, plen);
	while (plen > 1 && l.path[plen - 1] == '/')
		plen--;
	jb_init(&l.b);
	jb_begin(&l.b);
	jb_kcstr(&l.b, "path", path);
	jb_end(&l.b);
	rc = fs_header(o, &l.b, f, path);
	if (rc == 0)
		rc = list_names(&l, dfd, names, (size_t)n, plen, 1, f);
	jb_free(&l.b);
	free(l.path);
	return rc;
}

/* ---- stat */

int fs_op_stat(struct fs_out *o, const struct fs_args *a, struct fs_fail *f)
{
	const char *path = a->pos[0];
	char target[FS_PATH_MAX + 1], sbuf[FS_PATH_MAX + 2];
	const char *dir, *base;
	struct stat st;
	struct jbuf b;
	ssize_t tl = 0;
	int rc;

	if (fs_check_path(f, path) < 0)
		return -1;
	if (fstatat(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return fs_failsys(f, errno, path, "stat %s", path);
	if (S_ISLNK(st.st_mode)) {
		tl = readlink(path, target, sizeof(target));
		if (tl < 0)
			tl = 0;
	}
	fs_split(path, sbuf, &dir, &base);
	if (!base[0])
		base = "/";
	jb_init(&b);
	fs_entry_json(&b, base, strlen(base), path, strlen(path), &st, target, (size_t)tl);
	rc = fs_header(o, &b, f, path);
	jb_free(&b);
	return rc;
}
