/* test_agent_users.c -- the agent's own /etc/passwd and /etc/group parser */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/users.h"
#include "harness.h"

static const char passwd[] =
	"# comment\n"
	"root:x:0:0:root:/root:/bin/bash\n"
	"\n"
	"broken line without colons\n"
	"toofew:x:1:1:/home\n"
	"badnum:x:12a:1::/home/badnum:/bin/sh\n"
	"neg:x:-1:1::/:/bin/sh\n"
	"huge:x:99999999999:1::/:/bin/sh\n"
	"alice:x:1000:1000:Alice,,,:/home/alice:/bin/zsh\r\n"
	"bob:x:1001:100::/home/bob:/bin/sh"; /* no final newline */

static const char group[] =
	"root:x:0:\n"
	"wheel:x:10:alice,bob\n"
	"docker:x:999:bob,alice\n"
	"alicegrp:x:1000:\n"
	"bad:x:zz:alice\n"
	"dup:x:10:alice\n"
	"short:x:11\n"
	"audio:x:29:alicex,xalice\n";

static void find_by_name(void)
{
	struct agent_user u;

	EXPECT_EQ(agent_passwd_find(passwd, strlen(passwd), "alice", 0, &u), 0);
	EXPECT_EQ(u.uid, 1000);
	EXPECT_EQ(u.gid, 1000);
	EXPECT(strcmp(u.home, "/home/alice") == 0);
	EXPECT(strcmp(u.shell, "/bin/zsh") == 0); /* \r stripped */
	EXPECT_EQ(agent_passwd_find(passwd, strlen(passwd), "bob", 0, &u), 0);
	EXPECT(strcmp(u.shell, "/bin/sh") == 0);
	EXPECT_EQ(agent_passwd_find(passwd, strlen(passwd), "root", 0, &u), 0);
	EXPECT_EQ(u.uid, 0);
	EXPECT_EQ(agent_passwd_find(passwd, strlen(passwd), "ali", 0, &u), -1);
	EXPECT_EQ(agent_passwd_find(passwd, strlen(passwd), "alicex", 0, &u), -1);
	EXPECT_EQ(agent_passwd_find(passwd, strlen(passwd), "", 0, &u), -1);
}

static void malformed_skipped(void)
{
	struct agent_user u;

	EXPECT_EQ(agent_passwd_find(passwd, strlen(passwd), "toofew", 0, &u), -1);
	EXPECT_EQ(agent_passwd_find(passwd, strlen(passwd), "badnum", 0, &u), -1);
	EXPECT_EQ(agent_passwd_find(passwd, strlen(passwd), "neg", 0, &u), -1);
	EXPECT_EQ(agent_passwd_find(passwd, strlen(passwd), "huge", 0, &u), -1);
	EXPECT_EQ(agent_passwd_find(passwd, strlen(passwd), "broken line without colons", 0, &u),
		  -1);
}

static void find_by_uid(void)
{
	struct agent_user u;

	EXPECT_EQ(agent_passwd_find(passwd, strlen(passwd), NULL, 1001, &u), 0);
	EXPECT(strcmp(u.name, "bob") == 0);
	EXPECT_EQ(agent_passwd_find(passwd, strlen(passwd), NULL, 4242, &u), -1);
}

static void overlong_fields(void)
{
	char buf[2048];
	struct agent_user u;

	/* A home longer than the struct holds: the entry is skipped, not truncated. */
	snprintf(buf, sizeof(buf), "long:x:5:5::/%0600d:/bin/sh\nlong:x:6:6::/ok:/bin/sh\n", 0);
	EXPECT_EQ(agent_passwd_find(buf, strlen(buf), "long", 0, &u), 0);
	EXPECT_EQ(u.uid, 6);
	/* NUL bytes inside a field. */
	memcpy(buf, "nul:x:7:7::/a\0b:/bin/sh\n", 24);
	EXPECT_EQ(agent_passwd_find(buf, 24, "nul", 0, &u), -1);
}

