/* spool.c -- one session's output on disk: length-prefixed records in one or two segment files,
 * addressed by payload offset, older output dropped a segment at a time past a cap */
#include "spool.h"

#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"

#define HDR_LEN 8u
/* The base record: stream 3, 8 bytes of offset. Only ever first in a segment. */
#define BASE_STREAM 3u
#define BASE_LEN (HDR_LEN + 8u)
/* One index entry per this many file bytes: lookups scan at most this far. */
#define INDEX_STEP (1u << 20)
/* Larger appends are split so a record never needs a huge read to skip. */
#define MAX_RECORD (1u << 24)
/* Header scans read the file in windows of this size. */
#define SCAN_WINDOW (64u << 10)

struct spool_mark {
	uint64_t file_off; /* where the record's header starts, in its segment */
	uint64_t data_off; /* output offset of its first byte */
};

struct seg {
	int fd;            /* -1 while parked (or absent) */
	uint64_t base;     /* output offset of its first payload byte */
	uint64_t hdr;      /* file bytes before the first data record (its base record) */
	uint64_t file_len; /* bytes of complete records */
	uint64_t data_len; /* payload bytes */
	struct spool_mark *idx; /* idx[0] = {hdr, base}; ascending */
	size_t nidx, cap;
};

struct spool {
	char path[PATH_MAX], old_path[PATH_MAX + 4], new_path[PATH_MAX + 4];
	struct seg cur, old;
	bool has_old;
	bool parked;
	uint64_t max_kept;
	/* The record the last read landed in: sequential readers resume here
	 * instead of scanning from the index entry. */
	struct spool_mark mark;
	const struct seg *mark_seg;
	/* Header scan window (a cache of the bytes of win_seg at win_off). */
	uint8_t *win;
	const struct seg *win_seg;
	uint64_t win_off;
	size_t win_len;
};

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static int pread_full(int fd, void *buf, size_t len, uint64_t off, size_t *got)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (uint8_t *)buf + done, len - done, (off_t)(off + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	*got = done;
	return 0;
}

static void seg_reset(struct seg *g)
{
	if (g->fd >= 0)
		close(g->fd);
	free(g->idx);
	memset(g, 0, sizeof(*g));
	g->fd = -1;
}

/* Reads the header at file offset `pos` of g (through the scan window). Returns 1
 * and fills len/stream, 0 if fewer than HDR_LEN bytes exist there, -1 on I/O
 * error. */
static int read_header(struct spool *sp, const struct seg *g, uint64_t pos, uint32_t *len, uint32_t *stream)
{
	const uint8_t *h;

	if (sp->win_seg != g || pos < sp->win_off || pos + HDR_LEN > sp->win_off + sp->win_len) {
		size_t got;
		sp->win_seg = NULL;
		if (pread_full(g->fd, sp->win, SCAN_WINDOW, pos, &got) < 0)
			return -1;
		sp->win_seg = g;
		sp->win_off = pos;
		sp->win_len = got;
		if (got < HDR_LEN)
			return 0;
	}
	h = sp->win + (pos - sp->win_off);
	*len = get_le32(h);
	*stream = get_le32(h + 4);
	return 1;
}

static int index_add(struct seg *g, uint64_t file_off, uint64_t data_off)
{
	if (g->nidx && file_off - g->idx[g->nidx - 1].file_off < INDEX_STEP)
		return 0;
	if (g->nidx == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 16;
		struct spool_mark *n = realloc(g->idx, cap * sizeof(*n));
		if (!n)
			return -1;
		g->idx = n;
		g->cap = cap;
	}
	g->idx[g->nidx].file_off = file_off;
	g->idx[g->nidx].data_off = data_off;
	g->nidx++;
	return 0;
}

/* The base record at the start of g, if there is one: sets base and hdr. */
static int read_base(struct seg *g, uint64_t size, const char *path, space_err *err)
{
	uint8_t b[BASE_LEN];
	size_t got;

	g->base = g->hdr = 0;
	if (size < BASE_LEN)
		return 0;
	if (pread_full(g->fd, b, BASE_LEN, 0, &got) < 0)
		return err_sys(err, errno, "reading %s", path);
	if (got == BASE_LEN && get_le32(b) == 8 && get_le32(b + 4) == BASE_STREAM) {
		g->base = (uint64_t)get_le32(b + 8) | (uint64_t)get_le32(b + 12) << 32;
		g->hdr = BASE_LEN;
	}
	return 0;
}

/* Walks every record header of g, building its index, and cuts the file
 * after the last complete, sane record. */
