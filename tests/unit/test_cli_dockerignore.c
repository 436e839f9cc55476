/* test_cli_dockerignore.c -- .dockerignore patterns with Docker's semantics: comments and
 * blanks, trimming, cleaning (a leading '/', "./", a trailing '/'), parent directories, '*'
 * and '?' within a component, classes, escapes, "**" at the front, middle and end, '!'
 * exceptions and their order, whether a walk must go into an excluded directory, and bad
 * patterns refused with their line */
#include <string.h>

#include "cli/dockerignore.h"
#include "harness.h"

static struct dockerignore *load(const char *text)
{
	struct dockerignore *di = dockerignore_new();
	space_err e = { 0 };

	if (!di || dockerignore_parse(di, ".dockerignore", text, strlen(text), &e) < 0) {
		NOTE("parse failed: %s", e.msg);
		dockerignore_free(di);
		return NULL;
	}
	return di;
}

/* Each path of `yes` excluded, each of `no` not. */
static void expect(const char *text, const char *const *yes, const char *const *no)
{
	struct dockerignore *di = load(text);
	size_t i;

	EXPECT(di != NULL);
	if (!di)
		return;
	for (i = 0; yes && yes[i]; i++)
		if (!dockerignore_excluded(di, yes[i])) {
			NOTE("%s: should be excluded by %s", yes[i], text);
			EXPECT(0);
		}
	for (i = 0; no && no[i]; i++)
		if (dockerignore_excluded(di, no[i])) {
			NOTE("%s: should not be excluded by %s", no[i], text);
			EXPECT(0);
		}
	dockerignore_free(di);
}

#define L(...) ((const char *const[]){ __VA_ARGS__, NULL })

static void test_comments_blanks_trim(void)
{
	struct dockerignore *di = load("# a comment\n\n   \n  build  \r\n#x\n \t*.o\t\n");

	EXPECT(di != NULL);
	if (!di)
		return;
	EXPECT_EQ(dockerignore_count(di), 2);
	EXPECT(dockerignore_excluded(di, "build"));
	EXPECT(dockerignore_excluded(di, "x.o"));
	EXPECT(!dockerignore_excluded(di, "#x"));
	EXPECT(!dockerignore_excluded(di, "# a comment"));
	dockerignore_free(di);
	/* Only a '#' in column 1 makes a comment (Docker): " #x" is the pattern "#x". */
	expect(" #x\n", L("#x"), L("x"));
}

static void test_cleaning(void)
{
	expect("/build\n", L("build", "build/out.o"), L("src/build"));
	expect("./docs/\n", L("docs", "docs/a.md"), L("src/docs"));
	expect("a//b/../c\n", L("a/c", "a/c/d"), L("a/b", "a/b/c"));
	expect("\xef\xbb\xbf" "bom\n", L("bom"), NULL);
}

static void test_parents(void)
{
	expect("node_modules\n", L("node_modules", "node_modules/x/y.js"),
	       L("src/node_modules", "node_modules2"));
	expect("a/b\n", L("a/b", "a/b/c"), L("a", "a/bc", "x/a/b"));
}

static void test_wildcards(void)
{
	expect("*.log\n", L("a.log", ".log", "x.log/inner"), L("d/a.log", "a.logx"));
	expect("*/*.tmp\n", L("d/a.tmp"), L("a.tmp", "d/e/a.tmp"));
	expect("file?.txt\n", L("file1.txt", "file\xc3\xa9.txt"), L("file.txt", "file12.txt",
									  "file/.txt"));
	expect("[a-c]*.c\n", L("a.c", "beta.c"), L("d.c", "A.c"));
	expect("[^a-c]*.c\n", L("d.c"), L("a.c"));
	expect("lit\\*\n", L("lit*"), L("lit", "litx"));
	expect("[\\]]x\n", L("]x"), L("x"));
}

static void test_double_star(void)
{
	expect("**/*.log\n", L("a.log", "d/a.log", "d/e/f.log"), L("a.txt"));
	expect("**/cache\n", L("cache", "x/cache", "x/y/cache/z"), L("xcache", "cache2"));
	expect("a/**/b\n", L("a/b", "a/x/b", "a/x/y/b", "a/x/b/c"), L("b", "a/xb", "x/a/b"));
	expect("a/**\n", L("a/x", "a/x/y"), L("a", "ab"));
	expect("**\n", L("a", "a/b"), NULL);
}

