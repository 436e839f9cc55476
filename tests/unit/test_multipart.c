/* test_multipart.c -- the streaming multipart/form-data parser (e2b/multipart.c): bodies fed
 * split at every byte position and byte by byte, preamble and epilogue, quoted filenames,
 * missing and malformed boundaries, truncated bodies, over-long headers. */
#include <stdlib.h>
#include <string.h>

#include "e2b/multipart.h"
#include "harness.h"

/* Feeds body in pieces (cut at `cut`, then by `step` bytes; step 0: the rest at once) and
 * renders the events as text: "<name|filename>" for a part ("<name|>" without filename, "|-"
 * after the name when none), data verbatim, "$" at a part's end, "#" for done, "!" for an
 * error. take: the most bytes of one MP_DATA consumed (0: all), to check partial consumption. */
static char *run(const char *body, size_t len, size_t cut, size_t step, size_t take, bool eof_at_end)
{
	static char out[1 << 16];
	struct mp m;
	uint8_t *pend = malloc(len + 1);
	size_t plen = 0, fed = 0, o = 0;

	out[0] = '\0';
	if (mp_init(&m, "XyZ-bound") < 0) {
		free(pend);
		return strcpy(out, "init failed");
	}
	for (;;) {
		size_t n = fed < cut ? cut - fed : step ? step : len - fed;
		bool eof;

		if (n > len - fed)
			n = len - fed;
		memcpy(pend + plen, body + fed, n);
		plen += n;
		fed += n;
		eof = fed == len && eof_at_end;
		for (;;) {
			size_t used, dl;
			const uint8_t *d;
			enum mp_event ev = mp_next(&m, pend, plen, eof, &used, &d, &dl);

			if (ev == MP_DATA && take && dl > take)
				used -= dl - take, dl = take;
			if (ev == MP_PART)
				o += (size_t)snprintf(out + o, sizeof(out) - o, "<%s|%s>", m.name,
						      m.has_filename ? m.filename : "-");
			else if (ev == MP_DATA) {
				memcpy(out + o, d, dl);
				o += dl;
				out[o] = '\0';
			} else if (ev == MP_PART_END)
				o += (size_t)snprintf(out + o, sizeof(out) - o, "$");
			memmove(pend, pend + used, plen - used);
			plen -= used;
			if (ev == MP_DONE) {
				snprintf(out + o, sizeof(out) - o, "#");
				free(pend);
				return out;
			}
			if (ev == MP_ERROR) {
				snprintf(out + o, sizeof(out) - o, "!");
				free(pend);
				return out;
			}
			if (ev == MP_NEED_MORE)
				break;
		}
		if (fed == len) {
			if (!eof_at_end) {
				free(pend);
				return out; /* stopped waiting for more */
			}
			snprintf(out + o, sizeof(out) - o, "?"); /* NEED_MORE at eof: a contract breach */
			free(pend);
			return out;
		}
	}
}

#define B "XyZ-bound"

static const char two[] = "preamble text\r\n--" B "\r\n"
			  "Content-Disposition: form-data; name=\"file\"; filename=\"/tmp/a.txt\"\r\n"
			  "Content-Type: application/octet-stream\r\n\r\n"
			  "hello\r\n-- not it\r\n--XyZ-boun\r\nd\r\n"
			  "\r\n--" B "  \r\n"
			  "content-disposition: form-data; name=file; filename=\"dir/b c;d.bin\"\r\n\r\n"
			  "\r\n--" B "--\r\nepilogue --" B "\r\n";
static const char two_want[] = "<file|/tmp/a.txt>hello\r\n-- not it\r\n--XyZ-boun\r\nd\r\n$"
			       "<file|dir/b c;d.bin>$#";

static void every_split(void)
{
	size_t len = sizeof(two) - 1;
	int bad = 0;

	for (size_t cut = 0; cut <= len; cut++)
		for (size_t take = 0; take <= 2; take++) {
			const char *got = run(two, len, cut, 0, take, true);

			if (strcmp(got, two_want) != 0 && bad++ < 3)
				NOTE("cut %zu take %zu: %s", cut, take, got);
		}
	EXPECT_EQ(bad, 0);
}

static void byte_by_byte(void)
{
	size_t len = sizeof(two) - 1;

	for (size_t step = 1; step <= 9; step++)
		EXPECT(strcmp(run(two, len, 0, step, step == 3 ? 1 : 0, true), two_want) == 0);
}

static void first_delimiter_without_crlf(void)
{
	static const char b[] = "--" B "\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\nv\r\n--" B "--";

	for (size_t cut = 0; cut < sizeof(b); cut++)
		EXPECT(strcmp(run(b, sizeof(b) - 1, cut, 0, 0, true), "<x|->v$#") == 0);
	/* a part with no headers at all */
	static const char n[] = "--" B "\r\n\r\nraw\r\n--" B "--";
	EXPECT(strcmp(run(n, sizeof(n) - 1, 0, 1, 0, true), "<|->raw$#") == 0);
}

static void truncated(void)
{
	size_t len = sizeof(two) - 1, done_at = strstr(two, B "--") - two + strlen(B "--");
	int bad = 0;

	/* every proper prefix that ends before the close delimiter is an error at eof */
	for (size_t n = 0; n < done_at; n++) {
		const char *got = run(two, n, 0, 0, 0, true);
		size_t gl = strlen(got);

		if ((gl == 0 || got[gl - 1] != '!') && bad++ < 3)
			NOTE("prefix %zu: %s", n, got);
	}
	EXPECT_EQ(bad, 0);
	/* and without eof it only waits */
	EXPECT(strchr(run(two, done_at - 3, 0, 0, 0, false), '!') == NULL);
	EXPECT(strcmp(run(two, len, 0, 0, 0, true), two_want) == 0);
}

