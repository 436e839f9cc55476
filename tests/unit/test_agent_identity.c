/* test_agent_identity.c -- H_IDENTITY: encoder against the agent's parser, malformed payloads */
#include <string.h>

#include "agent/agent.h"
#include "harness.h"

static uint8_t ent[PROTO_IDENTITY_MAX_ENTROPY];

/* Encode id into w (initialised here); the caller frees. */
static void encode(struct proto_wr *w, const struct proto_identity *id)
{
	proto_wr_init(w);
	EXPECT_EQ(proto_identity_encode(w, id), 0);
}

static void roundtrip(void)
{
	const uint8_t net[] = { 1, 2, 3 };
	struct proto_identity in = {
		.realtime_ns = 1700000000123456789ull,
		.entropy_len = 64,
		.entropy = ent,
		.hostname = "clone-7.sandbox",
	}, out;
	struct proto_wr w;
	size_t i;

	for (i = 0; i < sizeof(ent); i++)
		ent[i] = (uint8_t)(i * 7 + 3);
	encode(&w, &in);
	EXPECT_EQ(w.len, 8 + 4 + 64 + strlen(in.hostname) + 1 + 4);
	EXPECT_EQ(agent_identity_parse(w.buf, w.len, &out), PROTO_OK);
	EXPECT(out.realtime_ns == in.realtime_ns);
	EXPECT_EQ(out.entropy_len, 64);
	EXPECT(out.entropy == w.buf + 12); /* points into the payload, no copy */
	EXPECT(memcmp(out.entropy, ent, 64) == 0);
	EXPECT(strcmp(out.hostname, "clone-7.sandbox") == 0);
	EXPECT_EQ(out.net_len, 0);
	proto_wr_free(&w);

	/* Everything left alone: the smallest payload. */
	memset(&in, 0, sizeof(in));
	encode(&w, &in);
	EXPECT_EQ(w.len, 17);
	EXPECT_EQ(agent_identity_parse(w.buf, w.len, &out), PROTO_OK);
	EXPECT(out.realtime_ns == 0 && out.entropy_len == 0 && out.hostname[0] == '\0');
	proto_wr_free(&w);

	/* The most entropy, and a reserved net block: both accepted (net is ignored later). */
	in.entropy_len = PROTO_IDENTITY_MAX_ENTROPY;
	in.entropy = ent;
	in.net_len = sizeof(net);
	in.net = net;
	encode(&w, &in);
	EXPECT_EQ(agent_identity_parse(w.buf, w.len, &out), PROTO_OK);
	EXPECT_EQ(out.entropy_len, PROTO_IDENTITY_MAX_ENTROPY);
	EXPECT_EQ(out.net_len, 3);
	EXPECT(out.net && memcmp(out.net, net, 3) == 0);
	proto_wr_free(&w);
}

/* Every prefix and every extension by a byte of a valid payload is rejected. */
static void exact_length(void)
{
	struct proto_identity in = {
		.realtime_ns = 5, .entropy_len = 16, .entropy = ent, .hostname = "h",
	}, out;
	struct proto_wr w;
	size_t n;

	encode(&w, &in);
	for (n = 0; n < w.len; n++)
		EXPECT(agent_identity_parse(w.buf, n, &out) != PROTO_OK);
	EXPECT_EQ(agent_identity_parse(w.buf, 11, &out), PROTO_E_TRUNCATED);
	EXPECT_EQ(agent_identity_parse(w.buf, 12 + 15, &out), PROTO_E_TRUNCATED);
	EXPECT_EQ(agent_identity_parse(w.buf, 12 + 16 + 1, &out), PROTO_E_NOT_TERMINATED);
	EXPECT_EQ(agent_identity_parse(w.buf, w.len - 1, &out), PROTO_E_TRUNCATED);
	proto_wr_u8(&w, 0);
	EXPECT_EQ(agent_identity_parse(w.buf, w.len, &out), PROTO_E_TRAILING);
	proto_wr_free(&w);
}

