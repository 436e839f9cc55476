/* test_cli_tar.c -- spacectl cp's tar streams: a tree written by the writer
 * and read back by the reader and extractor in pieces of every size is the
 * same tree (contents, modes, mtimes, links, long names); GNU tar reads our
 * archives and we read its (ustar, pax, GNU long names); hostile archives
 * (absolute names, "..", writing through a symbolic link, entries outside
 * the top, truncation, bad checksums) are refused without writing outside;
 * afile replaces a symbolic link instead of following it */
#include <dirent.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/tar.h"
#include "harness.h"

static char root[64];

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (system(cmd) != 0)
		NOTE("command failed: %s", cmd);
}

static bool have_gnu_tar(void)
{
	return system("tar --version 2>/dev/null | grep -q 'GNU tar'") == 0;
}

static void write_file(const char *path, const void *data, size_t n, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0 || write(fd, data, n) != (ssize_t)n)
		abort();
	fchmod(fd, mode);
	close(fd);
}

static void set_mtime(const char *path, time_t t)
{
	struct timespec ts[2] = { { t, 0 }, { t, 0 } };

	utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW);
}

static char long_dir[160], long_file[130];

/* The tree: files (empty, text, 300 KiB, executable), a read-only directory,
 * links (relative, absolute, dangling), names too long for ustar's fields,
 * and a FIFO (skipped). */
static void make_tree(const char *top)
{
	char p[1024], *big = malloc(300 * 1024);
	size_t i;

	for (i = 0; i < 300 * 1024; i++)
		big[i] = (char)(i * 7 + i / 1000);
	memset(long_dir, 'd', sizeof(long_dir) - 1);
	memset(long_file, 'f', sizeof(long_file) - 1);
	mkdir(top, 0755);
	snprintf(p, sizeof(p), "%s/a.txt", top);
	write_file(p, "hello\n", 6, 0640);
	set_mtime(p, 1700000000);
	snprintf(p, sizeof(p), "%s/empty", top);
	write_file(p, "", 0, 0600);
	snprintf(p, sizeof(p), "%s/run.sh", top);
	write_file(p, "#!/bin/sh\necho hi\n", 18, 0755);
	snprintf(p, sizeof(p), "%s/sub", top);
	mkdir(p, 0750);
	snprintf(p, sizeof(p), "%s/sub/deep", top);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/sub/deep/big.bin", top);
	write_file(p, big, 300 * 1024, 0644);
	snprintf(p, sizeof(p), "%s/ro", top);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/ro/inside", top);
	write_file(p, "x", 1, 0444);
	snprintf(p, sizeof(p), "%s/ro", top);
	chmod(p, 0555);
	set_mtime(p, 1600000000);
	snprintf(p, sizeof(p), "%s/link", top);
	symlink("a.txt", p);
	snprintf(p, sizeof(p), "%s/abs", top);
	symlink("/etc/hostname", p);
	snprintf(p, sizeof(p), "%s/dangling", top);
	symlink("nowhere/at/all", p);
	snprintf(p, sizeof(p), "%s/%s", top, long_dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/%s/%s", top, long_dir, long_file);
	write_file(p, "long\n", 5, 0644);
	snprintf(p, sizeof(p), "%s/%s/%s.lnk", top, long_dir, long_file);
	{
		char target[300];

		memset(target, 't', sizeof(target) - 1);
		target[sizeof(target) - 1] = '\0';
		symlink(target, p);
	}
	snprintf(p, sizeof(p), "%s/fifo", top);
	mkfifo(p, 0644);
	snprintf(p, sizeof(p), "%s/sub", top);
	set_mtime(p, 1500000000);
	free(big);
}

/* Compare two trees: the same names, types, contents, modes (without the
 * FIFO, which is skipped), link targets; mtimes of files and directories. */
static bool same_tree(const char *a, const char *b, bool check_top_mode)
{
	char cmd[1024];
	int rc;

	/* find(1) prints what we compare, one line per entry, sorted: type,
	 * mode, size, mtime in whole seconds (ustar's), name, link target;
	 * the top directory and links' own modes, sizes and times left out. */
#define LIST "find . ! -type p -printf '%%y %%m %%s %%Ts %%p -> %%l\\n' | " \
	"grep -v '^d [0-9]* [0-9]* [0-9]* \\. ' | sed 's/^l [0-9]* [0-9]* [0-9]*/l/' | sort"
	snprintf(cmd, sizeof(cmd),
		 "cd %s && " LIST " > /tmp/.tar_a_%d && cd %s && " LIST " > /tmp/.tar_b_%d && "
		 "diff /tmp/.tar_a_%d /tmp/.tar_b_%d && diff -r --no-dereference -x fifo %s %s",
		 a, (int)getpid(), b, (int)getpid(), (int)getpid(), (int)getpid(), a, b);
#undef LIST
	rc = system(cmd);
	if (check_top_mode) {
		struct stat sa, sb;

		if (stat(a, &sa) < 0 || stat(b, &sb) < 0 || (sa.st_mode & 07777) != (sb.st_mode & 07777))
			rc = 1;
	}
	return rc == 0;
}

struct buf {
	char *p;
	size_t n, cap;
};

static void buf_add(struct buf *b, const void *p, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2;
		b->p = realloc(b->p, b->cap);
	}
	memcpy(b->p + b->n, p, n);
	b->n += n;
}

