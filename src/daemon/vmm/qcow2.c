/* qcow2.c -- the backing file named in a qcow2 header, and the chain of layers below a disk */
#include "qcow2.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"

#define QCOW2_MAGIC 0x514649fbu

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t be64(const unsigned char *p)
{
	return (uint64_t)be32(p) << 32 | be32(p + 4);
}

int qcow2_backing_file(const unsigned char *hdr, size_t len, char *out, size_t outlen)
{
	uint64_t off;
	uint32_t size;

	out[0] = '\0';
	if (len < 20 || be32(hdr) != QCOW2_MAGIC)
		return -1;
	off = be64(hdr + 8);
	size = be32(hdr + 16);
	if (off == 0 || size == 0)
		return 0; /* no backing file */
	if (size >= outlen || off > len || size > len - off)
		return -1;
	memcpy(out, hdr + off, size);
	out[size] = '\0';
	return memchr(out, '\0', size) ? -1 : 0;
}

static int record_path(const char *layer, char out[PATH_MAX])
{
	if (snprintf(out, PATH_MAX, "%s" QCOW2_BACKING_SUFFIX, layer) >= PATH_MAX) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

int qcow2_backing_record(const char *layer, const char *backing, space_err *err)
{
	char path[PATH_MAX], tmp[PATH_MAX + 4];
	size_t n = strlen(backing);

	if (record_path(layer, path) < 0 || n == 0 || n >= PATH_MAX || backing[0] != '/' || strchr(backing, '\n'))
		return err_set(err, EINVAL, "backing record of %s: bad path", layer);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return err_sys(err, errno, "create %s", tmp);
	if (write(fd, backing, n) != (ssize_t)n || write(fd, "\n", 1) != 1) {
		int e = errno ? errno : EIO;
		unlink(tmp);
		return err_sys(err, e, "write %s", tmp);
	}
	if (rename(tmp, path) < 0) {
		int e = errno;
		unlink(tmp);
		return err_sys(err, e, "rename %s", tmp);
	}
	return 0;
}

int qcow2_backing_recorded(const char *layer, char out[PATH_MAX])
{
	char path[PATH_MAX];

	out[0] = '\0';
	if (record_path(layer, path) < 0)
		return -1;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	ssize_t n = read(fd, out, PATH_MAX - 1);
	if (n <= 1 || out[n - 1] != '\n' || out[0] != '/') {
		out[0] = '\0';
		errno = EINVAL;
		return -1;
	}
	out[n - 1] = '\0';
	if (memchr(out, '\0', (size_t)n - 1) || strchr(out, '\n')) {
		out[0] = '\0';
		errno = EINVAL;
		return -1;
	}
	return 1;
}

int qcow2_backing_copy_record(const char *from, const char *to, space_err *err)
{
	char backing[PATH_MAX];
	int r = qcow2_backing_recorded(from, backing);

	if (r < 0)
		return err_sys(err, errno, "backing record of %s", from);
	return r == 0 ? 0 : qcow2_backing_record(to, backing, err);
}

void qcow2_backing_forget(const char *layer)
{
	char path[PATH_MAX];

	if (record_path(layer, path) == 0)
		unlink(path);
}

int qcow2_backing_of(const char *path, char out[PATH_MAX])
{
	unsigned char hdr[4096];
	char name[PATH_MAX];
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	out[0] = '\0';
	if (fd < 0)
		/* A chain may end at a file that is gone (a template image); a
		 * layer we cannot open for another reason is unknown. */
		return errno == ENOENT ? 0 : -1;
	n = pread(fd, hdr, sizeof(hdr), 0);
	if (n < 0)
		return -1;
	if (qcow2_backing_file(hdr, (size_t)n, name, sizeof(name)) < 0 || !name[0])
		return 0; /* not a qcow2: the raw template image ends the chain */
	if (name[0] == '/') {
		memcpy(out, name, sizeof(name));
		return 0;
	}
	const char *slash = strrchr(path, '/');
	int dirlen = slash ? (int)(slash - path) : 1;
	if (snprintf(out, PATH_MAX, "%.*s/%s", dirlen, slash ? path : ".", name) >= PATH_MAX) {
		out[0] = '\0';
		return -1;
	}
	return 0;
}
