/* spool.c -- one session's output on disk: length-prefixed records, addressed by payload offset */
#include "spool.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"

#define HDR_LEN 8u
/* One index entry per this many file bytes: lookups scan at most this far. */
#define INDEX_STEP (1u << 20)
/* Larger appends are split so a record never needs a huge read to skip. */
#define MAX_RECORD (1u << 24)
/* Header scans read the file in windows of this size. */
#define SCAN_WINDOW (64u << 10)

struct spool_mark {
	uint64_t file_off; /* where the record's header starts */
	uint64_t data_off; /* payload offset of its first byte */
};

struct spool {
	int fd;
	uint64_t file_len; /* bytes of complete records */
	uint64_t data_len; /* payload bytes */
	struct spool_mark *idx; /* idx[0] = {0, 0}; ascending */
	size_t nidx, cap;
	/* The record the last read landed in: sequential readers resume here
	 * instead of scanning from the index entry. */
	struct spool_mark cur;
	/* Header scan window (a cache of file bytes at win_off). */
	uint8_t *win;
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

/* Reads the header at file offset `pos` (through the scan window). Returns 1
 * and fills len/stream, 0 if fewer than HDR_LEN bytes exist there, -1 on I/O
 * error. */
static int read_header(struct spool *sp, uint64_t pos, uint32_t *len, uint32_t *stream)
{
	const uint8_t *h;

	if (pos < sp->win_off || pos + HDR_LEN > sp->win_off + sp->win_len) {
		size_t got;
		if (pread_full(sp->fd, sp->win, SCAN_WINDOW, pos, &got) < 0)
			return -1;
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

static int index_add(struct spool *sp, uint64_t file_off, uint64_t data_off)
{
	if (sp->nidx && file_off - sp->idx[sp->nidx - 1].file_off < INDEX_STEP)
		return 0;
	if (sp->nidx == sp->cap) {
		size_t cap = sp->cap ? sp->cap * 2 : 16;
		struct spool_mark *n = realloc(sp->idx, cap * sizeof(*n));
		if (!n)
			return -1;
		sp->idx = n;
		sp->cap = cap;
	}
	sp->idx[sp->nidx].file_off = file_off;
	sp->idx[sp->nidx].data_off = data_off;
	sp->nidx++;
	return 0;
}

/* Walks every record header from the start, building the index, and cuts the
 * file after the last complete, sane record. */
static int spool_scan(struct spool *sp, const char *path, space_err *err)
{
	struct stat st;
	uint64_t pos = 0, data = 0, size;

	if (fstat(sp->fd, &st) < 0)
		return err_sys(err, errno, "stat %s", path);
	size = (uint64_t)st.st_size;
	while (pos < size) {
		uint32_t len, stream;
		int r = read_header(sp, pos, &len, &stream);
		if (r < 0)
			return err_sys(err, errno, "reading %s", path);
		if (r == 0 || len == 0 || len > MAX_RECORD || (stream != 1 && stream != 2) ||
		    pos + HDR_LEN + len > size)
			break;
		if (index_add(sp, pos, data) < 0)
			return err_set(err, ENOMEM, "spool index: out of memory");
		pos += HDR_LEN + len;
		data += len;
	}
	if (pos < size) {
		log_warn("spool %s: dropping %llu bytes of torn or corrupt tail", path,
			 (unsigned long long)(size - pos));
		if (ftruncate(sp->fd, (off_t)pos) < 0)
			return err_sys(err, errno, "truncating %s", path);
	}
	sp->file_len = pos;
	sp->data_len = data;
	if (sp->nidx == 0 && index_add(sp, 0, 0) < 0)
		return err_set(err, ENOMEM, "spool index: out of memory");
	sp->cur = sp->idx[0];
	return 0;
}

int spool_open(struct spool **out, const char *path, space_err *err)
{
	struct spool *sp = calloc(1, sizeof(*sp));

	if (!sp)
		return err_set(err, ENOMEM, "spool: out of memory");
	sp->win = malloc(SCAN_WINDOW);
	sp->fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (!sp->win || sp->fd < 0) {
		int e = sp->win ? errno : ENOMEM;
		spool_close(sp);
		return err_sys(err, e, "opening spool %s", path);
	}
	if (spool_scan(sp, path, err) < 0) {
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
	if (sp->fd >= 0)
		close(sp->fd);
	free(sp->idx);
	free(sp->win);
	free(sp);
}

uint64_t spool_length(const struct spool *sp)
{
	return sp ? sp->data_len : 0;
}

/* Writes one record; on failure cuts the file back so no torn record stays. */
static int append_record(struct spool *sp, int stream, const uint8_t *data, uint32_t len, space_err *err)
{
	uint8_t hdr[HDR_LEN];
	struct iovec iov[2];
	size_t total = HDR_LEN + len, done = 0;

	put_le32(hdr, len);
	put_le32(hdr + 4, (uint32_t)stream);
	while (done < total) {
		ssize_t n;
		int cnt = 0;
		if (done < HDR_LEN) {
			iov[cnt].iov_base = hdr + done;
			iov[cnt++].iov_len = HDR_LEN - done;
			iov[cnt].iov_base = (void *)data;
			iov[cnt++].iov_len = len;
		} else {
			iov[cnt].iov_base = (void *)(data + (done - HDR_LEN));
			iov[cnt++].iov_len = total - done;
		}
		n = writev(sp->fd, iov, cnt);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? errno : EIO;
			if (done && ftruncate(sp->fd, (off_t)sp->file_len) < 0)
				log_error("spool: cannot cut a torn record: %m");
			sp->win_len = 0; /* it may hold bytes of the cut record */
			return err_sys(err, e, "writing spool");
		}
		done += (size_t)n;
	}
	if (index_add(sp, sp->file_len, sp->data_len) < 0)
		log_warn("spool: index out of memory; lookups get slower");
	sp->file_len += total;
	sp->data_len += len;
	return 0;
}

int spool_append(struct spool *sp, int stream, const void *data, size_t len, space_err *err)
{
	const uint8_t *p = data;

	if (stream != 1 && stream != 2)
		return err_set(err, EINVAL, "spool: bad stream %d", stream);
	while (len > 0) {
		uint32_t n = len > MAX_RECORD ? MAX_RECORD : (uint32_t)len;
		if (append_record(sp, stream, p, n, err) < 0)
			return -1;
		p += n;
		len -= n;
	}
	return 0;
}

/* Index entry with the largest data_off <= off. */
static struct spool_mark index_floor(const struct spool *sp, uint64_t off)
{
	size_t lo = 0, hi = sp->nidx;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (sp->idx[mid].data_off <= off)
			lo = mid;
		else
			hi = mid;
	}
	return sp->idx[lo];
}

ssize_t spool_read(struct spool *sp, uint64_t off, int *stream, void *buf, size_t max, space_err *err)
{
	struct spool_mark m;
	uint32_t len = 0, st = 0;
	size_t want, got;
	uint64_t skip;

	if (off > spool_length(sp))
		return err_set(err, EINVAL, "offset %llu is beyond the output (%llu bytes)",
			       (unsigned long long)off, (unsigned long long)spool_length(sp));
	if (!sp || off == sp->data_len || max == 0)
		return 0;
	m = index_floor(sp, off);
	if (sp->cur.data_off <= off && sp->cur.file_off > m.file_off)
		m = sp->cur;
	for (;;) {
		int r = read_header(sp, m.file_off, &len, &st);
		if (r <= 0)
			return err_sys(err, r < 0 ? errno : EIO, "reading spool header at %llu",
				       (unsigned long long)m.file_off);
		if (off < m.data_off + len)
			break;
		m.file_off += HDR_LEN + len;
		m.data_off += len;
		if (m.file_off >= sp->file_len)
			return err_set(err, EIO, "spool index is inconsistent at offset %llu",
				       (unsigned long long)off);
	}
	sp->cur = m;
	skip = off - m.data_off;
	want = len - skip < max ? (size_t)(len - skip) : max;
	if (pread_full(sp->fd, buf, want, m.file_off + HDR_LEN + skip, &got) < 0)
		return err_sys(err, errno, "reading spool");
	if (got != want)
		return err_set(err, EIO, "spool is shorter than its index says");
	*stream = (int)st;
	return (ssize_t)want;
}
