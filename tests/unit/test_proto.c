/* test_proto.c -- framing and bounded encoding of the host<->agent protocol (src/common/proto.c) */
#include <string.h>

#include "common/proto.h"
#include "harness.h"

static void hdr_roundtrip(void)
{
	uint8_t b[PROTO_HDR_SIZE];
	struct proto_hdr h;

	proto_put_hdr(b, 1234, A_DATA, 0xdeadbeef);
	EXPECT_EQ(b[0], 1234 & 0xff);
	EXPECT_EQ(b[4], A_DATA & 0xff);
	EXPECT_EQ(proto_parse_hdr(b, sizeof(b), &h), PROTO_OK);
	EXPECT_EQ(h.len, 1234);
	EXPECT_EQ(h.type, A_DATA);
	EXPECT_EQ(h.flags, 0);
	EXPECT_EQ(h.chan, 0xdeadbeef);
	EXPECT_EQ(proto_parse_hdr(b, PROTO_HDR_SIZE - 1, &h), PROTO_NEED_MORE);
	EXPECT_EQ(proto_parse_hdr(b, 0, &h), PROTO_NEED_MORE);
}

static void hdr_limits(void)
{
	uint8_t b[PROTO_HDR_SIZE];
	struct proto_hdr h;

	proto_put_hdr(b, PROTO_MAX_PAYLOAD, H_STDIN, 1);
	EXPECT_EQ(proto_parse_hdr(b, sizeof(b), &h), PROTO_OK);
	proto_put_hdr(b, PROTO_MAX_PAYLOAD + 1, H_STDIN, 1);
	EXPECT_EQ(proto_parse_hdr(b, sizeof(b), &h), PROTO_E_TOO_BIG);
	memset(b, 0xff, sizeof(b));
	EXPECT_EQ(proto_parse_hdr(b, sizeof(b), &h), PROTO_E_TOO_BIG);
	EXPECT(strcmp(proto_strerror(PROTO_E_TOO_BIG), "unknown protocol error") != 0);
}

static void reader_bounds(void)
{
	const uint8_t p[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 'a', 'b', 0, 'c' };
	struct proto_rd r;
	size_t n;

	proto_rd_init(&r, p, sizeof(p));
	EXPECT_EQ(proto_rd_u8(&r), 1);
	EXPECT_EQ(proto_rd_u32(&r), 0x05040302);
	EXPECT_EQ(proto_rd_u32(&r), 0x09080706);
	EXPECT(strcmp(proto_rd_str(&r), "ab") == 0);
	EXPECT(!r.bad);
	EXPECT(proto_rd_str(&r) == NULL); /* "c" is not terminated */
	EXPECT(r.bad);
	EXPECT(proto_rd_rest(&r, &n) != NULL || n == 0);
	EXPECT_EQ(n, 0);

	proto_rd_init(&r, p, 7);
	EXPECT_EQ(proto_rd_u64(&r), 0);
	EXPECT(r.bad);
	EXPECT_EQ(proto_rd_u8(&r), 0); /* stays bad */

	proto_rd_init(&r, p, 0);
	EXPECT(proto_rd_str(&r) == NULL);
	EXPECT(r.bad);

	proto_rd_init(&r, p, sizeof(p));
	EXPECT_EQ(proto_rd_u64(&r), 0x0807060504030201ull);
	proto_rd_rest(&r, &n);
	EXPECT_EQ(n, sizeof(p) - 8);
	EXPECT(!r.bad);
}

static void writer_limits(void)
{
	static uint8_t big[PROTO_MAX_PAYLOAD];
	struct proto_wr w;

	proto_wr_init(&w);
	proto_wr_u32(&w, 7);
	proto_wr_u64(&w, 1ull << 40);
	proto_wr_str(&w, NULL);
	proto_wr_str(&w, "x");
	EXPECT_EQ(w.len, 4 + 8 + 1 + 2);
	EXPECT(!w.bad);
	proto_wr_bytes(&w, big, sizeof(big)); /* over the payload limit */
	EXPECT(w.bad);
	proto_wr_free(&w);

	proto_wr_init(&w);
	proto_wr_bytes(&w, big, sizeof(big));
	EXPECT(!w.bad);
	EXPECT_EQ(w.len, PROTO_MAX_PAYLOAD);
	proto_wr_u8(&w, 1);
	EXPECT(w.bad);
	proto_wr_free(&w);
}

static struct proto_exec ex, dx; /* large: not on the stack */

