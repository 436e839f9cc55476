/* test_sse.c -- spacectl's server-sent-events parser and base64 decoder:
 * events split at arbitrary chunk boundaries, multi-line data, id, event,
 * comments, CR/LF/CRLF, limits */
#include <stdint.h>
#include <string.h>

#include "cli/b64.h"
#include "cli/sse.h"
#include "harness.h"

/* Every dispatched event, as "type|id|data;" (data bytes as is). */
struct rec {
	char *s;
	size_t len, cap;
	int n;
	int stop_after; /* stop once this many events were seen; 0 = never */
};

static void rec_put(struct rec *r, const char *p, size_t n)
{
	if (r->len + n + 1 > r->cap) {
		r->cap = (r->len + n + 1) * 2;
		r->s = realloc(r->s, r->cap);
		if (!r->s)
			abort();
	}
	memcpy(r->s + r->len, p, n);
	r->len += n;
	r->s[r->len] = '\0';
}

static int on_event(const struct sse_event *ev, void *arg)
{
	struct rec *r = arg;

	rec_put(r, ev->type, strlen(ev->type));
	rec_put(r, "|", 1);
	rec_put(r, ev->id, strlen(ev->id));
	rec_put(r, "|", 1);
	rec_put(r, ev->data, ev->data_len);
	rec_put(r, ";", 1);
	/* The count and the NUL terminator promised by sse.h agree. */
	if (ev->data[ev->data_len] != '\0')
		abort();
	r->n++;
	return r->stop_after && r->n >= r->stop_after;
}

static void rec_free(struct rec *r)
{
	free(r->s);
	memset(r, 0, sizeof(*r));
}

/* Parse `in` in one go; returns the record (caller frees). */
static enum sse_status parse_whole(const char *in, size_t n, struct rec *r, size_t max)
{
	struct sse_parser p;
	enum sse_status st;

	memset(r, 0, sizeof(*r));
	rec_put(r, "", 0);
	sse_parser_init(&p, max, on_event, r);
	st = sse_parser_feed(&p, in, n);
	sse_parser_free(&p);
	return st;
}

static bool parses_to(const char *in, const char *want)
{
	struct rec r;
	bool ok;

	parse_whole(in, strlen(in), &r, 0);
	ok = strcmp(r.s, want) == 0;
	if (!ok)
		NOTE("got '%s', want '%s'", r.s, want);
	rec_free(&r);
	return ok;
}

/* Feed in pieces whose lengths follow `cuts` cyclically. */
static void parse_chunked(const char *in, size_t n, const size_t *cuts, size_t ncuts,
			  struct rec *r)
{
	struct sse_parser p;
	size_t off = 0, k = 0;

	memset(r, 0, sizeof(*r));
	rec_put(r, "", 0);
	sse_parser_init(&p, 0, on_event, r);
	while (off < n) {
		size_t len = cuts[k++ % ncuts];
		char *copy;

		if (len > n - off)
			len = n - off;
		/* A heap copy of exactly the chunk: ASan catches any read
		 * past its end. */
		copy = malloc(len ? len : 1);
		memcpy(copy, in + off, len);
		sse_parser_feed(&p, copy, len);
		free(copy);
		off += len;
	}
	sse_parser_free(&p);
}

static const char stream[] =
	"\xEF\xBB\xBF: hello, a comment\r\n"
	"retry: 3000\n"
	"event: stdout\r\n"
	"id: 5\r\n"
	"data: aGVsbG8=\r\n"
	"\r\n"
	"event: stderr\r"
	"id: 9\r"
	"data:b29wcw==\r"
	"\r"
	": keepalive\n"
	"\n"
	"data: line one\n"
	"data:  two leading spaces, one kept\n"
	"data\n"
	"unknown: field\n"
	"\n"
	"event: exit\n"
	"id: 12\n"
	"data: {\"exit_code\":0,\"signal\":null}\n"
	"\n"
	"event: partial\n"
	"data: never dispatched";

static const char stream_want[] =
	"stdout|5|aGVsbG8=;"
	"stderr|9|b29wcw==;"
	"message|9|line one\n two leading spaces, one kept\n;"
	"exit|12|{\"exit_code\":0,\"signal\":null};";

