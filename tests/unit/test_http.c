/* test_http.c -- the HTTP layer's pure parts: routing, path decoding, addresses, bearer tokens,
 * numbers, JSON bodies and error bodies, state filters, signal names, SSE framing and offsets */
#include <event2/buffer.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>

#include "daemon/api/api.h"
#include "daemon/dataplane/dataplane.h"
#include "daemon/http/http.h"
#include "daemon/model/model.h"
#include "harness.h"

static void route_a(struct http_req *r) { (void)r; }
static void route_b(struct http_req *r) { (void)r; }
static void route_c(struct http_req *r) { (void)r; }
static void route_d(struct http_req *r) { (void)r; }

static const struct http_route routes[] = {
	{ .method = EVHTTP_REQ_GET, .pattern = "/v1/sandboxes", .fn = route_a },
	{ .method = EVHTTP_REQ_POST, .pattern = "/v1/sandboxes", .fn = route_b },
	{ .method = EVHTTP_REQ_GET, .pattern = "/v1/sandboxes/{}", .fn = route_c },
	{ .method = EVHTTP_REQ_DELETE, .pattern = "/v1/sandboxes/{}", .fn = route_c },
	{ .method = EVHTTP_REQ_GET, .pattern = "/v1/sandboxes/{}/sessions/{}", .fn = route_d },
	{ .method = EVHTTP_REQ_POST, .pattern = "/v1/sandboxes/{}/sessions/{}/token", .fn = route_d },
};
#define NROUTES (sizeof(routes) / sizeof(routes[0]))

/* Route method+path; returns the match kind and fills *fn / allow. */
static enum http_match route(enum evhttp_cmd_type m, const char *path, struct http_req *r, http_handler *fn,
			     char *allow)
{
	const struct http_route *hit = NULL;
	enum http_match k;

	memset(r, 0, sizeof(*r));
	r->method = m;
	if (http_split_path(r, path) < 0)
		return HTTP_NO_ROUTE;
	k = http_route_find(routes, NROUTES, r, &hit, allow, 64);
	*fn = hit ? hit->fn : NULL;
	return k;
}

static void test_routing(void)
{
	struct http_req r;
	http_handler fn;
	char allow[64];

	CHECK(route(EVHTTP_REQ_GET, "/v1/sandboxes", &r, &fn, allow) == HTTP_MATCH && fn == route_a, "GET list");
	CHECK(route(EVHTTP_REQ_POST, "/v1/sandboxes/", &r, &fn, allow) == HTTP_MATCH && fn == route_b,
	      "a trailing slash is ignored");
	CHECK(route(EVHTTP_REQ_GET, "/v1/sandboxes/sb-1", &r, &fn, allow) == HTTP_MATCH && fn == route_c &&
	      r.nparam == 1 && !strcmp(r.param[0], "sb-1"), "a {} captures its segment");
	CHECK(route(EVHTTP_REQ_POST, "/v1/sandboxes/sb-1/sessions/ss-2/token", &r, &fn, allow) == HTTP_MATCH &&
	      r.nparam == 2 && !strcmp(r.param[0], "sb-1") && !strcmp(r.param[1], "ss-2"), "two captures");
	CHECK(route(EVHTTP_REQ_PUT, "/v1/sandboxes", &r, &fn, allow) == HTTP_BAD_METHOD &&
	      !strcmp(allow, "GET, POST"), "wrong method: 405 with Allow (%s)", allow);
	CHECK(route(EVHTTP_REQ_POST, "/v1/sandboxes/x", &r, &fn, allow) == HTTP_BAD_METHOD &&
	      !strcmp(allow, "GET, DELETE"), "Allow lists each method once (%s)", allow);
	CHECK(route(EVHTTP_REQ_GET, "/v1/sandboxes/x/y", &r, &fn, allow) == HTTP_NO_ROUTE, "unknown path: 404");
	CHECK(route(EVHTTP_REQ_GET, "/v1", &r, &fn, allow) == HTTP_NO_ROUTE, "a prefix is not a route");
	CHECK(route(EVHTTP_REQ_GET, "/v1/sandboxesx", &r, &fn, allow) == HTTP_NO_ROUTE, "segments match whole");
	CHECK(route(EVHTTP_REQ_GET, "/", &r, &fn, allow) == HTTP_NO_ROUTE, "root: 404");
	CHECK(route(EVHTTP_REQ_GET, "/v1/sandboxes/sb%2D1", &r, &fn, allow) == HTTP_MATCH &&
	      !strcmp(r.param[0], "sb-1"), "segments are percent-decoded");
	CHECK(route(EVHTTP_REQ_GET, "/v1//sandboxes", &r, &fn, allow) == HTTP_NO_ROUTE, "an empty segment stays one");
	CHECK(route(EVHTTP_REQ_GET, "/v1/sandboxes//", &r, &fn, allow) == HTTP_MATCH && fn == route_c &&
	      r.param[0][0] == '\0', "an empty id is captured empty (and then found nowhere)");
}

