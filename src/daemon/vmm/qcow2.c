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