static void test_basics(void)
{
	CHECK(parses_to("data: hi\n\n", "message||hi;"), "LF: one event, default type");
	CHECK(parses_to("data: hi\r\n\r\n", "message||hi;"), "CRLF line ends");
	CHECK(parses_to("data: hi\r\r", "message||hi;"), "CR line ends");
	CHECK(parses_to("data: a\ndata: b\ndata:\n\n", "message||a\nb\n;"),
	      "multi-line data joined with LF, trailing LF of the last line removed");
	CHECK(parses_to("data:\n\n", "message||;"), "empty data still dispatches");
	CHECK(parses_to("data\n\n", "message||;"), "field without colon: empty value");
	CHECK(parses_to("event: x\n\ndata: y\n\n", "message||y;"),
	      "event type reset by a blank line without data");
	CHECK(parses_to("event: x\ndata: 1\n\ndata: 2\n\n", "x||1;message||2;"),
	      "event type applies to one event only");
	CHECK(parses_to("id: 7\ndata: a\n\ndata: b\n\n", "message|7|a;message|7|b;"),
	      "id persists across events");
	CHECK(parses_to("id: 7\ndata: a\n\nid\ndata: b\n\n", "message|7|a;message||b;"),
	      "empty id resets the last id");
	CHECK(parses_to(": c1\n:\ndata: a\n: c2\n\n", "message||a;"), "comments ignored");
	CHECK(parses_to("data:   x  \n\n", "message||  x  ;"), "only one leading space stripped");
	CHECK(parses_to("data: a:b: c\n\n", "message||a:b: c;"), "colons in the value kept");
	CHECK(parses_to("\n\n\n", ""), "blank lines alone dispatch nothing");
	CHECK(parses_to("data: x", ""), "unterminated event not dispatched");
	CHECK(parses_to("data: x\n", ""), "event without its blank line not dispatched");
	CHECK(parses_to("Data: x\n\n", ""), "field names are case-sensitive");
	CHECK(parses_to("\xEF\xBB\xBF" "data: x\n\n", "message||x;"), "leading BOM skipped");
	CHECK(parses_to("data: \xEF\xBB\xBFx\n\n", "message||\xEF\xBB\xBFx;"),
	      "BOM kept when not at stream start");
	CHECK(parses_to(stream, stream_want), "the mixed sample stream");
}

static void test_id_and_retry(void)
{
	struct sse_parser p;
	struct rec r = { 0 };
	static const char nul_id[] = "id: 3\ndata: a\n\nid: 4\0x\ndata: b\n\n";

	rec_put(&r, "", 0);
	sse_parser_init(&p, 0, on_event, &r);
	CHECK(strcmp(sse_parser_last_id(&p), "") == 0, "no id before any");
	sse_parser_feed(&p, "retry: 1500\nretry: x1\nid: 42\n", 29);
	CHECK(p.retry_ms == 1500, "retry parsed, non-digits ignored (%ld)", p.retry_ms);
	CHECK(strcmp(sse_parser_last_id(&p), "42") == 0, "id seen before dispatch");
	sse_parser_feed(&p, "data: x", 7);
	sse_parser_reset(&p);
	CHECK(strcmp(sse_parser_last_id(&p), "42") == 0, "reset keeps the last id");
	sse_parser_feed(&p, "\n\n", 2);
	CHECK(r.n == 0, "reset drops the partial event");
	sse_parser_feed(&p, "data: y\n\n", 9);
	CHECK(strcmp(r.s, "message|42|y;") == 0, "after reset parsing goes on: '%s'", r.s);
	sse_parser_free(&p);
	rec_free(&r);

	parse_whole(nul_id, sizeof(nul_id) - 1, &r, 0);
	CHECK(strcmp(r.s, "message|3|a;message|3|b;") == 0, "an id containing NUL is ignored");
	rec_free(&r);
}