static void exec_roundtrip(void)
{
	struct proto_wr w;

	memset(&ex, 0, sizeof(ex));
	ex.flags = PROTO_EXEC_STDIN;
	ex.uid = 1000;
	ex.gid = 100;
	ex.user = "alice";
	ex.cwd = "/home/alice";
	ex.argc = 3;
	ex.argv[0] = "sh";
	ex.argv[1] = "-c";
	ex.argv[2] = "echo hi";
	ex.envc = 1;
	ex.envp[0] = "A=b";
	proto_wr_init(&w);
	EXPECT_EQ(proto_exec_encode(&w, &ex), 0);
	EXPECT_EQ(proto_exec_decode(w.buf, w.len, &dx), PROTO_OK);
	EXPECT_EQ(dx.flags, PROTO_EXEC_STDIN);
	EXPECT_EQ(dx.uid, 1000);
	EXPECT_EQ(dx.gid, 100);
	EXPECT(strcmp(dx.user, "alice") == 0);
	EXPECT(strcmp(dx.cwd, "/home/alice") == 0);
	EXPECT_EQ(dx.argc, 3);
	EXPECT(strcmp(dx.argv[2], "echo hi") == 0);
	EXPECT(dx.argv[3] == NULL);
	EXPECT(strcmp(dx.envp[0], "A=b") == 0);
	EXPECT(dx.envp[1] == NULL);

	/* Every truncation of a valid payload is rejected, never read past. */
	for (size_t n = 0; n < w.len; n++)
		EXPECT(proto_exec_decode(w.buf, n, &dx) != PROTO_OK);
	proto_wr_free(&w);

	ex.argc = 0;
	proto_wr_init(&w);
	EXPECT_EQ(proto_exec_encode(&w, &ex), -1);
	proto_wr_free(&w);
}

static void exec_bad_counts(void)
{
	uint8_t p[20 + 4] = { 0 };

	/* argc 0 */
	EXPECT_EQ(proto_exec_decode(p, sizeof(p), &dx), PROTO_E_BAD_VALUE);
	/* argc huge */
	p[12] = 0xff;
	p[13] = 0xff;
	EXPECT_EQ(proto_exec_decode(p, sizeof(p), &dx), PROTO_E_TOO_MANY);
	/* envc huge */
	p[12] = 1;
	p[13] = 0;
	p[16] = 0xff;
	p[17] = 0xff;
	EXPECT_EQ(proto_exec_decode(p, sizeof(p), &dx), PROTO_E_TOO_MANY);
	/* argc 1 with strings missing */
	p[16] = 0;
	p[17] = 0;
	EXPECT_EQ(proto_exec_decode(p, 22, &dx), PROTO_E_NOT_TERMINATED);
	/* user, cwd, argv[0] present */
	EXPECT_EQ(proto_exec_decode(p, 23, &dx), PROTO_OK);
	EXPECT(dx.argv[0] && dx.argv[0][0] == '\0');
	EXPECT_EQ(proto_exec_decode(p, 12, &dx), PROTO_E_TRUNCATED);
}

static void exec_fuzz(void)
{
	static uint8_t p[512];
	unsigned seed = 12345;
	int i;
	size_t j;

	/* Random payloads under ASan: whatever the verdict, no read outside p. */
	for (i = 0; i < 20000; i++) {
		size_t n = (size_t)(rand_r(&seed) % sizeof(p));

		for (j = 0; j < n; j++)
			p[j] = (uint8_t)(rand_r(&seed) % 4 == 0 ? 0 : rand_r(&seed));
		if (n >= 20) {
			p[12] = (uint8_t)(rand_r(&seed) % 5);
			p[13] = p[14] = p[15] = 0;
			p[16] = (uint8_t)(rand_r(&seed) % 5);
			p[17] = p[18] = p[19] = 0;
		}
		if (proto_exec_decode(p, n, &dx) == PROTO_OK) {
			for (j = 0; j < dx.argc; j++)
				EXPECT(dx.argv[j] != NULL);
			EXPECT(dx.argv[dx.argc] == NULL);
		}
	}
}

static void reader_bytes(void)
{
	const uint8_t p[] = { 1, 2, 3, 4, 5 };
	struct proto_rd r;

	proto_rd_init(&r, p, sizeof(p));
	EXPECT(proto_rd_bytes(&r, 0) == p);
	EXPECT(proto_rd_bytes(&r, 2) == p);
	EXPECT(proto_rd_bytes(&r, 3) == p + 2);
	EXPECT(!r.bad);
	EXPECT(proto_rd_bytes(&r, 1) == NULL);
	EXPECT(r.bad);
	proto_rd_init(&r, p, sizeof(p));
	EXPECT(proto_rd_bytes(&r, 6) == NULL); /* more than there is: nothing taken */
	EXPECT(r.bad);
}

