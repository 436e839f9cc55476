/* test_fs_tar.c -- tar-out / tar-in (docs/design/channels.md) and the tar writer and reader
 * under them: a round trip reproduces a tree, GNU tar reads what we write and we read what it
 * writes, and extraction never writes outside the target directory. */
#include <dirent.h>
#include <time.h>

#include "agent/fs/tar.h"
#include "harness.h"
#include "test_fs_util.h"

/* ---- archives built in memory with our writer */

struct arch {
	int fd;
	struct fs_out o;
	struct tar_writer w;
};

static void arch_init(struct arch *a)
{
	a->fd = memfd_create("tar", 0);
	fs_out_init(&a->o, a->fd, 4096);
	tar_writer_init(&a->w, &a->o);
}

static void arch_add(struct arch *a, char type, const char *name, const char *link,
		     const void *data, size_t n, unsigned mode)
{
	struct tar_entry e;

	memset(&e, 0, sizeof(e));
	e.name = name;
	e.linkname = link ? link : "";
	e.type = type;
	e.size = type == TAR_FILE ? n : 0;
	e.mode = mode;
	e.uid = 0;
	e.gid = 0;
	e.mtime = 1600000000;
	strcpy(e.uname, "root");
	strcpy(e.gname, "root");
	if (tar_write_header(&a->w, &e) < 0 || (type == TAR_FILE && n && tar_write_data(&a->w, data, n) < 0) ||
	    tar_write_pad(&a->w) < 0)
		abort();
}

/* End the archive; returns its bytes (malloc'ed). */
static char *arch_done(struct arch *a, size_t *len)
{
	char *s;

	if (tar_write_end(&a->w) < 0 || fs_out_flush(&a->o) < 0)
		abort();
	tar_writer_free(&a->w);
	fs_out_free(&a->o);
	s = fd_slurp(a->fd, len);
	close(a->fd);
	return s;
}

struct mem {
	const char *p;
	size_t n, pos, chunk;
};

static ssize_t mem_read(void *ctx, void *buf, size_t n)
{
	struct mem *m = ctx;

	if (m->chunk && n > m->chunk)
		n = m->chunk;
	if (n > m->n - m->pos)
		n = m->n - m->pos;
	memcpy(buf, m->p + m->pos, n);
	m->pos += n;
	return (ssize_t)n;
}

static int exists(const char *p)
{
	struct stat st;

	return lstat(p, &st) == 0;
}

/* ---- a tree to archive */

static char long1[81], long2[81], longfile[121], longtarget[301];
static unsigned char *bigdata;
static size_t bigsize = 1024 * 1024 + 3;

static void make_tree(const char *root)
{
	struct timespec ts[2] = { { 0, UTIME_OMIT }, { 1000000000, 0 } };
	char p[4096];
	size_t i;

	memset(long1, 'd', 80);
	memset(long2, 'e', 80);
	memset(longfile, 'f', 120);
	memset(longtarget, 't', 300);
	bigdata = malloc(bigsize);
	for (i = 0; i < bigsize; i++)
		bigdata[i] = (unsigned char)(i * 7 + (i >> 11));
	mkdir(root, 0755);
	snprintf(p, sizeof(p), "%s/a.txt", root);
	put_file(p, "hello", 5, 0644);
	utimensat(AT_FDCWD, p, ts, 0);
	snprintf(p, sizeof(p), "%s/run.sh", root);
	put_file(p, "#!/bin/sh\necho hi\n", 18, 0755);
	snprintf(p, sizeof(p), "%s/empty", root);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/ro", root);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/ro/inside", root);
	put_file(p, "ro", 2, 0444);
	snprintf(p, sizeof(p), "%s/ro", root);
	chmod(p, 0555);
	snprintf(p, sizeof(p), "%s/%s", root, long1);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/%s/%s", root, long1, long2);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/%s/%s/%s", root, long1, long2, longfile);
	put_file(p, "long", 4, 0600);
	snprintf(p, sizeof(p), "%s/ln", root);
	symlink("a.txt", p);
	snprintf(p, sizeof(p), "%s/longlink", root);
	symlink(longtarget, p);
	snprintf(p, sizeof(p), "%s/big", root);
	put_file(p, bigdata, bigsize, 0640);
	snprintf(p, sizeof(p), "%s/fifo", root);
	mkfifo(p, 0644);
}