static int warnings;
static void count_warn(const char *msg, void *arg)
{
	(void)arg;
	NOTE("warning: %s", msg);
	warnings++;
}

/* The whole archive of src, read in pieces of changing sizes. */
static bool archive(const char *src, const char *top, struct buf *out)
{
	space_err e = { 0 };
	struct tar_writer *w = tarw_new(src, top, count_warn, NULL, &e);
	char chunk[70000];
	size_t step = 1;
	ssize_t n;

	memset(out, 0, sizeof(*out));
	if (!w) {
		NOTE("tarw_new: %s", e.msg);
		return false;
	}
	while ((n = tarw_read(w, chunk, step, &e)) > 0) {
		buf_add(out, chunk, (size_t)n);
		step = step * 3 % sizeof(chunk) + 1;
	}
	tarw_free(w);
	if (n < 0)
		NOTE("tarw_read: %s", e.msg);
	return n == 0;
}

/* Extract data into dir (top renamed to `top`, or NULL: stripped), fed in
 * pieces of changing sizes starting at one byte.  Returns 0 or -1 (msg). */
static int extract(const char *data, size_t n, const char *dir, const char *top, char *msg,
		   size_t msglen)
{
	struct tar_reader r;
	struct tar_extract *x;
	space_err e = { 0 };
	size_t off = 0, step = 1;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY), rc = 0;

	x = tarx_new(dfd, top, count_warn, NULL, &e);
	if (!x) {
		snprintf(msg, msglen, "%s", e.msg);
		return -1;
	}
	tarr_init(&r, &tarx_ops, x);
	while (off < n && rc == 0) {
		size_t k = step < n - off ? step : n - off;

		rc = tarr_feed(&r, data + off, k, &e);
		off += k;
		step = step * 5 % 9000 + 1;
	}
	if (rc == 0)
		rc = tarr_finish(&r, &e);
	if (rc == 0)
		rc = tarx_finish(x, &e);
	snprintf(msg, msglen, "%s", rc ? e.msg : "");
	tarr_free(&r);
	tarx_free(x);
	close(dfd);
	return rc;
}

