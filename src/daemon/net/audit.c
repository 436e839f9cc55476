/* audit.c -- reading a gateway's audit log (JSON lines it writes, docs/design/egress.md) for the
 * API, without trusting it: the gateway runs as its own uid and may have been taken over */
#include "net.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"

/* The gateway rotates at 4 MiB; what is read of one file is bounded a little above that. */
#define AUDIT_READ_MAX (5u << 20)

struct ring {
	json_t **v;
	size_t cap, n, head; /* head: the oldest */
};

static void ring_push(struct ring *r, json_t *j)
{
	if (r->n < r->cap) {
		r->v[(r->head + r->n++) % r->cap] = j;
		return;
	}
	json_decref(r->v[r->head]);
	r->v[r->head] = j;
	r->head = (r->head + 1) % r->cap;
}

static void parse_lines(const char *buf, size_t len, bool partial_first, struct ring *r)
{
	size_t i = 0;

	if (partial_first) {
		const char *nl = memchr(buf, '\n', len);
		i = nl ? (size_t)(nl - buf) + 1 : len;
	}
	while (i < len) {
		const char *line = buf + i, *nl = memchr(line, '\n', len - i);
		size_t n = nl ? (size_t)(nl - line) : len - i;

		i += n + 1;
		if (!nl || n == 0 || n > NET_AUDIT_LINE_MAX)
			continue; /* a line still being written, an empty one, or an oversized one */
		json_t *j = json_loadb(line, n, JSON_REJECT_DUPLICATES, NULL);
		if (json_is_object(j))
			ring_push(r, j);
		else
			json_decref(j);
	}
}

static int read_one(int dirfd, uid_t owner, const char *name, struct ring *r, space_err *err)
{
	struct stat st;
	_cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);

	if (fd < 0)
		/* ELOOP: a symlink planted there, not ours to follow. */
		return errno == ENOENT || errno == ELOOP ? 0 : err_sys(err, errno, "opening the audit log %s", name);
	if (fstat(fd, &st) < 0)
		return err_sys(err, errno, "audit log %s", name);
	if (!S_ISREG(st.st_mode) || st.st_uid != owner)
		return 0; /* not something the gateway may have us read */
	size_t len = st.st_size > (off_t)AUDIT_READ_MAX ? AUDIT_READ_MAX : (size_t)st.st_size;
	off_t from = st.st_size - (off_t)len;
	_cleanup_free_ char *buf = malloc(len + 1);
	if (!buf)
		return err_set(err, ENOMEM, "out of memory");
	size_t got = 0;
	while (got < len) {
		ssize_t n = pread(fd, buf + got, len - got, from + (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	parse_lines(buf, got, from > 0, r);
	return 0;
}

int net_audit_read(const char *dir, size_t limit, json_t **out, space_err *err)
{
	struct stat st;
	struct ring r = { .cap = limit ? limit : 1 };
	int rc = 0;

	*out = json_array();
	if (!*out)
		return err_set(err, ENOMEM, "out of memory");
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (dfd < 0)
		return errno == ENOENT ? 0 : err_sys(err, errno, "opening %s", dir);
	if (fstat(dfd, &st) < 0)
		return err_sys(err, errno, "stat %s", dir);
	if (!(r.v = calloc(r.cap, sizeof(*r.v))))
		return err_set(err, ENOMEM, "out of memory");
	if (read_one(dfd, st.st_uid, "audit.log.1", &r, err) < 0 || read_one(dfd, st.st_uid, "audit.log", &r, err) < 0)
		rc = -1;
	for (size_t i = 0; i < r.n; i++) {
		json_t *j = r.v[(r.head + i) % r.cap];
		if (rc == 0 && limit)
			json_array_append(*out, j);
		json_decref(j);
	}
	free(r.v);
	if (rc < 0) {
		json_decref(*out);
		*out = NULL;
	}
	return rc;
}
