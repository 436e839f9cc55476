/* test_agent_frame.c -- the agent's input deframing (split reads, desync, resync), the
 * kernel command line reader, environment building and PATH search. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/users.h"
#include "harness.h"

struct seen {
	unsigned frames, bad;
	uint16_t types[64];
	uint32_t lens[64];
};

static void on_frame(void *ctx, const struct proto_hdr *h, const uint8_t *payload)
{
	struct seen *s = ctx;

	(void)payload;
	if (s->frames < 64) {
		s->types[s->frames] = h->type;
		s->lens[s->frames] = h->len;
	}
	s->frames++;
}

static void on_bad(void *ctx, enum proto_rc rc)
{
	struct seen *s = ctx;

	(void)rc;
	s->bad++;
}

static size_t put_frame(uint8_t *out, uint16_t type, uint32_t chan, const void *p, uint32_t len)
{
	proto_put_hdr(out, len, type, chan);
	memcpy(out + PROTO_HDR_SIZE, p, len);
	return PROTO_HDR_SIZE + len;
}

static uint8_t stream[1 << 20], buf[PROTO_HDR_SIZE + PROTO_MAX_PAYLOAD];

/* Feed `n` bytes of stream into the deframer `step` bytes at a time, as reads would. */
static void feed(const uint8_t *s, size_t n, size_t step, struct seen *seen, bool *desync)
{
	size_t len = 0, pos = 0;

	while (pos < n) {
		size_t k = n - pos < step ? n - pos : step;

		if (k > sizeof(buf) - len)
			k = sizeof(buf) - len;
		memcpy(buf + len, s + pos, k);
		len += k;
		pos += k;
		agent_deframe(buf, &len, desync, on_frame, on_bad, seen);
		EXPECT(len < sizeof(buf));
	}
}

static void split_reads(void)
{
	static uint8_t big[PROTO_MAX_PAYLOAD];
	size_t n = 0, step;

	n += put_frame(stream + n, H_PING, 0, "12345678", 8);
	n += put_frame(stream + n, H_STDIN_CLOSE, 3, "", 0);
	n += put_frame(stream + n, H_STDIN, 3, big, sizeof(big));
	n += put_frame(stream + n, H_ACK, 3, "87654321", 8);
	for (step = 1; step < 70000; step = step * 3 + 1) {
		struct seen s = { 0 };
		bool desync = false;

		feed(stream, n, step, &s, &desync);
		EXPECT_EQ(s.frames, 4);
		EXPECT_EQ(s.bad, 0);
		EXPECT_EQ(s.types[2], H_STDIN);
		EXPECT_EQ(s.lens[2], PROTO_MAX_PAYLOAD);
		EXPECT_EQ(s.types[3], H_ACK);
	}
}

static void desync_and_resync(void)
{
	uint8_t hello[12] = { 1, 0, 0, 0 };
	size_t n = 0, step;

	n += put_frame(stream + n, H_PING, 0, "12345678", 8);
	proto_put_hdr(stream + n, PROTO_MAX_PAYLOAD + 1, H_PING, 0); /* framing lost here */
	n += PROTO_HDR_SIZE;
	memset(stream + n, 0x5a, 100000); /* garbage, larger than the input buffer */
	n += 100000;
	n += put_frame(stream + n, H_HELLO, 0, hello, sizeof(hello));
	n += put_frame(stream + n, H_PING, 0, "abcdefgh", 8);
	for (step = 1; step < 70000; step = step * 5 + 3) {
		struct seen s = { 0 };
		bool desync = false;

		feed(stream, n, step, &s, &desync);
		EXPECT_EQ(s.bad, 1);
		EXPECT_EQ(s.frames, 3);
		EXPECT_EQ(s.types[1], H_HELLO);
		EXPECT_EQ(s.types[2], H_PING);
		EXPECT(!desync);
	}
}

static void cmdline(void)
{
	char v[32];

	EXPECT(agent_cmdline_get("console=ttyS0 space.hostname=sb-1 quiet", "space.hostname", v,
				 sizeof(v)));
	EXPECT(strcmp(v, "sb-1") == 0);
	EXPECT(agent_cmdline_get("space.probe=1\n", "space.probe", v, sizeof(v)));
	EXPECT(strcmp(v, "1") == 0);
	EXPECT(!agent_cmdline_get("xspace.probe=1", "space.probe", v, sizeof(v)));
	EXPECT(!agent_cmdline_get("space.probex=1", "space.probe", v, sizeof(v)));
	EXPECT(!agent_cmdline_get("space.probe", "space.probe", v, sizeof(v)));
	EXPECT(!agent_cmdline_get("", "space.probe", v, sizeof(v)));
	EXPECT(!agent_cmdline_get("space.hostname=0123456789012345678901234567890123456789",
				  "space.hostname", v, sizeof(v)));
}

static const char *env_find(char **env, const char *kv)
{
	for (; *env; env++)
		if (strcmp(*env, kv) == 0)
			return *env;
	return NULL;
}

static void build_env(void)
{
	const char *given[] = { "A=1", "HOME=/given", NULL };
	struct agent_user u = { .name = "alice", .home = "/home/alice" };
	char **env = agent_build_env(given, &u, false, NULL);
	int n = 0;

	EXPECT(env != NULL);
	while (env[n])
		n++;
	EXPECT_EQ(n, 5);
	EXPECT(env_find(env, "A=1"));
	EXPECT(env_find(env, "HOME=/given"));
	EXPECT(env_find(env, "USER=alice"));
	EXPECT(env_find(env, "LOGNAME=alice"));
	EXPECT(!env_find(env, "HOME=/home/alice"));
	EXPECT(env[4] && strncmp(env[4], "PATH=/usr/local/sbin:", 21) == 0);
	free(env);

	/* No user name: no USER/LOGNAME invented; PATH given is kept. */
	{
		const char *g2[] = { "PATH=/x", NULL };
		struct agent_user anon = { .home = "/" };

		env = agent_build_env(g2, &anon, false, NULL);
		EXPECT(env_find(env, "PATH=/x"));
		EXPECT(env_find(env, "HOME=/"));
		n = 0;
		while (env[n])
			n++;
		EXPECT_EQ(n, 2);
		free(env);
	}
}

static void path_search_failures(void)
{
	char dir[] = "/tmp/test_agent_path.XXXXXX", path[128], f[160];
	char *argv[] = { (char *)"x", NULL };

	if (!mkdtemp(dir))
		SKIP_ALL("mkdtemp failed");
	snprintf(f, sizeof(f), "%s/noexec", dir);
	fclose(fopen(f, "w"));
	chmod(f, 0644);
	snprintf(path, sizeof(path), "PATH=/nonexistent:%s", dir);
	{
		char *env[] = { path, NULL };

		EXPECT_EQ(agent_execvpe("no-such-cmd-xyz", argv, env), ENOENT);
		/* Not executable (for root too: execve wants some x bit). */
		EXPECT_EQ(agent_execvpe("noexec", argv, env), EACCES);
		EXPECT_EQ(agent_execvpe("", argv, env), ENOENT);
		EXPECT_EQ(agent_execvpe("/nonexistent/bin/x", argv, env), ENOENT);
	}
	unlink(f);
	rmdir(dir);
}

int main(void)
{
	RUN(split_reads);
	RUN(desync_and_resync);
	RUN(cmdline);
	RUN(build_env);
	RUN(path_search_failures);
	return harness_done();
}