static void test_round_trip(void)
{
	char src[128], dst[128], msg[1100], path[512];
	struct buf a;
	int w0;

	snprintf(src, sizeof(src), "%s/src/proj", root);
	snprintf(path, sizeof(path), "%s/src", root);
	mkdir(path, 0755);
	make_tree(src);
	w0 = warnings;
	CHECK(archive(src, "proj", &a), "archive a tree");
	NOTE("%zu bytes", a.n);
	CHECK(warnings == w0 + 1, "the FIFO is skipped with one warning");
	CHECK(a.n % TAR_BLOCK == 0 && a.n > 300 * 1024, "whole blocks");

	snprintf(dst, sizeof(dst), "%s/dst1", root);
	mkdir(dst, 0755);
	CHECK(extract(a.p, a.n, dst, "copy", msg, sizeof(msg)) == 0, "extract it renamed: %s", msg);
	snprintf(path, sizeof(path), "%s/copy", dst);
	CHECK(same_tree(src, path, true), "the copy is the same tree (modes, mtimes, links)");

	snprintf(dst, sizeof(dst), "%s/dst2", root);
	mkdir(dst, 0700);
	CHECK(extract(a.p, a.n, dst, NULL, msg, sizeof(msg)) == 0, "extract its contents: %s", msg);
	CHECK(same_tree(src, dst, false), "the contents are the same tree");

	/* Again over the first copy: files replaced, directories merged. */
	snprintf(dst, sizeof(dst), "%s/dst1", root);
	CHECK(extract(a.p, a.n, dst, "copy", msg, sizeof(msg)) == 0, "extract over itself: %s", msg);
	snprintf(path, sizeof(path), "%s/copy", dst);
	CHECK(same_tree(src, path, true), "still the same tree");
	free(a.p);

	/* Contents only (top NULL): entries named without a top. */
	CHECK(archive(src, NULL, &a), "archive the contents");
	CHECK(memcmp(a.p, "a.txt", 6) == 0, "the first entry is a.txt, not proj/");
	free(a.p);

	/* One file, and one symbolic link, as the top. */
	snprintf(path, sizeof(path), "%s/a.txt", src);
	CHECK(archive(path, "renamed.txt", &a) && a.n == 4 * TAR_BLOCK &&
		      memcmp(a.p, "renamed.txt", 12) == 0,
	      "a file alone: header, one data block, the end (%zu)", a.n);
	free(a.p);
	snprintf(path, sizeof(path), "%s/link", src);
	CHECK(archive(path, "l", &a) && a.n == 3 * TAR_BLOCK && a.p[156] == TAR_SYMLINK &&
		      strcmp(a.p + 157, "a.txt") == 0,
	      "a symbolic link alone is archived as one");
	free(a.p);
	CHECK(!archive("/nonexistent/x", "x", &a), "a missing source fails");
}

/* GNU tar reads our archive (pax long names and link targets included),
 * and we read its archives in every format it writes. */
static void test_gnu_tar(void)
{
	char src[128], dst[256], msg[1100], path[512];
	struct buf a;
	FILE *f;

	if (!have_gnu_tar()) {
		NOTE("no GNU tar: cross-checks skipped");
		return;
	}
	snprintf(src, sizeof(src), "%s/src/proj", root);
	CHECK(archive(src, "proj", &a), "archive");
	snprintf(path, sizeof(path), "%s/ours.tar", root);
	f = fopen(path, "w");
	fwrite(a.p, 1, a.n, f);
	fclose(f);
	free(a.p);
	snprintf(dst, sizeof(dst), "%s/gnu_x", root);
	mkdir(dst, 0755);
	sh("tar -xpf %s -C %s 2>&1", path, dst);
	snprintf(dst, sizeof(dst), "%s/gnu_x/proj", root);
	CHECK(same_tree(src, dst, true), "GNU tar extracts our archive to the same tree");

	static const char *const formats[] = { "gnu", "pax", "ustar" };
	for (size_t i = 0; i < 3; i++) {
		char tarfile[256];
		int fd;
		struct stat st;

		snprintf(tarfile, sizeof(tarfile), "%s/gnu_%s.tar", root, formats[i]);
		/* ustar cannot hold the 300-byte link target: leave it out. */
		sh("cd %s/src && tar --format=%s %s -cf %s proj 2>/dev/null", root, formats[i],
		   i == 2 ? "--exclude='ddd*' --exclude=fifo" : "--exclude=fifo", tarfile);
		fd = open(tarfile, O_RDONLY);
		if (fd < 0 || fstat(fd, &st) < 0) {
			CHECK(0, "GNU tar --format=%s", formats[i]);
			continue;
		}
		a.p = malloc((size_t)st.st_size);
		a.n = (size_t)st.st_size;
		if (read(fd, a.p, a.n) != (ssize_t)a.n)
			abort();
		close(fd);
		snprintf(dst, sizeof(dst), "%s/from_%s", root, formats[i]);
		mkdir(dst, 0755);
		CHECK(extract(a.p, a.n, dst, "proj", msg, sizeof(msg)) == 0,
		      "read GNU tar's %s archive: %s", formats[i], msg);
		if (i < 2) {
			snprintf(path, sizeof(path), "%s/proj", dst);
			CHECK(same_tree(src, path, true), "%s: the same tree", formats[i]);
		}
		free(a.p);
	}
}

