/* test_cli_cp.c -- spacectl cp's decisions without I/O: which argument is
 * ID:PATH, path pieces, docker cp's destination rules as a table, the
 * progress line, and API errors shown as their message alone */
#include <errno.h>
#include <string.h>

#include "cli/client.h"
#include "cli/cp.h"
#include "cli/progress.h"
#include "harness.h"

static bool remote_is(const char *arg, int want, const char *id, const char *path)
{
	char *i = NULL, *p = NULL;
	space_err e = { 0 };
	int rc = cp_parse_remote(arg, &i, &p, &e);
	bool ok = rc == want && (rc != 1 || (strcmp(i, id) == 0 && strcmp(p, path) == 0));

	if (!ok)
		NOTE("%s: rc %d id %s path %s (%s)", arg, rc, i ? i : "-", p ? p : "-", e.msg);
	free(i);
	free(p);
	return ok;
}

static void test_parse_remote(void)
{
	CHECK(remote_is("sb-0123:/home/user", 1, "sb-0123", "/home/user"), "ID:/PATH");
	CHECK(remote_is("sb-1:/", 1, "sb-1", "/"), "ID:/");
	CHECK(remote_is("sb-1:/a:b", 1, "sb-1", "/a:b"), "a colon in the path");
	CHECK(remote_is("./a:b", 0, NULL, NULL), "./a:b is local (a '/' before the ':')");
	CHECK(remote_is("/tmp/a:b", 0, NULL, NULL), "an absolute local path with a colon");
	CHECK(remote_is("file.txt", 0, NULL, NULL), "no colon: local");
	CHECK(remote_is("-", 0, NULL, NULL), "'-' is local (a stream)");
	CHECK(remote_is(":/x", -1, NULL, NULL), "no id before the colon");
	CHECK(remote_is("sb-1:rel", -1, NULL, NULL), "a relative sandbox path");
	CHECK(remote_is("sb-1:", -1, NULL, NULL), "an empty sandbox path");
}

static bool str_is(char *got, const char *want)
{
	bool ok = got && strcmp(got, want) == 0;

	if (!ok)
		NOTE("got '%s', want '%s'", got ? got : "(null)", want);
	free(got);
	return ok;
}

static void test_paths(void)
{
	EXPECT(str_is(cp_base("a/b"), "b"));
	EXPECT(str_is(cp_base("a/b/"), "b"));
	EXPECT(str_is(cp_base("/a//b//"), "b"));
	EXPECT(str_is(cp_base("b"), "b"));
	EXPECT(str_is(cp_base("/"), "/"));
	EXPECT(str_is(cp_base("//"), "/"));
	EXPECT(str_is(cp_base(""), "."));
	EXPECT(str_is(cp_base("dir/."), "."));
	EXPECT(str_is(cp_dir("a/b"), "a"));
	EXPECT(str_is(cp_dir("a/b/"), "a"));
	EXPECT(str_is(cp_dir("a//b"), "a"));
	EXPECT(str_is(cp_dir("/a/b"), "/a"));
	EXPECT(str_is(cp_dir("/b"), "/"));
	EXPECT(str_is(cp_dir("//b"), "/"));
	EXPECT(str_is(cp_dir("b"), "."));
	EXPECT(str_is(cp_dir("/"), "/"));
	EXPECT(str_is(cp_join("/", "x"), "/x"));
	EXPECT(str_is(cp_join("/a", "x"), "/a/x"));
	EXPECT(str_is(cp_join("/a/", "x"), "/a/x"));
	EXPECT(str_is(cp_join(".", "x"), "./x"));
	EXPECT(str_is(cp_clean("/a/b/./"), "/a/b"));
	EXPECT(str_is(cp_clean("/a/b/"), "/a/b"));
	EXPECT(str_is(cp_clean("/."), "/"));
	EXPECT(str_is(cp_clean("/"), "/"));
	EXPECT(str_is(cp_clean("/a/.."), "/a/.."));
	EXPECT(cp_trailing_slash("a/") && !cp_trailing_slash("a") && !cp_trailing_slash("/"));
	EXPECT(cp_names_contents("dir/.") && cp_names_contents(".") && cp_names_contents("d/./") &&
	       !cp_names_contents("dir") && !cp_names_contents("a.") && !cp_names_contents("/"));
	EXPECT(cp_kind_of_type("file") == CP_FILE && cp_kind_of_type("dir") == CP_DIR &&
	       cp_kind_of_type("symlink") == CP_SYMLINK && cp_kind_of_type("other") == CP_OTHER &&
	       cp_kind_of_type(NULL) == CP_OTHER);
}

