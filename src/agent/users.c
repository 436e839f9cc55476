/* users.c -- /etc/passwd and /etc/group parsing for the agent (no NSS in a static binary).
 * The files live in the guest, which untrusted code controls: every field is bounds-checked
 * and a file is read with a size limit (it may even be a FIFO: this runs in the forked child,
 * so a hang there stalls only that command). */
#include "users.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"

#define USERS_FILE_MAX (4 << 20)
#define MAX_FIELDS 8

/* Split one line (not NUL-terminated) at ':' into at most max fields. */
static int split_fields(const char *line, size_t len, const char **f, size_t *flen, int max)
{
	int nf = 0;
	size_t start = 0, i;

	for (i = 0; i <= len; i++) {
		if (i == len || line[i] == ':') {
			if (nf == max)
				return -1;
			f[nf] = line + start;
			flen[nf] = i - start;
			nf++;
			start = i + 1;
		}
	}
	return nf;
}

static int parse_id(const char *s, size_t len, unsigned *out)
{
	unsigned long v = 0;
	size_t i;

	if (len == 0 || len > 10)
		return -1;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v > 0xfffffffeUL) /* (uid_t)-1 means "no change" to setuid */
		return -1;
	*out = (unsigned)v;
	return 0;
}

static int copy_field(char *dst, size_t cap, const char *s, size_t len)
{
	if (len >= cap || memchr(s, '\0', len))
		return -1;
	memcpy(dst, s, len);
	dst[len] = '\0';
	return 0;
}

static int field_eq(const char *s, size_t len, const char *name)
{
	return strlen(name) == len && memcmp(s, name, len) == 0;
}

int agent_passwd_find(const char *buf, size_t n, const char *name, uid_t uid,
		      struct agent_user *u)
{
	size_t pos = 0;

	while (pos < n) {
		const char *line = buf + pos, *nl = memchr(line, '\n', n - pos);
		size_t len = nl ? (size_t)(nl - line) : n - pos;
		const char *f[MAX_FIELDS];
		size_t fl[MAX_FIELDS];
		unsigned id, gid;

		pos += len + 1;
		if (len && line[len - 1] == '\r')
			len--;
		if (len == 0 || line[0] == '#')
			continue;
		if (split_fields(line, len, f, fl, MAX_FIELDS) != 7)
			continue;
		if (name && !field_eq(f[0], fl[0], name))
			continue;
		if (parse_id(f[2], fl[2], &id) || parse_id(f[3], fl[3], &gid))
			continue;
		if (!name && id != uid)
			continue;
		memset(u, 0, sizeof(*u));
		if (copy_field(u->name, sizeof(u->name), f[0], fl[0]) ||
		    copy_field(u->home, sizeof(u->home), f[5], fl[5]) ||
		    copy_field(u->shell, sizeof(u->shell), f[6], fl[6]))
			continue;
		u->uid = id;
		u->gid = gid;
		return 0;
	}
	return -1;
}

static void add_group(struct agent_user *u, gid_t g)
{
	int i;

	for (i = 0; i < u->ngroups; i++)
		if (u->groups[i] == g)
			return;
	if (u->ngroups < AGENT_USER_MAX_GROUPS)
		u->groups[u->ngroups++] = g;
}

static int member_of(const char *list, size_t len, const char *name)
{
	size_t start = 0, i;

	for (i = 0; i <= len; i++) {
		if (i == len || list[i] == ',') {
			if (field_eq(list + start, i - start, name))
				return 1;
			start = i + 1;
		}
	}
	return 0;
}

void agent_group_fill(const char *buf, size_t n, struct agent_user *u)
{
	size_t pos = 0;

	u->ngroups = 0;
	add_group(u, u->gid);
	if (!u->name[0])
		return;
	while (pos < n) {
		const char *line = buf + pos, *nl = memchr(line, '\n', n - pos);
		size_t len = nl ? (size_t)(nl - line) : n - pos;
		const char *f[MAX_FIELDS];
		size_t fl[MAX_FIELDS];
		unsigned gid;

		pos += len + 1;
		if (len && line[len - 1] == '\r')
			len--;
		if (len == 0 || line[0] == '#')
			continue;
		if (split_fields(line, len, f, fl, MAX_FIELDS) != 4)
			continue;
		if (parse_id(f[2], fl[2], &gid))
			continue;
		if (member_of(f[3], fl[3], u->name))
			add_group(u, gid);
	}
}

/* Read a whole (small) file; NULL with errno on failure.  A missing file reads as empty. */
static char *read_small(const char *path, size_t *len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t cap = 4096, n = 0;
	char *buf;

	*len = 0;
	if (fd < 0)
		return errno == ENOENT ? calloc(1, 1) : NULL;
	buf = malloc(cap);
	if (!buf)
		return NULL;
	for (;;) {
		ssize_t r;

		if (n == cap) {
			char *nb;

			if (cap >= USERS_FILE_MAX) {
				free(buf);
				errno = EFBIG;
				return NULL;
			}
			nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				return NULL;
			}
			buf = nb;
			cap *= 2;
		}
		r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			free(buf);
			errno = e;
			return NULL;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	*len = n;
	return buf;
}

int agent_user_resolve(const char *passwd_path, const char *group_path, const char *user,
		       uid_t uid, gid_t gid, struct agent_user *u, char *msg, size_t msglen)
{
	_cleanup_free_ char *pw = NULL, *gr = NULL;
	size_t pwlen, grlen;
	unsigned num;

	pw = read_small(passwd_path, &pwlen);
	if (!pw) {
		int e = errno;
		snprintf(msg, msglen, "read %s: %s", passwd_path, strerror(e));
		errno = e;
		return -1;
	}
	if (user && user[0]) {
		if (agent_passwd_find(pw, pwlen, user, 0, u) < 0) {
			/* A numeric user without an entry is taken as a uid (as container runtimes
			 * do), with the given gid. */
			if (parse_id(user, strlen(user), &num) < 0) {
				snprintf(msg, msglen, "user %.64s: no such user in %s", user,
					 passwd_path);
				errno = ENOENT;
				return -1;
			}
			memset(u, 0, sizeof(*u));
			u->uid = num;
			u->gid = gid;
			strcpy(u->home, "/");
		}
	} else if (agent_passwd_find(pw, pwlen, NULL, uid, u) == 0) {
		u->gid = gid; /* explicit uid/gid: the gid given wins over the entry's */
	} else {
		memset(u, 0, sizeof(*u));
		u->uid = uid;
		u->gid = gid;
		strcpy(u->home, "/");
	}
	gr = read_small(group_path, &grlen);
	agent_group_fill(gr ? gr : "", gr ? grlen : 0, u);
	return 0;
}