static void groups(void)
{
	struct agent_user u;

	agent_passwd_find(passwd, strlen(passwd), "alice", 0, &u);
	agent_group_fill(group, strlen(group), &u);
	EXPECT_EQ(u.ngroups, 3);
	EXPECT_EQ(u.groups[0], 1000); /* primary first */
	EXPECT_EQ(u.groups[1], 10);   /* wheel, and "dup" (also 10) deduplicated */
	EXPECT_EQ(u.groups[2], 999);
	agent_passwd_find(passwd, strlen(passwd), "root", 0, &u);
	agent_group_fill(group, strlen(group), &u);
	EXPECT_EQ(u.ngroups, 1);
	EXPECT_EQ(u.groups[0], 0);
}

static void many_groups_bounded(void)
{
	static char buf[200 * 40];
	struct agent_user u;
	size_t n = 0;
	int i;

	for (i = 0; i < 200; i++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "g%d:x:%d:alice\n", i, 2000 + i);
	memset(&u, 0, sizeof(u));
	strcpy(u.name, "alice");
	u.gid = 1;
	agent_group_fill(buf, n, &u);
	EXPECT_EQ(u.ngroups, AGENT_USER_MAX_GROUPS);
}

static void resolve_files(void)
{
	char dir[] = "/tmp/test_agent_users.XXXXXX", pw[64], gr[64], msg[256];
	struct agent_user u;
	FILE *f;

	if (!mkdtemp(dir))
		SKIP_ALL("mkdtemp failed");
	snprintf(pw, sizeof(pw), "%s/passwd", dir);
	snprintf(gr, sizeof(gr), "%s/group", dir);
	f = fopen(pw, "w");
	fputs(passwd, f);
	fclose(f);

	/* No group file: just the primary group. */
	EXPECT_EQ(agent_user_resolve(pw, gr, "alice", 0, 0, &u, msg, sizeof(msg)), 0);
	EXPECT_EQ(u.uid, 1000);
	EXPECT_EQ(u.ngroups, 1);

	f = fopen(gr, "w");
	fputs(group, f);
	fclose(f);
	EXPECT_EQ(agent_user_resolve(pw, gr, "bob", 0, 0, &u, msg, sizeof(msg)), 0);
	EXPECT_EQ(u.ngroups, 3);

	errno = 0;
	EXPECT_EQ(agent_user_resolve(pw, gr, "mallory", 0, 0, &u, msg, sizeof(msg)), -1);
	EXPECT_EQ(errno, ENOENT);
	EXPECT(strstr(msg, "mallory") != NULL);

	/* A numeric user without an entry is a uid; the given gid goes with it. */
	EXPECT_EQ(agent_user_resolve(pw, gr, "4321", 0, 77, &u, msg, sizeof(msg)), 0);
	EXPECT_EQ(u.uid, 4321);
	EXPECT_EQ(u.gid, 77);
	EXPECT(strcmp(u.home, "/") == 0);

	/* Empty user: uid/gid as given, name and home from the uid's entry if any. */
	EXPECT_EQ(agent_user_resolve(pw, gr, "", 1001, 5, &u, msg, sizeof(msg)), 0);
	EXPECT(strcmp(u.name, "bob") == 0);
	EXPECT_EQ(u.gid, 5);
	EXPECT_EQ(agent_user_resolve(pw, gr, "", 555, 5, &u, msg, sizeof(msg)), 0);
	EXPECT_EQ(u.uid, 555);
	EXPECT(u.name[0] == '\0');

	unlink(pw);
	unlink(gr);
	rmdir(dir);
}

int main(void)
{
	RUN(find_by_name);
	RUN(malformed_skipped);
	RUN(find_by_uid);
	RUN(overlong_fields);
	RUN(groups);
	RUN(many_groups_bounded);
	RUN(resolve_files);
	return harness_done();
}