/* One rule: (src, its kind, dst, its kind) -> dir + name, or an error
 * whose code is err. */
struct rule {
	const char *what;
	const char *src;
	enum cp_kind sk;
	const char *dst;
	enum cp_kind dk;
	const char *dir;  /* NULL: an error */
	const char *name; /* NULL: the contents */
	int err;
};

static const struct rule rules[] = {
	/* a file */
	{ "file into an existing dir", "/x/a.txt", CP_FILE, "/d", CP_DIR, "/d", "a.txt", 0 },
	{ "file into an existing dir/", "/x/a.txt", CP_FILE, "/d/", CP_DIR, "/d/", "a.txt", 0 },
	{ "file to a new name", "/x/a.txt", CP_FILE, "/d/new.txt", CP_MISSING, "/d", "new.txt", 0 },
	{ "file to a relative new name", "a.txt", CP_FILE, "new.txt", CP_MISSING, ".", "new.txt", 0 },
	{ "file over an existing file", "a.txt", CP_FILE, "/d/old", CP_FILE, "/d", "old", 0 },
	{ "file to a missing dir/", "a.txt", CP_FILE, "/nodir/", CP_MISSING, NULL, NULL, ENOENT },
	{ "file to file/", "a.txt", CP_FILE, "/d/old/", CP_FILE, NULL, NULL, ENOTDIR },
	{ "file with a trailing slash", "a.txt/", CP_FILE, "/d", CP_DIR, NULL, NULL, ENOTDIR },
	{ "file/. ", "a.txt/.", CP_FILE, "/d", CP_DIR, NULL, NULL, ENOTDIR },
	{ "file over a FIFO", "a.txt", CP_FILE, "/d/fifo", CP_OTHER, NULL, NULL, EINVAL },
	{ "file to . (a dir)", "/x/a.txt", CP_FILE, ".", CP_DIR, ".", "a.txt", 0 },
	/* a link is copied as a link, placed as a file would be */
	{ "link into a dir", "/x/l", CP_SYMLINK, "/d", CP_DIR, "/d", "l", 0 },
	{ "link to a new name", "/x/l", CP_SYMLINK, "/d/m", CP_MISSING, "/d", "m", 0 },
	{ "link/", "/x/l/", CP_SYMLINK, "/d", CP_DIR, NULL, NULL, ENOTDIR },
	/* a directory */
	{ "dir into an existing dir", "/x/proj", CP_DIR, "/d", CP_DIR, "/d", "proj", 0 },
	{ "dir/ into an existing dir", "/x/proj/", CP_DIR, "/d", CP_DIR, "/d", "proj", 0 },
	{ "dir/. into an existing dir", "/x/proj/.", CP_DIR, "/d", CP_DIR, "/d", NULL, 0 },
	{ ". into an existing dir", ".", CP_DIR, "/d", CP_DIR, "/d", NULL, 0 },
	{ "dir to a new name", "/x/proj", CP_DIR, "/d/new", CP_MISSING, "/d", "new", 0 },
	{ "dir to a new name/", "/x/proj", CP_DIR, "/d/new/", CP_MISSING, "/d", "new", 0 },
	{ "dir/. to a new name", "/x/proj/.", CP_DIR, "/d/new", CP_MISSING, "/d", "new", 0 },
	{ "dir onto a file", "/x/proj", CP_DIR, "/d/f", CP_FILE, NULL, NULL, ENOTDIR },
	{ "dir onto a FIFO", "/x/proj", CP_DIR, "/d/f", CP_OTHER, NULL, NULL, ENOTDIR },
	{ "the root goes as its contents", "/", CP_DIR, "/d", CP_DIR, "/d", NULL, 0 },
	{ ".. has no name to take", "..", CP_DIR, "/d", CP_DIR, NULL, NULL, EINVAL },
	{ ".. to a new name", "..", CP_DIR, "/d/new", CP_MISSING, "/d", "new", 0 },
	{ "dir to new/.", "/x/proj", CP_DIR, "/d/new/.", CP_MISSING, NULL, NULL, ENOENT },
	/* sources that cannot be copied */
	{ "missing source", "/x/nope", CP_MISSING, "/d", CP_DIR, NULL, NULL, ENOENT },
	{ "a FIFO source", "/x/fifo", CP_OTHER, "/d", CP_DIR, NULL, NULL, EINVAL },
	/* a dangling link as destination is replaced */
	{ "file onto a dangling link", "a", CP_FILE, "/d/l", CP_SYMLINK, "/d", "l", 0 },
};