/* Many '*' against a long name that almost matches: polynomial, not exponential. */
static void test_many_stars(void)
{
	char name[201];
	struct dockerignore *di = load("*a*a*a*a*a*a*a*a*a*a*a*a*b\n**/*a*a*a*a*a*a*a*a*a*c\n");

	memset(name, 'a', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	EXPECT(di != NULL);
	if (!di)
		return;
	EXPECT(!dockerignore_excluded(di, name));
	name[sizeof(name) - 2] = 'b';
	EXPECT(dockerignore_excluded(di, name));
	name[sizeof(name) - 2] = 'c';
	EXPECT(dockerignore_excluded(di, name));
	dockerignore_free(di);
}

static void test_exceptions(void)
{
	expect("*.md\n!README.md\n", L("a.md"), L("README.md", "x.txt"));
	/* The last match decides: an exception before the exclusion brings nothing back. */
	expect("!README.md\n*.md\n", L("README.md", "a.md"), NULL);
	/* Excluded again after an exception. */
	expect("*.md\n!*.md\nsecret.md\n", L("secret.md"), L("a.md"));
	/* An exception under an excluded directory. */
	expect("docs\n!docs/keep\n", L("docs", "docs/other"), L("docs/keep", "docs/keep/a"));
	expect("**/*.log\n!important/*.log\n", L("a.log", "x/important/a.log"),
	       L("important/a.log"));
	/* Whitespace after '!' is dropped like any other. */
	expect("*.md\n! README.md\n", L("a.md"), L("README.md"));
}

static void test_may_include_under(void)
{
	struct dockerignore *di = load("docs\n!docs/keep/*.md\nvendor\n!**/LICENSE\nbuild\n");

	EXPECT(di != NULL);
	if (!di)
		return;
	EXPECT(dockerignore_may_include_under(di, "docs"));
	EXPECT(dockerignore_may_include_under(di, "docs/keep"));
	EXPECT(dockerignore_may_include_under(di, "vendor")); /* **: anywhere */
	EXPECT(dockerignore_may_include_under(di, "build"));
	dockerignore_free(di);

	di = load("docs\n!docs/keep\nbuild\n");
	EXPECT(di != NULL);
	if (!di)
		return;
	EXPECT(dockerignore_may_include_under(di, "docs"));
	EXPECT(!dockerignore_may_include_under(di, "build"));
	EXPECT(!dockerignore_may_include_under(di, "docsx"));
	dockerignore_free(di);

	di = load("a\n!a/b*/c\n");
	EXPECT(di != NULL);
	if (!di)
		return;
	EXPECT(dockerignore_may_include_under(di, "a"));
	EXPECT(dockerignore_may_include_under(di, "a/bee"));
	EXPECT(!dockerignore_may_include_under(di, "a/x"));
	dockerignore_free(di);
}

static void test_added_exceptions(void)
{
	/* The verb adds these so that the Dockerfile and .dockerignore are always sent. */
	struct dockerignore *di = load("*\n");
	space_err e = { 0 };

	EXPECT(di != NULL);
	if (!di)
		return;
	EXPECT(dockerignore_excluded(di, "Dockerfile"));
	EXPECT_EQ(dockerignore_add(di, "!.dockerignore", &e), 0);
	EXPECT_EQ(dockerignore_add(di, "!build/Dockerfile", &e), 0);
	EXPECT(!dockerignore_excluded(di, ".dockerignore"));
	EXPECT(!dockerignore_excluded(di, "build/Dockerfile"));
	EXPECT(dockerignore_excluded(di, "build"));
	EXPECT(dockerignore_excluded(di, "build/other"));
	EXPECT(dockerignore_may_include_under(di, "build"));
	EXPECT(!dockerignore_may_include_under(di, "src"));
	dockerignore_free(di);
}

static void test_bad_patterns(void)
{
	struct dockerignore *di = dockerignore_new();
	const char *good = "[a-z0-9]\n[^x]\n[\\-]\n";
	const char *bad[] = { "ok\n\n[abc\n", "ok\n!\n", "a\\", "[]a]", "[a-]", "[-a]" };
	const char *where[] = { ".dockerignore:3: ", ".dockerignore:2: ", ".dockerignore:1: ",
				".dockerignore:1: ", ".dockerignore:1: ", ".dockerignore:1: " };
	space_err e = { 0 };
	size_t i;

	if (!CHECK(di != NULL, "dockerignore_new"))
		return;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = dockerignore_parse(di, ".dockerignore", bad[i], strlen(bad[i]), &e);

		CHECK(rc < 0 && strncmp(e.msg, where[i], strlen(where[i])) == 0 &&
			      dockerignore_count(di) == 0,
		      "bad pattern %zu refused with its line: %s", i, rc < 0 ? e.msg : "(accepted)");
	}
	/* Classes that are fine. */
	CHECK(dockerignore_parse(di, ".dockerignore", good, strlen(good), &e) == 0 &&
		      dockerignore_count(di) == 3,
	      "well-formed classes accepted");
	dockerignore_free(di);
}

static void test_clean(void)
{
	static const char *const cases[][2] = {
		{ "", "." },	      { ".", "." },	       { "./", "." },
		{ "a/", "a" },	      { "/", "/" },	       { "//a//b//", "/a/b" },
		{ "a/./b", "a/b" },   { "a/../b", "b" },       { "a/..", "." },
		{ "../a", "../a" },   { "a/../../b", "../b" }, { "/../a", "/a" },
		{ "/a/b/../..", "/" }, { "x/y/../z/.", "x/z" },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *c = dockerignore_clean(cases[i][0]);

		if (!c || strcmp(c, cases[i][1]) != 0) {
			NOTE("clean(%s) = %s, expected %s", cases[i][0], c ? c : "(null)", cases[i][1]);
			EXPECT(0);
		}
		free(c);
	}
	EXPECT(1);
}

int main(void)
{
	RUN(test_comments_blanks_trim);
	RUN(test_cleaning);
	RUN(test_parents);
	RUN(test_wildcards);
	RUN(test_double_star);
	RUN(test_many_stars);
	RUN(test_exceptions);
	RUN(test_may_include_under);
	RUN(test_added_exceptions);
	RUN(test_bad_patterns);
	RUN(test_clean);
	return DONE();
}
