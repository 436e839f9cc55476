/* tar_read.c -- a tar reader for tar-in: ustar (POSIX and GNU magic, and old V7 headers),
 * pax 'x' extended headers (path, linkpath, size, mtime, uid, gid, uname, gname; other keys
 * ignored), pax 'g' global headers (skipped), GNU 'L' / 'K' long names.
 *
 * The bytes come from a client: every header's checksum is verified (the unsigned sum, or the
 * signed one some old writers used), numeric fields must be well-formed octal or base-256,
 * pax records must be well-formed, and meta-data held in memory is at most TAR_META_MAX
 * bytes; names and link targets longer than TAR_NAME_MAX or containing NUL are refused. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "tar.h"

int tar_reader_init(struct tar_reader *r, tar_read_fn fn, void *ctx, size_t bufcap)
{
	memset(r, 0, sizeof(*r));
	r->read = fn;
	r->ctx = ctx;
	r->cap = bufcap < TAR_BLOCK ? TAR_BLOCK : bufcap;
	r->buf = malloc(r->cap);
	return r->buf ? 0 : -1;
}

static void clear_meta(struct tar_reader *r)
{
	free(r->x_path);
	free(r->x_link);
	free(r->gnu_path);
	free(r->gnu_link);
	r->x_path = r->x_link = r->gnu_path = r->gnu_link = NULL;
	r->x_has_size = r->x_has_mtime = r->x_has_uid = r->x_has_gid = false;
	r->x_has_uname = r->x_has_gname = false;
}

void tar_reader_free(struct tar_reader *r)
{
	clear_meta(r);
	free(r->name);
	free(r->linkname);
	free(r->buf);
	r->name = r->linkname = NULL;
	r->buf = NULL;
}

static int bad(struct tar_reader *r, space_err *err, const char *what)
{
	r->done = true;
	return err_set(err, EINVAL, "tar: %s at byte %llu", what, (unsigned long long)r->offset);
}

/* Make at least want (<= cap) bytes available at buf[pos]; 1, 0 at a clean end of input
 * (nothing buffered), -1 on error (a short tail is "truncated"). */
static int fill(struct tar_reader *r, size_t want, space_err *err)
{
	if (r->len - r->pos >= want)
		return 1;
	if (r->pos) {
		memmove(r->buf, r->buf + r->pos, r->len - r->pos);
		r->len -= r->pos;
		r->pos = 0;
	}
	while (r->len < want) {
		ssize_t n;

		if (r->eof)
			break;
		n = r->read(r->ctx, r->buf + r->len, r->cap - r->len);
		if (n < 0) {
			r->done = true;
			return err_set(err, errno ? errno : EIO, "tar: read: %s", strerror(errno));
		}
		if (n == 0)
			r->eof = true;
		r->len += (size_t)n;
	}
	if (r->len >= want)
		return 1;
	if (r->len == 0)
		return 0;
	return bad(r, err, "truncated archive");
}

static void consume(struct tar_reader *r, size_t n)
{
	r->pos += n;
	r->offset += n;
}

/* Skip n bytes of input. */
static int skip(struct tar_reader *r, uint64_t n, space_err *err)
{
	while (n) {
		size_t k;
		int rc;

		if (r->pos == r->len) {
			rc = fill(r, 1, err);
			if (rc <= 0)
				return rc < 0 ? -1 : bad(r, err, "truncated archive");
		}
		k = r->len - r->pos;
		if (k > n)
			k = (size_t)n;
		consume(r, k);
		n -= k;
	}
	return 0;
}

/* A numeric field: octal digits (leading spaces, then digits, then NUL/space to the end), an
 * empty field (0), or base-256 (first byte 0x80: positive, 0xff: negative). */