/* The H_IDENTITY layout, byte for byte, as agent-protocol.md states it. */
static void identity_encode_layout(void)
{
	static const uint8_t want[] = {
		0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, /* realtime_ns */
		3, 0, 0, 0, 0xaa, 0xbb, 0xcc,                   /* entropy_len, entropy */
		's', 'b', '-', '1', 0,                          /* hostname */
		2, 0, 0, 0, 0x11, 0x22,                         /* net_len, net */
	};
	const uint8_t ent[] = { 0xaa, 0xbb, 0xcc }, net[] = { 0x11, 0x22 };
	struct proto_identity id = {
		.realtime_ns = 0x0102030405060708ull,
		.entropy_len = 3,
		.entropy = ent,
		.hostname = "sb-1",
		.net_len = 2,
		.net = net,
	};
	struct proto_wr w;

	proto_wr_init(&w);
	EXPECT_EQ(proto_identity_encode(&w, &id), 0);
	EXPECT_EQ(w.len, sizeof(want));
	EXPECT(w.len == sizeof(want) && memcmp(w.buf, want, sizeof(want)) == 0);
	proto_wr_free(&w);

	/* All empty: 8 + 4 + 1 + 4 bytes; a NULL hostname is "". */
	memset(&id, 0, sizeof(id));
	proto_wr_init(&w);
	EXPECT_EQ(proto_identity_encode(&w, &id), 0);
	EXPECT_EQ(w.len, 17);
	proto_wr_free(&w);
}

static void identity_encode_limits(void)
{
	static uint8_t ent[PROTO_IDENTITY_MAX_ENTROPY + 1];
	struct proto_identity id = { .entropy = ent, .hostname = "" };
	struct proto_wr w;

	id.entropy_len = PROTO_IDENTITY_MAX_ENTROPY;
	proto_wr_init(&w);
	EXPECT_EQ(proto_identity_encode(&w, &id), 0);
	EXPECT_EQ(w.len, 8 + 4 + PROTO_IDENTITY_MAX_ENTROPY + 1 + 4);
	proto_wr_free(&w);

	id.entropy_len = PROTO_IDENTITY_MAX_ENTROPY + 1;
	proto_wr_init(&w);
	EXPECT_EQ(proto_identity_encode(&w, &id), -1);
	EXPECT_EQ(w.len, 0); /* refused before writing anything */
	proto_wr_free(&w);

	/* A length without its bytes. */
	id.entropy_len = 4;
	id.entropy = NULL;
	proto_wr_init(&w);
	EXPECT_EQ(proto_identity_encode(&w, &id), -1);
	proto_wr_free(&w);
	id.entropy_len = 0;
	id.net_len = 1;
	proto_wr_init(&w);
	EXPECT_EQ(proto_identity_encode(&w, &id), -1);
	proto_wr_free(&w);
}

static const char net_ca[] = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

static void net_roundtrip(void)
{
	struct proto_net in = { .addr = 0xa9fe0015u, .prefix_len = 30, .gateway = 0xa9fe0016u,
				.dns = 0xa9fe0016u, .ca_pem = net_ca }, out;
	struct proto_wr w;

	proto_wr_init(&w);
	EXPECT_EQ(proto_net_encode(&w, &in), 0);
	EXPECT_EQ(w.len, 20 + sizeof(net_ca));
	/* The layout of the contract: u32 version first, little-endian like every u32. */
	EXPECT(w.buf[0] == PROTO_NET_VERSION && w.buf[1] == 0 && w.buf[4] == 0x15 && w.buf[7] == 0xa9);
	EXPECT_EQ(proto_net_parse(w.buf, w.len, &out), PROTO_OK);
	EXPECT_EQ(out.addr, 0xa9fe0015u);
	EXPECT_EQ(out.prefix_len, 30);
	EXPECT_EQ(out.gateway, 0xa9fe0016u);
	EXPECT_EQ(out.dns, 0xa9fe0016u);
	EXPECT(out.ca_pem == (const char *)w.buf + 20 && strcmp(out.ca_pem, net_ca) == 0);
	proto_wr_free(&w);

	/* No CA: "" (NULL encodes as ""). */
	in.ca_pem = NULL;
	proto_wr_init(&w);
	EXPECT_EQ(proto_net_encode(&w, &in), 0);
	EXPECT_EQ(w.len, 21);
	EXPECT_EQ(proto_net_parse(w.buf, w.len, &out), PROTO_OK);
	EXPECT(out.ca_pem && out.ca_pem[0] == '\0');
	proto_wr_free(&w);
}

