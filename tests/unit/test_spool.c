/* test_spool.c -- session output spool: records, offsets mid-record, reopen, torn tail, limits */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/sandbox/spool.h"
#include "harness.h"

static char dir[] = "/tmp/test_spool.XXXXXX";
static char path[256];

/* Byte i of the test output: a pattern that catches misplaced offsets. */
static uint8_t pat(uint64_t i)
{
	return (uint8_t)(i * 131 + (i >> 8) * 7 + 1);
}

/* Reads everything from `off` record by record; checks bytes and streams
 * against what was written (streams[] per byte). */
static bool read_all_ok(struct spool *sp, uint64_t off, const uint8_t *streams, size_t bufsize)
{
	uint8_t *buf = malloc(bufsize);
	space_err err = { 0 };
	bool ok = true;

	while (off < spool_length(sp)) {
		int st = 0;
		ssize_t n = spool_read(sp, off, &st, buf, bufsize, &err);
		if (n <= 0) {
			NOTE("read at %llu: %zd %s", (unsigned long long)off, n, err.msg);
			ok = false;
			break;
		}
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] != pat(off + (uint64_t)i) || st != streams[off + (uint64_t)i]) {
				NOTE("mismatch at %llu", (unsigned long long)(off + (uint64_t)i));
				ok = false;
				break;
			}
		}
		if (!ok)
			break;
		off += (uint64_t)n;
	}
	free(buf);
	return ok;
}

/* Appends [from, from+len) of the pattern as one record. */
static int put(struct spool *sp, int stream, uint64_t from, size_t len, uint8_t *streams)
{
	uint8_t *b = malloc(len ? len : 1);
	space_err err = { 0 };
	int rc;

	for (size_t i = 0; i < len; i++) {
		b[i] = pat(from + i);
		if (streams)
			streams[from + i] = (uint8_t)stream;
	}
	rc = spool_append(sp, stream, b, len, &err);
	free(b);
	return rc;
}