/* The tree under root matches the one make_tree built. */
static void check_tree(const char *root)
{
	char p[4096], t[512];
	struct stat st;
	size_t n;
	char *s;
	ssize_t tl;

	snprintf(p, sizeof(p), "%s/a.txt", root);
	EXPECT(file_is(p, "hello"));
	EXPECT(stat(p, &st) == 0 && (st.st_mode & 07777) == 0644 && st.st_mtime == 1000000000);
	snprintf(p, sizeof(p), "%s/run.sh", root);
	EXPECT(stat(p, &st) == 0 && (st.st_mode & 07777) == 0755);
	snprintf(p, sizeof(p), "%s/empty", root);
	EXPECT(stat(p, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0700);
	snprintf(p, sizeof(p), "%s/ro", root);
	EXPECT(stat(p, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0555);
	snprintf(p, sizeof(p), "%s/ro/inside", root);
	EXPECT(file_is(p, "ro"));
	EXPECT(stat(p, &st) == 0 && (st.st_mode & 07777) == 0444);
	snprintf(p, sizeof(p), "%s/%s/%s/%s", root, long1, long2, longfile);
	EXPECT(file_is(p, "long"));
	EXPECT(stat(p, &st) == 0 && (st.st_mode & 07777) == 0600);
	snprintf(p, sizeof(p), "%s/ln", root);
	tl = readlink(p, t, sizeof(t));
	EXPECT(tl == 5 && memcmp(t, "a.txt", 5) == 0);
	snprintf(p, sizeof(p), "%s/longlink", root);
	tl = readlink(p, t, sizeof(t));
	EXPECT(tl == 300 && memcmp(t, longtarget, 300) == 0);
	snprintf(p, sizeof(p), "%s/big", root);
	s = get_file(p, &n);
	EXPECT(s && n == bigsize && memcmp(s, bigdata, n) == 0);
	free(s);
	EXPECT(stat(p, &st) == 0 && (st.st_mode & 07777) == 0640);
	snprintf(p, sizeof(p), "%s/fifo", root);
	EXPECT(!exists(p));
}

static void round_trip(void)
{
	struct fsrun out, in;

	make_tree(P("src"));
	FSRUN(&out, NULL, 0, "tar-out", (char *)P("src"));
	EXPECT_EQ(out.rc, 0);
	EXPECT(out.head && strcmp(jstr(out.head, "path"), P("src")) == 0);
	EXPECT(out.bodylen > 0 && out.bodylen % TAR_RECORD == 0);
	mkdir(P("dst"), 0755);
	FSRUN(&in, out.body, out.bodylen, "tar-in", (char *)P("dst"));
	EXPECT_EQ(in.rc, 0);
	if (in.rc)
		NOTE("%s", in.err);
	EXPECT(in.head && strcmp(jstr(in.head, "path"), P("dst")) == 0);
	/* dirs src, empty, ro, long1, long1/long2; files a.txt, run.sh, ro/inside, the long one,
	 * big; symlinks ln, longlink */
	EXPECT_EQ(jint(in.head, "entries"), 12);
	EXPECT_EQ(jint(in.head, "bytes"), 5 + 18 + 2 + 4 + bigsize);
	check_tree(P("dst/src"));
	fsrun_free(&in);

	/* A single file: one entry named after it. */
	FSRUN(&in, NULL, 0, "tar-out", (char *)P("src/a.txt"));
	EXPECT(in.rc == 0 && in.bodylen == TAR_RECORD && memcmp(in.body, "a.txt", 6) == 0);
	fsrun_free(&in);
	FSRUN(&in, NULL, 0, "tar-out", (char *)P("nothing"));
	EXPECT(fs_failed_with(&in, ENOENT, "ENOENT"));
	fsrun_free(&in);
	FSRUN(&in, out.body, out.bodylen, "tar-in", (char *)P("nothing"));
	EXPECT(fs_failed_with(&in, ENOENT, "ENOENT"));
	fsrun_free(&in);
	FSRUN(&in, out.body, out.bodylen, "tar-in", (char *)P("src/a.txt"));
	EXPECT(fs_failed_with(&in, ENOTDIR, "ENOTDIR"));
	fsrun_free(&in);
	fsrun_free(&out);
}

/* GNU tar reads what tar-out writes, and tar-in reads what GNU tar writes (pax and gnu). */
static void gnu_tar_compat(void)
{
	struct fsrun out, in;
	char cmd[8192];
	const char *fmts[] = { "pax", "gnu", "ustar" };
	char excl[200];
	size_t i;
	int rc;

	if (system("tar --version >/dev/null 2>&1") != 0) {
		NOTE("no tar(1): compatibility not tested");
		return;
	}
	FSRUN(&out, NULL, 0, "tar-out", (char *)P("src"));
	EXPECT_EQ(out.rc, 0);
	EXPECT_EQ(put_file(P("ours.tar"), out.body, out.bodylen, 0644), 0);
	fsrun_free(&out);
	mkdir(P("gnu-x"), 0755);
	snprintf(cmd, sizeof(cmd), "tar -C %s -xpf %s", P("gnu-x"), P("ours.tar"));
	rc = system(cmd);
	EXPECT_EQ(rc, 0);
	check_tree(P("gnu-x/src"));

	for (i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
		char dst[64], arch[64];
		size_t n;
		char *data;

		snprintf(dst, sizeof(dst), "from-%s", fmts[i]);
		snprintf(arch, sizeof(arch), "%s.tar", fmts[i]);
		/* ustar holds neither the 300-byte link target nor the 284-byte name. */
		snprintf(excl, sizeof(excl), "--exclude=longlink --exclude=%s", long1);
		snprintf(cmd, sizeof(cmd), "tar -C %s --format=%s %s -cf %s src 2>/dev/null", fs_tmp,
			 fmts[i], strcmp(fmts[i], "ustar") == 0 ? excl : "", P("%s", arch));
		rc = system(cmd);
		EXPECT_EQ(rc, 0);
		data = get_file(P("%s", arch), &n);
		mkdir(P("%s", dst), 0755);
		FSRUN(&in, data, n, "tar-in", (char *)P("%s", dst));
		EXPECT_EQ(in.rc, 0);
		if (in.rc)
			NOTE("%s: %s", fmts[i], in.err);
		fsrun_free(&in);
		if (strcmp(fmts[i], "ustar") == 0) {
			size_t bn;
			char *b = get_file(P("%s/src/big", dst), &bn);

			EXPECT(file_is(P("%s/src/a.txt", dst), "hello"));
			EXPECT(file_is(P("%s/src/ro/inside", dst), "ro"));
			EXPECT(b && bn == bigsize && memcmp(b, bigdata, bn) == 0);
			free(b);
		} else {
			check_tree(P("%s/src", dst));
		}
		free(data);
	}
}

static void refuses_escapes(void)
{
	struct arch a;
	struct fsrun r;
	size_t n;
	char *t;

	mkdir(P("x"), 0755);
	mkdir(P("outside2"), 0755);
	symlink(P("outside2"), P("x/link"));

	/* ../x, with a good entry before (extracted) and one after (not). */
	arch_init(&a);
	arch_add(&a, TAR_FILE, "ok1", NULL, "1", 1, 0644);
	arch_add(&a, TAR_FILE, "../escaped", NULL, "bad", 3, 0644);
	arch_add(&a, TAR_FILE, "ok2", NULL, "2", 1, 0644);
	t = arch_done(&a, &n);
	FSRUN(&r, t, n, "tar-in", (char *)P("x"));
	EXPECT(fs_failed_with(&r, EINVAL, "EINVAL"));
	fsrun_free(&r);
	free(t);
	EXPECT(file_is(P("x/ok1"), "1"));
	EXPECT(!exists(P("x/ok2")) && !exists(P("escaped")));

	arch_init(&a);
	arch_add(&a, TAR_FILE, "a/b/../../../escaped2", NULL, "bad", 3, 0644);
	t = arch_done(&a, &n);
	FSRUN(&r, t, n, "tar-in", (char *)P("x"));
	EXPECT(fs_failed_with(&r, EINVAL, "EINVAL"));
	fsrun_free(&r);
	free(t);
	EXPECT(!exists(P("escaped2")) && !exists(P("x/a")));

	/* An absolute name. */
	arch_init(&a);
	arch_add(&a, TAR_FILE, P("abs-target"), NULL, "bad", 3, 0644);
	t = arch_done(&a, &n);
	FSRUN(&r, t, n, "tar-in", (char *)P("x"));
	EXPECT(fs_failed_with(&r, EINVAL, "EINVAL"));
	fsrun_free(&r);
	free(t);
	EXPECT(!exists(P("abs-target")));

	/* Through a symlink that was already there... */
	arch_init(&a);
	arch_add(&a, TAR_FILE, "link/x", NULL, "bad", 3, 0644);
	t = arch_done(&a, &n);
	FSRUN(&r, t, n, "tar-in", (char *)P("x"));
	EXPECT(fs_failed_with(&r, EINVAL, "EINVAL"));
	fsrun_free(&r);
	free(t);
	EXPECT(!exists(P("outside2/x")));

	/* ... or one the archive itself made, also for a directory entry under it. */
	arch_init(&a);
	arch_add(&a, TAR_SYMLINK, "l2", P("outside2"), NULL, 0, 0777);
	arch_add(&a, TAR_DIR, "l2/newdir/", NULL, NULL, 0, 0755);
	t = arch_done(&a, &n);
	FSRUN(&r, t, n, "tar-in", (char *)P("x"));
	EXPECT(fs_failed_with(&r, EINVAL, "EINVAL"));
	fsrun_free(&r);
	free(t);
	EXPECT(exists(P("x/l2")) && !exists(P("outside2/newdir")));
	arch_init(&a);
	arch_add(&a, TAR_SYMLINK, "l3", P("outside2"), NULL, 0, 0777);
	arch_add(&a, TAR_FILE, "l3/y", NULL, "bad", 3, 0644);
	t = arch_done(&a, &n);
	FSRUN(&r, t, n, "tar-in", (char *)P("x"));
	EXPECT(fs_failed_with(&r, EINVAL, "EINVAL"));
	fsrun_free(&r);
	free(t);
	EXPECT(!exists(P("outside2/y")));

	/* A hard link to something outside. */
	put_file(P("outside2/secret"), "secret", 6, 0600);
	arch_init(&a);
	arch_add(&a, TAR_HARDLINK, "hl", "../outside2/secret", NULL, 0, 0644);
	t = arch_done(&a, &n);
	FSRUN(&r, t, n, "tar-in", (char *)P("x"));
	EXPECT(fs_failed_with(&r, EINVAL, "EINVAL"));
	fsrun_free(&r);
	free(t);
	arch_init(&a);
	arch_add(&a, TAR_HARDLINK, "hl", "link/secret", NULL, 0, 0644);
	t = arch_done(&a, &n);
	FSRUN(&r, t, n, "tar-in", (char *)P("x"));
	EXPECT(fs_failed_with(&r, EINVAL, "EINVAL"));
	fsrun_free(&r);
	free(t);
	EXPECT(!exists(P("x/hl")));
}

static void replaces_links_in_place(void)
{
	struct arch a;
	struct fsrun r;
	struct stat st1, st2;
	size_t n;
	char *t;

	mkdir(P("y"), 0755);
	mkdir(P("outside3"), 0755);
	put_file(P("outside3/secret"), "secret", 6, 0600);
	put_file(P("outside3/target"), "target", 6, 0600);
	/* A hard link and a symlink to outside files sit where the archive puts files. */
	EXPECT_EQ(link(P("outside3/secret"), P("y/h")), 0);
	symlink(P("outside3/target"), P("y/s"));
	arch_init(&a);
	arch_add(&a, TAR_FILE, "h", NULL, "new-h", 5, 0644);
	arch_add(&a, TAR_FILE, "s", NULL, "new-s", 5, 0644);
	arch_add(&a, TAR_FILE, "f", NULL, "data", 4, 0644);
	arch_add(&a, TAR_HARDLINK, "f2", "f", NULL, 0, 0644);
	arch_add(&a, TAR_DIR, "./", NULL, NULL, 0, 0700);
	arch_add(&a, TAR_FILE, "./sub//deeper/./g", NULL, "g", 1, 0644);
	t = arch_done(&a, &n);
	FSRUN(&r, t, n, "tar-in", (char *)P("y"));
	EXPECT_EQ(r.rc, 0);
	if (r.rc)
		NOTE("%s", r.err);
	EXPECT_EQ(jint(r.head, "entries"), 5);
	EXPECT_EQ(jint(r.head, "bytes"), 15);
	fsrun_free(&r);
	free(t);
	EXPECT(file_is(P("outside3/secret"), "secret") && file_is(P("outside3/target"), "target"));
	EXPECT(file_is(P("y/h"), "new-h") && file_is(P("y/s"), "new-s"));
	EXPECT(lstat(P("y/s"), &st1) == 0 && S_ISREG(st1.st_mode));
	EXPECT(stat(P("y/f"), &st1) == 0 && stat(P("y/f2"), &st2) == 0 && st1.st_ino == st2.st_ino);
	EXPECT(file_is(P("y/sub/deeper/g"), "g"));
	/* "./" is the target itself: its mode is left alone. */
	EXPECT(stat(P("y"), &st1) == 0 && (st1.st_mode & 07777) == 0755);
}

static void bad_archives(void)
{
	struct arch a;
	struct fsrun r;
	size_t n;
	char *t, v[1000];

	memset(v, 'v', sizeof(v));
	mkdir(P("z"), 0755);
	arch_init(&a);
	arch_add(&a, TAR_FILE, "victim", NULL, v, sizeof(v), 0644);
	t = arch_done(&a, &n);
	t[0] ^= 1; /* the name changes, the checksum does not */
	FSRUN(&r, t, n, "tar-in", (char *)P("z"));
	EXPECT(fs_failed_with(&r, EINVAL, "EINVAL"));
	EXPECT(strstr(jstr(r.error, "message"), "checksum") != NULL);
	fsrun_free(&r);
	t[0] ^= 1;
	/* Truncated in the data, then in a header. */
	FSRUN(&r, t, 512 + 700, "tar-in", (char *)P("z"));
	EXPECT(fs_failed_with(&r, EINVAL, "EINVAL"));
	fsrun_free(&r);
	EXPECT(!exists(P("z/victim"))); /* the partial file is removed */
	FSRUN(&r, t, 100, "tar-in", (char *)P("z"));
	EXPECT(fs_failed_with(&r, EINVAL, "EINVAL"));
	fsrun_free(&r);
	/* No end blocks at all, ending on a block boundary: accepted. */
	FSRUN(&r, t, 1536, "tar-in", (char *)P("z"));
	EXPECT(r.rc == 0 && jint(r.head, "entries") == 1);
	fsrun_free(&r);
	/* Empty input: an empty archive. */
	FSRUN(&r, NULL, 0, "tar-in", (char *)P("z"));
	EXPECT(r.rc == 0 && jint(r.head, "entries") == 0);
	fsrun_free(&r);
	/* Garbage. */
	memset(t, 'A', 1024);
	FSRUN(&r, t, 1024, "tar-in", (char *)P("z"));
	EXPECT(fs_failed_with(&r, EINVAL, "EINVAL"));
	fsrun_free(&r);
	free(t);
}

/* A header block with a valid checksum, for hand-made archives. */
static void hdr(unsigned char *h, const char *name, char type, const char *size_field)
{
	unsigned sum = 0;
	int i;

	memset(h, 0, 512);
	memcpy(h, name, strlen(name));
	memcpy(h + 100, "0000644", 8);
	memcpy(h + 108, "0000000", 8);
	memcpy(h + 116, "0000000", 8);
	memcpy(h + 124, size_field, 12);
	memcpy(h + 136, "14371573000", 12);
	h[156] = (unsigned char)type;
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memset(h + 148, ' ', 8);
	for (i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
}

static void reader_units(void)
{
	unsigned char buf[512 * 12];
	struct tar_reader r;
	struct tar_entry e;
	struct mem m;
	space_err err;
	char data[16];
	const char *pax = "28 path=from/pax/header.txt\n21 mtime=1.250000000\n";
	const char *gnu = "gnu/long/name";
	int rc;

	memset(buf, 0, sizeof(buf));
	/* pax x header + file; GNU L + file; a global header; base-256 size; end */
	{
		char sz[12];

		snprintf(sz, sizeof(sz), "%011o", (unsigned)strlen(pax));
		hdr(buf, "PaxHeader", 'x', sz);
		memcpy(buf + 512, pax, strlen(pax));
		hdr(buf + 1024, "short", '0', "00000000003");
		memcpy(buf + 1536, "abc", 3);
		snprintf(sz, sizeof(sz), "%011o", (unsigned)strlen(gnu) + 1);
		hdr(buf + 2048, "././@LongLink", 'L', sz);
		memcpy(buf + 2560, gnu, strlen(gnu));
		hdr(buf + 3072, "trunc", '5', "00000000000");
		hdr(buf + 3584, "glob", 'g', "00000000010");
		memcpy(buf + 4096, "8 a=bcd\n", 8);
		{
			unsigned char *h = buf + 4608;
			unsigned sum = 0;
			int i;

			hdr(h, "b256", '0', "00000000000");
			memset(h + 124, 0, 12);
			h[124] = 0x80;
			h[135] = 2;
			memset(h + 148, ' ', 8);
			for (i = 0; i < 512; i++)
				sum += h[i];
			snprintf((char *)h + 148, 8, "%06o", sum);
			memcpy(buf + 5120, "xy", 2);
		}
	}
	m = (struct mem){ (const char *)buf, sizeof(buf), 0, 7 }; /* short reads */
	EXPECT_EQ(tar_reader_init(&r, mem_read, &m, 512), 0);
	rc = tar_next(&r, &e, &err);
	EXPECT(rc == 1 && strcmp(e.name, "from/pax/header.txt") == 0 && e.size == 3 &&
	       e.mtime == 1 && e.mtime_nsec == 250000000 && e.type == TAR_FILE);
	EXPECT(tar_read_data(&r, data, sizeof(data), &err) == 3 && memcmp(data, "abc", 3) == 0);
	EXPECT_EQ(tar_read_data(&r, data, sizeof(data), &err), 0);
	rc = tar_next(&r, &e, &err);
	EXPECT(rc == 1 && strcmp(e.name, gnu) == 0 && e.type == TAR_DIR);
	rc = tar_next(&r, &e, &err);
	EXPECT(rc == 1 && strcmp(e.name, "b256") == 0 && e.size == 2);
	/* data left unread: skipped by the next call */
	rc = tar_next(&r, &e, &err);
	EXPECT_EQ(rc, 0);
	tar_reader_free(&r);

	/* A malformed pax record. */
	memset(buf, 0, sizeof(buf));
	hdr(buf, "PaxHeader", 'x', "00000000006");
	memcpy(buf + 512, "99 a=\n", 6);
	m = (struct mem){ (const char *)buf, sizeof(buf), 0, 0 };
	tar_reader_init(&r, mem_read, &m, 4096);
	EXPECT_EQ(tar_next(&r, &e, &err), -1);
	EXPECT_EQ(err.code, EINVAL);
	tar_reader_free(&r);
	/* "00005 x\n": digits eat the whole record length */
	memset(buf, 0, sizeof(buf));
	hdr(buf, "PaxHeader", 'x', "00000000010");
	memcpy(buf + 512, "00005 x=\n", 8);
	m = (struct mem){ (const char *)buf, sizeof(buf), 0, 0 };
	tar_reader_init(&r, mem_read, &m, 4096);
	EXPECT_EQ(tar_next(&r, &e, &err), -1);
	tar_reader_free(&r);
	/* A bad octal digit. */
	memset(buf, 0, sizeof(buf));
	hdr(buf, "f", '0', "0000000009x");
	m = (struct mem){ (const char *)buf, sizeof(buf), 0, 0 };
	tar_reader_init(&r, mem_read, &m, 4096);
	EXPECT_EQ(tar_next(&r, &e, &err), -1);
	tar_reader_free(&r);
}

static void big_sizes_use_pax(void)
{
	struct arch a;
	struct tar_entry e, got;
	struct tar_reader r;
	struct mem m;
	space_err err;
	size_t n;
	char *t;

	arch_init(&a);
	memset(&e, 0, sizeof(e));
	e.name = "huge";
	e.linkname = "";
	e.type = TAR_FILE;
	e.size = 10ull << 30;
	e.uid = 3000000; /* over 7 octal digits */
	e.gid = 5;
	e.mtime = -86400;
	e.mode = 0644;
	strcpy(e.uname, "someone");
	strcpy(e.gname, "grp");
	EXPECT_EQ(tar_write_header(&a.w, &e), 0);
	EXPECT_EQ(fs_out_flush(&a.o), 0);
	tar_writer_free(&a.w);
	fs_out_free(&a.o);
	t = fd_slurp(a.fd, &n);
	close(a.fd);
	EXPECT_EQ(n, 3 * 512); /* pax header, its data, the entry's header */
	EXPECT(t[156] == 'x' && t[1024 + 156] == '0');
	EXPECT(memmem(t + 512, 512, "size=10737418240\n", 17) != NULL);
	m = (struct mem){ t, n, 0, 0 };
	tar_reader_init(&r, mem_read, &m, 4096);
	EXPECT_EQ(tar_next(&r, &got, &err), 1);
	EXPECT(got.size == 10ull << 30 && got.uid == 3000000 && got.mtime == -86400 &&
	       strcmp(got.uname, "someone") == 0);
	tar_reader_free(&r);
	free(t);
}

static void name_cleaning(void)
{
	char out[TAR_NAME_MAX + 1];
	space_err err;
	char longname[TAR_NAME_MAX + 10];

	EXPECT(tar_name_clean("./a//b/./c/", out, &err) == 0 && strcmp(out, "a/b/c") == 0);
	EXPECT(tar_name_clean("./", out, &err) == 0 && strcmp(out, "") == 0);
	EXPECT(tar_name_clean("a..b/..c/c..", out, &err) == 0 && strcmp(out, "a..b/..c/c..") == 0);
	EXPECT(tar_name_clean("../x", out, &err) < 0 && err.code == EINVAL);
	EXPECT(tar_name_clean("a/..", out, &err) < 0 && err.code == EINVAL);
	EXPECT(tar_name_clean("/x", out, &err) < 0 && err.code == EINVAL);
	EXPECT(tar_name_clean("//x", out, &err) < 0);
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	EXPECT(tar_name_clean(longname, out, &err) < 0 && err.code == ENAMETOOLONG);
}

int main(void)
{
	fs_tmpdir();
	RUN(round_trip);
	RUN(gnu_tar_compat);
	RUN(refuses_escapes);
	RUN(replaces_links_in_place);
	RUN(bad_archives);
	RUN(reader_units);
	RUN(big_sizes_use_pax);
	RUN(name_cleaning);
	free(bigdata);
	return DONE();
}