static int seg_scan(struct spool *sp, struct seg *g, const char *path, space_err *err)
{
	struct stat st;
	uint64_t pos, data, size;

	if (fstat(g->fd, &st) < 0)
		return err_sys(err, errno, "stat %s", path);
	size = (uint64_t)st.st_size;
	if (read_base(g, size, path, err) < 0)
		return -1;
	pos = g->hdr;
	data = g->base;
	while (pos < size) {
		uint32_t len, stream;
		int r = read_header(sp, g, pos, &len, &stream);
		if (r < 0)
			return err_sys(err, errno, "reading %s", path);
		if (r == 0 || len == 0 || len > MAX_RECORD || (stream != 1 && stream != 2) ||
		    pos + HDR_LEN + len > size)
			break;
		if (index_add(g, pos, data) < 0)
			return err_set(err, ENOMEM, "spool index: out of memory");
		pos += HDR_LEN + len;
		data += len;
	}
	if (pos < size) {
		log_warn("spool %s: dropping %llu bytes of torn or corrupt tail", path,
			 (unsigned long long)(size - pos));
		if (ftruncate(g->fd, (off_t)pos) < 0)
			return err_sys(err, errno, "truncating %s", path);
	}
	sp->win_seg = NULL;
	g->file_len = pos;
	g->data_len = data - g->base;
	if (g->nidx == 0 && index_add(g, g->hdr, g->base) < 0)
		return err_set(err, ENOMEM, "spool index: out of memory");
	return 0;
}

static int write_all(int fd, const struct iovec *iov_in, int cnt, size_t total)
{
	struct iovec iov[2];
	size_t done = 0;

	memcpy(iov, iov_in, (size_t)cnt * sizeof(*iov));
	while (done < total) {
		ssize_t n = writev(fd, iov, cnt);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = EIO;
			return -1;
		}
		done += (size_t)n;
		/* Advance the vectors past what was written. */
		while (cnt && (size_t)n >= iov[0].iov_len) {
			n -= (ssize_t)iov[0].iov_len;
			iov[0] = iov[1];
			cnt--;
		}
		if (cnt) {
			iov[0].iov_base = (uint8_t *)iov[0].iov_base + n;
			iov[0].iov_len -= (size_t)n;
		}
	}
	return 0;
}

/* A new, empty segment at `path` whose output starts at `base`. */
static int seg_create(struct seg *g, const char *path, uint64_t base, space_err *err)
{
	uint8_t b[BASE_LEN];
	struct iovec iov = { b, sizeof(b) };

	memset(g, 0, sizeof(*g));
	g->fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
	if (g->fd < 0)
		return err_sys(err, errno, "creating spool %s", path);
	put_le32(b, 8);
	put_le32(b + 4, BASE_STREAM);
	put_le32(b + 8, (uint32_t)base);
	put_le32(b + 12, (uint32_t)(base >> 32));
	if (write_all(g->fd, &iov, 1, sizeof(b)) < 0 || index_add(g, BASE_LEN, base) < 0) {
		int e = errno ? errno : ENOMEM;
		seg_reset(g);
		unlink(path);
		return err_sys(err, e, "writing spool %s", path);
	}
	g->base = base;
	g->hdr = g->file_len = BASE_LEN;
	return 0;
}

