/* test_build_recipe.c -- a template build's request (build/recipe.c) and build contexts
 * (build/context.c): what is refused and why, canonical steps, state and keys; a context tar's
 * checks, its manifest's hashes and what a copy picks. */
#include <archive.h>
#include <archive_entry.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "build/context.h"
#include "build/recipe.h"
#include "harness.h"

static int parse(const char *text, struct recipe *r, space_err *err)
{
	json_error_t jerr;
	json_t *j = json_loads(text, 0, &jerr);
	int rc;

	memset(err, 0, sizeof(*err));
	if (!j) {
		printf("# bad test JSON: %s\n", jerr.text);
		return -2;
	}
	rc = recipe_parse(j, r, err);
	json_decref(j);
	return rc;
}

#define CTX "\"context\": \"sha256:" "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\""

static void test_full(void)
{
	struct recipe r;
	space_err err;
	struct recipe_state st;

	EXPECT(parse("{\"name\": \"myenv\", \"tags\": [\"v1\", \"latest\"], \"from\": \"base\", " CTX ","
		     " \"steps\": [{\"run\": \"apt-get install -y jq\"}, {\"copy\": {\"src\": \"./app/\", \"dest\": \"opt/app\"}},"
		     " {\"env\": {\"MODE\": \"prod\"}}, {\"workdir\": \"/opt/app\"}, {\"workdir\": \"sub\"}, {\"user\": \"user\"},"
		     " {\"run\": [\"python3\", \"-V\"]}],"
		     " \"start\": {\"cmd\": \"python3 -m http.server 8000\", \"ready\": \"curl -sf localhost:8000\"},"
		     " \"vcpus\": 1, \"memory_mib\": 512, \"network\": {\"allow\": [\"deb.debian.org\"]}}",
		     &r, &err) == 0);
	EXPECT(strcmp(r.name, "myenv") == 0);
	EXPECT_EQ(json_array_size(r.tags), 2);
	EXPECT(strcmp(json_string_value(json_array_get(r.tags, 0)), "myenv:v1") == 0);
	EXPECT(strcmp(r.from_ref, "base") == 0 && !r.from_image[0]);
	EXPECT_EQ(r.nsteps, 7);
	EXPECT(r.steps[0].kind == STEP_RUN && strcmp(r.steps[0].shell, "apt-get install -y jq") == 0);
	EXPECT(strcmp(r.steps[0].text, "RUN apt-get install -y jq") == 0);
	EXPECT(r.steps[1].kind == STEP_COPY && strcmp(r.steps[1].src, "app") == 0);
	EXPECT(strcmp(r.steps[1].dest, "opt/app") == 0);
	EXPECT(r.steps[6].argv && json_array_size(r.steps[6].argv) == 2);
	EXPECT(recipe_step_has_layer(&r.steps[0]) && recipe_step_has_layer(&r.steps[1]));
	EXPECT(!recipe_step_has_layer(&r.steps[2]) && !recipe_step_has_layer(&r.steps[5]));
	EXPECT(json_is_object(r.start) && json_integer_value(json_object_get(r.start, "timeout_s")) == 60);
	EXPECT(json_is_object(r.network));
	/* the state each step runs in */
	json_t *base = json_pack("{s:s}", "PATH", "/bin");
	EXPECT(recipe_state_at(&r, 2, base, "", "", &st, &err) == 0);
	EXPECT(strcmp(st.workdir, "/") == 0 && strcmp(st.user, "root") == 0);
	EXPECT(json_object_get(st.env, "MODE") == NULL);
	recipe_state_free(&st);
	EXPECT(recipe_state_at(&r, r.nsteps, base, "", "", &st, &err) == 0);
	EXPECT(strcmp(st.workdir, "/opt/app/sub") == 0);
	EXPECT(strcmp(st.user, "user") == 0);
	EXPECT(strcmp(json_string_value(json_object_get(st.env, "MODE")), "prod") == 0);
	EXPECT(strcmp(json_string_value(json_object_get(st.env, "PATH")), "/bin") == 0);
	recipe_state_free(&st);
	json_decref(base);
	recipe_free(&r);
}

static void test_defaults(void)
{
	struct recipe r;
	space_err err;

	EXPECT(parse("{\"name\": \"a\", \"from\": {\"image\": \"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"}}",
		     &r, &err) == 0);
	EXPECT(strcmp(json_string_value(json_array_get(r.tags, 0)), "a:latest") == 0);
	EXPECT(r.from_image[0] && !r.from_ref[0]);
	EXPECT_EQ(r.nsteps, 0);
	recipe_free(&r);
}