static void test_plan(void)
{
	size_t i;

	for (i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
		const struct rule *r = &rules[i];
		struct cp_plan p;
		space_err e = { 0 };
		int rc = cp_plan_make(r->src, r->sk, r->dst, r->dk, &p, &e);
		bool ok;

		if (!r->dir)
			ok = rc < 0 && e.code == r->err && !p.dir && !p.name;
		else
			ok = rc == 0 && strcmp(p.dir, r->dir) == 0 &&
			     (r->name ? p.name && strcmp(p.name, r->name) == 0 : !p.name);
		if (!ok)
			NOTE("rc %d dir %s name %s err %d %s", rc, p.dir ? p.dir : "-",
			     p.name ? p.name : "-", e.code, e.msg);
		CHECK(ok, "%s: %s -> %s%s%s", r->what, r->src, r->dst, r->dir ? "" : ": ",
		      r->dir ? "" : e.msg);
		cp_plan_free(&p);
	}
}

static void test_progress(void)
{
	char b[128];

	progress_format(b, sizeof(b), 1536, 20 << 20, 0.1);
	CHECK(strcmp(b, "1.5 KiB / 20.0 MiB  0%") == 0, "no rate in the first 0.2 s: '%s'", b);
	progress_format(b, sizeof(b), 10 << 20, 20 << 20, 2.0);
	CHECK(strcmp(b, "10.0 MiB / 20.0 MiB  50%  5.0 MiB/s") == 0, "done / total  %%  rate: '%s'",
	      b);
	progress_format(b, sizeof(b), 3 << 20, -1, 1.0);
	CHECK(strcmp(b, "3.0 MiB  3.0 MiB/s") == 0, "an unknown total: '%s'", b);
	progress_format(b, sizeof(b), 0, 0, 1.0);
	CHECK(strcmp(b, "0 B / 0 B  100%  0 B/s") == 0, "an empty file is done: '%s'", b);
	progress_format(b, sizeof(b), 200, 100, 1.0);
	CHECK(strstr(b, "100%") != NULL, "never past 100%%: '%s'", b);
}

static void test_brief_errors(void)
{
	const char *body = "{\"error\":{\"code\":\"not_found\",\"message\":\"stat /x: No such file or directory\"}}";
	struct http_resp rs = { .status = 404, .body = (char *)body, .len = strlen(body) };
	space_err e = { 0 };

	CHECK(http_error_brief(&rs, &e) == -1 && strcmp(e.msg, "stat /x: No such file or directory") == 0 &&
		      e.code == ENOENT,
	      "an API error: its message alone, its code as an errno");
	body = "{\"error\":{\"code\":\"not_a_directory\",\"message\":\"list /f: Not a directory\"}}";
	rs.body = (char *)body;
	rs.len = strlen(body);
	rs.status = 400;
	CHECK(http_error_brief(&rs, &e) == -1 && e.code == ENOTDIR, "not_a_directory -> ENOTDIR");
	body = "<html>oops</html>";
	rs.body = (char *)body;
	rs.len = strlen(body);
	rs.status = 502;
	CHECK(http_error_brief(&rs, &e) == -1 &&
		      strcmp(e.msg, "unexpected HTTP 502 response: <html>oops</html>") == 0,
	      "anything else as http_error says it");
	rs.status = 413;
	CHECK(http_error_brief(&rs, &e) == -1 && e.code == E2BIG && strstr(e.msg, "too large") == NULL &&
		      strstr(e.msg, "HTTP 413") != NULL,
	      "libevent's 413 page in words: %s", e.msg);
}

int main(void)
{
	RUN(test_parse_remote);
	RUN(test_paths);
	RUN(test_plan);
	RUN(test_progress);
	RUN(test_brief_errors);
	return DONE();
}