/* Opens the files of a spool: a rotation cut short by a crash is finished first. */
static int spool_load(struct spool *sp, space_err *err)
{
	struct stat st;

	if (stat(sp->path, &st) < 0 && errno == ENOENT && rename(sp->new_path, sp->path) == 0)
		log_warn("spool %s: finished a rotation cut short", sp->path);
	unlink(sp->new_path);
	sp->old.fd = open(sp->old_path, O_RDWR | O_CLOEXEC);
	if (sp->old.fd >= 0) {
		if (seg_scan(sp, &sp->old, sp->old_path, err) < 0)
			return -1;
		sp->has_old = true;
	} else if (errno != ENOENT) {
		return err_sys(err, errno, "opening spool %s", sp->old_path);
	}
	sp->cur.fd = open(sp->path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (sp->cur.fd < 0)
		return err_sys(err, errno, "opening spool %s", sp->path);
	if (seg_scan(sp, &sp->cur, sp->path, err) < 0)
		return -1;
	if (sp->cur.file_len == 0 && sp->has_old) {
		seg_reset(&sp->cur);
		if (seg_create(&sp->cur, sp->path, sp->old.base + sp->old.data_len, err) < 0)
			return -1;
	}
	if (sp->has_old && sp->old.base + sp->old.data_len != sp->cur.base) {
		log_warn("spool %s: the older segment does not end where the current one starts; dropping it",
			 sp->path);
		seg_reset(&sp->old);
		sp->has_old = false;
		unlink(sp->old_path);
	}
	return 0;
}

int spool_open(struct spool **out, const char *path, space_err *err)
{
	struct spool *sp = calloc(1, sizeof(*sp));

	if (!sp)
		return err_set(err, ENOMEM, "spool: out of memory");
	sp->cur.fd = sp->old.fd = -1;
	if (snprintf(sp->path, sizeof(sp->path), "%s", path) >= (int)sizeof(sp->path)) {
		free(sp);
		return err_set(err, ENAMETOOLONG, "spool path too long: %s", path);
	}
	snprintf(sp->old_path, sizeof(sp->old_path), "%s.old", path);
	snprintf(sp->new_path, sizeof(sp->new_path), "%s.new", path);
	sp->win = malloc(SCAN_WINDOW);
	if (!sp->win) {
		spool_close(sp);
		return err_set(err, ENOMEM, "spool: out of memory");
	}
	if (spool_load(sp, err) < 0) {
		spool_close(sp);
		return -1;
	}
	*out = sp;
	return 0;
}

void spool_close(struct spool *sp)
{
	if (!sp)
		return;
	seg_reset(&sp->cur);
	seg_reset(&sp->old);
	free(sp->win);
	free(sp);
}

void spool_set_cap(struct spool *sp, uint64_t max_kept)
{
	if (sp)
		sp->max_kept = max_kept;
}

uint64_t spool_length(const struct spool *sp)
{
	return sp ? sp->cur.base + sp->cur.data_len : 0;
}

uint64_t spool_start(const struct spool *sp)
{
	if (!sp)
		return 0;
	return sp->has_old ? sp->old.base : sp->cur.base;
}

uint64_t spool_kept(const struct spool *sp)
{
	return spool_length(sp) - spool_start(sp);
}

void spool_park(struct spool *sp)
{
	if (!sp || sp->parked)
		return;
	if (sp->cur.fd >= 0)
		close(sp->cur.fd);
	if (sp->old.fd >= 0)
		close(sp->old.fd);
	sp->cur.fd = sp->old.fd = -1;
	free(sp->win);
	sp->win = NULL;
	sp->win_seg = sp->mark_seg = NULL;
	sp->parked = true;
}

static int unpark(struct spool *sp, space_err *err)
{
	if (!sp->parked)
		return 0;
	sp->win = malloc(SCAN_WINDOW);
	if (!sp->win)
		return err_set(err, ENOMEM, "spool: out of memory");
	sp->cur.fd = open(sp->path, O_RDWR | O_APPEND | O_CLOEXEC);
	if (sp->cur.fd >= 0 && sp->has_old)
		sp->old.fd = open(sp->old_path, O_RDWR | O_CLOEXEC);
	if (sp->cur.fd < 0 || (sp->has_old && sp->old.fd < 0)) {
		int e = errno;
		sp->parked = false;
		spool_park(sp);
		return err_sys(err, e, "reopening spool %s", sp->path);
	}
	sp->parked = false;
	return 0;
}

/* Writes one record; on failure cuts the file back so no torn record stays. */
static int append_record(struct spool *sp, int stream, const uint8_t *data, uint32_t len, space_err *err)
{
	struct seg *g = &sp->cur;
	uint8_t hdr[HDR_LEN];
	struct iovec iov[2] = { { hdr, HDR_LEN }, { (void *)data, len } };

	put_le32(hdr, len);
	put_le32(hdr + 4, (uint32_t)stream);
	if (write_all(g->fd, iov, 2, HDR_LEN + (size_t)len) < 0) {
		int e = errno;
		if (ftruncate(g->fd, (off_t)g->file_len) < 0)
			log_error("spool: cannot cut a torn record: %m");
		sp->win_seg = NULL; /* it may hold bytes of the cut record */
		return err_sys(err, e, "writing spool");
	}
	if (index_add(g, g->file_len, g->base + g->data_len) < 0)
		log_warn("spool: index out of memory; lookups get slower");
	g->file_len += HDR_LEN + len;
	g->data_len += len;
	return 0;
}

/* The current segment becomes the older one (the older one is dropped) and a new, empty one
 * starts where it ends. The new file is made under another name first, so a failure leaves
 * the spool as it was, and a crash between the renames is finished by spool_load. */
static int rotate(struct spool *sp, space_err *err)
{
	struct seg fresh;

	if (seg_create(&fresh, sp->new_path, spool_length(sp), err) < 0)
		return -1;
	if (rename(sp->path, sp->old_path) < 0) {
		int e = errno;
		seg_reset(&fresh);
		unlink(sp->new_path);
		return err_sys(err, e, "rotating spool %s", sp->path);
	}
	if (rename(sp->new_path, sp->path) < 0) {
		int e = errno;
		if (rename(sp->old_path, sp->path) < 0)
			log_error("spool %s: cannot undo a rotation: %m", sp->path);
		seg_reset(&fresh);
		unlink(sp->new_path);
		return err_sys(err, e, "rotating spool %s", sp->path);
	}
	seg_reset(&sp->old);
	sp->old = sp->cur;
	sp->has_old = true;
	sp->cur = fresh;
	sp->win_seg = sp->mark_seg = NULL;
	return 0;
}

int spool_append(struct spool *sp, int stream, const void *data, size_t len, space_err *err)
{
	const uint8_t *p = data;
	uint64_t half = sp->max_kept / 2 ? sp->max_kept / 2 : 1;

	if (stream != 1 && stream != 2)
		return err_set(err, EINVAL, "spool: bad stream %d", stream);
	if (len && unpark(sp, err) < 0)
		return -1;
	while (len > 0) {
		uint32_t n = len > MAX_RECORD ? MAX_RECORD : (uint32_t)len;

		if (sp->max_kept) {
			if (n > half)
				n = (uint32_t)half;
			if (sp->cur.data_len && sp->cur.data_len + n > half && rotate(sp, err) < 0)
				return -1;
		}
		if (append_record(sp, stream, p, n, err) < 0)
			return -1;
		p += n;
		len -= n;
	}
	return 0;
}

int64_t spool_drop_oldest(struct spool *sp, space_err *err)
{
	uint64_t n;

	if (!sp)
		return 0;
	if (!sp->has_old) {
		if (sp->cur.data_len == 0)
			return 0;
		if (unpark(sp, err) < 0 || rotate(sp, err) < 0)
			return -1;
	}
	n = sp->old.data_len;
	if (sp->old.fd >= 0)
		close(sp->old.fd);
	sp->old.fd = -1;
	seg_reset(&sp->old);
	sp->has_old = false;
	sp->win_seg = sp->mark_seg = NULL;
	if (unlink(sp->old_path) < 0 && errno != ENOENT)
		log_warn("spool %s: removing %s: %m", sp->path, sp->old_path);
	return (int64_t)n;
}

/* Index entry of g with the largest data_off <= off. */
static struct spool_mark index_floor(const struct seg *g, uint64_t off)
{
	size_t lo = 0, hi = g->nidx;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (g->idx[mid].data_off <= off)
			lo = mid;
		else
			hi = mid;
	}
	return g->idx[lo];
}

