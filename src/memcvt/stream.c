/* stream.c -- the migration stream converter's driver: items gathered from chunks of any size
 * and dispatched to their handler, the buffered output, and the API (stream.h) */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "parser.h"

/* For "the input ended ..." */
static const char *const state_where[] = {
	[ST_MAGIC] = "in the stream header",
	[ST_CONF_TYPE] = "before the configuration",
	[ST_CONF_LEN] = "in the configuration",
	[ST_CONF_NAME] = "in the configuration",
	[ST_SUB_PEEK] = "after the configuration",
	[ST_SUB_LEN] = "in a configuration subsection",
	[ST_SUB_NAME] = "in a configuration subsection",
	[ST_SUB_VERSION] = "in a configuration subsection",
	[ST_PAGE_BITS] = "in a configuration subsection",
	[ST_CAPS_COUNT] = "in the capability list",
	[ST_CAP_LEN] = "in the capability list",
	[ST_CAP_NAME] = "in the capability list",
	[ST_UUID] = "in a configuration subsection",
	[ST_SEC_TYPE] = "between sections, before the device state",
	[ST_SEC_ID] = "in a section header",
	[ST_START_ID] = "in a section header",
	[ST_START_LEN] = "in a section header",
	[ST_START_NAME] = "in a section header",
	[ST_START_VER] = "in a section header",
	[ST_REC] = "in a RAM section",
	[ST_REC_LEN] = "in a RAM record",
	[ST_REC_NAME] = "in a RAM record",
	[ST_FILL] = "in a RAM record",
	[ST_PAGE] = "in a RAM page",
	[ST_MS_LEN] = "in the RAM block list",
	[ST_MS_NAME] = "in the RAM block list",
	[ST_MS_VALS] = "in the RAM block list",
	[ST_FOOTER] = "in a section footer",
	[ST_TAIL] = "in the device state",
};

int cvt_bad(struct memcvt *c, space_err *e, uint64_t off, const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->failed = true;
	return err_set(e, EBADMSG, "at byte %llu: %s", ULL(off), msg);
}

/* Names are printed in errors and compared as strings: QEMU's are printable ASCII, so
 * anything else is refused rather than escaped. */
int cvt_check_name(struct memcvt *c, space_err *e, const uint8_t *p, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] < 0x20 || p[i] > 0x7e)
			return cvt_bad(c, e, c->item_off, "%s has a non-printable byte 0x%02x",
				       what, p[i]);
	return 0;
}

/* A u8 length announcing a name: 1..255, then wait for the name.  A page record's length byte
 * is not passed on here: it is held with the record (on_rec_name). */
int cvt_name_len(struct memcvt *c, space_err *e, const uint8_t *p, enum state next,
		 const char *what, bool pass)
{
	if (p[0] == 0)
		return cvt_bad(c, e, c->item_off, "empty %s", what);
	expect(c, next, p[0]);
	return pass ? cvt_emit(c, p, 1, e) : 0;
}

static int cvt_state_flush(struct memcvt *c, space_err *e)
{
	size_t n = c->nout;

	c->nout = 0;
	if (n && c->sink.state_write(c->sink.opaque, c->out, n, e) < 0)
		return err_wrap(e, "at byte %llu: writing the state", ULL(c->pos));
	return 0;
}

int cvt_emit(struct memcvt *c, const void *p, size_t n, space_err *e)
{
	c->stats.state_bytes += n;
	if (n > sizeof(c->out) - c->nout && cvt_state_flush(c, e) < 0)
		return -1;
	if (n >= sizeof(c->out)) {
		if (c->sink.state_write(c->sink.opaque, p, n, e) < 0)
			return err_wrap(e, "at byte %llu: writing the state", ULL(c->pos));
		return 0;
	}
	memcpy(c->out + c->nout, p, n);
	c->nout += n;
	return 0;
}

int cvt_run_flush(struct memcvt *c, space_err *e)
{
	int n = c->nrun;

	c->nrun = 0;
	if (n && c->sink.image_write(c->sink.opaque, c->run, n, c->run_off, e) < 0)
		return err_wrap(e, "at byte %llu: writing the image", ULL(c->pos));
	return 0;
}

int cvt_run_add(struct memcvt *c, const uint8_t *data, uint64_t off, space_err *e)
{
	bool follows = off == c->run_off + (uint64_t)c->nrun * MEMCVT_PAGE;

	if (c->nrun && (c->nrun == MEMCVT_RUN_PAGES || !follows) && cvt_run_flush(c, e) < 0)
		return -1;
	if (c->nrun == 0)
		c->run_off = off;
	c->run[c->nrun].iov_base = (void *)data;
	c->run[c->nrun].iov_len = MEMCVT_PAGE;
	c->nrun++;
	return 0;
}

