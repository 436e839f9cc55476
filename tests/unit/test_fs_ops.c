/* test_fs_ops.c -- the file operations of docs/design/channels.md (read, write, list, stat, mkdir,
 * remove, rename) through fsop_main, on a scratch directory: header lines, bodies, errors, and
 * the promises about symlinks and atomic replacement. */
#include <dirent.h>
#include <poll.h>
#include <time.h>

#include "harness.h"
#include "test_fs_util.h"

static void read_ranges(void)
{
	struct fsrun r;
	const char *f = P("hello.txt");

	EXPECT_EQ(put_file(f, "hello world", 11, 0640), 0);
	FSRUN(&r, NULL, 0, "read", (char *)f);
	EXPECT_EQ(r.rc, 0);
	EXPECT(r.head);
	EXPECT_EQ(jint(r.head, "size"), 11);
	EXPECT_EQ(jint(r.head, "offset"), 0);
	EXPECT_EQ(jint(r.head, "length"), 11);
	EXPECT_EQ(jint(r.head, "mode"), 0640);
	EXPECT(json_is_number(json_object_get(r.head, "mtime")));
	EXPECT(r.bodylen == 11 && memcmp(r.body, "hello world", 11) == 0);
	fsrun_free(&r);

	FSRUN(&r, NULL, 0, "read", (char *)f, "6");
	EXPECT(r.rc == 0 && jint(r.head, "length") == 5 && r.bodylen == 5 &&
	       memcmp(r.body, "world", 5) == 0);
	fsrun_free(&r);
	FSRUN(&r, NULL, 0, "read", (char *)f, "6", "3");
	EXPECT(r.rc == 0 && jint(r.head, "length") == 3 && r.bodylen == 3 &&
	       memcmp(r.body, "wor", 3) == 0);
	fsrun_free(&r);
	FSRUN(&r, NULL, 0, "read", (char *)f, "2", "100");
	EXPECT(r.rc == 0 && jint(r.head, "length") == 9 && r.bodylen == 9);
	fsrun_free(&r);
	/* At the end: an empty body; past it: ERANGE. */
	FSRUN(&r, NULL, 0, "read", (char *)f, "11");
	EXPECT(r.rc == 0 && jint(r.head, "length") == 0 && r.bodylen == 0);
	fsrun_free(&r);
	FSRUN(&r, NULL, 0, "read", (char *)f, "12");
	EXPECT(fs_failed_with(&r, ERANGE, "ERANGE"));
	EXPECT(strcmp(jstr(r.error, "path"), f) == 0);
	fsrun_free(&r);
	FSRUN(&r, NULL, 0, "read", (char *)f, "x");
	EXPECT(fs_failed_with(&r, EINVAL, "EINVAL"));
	fsrun_free(&r);
	FSRUN(&r, NULL, 0, "read", (char *)f, "-1");
	EXPECT(fs_failed_with(&r, EINVAL, "EINVAL"));
	fsrun_free(&r);
}

static void read_errors(void)
{
	struct fsrun r;

	FSRUN(&r, NULL, 0, "read", (char *)fs_tmp);
	EXPECT(fs_failed_with(&r, EISDIR, "EISDIR"));
	fsrun_free(&r);
	FSRUN(&r, NULL, 0, "read", (char *)P("missing"));
	EXPECT(fs_failed_with(&r, ENOENT, "ENOENT"));
	fsrun_free(&r);
	FSRUN(&r, NULL, 0, "read", "relative/path");
	EXPECT(fs_failed_with(&r, EINVAL, "EINVAL"));
	fsrun_free(&r);
	/* A FIFO is not opened (that would block): EINVAL. */
	EXPECT_EQ(mkfifo(P("fifo"), 0644), 0);
	FSRUN(&r, NULL, 0, "read", (char *)P("fifo"));
	EXPECT(fs_failed_with(&r, EINVAL, "EINVAL"));
	fsrun_free(&r);
	FSRUN(&r, NULL, 0, "frobnicate", "/x");
	EXPECT(fs_failed_with(&r, EINVAL, "EINVAL"));
	fsrun_free(&r);
	FSRUN(&r, NULL, 0, "read", "/x", "-q");
	EXPECT(fs_failed_with(&r, EINVAL, "EINVAL"));
	fsrun_free(&r);
	FSRUN(&r, NULL, 0, "stat");
	EXPECT(fs_failed_with(&r, EINVAL, "EINVAL"));
	fsrun_free(&r);
}

