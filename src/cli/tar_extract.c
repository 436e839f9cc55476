/* tar_extract.c -- write an archive's entries under one directory and never
 * outside it; files written whole or not at all (see tar.h) */
#include "tar.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "client.h"

/* ---- afile ----------------------------------------------------------- */

/* The temporary file being written, for the signal handlers. */
static volatile sig_atomic_t af_active;
static int af_dirfd = -1;
static char af_tmp[256];

static void af_on_signal(int sig)
{
	if (af_active)
		unlinkat(af_dirfd, af_tmp, 0);
	signal(sig, SIG_DFL);
	raise(sig);
}

void afile_arm_signals(void)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction sa;
	size_t i;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = af_on_signal;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct sigaction old;

		if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
			continue;
		sigaction(sigs[i], &sa, NULL);
	}
}

static unsigned random_u32(void)
{
	static unsigned counter;
	unsigned r;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
		r = (unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL) ^ ++counter * 40503u;
	return r;
}

int afile_open(struct afile *f, int dirfd, const char *name, unsigned mode, space_err *e)
{
	int tries;

	memset(f, 0, sizeof(*f));
	f->fd = -1;
	f->dirfd = dirfd;
	f->mode = mode;
	if (!*name || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return err_set(e, EINVAL, "'%s': not a file name", name);
	f->name = strdup(name);
	if (!f->name)
		return err_set(e, ENOMEM, "out of memory");
	for (tries = 0; tries < 100; tries++) {
		snprintf(f->tmp, sizeof(f->tmp), ".%.200s.spacectl-%06x", name,
			 random_u32() & 0xffffff);
		/* Registered before it exists: a signal in between unlinks
		 * nothing, or the file just made. */
		memcpy(af_tmp, f->tmp, sizeof(af_tmp));
		af_dirfd = dirfd;
		af_active = 1;
		f->fd = openat(dirfd, f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			       0600);
		if (f->fd >= 0)
			return 0;
		af_active = 0;
		if (errno != EEXIST)
			break;
	}
	err_sys(e, errno, "%s: creating a temporary file beside it", name);
	free(f->name);
	f->name = NULL;
	return -1;
}

int afile_write(struct afile *f, const void *p, size_t n, space_err *e)
{
	if (ctl_write_all(f->fd, p, n) < 0)
		return err_sys(e, errno, "writing %s", f->name);
	return 0;
}

void afile_abort(struct afile *f)
{
	if (f->fd >= 0) {
		close(f->fd);
		f->fd = -1;
		unlinkat(f->dirfd, f->tmp, 0);
		af_active = 0;
	}
	free(f->name);
	f->name = NULL;
}

int afile_commit(struct afile *f, space_err *e)
{
	int fd = f->fd;

	if (fchmod(fd, f->mode & 01777) < 0) {
		err_sys(e, errno, "%s: setting its mode", f->name);
		goto fail;
	}
	if (f->mtime_set) {
		struct timespec ts[2] = { { (time_t)f->mtime, f->mtime_nsec },
					  { (time_t)f->mtime, f->mtime_nsec } };

		if (futimens(fd, ts) < 0) {
			err_sys(e, errno, "%s: setting its time", f->name);
			goto fail;
		}
	}
	f->fd = -1;
	if (close(fd) < 0) {
		err_sys(e, errno, "writing %s", f->name);
		fd = -1;
		goto fail_unlink;
	}
	if (renameat(f->dirfd, f->tmp, f->dirfd, f->name) < 0) {
		int err = errno;

		if (err == EISDIR || err == ENOTEMPTY || err == EEXIST)
			err_set(e, EISDIR, "%s: a directory is there; not replaced by a file",
				f->name);
		else
			err_sys(e, err, "%s: renaming the finished file into place", f->name);
		fd = -1;
		goto fail_unlink;
	}
	af_active = 0;
	free(f->name);
	f->name = NULL;
	return 0;
fail:
	close(fd);
	f->fd = -1;
fail_unlink:
	unlinkat(f->dirfd, f->tmp, 0);
	af_active = 0;
	free(f->name);
	f->name = NULL;
	return -1;
}

/* ---- extraction ------------------------------------------------------ */

struct dirfix {
	char *path; /* below the root, components joined by '/' */
	unsigned mode;
	long long mtime;
	long mtime_nsec;
};

struct tar_extract {
	int rootfd;
	char *rename; /* the top's new name; NULL: its contents go into the root */
	char *top;    /* the archive's top component, from its first entry */
	tar_warn_fn warn;
	void *warn_arg;
	bool writing; /* a file is open in f, in directory pfd */
	struct afile f;
	int pfd;
	struct dirfix *fix;
	size_t nfix, capfix;
	unsigned long long file_bytes, entries;
};

static void warnf(struct tar_extract *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warnf(struct tar_extract *x, const char *fmt, ...)
{
	char msg[1200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (x->warn)
		x->warn(msg, x->warn_arg);
}

struct tar_extract *tarx_new(int dirfd, const char *top, tar_warn_fn warn, void *warn_arg,
			     space_err *e)
{
	struct tar_extract *x = calloc(1, sizeof(*x));

	if (!x || (top && !(x->rename = strdup(top)))) {
		free(x);
		err_set(e, ENOMEM, "out of memory");
		return NULL;
	}
	if (top && (!*top || strchr(top, '/') || strcmp(top, ".") == 0 || strcmp(top, "..") == 0)) {
		err_set(e, EINVAL, "'%s': not a name to extract to", top);
		free(x->rename);
		free(x);
		return NULL;
	}
	x->rootfd = dirfd;
	x->pfd = -1;
	x->warn = warn;
	x->warn_arg = warn_arg;
	return x;
}

static void free_comps(char **c, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(c[i]);
	free(c);
}

/* name's components ("" and "." dropped); -1 with e set for an absolute
 * name or a ".." component. */
static int split_name(const char *name, char ***out, size_t *nout, space_err *e)
{
	char **c = NULL;
	size_t n = 0;
	const char *p = name;

	*out = NULL;
	*nout = 0;
	if (name[0] == '/')
		return err_set(e, EPERM, "refusing the archive entry '%s': an absolute name", name);
	while (*p) {
		const char *s = strchr(p, '/');
		size_t len = s ? (size_t)(s - p) : strlen(p);

		if (len == 2 && p[0] == '.' && p[1] == '.') {
			free_comps(c, n);
			return err_set(e, EPERM, "refusing the archive entry '%s': it has a '..' "
				       "component", name);
		}
		if (len && !(len == 1 && p[0] == '.')) {
			char **nc = realloc(c, (n + 1) * sizeof(*nc));

			if (!nc || !(nc[n] = strndup(p, len))) {
				free_comps(nc ? nc : c, n);
				return err_set(e, ENOMEM, "out of memory");
			}
			c = nc;
			n++;
		}
		p += len;
		while (*p == '/')
			p++;
	}
	*out = c;
	*nout = n;
	return 0;
}

/* The entry's components below the root, the top renamed or left out.
 * n == 0: nothing to write (the top itself, left out). */
static int map_name(struct tar_extract *x, const char *name, char ***out, size_t *nout,
		    space_err *e)
{
	char **c;
	size_t n;

	if (split_name(name, &c, &n, e) < 0)
		return -1;
	*out = NULL;
	*nout = 0;
	if (n == 0) {
		free(c);
		return 0; /* "." or "./": the root itself */
	}
	if (!x->top) {
		x->top = strdup(c[0]);
		if (!x->top) {
			free_comps(c, n);
			return err_set(e, ENOMEM, "out of memory");
		}
	} else if (strcmp(x->top, c[0]) != 0) {
		err_set(e, EPERM, "refusing the archive entry '%s': not under '%s' like the first",
			name, x->top);
		free_comps(c, n);
		return -1;
	}
	if (x->rename) {
		free(c[0]);
		c[0] = strdup(x->rename);
		if (!c[0]) {
			free_comps(c, n);
			return err_set(e, ENOMEM, "out of memory");
		}
	} else {
		free(c[0]);
		memmove(c, c + 1, (n - 1) * sizeof(*c));
		n--;
	}
	*out = c;
	*nout = n;
	return 0;
}

/*
 * The directory holding the last of comps[0..n), as a new fd: each component
 * opened below the root with O_NOFOLLOW, so that no symbolic link (from the
 * archive or already there) is followed; missing ones made (0755) if create.
 */
static int open_parent(struct tar_extract *x, char **comps, size_t n, bool create,
		       const char *entry, space_err *e)
{
	int cur = x->rootfd;
	size_t i;

	for (i = 0; i + 1 < n; i++) {
		int nfd = openat(cur, comps[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		if (nfd < 0 && errno == ENOENT && create) {
			if (mkdirat(cur, comps[i], 0755) < 0 && errno != EEXIST)
				goto fail;
			nfd = openat(cur, comps[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (nfd < 0)
			goto fail;
		if (cur != x->rootfd)
			close(cur);
		cur = nfd;
	}
	if (cur == x->rootfd)
		cur = fcntl(x->rootfd, F_DUPFD_CLOEXEC, 0);
	if (cur < 0)
		return err_sys(e, errno, "%s", entry);
	return cur;
fail:
	{
		int err = errno;

		if (cur != x->rootfd)
			close(cur);
		if (err == ELOOP || err == ENOTDIR)
			return err_set(e, EPERM, "refusing to extract '%s': '%s' on its way is a "
				       "symbolic link or not a directory", entry, comps[i]);
		return err_sys(e, err, "%s", entry);
	}
}

static char *join_comps(char **c, size_t n)
{
	size_t len = 0, i;
	char *s, *p;

	for (i = 0; i < n; i++)
		len += strlen(c[i]) + 1;
	s = malloc(len + 1);
	if (!s)
		return NULL;
	p = s;
	for (i = 0; i < n; i++)
		p += sprintf(p, "%s%s", i ? "/" : "", c[i]);
	*p = '\0';
	return s;
}

static int make_dir(struct tar_extract *x, int pfd, char **c, size_t n, const struct tar_entry *en,
		    space_err *e)
{
	const char *last = c[n - 1];
	struct stat st;

	if (mkdirat(pfd, last, 0700) < 0) {
		if (errno != EEXIST)
			return err_sys(e, errno, "%s", en->name);
		if (fstatat(pfd, last, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return err_sys(e, errno, "%s", en->name);
		if (!S_ISDIR(st.st_mode)) {
			/* A file or link where the directory goes: replaced. */
			if (unlinkat(pfd, last, 0) < 0 || mkdirat(pfd, last, 0700) < 0)
				return err_sys(e, errno, "%s", en->name);
		}
	}
	if (x->nfix == x->capfix) {
		size_t cap = x->capfix ? x->capfix * 2 : 16;
		struct dirfix *nf = realloc(x->fix, cap * sizeof(*nf));

		if (!nf)
			return err_set(e, ENOMEM, "out of memory");
		x->fix = nf;
		x->capfix = cap;
	}
	x->fix[x->nfix].path = join_comps(c, n);
	if (!x->fix[x->nfix].path)
		return err_set(e, ENOMEM, "out of memory");
	x->fix[x->nfix].mode = en->mode & 01777;
	x->fix[x->nfix].mtime = en->mtime;
	x->fix[x->nfix].mtime_nsec = en->mtime_nsec;
	x->nfix++;
	return 0;
}

static int make_symlink(int pfd, const char *last, const struct tar_entry *en, space_err *e)
{
	struct timespec ts[2] = { { (time_t)en->mtime, en->mtime_nsec },
				  { (time_t)en->mtime, en->mtime_nsec } };
	char tmp[256];
	int tries;

	if (!*en->linkname)
		return err_set(e, EBADMSG, "%s: a symbolic link to nothing", en->name);
	for (tries = 0; tries < 100; tries++) {
		snprintf(tmp, sizeof(tmp), ".%.200s.spacectl-%06x", last, random_u32() & 0xffffff);
		if (symlinkat(en->linkname, pfd, tmp) == 0)
			break;
		if (errno != EEXIST)
			return err_sys(e, errno, "%s", en->name);
	}
	if (tries == 100)
		return err_sys(e, EEXIST, "%s", en->name);
	if (renameat(pfd, tmp, pfd, last) < 0) {
		int err = errno;

		unlinkat(pfd, tmp, 0);
		if (err == EISDIR || err == ENOTEMPTY || err == EEXIST)
			return err_set(e, EISDIR, "%s: a directory is there; not replaced by a "
				       "symbolic link", en->name);
		return err_sys(e, err, "%s", en->name);
	}
	utimensat(pfd, last, ts, AT_SYMLINK_NOFOLLOW); /* best effort */
	return 0;
}

static int x_begin(void *arg, const struct tar_entry *en, space_err *e)
{
	struct tar_extract *x = arg;
	char **c;
	size_t n;
	int pfd, rc = 0;

	x->entries++;
	if (map_name(x, en->name, &c, &n, e) < 0)
		return -1;
	if (n == 0) {
		free(c);
		return 0; /* the top itself, its contents going into the root */
	}
	if (en->type != TAR_DIR && en->type != TAR_FILE && en->type != TAR_SYMLINK) {
		if (en->type == TAR_HARDLINK)
			warnf(x, "skipping %s: hard links are not extracted", en->name);
		else
			warnf(x, "skipping %s: not a regular file, directory or symbolic link "
			      "(type '%c')", en->name, en->type);
		free_comps(c, n);
		return 0;
	}
	pfd = open_parent(x, c, n, true, en->name, e);
	if (pfd < 0) {
		free_comps(c, n);
		return -1;
	}
	if (en->type == TAR_DIR) {
		rc = make_dir(x, pfd, c, n, en, e);
	} else if (en->type == TAR_SYMLINK) {
		rc = make_symlink(pfd, c[n - 1], en, e);
	} else {
		rc = afile_open(&x->f, pfd, c[n - 1], en->mode, e);
		if (rc == 0) {
			x->f.mtime_set = true;
			x->f.mtime = en->mtime;
			x->f.mtime_nsec = en->mtime_nsec;
			x->writing = true;
			x->pfd = pfd;
			pfd = -1;
		}
	}
	if (pfd >= 0)
		close(pfd);
	free_comps(c, n);
	return rc;
}

static int x_data(void *arg, const char *p, size_t n, space_err *e)
{
	struct tar_extract *x = arg;

	if (!x->writing)
		return 0;
	x->file_bytes += n;
	return afile_write(&x->f, p, n, e);
}

static int x_end(void *arg, space_err *e)
{
	struct tar_extract *x = arg;
	int rc = 0;

	if (x->writing) {
		x->writing = false;
		rc = afile_commit(&x->f, e);
		close(x->pfd);
		x->pfd = -1;
	}
	return rc;
}

const struct tar_reader_ops tarx_ops = { x_begin, x_data, x_end };

int tarx_finish(struct tar_extract *x, space_err *e)
{
	size_t i;

	/* Deepest first (children come after their parents in an archive):
	 * a read-only directory gets its mode once nothing more goes in. */
	for (i = x->nfix; i-- > 0;) {
		struct dirfix *d = &x->fix[i];
		struct timespec ts[2] = { { (time_t)d->mtime, d->mtime_nsec },
					  { (time_t)d->mtime, d->mtime_nsec } };
		char **c;
		size_t n;
		int pfd, fd;

		if (split_name(d->path, &c, &n, e) < 0)
			return -1;
		pfd = open_parent(x, c, n, false, d->path, e);
		if (pfd < 0) {
			free_comps(c, n);
			return -1;
		}
		fd = openat(pfd, c[n - 1], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(pfd);
		free_comps(c, n);
		if (fd < 0)
			return err_sys(e, errno, "%s", d->path);
		if (fchmod(fd, d->mode) < 0 || futimens(fd, ts) < 0) {
			int err = errno;

			close(fd);
			return err_sys(e, err, "%s: setting its mode and time", d->path);
		}
		close(fd);
	}
	return 0;
}

unsigned long long tarx_file_bytes(const struct tar_extract *x)
{
	return x->file_bytes;
}

unsigned long long tarx_entries(const struct tar_extract *x)
{
	return x->entries;
}

void tarx_free(struct tar_extract *x)
{
	size_t i;

	if (!x)
		return;
	if (x->writing)
		afile_abort(&x->f);
	if (x->pfd >= 0)
		close(x->pfd);
	for (i = 0; i < x->nfix; i++)
		free(x->fix[i].path);
	free(x->fix);
	free(x->rename);
	free(x->top);
	free(x);
}