static int step(struct memcvt *c, const uint8_t *p, space_err *e)
{
	switch (c->state) {
	case ST_MAGIC: return on_magic(c, p, e);
	case ST_CONF_TYPE: return on_conf_type(c, p, e);
	case ST_CONF_LEN: return on_conf_len(c, p, e);
	case ST_CONF_NAME: return on_conf_name(c, p, e);
	case ST_SUB_PEEK: return on_sub_peek(c, p, e);
	case ST_SUB_LEN: return cvt_name_len(c, e, p, ST_SUB_NAME, "subsection name", true);
	case ST_SUB_NAME: return on_sub_name(c, p, e);
	case ST_SUB_VERSION: return on_sub_version(c, p, e);
	case ST_PAGE_BITS: return on_page_bits(c, p, e);
	case ST_CAPS_COUNT: return on_caps_count(c, p, e);
	case ST_CAP_LEN: return cvt_name_len(c, e, p, ST_CAP_NAME, "capability name", true);
	case ST_CAP_NAME: return on_cap_name(c, p, e);
	case ST_UUID: return on_uuid(c, p, e);
	case ST_SEC_TYPE: return on_sec_type(c, p, e);
	case ST_SEC_ID: return on_sec_id(c, p, e);
	case ST_START_ID: return on_start_id(c, p, e);
	case ST_START_LEN: return cvt_name_len(c, e, p, ST_START_NAME, "section name", true);
	case ST_START_NAME: return on_start_name(c, p, e);
	case ST_START_VER: return on_start_ver(c, p, e);
	case ST_REC: return on_rec(c, p, e);
	case ST_REC_LEN: return cvt_name_len(c, e, p, ST_REC_NAME, "RAM block name", false);
	case ST_REC_NAME: return on_rec_name(c, p, e);
	case ST_FILL: return on_fill(c, p, e);
	case ST_MS_LEN: return cvt_name_len(c, e, p, ST_MS_NAME, "RAM block name", true);
	case ST_MS_NAME: return on_ms_name(c, p, e);
	case ST_MS_VALS: return on_ms_vals(c, p, e);
	case ST_FOOTER: return on_footer(c, p, e);
	case ST_PAGE:
	case ST_TAIL:
		break; /* streamed by consume() */
	}
	return cvt_bad(c, e, c->item_off, "internal: no handler for state %d", (int)c->state);
}

/* Takes the next item's bytes: in place when the chunk holds all of it, else gathered in acc
 * (never a page: those are streamed, so acc stays small). */
static ssize_t consume(struct memcvt *c, const uint8_t *p, size_t len, space_err *e)
{
	size_t n;

	if (c->state == ST_TAIL)
		return cvt_emit(c, p, len, e) < 0 ? -1 : (ssize_t)len;
	if (c->state == ST_PAGE)
		return page_bytes(c, p, len, e);
	if (c->have == 0) {
		c->item_off = c->pos;
		if (len >= c->need) {
			n = c->need;
			return step(c, p, e) < 0 ? -1 : (ssize_t)n;
		}
	}
	n = c->need - c->have < len ? c->need - c->have : len;
	memcpy(c->acc + c->have, p, n);
	c->have += n;
	if (c->have == c->need) {
		c->have = 0;
		if (step(c, c->acc, e) < 0)
			return -1;
	}
	return (ssize_t)n;
}

struct memcvt *memcvt_new(const char *block, const struct memcvt_sink *sink, space_err *e)
{
	size_t n = strlen(block);
	struct memcvt *c;

	if (n == 0 || n > NAME_MAX_LEN) {
		err_set(e, EINVAL, "block name of %zu bytes (1..%d)", n, NAME_MAX_LEN);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		if (block[i] < 0x20 || block[i] > 0x7e || block[i] == '"' || block[i] == '\\') {
			err_set(e, EINVAL, "block name: byte 0x%02x not allowed",
				(uint8_t)block[i]);
			return NULL;
		}
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		err_sys(e, ENOMEM, "allocating the converter");
		return NULL;
	}
	c->sink = *sink;
	memcpy(c->image_name, block, n + 1);
	c->image = c->last_block = c->last_kept = -1;
	expect(c, ST_MAGIC, 8);
	return c;
}

void memcvt_free(struct memcvt *c)
{
	if (!c)
		return;
	free(c->seen);
	free(c);
}

int memcvt_feed(struct memcvt *c, const void *buf, size_t len, space_err *e)
{
	const uint8_t *p = buf;

	if (c->failed)
		return err_set(e, EINVAL, "the conversion failed earlier");
	while (len > 0) {
		ssize_t n = consume(c, p, len, e);

		if (n < 0) {
			c->failed = true;
			return -1;
		}
		p += n;
		len -= (size_t)n;
		c->pos += (uint64_t)n;
	}
	/* The run points into buf, which the caller may reuse once this returns. */
	if (cvt_run_flush(c, e) < 0) {
		c->failed = true;
		return -1;
	}
	return 0;
}

int memcvt_finish(struct memcvt *c, struct memcvt_stats *st, space_err *e)
{
	if (c->failed)
		return err_set(e, EINVAL, "the conversion failed earlier");
	if (c->state != ST_TAIL) {
		c->failed = true;
		return err_set(e, EBADMSG, "truncated: the input ended after %llu bytes, %s",
			       ULL(c->pos), state_where[c->state]);
	}
	if (cvt_run_flush(c, e) < 0 || cvt_state_flush(c, e) < 0) {
		c->failed = true;
		return -1;
	}
	*st = c->stats;
	st->input_bytes = c->pos;
	return 0;
}