static void read_big(void)
{
	size_t n = 3 * 1024 * 1024 + 17, i;
	unsigned char *data = malloc(n);
	struct fsrun r;

	for (i = 0; i < n; i++)
		data[i] = (unsigned char)(i * 131 + (i >> 9));
	EXPECT_EQ(put_file(P("big"), data, n, 0644), 0);
	FSRUN(&r, NULL, 0, "read", (char *)P("big"));
	EXPECT(r.rc == 0 && r.bodylen == n && memcmp(r.body, data, n) == 0);
	fsrun_free(&r);
	FSRUN(&r, NULL, 0, "read", (char *)P("big"), "1000000", "2000000");
	EXPECT(r.rc == 0 && r.bodylen == 2000000 && memcmp(r.body, data + 1000000, 2000000) == 0);
	fsrun_free(&r);
	free(data);
}

/* Names in dir that look like our temporary files. */
static int temp_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		if (strstr(e->d_name, ".space-"))
			n++;
	if (d)
		closedir(d);
	return n;
}

static void write_basic(void)
{
	struct fsrun r;
	struct stat st, st2;
	const char *f = P("w/new.txt");

	mkdir(P("w"), 0755);
	FSRUN(&r, "content", 7, "write", (char *)f);
	EXPECT_EQ(r.rc, 0);
	EXPECT(r.head && strcmp(jstr(r.head, "path"), f) == 0 && jint(r.head, "size") == 7);
	EXPECT_EQ(r.bodylen, 0);
	fsrun_free(&r);
	EXPECT(file_is(f, "content"));
	EXPECT(stat(f, &st) == 0 && (st.st_mode & 07777) == 0644);

	/* Replacing keeps the old mode; the file is a new inode (rename over it). */
	chmod(f, 0600);
	stat(f, &st);
	FSRUN(&r, "second", 6, "write", (char *)f);
	EXPECT_EQ(r.rc, 0);
	fsrun_free(&r);
	EXPECT(file_is(f, "second"));
	EXPECT(stat(f, &st2) == 0 && (st2.st_mode & 07777) == 0600);
	EXPECT(st2.st_ino != st.st_ino);

	/* Explicit mode, "-" for the default, empty content. */
	FSRUN(&r, "#!/bin/sh\n", 10, "write", (char *)f, "0755");
	EXPECT_EQ(r.rc, 0);
	fsrun_free(&r);
	EXPECT(stat(f, &st) == 0 && (st.st_mode & 07777) == 0755);
	FSRUN(&r, NULL, 0, "write", (char *)P("w/empty"), "-");
	EXPECT(r.rc == 0 && jint(r.head, "size") == 0);
	fsrun_free(&r);
	EXPECT(stat(P("w/empty"), &st) == 0 && st.st_size == 0 && (st.st_mode & 07777) == 0644);
	FSRUN(&r, "x", 1, "write", (char *)f, "9999");
	EXPECT(fs_failed_with(&r, EINVAL, "EINVAL"));
	fsrun_free(&r);
	EXPECT_EQ(temp_files(P("w")), 0);
}