static int parse_num(const unsigned char *f, size_t n, bool allow_negative, int64_t *out)
{
	size_t i = 0;
	uint64_t v = 0;

	if (f[0] & 0x80) {
		bool neg = f[0] == 0xff;

		if ((f[0] != 0x80 && !neg) || (neg && !allow_negative))
			return -1;
		/* Big-endian two's complement in the remaining bytes: a byte may be shifted out
		 * only if it is pure sign extension, and the result's sign must be right. */
		v = neg ? UINT64_MAX : 0;
		for (i = 1; i < n; i++) {
			if ((v >> 56) != (neg ? 0xffu : 0u))
				return -1;
			v = (v << 8) | f[i];
		}
		if (neg ? !(v >> 63) : (v >> 63))
			return -1;
		*out = (int64_t)v;
		return 0;
	}
	while (i < n && f[i] == ' ')
		i++;
	for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v >> 60)
			return -1;
		v = v * 8 + (uint64_t)(f[i] - '0');
	}
	for (; i < n; i++)
		if (f[i] != ' ' && f[i] != '\0')
			return -1;
	*out = (int64_t)v;
	return 0;
}

static bool checksum_ok(const unsigned char *h)
{
	unsigned usum = 0;
	int ssum = 0;
	int64_t want;
	size_t i;

	for (i = 0; i < TAR_BLOCK; i++) {
		unsigned char c = (i >= 148 && i < 156) ? ' ' : h[i];

		usum += c;
		ssum += (signed char)c;
	}
	if (parse_num(h + 148, 8, false, &want) < 0)
		return false;
	return (int64_t)usum == want || (int64_t)ssum == want;
}

static bool all_zero(const unsigned char *h)
{
	size_t i;

	for (i = 0; i < TAR_BLOCK; i++)
		if (h[i])
			return false;
	return true;
}

/* Read the next n data bytes (the meta-data of a 'x', 'L' or 'K' entry) into a new string. */
static char *read_meta(struct tar_reader *r, uint64_t n, space_err *err)
{
	char *s;
	size_t got = 0;

	if (n > TAR_META_MAX) {
		bad(r, err, "extended header too large");
		return NULL;
	}
	s = malloc((size_t)n + 1);
	if (!s) {
		r->done = true;
		err_set(err, ENOMEM, "tar: out of memory");
		return NULL;
	}
	while (got < n) {
		size_t k;
		int rc;

		if (r->pos == r->len) {
			rc = fill(r, 1, err);
			if (rc <= 0) {
				if (rc == 0)
					bad(r, err, "truncated archive");
				free(s);
				return NULL;
			}
		}
		k = r->len - r->pos;
		if (k > n - got)
			k = (size_t)(n - got);
		memcpy(s + got, r->buf + r->pos, k);
		consume(r, k);
		got += k;
	}
	s[n] = '\0';
	if (skip(r, (TAR_BLOCK - n % TAR_BLOCK) % TAR_BLOCK, err) < 0) {
		free(s);
		return NULL;
	}
	return s;
}

static int parse_dec(const char *s, size_t n, bool allow_negative, int64_t *out, uint32_t *nsec)
{
	uint64_t v = 0;
	bool neg = false;
	size_t i = 0;

	if (nsec)
		*nsec = 0;
	if (i < n && s[i] == '-' && allow_negative) {
		neg = true;
		i++;
	}
	if (i == n || s[i] < '0' || s[i] > '9')
		return -1;
	for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
		if (v > (uint64_t)INT64_MAX / 10 + 1)
			return -1;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (i < n && s[i] == '.' && nsec) {
		uint32_t ns = 0, scale = 100000000;

		for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
			ns += (uint32_t)(s[i] - '0') * scale;
			scale /= 10;
		}
		if (neg && ns) { /* -1.5 is {-2, 500000000} */
			v += 1;
			ns = 1000000000u - ns;
		}
		*nsec = ns;
	}
	/* |INT64_MIN| = INT64_MAX + 1 */
	if (i != n || v > (uint64_t)INT64_MAX + (neg ? 1u : 0u))
		return -1;
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return 0;
}