static void test_chunking(void)
{
	size_t n = sizeof(stream) - 1, i, j;
	struct rec r;
	bool all = true;

	/* Every single split point, and every pair of split points. */
	for (i = 0; i <= n && all; i++) {
		for (j = i; j <= n; j++) {
			struct sse_parser p;

			memset(&r, 0, sizeof(r));
			rec_put(&r, "", 0);
			sse_parser_init(&p, 0, on_event, &r);
			sse_parser_feed(&p, stream, i);
			sse_parser_feed(&p, stream + i, j - i);
			sse_parser_feed(&p, stream + j, n - j);
			sse_parser_free(&p);
			if (strcmp(r.s, stream_want) != 0) {
				NOTE("split at %zu and %zu: '%s'", i, j, r.s);
				all = false;
			}
			rec_free(&r);
			if (!all)
				break;
		}
	}
	CHECK(all, "same events for every 3-way split of the sample stream");

	for (i = 1; i <= 7; i++) {
		size_t cuts[] = { i };

		parse_chunked(stream, n, cuts, 1, &r);
		CHECK(strcmp(r.s, stream_want) == 0, "chunks of %zu bytes", i);
		rec_free(&r);
	}
	{
		size_t cuts[] = { 0, 1, 0, 3, 2, 0, 5 };

		parse_chunked(stream, n, cuts, sizeof(cuts) / sizeof(cuts[0]), &r);
		CHECK(strcmp(r.s, stream_want) == 0, "irregular chunks including empty ones");
		rec_free(&r);
	}
	CHECK(parses_to("event: x\r\ndata: y\r\n\r\n", "x||y;"), "CRLF in one chunk");
	{
		struct sse_parser p;

		memset(&r, 0, sizeof(r));
		rec_put(&r, "", 0);
		sse_parser_init(&p, 0, on_event, &r);
		/* The LF after a chunk-final CR must not count as a blank line,
		 * which would reset the event type. */
		sse_parser_feed(&p, "event: x\r", 9);
		sse_parser_feed(&p, "\ndata: y\r", 9);
		sse_parser_feed(&p, "\n\r", 2);
		sse_parser_feed(&p, "\n", 1);
		sse_parser_free(&p);
		CHECK(strcmp(r.s, "x||y;") == 0, "CRLF split across chunks: '%s'", r.s);
		rec_free(&r);
	}
}

/* A long stream of base64 output events, fed in pseudo-random chunks. */
static void test_random_chunks(void)
{
	char *in = NULL, *want = NULL;
	size_t inlen = 0, wantlen = 0, i;
	FILE *fi = open_memstream(&in, &inlen), *fw = open_memstream(&want, &wantlen);
	uint32_t seed = 12345;
	struct rec r;
	bool all = true;
	int round;

	for (i = 0; i < 500; i++) {
		const char *eol = (i % 3 == 0) ? "\r\n" : (i % 3 == 1) ? "\n" : "\r";
		size_t len = (i * 7919) % 3000;

		fprintf(fi, "event: %s%sid: %zu%sdata: ", i % 2 ? "stderr" : "stdout", eol,
			i * 100, eol);
		fprintf(fw, "%s|%zu|", i % 2 ? "stderr" : "stdout", i * 100);
		for (size_t k = 0; k < len; k++) {
			char ch = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[(i + k) % 64];

			fputc(ch, fi);
			fputc(ch, fw);
		}
		fprintf(fi, "%s", eol);
		if (i % 10 == 0)
			fprintf(fi, ": keepalive%s", eol);
		fprintf(fi, "%s", eol);
		fprintf(fw, ";");
	}
	fclose(fi);
	fclose(fw);

	for (round = 0; round < 20 && all; round++) {
		size_t cuts[64];

		for (i = 0; i < 64; i++) {
			seed = seed * 1103515245u + 12345u;
			cuts[i] = (seed >> 16) % (round < 10 ? 17 : 5000);
		}
		parse_chunked(in, inlen, cuts, 64, &r);
		if (strcmp(r.s, want) != 0) {
			NOTE("round %d differs", round);
			all = false;
		}
		rec_free(&r);
	}
	CHECK(all, "500 events, 20 rounds of random chunk sizes, mixed line ends");
	free(in);
	free(want);
}

