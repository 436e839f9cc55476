/* tar_write.c -- POSIX tar output (pax interchange format): ustar headers, and a pax 'x'
 * header before an entry when the ustar fields cannot hold it (long name or link target,
 * size >= 8 GiB, large ids, negative mtime, long user/group names).  A number that does not
 * fit its octal field is also written there in GNU base-256 form, for readers without pax. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tar.h"

#define H_NAME 0
#define H_MODE 100
#define H_UID 108
#define H_GID 116
#define H_SIZE 124
#define H_MTIME 136
#define H_CHKSUM 148
#define H_TYPE 156
#define H_LINK 157
#define H_MAGIC 257
#define H_VERSION 263
#define H_UNAME 265
#define H_GNAME 297
#define H_DEVMAJOR 329
#define H_DEVMINOR 337
#define H_PREFIX 345

void tar_writer_init(struct tar_writer *w, struct fs_out *o)
{
	w->o = o;
	w->written = 0;
	jb_init(&w->pax);
}

void tar_writer_free(struct tar_writer *w)
{
	jb_free(&w->pax);
}

/* v in octal, zero-padded, NUL-terminated, in a field of n bytes; false if it does not fit. */
static bool put_octal(unsigned char *f, size_t n, uint64_t v)
{
	size_t i = n - 1;

	if (n - 1 < 22 && v >> (3 * (n - 1)))
		return false;
	f[i] = '\0';
	while (i--) {
		f[i] = (unsigned char)('0' + (v & 7));
		v >>= 3;
	}
	return true;
}

/* v in octal when it fits (and is not negative), else GNU base-256 (two's complement, high
 * bit of the first byte set); false when it needed the latter (so a pax record too). */
static bool put_num(unsigned char *f, size_t n, int64_t v, bool is_signed)
{
	uint64_t u = (uint64_t)v;
	size_t i;

	if ((!is_signed || v >= 0) && put_octal(f, n, u))
		return true;
	for (i = n; i-- > 1;) {
		f[i] = (unsigned char)(u & 0xff);
		u = (uint64_t)((int64_t)u >> 8); /* arithmetic: keeps a negative value's sign */
	}
	f[0] = (is_signed && v < 0) ? 0xff : 0x80;
	return false;
}

static void pax_record(struct jbuf *b, const char *key, const char *val, size_t vlen)
{
	size_t base = strlen(key) + vlen + 3, d = 1, t;
	char num[24];
	int k;

	/* The record's length counts its own digits. */
	for (;;) {
		t = base + d;
		k = snprintf(num, sizeof(num), "%zu", t);
		if ((size_t)k == d)
			break;
		d = (size_t)k;
	}
	jb_raw(b, num, (size_t)k);
	jb_raw(b, " ", 1);
	jb_raw(b, key, strlen(key));
	jb_raw(b, "=", 1);
	jb_raw(b, val, vlen);
	jb_raw(b, "\n", 1);
}

static void pax_num(struct jbuf *b, const char *key, int64_t v, bool is_signed)
{
	char num[24];
	int k = is_signed ? snprintf(num, sizeof(num), "%lld", (long long)v)
			  : snprintf(num, sizeof(num), "%llu", (unsigned long long)(uint64_t)v);

	pax_record(b, key, num, (size_t)k);
}

static void checksum(unsigned char *h)
{
	unsigned sum = 0;
	size_t i;

	memset(h + H_CHKSUM, ' ', 8);
	for (i = 0; i < TAR_BLOCK; i++)
		sum += h[i];
	put_octal(h + H_CHKSUM, 7, sum); /* 6 digits, NUL, then the space left from memset */
}

static int put_block(struct tar_writer *w, const unsigned char *h)
{
	if (fs_out_put(w->o, h, TAR_BLOCK) < 0)
		return -1;
	w->written += TAR_BLOCK;
	return 0;
}

/* The ustar name fields for name: name alone (<= 100 bytes) or prefix/name split at a '/'. */
static bool put_name(unsigned char *h, const char *name)
{
	size_t len = strlen(name), i;

	if (len <= 100) {
		memcpy(h + H_NAME, name, len);
		return true;
	}
	if (len > 256)
		return false;
	for (i = len - 101; i <= 155 && i < len; i++) {
		if (name[i] == '/' && i > 0 && len - i - 1 >= 1 && len - i - 1 <= 100) {
			memcpy(h + H_PREFIX, name, i);
			memcpy(h + H_NAME, name + i + 1, len - i - 1);
			return true;
		}
	}
	return false;
}