static char *dup_value(const char *v, size_t n)
{
	char *s = malloc(n + 1);

	if (s) {
		memcpy(s, v, n);
		s[n] = '\0';
	}
	return s;
}

/* The records of a pax 'x' header: "<len> <key>=<value>\n". */
static int parse_pax(struct tar_reader *r, const char *d, size_t n, space_err *err)
{
	size_t pos = 0;

	while (pos < n) {
		size_t len = 0, i = pos, klen, vlen;
		const char *key, *val, *eq;
		int64_t num;

		while (i < n && d[i] >= '0' && d[i] <= '9' && i - pos < 8)
			len = len * 10 + (size_t)(d[i++] - '0');
		if (i == pos || i >= n || d[i] != ' ' || len < 5 || len > n - pos ||
		    i + 1 > pos + len - 1 || d[pos + len - 1] != '\n')
			return bad(r, err, "malformed pax record");
		key = d + i + 1;
		eq = memchr(key, '=', (size_t)(d + pos + len - 1 - key));
		if (!eq || eq == key)
			return bad(r, err, "malformed pax record");
		klen = (size_t)(eq - key);
		val = eq + 1;
		vlen = (size_t)(d + pos + len - 1 - val);
		pos += len;
#define KEY(k) (klen == sizeof(k) - 1 && memcmp(key, k, klen) == 0)
		if (KEY("path") || KEY("linkpath")) {
			char **dst = KEY("path") ? &r->x_path : &r->x_link;

			if (vlen > TAR_NAME_MAX || memchr(val, '\0', vlen))
				return bad(r, err, "pax path too long or not a string");
			free(*dst);
			*dst = dup_value(val, vlen);
			if (!*dst) {
				r->done = true;
				return err_set(err, ENOMEM, "tar: out of memory");
			}
		} else if (KEY("size") || KEY("uid") || KEY("gid")) {
			if (parse_dec(val, vlen, false, &num, NULL) < 0)
				return bad(r, err, "malformed pax number");
			if (KEY("size")) {
				r->x_size = (uint64_t)num;
				r->x_has_size = true;
			} else if (KEY("uid")) {
				r->x_uid = (uint64_t)num;
				r->x_has_uid = true;
			} else {
				r->x_gid = (uint64_t)num;
				r->x_has_gid = true;
			}
		} else if (KEY("mtime")) {
			if (parse_dec(val, vlen, true, &num, &r->x_mtime_nsec) < 0)
				return bad(r, err, "malformed pax mtime");
			r->x_mtime = num;
			r->x_has_mtime = true;
		} else if (KEY("uname") || KEY("gname")) {
			char *dst = KEY("uname") ? r->x_uname : r->x_gname;
			size_t k = vlen < 32 ? vlen : 32;

			memcpy(dst, val, k);
			dst[k] = '\0';
			if (KEY("uname"))
				r->x_has_uname = true;
			else
				r->x_has_gname = true;
		}
#undef KEY
	}
	return 0;
}

/* A string field of at most n bytes (NUL-terminated when shorter). */
static size_t field_len(const unsigned char *f, size_t n)
{
	const unsigned char *z = memchr(f, '\0', n);

	return z ? (size_t)(z - f) : n;
}