static void refused(const char *body, const char *want)
{
	struct recipe r;
	space_err err;
	int rc = parse(body, &r, &err);

	if (!CHECK(rc == -1 && err.code == EINVAL && strstr(err.msg, want), "refused (%s): %s", want, err.msg))
		printf("# body: %s\n", body);
	recipe_free(&r);
}

static void test_refusals(void)
{
	refused("{\"name\": \"My\", \"from\": \"base\"}", "name:");
	refused("{\"name\": \"a\"}", "from");
	refused("{\"name\": \"a\", \"from\": \"base\", \"bogus\": 1}", "bogus");
	refused("{\"name\": \"a\", \"from\": \"base\", \"tags\": [\".x\"]}", "tags[0]");
	refused("{\"name\": \"a\", \"from\": \"base\", \"tags\": []}", "tags:");
	refused("{\"name\": \"a\", \"from\": {\"image\": \"sha256:12\"}}", "from.image");
	refused("{\"name\": \"a\", \"from\": \"base\", \"steps\": [{\"copy\": {\"src\": \"a\", \"dest\": \"/b\"}}]}",
		"needs a context");
	refused("{\"name\": \"a\", \"from\": \"base\", " CTX ", \"steps\": [{\"copy\": {\"src\": \"../x\", \"dest\": \"/b\"}}]}",
		"steps[0].copy.src");
	refused("{\"name\": \"a\", \"from\": \"base\", " CTX ", \"steps\": [{\"copy\": {\"src\": \"a/../../x\", \"dest\": \"/b\"}}]}",
		"steps[0].copy.src");
	refused("{\"name\": \"a\", \"from\": \"base\", " CTX ", \"steps\": [{\"copy\": {\"src\": \"a\", \"dest\": \"/b/../c\"}}]}",
		"steps[0].copy.dest");
	refused("{\"name\": \"a\", \"from\": \"base\", " CTX ", \"steps\": [{\"copy\": {\"src\": \"a\", \"dest\": \"/b\", \"chown\": \"a b\"}}]}",
		"chown");
	refused("{\"name\": \"a\", \"from\": \"base\", \"steps\": [{\"run\": \"\"}]}", "steps[0].run");
	refused("{\"name\": \"a\", \"from\": \"base\", \"steps\": [{\"run\": []}]}", "steps[0].run");
	refused("{\"name\": \"a\", \"from\": \"base\", \"steps\": [{\"run\": \"x\"}, {\"nope\": 1}]}", "steps[1]: unknown step");
	refused("{\"name\": \"a\", \"from\": \"base\", \"steps\": [{\"run\": \"x\", \"env\": {}}]}", "one key");
	refused("{\"name\": \"a\", \"from\": \"base\", \"steps\": [{\"user\": \"bad user\"}]}", "steps[0].user");
	refused("{\"name\": \"a\", \"from\": \"base\", \"steps\": [{\"env\": {\"A\": 1}}]}", "steps[0].env");
	refused("{\"name\": \"a\", \"from\": \"base\", \"vcpus\": 99}", "vcpus");
	refused("{\"name\": \"a\", \"from\": \"base\", \"memory_mib\": 1}", "memory_mib");
	refused("{\"name\": \"a\", \"from\": \"base\", \"start\": {\"cmd\": \"\"}}", "start");
	refused("{\"name\": \"a\", \"from\": \"base\", \"start\": {\"cmd\": \"x\", \"timeout_s\": 0}}", "timeout_s");
	refused("{\"name\": \"a\", \"from\": \"base\", \"expose\": [70000]}", "expose[0]");
	refused("{\"name\": \"a\", \"from\": \"base\", \"network\": []}", "network");
}

static void test_keys(void)
{
	struct recipe a, b;
	space_err err;
	char k1[65], k2[65], k3[65];

	EXPECT(parse("{\"name\": \"a\", \"from\": \"base\", \"steps\": [{\"run\": \"echo 1\"}, {\"run\": \"echo 2\"}]}", &a,
		     &err) == 0);
	EXPECT(parse("{\"name\": \"b\", \"from\": \"base\", \"steps\": [{\"run\": \"echo 1\"}, {\"run\": \"echo 3\"}]}", &b,
		     &err) == 0);
	recipe_step_key("sha256:p", &a.steps[0], "", k1);
	recipe_step_key("sha256:p", &b.steps[0], "", k2);
	EXPECT(strlen(k1) == 64 && strcmp(k1, k2) == 0); /* the same prefix: the same layer */
	recipe_step_key(k1, &a.steps[1], "", k2);
	recipe_step_key(k1, &b.steps[1], "", k3);
	EXPECT(strcmp(k2, k3) != 0); /* a changed step: another key */
	recipe_step_key("sha256:q", &a.steps[0], "", k3);
	EXPECT(strcmp(k1, k3) != 0); /* another parent: another key */
	recipe_step_key("sha256:p", &a.steps[0], "inputs", k3);
	EXPECT(strcmp(k1, k3) != 0); /* other inputs: another key */
	recipe_free(&a);
	recipe_free(&b);
}

