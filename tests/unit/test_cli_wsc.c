/* test_cli_wsc.c -- spacectl's WebSocket client frames (cli/wsc.c): client headers with their
 * mask and each length encoding; server frames parsed whole, asked for more when cut anywhere,
 * refused when masked, with reserved bits, an oversized or fragmented control frame, or over the
 * limit. */
#include <string.h>

#include "harness.h"
#include "wsc.h"

static void test_header(void)
{
	static const uint8_t mask[4] = { 1, 2, 3, 4 };
	uint8_t h[14];

	EXPECT_EQ(wsc_frame_header(h, 2, 5, mask), 6);
	EXPECT(h[0] == 0x82 && h[1] == (0x80 | 5) && memcmp(h + 2, mask, 4) == 0);
	EXPECT_EQ(wsc_frame_header(h, 2, 126, mask), 8);
	EXPECT(h[1] == (0x80 | 126) && h[2] == 0 && h[3] == 126);
	EXPECT_EQ(wsc_frame_header(h, 2, 70000, mask), 14);
	EXPECT(h[1] == (0x80 | 127) && h[7] == 0x01 && h[8] == 0x11 && h[9] == 0x70);
	EXPECT_EQ(wsc_frame_header(h, 8, 0, mask), 6);
	EXPECT(h[0] == 0x88);
}

static void test_parse(void)
{
	uint8_t f[300] = { 0x82, 126, 0, 200 };
	bool fin;
	uint8_t op;
	size_t hlen;
	uint64_t plen;

	for (size_t n = 0; n < 204; n++) /* cut anywhere: more is needed */
		EXPECT_EQ(wsc_frame_parse(f, n, 1 << 20, &fin, &op, &hlen, &plen), 0);
	EXPECT_EQ(wsc_frame_parse(f, 204, 1 << 20, &fin, &op, &hlen, &plen), 1);
	EXPECT(fin && op == 2 && hlen == 4 && plen == 200);
	EXPECT_EQ(wsc_frame_parse(f, 204, 100, &fin, &op, &hlen, &plen), -1); /* over the limit */
	f[1] = 0x80 | 3; /* masked */
	EXPECT_EQ(wsc_frame_parse(f, 10, 1 << 20, &fin, &op, &hlen, &plen), -1);
	f[0] = 0xC2; /* RSV1 */
	f[1] = 3;
	EXPECT_EQ(wsc_frame_parse(f, 10, 1 << 20, &fin, &op, &hlen, &plen), -1);
	f[0] = 0x89; /* a ping of 126 bytes */
	f[1] = 126;
	f[2] = 0;
	f[3] = 126;
	EXPECT_EQ(wsc_frame_parse(f, 300, 1 << 20, &fin, &op, &hlen, &plen), -1);
	f[0] = 0x09; /* a ping not FIN */
	f[1] = 1;
	EXPECT_EQ(wsc_frame_parse(f, 3, 1 << 20, &fin, &op, &hlen, &plen), -1);
	f[0] = 0x81; /* 64-bit length */
	f[1] = 127;
	memset(f + 2, 0, 8);
	f[9] = 5;
	EXPECT_EQ(wsc_frame_parse(f, 15, 1 << 20, &fin, &op, &hlen, &plen), 1);
	EXPECT(hlen == 10 && plen == 5 && op == 1);
	f[2] = 0x80; /* 2^63 and more */
	EXPECT_EQ(wsc_frame_parse(f, 15, 1 << 20, &fin, &op, &hlen, &plen), -1);
}

int main(void)
{
	RUN(test_header);
	RUN(test_parse);
	return DONE();
}
