/* users.h -- /etc/passwd and /etc/group lookup without NSS (the agent is static) */
#ifndef SPACE_AGENT_USERS_H
#define SPACE_AGENT_USERS_H

#include <stddef.h>
#include <sys/types.h>

#define AGENT_USER_MAX_GROUPS 64

struct agent_user {
	char name[64];
	uid_t uid;
	gid_t gid;
	char home[256];
	char shell[256];
	gid_t groups[AGENT_USER_MAX_GROUPS]; /* primary gid first */
	int ngroups;
};

/* Find a passwd entry in buf (the file's text) by name, or by uid when name is NULL.
 * Returns 0 and fills u (not groups), -1 if there is no such well-formed entry.
 * Malformed lines (wrong field count, bad numbers, over-long fields) are skipped. */
int agent_passwd_find(const char *buf, size_t n, const char *name, uid_t uid,
		      struct agent_user *u);
/* Fill u->groups from an /etc/group text: the primary gid, then every group that lists
 * u->name as a member (deduplicated, at most AGENT_USER_MAX_GROUPS). */
void agent_group_fill(const char *buf, size_t n, struct agent_user *u);

/* Resolve `user` (a name, or a decimal uid not in passwd) using the files at the given paths.
 * When user is empty, look up `uid` for home/name (a uid without an entry still works:
 * home "/", name empty).  Returns 0, or -1 with errno (ENOENT: no such user) and a message. */
int agent_user_resolve(const char *passwd_path, const char *group_path, const char *user,
		       uid_t uid, gid_t gid, struct agent_user *u, char *msg, size_t msglen);

#endif