/* ---- hand-made archives ---- */

static void hdr(struct buf *b, const char *name, char type, unsigned long long size,
		const char *linkname)
{
	char h[TAR_BLOCK] = { 0 };
	unsigned sum = 0;
	size_t i;

	strncpy(h, name, 100);
	snprintf(h + 100, 8, "%07o", 0644);
	snprintf(h + 108, 8, "%07o", 0);
	snprintf(h + 116, 8, "%07o", 0);
	snprintf(h + 124, 12, "%011llo", size);
	snprintf(h + 136, 12, "%011o", 1234567890);
	memset(h + 148, ' ', 8);
	h[156] = type;
	if (linkname)
		strncpy(h + 157, linkname, 100);
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	for (i = 0; i < TAR_BLOCK; i++)
		sum += (unsigned char)h[i];
	snprintf(h + 148, 8, "%06o", sum);
	buf_add(b, h, TAR_BLOCK);
}

static void data(struct buf *b, const char *s, size_t n)
{
	char zero[TAR_BLOCK] = { 0 };

	buf_add(b, s, n);
	buf_add(b, zero, (TAR_BLOCK - n % TAR_BLOCK) % TAR_BLOCK);
}

static void end(struct buf *b)
{
	char zero[2 * TAR_BLOCK] = { 0 };

	buf_add(b, zero, sizeof(zero));
}

/* dir/name exists (not following a link). */
static bool exists(const char *dir, const char *name)
{
	char p[512];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return lstat(p, &st) == 0;
}

