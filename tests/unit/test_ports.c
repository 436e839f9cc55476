/* test_ports.c -- the port proxy's pure parts: names ({port}-{id}.{domain}), the cookie, URLs
 * (ports/port_host.c); each request rewritten for the guest (ports/port_rw.c): credentials and
 * hop-by-hop headers dropped, X-Forwarded-* set, bodies framed as they came, split at any byte,
 * pipelined, upgraded, refused for another host; what listens from /proc/net/tcp text and the
 * port parser (sandbox/ports.c). */
#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ports/ports_front.h"
#include "sandbox/ports.h"

#define ID "sb-0123456789abcdef"
#define HOST "8000-" ID ".localhost:7071"

static void test_port_parse(void)
{
	EXPECT_EQ(port_parse("8000", 4), 8000);
	EXPECT_EQ(port_parse("1", 1), 1);
	EXPECT_EQ(port_parse("65535", 5), 65535);
	EXPECT_EQ(port_parse("65536", 5), -1);
	EXPECT_EQ(port_parse("0", 1), -1);
	EXPECT_EQ(port_parse("080", 3), -1);
	EXPECT_EQ(port_parse("", 0), -1);
	EXPECT_EQ(port_parse("80a", 3), -1);
	EXPECT_EQ(port_parse("-80", 3), -1);
	EXPECT_EQ(port_parse("123456", 6), -1);
}

static bool is(const char *h, const char *domain)
{
	return port_host_is(h, strlen(h), domain);
}

static void test_host_is(void)
{
	EXPECT(is(HOST, "localhost"));
	EXPECT(is("8000-" ID ".LOCALHOST", "localhost"));
	EXPECT(is("8000-" ID ".preview.example.com", "preview.example.com"));
	EXPECT(is("99999-x.localhost", "localhost")); /* claimed: the handler says why it is wrong */
	EXPECT(!is("localhost:7071", "localhost"));
	EXPECT(!is("127.0.0.1:7071", "localhost"));
	EXPECT(!is("a.b.localhost", "localhost"));    /* two labels */
	EXPECT(!is("nodash.localhost", "localhost"));
	EXPECT(!is("8000-" ID ".localhostx", "localhost"));
	EXPECT(!is("8000-" ID "xlocalhost", "localhost"));
	EXPECT(!is(".localhost", "localhost"));
	EXPECT(!is("[::1]:7071", "localhost"));
	EXPECT(!is("", "localhost"));
	EXPECT(!is(HOST, ""));
}

static int parse(const char *h, uint16_t *port, char id[ID_LEN], int *code)
{
	space_err err = { 0 };
	int rc = port_host_parse(h, strlen(h), "localhost", port, id, &err);

	*code = err.code;
	return rc;
}

static void test_host_parse(void)
{
	uint16_t port = 0;
	char id[ID_LEN];
	int code;

	EXPECT_EQ(parse(HOST, &port, id, &code), 0);
	EXPECT_EQ(port, 8000);
	EXPECT(strcmp(id, ID) == 0);
	EXPECT_EQ(parse("3000-SB-0123456789ABCDEF.localhost", &port, id, &code), 0);
	EXPECT(strcmp(id, ID) == 0); /* browsers lowercase names; ids are lowercase */
	EXPECT_EQ(parse("0-" ID ".localhost", &port, id, &code), -1);
	EXPECT_EQ(code, EINVAL);
	EXPECT_EQ(parse("65536-" ID ".localhost", &port, id, &code), -1);
	EXPECT_EQ(code, EINVAL);
	EXPECT_EQ(parse("http-" ID ".localhost", &port, id, &code), -1);
	EXPECT_EQ(code, EINVAL);
	EXPECT_EQ(parse("8000-sb-xyz.localhost", &port, id, &code), -1);
	EXPECT_EQ(code, ENOENT);
	EXPECT_EQ(parse("8000-ss-0123456789abcdef.localhost", &port, id, &code), -1);
	EXPECT_EQ(code, ENOENT);
	EXPECT_EQ(parse("8000-sb-0123456789abcdef0123456789abcdef0123.localhost", &port, id, &code), -1);
	EXPECT_EQ(code, ENOENT);
}

