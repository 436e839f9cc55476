/* console.c -- serial console capture: socket -> console.log, bounded in size */
#include "console.h"

#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "proc.h"

/* One read callback handles at most this much, so a guest flooding its
 * console cannot monopolise the daemon's loop. */
#define CONSOLE_CHUNK (64u * 1024)
#define CONSOLE_READS_PER_EVENT 4

static const char trunc_marker[] = "[space: console log truncated; older output dropped]\n";

struct console {
	struct event *ev;
	int fd;     /* socket, -1 once closed */
	int logfd;  /* O_RDWR | O_APPEND */
	size_t size;
	size_t max, keep;
	char *log_path;
};

static int open_log(const char *path, int extra)
{
	return open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | extra, 0600);
}

/* Rewrites the log as marker + its last `keep` bytes, starting at a line
 * boundary, via rename() so that a reader never sees a half-written file. */
static void trim(struct console *c)
{
	char tmp[PATH_MAX];
	size_t keep = c->keep < c->size ? c->keep : c->size;
	_cleanup_free_ char *buf = malloc(keep + 1);
	ssize_t n = -1;

	if (buf)
		n = pread(c->logfd, buf, keep, (off_t)(c->size - keep));
	if (n < 0 || snprintf(tmp, sizeof(tmp), "%s.tmp", c->log_path) >= (int)sizeof(tmp))
		goto fallback;
	char *start = buf;
	char *nl = memchr(buf, '\n', (size_t)n);
	if (nl && nl + 1 < buf + n)
		start = nl + 1;
	size_t len = (size_t)(buf + n - start);

	int fd = open_log(tmp, O_TRUNC);
	if (fd < 0)
		goto fallback;
	if (write(fd, trunc_marker, sizeof(trunc_marker) - 1) != (ssize_t)sizeof(trunc_marker) - 1 ||
	    write(fd, start, len) != (ssize_t)len || rename(tmp, c->log_path) < 0) {
		close(fd);
		unlink(tmp);
		goto fallback;
	}
	close(c->logfd);
	c->logfd = fd;
	c->size = sizeof(trunc_marker) - 1 + len;
	return;

fallback:
	/* Whatever failed, the bound holds: start over empty. */
	log_warn("console %s: trimming failed (%s); truncating", c->log_path, strerror(errno));
	if (ftruncate(c->logfd, 0) == 0)
		c->size = 0;
}

static void append(struct console *c, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(c->logfd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			log_warn("console %s: write: %s", c->log_path, strerror(errno));
			return;
		}
		p += w;
		n -= (size_t)w;
		c->size += (size_t)w;
	}
	if (c->size > c->max)
		trim(c);
}

static void close_sock(struct console *c)
{
	if (c->ev) {
		event_free(c->ev);
		c->ev = NULL;
	}
	if (c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
}

/* Reads up to `rounds` chunks; closes the socket on EOF or error. */
static void pump(struct console *c, int rounds)
{
	char buf[CONSOLE_CHUNK];

	for (int i = 0; c->fd >= 0 && (rounds < 0 || i < rounds); i++) {
		ssize_t n = read(c->fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			if (n < 0)
				log_debug("console %s: read: %s", c->log_path, strerror(errno));
			close_sock(c);
			return;
		}
		append(c, buf, (size_t)n);
	}
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	pump(arg, CONSOLE_READS_PER_EVENT);
}

void console_drain(struct console *c)
{
	/* Bounded: a socket holds a few hundred KiB at most. */
	if (c)
		pump(c, 64);
}

struct console *console_new(struct event_base *base, int fd, const char *log_path, size_t max,
			    size_t keep, space_err *err)
{
	_cleanup_close_ int sfd = fd;
	struct console *c = calloc(1, sizeof(*c));
	struct stat st;

	if (!c || !(c->log_path = strdup(log_path))) {
		free(c);
		err_set(err, ENOMEM, "console: out of memory");
		return NULL;
	}
	c->fd = -1;
	c->max = max;
	c->keep = keep < max ? keep : max / 2;
	c->logfd = open_log(log_path, 0);
	if (c->logfd < 0 || fstat(c->logfd, &st) < 0) {
		err_sys(err, errno, "open %s", log_path);
		goto fail;
	}
	c->size = (size_t)st.st_size;
	if (fcntl(sfd, F_SETFL, fcntl(sfd, F_GETFL) | O_NONBLOCK) < 0) {
		err_sys(err, errno, "console socket");
		goto fail;
	}
	c->ev = event_new(base, sfd, EV_READ | EV_PERSIST, on_read, c);
	if (!c->ev || event_add(c->ev, NULL) < 0) {
		err_set(err, ENOMEM, "console: event_new failed");
		goto fail;
	}
	c->fd = steal_fd(&sfd);
	if (c->size > c->max)
		trim(c);
	return c;

fail:
	console_free(c);
	return NULL;
}

struct console *console_open(struct event_base *base, const char *sock_path, const char *log_path,
			     space_err *err)
{
	int fd;

	if (unix_connect(sock_path, &fd, err) < 0)
		return NULL;
	return console_new(base, fd, log_path, CONSOLE_MAX_BYTES, CONSOLE_KEEP_BYTES, err);
}

void console_free(struct console *c)
{
	if (!c)
		return;
	close_sock(c);
	if (c->logfd >= 0)
		close(c->logfd);
	free(c->log_path);
	free(c);
}