static void test_split(void)
{
	struct http_req r;
	char long_path[HTTP_MAX_PATH + 10];
	char buf[32];

	memset(&r, 0, sizeof(r));
	CHECK(http_split_path(&r, "/a%3Ab%40c/d") == 0 && r.nseg == 2 && !strcmp(r.seg[0], "a:b@c"),
	      "%%3A and %%40 decode");
	CHECK(http_split_path(&r, "/a%2Fb") == -2, "an escaped '/' is refused");
	CHECK(http_split_path(&r, "/a%00b") == -2, "an escaped NUL is refused");
	CHECK(http_split_path(&r, "/a%4") == -2 && http_split_path(&r, "/a%zz") == -2, "a short or bad escape");
	CHECK(http_split_path(&r, "relative") == -1 && http_split_path(&r, NULL) == -1, "not a path");
	CHECK(http_split_path(&r, "/a/b/c/d/e/f/g/h/i/j/k/l/m") == -1, "too many segments");
	memset(long_path, 'a', sizeof(long_path));
	long_path[0] = '/';
	long_path[sizeof(long_path) - 1] = '\0';
	CHECK(http_split_path(&r, long_path) == -1, "too long");
	strcpy(buf, "%41%62+c");
	CHECK(http_pct_decode(buf) == 0 && !strcmp(buf, "Ab+c"), "'+' stays '+' in a path");
}

static void test_addr(void)
{
	space_err err = { 0 };
	char host[64];
	uint16_t port;

	CHECK(http_parse_addr("127.0.0.1:7070", host, sizeof(host), &port, &err) == 0 &&
	      !strcmp(host, "127.0.0.1") && port == 7070, "ADDR:PORT");
	CHECK(http_parse_addr("[::1]:8080", host, sizeof(host), &port, &err) == 0 && !strcmp(host, "::1") &&
	      port == 8080, "[v6]:PORT");
	CHECK(http_parse_addr(":9", host, sizeof(host), &port, &err) == 0 && host[0] == '\0' && port == 9,
	      ":PORT is every address");
	CHECK(http_parse_addr("localhost", host, sizeof(host), &port, &err) == -1 && err.code == EINVAL,
	      "no port: %s", err.msg);
	CHECK(http_parse_addr("a:70000", host, sizeof(host), &port, &err) == -1, "port out of range");
	CHECK(http_parse_addr("a:-1", host, sizeof(host), &port, &err) == -1, "negative port");
	CHECK(http_parse_addr("[::1]8080", host, sizeof(host), &port, &err) == -1, "bad brackets");
}

static void test_bearer(void)
{
	char tok[16];

	CHECK(http_bearer("Bearer abc", tok, sizeof(tok)) == 0 && !strcmp(tok, "abc"), "Bearer X");
	CHECK(http_bearer("bearer \t abc  ", tok, sizeof(tok)) == 0 && !strcmp(tok, "abc"),
	      "case-insensitive scheme, spaces around");
	CHECK(http_bearer("Bearer", tok, sizeof(tok)) == -1, "no token");
	CHECK(http_bearer("Bearer ", tok, sizeof(tok)) == -1, "empty token");
	CHECK(http_bearer("Bearer a b", tok, sizeof(tok)) == -1, "two tokens");
	CHECK(http_bearer("Basic abc", tok, sizeof(tok)) == -1, "another scheme");
	CHECK(http_bearer("Bearerabc", tok, sizeof(tok)) == -1, "no separator");
	CHECK(http_bearer("Bearer 0123456789abcdef", tok, sizeof(tok)) == -1, "too long for the buffer");
	CHECK(http_bearer(NULL, tok, sizeof(tok)) == -1, "absent");
	CHECK(http_secret_equal("k1", "k1") && !http_secret_equal("k1", "k2") && !http_secret_equal("k1", "k10") &&
	      !http_secret_equal("", "k") && !http_secret_equal(NULL, "k"), "secret comparison");
}