int tar_write_header(struct tar_writer *w, const struct tar_entry *e)
{
	unsigned char h[TAR_BLOCK];
	size_t llen = strlen(e->linkname), ul = strlen(e->uname), gl = strlen(e->gname);
	struct jbuf *x = &w->pax;

	memset(h, 0, sizeof(h));
	jb_reset(x);
	if (!put_name(h, e->name)) {
		memset(h + H_NAME, 0, 100);
		memset(h + H_PREFIX, 0, 155);
		memcpy(h + H_NAME, e->name, strlen(e->name) < 100 ? strlen(e->name) : 100);
		pax_record(x, "path", e->name, strlen(e->name));
	}
	if (llen <= 100)
		memcpy(h + H_LINK, e->linkname, llen);
	else {
		memcpy(h + H_LINK, e->linkname, 100);
		pax_record(x, "linkpath", e->linkname, llen);
	}
	put_octal(h + H_MODE, 8, e->mode & 07777);
	if (!put_num(h + H_UID, 8, (int64_t)e->uid, false))
		pax_num(x, "uid", (int64_t)e->uid, false);
	if (!put_num(h + H_GID, 8, (int64_t)e->gid, false))
		pax_num(x, "gid", (int64_t)e->gid, false);
	if (!put_num(h + H_SIZE, 12, (int64_t)e->size, false))
		pax_num(x, "size", (int64_t)e->size, false);
	if (!put_num(h + H_MTIME, 12, e->mtime, true))
		pax_num(x, "mtime", e->mtime, true);
	h[H_TYPE] = (unsigned char)e->type;
	memcpy(h + H_MAGIC, "ustar", 6);
	memcpy(h + H_VERSION, "00", 2);
	memcpy(h + H_UNAME, e->uname, ul < 31 ? ul : 31);
	if (ul > 31)
		pax_record(x, "uname", e->uname, ul);
	memcpy(h + H_GNAME, e->gname, gl < 31 ? gl : 31);
	if (gl > 31)
		pax_record(x, "gname", e->gname, gl);
	put_octal(h + H_DEVMAJOR, 8, 0);
	put_octal(h + H_DEVMINOR, 8, 0);
	checksum(h);

	if (x->oom) {
		errno = ENOMEM;
		return -1;
	}
	if (x->len) {
		unsigned char p[TAR_BLOCK];

		memset(p, 0, sizeof(p));
		memcpy(p + H_NAME, "././@PaxHeader", 14);
		put_octal(p + H_MODE, 8, 0644);
		put_octal(p + H_UID, 8, 0);
		put_octal(p + H_GID, 8, 0);
		put_octal(p + H_SIZE, 12, x->len);
		put_num(p + H_MTIME, 12, e->mtime, true);
		p[H_TYPE] = 'x';
		memcpy(p + H_MAGIC, "ustar", 6);
		memcpy(p + H_VERSION, "00", 2);
		checksum(p);
		if (put_block(w, p) < 0 || tar_write_data(w, x->p, x->len) < 0 ||
		    tar_write_pad(w) < 0)
			return -1;
	}
	return put_block(w, h);
}

int tar_write_data(struct tar_writer *w, const void *p, size_t n)
{
	if (fs_out_put(w->o, p, n) < 0)
		return -1;
	w->written += n;
	return 0;
}

char *tar_write_space(struct tar_writer *w, size_t *room)
{
	return fs_out_space(w->o, room);
}

void tar_write_commit(struct tar_writer *w, size_t n)
{
	fs_out_commit(w->o, n);
	w->written += n;
}

int tar_write_pad(struct tar_writer *w)
{
	size_t pad = (size_t)((TAR_BLOCK - w->written % TAR_BLOCK) % TAR_BLOCK);

	if (fs_out_zero(w->o, pad) < 0)
		return -1;
	w->written += pad;
	return 0;
}

int tar_write_end(struct tar_writer *w)
{
	size_t pad;

	if (tar_write_pad(w) < 0 || fs_out_zero(w->o, 2 * TAR_BLOCK) < 0)
		return -1;
	w->written += 2 * TAR_BLOCK;
	pad = (size_t)((TAR_RECORD - w->written % TAR_RECORD) % TAR_RECORD);
	if (fs_out_zero(w->o, pad) < 0)
		return -1;
	w->written += pad;
	return 0;
}
