/* fs_write.c -- `write PATH [MODE] [-p]`: stdin becomes the new content of PATH atomically.
 *
 * The content goes to a temporary file in PATH's directory, is fsync'ed, then renamed over
 * PATH, so a reader sees the old file or the new one, never a part.  The temporary file must
 * not outlive a failure, whatever ends the operation:
 *   - preferably it is an O_TMPFILE (no name at all) while stdin is copied: if the channel is
 *     killed, even with SIGKILL, the kernel frees it.  Once complete it is linked in as
 *     `.<name>.space-XXXXXX` and at once renamed over PATH;
 *   - where O_TMPFILE is not available (some filesystems) or cannot be linked later (no /proc
 *     and not root), it is created under that name from the start;
 * and while a named temporary file exists, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1/2 and
 * SIGALRM (those left at their default action) unlink it before the signal takes its course;
 * creating, renaming and unlinking it happen with those signals blocked, so the handler never
 * sees a half-updated name.  SIGPIPE is ignored (fsop_main): a broken stdout is an EPIPE error.
 * Only SIGKILL during the short named phase can leave the file behind.
 *
 * PATH is replaced as a directory entry: if it is a symlink, the symlink is replaced by the new
 * file (as `sed -i` does); its target is only consulted, through stat, for the default mode,
 * the owner to keep, and to refuse a directory (EISDIR). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "fs.h"

#define TMP_SUFFIX ".space-XXXXXX"

bool fs_write_force_named;

static const int cleanup_sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM };

/* The named temporary file, for the signal handler (armed only while it exists). */
static volatile sig_atomic_t tmp_armed;
static int tmp_dirfd = -1;
static char tmp_name[NAME_MAX + 1];

static void on_signal(int sig)
{
	int e = errno;

	if (tmp_armed)
		unlinkat(tmp_dirfd, tmp_name, 0);
	tmp_armed = 0;
	/* Take the signal's default action once this handler returns (it is blocked until then). */
	signal(sig, SIG_DFL);
	raise(sig);
	errno = e;
}

static void sigs_set(sigset_t *s)
{
	size_t i;

	sigemptyset(s);
	for (i = 0; i < sizeof(cleanup_sigs) / sizeof(cleanup_sigs[0]); i++)
		sigaddset(s, cleanup_sigs[i]);
}

static void install_handlers(void)
{
	struct sigaction sa, old;
	size_t i;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigs_set(&sa.sa_mask);
	for (i = 0; i < sizeof(cleanup_sigs) / sizeof(cleanup_sigs[0]); i++)
		if (sigaction(cleanup_sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL)
			sigaction(cleanup_sigs[i], &sa, NULL);
}

static void block(sigset_t *old)
{
	sigset_t s;

	sigs_set(&s);
	sigprocmask(SIG_BLOCK, &s, old);
}

static void unblock(const sigset_t *old)
{
	sigprocmask(SIG_SETMASK, old, NULL);
}

/* ".<base>.space-XXXXXX" with a random suffix; base is cut so the name fits NAME_MAX. */
static void tmp_make_name(const char *base, char *out)
{
	static const char abc[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	static unsigned counter;
	unsigned char rnd[6];
	size_t bl = strlen(base), max = NAME_MAX - 1 - strlen(TMP_SUFFIX), i, n;

	if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd)) {
		struct timespec ts;
		unsigned v;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		v = (unsigned)ts.tv_nsec ^ ((unsigned)getpid() << 16) ^ (counter++ * 2654435761u);
		for (i = 0; i < sizeof(rnd); i++, v = v * 1103515245u + 12345u)
			rnd[i] = (unsigned char)(v >> 16);
	}
	if (bl > max)
		bl = max;
	out[0] = '.';
	memcpy(out + 1, base, bl);
	n = 1 + bl;
	memcpy(out + n, TMP_SUFFIX, strlen(TMP_SUFFIX) + 1);
	n += strlen(TMP_SUFFIX) - 6;
	for (i = 0; i < 6; i++)
		out[n + i] = abc[rnd[i] % (sizeof(abc) - 1)];
}