static void test_resolve_dest(void)
{
	char out[RECIPE_PATH_MAX];
	space_err err = { 0 };

	EXPECT(recipe_resolve_dest("/x", "/w", out, &err) == 0 && strcmp(out, "/x") == 0);
	EXPECT(recipe_resolve_dest("x/", "/w", out, &err) == 0 && strcmp(out, "/w/x/") == 0);
	EXPECT(recipe_resolve_dest("x", "/", out, &err) == 0 && strcmp(out, "/x") == 0);
	EXPECT(recipe_resolve_dest("x", "", out, &err) == 0 && strcmp(out, "/x") == 0);
}

/* ---- contexts ---- */

struct ent {
	const char *name;
	int type; /* AE_IFREG, AE_IFDIR, AE_IFLNK, AE_IFCHR; hard link: AE_IFREG with link set */
	const char *data, *link;
};

static void write_tar(const char *path, const struct ent *e, size_t n)
{
	struct archive *a = archive_write_new();

	archive_write_set_format_pax_restricted(a);
	archive_write_open_filename(a, path);
	for (size_t i = 0; i < n; i++) {
		struct archive_entry *x = archive_entry_new();

		archive_entry_set_pathname(x, e[i].name);
		archive_entry_set_filetype(x, (unsigned)e[i].type);
		archive_entry_set_perm(x, e[i].type == AE_IFDIR ? 0755 : 0644);
		if (e[i].type == AE_IFLNK)
			archive_entry_set_symlink(x, e[i].link);
		else if (e[i].link)
			archive_entry_set_hardlink(x, e[i].link);
		archive_entry_set_size(x, e[i].data && !e[i].link ? (la_int64_t)strlen(e[i].data) : 0);
		archive_write_header(a, x);
		if (e[i].data && !e[i].link)
			archive_write_data(a, e[i].data, strlen(e[i].data));
		archive_entry_free(x);
	}
	archive_write_close(a);
	archive_write_free(a);
}

/* Uploads the tar at path into dir through the upload API, in two pieces. */
static int upload(const char *dir, const char *path, uint64_t max, char digest[72], space_err *err)
{
	FILE *f = fopen(path, "rb");
	static char buf[1 << 20];
	size_t n = f ? fread(buf, 1, sizeof(buf), f) : 0;
	struct context_upload *u;
	uint64_t bytes;

	if (f)
		fclose(f);
	memset(err, 0, sizeof(*err));
	if (!(u = context_upload_begin(dir, max, err)))
		return -1;
	if (context_upload_write(u, buf, n / 2, err) < 0 || context_upload_write(u, buf + n / 2, n - n / 2, err) < 0) {
		context_upload_abort(u);
		return -1;
	}
	return context_upload_finish(u, digest, &bytes, err);
}

static int count_files(const char *dir)
{
	char cmd[512];
	FILE *p;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "ls -A %s | wc -l", dir);
	if ((p = popen(cmd, "r"))) {
		if (fscanf(p, "%d", &n) != 1)
			n = -1;
		pclose(p);
	}
	return n;
}

