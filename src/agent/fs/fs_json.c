/* fs_json.c -- flat JSON objects built in memory, with strings made of arbitrary bytes.
 *
 * File names on Linux are byte strings (anything but '/' and NUL) and need not be UTF-8, but
 * JSON text is UTF-8.  The rule, for every string we write ("name", "path", "symlink_target",
 * "message", watch event paths, ...):
 *   - a well-formed UTF-8 sequence (RFC 3629: no overlong forms, no surrogates, at most
 *     U+10FFFF) is copied as is;
 *   - every other byte is replaced by U+FFFD (one replacement character per byte);
 *   - '"' and '\' are backslash-escaped, and the control characters U+0000..U+001F and U+007F
 *     are written as \u00XX.
 * So the output is always valid JSON that strict parsers (jansson) accept; a name that is not
 * UTF-8 cannot be round-tripped from the listing (documented in docs/design/channels.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs.h"

void jb_init(struct jbuf *b)
{
	memset(b, 0, sizeof(*b));
	b->first = true;
}

void jb_free(struct jbuf *b)
{
	free(b->p);
	jb_init(b);
}

void jb_reset(struct jbuf *b)
{
	b->len = 0;
	b->oom = false;
	b->first = true;
}

static bool reserve(struct jbuf *b, size_t n)
{
	size_t cap;
	char *np;

	if (b->oom)
		return false;
	if (b->cap - b->len >= n)
		return true;
	cap = b->cap ? b->cap : 256;
	while (cap - b->len < n) {
		if (cap > ((size_t)1 << 40)) {
			b->oom = true;
			return false;
		}
		cap *= 2;
	}
	np = realloc(b->p, cap);
	if (!np) {
		b->oom = true;
		return false;
	}
	b->p = np;
	b->cap = cap;
	return true;
}

void jb_raw(struct jbuf *b, const char *s, size_t n)
{
	if (!reserve(b, n))
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

/* Length of the well-formed UTF-8 sequence at s[0..n), or 0 if there is none. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	unsigned char lo = 0x80, hi = 0xbf;
	size_t len, i;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		if (c == 0xe0)
			lo = 0xa0; /* overlong */
		else if (c == 0xed)
			hi = 0x9f; /* surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		if (c == 0xf0)
			lo = 0x90; /* overlong */
		else if (c == 0xf4)
			hi = 0x8f; /* over U+10FFFF */
	} else
		return 0;
	if (n < len)
		return 0;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

void jb_str(struct jbuf *b, const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;

	/* Worst case 6 bytes out per byte in (\u00XX); reserve once. */
	if (n > ((size_t)1 << 36) || !reserve(b, n * 6 + 2))
		return;
	b->p[b->len++] = '"';
	while (i < n) {
		unsigned char c = s[i];
		size_t k;

		if (c == '"' || c == '\\') {
			b->p[b->len++] = '\\';
			b->p[b->len++] = (char)c;
			i++;
		} else if (c < 0x20 || c == 0x7f) {
			static const char hex[] = "0123456789abcdef";

			memcpy(b->p + b->len, "\\u00", 4);
			b->p[b->len + 4] = hex[c >> 4];
			b->p[b->len + 5] = hex[c & 15];
			b->len += 6;
			i++;
		} else if ((k = utf8_len(s + i, n - i)) > 0) {
			memcpy(b->p + b->len, s + i, k);
			b->len += k;
			i += k;
		} else {
			memcpy(b->p + b->len, "\xef\xbf\xbd", 3); /* U+FFFD */
			b->len += 3;
			i++;
		}
	}
	b->p[b->len++] = '"';
}

void jb_begin(struct jbuf *b)
{
	jb_raw(b, "{", 1);
	b->first = true;
}

void jb_end(struct jbuf *b)
{
	jb_raw(b, "}", 1);
}

void jb_key(struct jbuf *b, const char *k)
{
	if (!b->first)
		jb_raw(b, ",", 1);
	b->first = false;
	jb_str(b, k, strlen(k));
	jb_raw(b, ":", 1);
}

void jb_kstr(struct jbuf *b, const char *k, const char *s, size_t n)
{
	jb_key(b, k);
	jb_str(b, s, n);
}

void jb_kcstr(struct jbuf *b, const char *k, const char *s)
{
	jb_kstr(b, k, s, strlen(s));
}

void jb_ku64(struct jbuf *b, const char *k, uint64_t v)
{
	char num[24];
	int n = snprintf(num, sizeof(num), "%llu", (unsigned long long)v);

	jb_key(b, k);
	jb_raw(b, num, (size_t)n);
}

void jb_ki64(struct jbuf *b, const char *k, int64_t v)
{
	char num[24];
	int n = snprintf(num, sizeof(num), "%lld", (long long)v);

	jb_key(b, k);
	jb_raw(b, num, (size_t)n);
}

void jb_kbool(struct jbuf *b, const char *k, bool v)
{
	jb_key(b, k);
	jb_raw(b, v ? "true" : "false", v ? 4 : 5);
}

void jb_ktime(struct jbuf *b, const char *k, const struct timespec *t)
{
	long long sec = (long long)t->tv_sec;
	long nsec = t->tv_nsec;
	char num[40];
	int n;

	if (nsec < 0 || nsec >= 1000000000L)
		nsec = 0;
	/* timespec {-2, 500000000} is -1.5 s: print the sign, then the magnitude. */
	if (sec < 0 && nsec > 0)
		n = snprintf(num, sizeof(num), "-%llu.%09ld", (unsigned long long)(-(sec + 1)),
			     1000000000L - nsec);
	else
		n = snprintf(num, sizeof(num), "%lld.%09ld", sec, nsec);
	jb_key(b, k);
	jb_raw(b, num, (size_t)n);
}