static void test_url(void)
{
	char out[256];

	port_url("http://127.0.0.1:7071", "localhost", 8000, ID, out, sizeof(out));
	EXPECT(strcmp(out, "http://8000-" ID ".localhost:7071/") == 0);
	port_url("https://data.example.com", "preview.example.com", 443, ID, out, sizeof(out));
	EXPECT(strcmp(out, "https://443-" ID ".preview.example.com/") == 0);
	port_url("http://[::1]:7071/", "localhost", 0, "{id}", out, sizeof(out));
	EXPECT(strcmp(out, "http://{port}-{id}.localhost:7071/") == 0);
	port_url("http://[::1]/", "localhost", 1, ID, out, sizeof(out));
	EXPECT(strcmp(out, "http://1-" ID ".localhost/") == 0);
	port_domain("http://127.0.0.1:7071", "localhost", out, sizeof(out));
	EXPECT(strcmp(out, "localhost:7071") == 0);
	port_domain("https://data.example.com/", "preview.example.com", out, sizeof(out));
	EXPECT(strcmp(out, "preview.example.com") == 0);
}

static void test_cookie(void)
{
	char v[80];

	EXPECT(port_cookie_get("a=1; space_port_token=abc; b=2", PORT_COOKIE, v, sizeof(v)) && strcmp(v, "abc") == 0);
	EXPECT(port_cookie_get("space_port_token=x", PORT_COOKIE, v, sizeof(v)) && strcmp(v, "x") == 0);
	EXPECT(!port_cookie_get("xspace_port_token=x", PORT_COOKIE, v, sizeof(v)));
	EXPECT(!port_cookie_get("space_port_token_2=x", PORT_COOKIE, v, sizeof(v)));
	EXPECT(!port_cookie_get("", PORT_COOKIE, v, sizeof(v)));
	EXPECT(!port_cookie_get("space_port_token=0123456789", PORT_COOKIE, v, 4)); /* too long */
}

/* ---- the rewriter ---- */

/* Feeds in in pieces of `step` bytes (0: whole); returns what the guest gets. */
static char *rewrite(const char *in, size_t step, enum port_rw_status *st, size_t *consumed)
{
	struct port_rw rw;
	struct evbuffer *out = evbuffer_new();
	size_t n = strlen(in), at = 0;
	char *s;

	port_rw_init(&rw, HOST, "peer-of-the-test", "http", "e2b_secretkey");
	while (at < n) {
		size_t k = step && n - at > step ? step : n - at, used = port_rw_feed(&rw, in + at, k, out);

		at += used;
		if (rw.status != PORT_RW_OK || used < k)
			break;
	}
	*st = rw.status;
	*consumed = at;
	evbuffer_add(out, "", 1);
	s = strdup((const char *)evbuffer_pullup(out, -1));
	evbuffer_free(out);
	port_rw_free(&rw);
	return s;
}

static bool has(const char *s, const char *needle)
{
	return strstr(s, needle) != NULL;
}

static void test_rw_get(void)
{
	static const char in[] = "GET /a?b=1 HTTP/1.1\r\nHost: " HOST "\r\nUser-Agent: t\r\n"
				 "X-Space-Token: secret1\r\nCookie: a=1; space_port_token=secret2; b=2\r\n"
				 "e2b-traffic-access-token: secret3\r\nX-Space-Cluster-Key: secret4\r\n"
				 "X-Forwarded-For: spoofed-by-the-client\r\nAuthorization: Bearer e2b_secretkey\r\n"
				 "X-Api-Key: e2b_secretkey\r\nConnection: keep-alive, x-hop\r\nKeep-Alive: 5\r\n\r\n";
	enum port_rw_status st;
	size_t used;

	for (size_t step = 0; step <= 7; step++) {
		char *out = rewrite(in, step, &st, &used);

		EXPECT_EQ(st, PORT_RW_OK);
		EXPECT_EQ(used, strlen(in));
		EXPECT(strncmp(out, "GET /a?b=1 HTTP/1.1\r\n", 21) == 0);
		EXPECT(has(out, "Host: " HOST "\r\n"));
		EXPECT(has(out, "User-Agent: t\r\n"));
		EXPECT(has(out, "Cookie: a=1; b=2\r\n"));
		EXPECT(!has(out, "secret"));
		EXPECT(!has(out, "spoofed-by-the-client"));
		EXPECT(!has(out, "Keep-Alive"));
		EXPECT(!has(out, "Connection"));
		EXPECT(has(out, "X-Forwarded-For: peer-of-the-test\r\nX-Forwarded-Proto: http\r\nX-Forwarded-Host: " HOST "\r\n"));
		EXPECT(strcmp(out + strlen(out) - 4, "\r\n\r\n") == 0);
		free(out);
	}
}

