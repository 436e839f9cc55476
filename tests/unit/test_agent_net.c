/* test_agent_net.c -- the guest side of the H_IDENTITY net payload, without touching the host:
 * the trust-store block replacement, the files under a scratch root, the children's CA
 * variables */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/users.h"
#include "harness.h"

#define PEM1 "-----BEGIN CERTIFICATE-----\nONE\n-----END CERTIFICATE-----\n"
#define PEM2 "-----BEGIN CERTIFICATE-----\nTWO\n-----END CERTIFICATE-----"
#define BLOCK(pem) "# space-egress-ca begin\n" pem "# space-egress-ca end\n"

static char root[] = "/tmp/test_agent_net.XXXXXX";

static int same(char *got, const char *want)
{
	int ok = got && strcmp(got, want) == 0;

	if (!ok)
		NOTE("got [%s]\n# want [%s]", got ? got : "(null)", want);
	free(got);
	return ok;
}

static void bundle_replace(void)
{
	const char *sys = "# system\nSYS1\nSYS2\n";

	EXPECT(same(agent_net_bundle_replace(NULL, PEM1), BLOCK(PEM1)));
	EXPECT(same(agent_net_bundle_replace("", PEM1), BLOCK(PEM1)));
	EXPECT(same(agent_net_bundle_replace(sys, PEM1), "# system\nSYS1\nSYS2\n" BLOCK(PEM1)));
	/* A bundle without its last newline; a PEM without one. */
	EXPECT(same(agent_net_bundle_replace("SYS", PEM2), "SYS\n" BLOCK(PEM2 "\n")));
	/* An older block, anywhere, is replaced; the rest kept in order. */
	EXPECT(same(agent_net_bundle_replace("A\n" BLOCK(PEM1) "B\n", PEM2), "A\nB\n" BLOCK(PEM2 "\n")));
	/* Applying twice gives the same text (every H_IDENTITY re-applies). */
	char *once = agent_net_bundle_replace(sys, PEM1);
	EXPECT(same(agent_net_bundle_replace(once, PEM1), "# system\nSYS1\nSYS2\n" BLOCK(PEM1)));
	free(once);
	/* Two blocks (should not happen): both go. No CA: the block goes, nothing added. */
	EXPECT(same(agent_net_bundle_replace(BLOCK(PEM1) "X\n" BLOCK(PEM1), ""), "X\n"));
	EXPECT(same(agent_net_bundle_replace("A\n" BLOCK(PEM1), NULL), "A\n"));
	/* A block cut short (begin, no end) is dropped to the end. */
	EXPECT(same(agent_net_bundle_replace("A\n# space-egress-ca begin\nHALF", PEM1), "A\n" BLOCK(PEM1)));
	/* Markers only count as whole lines. */
	EXPECT(same(agent_net_bundle_replace("x # space-egress-ca begin\n", ""), "x # space-egress-ca begin\n"));
}