static void test_numbers(void)
{
	uint64_t v;

	CHECK(http_parse_u64("0", &v) == 0 && v == 0, "0");
	CHECK(http_parse_u64("18446744073709551615", &v) == 0 && v == UINT64_MAX, "UINT64_MAX");
	CHECK(http_parse_u64("18446744073709551616", &v) == -1, "overflow");
	CHECK(http_parse_u64("", &v) == -1 && http_parse_u64("-1", &v) == -1 && http_parse_u64("+1", &v) == -1 &&
	      http_parse_u64(" 1", &v) == -1 && http_parse_u64("1x", &v) == -1 && http_parse_u64(NULL, &v) == -1,
	      "no signs, spaces or junk");
}

static void test_json(void)
{
	space_err err = { 0 };
	json_t *j, *b;
	char *s;

	j = http_parse_json_object("", 0, &err);
	CHECK(json_is_object(j) && json_object_size(j) == 0, "an empty body is {}");
	json_decref(j);
	j = http_parse_json_object("{\"a\":1}", 7, &err);
	CHECK(j && json_integer_value(json_object_get(j, "a")) == 1, "an object");
	json_decref(j);
	CHECK(!http_parse_json_object("{\"a\":\n x}", 9, &err) && err.code == EINVAL &&
	      !strncmp(err.msg, "malformed JSON at line 2 col ", 29), "malformed: %s", err.msg);
	CHECK(!http_parse_json_object("[1]", 3, &err) && !strcmp(err.msg, "request body must be a JSON object"),
	      "an array is refused");
	CHECK(!http_parse_json_object("{\"a\":1,\"a\":2}", 13, &err), "duplicate keys are refused: %s", err.msg);
	CHECK(!http_parse_json_object("{\"a\":\"\xff\"}", 9, &err), "invalid UTF-8 is refused");
	CHECK(!http_parse_json_object("{\"a\":\"\\u0000\"}", 14, &err), "an escaped NUL is refused");
	CHECK(!http_parse_json_object("{} {}", 5, &err), "trailing data is refused");

	b = http_error_body("not_found", "no sandbox 'x'");
	s = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
	CHECK(s && !strcmp(s, "{\"error\":{\"code\":\"not_found\",\"message\":\"no sandbox 'x'\"}}"),
	      "error body shape: %s", s);
	free(s);
	json_decref(b);
	b = http_error_body("not_found", "no template '\xff\xfe'");
	s = json_dumps(b, JSON_COMPACT);
	CHECK(s && strstr(s, "no template '?" "?'"), "bytes that are not UTF-8 are replaced: %s", s);
	free(s);
	json_decref(b);
}

static void test_states(void)
{
	space_err err = { 0 };
	unsigned m;

	CHECK(api_parse_states(NULL, &m, &err) == 0 && m == 0, "no filter: 0 (all but deleted)");
	CHECK(api_parse_states("running,creating", &m, &err) == 0 &&
	      m == ((1u << SB_RUNNING) | (1u << SB_CREATING)), "two states");
	CHECK(api_parse_states("deleted", &m, &err) == 0 && m == 1u << SB_DELETED, "deleted can be asked for");
	CHECK(api_parse_states("running,bogus", &m, &err) == -1 && err.code == EINVAL &&
	      strstr(err.msg, "bogus"), "unknown state: %s", err.msg);
	CHECK(api_parse_states("", &m, &err) == -1 && api_parse_states(",", &m, &err) == -1, "empty filter");
}

