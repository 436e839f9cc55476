/* multipart.c -- a streaming multipart/form-data parser (multipart.h) */
#include "multipart.h"

#include <string.h>
#include <strings.h>

enum { S_PREAMBLE, S_AFTER_DELIM, S_HEADERS, S_BODY, S_DONE, S_ERROR };

/* Transport padding (spaces, tabs) allowed after a delimiter before its CRLF. */
#define MP_PAD_MAX 256

static bool bchar_ok(const char *b, size_t n)
{
	if (n < 1 || n > MP_BOUNDARY_MAX || b[n - 1] == ' ')
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)b[i] < 0x20 || (unsigned char)b[i] > 0x7e)
			return false;
	return true;
}

static const char *skip_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	return p;
}

static bool tspecial(char c)
{
	return c && strchr("()<>@,;:\\\"/[]?=", c) != NULL;
}

/* One parameter value at p (quoted-string or token) into out (cap bytes with the NUL); returns
 * the position after it, or NULL when malformed or too long. A backslash escapes only a tspecial
 * (as Go's mime package reads it), so "C:\dir" keeps its backslash. */
static const char *param_value(const char *p, const char *end, char *out, size_t cap)
{
	size_t n = 0;

	if (p < end && *p == '"') {
		for (p++; p < end && *p != '"'; p++) {
			char c = *p;

			if (c == '\\' && p + 1 < end && tspecial(p[1]))
				c = *++p;
			if (c == '\0' || n + 1 >= cap)
				return NULL;
			out[n++] = c;
		}
		if (p >= end)
			return NULL; /* unterminated */
		p++;
	} else {
		for (; p < end && *p != ';' && *p != ' ' && *p != '\t'; p++) {
			if (*p == '\0' || *p == '"' || n + 1 >= cap)
				return NULL;
			out[n++] = *p;
		}
	}
	out[n] = '\0';
	return p;
}

/* Walks "type; k=v; k=v" calling fn for each parameter; -1 when malformed. */
static int params(const char *v, size_t len, const char **type, size_t *tlen,
		  int (*fn)(const char *k, size_t kl, const char *val, void *arg), void *arg)
{
	const char *p = v, *end = v + len;
	char val[MP_NAME_MAX + 1];

	p = skip_ws(p, end);
	*type = p;
	while (p < end && *p != ';' && *p != ' ' && *p != '\t')
		p++;
	*tlen = (size_t)(p - *type);
	if (!*tlen)
		return -1;
	for (;;) {
		const char *k;
		size_t kl;

		p = skip_ws(p, end);
		if (p == end)
			return 0;
		if (*p != ';')
			return -1;
		p = skip_ws(p + 1, end);
		if (p == end)
			return 0; /* a trailing ';' */
		k = p;
		while (p < end && *p != '=' && *p != ';' && *p != ' ' && *p != '\t')
			p++;
		kl = (size_t)(p - k);
		p = skip_ws(p, end);
		if (!kl || p == end || *p != '=')
			return -1;
		p = skip_ws(p + 1, end);
		if (!(p = param_value(p, end, val, sizeof(val))))
			return -1;
		if (fn(k, kl, val, arg) < 0)
			return -1;
	}
}

static bool key_is(const char *k, size_t kl, const char *want)
{
	return kl == strlen(want) && strncasecmp(k, want, kl) == 0;
}

struct bnd {
	char *out;
	bool found;
};

static int bnd_param(const char *k, size_t kl, const char *val, void *arg)
{
	struct bnd *b = arg;

	if (key_is(k, kl, "boundary") && !b->found) {
		if (!bchar_ok(val, strlen(val)))
			return -1;
		strcpy(b->out, val);
		b->found = true;
	}
	return 0;
}

int mp_boundary(const char *ct, char out[MP_BOUNDARY_MAX + 1])
{
	struct bnd b = { out, false };
	const char *type;
	size_t tlen;

	if (!ct || params(ct, strlen(ct), &type, &tlen, bnd_param, &b) < 0)
		return -1;
	if (!key_is(type, tlen, "multipart/form-data") || !b.found)
		return -1;
	return 0;
}

struct disp {
	char *name, *filename;
	bool *has_filename, got_name;
};

static int disp_param(const char *k, size_t kl, const char *val, void *arg)
{
	struct disp *d = arg;

	if (key_is(k, kl, "name") && !d->got_name) {
		strcpy(d->name, val);
		d->got_name = true;
	} else if (key_is(k, kl, "filename") && !*d->has_filename) {
		strcpy(d->filename, val);
		*d->has_filename = true;
	}
	return 0;
}

int mp_disposition(const char *v, size_t len, char *name, char *filename, bool *has_filename)
{
	struct disp d = { name, filename, has_filename, false };
	const char *type;
	size_t tlen;

	name[0] = filename[0] = '\0';
	*has_filename = false;
	if (params(v, len, &type, &tlen, disp_param, &d) < 0)
		return -1;
	return 0;
}

int mp_init(struct mp *m, const char *boundary)
{
	size_t n = boundary ? strlen(boundary) : 0;

	memset(m, 0, sizeof(*m));
	if (!bchar_ok(boundary ? boundary : "", n))
		return -1;
	memcpy(m->delim, "\r\n--", 4);
	memcpy(m->delim + 4, boundary, n);
	m->dlen = 4 + n;
	m->state = S_PREAMBLE;
	m->at_start = true;
	return 0;
}

