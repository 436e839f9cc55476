/* test_cli_ls.c -- `spacectl ls ID:PATH`'s output: names below the listed
 * path, permissions, the -l table's columns, links, hostile names */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/lsfmt.h"
#include "harness.h"

static char *render(const char *json, const char *base, bool long_fmt)
{
	json_t *entries = json_loads(json, 0, NULL);
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	if (!entries || ls_print(f, entries, base, long_fmt) < 0)
		fprintf(f, "(error)");
	fclose(f);
	json_decref(entries);
	return out;
}

static bool same(char *got, const char *want)
{
	bool ok = strcmp(got, want) == 0;

	if (!ok)
		NOTE("got:\n%s\nwant:\n%s", got, want);
	free(got);
	return ok;
}

#define ENTRIES                                                                                     \
	"[{\"name\":\"a.txt\",\"path\":\"/home/user/a.txt\",\"type\":\"file\",\"size\":6,"      \
	"\"mode\":420,\"permissions\":\"-rw-r--r--\",\"owner\":\"user\",\"group\":\"user\","  \
	"\"mtime\":1733050000.5},"                                                            \
	"{\"name\":\"bin\",\"path\":\"/home/user/bin\",\"type\":\"dir\",\"size\":4096,"       \
	"\"mode\":493,\"permissions\":\"drwxr-xr-x\",\"owner\":\"root\",\"group\":\"staff\"," \
	"\"mtime\":1733000000},"                                                              \
	"{\"name\":\"tool\",\"path\":\"/home/user/bin/tool\",\"type\":\"symlink\",\"size\":12," \
	"\"mode\":511,\"permissions\":\"lrwxrwxrwx\",\"owner\":\"1234\",\"group\":\"user\","  \
	"\"mtime\":1733000000,\"symlink_target\":\"/usr/bin/tool\"}]"

static void test_names(void)
{
	CHECK(same(render(ENTRIES, "/home/user", false), "a.txt\nbin\nbin/tool\n"),
	      "names below the listed path");
	CHECK(same(render(ENTRIES, "/home/user/", false), "a.txt\nbin\nbin/tool\n"),
	      "a trailing slash on the path changes nothing");
	CHECK(same(render(ENTRIES, "/", false), "home/user/a.txt\nhome/user/bin\nhome/user/bin/tool\n"),
	      "below /");
	CHECK(same(render(ENTRIES, "/elsewhere", false), "a.txt\nbin\ntool\n"),
	      "paths not below it: the name");
	CHECK(same(render("[{\"name\":\"evil\\nname\\u001b[31m\"}]", "/", false), "evil?name?[31m\n"),
	      "control characters in a name are shown as '?'");
	CHECK(same(render("{}", "/", false), "(error)"), "not a list: an error");
}

static void test_long(void)
{
	CHECK(same(render(ENTRIES, "/home/user", true),
		   "-rw-r--r--  user  user      6  2024-12-01 10:46  a.txt\n"
		   "drwxr-xr-x  root  staff  4096  2024-11-30 20:53  bin\n"
		   "lrwxrwxrwx  1234  user     12  2024-11-30 20:53  bin/tool -> /usr/bin/tool\n"),
	      "ls -l columns: permissions, owner, group, size, mtime (UTC here), name -> target");
}

static void test_permissions(void)
{
	char p[11];
	json_t *e = json_pack("{s:s,s:i}", "type", "file", "mode", 04755);

	ls_permissions(e, p);
	CHECK(strcmp(p, "-rwsr-xr-x") == 0, "from the mode when the entry has no permissions: %s", p);
	json_decref(e);
	e = json_pack("{s:s,s:i}", "type", "dir", "mode", 01777);
	ls_permissions(e, p);
	CHECK(strcmp(p, "drwxrwxrwt") == 0, "sticky: %s", p);
	json_decref(e);
	e = json_pack("{s:s,s:i}", "type", "symlink", "mode", 02640);
	ls_permissions(e, p);
	CHECK(strcmp(p, "lrw-r-S---") == 0, "setgid without x: %s", p);
	json_decref(e);
}

int main(void)
{
	setenv("TZ", "UTC", 1);
	tzset();
	RUN(test_names);
	RUN(test_long);
	RUN(test_permissions);
	return DONE();
}
