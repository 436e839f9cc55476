/* fs_names.c -- owner and group names for Entry objects and tar headers, from the guest's
 * /etc/passwd and /etc/group (no NSS: the agent is static).  Each file is read once per
 * operation, at most FS_NAMES_FILE_MAX bytes, and only if it is a regular file (a FIFO there
 * must not hang a listing); lookups go through a small cache, since a listing asks about the
 * same few ids over and over. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../users.h"
#include "cleanup.h"
#include "fs.h"

#define FS_NAMES_FILE_MAX (4 << 20)
#define FS_NAMES_CACHE 32

struct name_file {
	const char *path;
	char *text; /* NULL when empty */
	size_t len;
	bool loaded;
};

struct name_cache {
	unsigned id[FS_NAMES_CACHE];
	char name[FS_NAMES_CACHE][64]; /* "" = no entry: the number is shown */
	int n, next;
};

static struct name_file passwd = { "/etc/passwd", NULL, 0, false },
			group = { "/etc/group", NULL, 0, false };
static struct name_cache users_c, groups_c;

void fs_names_use(const char *passwd_path, const char *group_path)
{
	free(passwd.text);
	free(group.text);
	passwd = (struct name_file){ passwd_path ? passwd_path : "/etc/passwd", NULL, 0, false };
	group = (struct name_file){ group_path ? group_path : "/etc/group", NULL, 0, false };
	memset(&users_c, 0, sizeof(users_c));
	memset(&groups_c, 0, sizeof(groups_c));
}

/* Load the file once; a missing, unreadable, odd or oversized file reads as empty. */
static void load(struct name_file *nf)
{
	_cleanup_close_ int fd = -1;
	struct stat st;
	ssize_t r;

	if (nf->loaded)
		return;
	nf->loaded = true;
	nf->len = 0;
	fd = open(nf->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 0 &&
	    st.st_size <= FS_NAMES_FILE_MAX) {
		nf->text = malloc((size_t)st.st_size + 1);
		if (nf->text) {
			r = fs_read_full(fd, nf->text, (size_t)st.st_size);
			nf->len = r > 0 ? (size_t)r : 0;
		}
	}
}

static const char *cached(struct name_cache *c, unsigned id)
{
	int i;

	for (i = 0; i < c->n; i++)
		if (c->id[i] == id)
			return c->name[i];
	return NULL;
}

static const char *remember(struct name_cache *c, unsigned id, const char *name)
{
	int i = c->n < FS_NAMES_CACHE ? c->n++ : c->next;

	c->next = (i + 1) % FS_NAMES_CACHE;
	c->id[i] = id;
	snprintf(c->name[i], sizeof(c->name[i]), "%s", name);
	return c->name[i];
}

/* The name of the group with gid in /etc/group text ("name:x:gid:members"), or NULL. */
static bool group_find(const char *buf, size_t n, unsigned gid, char out[64])
{
	size_t pos = 0;

	while (pos < n) {
		const char *line = buf + pos, *nl = memchr(line, '\n', n - pos);
		size_t len = nl ? (size_t)(nl - line) : n - pos;
		const char *c1, *c2, *c3;
		unsigned long v = 0;
		const char *p;

		pos += len + 1;
		if (len == 0 || line[0] == '#')
			continue;
		c1 = memchr(line, ':', len);
		c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
		c3 = c2 ? memchr(c2 + 1, ':', len - (size_t)(c2 + 1 - line)) : NULL;
		if (!c3 || c3 == c2 + 1 || c3 - c2 - 1 > 10 || c1 == line || c1 - line >= 64)
			continue;
		for (p = c2 + 1; p < c3; p++) {
			if (*p < '0' || *p > '9')
				break;
			v = v * 10 + (unsigned long)(*p - '0');
		}
		if (p != c3 || v != gid || memchr(line, '\0', (size_t)(c1 - line)))
			continue;
		memcpy(out, line, (size_t)(c1 - line));
		out[c1 - line] = '\0';
		return true;
	}
	return false;
}

const char *fs_owner_name(uid_t uid, char buf[24])
{
	const char *c = cached(&users_c, (unsigned)uid);
	struct agent_user u;

	if (!c) {
		load(&passwd);
		if (agent_passwd_find(passwd.text, passwd.len, NULL, uid, &u) < 0)
			u.name[0] = '\0';
		c = remember(&users_c, (unsigned)uid, u.name);
	}
	if (c[0])
		return c;
	snprintf(buf, 24, "%u", (unsigned)uid);
	return buf;
}

const char *fs_group_name(gid_t gid, char buf[24])
{
	const char *c = cached(&groups_c, (unsigned)gid);
	char name[64];

	if (!c) {
		load(&group);
		if (!group_find(group.text, group.len, (unsigned)gid, name))
			name[0] = '\0';
		c = remember(&groups_c, (unsigned)gid, name);
	}
	if (c[0])
		return c;
	snprintf(buf, 24, "%u", (unsigned)gid);
	return buf;
}