static enum mp_event fail(struct mp *m, const char *why)
{
	m->state = S_ERROR;
	m->error = why;
	return MP_ERROR;
}

/* The header block h[0..n) (lines ending in CRLF, the last CRLF included). */
static int parse_headers(struct mp *m, const uint8_t *h, size_t n)
{
	const char *p = (const char *)h, *end = p + n;

	m->name[0] = m->filename[0] = '\0';
	m->has_filename = false;
	while (p < end) {
		const char *eol = memmem(p, (size_t)(end - p), "\r\n", 2), *colon;

		if (!eol || eol == p || *p == ' ' || *p == '\t')
			return -1; /* no CRLF, an empty line, or obsolete folding */
		colon = memchr(p, ':', (size_t)(eol - p));
		if (!colon || colon == p || memchr(p, '\0', (size_t)(eol - p)))
			return -1;
		if (key_is(p, (size_t)(colon - p), "Content-Disposition") &&
		    mp_disposition(colon + 1, (size_t)(eol - colon - 1), m->name, m->filename, &m->has_filename) < 0)
			return -1;
		p = eol + 2;
	}
	return 0;
}

/* The first position i of h[0..n) from which h[i..n) could begin the delimiter (n if none). */
static size_t safe_prefix(const struct mp *m, const uint8_t *h, size_t n)
{
	size_t i = n > m->dlen - 1 ? n - (m->dlen - 1) : 0;

	for (; i < n; i++)
		if (h[i] == '\r' && memcmp(h + i, m->delim, n - i) == 0)
			return i;
	return n;
}

enum mp_event mp_next(struct mp *m, const uint8_t *buf, size_t len, bool eof, size_t *used, const uint8_t **data,
		      size_t *dlen)
{
	size_t off = 0;

	*used = 0;
	*data = NULL;
	*dlen = 0;
	for (;;) {
		const uint8_t *h = buf + off;
		size_t rem = len - off;

		switch (m->state) {
		case S_PREAMBLE: {
			const uint8_t *p;

			if (m->at_start) {
				size_t k = m->dlen - 2; /* "--boundary" with no CRLF before it */

				if (rem < k && memcmp(h, m->delim + 2, rem) == 0 && !eof)
					return MP_NEED_MORE;
				m->at_start = false;
				if (rem >= k && memcmp(h, m->delim + 2, k) == 0) {
					off += k;
					m->state = S_AFTER_DELIM;
					continue;
				}
			}
			p = rem ? memmem(h, rem, m->delim, m->dlen) : NULL;
			if (p) {
				off += (size_t)(p - h) + m->dlen;
				m->state = S_AFTER_DELIM;
				continue;
			}
			if (eof)
				return fail(m, "no boundary delimiter in the body");
			*used = off + safe_prefix(m, h, rem); /* the preamble is dropped */
			return MP_NEED_MORE;
		}
		case S_AFTER_DELIM:
			if (m->pad == 0 && rem >= 2 && h[0] == '-' && h[1] == '-') {
				m->state = S_DONE;
				*used = len; /* the epilogue */
				return MP_DONE;
			}
			while (rem && (*h == ' ' || *h == '\t')) {
				if (++m->pad > MP_PAD_MAX)
					return fail(m, "malformed delimiter line");
				h++;
				rem--;
				off++;
			}
			if (rem < 2) {
				if (eof)
					return fail(m, "the body ended inside a delimiter line");
				if (rem == 1 && *h != '\r' && !(m->pad == 0 && *h == '-'))
					return fail(m, "malformed delimiter line");
				*used = off;
				return MP_NEED_MORE;
			}
			if (h[0] != '\r' || h[1] != '\n')
				return fail(m, "malformed delimiter line");
			off += 2;
			m->pad = 0;
			m->state = S_HEADERS;
			continue;
		case S_HEADERS: {
			const uint8_t *e;
			size_t hl;

			if (rem >= 2 && h[0] == '\r' && h[1] == '\n') {
				m->name[0] = m->filename[0] = '\0';
				m->has_filename = false;
				*used = off + 2;
				m->state = S_BODY;
				return MP_PART;
			}
			e = memmem(h, rem < MP_HEADER_MAX + 4 ? rem : MP_HEADER_MAX + 4, "\r\n\r\n", 4);
			if (!e) {
				if (rem >= MP_HEADER_MAX + 4)
					return fail(m, "a part's headers are too long");
				if (eof)
					return fail(m, "the body ended inside a part's headers");
				*used = off;
				return MP_NEED_MORE;
			}
			hl = (size_t)(e - h) + 2;
			if (parse_headers(m, h, hl) < 0)
				return fail(m, "malformed part headers");
			*used = off + hl + 2;
			m->state = S_BODY;
			return MP_PART;
		}
		case S_BODY: {
			const uint8_t *p = rem ? memmem(h, rem, m->delim, m->dlen) : NULL;
			size_t safe;

			if (p == h && rem) {
				*used = off + m->dlen;
				m->state = S_AFTER_DELIM;
				return MP_PART_END;
			}
			safe = p ? (size_t)(p - h) : safe_prefix(m, h, rem);
			if (safe) {
				*data = h;
				*dlen = safe;
				*used = off + safe;
				return MP_DATA;
			}
			if (eof)
				return fail(m, "the body ended inside a part");
			*used = off;
			return MP_NEED_MORE;
		}
		case S_DONE:
			*used = len;
			return MP_DONE;
		default:
			return MP_ERROR;
		}
	}
}