static void test_hostile(void)
{
	char dst[128], out[128], msg[1100], p[512];
	struct buf b = { 0 };

	snprintf(dst, sizeof(dst), "%s/hostile", root);
	snprintf(out, sizeof(out), "%s/outside", root);
	mkdir(dst, 0755);
	mkdir(out, 0755);

	hdr(&b, "/etc/evil", TAR_FILE, 1, NULL);
	data(&b, "x", 1);
	end(&b);
	CHECK(extract(b.p, b.n, dst, "t", msg, sizeof(msg)) < 0 && strstr(msg, "absolute"),
	      "an absolute name is refused: %s", msg);
	b.n = 0;

	hdr(&b, "top/", TAR_DIR, 0, NULL);
	hdr(&b, "top/../../outside/evil", TAR_FILE, 1, NULL);
	data(&b, "x", 1);
	end(&b);
	CHECK(extract(b.p, b.n, dst, "t1", msg, sizeof(msg)) < 0 && strstr(msg, "'..'") &&
		      !exists(out, "evil"),
	      "a '..' component is refused: %s", msg);
	b.n = 0;

	/* A link in the archive, then a file written through it. */
	hdr(&b, "top/", TAR_DIR, 0, NULL);
	hdr(&b, "top/esc", TAR_SYMLINK, 0, out);
	hdr(&b, "top/esc/evil", TAR_FILE, 1, NULL);
	data(&b, "x", 1);
	end(&b);
	CHECK(extract(b.p, b.n, dst, "t2", msg, sizeof(msg)) < 0 && strstr(msg, "symbolic link") &&
		      !exists(out, "evil") && exists(dst, "t2/esc"),
	      "writing through a symbolic link from the archive is refused: %s", msg);
	b.n = 0;

	/* A link already in the destination, where the top goes: replaced,
	 * not followed. */
	snprintf(p, sizeof(p), "%s/t3", dst);
	symlink(out, p);
	hdr(&b, "top/", TAR_DIR, 0, NULL);
	hdr(&b, "top/f", TAR_FILE, 1, NULL);
	data(&b, "x", 1);
	end(&b);
	CHECK(extract(b.p, b.n, dst, "t3", msg, sizeof(msg)) == 0 && !exists(out, "f") &&
		      exists(dst, "t3/f"),
	      "a link where the top goes is replaced by the directory: %s", msg);
	b.n = 0;

	/* A link already in the destination below the top. */
	snprintf(p, sizeof(p), "%s/t4", dst);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/t4/sub", dst);
	symlink(out, p);
	hdr(&b, "top/sub/f", TAR_FILE, 1, NULL);
	data(&b, "x", 1);
	end(&b);
	CHECK(extract(b.p, b.n, dst, "t4", msg, sizeof(msg)) < 0 && !exists(out, "f"),
	      "an existing link on the way is not followed: %s", msg);
	b.n = 0;

	/* A file entry replacing a link: the link goes, its target stays. */
	snprintf(p, sizeof(p), "%s/target", out);
	write_file(p, "keep", 4, 0644);
	snprintf(p, sizeof(p), "%s/t5", dst);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/t5/f", dst);
	{
		char t[512];

		snprintf(t, sizeof(t), "%s/target", out);
		symlink(t, p);
	}
	hdr(&b, "top/f", TAR_FILE, 3, NULL);
	data(&b, "new", 3);
	end(&b);
	{
		char got[8] = { 0 };
		int fd;

		CHECK(extract(b.p, b.n, dst, "t5", msg, sizeof(msg)) == 0, "replace a link: %s", msg);
		snprintf(p, sizeof(p), "%s/target", out);
		fd = open(p, O_RDONLY);
		CHECK(fd >= 0 && read(fd, got, 8) == 4 && strcmp(got, "keep") == 0,
		      "the link's target is untouched");
		close(fd);
		snprintf(p, sizeof(p), "%s/t5/f", dst);
		fd = open(p, O_RDONLY | O_NOFOLLOW);
		memset(got, 0, sizeof(got));
		CHECK(fd >= 0 && read(fd, got, 8) == 3 && strcmp(got, "new") == 0,
		      "the link became the file");
		close(fd);
	}
	b.n = 0;

	hdr(&b, "top/a", TAR_FILE, 0, NULL);
	hdr(&b, "other/b", TAR_FILE, 0, NULL);
	end(&b);
	CHECK(extract(b.p, b.n, dst, "t6", msg, sizeof(msg)) < 0 && strstr(msg, "not under") &&
		      !exists(dst, "other"),
	      "an entry outside the first one's top is refused: %s", msg);
	b.n = 0;

	hdr(&b, "top/a", TAR_FILE, 100, NULL);
	buf_add(&b, "short", 5);
	CHECK(extract(b.p, b.n, dst, "t7", msg, sizeof(msg)) < 0 && strstr(msg, "ended early") &&
		      !exists(dst, "t7/a"),
	      "a truncated archive fails and leaves no half file: %s", msg);
	snprintf(p, sizeof(p), "ls -a %s/t7 | grep -q spacectl", dst);
	CHECK(system(p) != 0, "no temporary file left behind");
	b.n = 0;

	hdr(&b, "top/a", TAR_FILE, 0, NULL);
	b.p[0] ^= 1; /* checksum now wrong */
	end(&b);
	CHECK(extract(b.p, b.n, dst, "t8", msg, sizeof(msg)) < 0 && strstr(msg, "checksum"),
	      "a bad checksum is refused: %s", msg);
	b.n = 0;

	hdr(&b, "top/x", '3', 0, NULL); /* a character device */
	hdr(&b, "top/h", TAR_HARDLINK, 0, "top/x");
	end(&b);
	{
		int w0 = warnings;

		CHECK(extract(b.p, b.n, dst, "t9", msg, sizeof(msg)) == 0 && warnings == w0 + 2 &&
			      !exists(dst, "t9/x") && !exists(dst, "t9/h"),
		      "devices and hard links are skipped with a warning each");
	}
	free(b.p);
}

