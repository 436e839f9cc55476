/* fs_io.c -- full reads and writes on the operation's pipes and files, and the stdout buffer.
 * The fds are blocking; EINTR is retried, and EAGAIN (a non-blocking fd handed to us after
 * all) waits in poll instead of spinning or failing. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs.h"

static int wait_fd(int fd, short ev)
{
	struct pollfd p = { .fd = fd, .events = ev };

	while (poll(&p, 1, -1) < 0)
		if (errno != EINTR)
			return -1;
	return 0;
}

int fs_write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = write(fd, c, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN && wait_fd(fd, POLLOUT) == 0)
				continue;
			return -1;
		}
		if (w == 0) {
			errno = EIO;
			return -1;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

ssize_t fs_read_some(int fd, void *p, size_t n)
{
	for (;;) {
		ssize_t r = read(fd, p, n);

		if (r >= 0)
			return r;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN && wait_fd(fd, POLLIN) == 0)
			continue;
		return -1;
	}
}

ssize_t fs_read_full(int fd, void *p, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = fs_read_some(fd, (char *)p + got, n - got);

		if (r < 0)
			return -1;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

int fs_out_init(struct fs_out *o, int fd, size_t cap)
{
	o->fd = fd;
	o->len = 0;
	o->total = 0;
	o->cap = cap;
	o->buf = malloc(cap);
	return o->buf ? 0 : -1;
}

void fs_out_free(struct fs_out *o)
{
	free(o->buf);
	o->buf = NULL;
	o->len = o->cap = 0;
}

int fs_out_flush(struct fs_out *o)
{
	if (o->len && fs_write_all(o->fd, o->buf, o->len) < 0)
		return -1;
	o->len = 0;
	return 0;
}

int fs_out_put(struct fs_out *o, const void *p, size_t n)
{
	const char *c = p;

	o->total += n;
	while (n) {
		size_t k;

		if (o->len == o->cap && fs_out_flush(o) < 0)
			return -1;
		/* Big writes on an empty buffer go straight out (no copy). */
		if (o->len == 0 && n >= o->cap)
			return fs_write_all(o->fd, c, n);
		k = o->cap - o->len < n ? o->cap - o->len : n;
		memcpy(o->buf + o->len, c, k);
		o->len += k;
		c += k;
		n -= k;
	}
	return 0;
}

int fs_out_zero(struct fs_out *o, size_t n)
{
	static const char zeros[512];

	while (n) {
		size_t k = n < sizeof(zeros) ? n : sizeof(zeros);

		if (fs_out_put(o, zeros, k) < 0)
			return -1;
		n -= k;
	}
	return 0;
}

char *fs_out_space(struct fs_out *o, size_t *room)
{
	if (o->len == o->cap && fs_out_flush(o) < 0)
		return NULL;
	*room = o->cap - o->len;
	return o->buf + o->len;
}

void fs_out_commit(struct fs_out *o, size_t n)
{
	o->len += n;
	o->total += n;
}