static void write_parents_and_errors(void)
{
	struct fsrun r;
	struct stat st;

	FSRUN(&r, "x", 1, "write", (char *)P("p1/p2/f"));
	EXPECT(fs_failed_with(&r, ENOENT, "ENOENT"));
	fsrun_free(&r);
	FSRUN(&r, "deep", 4, "write", (char *)P("p1/p2/f"), "-p");
	EXPECT_EQ(r.rc, 0);
	fsrun_free(&r);
	EXPECT(file_is(P("p1/p2/f"), "deep"));
	EXPECT(stat(P("p1/p2"), &st) == 0 && S_ISDIR(st.st_mode));
	/* -p before the mode works too. */
	FSRUN(&r, "m", 1, "write", (char *)P("p1/p3/g"), "-p", "0600");
	EXPECT_EQ(r.rc, 0);
	fsrun_free(&r);
	EXPECT(stat(P("p1/p3/g"), &st) == 0 && (st.st_mode & 07777) == 0600);

	FSRUN(&r, "x", 1, "write", (char *)P("p1"));
	EXPECT(fs_failed_with(&r, EISDIR, "EISDIR"));
	fsrun_free(&r);
	FSRUN(&r, "x", 1, "write", (char *)P("p1/"));
	EXPECT(fs_failed_with(&r, EISDIR, "EISDIR"));
	fsrun_free(&r);
	FSRUN(&r, "x", 1, "write", "/");
	EXPECT(fs_failed_with(&r, EISDIR, "EISDIR"));
	fsrun_free(&r);
	FSRUN(&r, "x", 1, "write", (char *)P("p1/notyet/"));
	EXPECT(fs_failed_with(&r, EISDIR, "EISDIR"));
	fsrun_free(&r);
	EXPECT(access(P("p1/notyet"), F_OK) < 0);
	EXPECT_EQ(temp_files(P("p1")), 0);
}

static void write_keeps_owner(void)
{
	struct fsrun r;
	struct stat st;
	const char *f = P("owned");

	if (geteuid() != 0) {
		NOTE("not root: owner keeping not tested");
		return;
	}
	EXPECT_EQ(put_file(f, "old", 3, 0640), 0);
	EXPECT_EQ(chown(f, 1234, 5678), 0);
	FSRUN(&r, "new", 3, "write", (char *)f);
	EXPECT_EQ(r.rc, 0);
	fsrun_free(&r);
	EXPECT(stat(f, &st) == 0 && st.st_uid == 1234 && st.st_gid == 5678 &&
	       (st.st_mode & 07777) == 0640);
	EXPECT(file_is(f, "new"));
}

/* A write whose stdin never ends, killed by sig: the old file stays, no temporary file is
 * left.  named: the named temporary file (no O_TMPFILE), which relies on the handlers. */
static void write_killed_case(int sig, bool named)
{
	const char *dir = P("k"), *f = P("k/target");
	int in[2], out[2], st;
	char *argv[] = { "write", (char *)f, NULL };
	struct pollfd p;
	char buf[64];
	pid_t pid;
	int i;

	mkdir(dir, 0755);
	EXPECT_EQ(put_file(f, "original", 8, 0644), 0);
	EXPECT_EQ(pipe(in), 0);
	EXPECT_EQ(pipe(out), 0);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		int devnull = open("/dev/null", O_WRONLY);

		fs_child_signals();
		dup2(in[0], 0);
		dup2(out[1], 1);
		dup2(devnull, 2);
		close(in[1]);
		close(out[0]);
		fs_write_force_named = named;
		_exit(fsop_main(2, argv));
	}
	close(in[0]);
	close(out[1]);
	EXPECT(write(in[1], "partial content", 15) == 15);
	/* Wait until the temporary file exists (named) or give the copy a moment. */
	for (i = 0; i < 200; i++) {
		if (named ? temp_files(dir) > 0 : i >= 20)
			break;
		usleep(10000);
	}
	if (named)
		EXPECT_EQ(temp_files(dir), 1);
	kill(pid, sig);
	waitpid(pid, &st, 0);
	EXPECT(WIFSIGNALED(st) && WTERMSIG(st) == sig);
	p = (struct pollfd){ .fd = out[0], .events = POLLIN };
	EXPECT(poll(&p, 1, 0) == 1 && read(out[0], buf, sizeof(buf)) == 0); /* no header */
	close(in[1]);
	close(out[0]);
	EXPECT_EQ(temp_files(dir), 0);
	EXPECT(file_is(f, "original"));
}

static void write_killed(void)
{
	write_killed_case(SIGTERM, false);
	write_killed_case(SIGKILL, false);
	write_killed_case(SIGTERM, true);
	write_killed_case(SIGINT, true);
	write_killed_case(SIGHUP, true);
}