static uint64_t file_size(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* With a cap: what is kept stays under it, offsets keep counting from the session's start,
 * dropped offsets say so, and the files on disk stay small. */
static void test_cap(uint8_t *streams)
{
	struct spool *sp = NULL;
	space_err err = { 0 };
	char oldp[300], newp[300];
	uint64_t total = 0, maxdisk = 0;
	uint8_t buf[64];
	int st = 0;

	unlink(path);
	snprintf(oldp, sizeof(oldp), "%s.old", path);
	snprintf(newp, sizeof(newp), "%s.new", path);
	if (!CHECK(spool_open(&sp, path, &err) == 0, "cap: open"))
		return;
	spool_set_cap(sp, 10000);
	for (int i = 0; i < 3000; i++) {
		size_t len = (size_t)(i * 37 % 700) + 1;
		uint64_t disk;

		put(sp, i % 5 ? 1 : 2, total, len, streams);
		total += len;
		disk = file_size(path) + file_size(oldp);
		if (disk > maxdisk)
			maxdisk = disk;
		if (spool_kept(sp) > 10000)
			break;
	}
	CHECK(spool_length(sp) == total, "cap: offsets count every byte (%llu)", (unsigned long long)total);
	CHECK(spool_kept(sp) <= 10000 && spool_kept(sp) >= 5000 - 700,
	      "cap: between half the cap and the cap is kept (%llu)", (unsigned long long)spool_kept(sp));
	CHECK(spool_start(sp) + spool_kept(sp) == total && spool_start(sp) > 0, "cap: kept output starts at %llu",
	      (unsigned long long)spool_start(sp));
	CHECK(maxdisk <= 10000 + 3000 * 8 / 4 + 64, "cap: the files never held much more (%llu bytes)",
	      (unsigned long long)maxdisk);
	CHECK(read_all_ok(sp, spool_start(sp), streams, 333), "cap: the kept bytes read back exactly");
	CHECK(spool_read(sp, spool_start(sp) - 1, &st, buf, sizeof(buf), &err) == -1 && err.code == ERANGE,
	      "cap: a dropped offset is ERANGE: %s", err.msg);
	CHECK(spool_read(sp, 0, &st, buf, sizeof(buf), &err) == -1 && err.code == ERANGE, "cap: so is 0");

	/* Parked (files closed) and reopened on demand; then reopened from disk. */
	spool_park(sp);
	CHECK(spool_length(sp) == total && read_all_ok(sp, spool_start(sp), streams, 4096),
	      "cap: a parked spool reads back");
	spool_park(sp);
	put(sp, 1, total, 100, streams);
	total += 100;
	CHECK(spool_length(sp) == total, "cap: a parked spool takes appends");
	{
		uint64_t start = spool_start(sp);

		spool_close(sp);
		sp = NULL;
		CHECK(spool_open(&sp, path, &err) == 0 && spool_length(sp) == total && spool_start(sp) == start,
		      "cap: reopen keeps length %llu and start %llu", (unsigned long long)total,
		      (unsigned long long)start);
		CHECK(sp && read_all_ok(sp, start, streams, 4096), "cap: and the bytes");
	}
	if (!sp)
		return;

	/* Dropping the oldest segment, then the only one. */
	{
		uint64_t before = spool_kept(sp);
		int64_t d1 = spool_drop_oldest(sp, &err);

		CHECK(d1 > 0 && spool_kept(sp) == before - (uint64_t)d1 && spool_length(sp) == total,
		      "cap: dropping the older segment frees %lld bytes", (long long)d1);
		CHECK(spool_drop_oldest(sp, &err) > 0 && spool_kept(sp) == 0 && spool_start(sp) == total,
		      "cap: dropping the only segment leaves nothing kept, the offset unchanged");
		CHECK(spool_read(sp, total, &st, buf, sizeof(buf), &err) == 0, "cap: at the end: 0");
		put(sp, 2, total, 50, streams);
		total += 50;
		CHECK(read_all_ok(sp, total - 50, streams, 64), "cap: appends after a drop read back");
	}
	spool_close(sp);

	/* A crash between the two renames of a rotation: path is gone, path.new holds the new
	 * segment. Opening finishes the rotation. */
	CHECK(rename(path, newp) == 0, "cap: simulate a rotation cut short");
	sp = NULL;
	CHECK(spool_open(&sp, path, &err) == 0 && spool_length(sp) == total, "cap: reopened after it (%s)",
	      err.msg);
	spool_close(sp);
	unlink(oldp);
	unlink(path);
}

int main(void)
{
	struct spool *sp = NULL;
	space_err err = { 0 };
	uint8_t buf[64], *streams;
	uint64_t total = 0;
	int st = 0;
	ssize_t n;
	struct stat sb;
	int fd;

	if (!mkdtemp(dir))
		SKIP_ALL("no temporary directory");
	snprintf(path, sizeof(path), "%s/out.spool", dir);
	streams = calloc(8u << 20, 1);

	CHECK(spool_open(&sp, path, &err) == 0, "open a new spool");
	CHECK(spool_length(sp) == 0, "a new spool is empty");
	CHECK(spool_read(sp, 0, &st, buf, sizeof(buf), &err) == 0, "read at the end returns 0");
	CHECK(spool_read(sp, 1, &st, buf, sizeof(buf), &err) == -1 && err.code == EINVAL,
	      "read past the end is EINVAL");
	CHECK(spool_append(sp, 3, "x", 1, &err) == -1 && err.code == EINVAL, "stream 3 is refused");
	CHECK(spool_append(sp, 1, "", 0, &err) == 0 && spool_length(sp) == 0, "an empty append adds nothing");

	/* Records of 10 (stdout), 5 (stderr), 20 (stdout). */
	put(sp, 1, 0, 10, streams);
	put(sp, 2, 10, 5, streams);
	put(sp, 1, 15, 20, streams);
	total = 35;
	CHECK(spool_length(sp) == total, "length counts payload bytes only");

	n = spool_read(sp, 0, &st, buf, sizeof(buf), &err);
	CHECK(n == 10 && st == 1, "a read stops at the end of its record (got %zd)", n);
	n = spool_read(sp, 7, &st, buf, sizeof(buf), &err);
	CHECK(n == 3 && st == 1 && buf[0] == pat(7), "an offset mid-record reads the rest of it");
	n = spool_read(sp, 10, &st, buf, sizeof(buf), &err);
	CHECK(n == 5 && st == 2 && buf[0] == pat(10), "the stderr record");
	n = spool_read(sp, 12, &st, buf, 2, &err);
	CHECK(n == 2 && st == 2 && buf[0] == pat(12) && buf[1] == pat(13), "max limits a read");
	n = spool_read(sp, 34, &st, buf, sizeof(buf), &err);
	CHECK(n == 1 && st == 1 && buf[0] == pat(34), "the last byte");
	CHECK(spool_read(sp, 35, &st, buf, sizeof(buf), &err) == 0, "at the end: 0");
	CHECK(spool_read(sp, 36, &st, buf, sizeof(buf), &err) == -1 && err.code == EINVAL, "beyond: EINVAL");
	CHECK(read_all_ok(sp, 0, streams, 7), "sequential reads with a small buffer");
	/* Backwards after forwards: the cursor must not be trusted past off. */
	n = spool_read(sp, 3, &st, buf, sizeof(buf), &err);
	CHECK(n == 7 && buf[0] == pat(3), "reading backwards after reading forwards");

	/* Many small records and a few big ones: crosses several index steps. */
	for (int i = 0; i < 20000; i++) {
		size_t len = (size_t)(i % 97) + 1;
		put(sp, i % 3 ? 1 : 2, total, len, streams);
		total += len;
	}
	for (int i = 0; i < 3; i++) {
		put(sp, 1 + i % 2, total, 1500000, streams);
		total += 1500000;
	}
	CHECK(spool_length(sp) == total, "length after %llu bytes", (unsigned long long)total);
	CHECK(read_all_ok(sp, 0, streams, 4096), "everything reads back in order");
	CHECK(read_all_ok(sp, total - 1234567, streams, 65536), "reads from deep inside a big record");
	{
		bool ok = true;
		for (uint64_t off = 0; off < total && ok; off += 104729) {
			n = spool_read(sp, off, &st, buf, 1, &err);
			ok = n == 1 && buf[0] == pat(off) && st == streams[off];
		}
		CHECK(ok, "random-ish offsets find their byte and stream");
	}
	spool_close(sp);

	/* Reopen: the index is rebuilt from the file. */
	sp = NULL;
	CHECK(spool_open(&sp, path, &err) == 0 && spool_length(sp) == total, "reopen keeps every byte");
	CHECK(read_all_ok(sp, 0, streams, 65536), "and reads back the same");
	spool_close(sp);

	/* Torn tails: a half header, then a header promising more than exists. */
	stat(path, &sb);
	fd = open(path, O_WRONLY | O_APPEND);
	CHECK(write(fd, "\x10\x00\x00", 3) == 3, "write a torn header");
	close(fd);
	sp = NULL;
	CHECK(spool_open(&sp, path, &err) == 0 && spool_length(sp) == total, "a torn header is dropped");
	spool_close(sp);
	{
		struct stat after;
		stat(path, &after);
		CHECK(after.st_size == sb.st_size, "and cut from the file");
	}
	fd = open(path, O_WRONLY | O_APPEND);
	CHECK(write(fd, "\x10\x00\x00\x00\x01\x00\x00\x00" "abc", 11) == 11, "write a torn record");
	close(fd);
	sp = NULL;
	CHECK(spool_open(&sp, path, &err) == 0 && spool_length(sp) == total, "a torn record is dropped");
	put(sp, 2, total, 3, streams);
	total += 3;
	CHECK(read_all_ok(sp, total - 10, streams, 64), "appends continue cleanly after the cut");
	spool_close(sp);

	/* A corrupt header (bad stream) ends the usable file there. */
	fd = open(path, O_WRONLY | O_APPEND);
	CHECK(write(fd, "\x01\x00\x00\x00\x09\x00\x00\x00z", 9) == 9, "write a record with a bad stream");
	close(fd);
	sp = NULL;
	CHECK(spool_open(&sp, path, &err) == 0 && spool_length(sp) == total, "a corrupt record is dropped");
	spool_close(sp);

	/* One append larger than a record may be is split, invisibly. */
	unlink(path);
	sp = NULL;
	{
		size_t big = (17u << 20) + 5;
		uint8_t *b = malloc(big);
		for (size_t i = 0; i < big; i++)
			b[i] = pat(i);
		CHECK(spool_open(&sp, path, &err) == 0 && spool_append(sp, 2, b, big, &err) == 0 &&
		      spool_length(sp) == big, "a 17 MiB append");
		n = spool_read(sp, (16u << 20) - 1, &st, buf, sizeof(buf), &err);
		CHECK(n == 1 && buf[0] == pat((16u << 20) - 1) && st == 2, "it was split at 16 MiB");
		n = spool_read(sp, 16u << 20, &st, buf, sizeof(buf), &err);
		CHECK(n == (ssize_t)sizeof(buf) && buf[0] == pat(16u << 20) && st == 2, "the second part follows");
		spool_close(sp);
		free(b);
	}

	test_cap(streams);

	CHECK(spool_length(NULL) == 0 && spool_read(NULL, 0, &st, buf, 1, &err) == 0,
	      "a missing spool reads as empty");
	CHECK(spool_open(&sp, "/nonexistent-dir/x.spool", &err) == -1 && err.code == ENOENT,
	      "open in a missing directory fails: %s", err.msg);

	unlink(path);
	rmdir(dir);
	free(streams);
	return DONE();
}