/* GNU long names, pax records, base-256 sizes, one trailing zero block. */
static void test_formats(void)
{
	char dst[128], msg[1100], name[300], rec[400];
	struct buf b = { 0 };
	size_t n;

	snprintf(dst, sizeof(dst), "%s/formats", root);
	mkdir(dst, 0755);
	/* top/nnn.../nnn...: 299 bytes, no component over NAME_MAX */
	memset(name, 'n', sizeof(name));
	memcpy(name, "top/", 4);
	name[150] = '/';
	name[sizeof(name) - 1] = '\0';

	hdr(&b, "././@LongLink", 'L', strlen(name) + 1, NULL);
	data(&b, name, strlen(name) + 1);
	hdr(&b, "top/truncated", TAR_FILE, 2, NULL);
	data(&b, "ok", 2);
	/* pax: a path and an mtime with a fraction */
	n = (size_t)snprintf(rec, sizeof(rec), "30 mtime=1700000000.250000001\n");
	n += (size_t)snprintf(rec + n, sizeof(rec) - n, "16 path=top/pax\n");
	hdr(&b, "././@PaxHeader", 'x', n, NULL);
	data(&b, rec, n);
	hdr(&b, "top/ignored", TAR_FILE, 0, NULL);
	/* base-256 size of 3 */
	hdr(&b, "top/b256", TAR_FILE, 0, NULL);
	{
		char *h = b.p + b.n - TAR_BLOCK;
		unsigned sum = 0;
		size_t i;

		memset(h + 124, 0, 12);
		h[124] = (char)0x80;
		h[135] = 3;
		memset(h + 148, ' ', 8);
		for (i = 0; i < TAR_BLOCK; i++)
			sum += (unsigned char)h[i];
		snprintf(h + 148, 8, "%06o", sum);
	}
	data(&b, "abc", 3);
	buf_add(&b, (char[TAR_BLOCK]){ 0 }, TAR_BLOCK); /* one zero block only */
	CHECK(extract(b.p, b.n, dst, "t", msg, sizeof(msg)) == 0, "extract: %s", msg);
	{
		char p[700];
		struct stat st;

		name[150] = '\0';
		snprintf(p, sizeof(p), "%s/t/%s/%s", dst, name + 4, name + 151);
		CHECK(stat(p, &st) == 0 && st.st_size == 2, "a GNU long name");
		snprintf(p, sizeof(p), "%s/t/pax", dst);
		CHECK(stat(p, &st) == 0 && st.st_mtim.tv_sec == 1700000000 &&
			      st.st_mtim.tv_nsec == 250000001,
		      "a pax path and an mtime with nanoseconds");
		snprintf(p, sizeof(p), "%s/t/b256", dst);
		CHECK(stat(p, &st) == 0 && st.st_size == 3, "a base-256 size");
	}
	free(b.p);
}

static void test_afile(void)
{
	char dir[128], p[512];
	struct afile f;
	space_err e = { 0 };
	int dfd;
	struct stat st;

	snprintf(dir, sizeof(dir), "%s/afile", root);
	mkdir(dir, 0755);
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	snprintf(p, sizeof(p), "%s/sub", dir);
	mkdir(p, 0755);
	CHECK(afile_open(&f, dfd, "sub", 0644, &e) == 0 && afile_write(&f, "x", 1, &e) == 0 &&
		      afile_commit(&f, &e) < 0 && strstr(e.msg, "directory"),
	      "a directory is not replaced by a file: %s", e.msg);
	snprintf(p, sizeof(p), "ls -a %s | grep -q spacectl", dir);
	CHECK(system(p) != 0, "and no temporary file is left");
	CHECK(afile_open(&f, dfd, "a", 04755, &e) == 0 && afile_write(&f, "abc", 3, &e) == 0 &&
		      afile_commit(&f, &e) == 0,
	      "write a file");
	snprintf(p, sizeof(p), "%s/a", dir);
	st.st_mode = 0;
	stat(p, &st);
	CHECK(st.st_size == 3 && (st.st_mode & 07777) == 0755, "its mode, without setuid (%o)",
	      st.st_mode & 07777);
	CHECK(afile_open(&f, dfd, "b", 0644, &e) == 0, "open another");
	afile_abort(&f);
	snprintf(p, sizeof(p), "ls -a %s | grep -q -e spacectl -e '^b$'", dir);
	CHECK(system(p) != 0, "abort leaves nothing");
	CHECK(afile_open(&f, dfd, "../x", 0644, &e) < 0 && afile_open(&f, dfd, "..", 0644, &e) < 0,
	      "only plain names");
	close(dfd);
}

int main(void)
{
	snprintf(root, sizeof(root), "/tmp/test_cli_tar.XXXXXX");
	if (!mkdtemp(root))
		SKIP_ALL("no temporary directory");
	umask(022);
	RUN(test_round_trip);
	RUN(test_gnu_tar);
	RUN(test_hostile);
	RUN(test_formats);
	RUN(test_afile);
	{
		char cmd[256];

		snprintf(cmd, sizeof(cmd), "chmod -R u+w %s; rm -rf %s /tmp/.tar_[ab]_%d", root, root,
			 (int)getpid());
		sh("%s", cmd);
	}
	return DONE();
}