static void test_context(void)
{
	char tmp[] = "/tmp/test-ctx-XXXXXX", dir[256], tar[256], digest[72], in1[65], in2[65], out[256];
	space_err err;
	struct context_pick pick;

	if (!mkdtemp(tmp))
		return;
	snprintf(dir, sizeof(dir), "%s/contexts", tmp);
	snprintf(tar, sizeof(tar), "%s/a.tar", tmp);
	const struct ent good[] = {
		{ "./app/", AE_IFDIR, NULL, NULL },    { "./app/main.py", AE_IFREG, "print(1)\n", NULL },
		{ "app/lib/x.txt", AE_IFREG, "x", NULL }, { "app/link", AE_IFLNK, NULL, "/etc/passwd" },
		{ "app/hard", AE_IFREG, NULL, "app/main.py" }, { "other.txt", AE_IFREG, "o", NULL },
	};
	write_tar(tar, good, 6);
	EXPECT(upload(dir, tar, 1 << 20, digest, &err) == 0);
	EXPECT(strncmp(digest, "sha256:", 7) == 0 && strlen(digest) == 71);
	EXPECT(context_exists(dir, digest, &err) == 0);
	EXPECT(count_files(dir) == 2); /* <hex>.tar and <hex>.json, nothing half-made */
	/* the same bytes again: stored once */
	EXPECT(upload(dir, tar, 1 << 20, digest, &err) == 0);
	EXPECT(count_files(dir) == 2);
	/* inputs: what a copy reads */
	EXPECT(context_inputs(dir, digest, "app", in1, &err) == 0);
	EXPECT(context_inputs(dir, digest, "", in2, &err) == 0);
	EXPECT(strcmp(in1, in2) != 0);
	EXPECT(context_inputs(dir, digest, "nope", in2, &err) == -1 && err.code == ENOENT);
	/* a copy of a directory: its contents, owners 0 */
	snprintf(out, sizeof(out), "%s/pick.tar", tmp);
	EXPECT(context_pick(dir, digest, "app", "/opt/app", -1, -1, out, &pick, &err) == 0);
	EXPECT(strcmp(pick.dir, "/opt/app") == 0 && pick.bytes > 0);
	{
		struct archive *a = archive_read_new();
		struct archive_entry *e;
		char names[512] = "";

		archive_read_support_format_tar(a);
		archive_read_open_filename(a, out, 1 << 16);
		while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
			strcat(names, archive_entry_pathname(e));
			strcat(names, archive_entry_hardlink(e) ? "=h " : " ");
		}
		archive_read_free(a);
		EXPECT(strcmp(names, "main.py lib/x.txt link hard=h ") == 0);
		if (strcmp(names, "main.py lib/x.txt link hard=h ") != 0)
			NOTE("picked: %s", names);
	}
	/* a file to a new name, and into a directory */
	EXPECT(context_pick(dir, digest, "other.txt", "/etc/o.conf", 0, 0, out, &pick, &err) == 0);
	EXPECT(strcmp(pick.dir, "/etc") == 0);
	EXPECT(context_pick(dir, digest, "other.txt", "/srv/", 1000, 1000, out, &pick, &err) == 0);
	EXPECT(strcmp(pick.dir, "/srv") == 0);
	EXPECT(context_pick(dir, digest, "missing", "/srv/", -1, -1, out, &pick, &err) == -1 && err.code == ENOENT);

	/* refused: nothing stored */
	const struct ent dotdot[] = { { "a/../../etc/x", AE_IFREG, "x", NULL } };
	const struct ent abs[] = { { "/etc/x", AE_IFREG, "x", NULL } };
	const struct ent dev[] = { { "null", AE_IFCHR, NULL, NULL } };
	const struct ent hard[] = { { "h", AE_IFREG, NULL, "nothing" } };
	const struct ent *bad[] = { dotdot, abs, dev, hard };
	const char *why[] = { "'..'", "absolute", "only files", "hard link" };
	for (int i = 0; i < 4; i++) {
		write_tar(tar, bad[i], 1);
		CHECK(upload(dir, tar, 1 << 20, digest, &err) == -1 && err.code == EINVAL && strstr(err.msg, why[i]),
		      "a context with %s is refused: %s", why[i], err.msg);
	}
	CHECK(count_files(dir) == 2, "refused uploads leave nothing behind");
	/* over the limit */
	write_tar(tar, good, 6);
	CHECK(upload(dir, tar, 100, digest, &err) == -1 && err.code == E2BIG, "over its limit: E2BIG (%s)", err.msg);
	/* not a tar */
	{
		struct context_upload *u = context_upload_begin(dir, 1 << 20, &err);
		uint64_t bytes;

		context_upload_write(u, "hello, this is not a tar at all, just some text that is long enough", 67, &err);
		CHECK(context_upload_finish(u, digest, &bytes, &err) == -1 && err.code == EINVAL, "not a tar: %s", err.msg);
	}
	CHECK(count_files(dir) == 2, "and nothing left behind");
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	if (system(cmd) != 0)
		NOTE("cleanup failed");
}

int main(void)
{
	RUN(test_full);
	RUN(test_defaults);
	test_refusals();
	RUN(test_keys);
	RUN(test_resolve_dest);
	RUN(test_context);
	return DONE();
}
