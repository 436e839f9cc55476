/* test_proxy.c -- the pure parts of http/proxy.c: upstream URLs and the headers the relay drops */
#include <string.h>

#include "harness.h"
#include "http/proxy.h"

static void test_hostport(void)
{
	char hp[96];
	space_err err = { 0 };

	CHECK(http_proxy_hostport("http://10.0.0.5:7070", hp, sizeof(hp), &err) == 0 &&
		      strcmp(hp, "10.0.0.5:7070") == 0,
	      "http://IP:PORT gives IP:PORT (%s)", hp);
	CHECK(http_proxy_hostport("http://[::1]:7071/", hp, sizeof(hp), &err) == 0 && strcmp(hp, "[::1]:7071") == 0,
	      "an IPv6 literal and one trailing slash (%s)", hp);
	err_clear(&err);
	CHECK(http_proxy_hostport("https://10.0.0.5:7070", hp, sizeof(hp), &err) == 0 && strcmp(hp, "10.0.0.5:7070") == 0,
	      "https://IP:PORT too: a node serving TLS (%s)", hp);
	err_clear(&err);
	CHECK(http_proxy_hostport("ftp://10.0.0.5:7070", hp, sizeof(hp), &err) < 0 && err.code == EINVAL,
	      "another scheme is refused (%s)", err.msg);
	err_clear(&err);
	CHECK(http_proxy_hostport("http://10.0.0.5:7070/v1", hp, sizeof(hp), &err) < 0 && err.code == EINVAL,
	      "a URL with a path is refused (%s)", err.msg);
	err_clear(&err);
	CHECK(http_proxy_hostport("http://", hp, sizeof(hp), &err) < 0, "an empty host is refused");
	err_clear(&err);
	char longurl[200] = "http://";
	memset(longurl + 7, '1', 150);
	longurl[157] = '\0';
	CHECK(http_proxy_hostport(longurl, hp, sizeof(hp), &err) < 0, "a host too long for the buffer is refused");
}

static void test_drops(void)
{
	static const char *const dropped[] = { "Connection", "keep-alive", "Proxy-Connection", "Proxy-Authorization",
					       "TE", "Trailer", "transfer-encoding", "Upgrade", "Host",
					       "Content-Length", "X-Forwarded-For", "X-Space-Cluster-Key" };
	static const char *const kept[] = { "Authorization", "Content-Type", "E2b-Sandbox-Id", "X-Access-Token",
					    "Last-Event-ID", "Sec-WebSocket-Key", "Sec-WebSocket-Version", "Range" };
	int bad = 0;

	for (size_t i = 0; i < sizeof(dropped) / sizeof(dropped[0]); i++)
		bad += !http_proxy_drops_header(dropped[i]);
	CHECK(bad == 0, "hop-by-hop and rewritten headers are dropped, whatever their case");
	bad = 0;
	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
		bad += http_proxy_drops_header(kept[i]);
	CHECK(bad == 0, "end-to-end headers (tokens, E2B's, resume offsets, the WebSocket handshake) pass");
}

int main(void)
{
	test_hostport();
	test_drops();
	return DONE();
}