ssize_t spool_read(struct spool *sp, uint64_t off, int *stream, void *buf, size_t max, space_err *err)
{
	const struct seg *g;
	struct spool_mark m;
	uint32_t len = 0, st = 0;
	size_t want, got;
	uint64_t skip;

	if (off > spool_length(sp))
		return err_set(err, EINVAL, "offset %llu is beyond the output (%llu bytes)",
			       (unsigned long long)off, (unsigned long long)spool_length(sp));
	if (!sp || off == spool_length(sp) || max == 0)
		return 0;
	if (off < spool_start(sp))
		return err_set(err, ERANGE, "output before offset %llu was dropped (offset %llu asked)",
			       (unsigned long long)spool_start(sp), (unsigned long long)off);
	if (unpark(sp, err) < 0)
		return -1;
	g = off >= sp->cur.base ? &sp->cur : &sp->old;
	m = index_floor(g, off);
	if (sp->mark_seg == g && sp->mark.data_off <= off && sp->mark.file_off > m.file_off)
		m = sp->mark;
	for (;;) {
		int r = read_header(sp, g, m.file_off, &len, &st);
		if (r <= 0)
			return err_sys(err, r < 0 ? errno : EIO, "reading spool header at %llu",
				       (unsigned long long)m.file_off);
		if (off < m.data_off + len)
			break;
		m.file_off += HDR_LEN + len;
		m.data_off += len;
		if (m.file_off >= g->file_len)
			return err_set(err, EIO, "spool index is inconsistent at offset %llu",
				       (unsigned long long)off);
	}
	sp->mark = m;
	sp->mark_seg = g;
	skip = off - m.data_off;
	want = len - skip < max ? (size_t)(len - skip) : max;
	if (pread_full(g->fd, buf, want, m.file_off + HDR_LEN + skip, &got) < 0)
		return err_sys(err, errno, "reading spool");
	if (got != want)
		return err_set(err, EIO, "spool is shorter than its index says");
	*stream = (int)st;
	return (ssize_t)want;
}