/* Create the named temporary file (armed for the signal handler); fd or -1 with errno. */
static int tmp_create_named(int dirfd, const char *base)
{
	sigset_t old;
	int fd = -1, tries;

	block(&old);
	for (tries = 0; tries < 100; tries++) {
		tmp_make_name(base, tmp_name);
		fd = openat(dirfd, tmp_name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0 || errno != EEXIST)
			break;
	}
	if (fd >= 0) {
		tmp_dirfd = dirfd;
		tmp_armed = 1;
	}
	unblock(&old);
	return fd;
}

/* Remove the named temporary file, if there is one. */
static void tmp_remove(void)
{
	sigset_t old;
	int e = errno;

	block(&old);
	if (tmp_armed)
		unlinkat(tmp_dirfd, tmp_name, 0);
	tmp_armed = 0;
	unblock(&old);
	errno = e;
}

/* An unnamed O_TMPFILE in dirfd that we will be able to link later, or -1. */
static int tmp_create_unnamed(int dirfd)
{
	char proc[64];
	struct stat st;
	int fd = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	if (fd < 0)
		return -1;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (stat(proc, &st) < 0 && geteuid() != 0) {
		/* Neither /proc nor CAP_DAC_READ_SEARCH (for AT_EMPTY_PATH): no way to link it. */
		close(fd);
		return -1;
	}
	return fd;
}

/* Give the unnamed file fd a temporary name in dirfd (armed); 0, or -1 with errno. */
static int tmp_link(int dirfd, int fd, const char *base)
{
	char proc[64];
	sigset_t old;
	int rc = -1, tries;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	block(&old);
	for (tries = 0; tries < 100; tries++) {
		tmp_make_name(base, tmp_name);
		rc = linkat(AT_FDCWD, proc, dirfd, tmp_name, AT_SYMLINK_FOLLOW);
		if (rc < 0 && errno != EEXIST)
			rc = linkat(fd, "", dirfd, tmp_name, AT_EMPTY_PATH);
		if (rc == 0 || errno != EEXIST)
			break;
	}
	if (rc == 0) {
		tmp_dirfd = dirfd;
		tmp_armed = 1;
	}
	unblock(&old);
	return rc;
}

/* stdin into fd; the byte count, or -1 (*in_err tells whether stdin or fd failed). */
static int64_t copy_stdin(int fd, bool *in_err)
{
	_cleanup_free_ char *buf = malloc(FS_BUF_SIZE);
	int64_t total = 0;

	*in_err = false;
	if (!buf)
		return -1;
	for (;;) {
		ssize_t r = fs_read_some(0, buf, FS_BUF_SIZE);

		if (r < 0) {
			*in_err = true;
			return -1;
		}
		if (r == 0)
			return total;
		if (fs_write_all(fd, buf, (size_t)r) < 0)
			return -1;
		total += r;
	}
}

/* The finished file's metadata, then its data on disk. */
static int finish(int fd, mode_t mode, const struct stat *old, bool have_old)
{
	/* As root, replacing someone else's file keeps its owner (before fchmod: chown clears
	 * the set-id bits). */
	if (have_old && geteuid() == 0 && fchown(fd, old->st_uid, old->st_gid) < 0)
		return -1;
	if (fchmod(fd, mode) < 0)
		return -1;
	return fsync(fd);
}

/* Copy the unnamed file src into a new named temporary file (the fallback when it cannot be
 * linked); the named file's fd, or -1. */
static int copy_to_named(int dirfd, const char *base, int src)
{
	_cleanup_free_ char *buf = malloc(FS_BUF_SIZE);
	off_t off = 0;
	int fd;

	if (!buf)
		return -1;
	fd = tmp_create_named(dirfd, base);
	if (fd < 0)
		return -1;
	for (;;) {
		ssize_t r = pread(src, buf, FS_BUF_SIZE, off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 || (r > 0 && fs_write_all(fd, buf, (size_t)r) < 0)) {
			int e = errno;

			close(fd);
			tmp_remove();
			errno = e;
			return -1;
		}
		if (r == 0)
			return fd;
		off += r;
	}
}

