/* test_gw_http_resp.c -- the HTTP relay's response framing (src/gateway/http_resp.c): which
 * response answers which pipelined request, HEAD and 1xx/204/304 without bodies, and the one
 * case that switches a relay to raw bytes: a 101 to an Upgrade request, a 2xx to a CONNECT. */
#include <string.h>

#include "harness.h"
#include "http_resp.h"

/* Feeds text whole, or a byte at a time (every split a socket could make). */
static enum gw_resp_rc feed(struct gw_resp *r, const char *text, bool bytewise)
{
	size_t n = strlen(text);
	enum gw_resp_rc rc = GW_RESP_OK;

	if (!bytewise)
		return gw_resp_feed(r, text, n);
	for (size_t i = 0; i < n && rc == GW_RESP_OK; i++)
		rc = gw_resp_feed(r, text + i, 1);
	return rc;
}

#define OK200(body) "HTTP/1.1 200 OK\r\nContent-Length: " #body "\r\n\r\n"

static void pipelined_with_head_and_bodiless(bool bytewise)
{
	struct gw_resp r;

	gw_resp_init(&r);
	EXPECT(gw_resp_expect(&r, GW_REQ_PLAIN) == 0 && gw_resp_expect(&r, GW_REQ_HEAD) == 0 &&
	       gw_resp_expect(&r, GW_REQ_PLAIN) == 0 && gw_resp_expect(&r, GW_REQ_PLAIN) == 0 &&
	       gw_resp_expect(&r, GW_REQ_UPGRADE) == 0);
	EXPECT_EQ(feed(&r, OK200(5) "hello", bytewise), GW_RESP_OK);
	EXPECT_EQ(gw_resp_pending(&r), 4);
	/* HEAD: a Content-Length, and no body follows */
	EXPECT_EQ(feed(&r, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", bytewise), GW_RESP_OK);
	EXPECT_EQ(gw_resp_pending(&r), 3);
	EXPECT_EQ(feed(&r, "HTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\n\r\n", bytewise), GW_RESP_OK);
	EXPECT_EQ(feed(&r, "HTTP/1.1 204 No Content\r\n\r\n", bytewise), GW_RESP_OK);
	EXPECT_EQ(gw_resp_pending(&r), 1);
	/* the Upgrade request answered 200 with a chunked body: no switch */
	EXPECT_EQ(feed(&r, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", bytewise),
		  GW_RESP_OK);
	EXPECT_EQ(gw_resp_pending(&r), 0);
}

static void pipelined(void)
{
	pipelined_with_head_and_bodiless(false);
	pipelined_with_head_and_bodiless(true);
}

static void upgrade_switches_only_on_101(void)
{
	static const char sw[] = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
				 "Connection: Upgrade\r\n\r\n\x81\x05hello";
	struct gw_resp r;

	gw_resp_init(&r);
	gw_resp_expect(&r, GW_REQ_UPGRADE);
	/* interim 100 and 103 answer nothing */
	EXPECT_EQ(feed(&r, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", false),
		  GW_RESP_OK);
	EXPECT_EQ(gw_resp_pending(&r), 1);
	EXPECT_EQ(feed(&r, sw, false), GW_RESP_SWITCH);
	EXPECT_EQ(gw_resp_pending(&r), 0);
	EXPECT_EQ(gw_resp_feed(&r, "not http", 8), GW_RESP_SWITCH); /* stays switched, reads nothing */

	/* byte by byte: the switch comes at the end of the 101's head */
	gw_resp_init(&r);
	gw_resp_expect(&r, GW_REQ_UPGRADE);
	EXPECT_EQ(feed(&r, sw, true), GW_RESP_SWITCH);

	/* a 101 to a request that asked for no upgrade switches nothing */
	gw_resp_init(&r);
	gw_resp_expect(&r, GW_REQ_PLAIN);
	EXPECT_EQ(feed(&r, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
		       OK200(2) "ok", false), GW_RESP_OK);
	EXPECT_EQ(gw_resp_pending(&r), 0);
	gw_resp_init(&r);
	gw_resp_expect(&r, GW_REQ_PLAIN);
	EXPECT_EQ(feed(&r, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
		       "\x81\x05hello", false), GW_RESP_BAD);
	/* a 101 before the upgrade request's turn (an earlier request still unanswered) */
	gw_resp_init(&r);
	gw_resp_expect(&r, GW_REQ_PLAIN);
	gw_resp_expect(&r, GW_REQ_UPGRADE);
	EXPECT_EQ(feed(&r, "HTTP/1.1 101 Switching Protocols\r\n\r\n", false), GW_RESP_OK);
	EXPECT_EQ(gw_resp_pending(&r), 2);
}

static void connect_switches_on_2xx(void)
{
	struct gw_resp r;

	gw_resp_init(&r);
	gw_resp_expect(&r, GW_REQ_CONNECT);
	/* a 2xx to CONNECT carries no body even with a Content-Length: the tunnel starts */
	EXPECT_EQ(feed(&r, "HTTP/1.1 200 Connection established\r\nContent-Length: 10\r\n\r\n\x16\x03\x01", false),
		  GW_RESP_SWITCH);
	gw_resp_init(&r);
	gw_resp_expect(&r, GW_REQ_CONNECT);
	gw_resp_expect(&r, GW_REQ_PLAIN);
	EXPECT_EQ(feed(&r, "HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 4\r\n\r\nnope"
		       OK200(0), false), GW_RESP_OK);
	EXPECT_EQ(gw_resp_pending(&r), 0);
}

static void garbage_and_limits(void)
{
	struct gw_resp r;
	int i;

	gw_resp_init(&r);
	gw_resp_expect(&r, GW_REQ_PLAIN);
	EXPECT_EQ(feed(&r, "SSH-2.0-OpenSSH_9.2\r\n", false), GW_RESP_BAD);
	gw_resp_init(&r);
	EXPECT_EQ(feed(&r, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n", false),
		  GW_RESP_BAD);
	gw_resp_init(&r);
	for (i = 0; i < GW_RESP_PENDING_MAX; i++)
		EXPECT(gw_resp_expect(&r, GW_REQ_PLAIN) == 0);
	EXPECT(gw_resp_expect(&r, GW_REQ_PLAIN) == -1);
	EXPECT_EQ(feed(&r, OK200(0), false), GW_RESP_OK);
	EXPECT(gw_resp_expect(&r, GW_REQ_UPGRADE) == 0); /* the ring wraps */
	for (i = 0; i < GW_RESP_PENDING_MAX - 1; i++)
		EXPECT_EQ(feed(&r, OK200(0), false), GW_RESP_OK);
	EXPECT_EQ(feed(&r, "HTTP/1.1 101 Switching Protocols\r\n\r\n", false), GW_RESP_SWITCH);
}

int main(void)
{
	RUN(pipelined);
	RUN(upgrade_switches_only_on_101);
	RUN(connect_switches_on_2xx);
	RUN(garbage_and_limits);
	return DONE();
}