int tar_next(struct tar_reader *r, struct tar_entry *e, space_err *err)
{
	if (r->done)
		return err_set(err, EINVAL, "tar: read past the end");
	/* The rest of the previous entry. */
	if (skip(r, r->remaining + r->pad, err) < 0)
		return -1;
	r->remaining = r->pad = 0;
	free(r->name);
	free(r->linkname);
	r->name = r->linkname = NULL;

	for (;;) {
		unsigned char h[TAR_BLOCK];
		int64_t mode, uid, gid, size, mtime;
		char type;
		bool posix;
		int rc = fill(r, TAR_BLOCK, err);

		if (rc < 0)
			return -1;
		if (rc == 0) {
			/* The input ended on a block boundary without the two zero blocks: accepted
			 * as the end (GNU tar does too), unless meta-data announced an entry. */
			r->done = true;
			if (r->x_path || r->x_link || r->gnu_path || r->gnu_link || r->x_has_size)
				return bad(r, err, "truncated archive");
			return 0;
		}
		memcpy(h, r->buf + r->pos, TAR_BLOCK);
		if (all_zero(h)) {
			consume(r, TAR_BLOCK);
			r->done = true;
			return 0;
		}
		if (!checksum_ok(h))
			return bad(r, err, "bad header checksum");
		consume(r, TAR_BLOCK);
		posix = memcmp(h + 257, "ustar\0", 6) == 0;
		if (parse_num(h + 100, 8, false, &mode) < 0 || parse_num(h + 108, 8, false, &uid) < 0 ||
		    parse_num(h + 116, 8, false, &gid) < 0 || parse_num(h + 124, 12, false, &size) < 0 ||
		    parse_num(h + 136, 12, true, &mtime) < 0)
			return bad(r, err, "malformed numeric field");
		type = (char)h[156];
		if (type == 'x' || type == 'g' || type == 'L' || type == 'K') {
			char *d;

			if (type == 'g') {
				if (skip(r, (uint64_t)size + (TAR_BLOCK - (uint64_t)size % TAR_BLOCK) %
							    TAR_BLOCK, err) < 0)
					return -1;
				continue;
			}
			d = read_meta(r, (uint64_t)size, err);
			if (!d)
				return -1;
			if (type == 'x') {
				rc = parse_pax(r, d, (size_t)size, err);
				free(d);
				if (rc < 0)
					return -1;
			} else {
				size_t n = strlen(d); /* the name ends at its NUL */

				if (n > TAR_NAME_MAX) {
					free(d);
					return bad(r, err, "GNU long name too long");
				}
				if (type == 'L') {
					free(r->gnu_path);
					r->gnu_path = d;
				} else {
					free(r->gnu_link);
					r->gnu_link = d;
				}
			}
			continue;
		}

		/* A real entry: its name and link target, meta-data first. */
		if (r->x_path)
			r->name = steal_pointer(&r->x_path);
		else if (r->gnu_path)
			r->name = steal_pointer(&r->gnu_path);
		else {
			size_t nl = field_len(h, 100), pl = posix ? field_len(h + 345, 155) : 0;

			r->name = malloc(pl + 1 + nl + 1);
			if (r->name) {
				if (pl) {
					memcpy(r->name, h + 345, pl);
					r->name[pl] = '/';
					pl++;
				}
				memcpy(r->name + pl, h, nl);
				r->name[pl + nl] = '\0';
			}
		}
		if (r->x_link)
			r->linkname = steal_pointer(&r->x_link);
		else if (r->gnu_link)
			r->linkname = steal_pointer(&r->gnu_link);
		else
			r->linkname = dup_value((const char *)h + 157, field_len(h + 157, 100));
		if (!r->name || !r->linkname) {
			clear_meta(r);
			r->done = true;
			return err_set(err, ENOMEM, "tar: out of memory");
		}
		e->name = r->name;
		e->linkname = r->linkname;
		e->mode = (uint32_t)(mode & 07777);
		e->uid = r->x_has_uid ? r->x_uid : (uint64_t)uid;
		e->gid = r->x_has_gid ? r->x_gid : (uint64_t)gid;
		e->mtime = r->x_has_mtime ? r->x_mtime : mtime;
		e->mtime_nsec = r->x_has_mtime ? r->x_mtime_nsec : 0;
		e->size = r->x_has_size ? r->x_size : (uint64_t)size;
		if (r->x_has_uname)
			memcpy(e->uname, r->x_uname, sizeof(e->uname));
		else {
			size_t k = field_len(h + 265, 32);

			memcpy(e->uname, h + 265, k);
			e->uname[k] = '\0';
		}
		if (r->x_has_gname)
			memcpy(e->gname, r->x_gname, sizeof(e->gname));
		else {
			size_t k = field_len(h + 297, 32);

			memcpy(e->gname, h + 297, k);
			e->gname[k] = '\0';
		}
		clear_meta(r);

		switch (type) {
		case '0':
		case '\0':
		case '7':
			e->type = TAR_FILE;
			/* Old (V7) archives mark directories by a trailing slash only. */
			if (e->name[0] && e->name[strlen(e->name) - 1] == '/' && type != '7')
				e->type = TAR_DIR;
			break;
		case '1': e->type = TAR_HARDLINK; break;
		case '2': e->type = TAR_SYMLINK; break;
		case '5': e->type = TAR_DIR; break;
		default: e->type = TAR_OTHER; break;
		}
		/* Hard links, symlinks and directories carry no data (a size there is skipped);
		 * other types keep theirs, for the caller to skip. */
		r->remaining = e->size;
		r->pad = (TAR_BLOCK - e->size % TAR_BLOCK) % TAR_BLOCK;
		if (e->type == TAR_HARDLINK || e->type == TAR_SYMLINK || e->type == TAR_DIR)
			e->size = 0;
		if (e->type != TAR_HARDLINK && e->type != TAR_SYMLINK)
			e->linkname = "";
		if (strlen(e->name) > TAR_NAME_MAX || strlen(e->linkname) > TAR_NAME_MAX)
			return bad(r, err, "name too long");
		return 1;
	}
}