static void write_named_ok(void)
{
	struct fsrun r;
	pid_t pid;
	int st;

	/* The named path end to end (its handlers and rename), in a child of its own. */
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		fs_write_force_named = true;
		FSRUN(&r, "named", 5, "write", (char *)P("k/named"));
		_exit(r.rc == 0 ? 0 : 1);
	}
	waitpid(pid, &st, 0);
	EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	EXPECT(file_is(P("k/named"), "named"));
	EXPECT_EQ(temp_files(P("k")), 0);
}

/* Parse the listing body into an array of entries. */
static json_t *entries(const struct fsrun *r)
{
	json_t *a = json_array();
	const char *p = r->body, *end = r->body + r->bodylen;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		json_t *e;

		if (!nl)
			break;
		e = json_loadb(p, (size_t)(nl - p), 0, NULL);
		if (!e) {
			NOTE("bad entry line: %.*s", (int)(nl - p), p);
			e = json_null();
		}
		json_array_append_new(a, e);
		p = nl + 1;
	}
	return a;
}

static void list_tree(void)
{
	struct fsrun r;
	json_t *es, *e;
	const char *d = P("l");

	mkdir(d, 0755);
	put_file(P("l/b"), "bb", 2, 0600);
	put_file(P("l/a"), "a", 1, 0644);
	mkdir(P("l/c"), 0750);
	put_file(P("l/c/inner"), "inner", 5, 0644);
	mkdir(P("l/c/deeper"), 0755);
	symlink("a", P("l/link"));
	mkdir(P("outside"), 0755);
	put_file(P("outside/secret"), "s", 1, 0644);
	symlink(P("outside"), P("l/dirlink"));

	FSRUN(&r, NULL, 0, "list", (char *)d);
	EXPECT_EQ(r.rc, 0);
	EXPECT(strcmp(jstr(r.head, "path"), d) == 0);
	es = entries(&r);
	EXPECT_EQ(json_array_size(es), 5);
	EXPECT(strcmp(jstr(json_array_get(es, 0), "name"), "a") == 0);
	EXPECT(strcmp(jstr(json_array_get(es, 1), "name"), "b") == 0);
	EXPECT(strcmp(jstr(json_array_get(es, 2), "name"), "c") == 0);
	EXPECT(strcmp(jstr(json_array_get(es, 3), "name"), "dirlink") == 0);
	EXPECT(strcmp(jstr(json_array_get(es, 4), "name"), "link") == 0);
	e = json_array_get(es, 1);
	EXPECT(strcmp(jstr(e, "path"), P("l/b")) == 0);
	EXPECT(strcmp(jstr(e, "type"), "file") == 0);
	EXPECT_EQ(jint(e, "size"), 2);
	EXPECT_EQ(jint(e, "mode"), 0600);
	EXPECT(strcmp(jstr(e, "permissions"), "-rw-------") == 0);
	EXPECT(!json_object_get(e, "symlink_target"));
	EXPECT_EQ(jint(e, "uid"), geteuid());
	if (geteuid() == 0) {
		EXPECT(strcmp(jstr(e, "owner"), "root") == 0);
		EXPECT(strcmp(jstr(e, "group"), "root") == 0);
	}
	e = json_array_get(es, 2);
	EXPECT(strcmp(jstr(e, "type"), "dir") == 0);
	EXPECT(strcmp(jstr(e, "permissions"), "drwxr-x---") == 0);
	e = json_array_get(es, 4);
	EXPECT(strcmp(jstr(e, "type"), "symlink") == 0);
	EXPECT(strcmp(jstr(e, "symlink_target"), "a") == 0);
	EXPECT(strncmp(jstr(e, "permissions"), "l", 1) == 0);
	json_decref(es);
	fsrun_free(&r);

	/* Depth 2: c's entries follow c; the symlink to a directory is not followed. */
	FSRUN(&r, NULL, 0, "list", (char *)d, "2");
	EXPECT_EQ(r.rc, 0);
	es = entries(&r);
	EXPECT_EQ(json_array_size(es), 7);
	EXPECT(strcmp(jstr(json_array_get(es, 2), "path"), P("l/c")) == 0);
	EXPECT(strcmp(jstr(json_array_get(es, 3), "path"), P("l/c/deeper")) == 0);
	EXPECT(strcmp(jstr(json_array_get(es, 4), "path"), P("l/c/inner")) == 0);
	EXPECT(strcmp(jstr(json_array_get(es, 5), "name"), "dirlink") == 0);
	EXPECT(strcmp(jstr(json_array_get(es, 6), "name"), "link") == 0);
	json_decref(es);
	fsrun_free(&r);

	FSRUN(&r, NULL, 0, "list", (char *)d, "0");
	EXPECT(fs_failed_with(&r, EINVAL, "EINVAL"));
	fsrun_free(&r);
	FSRUN(&r, NULL, 0, "list", (char *)d, "65");
	EXPECT(fs_failed_with(&r, EINVAL, "EINVAL"));
	fsrun_free(&r);
	FSRUN(&r, NULL, 0, "list", (char *)P("l/a"));
	EXPECT(fs_failed_with(&r, ENOTDIR, "ENOTDIR"));
	fsrun_free(&r);
	FSRUN(&r, NULL, 0, "list", (char *)P("nope"));
	EXPECT(fs_failed_with(&r, ENOENT, "ENOENT"));
	fsrun_free(&r);
	/* The root directory: paths without a double slash. */
	FSRUN(&r, NULL, 0, "list", "/");
	EXPECT_EQ(r.rc, 0);
	es = entries(&r);
	EXPECT(json_array_size(es) > 0 && jstr(json_array_get(es, 0), "path")[0] == '/' &&
	       jstr(json_array_get(es, 0), "path")[1] != '/');
	json_decref(es);
	fsrun_free(&r);
}