static void test_rw_bodies(void)
{
	static const char cl[] = "POST /u HTTP/1.1\r\nHost: " HOST "\r\nContent-Length: 5\r\n\r\nhello"
				 "GET /next HTTP/1.1\r\nHost: " HOST "\r\n\r\n";
	static const char ch[] = "PUT /c HTTP/1.1\r\nHost: " HOST "\r\nTransfer-Encoding: chunked\r\n\r\n"
				 "3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n"
				 "POST /z HTTP/1.1\r\nHost: " HOST "\r\nCookie: space_port_token=s\r\n\r\n";
	enum port_rw_status st;
	size_t used;

	for (size_t step = 0; step <= 5; step++) {
		char *out = rewrite(cl, step, &st, &used);

		EXPECT_EQ(st, PORT_RW_OK);
		EXPECT(has(out, "Content-Length: 5\r\n\r\nhello"));
		EXPECT(has(out, "hello" "GET /next HTTP/1.1\r\n")); /* pipelined, in order */
		free(out);
		out = rewrite(ch, step, &st, &used);
		EXPECT_EQ(st, PORT_RW_OK);
		EXPECT(has(out, "Transfer-Encoding: chunked\r\n"));
		EXPECT(!has(out, "X-Trailer"));
		EXPECT(has(out, "0\r\n\r\nPOST /z HTTP/1.1\r\n"));
		EXPECT(has(out, "Content-Length: 0\r\n")); /* a bodiless POST says so */
		EXPECT(!has(out, "Cookie")); /* nothing left of it */
		/* the decoded body, re-chunked as it came: abcde in some number of chunks */
		const char *b = strstr(out, "\r\n\r\n") + 4;
		char body[16] = "";
		while (b && strncmp(b, "0\r\n", 3) != 0) {
			char *end;
			long n = strtol(b, &end, 16);
			if (n <= 0 || strncmp(end, "\r\n", 2) != 0)
				break;
			strncat(body, end + 2, (size_t)n < sizeof(body) - strlen(body) - 1 ? (size_t)n : 0);
			b = end + 2 + n + 2;
		}
		EXPECT(strcmp(body, "abcde") == 0);
		free(out);
	}
}

static void test_rw_upgrade(void)
{
	static const char in[] = "GET /ws HTTP/1.1\r\nHost: " HOST "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
				 "Sec-WebSocket-Key: k\r\nSec-WebSocket-Version: 13\r\n\r\n\x81\x05hello";
	enum port_rw_status st;
	size_t used;
	char *out = rewrite(in, 0, &st, &used);

	EXPECT_EQ(st, PORT_RW_RAW);
	EXPECT_EQ(used, strlen(in) - 7); /* the frame after the head is the caller's to pass raw */
	EXPECT(has(out, "Connection: Upgrade\r\nUpgrade: websocket\r\n"));
	EXPECT(has(out, "Sec-WebSocket-Key: k\r\n"));
	free(out);
}

static void test_rw_refusals(void)
{
	static const char *const bad[] = {
		/* a second request for another sandbox's port on the same connection */
		"GET / HTTP/1.1\r\nHost: " HOST "\r\n\r\nGET / HTTP/1.1\r\nHost: 8000-sb-ffffffffffffffff.localhost\r\n\r\n",
		"GET / HTTP/1.1\r\n\r\n",                                            /* no Host */
		"GET / HTTP/1.1\r\nHost: " HOST "\r\nHost: " HOST "\r\n\r\n",        /* two */
		"POST / HTTP/1.1\r\nHost: " HOST "\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"CONNECT a:1 HTTP/1.1\r\nHost: " HOST "\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: " HOST "\r\nX: a\rb\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: " HOST "\r\n\r\nGET / HTTP/2.0\r\nHost: " HOST "\r\n\r\n",
		"BLAH\r\n\r\n",
	};
	enum port_rw_status st;
	size_t used;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *out = rewrite(bad[i], 0, &st, &used);

		if (st != PORT_RW_STOP)
			NOTE("case %zu: status %d", i, (int)st);
		EXPECT_EQ(st, PORT_RW_STOP);
		free(out);
	}
}

static bool deny(void *arg)
{
	(*(int *)arg)++;
	return false;
}