ssize_t tar_read_data(struct tar_reader *r, void *buf, size_t n, space_err *err)
{
	size_t k;
	int rc;

	if (r->remaining == 0)
		return 0;
	if (r->pos == r->len) {
		/* Large reads go straight into the caller's buffer. */
		if (n >= r->cap && !r->eof) {
			ssize_t got;

			if (n > r->remaining)
				n = (size_t)r->remaining;
			got = r->read(r->ctx, buf, n);
			if (got < 0) {
				r->done = true;
				return err_set(err, errno ? errno : EIO, "tar: read: %s",
					       strerror(errno));
			}
			if (got == 0) {
				r->eof = true;
				return bad(r, err, "truncated archive");
			}
			r->offset += (uint64_t)got;
			r->remaining -= (uint64_t)got;
			return got;
		}
		rc = fill(r, 1, err);
		if (rc <= 0)
			return rc < 0 ? -1 : bad(r, err, "truncated archive");
	}
	k = r->len - r->pos;
	if (k > n)
		k = n;
	if (k > r->remaining)
		k = (size_t)r->remaining;
	memcpy(buf, r->buf + r->pos, k);
	consume(r, k);
	r->remaining -= k;
	return (ssize_t)k;
}

int tar_name_clean(const char *in, char *out, space_err *err)
{
	size_t o = 0;
	const char *p = in;

	if (in[0] == '/')
		return err_set(err, EINVAL, "tar: absolute name refused: %.200s", in);
	while (*p) {
		const char *s = p;
		size_t n;

		while (*p && *p != '/')
			p++;
		n = (size_t)(p - s);
		while (*p == '/')
			p++;
		if (n == 0 || (n == 1 && s[0] == '.'))
			continue;
		if (n == 2 && s[0] == '.' && s[1] == '.')
			return err_set(err, EINVAL, "tar: name with a .. component refused: %.200s",
				       in);
		if (o + (o ? 1 : 0) + n > TAR_NAME_MAX)
			return err_set(err, ENAMETOOLONG, "tar: name too long: %.200s", in);
		if (o)
			out[o++] = '/';
		memcpy(out + o, s, n);
		o += n;
	}
	out[o] = '\0';
	return 0;
}
