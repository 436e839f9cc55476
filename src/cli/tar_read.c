/* tar_read.c -- a tar archive parsed from pieces as they arrive (see tar.h):
 * ustar, pax 'x' (path, linkpath, size, mtime) and 'g' (ignored) headers,
 * GNU 'L'/'K' long names, base-256 numbers */
#include "tar.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An extended header (pax records, a GNU long name) is held whole: bound it. */
#define EXT_MAX (1u << 20)

enum { ST_HEADER, ST_EXT, ST_DATA, ST_PAD, ST_END };

void tarr_init(struct tar_reader *r, const struct tar_reader_ops *ops, void *arg)
{
	memset(r, 0, sizeof(*r));
	r->ops = ops;
	r->arg = arg;
	r->state = ST_HEADER;
}

static void clear_ext(struct tar_reader *r)
{
	free(r->x_path);
	free(r->x_linkpath);
	r->x_path = r->x_linkpath = NULL;
	r->x_size_set = r->x_mtime_set = false;
}

void tarr_free(struct tar_reader *r)
{
	clear_ext(r);
	free(r->ext);
	r->ext = NULL;
}

static int fail(struct tar_reader *r, space_err *e)
{
	r->failed = true;
	r->err = *e;
	return -1;
}

/* A numeric header field: octal digits (leading spaces, ending at a NUL or
 * space), or GNU base-256 when the top bit of the first byte is set.
 * Returns 0, or -1 when malformed or out of range. */
static int parse_num(const unsigned char *f, size_t len, unsigned long long *out)
{
	unsigned long long v = 0;
	size_t i = 0;

	if (f[0] & 0x80) {
		if (f[0] & 0x40)
			return -1; /* negative */
		v = f[0] & 0x3f;
		for (i = 1; i < len; i++) {
			if (v >> 55)
				return -1;
			v = (v << 8) | f[i];
		}
		*out = v;
		return 0;
	}
	while (i < len && f[i] == ' ')
		i++;
	for (; i < len && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v >> 60)
			return -1;
		v = (v << 3) | (unsigned)(f[i] - '0');
	}
	if (i < len && f[i] != ' ' && f[i] != '\0')
		return -1;
	*out = v;
	return 0;
}

static bool all_zero(const unsigned char *b)
{
	size_t i;

	for (i = 0; i < TAR_BLOCK; i++)
		if (b[i])
			return false;
	return true;
}

static bool checksum_ok(const unsigned char *b)
{
	unsigned long long want;
	unsigned long usum = 0;
	long ssum = 0;
	size_t i;

	if (parse_num(b + 148, 8, &want) < 0)
		return false;
	for (i = 0; i < TAR_BLOCK; i++) {
		unsigned char c = (i >= 148 && i < 156) ? ' ' : b[i];

		usum += c;
		ssum += (signed char)c;
	}
	/* Some old writers summed signed chars. */
	return want == usum || (long long)want == (long long)ssum;
}

/* "12.5" (or "-3") -> seconds and nanoseconds.  0 or -1. */
static int parse_time(const char *s, long long *sec, long *nsec)
{
	char *end;
	long long v;
	long ns = 0;
	int d;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s)
		return -1;
	if (*end == '.') {
		end++;
		for (d = 0; d < 9 && *end >= '0' && *end <= '9'; d++, end++)
			ns = ns * 10 + (*end - '0');
		for (; d < 9; d++)
			ns *= 10;
		while (*end >= '0' && *end <= '9')
			end++;
		if (s[0] == '-' && ns) {
			/* -1.25 is 1.25 s before the epoch: -2 s + 0.75 s */
			v--;
			ns = 1000000000L - ns;
		}
	}
	if (*end)
		return -1;
	*sec = v;
	*nsec = ns;
	return 0;
}