static void test_limits(void)
{
	struct sse_parser p;
	struct rec r = { 0 };
	char big[300];
	enum sse_status st;

	memset(big, 'x', sizeof(big));
	rec_put(&r, "", 0);
	sse_parser_init(&p, 100, on_event, &r);
	st = sse_parser_feed(&p, "data: ", 6);
	CHECK(st == SSE_OK, "short prefix accepted");
	st = sse_parser_feed(&p, big, 50);
	CHECK(st == SSE_OK, "line under the limit accepted");
	st = sse_parser_feed(&p, big, 50);
	CHECK(st == SSE_ETOOLONG, "line over the limit across chunks rejected");
	st = sse_parser_feed(&p, "\n\n", 2);
	CHECK(st == SSE_ETOOLONG && r.n == 0, "the error is sticky");
	CHECK(strstr(sse_parser_strerror(SSE_ETOOLONG), "limit") != NULL,
	      "error message: %s", sse_parser_strerror(SSE_ETOOLONG));
	sse_parser_free(&p);
	rec_free(&r);

	/* A line over the limit inside one chunk. */
	{
		char line[200] = "data: ";

		memset(line + 6, 'y', 150);
		line[156] = '\n';
		st = parse_whole(line, 157, &r, 100);
		CHECK(st == SSE_ETOOLONG, "long line within one chunk rejected");
		rec_free(&r);
	}
	/* Many short data lines adding up beyond the limit. */
	{
		char *s = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&s, &len);

		for (int k = 0; k < 20; k++)
			fprintf(f, "data: 0123456789\n");
		fprintf(f, "\n");
		fclose(f);
		st = parse_whole(s, len, &r, 100);
		CHECK(st == SSE_ETOOLONG && r.n == 0, "event data over the limit rejected");
		rec_free(&r);
		st = parse_whole(s, len, &r, 1000);
		CHECK(st == SSE_OK && r.n == 1, "the same event under a larger limit");
		rec_free(&r);
		free(s);
	}
	/* A long line exactly at the limit. */
	{
		char line[102] = "data:";

		memset(line + 5, 'z', 95);
		line[100] = '\n';
		line[101] = '\n';
		st = parse_whole(line, 102, &r, 100);
		CHECK(st == SSE_OK && r.n == 1, "a line of exactly the limit accepted");
		rec_free(&r);
	}
}

static void test_stop(void)
{
	struct sse_parser p;
	struct rec r = { 0 };
	enum sse_status st;
	static const char in[] = "data: 1\n\ndata: 2\n\ndata: 3\n\n";

	rec_put(&r, "", 0);
	r.stop_after = 2;
	sse_parser_init(&p, 0, on_event, &r);
	st = sse_parser_feed(&p, in, sizeof(in) - 1);
	CHECK(st == SSE_STOP, "callback's stop reported");
	CHECK(strcmp(r.s, "message||1;message||2;") == 0, "no event parsed after the stop");
	sse_parser_free(&p);
	rec_free(&r);
}

static bool b64_is(const char *in, const char *want, ssize_t wantlen)
{
	unsigned char out[256];
	ssize_t n = ctl_b64_decode(in, strlen(in), out);

	if (n != wantlen)
		return false;
	return n < 0 || memcmp(out, want, (size_t)n) == 0;
}

static void test_b64(void)
{
	unsigned char all[256], enc_out[256];
	static const char enc[] =
		"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7"
		"PD0+P0BBQkNERUZHSElKS0xNTk9QUVJTVFVWV1hZWltcXV5fYGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3"
		"eHl6e3x9fn+AgYKDhIWGh4iJiouMjY6PkJGSk5SVlpeYmZqbnJ2en6ChoqOkpaanqKmqq6ytrq+wsbKz"
		"tLW2t7i5uru8vb6/wMHCw8TFxsfIycrLzM3Oz9DR0tPU1dbX2Nna29zd3t/g4eLj5OXm5+jp6uvs7e7v"
		"8PHy8/T19vf4+fr7/P3+/w==";
	ssize_t n;
	int i;

	CHECK(b64_is("", "", 0), "b64: empty");
	CHECK(b64_is("aGVsbG8=", "hello", 5), "b64: one pad");
	CHECK(b64_is("aGVsbA==", "hell", 4), "b64: two pads");
	CHECK(b64_is("aGVs", "hel", 3), "b64: no pad needed");
	CHECK(b64_is("aGVsbG8", "hello", 5), "b64: missing padding tolerated");
	CHECK(b64_is("aGVs\nbG8=", "hello", 5), "b64: whitespace ignored");
	CHECK(b64_is("aGVsbG8=x", NULL, -1), "b64: data after padding rejected");
	CHECK(b64_is("a", NULL, -1), "b64: a dangling character rejected");
	CHECK(b64_is("a===", NULL, -1), "b64: padding too early rejected");
	CHECK(b64_is("aGV*", NULL, -1), "b64: character outside the alphabet rejected");
	CHECK(b64_is("aGVsbG8===", NULL, -1), "b64: too much padding rejected");
	for (i = 0; i < 256; i++)
		all[i] = (unsigned char)i;
	n = ctl_b64_decode(enc, strlen(enc), enc_out);
	CHECK(n == 256 && memcmp(enc_out, all, 256) == 0, "b64: all 256 byte values");
	CHECK(CTL_B64_DECODED_MAX(strlen(enc)) >= 256, "b64: the size bound holds");
}

int main(void)
{
	test_basics();
	test_id_and_retry();
	test_chunking();
	test_random_chunks();
	test_limits();
	test_stop();
	test_b64();
	return DONE();
}
