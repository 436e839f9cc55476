/* test_gw_sniff.c -- which first bytes the gateway hands to its HTTP relay (src/gateway/sniff.c):
 * everything an HTTP/1 server could read as a request line, leading empty lines and lower-case
 * or unusual method tokens included; binary and line protocols without a "token SP" start not. */
#include <string.h>

#include "harness.h"
#include "sniff.h"

static int sniff(const char *s)
{
	return gw_sniff_http((const uint8_t *)s, strlen(s));
}

static void request_lines(void)
{
	EXPECT_EQ(sniff("GET / HTTP/1.1\r\n"), 1);
	EXPECT_EQ(sniff("get / HTTP/1.1\r\n"), 1);                 /* servers that take any token */
	EXPECT_EQ(sniff("\r\n\r\nGET / HTTP/1.1\r\n"), 1);         /* empty lines first */
	EXPECT_EQ(sniff("\n\nM-SEARCH * HTTP/1.1\r\n"), 1);
	EXPECT_EQ(sniff("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 1);   /* the HTTP/2 preface: refused there */
	EXPECT_EQ(sniff("X_Y~z! /"), 1);
	EXPECT_EQ(sniff("CONNECT a:443 HTTP/1.1\r\n"), 1);
}

static void undecided(void)
{
	EXPECT_EQ(sniff(""), 0);
	EXPECT_EQ(sniff("\r\n\r\n\n"), 0);
	EXPECT_EQ(sniff("GE"), 0);
	EXPECT_EQ(sniff("\r\nPOST"), 0);
}

static void not_http(void)
{
	char longest[GW_SNIFF_METHOD_MAX + 3];

	EXPECT_EQ(sniff(" GET / HTTP/1.1"), -1);
	EXPECT_EQ(sniff("SSH-2.0-OpenSSH_9.2\r\n"), -1);
	EXPECT_EQ(sniff("*1\r\n$4\r\nPING\r\n"), -1);             /* RESP */
	EXPECT_EQ(gw_sniff_http((const uint8_t *)"\x16\x03\x01\x02\x00", 5), -1);
	EXPECT_EQ(gw_sniff_http((const uint8_t *)"\0\0\0\x08\x04\xd2\x16\x2f", 8), -1); /* postgres */
	EXPECT_EQ(sniff("GET\t/ HTTP/1.1"), -1);
	EXPECT_EQ(sniff("G(T / HTTP/1.1"), -1);
	memset(longest, 'A', sizeof(longest));
	longest[GW_SNIFF_METHOD_MAX] = ' ';
	EXPECT_EQ(gw_sniff_http((const uint8_t *)longest, GW_SNIFF_METHOD_MAX + 1), 1);
	longest[GW_SNIFF_METHOD_MAX] = 'A';
	EXPECT_EQ(gw_sniff_http((const uint8_t *)longest, GW_SNIFF_METHOD_MAX + 2), -1);
}

int main(void)
{
	RUN(request_lines);
	RUN(undecided);
	RUN(not_http);
	return DONE();
}