static char *slurp(const char *rel)
{
	char path[256];
	FILE *f;
	char *buf = calloc(1, 4096);

	snprintf(path, sizeof(path), "%s%s", root, rel);
	f = fopen(path, "r");
	if (!f || !buf) {
		if (f)
			fclose(f);
		free(buf);
		return NULL;
	}
	if (fread(buf, 1, 4095, f) == 0 && ferror(f)) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

static void put(const char *rel, const char *text)
{
	char path[256];

	snprintf(path, sizeof(path), "%s%s", root, rel);
	EXPECT_EQ(agent_net_write_atomic(path, text, strlen(text), 0644), 0);
}

static void install_ca(void)
{
	struct stat st;
	char path[256];

	/* No /etc/ssl at all (the busybox template): made, the bundle is just the block. */
	EXPECT_EQ(agent_net_install_ca(root, PEM1, false), 0);
	EXPECT(same(slurp(AGENT_CA_FILE), PEM1));
	EXPECT(same(slurp(AGENT_CA_BUNDLE), BLOCK(PEM1)));
	snprintf(path, sizeof(path), "%s%s", root, AGENT_CA_BUNDLE);
	EXPECT(stat(path, &st) == 0 && (st.st_mode & 0777) == 0644);

	/* A system bundle: kept, the block replaced on the next CA; no temporary left. */
	put(AGENT_CA_BUNDLE, "SYS\n");
	EXPECT_EQ(agent_net_install_ca(root, PEM1, false), 0);
	EXPECT_EQ(agent_net_install_ca(root, PEM2, false), 0);
	EXPECT(same(slurp(AGENT_CA_BUNDLE), "SYS\n" BLOCK(PEM2 "\n")));
	EXPECT(same(slurp(AGENT_CA_FILE), PEM2));
	strcat(path, ".space-tmp");
	EXPECT(access(path, F_OK) < 0);

	/* No CA any more: the block and the file go, the system's certificates stay. */
	EXPECT_EQ(agent_net_install_ca(root, "", false), 0);
	EXPECT(same(slurp(AGENT_CA_BUNDLE), "SYS\n"));
	EXPECT(slurp(AGENT_CA_FILE) == NULL);
	EXPECT_EQ(agent_net_install_ca(root, "", false), 0);

	/* A PEM that carries our markers would break the block: refused. */
	EXPECT_EQ(agent_net_install_ca(root, "# space-egress-ca end\n", false), -1);
	EXPECT(same(slurp(AGENT_CA_BUNDLE), "SYS\n"));
}

/* In place: the same files (inodes) rewritten, a shorter CA cuts them, the content is what
 * an atomic install writes; files that do not exist yet are made as before. */
static void install_ca_in_place(void)
{
	struct stat a, b, c, d;
	char bundle[256], file[256];

	snprintf(bundle, sizeof(bundle), "%s%s", root, AGENT_CA_BUNDLE);
	snprintf(file, sizeof(file), "%s%s", root, AGENT_CA_FILE);
	unlink(bundle);
	unlink(file);
	EXPECT_EQ(agent_net_install_ca(root, PEM2, true), 0); /* none there: made */
	EXPECT(same(slurp(AGENT_CA_BUNDLE), BLOCK(PEM2 "\n")));
	put(AGENT_CA_BUNDLE, "SYS\n");
	EXPECT_EQ(agent_net_install_ca(root, PEM2, false), 0);
	EXPECT(stat(bundle, &a) == 0 && stat(file, &b) == 0);
	EXPECT_EQ(agent_net_install_ca(root, PEM1, true), 0);
	EXPECT(stat(bundle, &c) == 0 && stat(file, &d) == 0);
	EXPECT(a.st_ino == c.st_ino && b.st_ino == d.st_ino);
	EXPECT(same(slurp(AGENT_CA_BUNDLE), "SYS\n" BLOCK(PEM1)));
	EXPECT(same(slurp(AGENT_CA_FILE), PEM1));
	EXPECT_EQ(agent_net_install_ca(root, PEM2, true), 0);
	EXPECT(same(slurp(AGENT_CA_BUNDLE), "SYS\n" BLOCK(PEM2 "\n")));
	EXPECT(same(slurp(AGENT_CA_FILE), PEM2));
	EXPECT_EQ(agent_net_install_ca(root, "", true), 0);
	EXPECT(same(slurp(AGENT_CA_BUNDLE), "SYS\n"));
}

static void resolv(void)
{
	EXPECT_EQ(agent_net_write_resolv(root, 0xa9fe0016u), 0);
	EXPECT(same(slurp("/etc/resolv.conf"), "nameserver 169.254.0.22\noptions timeout:2 attempts:2\n"));
	EXPECT_EQ(agent_net_write_resolv(root, 0x08080808u), 0);
	EXPECT(same(slurp("/etc/resolv.conf"), "nameserver 8.8.8.8\noptions timeout:2 attempts:2\n"));
}

static const char *env_get(char **env, const char *key)
{
	size_t kl = strlen(key);

	for (; *env; env++)
		if (strncmp(*env, key, kl) == 0 && (*env)[kl] == '=')
			return *env + kl + 1;
	return NULL;
}

static void child_env(void)
{
	const char *given[] = { "PATH=/x", "CURL_CA_BUNDLE=/mine.pem", NULL };
	struct agent_user u = { .name = "root", .home = "/root" };
	char **env = agent_build_env(given, &u, true, NULL);

	EXPECT(env != NULL);
	if (!env)
		return;
	EXPECT(env_get(env, "SSL_CERT_FILE") && strcmp(env_get(env, "SSL_CERT_FILE"), AGENT_CA_BUNDLE) == 0);
	EXPECT(env_get(env, "REQUESTS_CA_BUNDLE") &&
	       strcmp(env_get(env, "REQUESTS_CA_BUNDLE"), AGENT_CA_BUNDLE) == 0);
	EXPECT(strcmp(env_get(env, "CURL_CA_BUNDLE"), "/mine.pem") == 0); /* the session's wins */
	EXPECT(env_get(env, "NODE_EXTRA_CA_CERTS") &&
	       strcmp(env_get(env, "NODE_EXTRA_CA_CERTS"), AGENT_CA_FILE) == 0);
	int n = 0;
	while (env[n])
		n++;
	EXPECT_EQ(n, 2 + 3 + 3); /* given, HOME/USER/LOGNAME, three CA variables */
	free(env);

	/* No CA installed: none of them. */
	env = agent_build_env(given, &u, false, NULL);
	EXPECT(env && !env_get(env, "SSL_CERT_FILE") && !env_get(env, "NODE_EXTRA_CA_CERTS"));
	free(env);
}

static int rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

int main(void)
{
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	RUN(bundle_replace);
	RUN(install_ca);
	RUN(install_ca_in_place);
	RUN(resolv);
	RUN(child_env);
	nftw(root, rm, 16, FTW_DEPTH | FTW_PHYS);
	return DONE();
}