static void net_limits(void)
{
	static char ca[PROTO_NET_MAX_CA + 2];
	struct proto_net in = { .addr = 1, .prefix_len = 32, .gateway = 2, .dns = 3, .ca_pem = ca }, out;
	struct proto_wr w;

	memset(ca, 'A', PROTO_NET_MAX_CA);
	proto_wr_init(&w);
	EXPECT_EQ(proto_net_encode(&w, &in), 0);
	EXPECT_EQ(proto_net_parse(w.buf, w.len, &out), PROTO_OK);
	EXPECT_EQ(strlen(out.ca_pem), PROTO_NET_MAX_CA);
	proto_wr_free(&w);

	ca[PROTO_NET_MAX_CA] = 'A';
	proto_wr_init(&w);
	EXPECT_EQ(proto_net_encode(&w, &in), -1);
	EXPECT_EQ(w.len, 0);
	/* The same bytes written by hand: the parser refuses them too. */
	proto_wr_u32(&w, PROTO_NET_VERSION);
	for (int i = 0; i < 4; i++)
		proto_wr_u32(&w, i == 1 ? 24 : 7);
	proto_wr_str(&w, ca);
	EXPECT_EQ(proto_net_parse(w.buf, w.len, &out), PROTO_E_BAD_VALUE);
	proto_wr_free(&w);
}

/* Every field checked: each byte mutation of a good payload is parsed or refused safely. */
static void net_malformed(void)
{
	struct proto_net in = { .addr = 0xa9fe0015u, .prefix_len = 30, .gateway = 0xa9fe0016u,
				.dns = 0xa9fe0016u, .ca_pem = "pem" }, out;
	struct proto_wr w;
	uint8_t b[64];

	proto_wr_init(&w);
	EXPECT_EQ(proto_net_encode(&w, &in), 0);
	EXPECT_EQ(w.len, 24);
	memcpy(b, w.buf, w.len);
	proto_wr_free(&w);

	for (size_t n = 0; n < 20; n++)
		EXPECT_EQ(proto_net_parse(b, n, &out), PROTO_E_TRUNCATED);
	EXPECT_EQ(proto_net_parse(b, 20, &out), PROTO_E_TRUNCATED); /* the CA's NUL missing too */
	EXPECT_EQ(proto_net_parse(b, 23, &out), PROTO_E_NOT_TERMINATED);
	EXPECT_EQ(proto_net_parse(b, 24, &out), PROTO_OK);
	b[24] = 0;
	EXPECT_EQ(proto_net_parse(b, 25, &out), PROTO_E_TRAILING);

	b[0] = 2; /* another version */
	EXPECT_EQ(proto_net_parse(b, 24, &out), PROTO_E_BAD_VALUE);
	b[0] = 0;
	EXPECT_EQ(proto_net_parse(b, 24, &out), PROTO_E_BAD_VALUE);
	b[0] = 1;
	b[8] = 0; /* prefix 0 */
	EXPECT_EQ(proto_net_parse(b, 24, &out), PROTO_E_BAD_VALUE);
	b[8] = 33;
	EXPECT_EQ(proto_net_parse(b, 24, &out), PROTO_E_BAD_VALUE);
	b[8] = 1;
	EXPECT_EQ(proto_net_parse(b, 24, &out), PROTO_OK);
	b[8] = 30;
	b[11] = 1; /* prefix 2^24 + 30 */
	EXPECT_EQ(proto_net_parse(b, 24, &out), PROTO_E_BAD_VALUE);
}

int main(void)
{
	RUN(hdr_roundtrip);
	RUN(hdr_limits);
	RUN(reader_bounds);
	RUN(writer_limits);
	RUN(exec_roundtrip);
	RUN(exec_bad_counts);
	RUN(exec_fuzz);
	RUN(reader_bytes);
	RUN(identity_encode_layout);
	RUN(identity_encode_limits);
	RUN(net_roundtrip);
	RUN(net_limits);
	RUN(net_malformed);
	return harness_done();
}