static void test_signals(void)
{
	space_err err = { 0 };
	json_t *v;

	CHECK(signal_from_name("SIGTERM") == SIGTERM && signal_from_name("term") == SIGTERM &&
	      signal_from_name("SIGKILL") == SIGKILL && signal_from_name("SIGUSR2") == SIGUSR2 &&
	      signal_from_name("SIGCONT") == SIGCONT && signal_from_name("SIGTSTP") == SIGTSTP &&
	      signal_from_name("WINCH") == SIGWINCH, "names, with or without SIG, any case");
	CHECK(signal_from_name("SIGFOO") == -1 && signal_from_name("") == -1 && signal_from_name("SIG") == -1,
	      "unknown names");
	v = json_integer(9);
	CHECK(signal_parse(v, &err) == 9, "a number");
	json_decref(v);
	v = json_integer(65);
	CHECK(signal_parse(v, &err) == -1 && err.code == EINVAL, "65 is out of range");
	json_decref(v);
	v = json_integer(0);
	CHECK(signal_parse(v, &err) == -1, "0 is out of range");
	json_decref(v);
	v = json_string("SIGHUP");
	CHECK(signal_parse(v, &err) == SIGHUP, "a name");
	json_decref(v);
	v = json_string("15");
	CHECK(signal_parse(v, &err) == 15, "a number in a string");
	json_decref(v);
	v = json_string("SIGNOPE");
	CHECK(signal_parse(v, &err) == -1 && strstr(err.msg, "SIGNOPE"), "unknown name: %s", err.msg);
	json_decref(v);
	v = json_real(9.0);
	CHECK(signal_parse(v, &err) == -1, "a float is refused");
	json_decref(v);
	CHECK(signal_parse(NULL, &err) == -1, "missing");
}

static void test_sse(void)
{
	struct evbuffer *b = evbuffer_new();
	space_err err = { 0 };
	uint64_t off;
	char *s;
	size_t n;

	CHECK(sse_format_data(b, "stdout", 5, "hello", 5) == 0, "format an event");
	n = evbuffer_get_length(b);
	s = calloc(1, n + 1);
	evbuffer_remove(b, s, n);
	CHECK(!strcmp(s, "event: stdout\nid: 5\ndata: aGVsbG8=\n\n"), "SSE framing with base64 data");
	free(s);
	CHECK(sse_format_data(b, "stderr", 18446744073709551615ull, "\x00\xff", 2) == 0, "binary bytes");
	n = evbuffer_get_length(b);
	s = calloc(1, n + 1);
	evbuffer_remove(b, s, n);
	CHECK(!strcmp(s, "event: stderr\nid: 18446744073709551615\ndata: AP8=\n\n"), "binary framing");
	free(s);
	{
		static unsigned char big[65536], dec[65536 + 3];
		char *line;
		for (size_t i = 0; i < sizeof(big); i++)
			big[i] = (unsigned char)(i * 7);
		sse_format_data(b, "stdout", 65536, big, sizeof(big));
		n = evbuffer_get_length(b);
		s = calloc(1, n + 1);
		evbuffer_remove(b, s, n);
		line = strstr(s, "data: ") + 6;
		*strchr(line, '\n') = '\0';
		CHECK(EVP_DecodeBlock(dec, (unsigned char *)line, (int)strlen(line)) == 65536 + 2 &&
		      !memcmp(dec, big, sizeof(big)), "a 64 KiB chunk round-trips through one data line");
		free(s);
	}
	evbuffer_free(b);

	CHECK(sse_start_offset(NULL, NULL, 10, &off, &err) == 0 && off == 0, "default offset 0");
	CHECK(sse_start_offset("7", "3", 10, &off, &err) == 0 && off == 7, "Last-Event-ID wins over ?offset");
	CHECK(sse_start_offset("", "3", 10, &off, &err) == 0 && off == 3, "an empty Last-Event-ID is absent");
	CHECK(sse_start_offset(NULL, "10", 10, &off, &err) == 0 && off == 10, "the end is a valid offset");
	CHECK(sse_start_offset(NULL, "11", 10, &off, &err) == -1 && err.code == EINVAL, "beyond: %s", err.msg);
	CHECK(sse_start_offset("x", NULL, 10, &off, &err) == -1 && err.code == EINVAL, "not a number");
	CHECK(sse_start_offset(NULL, "-1", 10, &off, &err) == -1, "negative");
}

int main(void)
{
	test_routing();
	test_split();
	test_addr();
	test_bearer();
	test_numbers();
	test_json();
	test_states();
	test_signals();
	test_sse();
	return DONE();
}