int fs_op_write(struct fs_out *o, const struct fs_args *a, struct fs_fail *f)
{
	const char *path = a->pos[0];
	char sbuf[FS_PATH_MAX + 2];
	const char *dir, *base;
	_cleanup_close_ int dirfd = -1, fd = -1;
	bool explicit_mode = false, have_old = false, unnamed = false, in_err, created;
	mode_t mode = 0644;
	struct stat old;
	struct jbuf b;
	int64_t size;
	sigset_t oldmask;
	int rc;

	if (fs_check_path(f, path) < 0)
		return -1;
	if (a->npos > 1 && strcmp(a->pos[1], "-") != 0) {
		if (fs_parse_mode(a->pos[1], &mode) < 0)
			return fs_fail(f, EINVAL, path, "write: bad mode %.16s (octal, e.g. 0644)",
				       a->pos[1]);
		explicit_mode = true;
	}
	fs_split(path, sbuf, &dir, &base);
	/* A trailing slash names a directory, whatever is there. */
	if (!base[0] || strcmp(base, ".") == 0 || strcmp(base, "..") == 0 ||
	    path[strlen(path) - 1] == '/')
		return fs_fail(f, EISDIR, path, "write %s: is a directory", path);
	if (a->p && fs_mkdir_p(f, dir, 0755, &created) < 0)
		return -1;
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return fs_failsys(f, errno, path, "write %s: open %s", path, dir);
	if (fstatat(dirfd, base, &old, 0) == 0) {
		if (S_ISDIR(old.st_mode))
			return fs_fail(f, EISDIR, path, "write %s: is a directory", path);
		have_old = S_ISREG(old.st_mode);
	}
	if (!explicit_mode && have_old)
		mode = old.st_mode & 07777;

	install_handlers();
	fd = fs_write_force_named ? -1 : tmp_create_unnamed(dirfd);
	unnamed = fd >= 0;
	if (fd < 0)
		fd = tmp_create_named(dirfd, base);
	if (fd < 0)
		return fs_failsys(f, errno, path, "write %s: create a temporary file in %s", path,
				  dir);
	size = copy_stdin(fd, &in_err);
	if (size < 0) {
		int e = errno;

		tmp_remove();
		return fs_failsys(f, e, path, "write %s: %s", path,
				  in_err ? "read stdin" : "write the temporary file");
	}
	if (finish(fd, mode, &old, have_old) < 0) {
		int e = errno;

		tmp_remove();
		return fs_failsys(f, e, path, "write %s: finish the temporary file", path);
	}
	if (unnamed && tmp_link(dirfd, fd, base) < 0) {
		int nfd = copy_to_named(dirfd, base, fd);

		if (nfd < 0 || finish(nfd, mode, &old, have_old) < 0) {
			int e = errno;

			if (nfd >= 0)
				close(nfd);
			tmp_remove();
			return fs_failsys(f, e, path, "write %s: name the temporary file", path);
		}
		close(fd);
		fd = nfd;
	}
	block(&oldmask);
	rc = renameat(dirfd, tmp_name, dirfd, base);
	if (rc == 0)
		tmp_armed = 0;
	unblock(&oldmask);
	if (rc < 0) {
		int e = errno;

		tmp_remove();
		return fs_failsys(f, e, path, "write %s: rename", path);
	}
	fsync(dirfd); /* the rename itself on disk (best effort: some filesystems refuse) */

	jb_init(&b);
	jb_begin(&b);
	jb_kcstr(&b, "path", path);
	jb_ku64(&b, "size", (uint64_t)size);
	jb_end(&b);
	rc = fs_header(o, &b, f, path);
	jb_free(&b);
	return rc;
}