/* The records of a pax 'x' header, applied to the next entry. */
static int parse_pax(struct tar_reader *r, space_err *e)
{
	size_t off = 0;

	while (off < r->ext_len) {
		char *rec = r->ext + off, *sp, *eq, *end;
		unsigned long long len = 0;
		size_t i;

		for (i = 0; off + i < r->ext_len && rec[i] >= '0' && rec[i] <= '9' && i < 20; i++)
			len = len * 10 + (unsigned)(rec[i] - '0');
		if (i == 0 || len == 0 || len > r->ext_len - off || rec[i] != ' ' ||
		    rec[len - 1] != '\n')
			return err_set(e, EBADMSG, "malformed pax header record");
		sp = rec + i;
		end = rec + len - 1;
		eq = memchr(sp + 1, '=', (size_t)(end - sp - 1));
		if (!eq)
			return err_set(e, EBADMSG, "malformed pax header record");
		*eq = '\0';
		*end = '\0';
		if (strcmp(sp + 1, "path") == 0 || strcmp(sp + 1, "linkpath") == 0) {
			char **dst = sp[1] == 'p' ? &r->x_path : &r->x_linkpath;

			if (memchr(eq + 1, '\0', (size_t)(end - eq - 1)))
				return err_set(e, EBADMSG, "a pax name holds a NUL byte");
			free(*dst);
			*dst = strdup(eq + 1);
			if (!*dst)
				return err_set(e, ENOMEM, "out of memory");
		} else if (strcmp(sp + 1, "size") == 0) {
			char *x;

			errno = 0;
			r->x_size = strtoull(eq + 1, &x, 10);
			if (errno || x == eq + 1 || *x || eq[1] == '-')
				return err_set(e, EBADMSG, "malformed pax size");
			r->x_size_set = true;
		} else if (strcmp(sp + 1, "mtime") == 0) {
			if (parse_time(eq + 1, &r->x_mtime, &r->x_mtime_nsec) < 0)
				return err_set(e, EBADMSG, "malformed pax mtime");
			r->x_mtime_set = true;
		}
		off += (size_t)len;
	}
	return 0;
}

/* A GNU long name: the data up to its first NUL. */
static int take_long(struct tar_reader *r, char **dst, space_err *e)
{
	size_t n = strnlen(r->ext, r->ext_len);

	free(*dst);
	*dst = strndup(r->ext, n);
	if (!*dst)
		return err_set(e, ENOMEM, "out of memory");
	return 0;
}

static int end_ext(struct tar_reader *r, space_err *e)
{
	switch (r->ext_type) {
	case 'x':
		return parse_pax(r, e);
	case 'L':
		return take_long(r, &r->x_path, e);
	case 'K':
		return take_long(r, &r->x_linkpath, e);
	default: /* 'g': global records; nothing we use */
		return 0;
	}
}

static size_t pad_of(unsigned long long n)
{
	return (size_t)((TAR_BLOCK - n % TAR_BLOCK) % TAR_BLOCK);
}

static int end_entry(struct tar_reader *r, space_err *e)
{
	if (r->ops->end && r->ops->end(r->arg, e) < 0)
		return -1;
	return 0;
}