/* The credential is asked again before each later request, never before the first. */
static void test_rw_asks_again(void)
{
	static const char in[] = "GET /1 HTTP/1.1\r\nHost: " HOST "\r\n\r\nGET /2 HTTP/1.1\r\nHost: " HOST "\r\n\r\n";
	struct evbuffer *out = evbuffer_new();
	struct port_rw rw;
	int asked = 0;

	port_rw_init(&rw, HOST, "peer-of-the-test", "http", "");
	rw.allow = deny;
	rw.allow_arg = &asked;
	port_rw_feed(&rw, in, strlen(in), out);
	EXPECT_EQ(rw.status, PORT_RW_STOP);
	EXPECT_EQ(asked, 1);
	EXPECT_EQ(rw.requests, 1);
	evbuffer_add(out, "", 1);
	EXPECT(strstr((const char *)evbuffer_pullup(out, -1), "GET /1 ") && !strstr((const char *)evbuffer_pullup(out, -1), "GET /2 "));
	EXPECT(strstr(rw.why, "no longer opens"));
	evbuffer_free(out);
	port_rw_free(&rw);
}

static void test_rw_head_limit(void)
{
	size_t n = HTTP_MAX_HEADERS + 64;
	char *in = malloc(n + 128), *out;
	enum port_rw_status st;
	size_t used;

	strcpy(in, "GET / HTTP/1.1\r\nHost: " HOST "\r\nX-Big: ");
	memset(in + strlen(in), 'a', n);
	in[n] = '\0';
	strcat(in, "\r\n\r\n");
	out = rewrite(in, 1000, &st, &used);
	EXPECT_EQ(st, PORT_RW_STOP);
	EXPECT(strlen(out) == 0);
	free(out);
	free(in);
}

/* ---- what listens ---- */

static void test_listening(void)
{
	static const char text[] =
		"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
		"   0: 00000000:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 35 1\n"
		"   1: 0100007F:0277 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 36 1\n"
		"   2: 1500FEA9:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 37 1\n"
		"   3: 1500FEA9:C350 1600FEA9:3A99 01 00000000:00000000 00:00000000 00000000     0        0 38 1\n"
		"   4: 00000000:1F40 00000000:0000 0A junk\n"
		"   5: ZZZZZZZZ:0050 00000000:0000 0A\n"
		"garbage line\n"
		"   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 0 0 0\n"
		"   1: 00000000000000000000000001000000:0277 00000000000000000000000000000000:0000 0A 0 0 0\n"
		"   2: 0000000000000000FFFF00001500FEA9:0BB8 00000000000000000000000000000000:0000 0A";
	json_t *out = json_array();
	int want[][2] = { { 8000, 1 }, { 631, 0 }, { 22, 1 }, { 8080, 1 }, { 3000, 1 } };

	port_listening_parse(text, strlen(text), out);
	EXPECT_EQ(json_array_size(out), 5);
	for (size_t i = 0; i < 5 && i < json_array_size(out); i++) {
		json_t *e = json_array_get(out, i);

		EXPECT_EQ(json_integer_value(json_object_get(e, "port")), want[i][0]);
		EXPECT_EQ(json_is_true(json_object_get(e, "reachable")), want[i][1]);
	}
	EXPECT(strcmp(json_string_value(json_object_get(json_array_get(out, 1), "address")), "127.0.0.1") == 0);
	EXPECT(strcmp(json_string_value(json_object_get(json_array_get(out, 2), "address")), "169.254.0.21") == 0);
	EXPECT(strcmp(json_string_value(json_object_get(json_array_get(out, 4), "address")), "::ffff:169.254.0.21") == 0);
	json_decref(out);
	out = json_array();
	port_listening_parse("", 0, out);
	port_listening_parse("\n\n\n", 3, out);
	port_listening_parse("0: 0:0 0:0 0A", 13, out);
	EXPECT_EQ(json_array_size(out), 0);
	json_decref(out);
}

int main(void)
{
	RUN(test_port_parse);
	RUN(test_host_is);
	RUN(test_host_parse);
	RUN(test_url);
	RUN(test_cookie);
	RUN(test_rw_get);
	RUN(test_rw_bodies);
	RUN(test_rw_upgrade);
	RUN(test_rw_refusals);
	RUN(test_rw_asks_again);
	RUN(test_rw_head_limit);
	RUN(test_listening);
	return DONE();
}