/* Payloads the encoder would not produce: lengths that lie, entropy over the limit. */
static void lying_lengths(void)
{
	struct proto_identity in = { .hostname = "" }, out;
	struct proto_wr w;

	/* entropy_len 513 with 513 bytes behind it: over the limit, whatever follows. */
	proto_wr_init(&w);
	proto_wr_u64(&w, 0);
	proto_wr_u32(&w, PROTO_IDENTITY_MAX_ENTROPY + 1);
	proto_wr_bytes(&w, ent, sizeof(ent));
	proto_wr_bytes(&w, "x", 1);
	proto_wr_str(&w, "");
	proto_wr_u32(&w, 0);
	EXPECT_EQ(agent_identity_parse(w.buf, w.len, &out), PROTO_E_BAD_VALUE);
	proto_wr_free(&w);

	/* entropy_len near 2^32: never read past the payload. */
	proto_wr_init(&w);
	proto_wr_u64(&w, 0);
	proto_wr_u32(&w, 0xffffffffu);
	proto_wr_bytes(&w, ent, 32);
	EXPECT_EQ(agent_identity_parse(w.buf, w.len, &out), PROTO_E_BAD_VALUE);
	proto_wr_free(&w);

	/* net_len larger than what is left, and huge. */
	encode(&w, &in);
	w.buf[w.len - 4] = 1;
	EXPECT_EQ(agent_identity_parse(w.buf, w.len, &out), PROTO_E_TRUNCATED);
	memset(w.buf + w.len - 4, 0xff, 4);
	EXPECT_EQ(agent_identity_parse(w.buf, w.len, &out), PROTO_E_TRUNCATED);
	proto_wr_free(&w);

	/* A missing hostname: the first NUL is inside net_len, which is then short. */
	proto_wr_init(&w);
	proto_wr_u64(&w, 0);
	proto_wr_u32(&w, 0);
	proto_wr_u32(&w, 0);
	EXPECT_EQ(agent_identity_parse(w.buf, w.len, &out), PROTO_E_TRUNCATED);
	proto_wr_free(&w);
}

static void hostnames(void)
{
	static const char *const good[] = {
		"a", "sandbox", "sb-1", "x.example.org", "A9",
		"abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij123", /* 63 */
	};
	static const char *const bad[] = {
		"-lead", ".lead", "has space", "under_score", "tab\t", "slash/",
		"abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij1234", /* 64 */
		"\xc3\xa9t\xc3\xa9",
	};
	struct proto_identity in = { 0 }, out;
	struct proto_wr w;
	enum proto_rc rc;
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		in.hostname = good[i];
		encode(&w, &in);
		rc = agent_identity_parse(w.buf, w.len, &out);
		if (rc != PROTO_OK)
			NOTE("hostname \"%s\" rejected", good[i]);
		EXPECT_EQ(rc, PROTO_OK);
		proto_wr_free(&w);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		in.hostname = bad[i];
		encode(&w, &in);
		EXPECT_EQ(agent_identity_parse(w.buf, w.len, &out), PROTO_E_BAD_VALUE);
		proto_wr_free(&w);
	}
}

static void fuzz(void)
{
	static uint8_t p[700];
	struct proto_identity out;
	unsigned seed = 4242;
	int i;
	size_t j;

	/* Random payloads with plausible length fields, under ASan: no read outside p, and an
	 * accepted one always adds up exactly. */
	for (i = 0; i < 20000; i++) {
		size_t n = (size_t)(rand_r(&seed) % sizeof(p));

		for (j = 0; j < n; j++)
			p[j] = (uint8_t)(rand_r(&seed) % 3 == 0 ? 0 : 'a' + rand_r(&seed) % 26);
		if (n >= 12) {
			p[8] = (uint8_t)(rand_r(&seed) % 8);
			p[9] = p[10] = p[11] = 0;
		}
		if (agent_identity_parse(p, n, &out) == PROTO_OK)
			EXPECT_EQ(n, 12 + out.entropy_len + strlen(out.hostname) + 1 + 4 + out.net_len);
	}
}

int main(void)
{
	RUN(roundtrip);
	RUN(exact_length);
	RUN(lying_lengths);
	RUN(hostnames);
	RUN(fuzz);
	return DONE();
}
