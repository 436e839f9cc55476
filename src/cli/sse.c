/* sse.c -- incremental server-sent-events parser, per the WHATWG
 * "event stream interpretation" rules, with bounded buffers.
 *
 * Bytes arrive in arbitrary chunks: a line (and a CRLF pair) may be split
 * anywhere, so the unfinished line is carried in p->line.  Lines that sit
 * wholly inside one chunk are parsed in place without copying. */
#include "sse.h"

#include <stdlib.h>
#include <string.h>

void sse_parser_init(struct sse_parser *p, size_t max, sse_event_cb cb, void *arg)
{
	memset(p, 0, sizeof(*p));
	p->cb = cb;
	p->arg = arg;
	p->max = max ? max : SSE_DEFAULT_MAX;
	p->retry_ms = -1;
}

void sse_parser_free(struct sse_parser *p)
{
	free(p->line);
	free(p->data);
	free(p->event);
	free(p->id);
	p->line = p->data = p->event = p->id = NULL;
	p->line_len = p->line_cap = p->data_len = p->data_cap = 0;
}

void sse_parser_reset(struct sse_parser *p)
{
	p->line_len = 0;
	p->data_len = 0;
	free(p->event);
	p->event = NULL;
	p->after_cr = false;
	p->bom_done = false;
	p->error = SSE_OK;
}

const char *sse_parser_last_id(const struct sse_parser *p)
{
	return p->id ? p->id : "";
}

const char *sse_parser_strerror(enum sse_status st)
{
	switch (st) {
	case SSE_OK:
		return "success";
	case SSE_STOP:
		return "stopped by the event handler";
	case SSE_ETOOLONG:
		return "event stream line or event data over the size limit";
	case SSE_ENOMEM:
		return "out of memory parsing the event stream";
	}
	return "unknown event stream error";
}

/* Make room for `need` bytes in a growable buffer (doubling). */
static enum sse_status reserve(char **buf, size_t *cap, size_t need)
{
	size_t ncap;
	char *nb;

	if (need <= *cap)
		return SSE_OK;
	ncap = *cap ? *cap : 256;
	while (ncap < need)
		ncap *= 2;
	nb = realloc(*buf, ncap);
	if (!nb)
		return SSE_ENOMEM;
	*buf = nb;
	*cap = ncap;
	return SSE_OK;
}

static char *dup_n(const char *s, size_t n)
{
	char *d = malloc(n + 1);

	if (d) {
		memcpy(d, s, n);
		d[n] = '\0';
	}
	return d;
}

static bool field_is(const char *f, size_t flen, const char *name)
{
	return flen == strlen(name) && memcmp(f, name, flen) == 0;
}

static enum sse_status dispatch(struct sse_parser *p)
{
	struct sse_event ev;
	int rc;

	if (p->data_len == 0) {
		/* No data lines: nothing to dispatch, the type is reset. */
		free(p->event);
		p->event = NULL;
		return SSE_OK;
	}
	p->data_len--; /* the '\n' after the last data line */
	p->data[p->data_len] = '\0';
	ev.type = p->event ? p->event : "message";
	ev.data = p->data;
	ev.data_len = p->data_len;
	ev.id = sse_parser_last_id(p);
	rc = p->cb ? p->cb(&ev, p->arg) : 0;
	p->data_len = 0;
	free(p->event);
	p->event = NULL;
	return rc ? SSE_STOP : SSE_OK;
}

static enum sse_status process_line(struct sse_parser *p, const char *s, size_t len)
{
	const char *colon, *val;
	size_t flen, vlen;
	enum sse_status st;

	if (!p->bom_done) {
		p->bom_done = true;
		if (len >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) {
			s += 3;
			len -= 3;
		}
	}
	if (len == 0)
		return dispatch(p);
	if (s[0] == ':')
		return SSE_OK; /* comment, e.g. keepalive */

	colon = memchr(s, ':', len);
	if (colon) {
		flen = (size_t)(colon - s);
		val = colon + 1;
		vlen = len - flen - 1;
		if (vlen && *val == ' ') {
			val++;
			vlen--;
		}
	} else {
		flen = len;
		val = s + len;
		vlen = 0;
	}

	if (field_is(s, flen, "data")) {
		if (p->data_len + vlen + 1 > p->max)
			return SSE_ETOOLONG;
		/* +2: the '\n' separator and room for the final NUL */
		st = reserve(&p->data, &p->data_cap, p->data_len + vlen + 2);
		if (st)
			return st;
		memcpy(p->data + p->data_len, val, vlen);
		p->data_len += vlen;
		p->data[p->data_len++] = '\n';
	} else if (field_is(s, flen, "event")) {
		char *t = dup_n(val, vlen);

		if (!t)
			return SSE_ENOMEM;
		free(p->event);
		p->event = t;
	} else if (field_is(s, flen, "id")) {
		char *t;

		if (memchr(val, '\0', vlen))
			return SSE_OK; /* the spec ignores ids containing NUL */
		t = dup_n(val, vlen);
		if (!t)
			return SSE_ENOMEM;
		free(p->id);
		p->id = t;
	} else if (field_is(s, flen, "retry")) {
		long ms = 0;
		size_t i;

		for (i = 0; i < vlen; i++) {
			if (val[i] < '0' || val[i] > '9' || ms > 100000000)
				return SSE_OK;
			ms = ms * 10 + (val[i] - '0');
		}
		if (vlen)
			p->retry_ms = ms;
	}
	/* Unknown fields are ignored. */
	return SSE_OK;
}

enum sse_status sse_parser_feed(struct sse_parser *p, const char *buf, size_t n)
{
	enum sse_status st;
	size_t i = 0;

	if (p->error)
		return p->error;
	if (n && p->after_cr) {
		/* CRLF split across chunks: the LF belongs to the CR before it. */
		p->after_cr = false;
		if (buf[0] == '\n')
			i = 1;
	}
	while (i < n) {
		size_t j = i;
		const char *seg = buf + i;

		while (j < n && buf[j] != '\n' && buf[j] != '\r')
			j++;
		if (p->line_len + (j - i) > p->max) {
			st = SSE_ETOOLONG;
			goto fail;
		}
		if (j == n) {
			/* Unfinished line: carry it to the next chunk. */
			st = reserve(&p->line, &p->line_cap, p->line_len + (j - i));
			if (st)
				goto fail;
			memcpy(p->line + p->line_len, seg, j - i);
			p->line_len += j - i;
			break;
		}
		if (p->line_len) {
			size_t len;

			st = reserve(&p->line, &p->line_cap, p->line_len + (j - i));
			if (st)
				goto fail;
			memcpy(p->line + p->line_len, seg, j - i);
			len = p->line_len + (j - i);
			p->line_len = 0;
			st = process_line(p, p->line, len);
		} else {
			st = process_line(p, seg, j - i);
		}
		if (buf[j] == '\r') {
			if (j + 1 < n) {
				if (buf[j + 1] == '\n')
					j++;
			} else {
				p->after_cr = true;
			}
		}
		i = j + 1;
		if (st == SSE_STOP)
			return st;
		if (st)
			goto fail;
	}
	return SSE_OK;
fail:
	p->error = st;
	return st;
}