static void list_names_from_files(void)
{
	struct fsrun r;
	json_t *es;
	const char *d = P("owners");

	if (geteuid() != 0) {
		NOTE("not root: cannot chown, owner names not tested");
		return;
	}
	mkdir(d, 0755);
	put_file(P("owners/x"), "", 0, 0644);
	put_file(P("owners/y"), "", 0, 0644);
	chown(P("owners/x"), 1000, 100);
	chown(P("owners/y"), 4242, 4343);
	{
		const char *pw = "root:x:0:0::/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\n";
		const char *gr = "root:x:0:\nbad line\nusers:x:100:alice\n";

		put_file(P("passwd"), pw, strlen(pw), 0644);
		put_file(P("group"), gr, strlen(gr), 0644);
	}
	/* In the child only: fs_names_use is set before fsop_main by a wrapper fork. */
	fflush(stdout);
	{
		pid_t pid = fork();
		int st;

		if (pid == 0) {
			fs_names_use(P("passwd"), P("group"));
			FSRUN(&r, NULL, 0, "list", (char *)d);
			es = entries(&r);
			_exit(r.rc == 0 && json_array_size(es) == 2 &&
				      strcmp(jstr(json_array_get(es, 0), "owner"), "alice") == 0 &&
				      strcmp(jstr(json_array_get(es, 0), "group"), "users") == 0 &&
				      strcmp(jstr(json_array_get(es, 1), "owner"), "4242") == 0 &&
				      strcmp(jstr(json_array_get(es, 1), "group"), "4343") == 0
			      ? 0
			      : 1);
		}
		waitpid(pid, &st, 0);
		EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
}

static void stat_entries(void)
{
	struct fsrun r;

	put_file(P("s.txt"), "12345", 5, 0604);
	FSRUN(&r, NULL, 0, "stat", (char *)P("s.txt"));
	EXPECT_EQ(r.rc, 0);
	EXPECT(strcmp(jstr(r.head, "name"), "s.txt") == 0);
	EXPECT(strcmp(jstr(r.head, "path"), P("s.txt")) == 0);
	EXPECT(strcmp(jstr(r.head, "type"), "file") == 0);
	EXPECT_EQ(jint(r.head, "size"), 5);
	EXPECT_EQ(jint(r.head, "mode"), 0604);
	EXPECT(strcmp(jstr(r.head, "permissions"), "-rw----r--") == 0);
	EXPECT(r.bodylen == 0);
	fsrun_free(&r);
	symlink("s.txt", P("s.link"));
	FSRUN(&r, NULL, 0, "stat", (char *)P("s.link"));
	EXPECT(r.rc == 0 && strcmp(jstr(r.head, "type"), "symlink") == 0 &&
	       strcmp(jstr(r.head, "symlink_target"), "s.txt") == 0);
	fsrun_free(&r);
	FSRUN(&r, NULL, 0, "stat", "/");
	EXPECT(r.rc == 0 && strcmp(jstr(r.head, "name"), "/") == 0 &&
	       strcmp(jstr(r.head, "type"), "dir") == 0);
	fsrun_free(&r);
	FSRUN(&r, NULL, 0, "stat", (char *)P("none"));
	EXPECT(fs_failed_with(&r, ENOENT, "ENOENT"));
	fsrun_free(&r);
}

/* Names are bytes: control characters are escaped, invalid UTF-8 becomes U+FFFD. */
static void odd_names(void)
{
	struct fsrun r;
	json_t *es;
	const char *d = P("odd");

	mkdir(d, 0755);
	put_file(P("odd/a\x01" "b\xff" "c"), "", 0, 0644);
	put_file(P("odd/\xc3\xa9t\xc3\xa9\n\"q\\"), "", 0, 0644);
	put_file(P("odd/\xed\xa0\x80x"), "", 0, 0644); /* a UTF-16 surrogate, encoded */
	FSRUN(&r, NULL, 0, "list", (char *)d);
	EXPECT_EQ(r.rc, 0);
	es = entries(&r);
	EXPECT_EQ(json_array_size(es), 3);
	EXPECT(strcmp(jstr(json_array_get(es, 0), "name"), "a\x01" "b\xef\xbf\xbd" "c") == 0);
	EXPECT(strcmp(jstr(json_array_get(es, 1), "name"), "\xc3\xa9t\xc3\xa9\n\"q\\") == 0);
	EXPECT(strcmp(jstr(json_array_get(es, 2), "name"),
		      "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdx") == 0);
	EXPECT(r.body && memmem(r.body, r.bodylen, "a\\u0001b", 8) != NULL);
	json_decref(es);
	fsrun_free(&r);
}

static void json_escaping(void)
{
	struct jbuf b;
	struct timespec t = { -2, 500000000 };

	jb_init(&b);
	jb_begin(&b);
	jb_kstr(&b, "s", "\x7f\t\xf4\x90\x80\x80\xf0\x9f\x98\x80\xc0\xaf", 12);
	jb_ktime(&b, "t", &t);
	jb_end(&b);
	EXPECT(!b.oom);
	EXPECT(b.len == strlen("{\"s\":\"\\u007f\\u0009\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
			       "\xf0\x9f\x98\x80\xef\xbf\xbd\xef\xbf\xbd\",\"t\":-1.500000000}") &&
	       memcmp(b.p, "{\"s\":\"\\u007f\\u0009\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
			   "\xf0\x9f\x98\x80\xef\xbf\xbd\xef\xbf\xbd\",\"t\":-1.500000000}",
		      b.len) == 0);
	if (b.p)
		NOTE("%.*s", (int)b.len, b.p);
	jb_free(&b);
}

static void mkdir_ops(void)
{
	struct fsrun r;
	struct stat st;

	FSRUN(&r, NULL, 0, "mkdir", (char *)P("m1"));
	EXPECT(r.rc == 0 && json_is_true(json_object_get(r.head, "created")));
	fsrun_free(&r);
	EXPECT(stat(P("m1"), &st) == 0 && S_ISDIR(st.st_mode));
	FSRUN(&r, NULL, 0, "mkdir", (char *)P("m1"));
	EXPECT(fs_failed_with(&r, EEXIST, "EEXIST"));
	fsrun_free(&r);
	FSRUN(&r, NULL, 0, "mkdir", (char *)P("m1"), "-p");
	EXPECT(r.rc == 0 && json_is_false(json_object_get(r.head, "created")));
	fsrun_free(&r);
	FSRUN(&r, NULL, 0, "mkdir", (char *)P("m2/a/b"));
	EXPECT(fs_failed_with(&r, ENOENT, "ENOENT"));
	fsrun_free(&r);
	FSRUN(&r, NULL, 0, "mkdir", (char *)P("m2/a/b"), "0700", "-p");
	EXPECT(r.rc == 0 && json_is_true(json_object_get(r.head, "created")));
	fsrun_free(&r);
	EXPECT(stat(P("m2/a/b"), &st) == 0 && (st.st_mode & 07777) == 0700);
	EXPECT(stat(P("m2/a"), &st) == 0 && S_ISDIR(st.st_mode));
	FSRUN(&r, NULL, 0, "mkdir", (char *)P("m3"), "2775");
	EXPECT_EQ(r.rc, 0);
	fsrun_free(&r);
	EXPECT(stat(P("m3"), &st) == 0 && (st.st_mode & 07777) == 02775);
	put_file(P("m2/file"), "", 0, 0644);
	FSRUN(&r, NULL, 0, "mkdir", (char *)P("m2/file"), "-p");
	EXPECT(fs_failed_with(&r, EEXIST, "EEXIST"));
	fsrun_free(&r);
	FSRUN(&r, NULL, 0, "mkdir", (char *)P("m2/file/sub"), "-p");
	EXPECT(fs_failed_with(&r, ENOTDIR, "ENOTDIR"));
	fsrun_free(&r);
	FSRUN(&r, NULL, 0, "mkdir", "/", "-p");
	EXPECT(r.rc == 0 && json_is_false(json_object_get(r.head, "created")));
	fsrun_free(&r);
}

static void remove_ops(void)
{
	struct fsrun r;
	struct stat st;
	char deep[4096];
	int i;

	put_file(P("r1"), "x", 1, 0644);
	FSRUN(&r, NULL, 0, "remove", (char *)P("r1"));
	EXPECT(r.rc == 0 && strcmp(jstr(r.head, "path"), P("r1")) == 0);
	fsrun_free(&r);
	EXPECT(lstat(P("r1"), &st) < 0 && errno == ENOENT);
	FSRUN(&r, NULL, 0, "remove", (char *)P("r1"));
	EXPECT(fs_failed_with(&r, ENOENT, "ENOENT"));
	fsrun_free(&r);

	mkdir(P("r2"), 0755);
	put_file(P("r2/f"), "x", 1, 0644);
	FSRUN(&r, NULL, 0, "remove", (char *)P("r2"));
	EXPECT(fs_failed_with(&r, ENOTEMPTY, "ENOTEMPTY"));
	fsrun_free(&r);
	unlink(P("r2/f"));
	FSRUN(&r, NULL, 0, "remove", (char *)P("r2"));
	EXPECT_EQ(r.rc, 0);
	fsrun_free(&r);

	/* A tree with a symlink to a directory outside: the link goes, the outside stays. */
	mkdir(P("keep"), 0755);
	put_file(P("keep/precious"), "p", 1, 0644);
	mkdir(P("tree"), 0755);
	mkdir(P("tree/sub"), 0755);
	mkdir(P("tree/sub/empty"), 0755);
	put_file(P("tree/sub/f"), "f", 1, 0644);
	put_file(P("tree/g"), "g", 1, 0644);
	symlink(P("keep"), P("tree/sub/out"));
	symlink(P("keep/precious"), P("tree/flink"));
	if (geteuid() == 0) { /* a read-only directory: no obstacle to root */
		mkdir(P("tree/ro"), 0755);
		put_file(P("tree/ro/x"), "x", 1, 0644);
		chmod(P("tree/ro"), 0555);
	}
	for (i = 0; i < 40; i++) { /* many entries in one directory */
		char name[64];

		snprintf(name, sizeof(name), "tree/n%02d", i);
		if (i % 3)
			put_file(P("%s", name), "n", 1, 0644);
		else
			mkdir(P("%s", name), 0755);
	}
	FSRUN(&r, NULL, 0, "remove", (char *)P("tree"), "-r");
	EXPECT_EQ(r.rc, 0);
	if (r.rc)
		NOTE("%s", r.err);
	fsrun_free(&r);
	EXPECT(lstat(P("tree"), &st) < 0 && errno == ENOENT);
	EXPECT(file_is(P("keep/precious"), "p"));

	/* -r on a symlink to a directory removes the link only. */
	symlink(P("keep"), P("klink"));
	FSRUN(&r, NULL, 0, "remove", (char *)P("klink"), "-r");
	EXPECT_EQ(r.rc, 0);
	fsrun_free(&r);
	EXPECT(lstat(P("klink"), &st) < 0 && file_is(P("keep/precious"), "p"));

	/* Deeper than any fd limit would allow if each level held one. */
	mkdir(P("deep"), 0755);
	snprintf(deep, sizeof(deep), "%s", P("deep"));
	EXPECT_EQ(chdir(deep), 0);
	for (i = 0; i < 1500; i++) {
		if (mkdir("d", 0755) < 0 || chdir("d") < 0)
			break;
	}
	EXPECT_EQ(i, 1500);
	put_file("leaf", "l", 1, 0644);
	EXPECT_EQ(chdir("/"), 0);
	FSRUN(&r, NULL, 0, "remove", (char *)P("deep"), "-r");
	EXPECT_EQ(r.rc, 0);
	if (r.rc)
		NOTE("%s", r.err);
	fsrun_free(&r);
	EXPECT(lstat(P("deep"), &st) < 0);

	FSRUN(&r, NULL, 0, "remove", "/", "-r");
	EXPECT(fs_failed_with(&r, EBUSY, "EBUSY"));
	fsrun_free(&r);
}

static void rename_ops(void)
{
	struct fsrun r;

	put_file(P("ra"), "A", 1, 0644);
	put_file(P("rb"), "B", 1, 0644);
	FSRUN(&r, NULL, 0, "rename", (char *)P("ra"), (char *)P("rb"), "-n");
	EXPECT(fs_failed_with(&r, EEXIST, "EEXIST"));
	fsrun_free(&r);
	EXPECT(file_is(P("ra"), "A") && file_is(P("rb"), "B"));
	FSRUN(&r, NULL, 0, "rename", (char *)P("ra"), (char *)P("rc"), "-n");
	EXPECT(r.rc == 0 && strcmp(jstr(r.head, "from"), P("ra")) == 0 &&
	       strcmp(jstr(r.head, "to"), P("rc")) == 0);
	fsrun_free(&r);
	EXPECT(file_is(P("rc"), "A"));
	FSRUN(&r, NULL, 0, "rename", (char *)P("rc"), (char *)P("rb"));
	EXPECT_EQ(r.rc, 0);
	fsrun_free(&r);
	EXPECT(file_is(P("rb"), "A") && access(P("rc"), F_OK) < 0);
	FSRUN(&r, NULL, 0, "rename", (char *)P("nothing"), (char *)P("rd"));
	EXPECT(fs_failed_with(&r, ENOENT, "ENOENT"));
	fsrun_free(&r);
	FSRUN(&r, NULL, 0, "rename", (char *)P("rb"), "relative");
	EXPECT(fs_failed_with(&r, EINVAL, "EINVAL"));
	fsrun_free(&r);
}

int main(void)
{
	fs_tmpdir();
	RUN(read_ranges);
	RUN(read_errors);
	RUN(read_big);
	RUN(write_basic);
	RUN(write_parents_and_errors);
	RUN(write_keeps_owner);
	RUN(write_killed);
	RUN(write_named_ok);
	RUN(list_tree);
	RUN(list_names_from_files);
	RUN(stat_entries);
	RUN(odd_names);
	RUN(json_escaping);
	RUN(mkdir_ops);
	RUN(remove_ops);
	RUN(rename_ops);
	return DONE();
}