static void malformed(void)
{
	static const char nob[] = "no delimiter here at all\r\n";
	static const char fold[] = "--" B "\r\nContent-Disposition: form-data;\r\n name=\"x\"\r\n\r\nv\r\n--" B "--";
	static const char junk[] = "--" B "junk\r\n\r\nv\r\n--" B "--";
	static const char noeq[] = "--" B "\r\nContent-Disposition: form-data; name\r\n\r\nv\r\n--" B "--";
	static const char unterm[] = "--" B "\r\nContent-Disposition: form-data; filename=\"abc\r\n\r\nv\r\n--" B "--";
	static const char nocolon[] = "--" B "\r\nnot a header\r\n\r\nv\r\n--" B "--";

	EXPECT(strcmp(run(nob, sizeof(nob) - 1, 0, 0, 0, true), "!") == 0);
	EXPECT(strcmp(run("", 0, 0, 0, 0, true), "!") == 0);
	EXPECT(strcmp(run(fold, sizeof(fold) - 1, 0, 0, 0, true), "!") == 0);
	EXPECT(strcmp(run(junk, sizeof(junk) - 1, 0, 0, 0, true), "!") == 0);
	EXPECT(strcmp(run(noeq, sizeof(noeq) - 1, 0, 0, 0, true), "!") == 0);
	EXPECT(strcmp(run(unterm, sizeof(unterm) - 1, 0, 0, 0, true), "!") == 0);
	EXPECT(strcmp(run(nocolon, sizeof(nocolon) - 1, 0, 0, 0, true), "!") == 0);
}

static void long_headers(void)
{
	size_t n = MP_HEADER_MAX + 200;
	char *b = malloc(n + 64);
	int o = snprintf(b, n + 64, "--" B "\r\nX-Long: ");

	memset(b + o, 'a', n - (size_t)o);
	/* never terminated: refused once the limit is passed, even without eof */
	EXPECT(strcmp(run(b, n, 0, 100, 0, false), "!") == 0);
	free(b);
}

static void filenames(void)
{
	char name[MP_NAME_MAX + 1], fn[MP_NAME_MAX + 1];
	bool has;
	const char *v;

	v = " form-data; name=\"file\"; filename=\"a \\\"q\\\" b\"";
	EXPECT(mp_disposition(v, strlen(v), name, fn, &has) == 0);
	EXPECT(has && strcmp(fn, "a \"q\" b") == 0 && strcmp(name, "file") == 0);
	v = "form-data; filename=\"C:\\dir\\x\"; name=f";
	EXPECT(mp_disposition(v, strlen(v), name, fn, &has) == 0);
	EXPECT(strcmp(fn, "C:\\dir\\x") == 0 && strcmp(name, "f") == 0);
	v = "form-data; name=\"file\"";
	EXPECT(mp_disposition(v, strlen(v), name, fn, &has) == 0 && !has);
	v = "form-data; FileName=\"x;y=z\" ;";
	EXPECT(mp_disposition(v, strlen(v), name, fn, &has) == 0 && has && strcmp(fn, "x;y=z") == 0);
	v = "form-data; filename=\"abc";
	EXPECT(mp_disposition(v, strlen(v), name, fn, &has) < 0);
	v = "";
	EXPECT(mp_disposition(v, 0, name, fn, &has) < 0);
	char *big = malloc(MP_NAME_MAX + 64);
	int o = snprintf(big, 64, "form-data; filename=\"");
	memset(big + o, 'x', MP_NAME_MAX + 1);
	strcpy(big + o + MP_NAME_MAX + 1, "\"");
	EXPECT(mp_disposition(big, strlen(big), name, fn, &has) < 0);
	free(big);
}

static void boundaries(void)
{
	char b[MP_BOUNDARY_MAX + 1];
	struct mp m;

	EXPECT(mp_boundary("multipart/form-data; boundary=----formdata-undici-0123", b) == 0);
	EXPECT(strcmp(b, "----formdata-undici-0123") == 0);
	EXPECT(mp_boundary("Multipart/Form-Data;charset=utf-8; Boundary=\"a b:c\"", b) == 0 && strcmp(b, "a b:c") == 0);
	EXPECT(mp_boundary("multipart/form-data", b) < 0);
	EXPECT(mp_boundary("multipart/form-data; boundary=", b) < 0);
	EXPECT(mp_boundary("multipart/mixed; boundary=x", b) < 0);
	EXPECT(mp_boundary("application/octet-stream", b) < 0);
	EXPECT(mp_boundary(NULL, b) < 0);
	EXPECT(mp_boundary("multipart/form-data; boundary=\"ends in space \"", b) < 0);
	EXPECT(mp_boundary("multipart/form-data; boundary="
			   "12345678901234567890123456789012345678901234567890123456789012345678901",
			   b) < 0);
	EXPECT(mp_init(&m, "") < 0);
	EXPECT(mp_init(&m, "ok") == 0);
}

int main(void)
{
	RUN(every_split);
	RUN(byte_by_byte);
	RUN(first_delimiter_without_crlf);
	RUN(truncated);
	RUN(malformed);
	RUN(long_headers);
	RUN(filenames);
	RUN(boundaries);
	return DONE();
}