/* A whole header block is in r->block. */
static int header(struct tar_reader *r, space_err *e)
{
	const unsigned char *b = r->block;
	unsigned long long size, mode, mtime;
	char name[257], linkname[101];
	struct tar_entry en;
	char type = (char)b[156];
	bool posix = memcmp(b + 257, "ustar\0", 6) == 0;
	int rc;

	if (all_zero(b)) {
		if (++r->zero_blocks == 2)
			r->state = ST_END;
		return 0;
	}
	r->zero_blocks = 0;
	if (!checksum_ok(b))
		return err_set(e, EBADMSG, "not a tar archive, or a damaged one (header checksum "
			       "mismatch after %llu entries)", r->entries);
	if (parse_num(b + 124, 12, &size) < 0 || parse_num(b + 100, 8, &mode) < 0 ||
	    parse_num(b + 136, 12, &mtime) < 0)
		return err_set(e, EBADMSG, "a malformed number in a tar header");

	if (type == 'x' || type == 'g' || type == 'L' || type == 'K') {
		if (size > EXT_MAX)
			return err_set(e, EBADMSG, "a tar extended header of %llu bytes (at most %u)",
				       size, EXT_MAX);
		free(r->ext);
		r->ext = malloc((size_t)size + 1);
		if (!r->ext)
			return err_set(e, ENOMEM, "out of memory");
		r->ext_len = 0;
		r->ext_type = type;
		r->left = size;
		r->pad = pad_of(size);
		r->state = ST_EXT;
		if (size == 0) {
			r->ext[0] = '\0';
			if (end_ext(r, e) < 0)
				return -1;
			r->state = ST_HEADER;
		}
		return 0;
	}

	/* ustar: prefix "/" name; GNU's magic has no prefix field. */
	if (posix && b[345]) {
		snprintf(name, sizeof(name), "%.155s/%.100s", (const char *)b + 345,
			 (const char *)b);
	} else {
		snprintf(name, sizeof(name), "%.100s", (const char *)b);
	}
	snprintf(linkname, sizeof(linkname), "%.100s", (const char *)b + 157);

	memset(&en, 0, sizeof(en));
	en.type = (type == '\0' || type == '7') ? TAR_FILE : type;
	en.name = r->x_path ? r->x_path : name;
	en.linkname = r->x_linkpath ? r->x_linkpath : linkname;
	if (r->x_size_set)
		size = r->x_size;
	en.mode = (unsigned)(mode & 07777);
	if (r->x_mtime_set) {
		en.mtime = r->x_mtime;
		en.mtime_nsec = r->x_mtime_nsec;
	} else {
		en.mtime = (long long)mtime;
	}
	/* These types carry no data whatever the size field says. */
	if (strchr("123456", en.type))
		size = 0;
	en.size = size;
	if (!*en.name)
		return err_set(e, EBADMSG, "a tar entry without a name");

	r->entries++;
	rc = r->ops->begin ? r->ops->begin(r->arg, &en, e) : 0;
	clear_ext(r);
	if (rc < 0)
		return -1;
	r->left = size;
	r->pad = pad_of(size);
	if (size)
		r->state = ST_DATA;
	else
		return end_entry(r, e);
	return 0;
}

int tarr_feed(struct tar_reader *r, const char *p, size_t n, space_err *e)
{
	if (r->failed) {
		*e = r->err;
		return -1;
	}
	while (n) {
		size_t k;

		switch (r->state) {
		case ST_HEADER:
			k = TAR_BLOCK - r->have;
			if (k > n)
				k = n;
			memcpy(r->block + r->have, p, k);
			r->have += k;
			p += k;
			n -= k;
			if (r->have == TAR_BLOCK) {
				r->have = 0;
				if (header(r, e) < 0)
					return fail(r, e);
			}
			break;
		case ST_EXT:
			k = r->left < n ? (size_t)r->left : n;
			memcpy(r->ext + r->ext_len, p, k);
			r->ext_len += k;
			r->left -= k;
			p += k;
			n -= k;
			if (!r->left) {
				r->ext[r->ext_len] = '\0';
				if (end_ext(r, e) < 0)
					return fail(r, e);
				r->state = r->pad ? ST_PAD : ST_HEADER;
			}
			break;
		case ST_DATA:
			k = r->left < n ? (size_t)r->left : n;
			if (r->ops->data && r->ops->data(r->arg, p, k, e) < 0)
				return fail(r, e);
			r->left -= k;
			p += k;
			n -= k;
			if (!r->left) {
				if (end_entry(r, e) < 0)
					return fail(r, e);
				r->state = r->pad ? ST_PAD : ST_HEADER;
			}
			break;
		case ST_PAD:
			k = r->pad < n ? r->pad : n;
			r->pad -= k;
			p += k;
			n -= k;
			if (!r->pad)
				r->state = ST_HEADER;
			break;
		default: /* ST_END: the rest is blocking padding */
			return 0;
		}
	}
	return 0;
}

int tarr_finish(struct tar_reader *r, space_err *e)
{
	if (r->failed) {
		*e = r->err;
		return -1;
	}
	/* GNU tar and others may stop after one zero block. */
	if (r->state == ST_END || (r->state == ST_HEADER && r->have == 0 && r->zero_blocks == 1))
		return 0;
	err_set(e, EPIPE, "the archive ended early (after %llu entries)", r->entries);
	return fail(r, e);
}
