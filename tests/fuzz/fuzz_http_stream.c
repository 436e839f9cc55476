/* fuzz_http_stream.c -- libFuzzer target: a client's bytes through the stream filter's state machine
 * (http_sf_input in src/daemon/http/stream.c: http-parser, the strict head subset, head rewriting,
 * chunked decoding, the body bound, claims, replies and dropped bodies), fed in pieces, with the
 * handler's and evhttp's moves (claim, read, reply) driven by the input too.
 *
 * Besides the sanitizers, its contract is checked: the body buffer never holds more than its bound;
 * raw and dead are for good; and with no stream route and no X-Space-Body-Stream in the input,
 * what evhttp gets is the input itself, byte for byte (a prefix of it).
 * Byte 0: the piece size (0: everything at once); byte 1: flags (1: the filter's output is limited,
 * 2: handlers claim bodies, 4: evhttp answers before the end of a body, 8: no stream routes,
 * 16..: how much a handler reads per round); the rest: the client's bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/body.h"
#include "http/stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MUST(c) do { if (!(c)) { fprintf(stderr, "fuzz_http_stream: %s:%d: %s\n", __FILE__, __LINE__, #c); abort(); } } while (0)
#define BODY_MAX 4096

static void noop(struct http_req *r) { (void)r; }

static const struct http_route routes[] = {
	{ .method = EVHTTP_REQ_PUT, .pattern = "/v1/sandboxes/{}/files", .fn = noop },
	{ .method = EVHTTP_REQ_PUT, .pattern = "/v1/sandboxes/{}/files/tar", .fn = noop },
	{ .method = EVHTTP_REQ_POST, .pattern = "/files", .fn = noop },
};

static bool has_marker(const uint8_t *d, size_t n)
{
	static const char m[] = "x-space-body-stream";

	for (size_t i = 0; i + sizeof(m) - 1 <= n; i++)
		if (strncasecmp((const char *)d + i, m, sizeof(m) - 1) == 0)
			return true;
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct evbuffer *src, *dst, *got, *seen;
	struct http_sf *sf;
	size_t step, at = 0, per_read;
	uint8_t flags;
	bool exact;

	if (size < 2)
		return 0;
	step = data[0] ? data[0] : SIZE_MAX;
	flags = data[1];
	per_read = 1 + (size_t)(flags >> 4) * 512;
	data += 2;
	size -= 2;
	exact = (flags & 8) && !has_marker(data, size);
	sf = http_sf_new(routes, (flags & 8) ? 0 : sizeof(routes) / sizeof(routes[0]), BODY_MAX);
	src = evbuffer_new();
	dst = evbuffer_new();
	got = evbuffer_new();
	seen = evbuffer_new();
	for (int round = 0; round < 100000; round++) {
		enum http_sf_state before = http_sf_state(sf);
		struct http_body *b;
		size_t piece = size - at < step ? size - at : step;

		evbuffer_add(src, data + at, piece);
		at += piece;
		http_sf_input(sf, src, dst, (flags & 1) ? 100 : -1);
		if (before == HTTP_SF_RAW || before == HTTP_SF_DEAD)
			MUST(http_sf_state(sf) == before);
		b = http_sf_body(sf);
		if (b) {
			MUST(http_body_buffered(b) <= BODY_MAX);
			if (flags & 2) {
				struct http_req r = { .body = b };
				MUST(http_body_get(&r) == b);
				http_body_read(b, got, per_read);
				evbuffer_drain(got, evbuffer_get_length(got));
			}
		}
		/* evhttp reads what it got, answers the request, and the filter reads the next one */
		evbuffer_add_buffer(seen, dst);
		if (http_sf_state(sf) == HTTP_SF_WAIT || ((flags & 4) && b && round % 3 == 2))
			http_sf_reply_done(sf);
		if (at == size && piece == 0 && http_sf_state(sf) == before && !evbuffer_get_length(dst) &&
		    (round > 64 || !evbuffer_get_length(src)))
			break;
	}
	if (exact) {
		size_t n = evbuffer_get_length(seen);
		MUST(n <= size && (n == 0 || memcmp(evbuffer_pullup(seen, -1), data, n) == 0));
	}
	evbuffer_free(src);
	evbuffer_free(dst);
	evbuffer_free(got);
	evbuffer_free(seen);
	http_sf_free(sf);
	return 0;
}
