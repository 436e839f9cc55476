/* memimg.c -- sealed memfd copies of snapshot memory images, cached per image.
 *
 * QEMU 7.2's memory-backend-file opens its mem-path O_RDWR even with
 * share=off, so a jailed QEMU given the image file itself would need write
 * access, and a compromised one could then write() into the image every
 * clone of the snapshot maps. A memfd with F_SEAL_WRITE opens O_RDWR (its
 * inode mode is 0777) but refuses write(2), fallocate hole punching and
 * shared writable mappings (EPERM); the private copy-on-write mapping
 * QEMU makes works, and pages no clone writes stay shared among all
 * clones, as with the file. The copy costs the image's allocated size once
 * per snapshot (the tmpfs file and the memfd hold the same pages).
 *
 * The cache is a process-wide list: it is a property of the host's
 * images, not of one VM, and vm_launch has no context of its own. */
#include "memimg.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "proc.h"

#define MEMIMG_SEALS (F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL)

struct memimg {
	char *path;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	int fd;
	struct memimg *next;
};

static struct memimg *cache;

static void entry_free(struct memimg *m)
{
	if (m->fd >= 0)
		close(m->fd);
	free(m->path);
	free(m);
}

/* Copies the allocated ranges of in into out (holes stay holes). */
static int copy_sparse(int in, int out, off_t size, space_err *err)
{
	off_t data = 0;

	while (data < size) {
		data = lseek(in, data, SEEK_DATA);
		if (data < 0)
			return errno == ENXIO ? 0 : err_sys(err, errno, "SEEK_DATA");
		off_t hole = lseek(in, data, SEEK_HOLE);
		if (hole < 0)
			return err_sys(err, errno, "SEEK_HOLE");
		if (lseek(out, data, SEEK_SET) < 0)
			return err_sys(err, errno, "lseek");
		off_t off = data;
		while (off < hole) {
			ssize_t n = sendfile(out, in, &off, (size_t)(hole - off));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return err_sys(err, n < 0 ? errno : EIO, "copying");
		}
		data = hole;
	}
	return 0;
}

static int make_sealed(const char *path, const struct stat *st, space_err *err)
{
	_cleanup_close_ int in = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int fd = -1;

	if (in < 0)
		return err_sys(err, errno == ENOENT ? EIO : errno, "memory image %s", path);
	fd = memfd_create("space-mem", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return err_sys(err, errno, "memfd_create");
	if (ftruncate(fd, st->st_size) < 0)
		return err_sys(err, errno, "sizing the sealed copy of %s", path);
	if (copy_sparse(in, fd, st->st_size, err) < 0)
		return err_wrap(err, "sealed copy of %s", path);
	if (fcntl(fd, F_ADD_SEALS, MEMIMG_SEALS) < 0)
		return err_sys(err, errno, "sealing the copy of %s", path);
	return steal_fd(&fd);
}

static bool same_file(const struct memimg *m, const struct stat *st)
{
	return m->dev == st->st_dev && m->ino == st->st_ino && m->size == st->st_size &&
	       m->mtime.tv_sec == st->st_mtim.tv_sec && m->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

int memimg_fd(const char *path, space_err *err)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return err_sys(err, errno == ENOENT ? EIO : errno, "memory image %s", path);
	if (!S_ISREG(st.st_mode))
		return err_set(err, EINVAL, "memory image %s is not a file", path);
	for (struct memimg *m = cache; m; m = m->next)
		if (strcmp(m->path, path) == 0 && same_file(m, &st))
			return m->fd;
	memimg_forget(path);
	struct memimg *m = calloc(1, sizeof(*m));
	if (!m || !(m->path = strdup(path))) {
		free(m);
		return err_set(err, ENOMEM, "out of memory");
	}
	int64_t t0 = mono_ms();
	m->fd = make_sealed(path, &st, err);
	if (m->fd < 0) {
		entry_free(m);
		return -1;
	}
	log_info("memory image %s: sealed copy made in %lld ms (%lld MiB allocated)", path,
		 (long long)(mono_ms() - t0),
		 (long long)(st.st_blocks * 512 >> 20));
	m->dev = st.st_dev;
	m->ino = st.st_ino;
	m->size = st.st_size;
	m->mtime = st.st_mtim;
	m->next = cache;
	cache = m;
	return m->fd;
}

void memimg_forget(const char *path)
{
	for (struct memimg **pp = &cache; *pp;) {
		struct memimg *m = *pp;

		if (strcmp(m->path, path) == 0) {
			*pp = m->next;
			entry_free(m);
		} else {
			pp = &m->next;
		}
	}
}

void memimg_forget_all(void)
{
	while (cache) {
		struct memimg *m = cache;

		cache = m->next;
		entry_free(m);
	}
}

int64_t memimg_cached_bytes(void)
{
	int64_t total = 0;
	struct stat st;

	for (struct memimg *m = cache; m; m = m->next)
		if (fstat(m->fd, &st) == 0)
			total += (int64_t)st.st_blocks * 512;
	return total;
}
