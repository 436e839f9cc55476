/* test_cli_client.c -- spacectl's pure helpers: API error messages, writes
 * to slow non-blocking pipes, K=V and number parsing, tables, sizes,
 * on_timeout, paths, id lists, the options verbs share */
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "harness.h"

static bool error_is(long status, const char *body, const char *want)
{
	struct http_resp rs = { .status = status, .body = (char *)body, .len = strlen(body) };
	space_err e = { 0 };
	int rc = http_error(&rs, &e);

	if (strcmp(e.msg, want) != 0)
		NOTE("got '%s'", e.msg);
	return rc == -1 && strcmp(e.msg, want) == 0;
}

static void test_http_error(void)
{
	CHECK(error_is(404, "{\"error\":{\"code\":\"not_found\",\"message\":\"sandbox sb-1 not found\"}}",
		       "sandbox sb-1 not found (not_found, HTTP 404)"),
	      "error body -> message (code, HTTP status)");
	CHECK(error_is(500, "{\"error\":{\"code\":\"internal\"}}", "no message (internal, HTTP 500)"),
	      "error body without a message");
	CHECK(error_is(502, "<html>Bad\nGateway</html>", "unexpected HTTP 502 response: <html>Bad Gateway</html>"),
	      "a non-JSON body is shown, made printable");
	CHECK(error_is(503, "", "unexpected HTTP 503 response with no body"), "an empty body");
	CHECK(error_is(400, "[1,2]", "unexpected HTTP 400 response: [1,2]"), "JSON that is not an error");
	CHECK(error_is(400, "{\"error\":\"flat\"}", "unexpected HTTP 400 response: {\"error\":\"flat\"}"),
	      "an error that is not an object");
	{
		char big[1000];
		struct http_resp rs = { .status = 500, .body = big, .len = sizeof(big) - 1 };
		space_err e = { 0 };

		memset(big, 'x', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		http_error(&rs, &e);
		CHECK(strlen(e.msg) < 300 && strstr(e.msg, "...") != NULL,
		      "a long body is cut short (%zu chars)", strlen(e.msg));
	}
}

static void *drain(void *arg)
{
	int fd = *(int *)arg;
	char buf[4096];
	size_t total = 0;
	ssize_t n;

	usleep(100 * 1000); /* let the writer fill the pipe and hit EAGAIN */
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		total += (size_t)n;
		usleep(100);
	}
	return (void *)total;
}

static void test_write_all(void)
{
	size_t len = 1 << 20, got;
	char *data = malloc(len);
	pthread_t t;
	void *ret;
	int p[2];

	memset(data, 'q', len);
	if (pipe(p) < 0)
		abort();
	fcntl(p[1], F_SETFL, O_NONBLOCK);
	pthread_create(&t, NULL, drain, &p[0]);
	CHECK(ctl_write_all(p[1], data, len) == 0, "1 MiB into a slow non-blocking pipe");
	close(p[1]);
	pthread_join(t, &ret);
	got = (size_t)ret;
	CHECK(got == len, "every byte arrived (%zu)", got);
	close(p[0]);

	if (pipe(p) < 0)
		abort();
	close(p[0]);
	errno = 0;
	CHECK(ctl_write_all(p[1], data, 10) == -1 && errno == EPIPE,
	      "a closed reader gives EPIPE (SIGPIPE is ignored in the test)");
	close(p[1]);
	free(data);
}

static void test_args(void)
{
	json_t *o = json_object();
	long v = 0;

	CHECK(ctl_kv_add(o, "A=1") == 0 && strcmp(ctl_jstr(o, "A", ""), "1") == 0, "K=V");
	CHECK(ctl_kv_add(o, "B=x=y") == 0 && strcmp(ctl_jstr(o, "B", ""), "x=y") == 0,
	      "split at the first '='");
	CHECK(ctl_kv_add(o, "C=") == 0 && strcmp(ctl_jstr(o, "C", "?"), "") == 0, "empty value");
	CHECK(ctl_kv_add(o, "=v") < 0, "empty key rejected");
	CHECK(ctl_kv_add(o, "novalue") < 0, "no '=' rejected");
	CHECK(ctl_kv_add(o, "D=\xff") < 0, "invalid UTF-8 rejected");
	json_decref(o);

	CHECK(ctl_parse_long("42", 1, 100, &v) == 0 && v == 42, "number");
	CHECK(ctl_parse_long("0", 1, 100, &v) < 0, "below the range");
	CHECK(ctl_parse_long("4x", 1, 100, &v) < 0, "trailing junk");
	CHECK(ctl_parse_long("", 1, 100, &v) < 0, "empty");
	CHECK(ctl_parse_long("99999999999999999999", 0, 100, &v) < 0, "overflow");

	o = json_pack("{s:s, s:i, s:f, s:n, s:f}", "s", "str", "i", 7, "f", 2.5, "n", "huge", 1e300);
	CHECK(strcmp(ctl_jstr(o, "s", "d"), "str") == 0 && strcmp(ctl_jstr(o, "i", "d"), "d") == 0,
	      "string accessor with default");
	CHECK(ctl_jint(o, "i", -1) == 7 && ctl_jint(o, "f", -1) == 2 && ctl_jint(o, "n", -1) == -1 &&
		      ctl_jint(o, "huge", -1) == -1 && ctl_jint(NULL, "i", -1) == -1,
	      "integer accessor: ints, reals, null, out of range, no object");
	json_decref(o);
}

static void test_table(void)
{
	static const char *const hdr[] = { "ID", "STATE" };
	const char *r1[] = { "sb-1", "running" }, *r2[] = { "sb-long-id", NULL },
		   *r3[] = { "evil\nname", "x" };
	struct ctl_table t;
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	ctl_table_init(&t, 2, hdr);
	ctl_table_add(&t, r1);
	ctl_table_add(&t, r2);
	ctl_table_add(&t, r3);
	ctl_table_print(&t, f);
	fclose(f);
	if (!CHECK(strcmp(out, "ID          STATE\n"
			       "sb-1        running\n"
			       "sb-long-id  -\n"
			       "evil name   x\n") == 0,
		   "table: aligned columns, NULL as '-', control characters blanked"))
		NOTE("got:\n%s", out);
	ctl_table_free(&t);
	free(out);
}

static bool size_is(long long n, const char *want)
{
	char buf[32];

	ctl_fmt_bytes(n, buf, sizeof(buf));
	if (strcmp(buf, want) != 0)
		NOTE("%lld: got '%s', want '%s'", n, buf, want);
	return strcmp(buf, want) == 0;
}

static void test_sizes(void)
{
	EXPECT(size_is(0, "0 B"));
	EXPECT(size_is(1023, "1023 B"));
	EXPECT(size_is(1024, "1.0 KiB"));
	EXPECT(size_is(1536, "1.5 KiB"));
	EXPECT(size_is(21397504, "20.4 MiB"));
	EXPECT(size_is(104815575, "100 MiB")); /* 99.96 MiB: no "100.0" */
	EXPECT(size_is(1048575, "1.0 MiB"));   /* not "1024 KiB" */
	EXPECT(size_is(5LL << 40, "5.0 TiB"));
	EXPECT(size_is(1LL << 62, "4096 PiB"));
	EXPECT(size_is(-1, "-"));
}

static void test_on_timeout(void)
{
	CHECK(ctl_on_timeout_ok("delete") && ctl_on_timeout_ok("suspend"), "delete and suspend");
	CHECK(!ctl_on_timeout_ok("") && !ctl_on_timeout_ok("Suspend") && !ctl_on_timeout_ok("never"),
	      "nothing else, case included");
}

static bool path_is(char *got, const char *want)
{
	bool ok = got && strcmp(got, want) == 0;

	if (!ok)
		NOTE("got '%s', want '%s'", got ? got : "(null)", want);
	free(got);
	return ok;
}

static void test_paths(void)
{
	CHECK(path_is(ctl_sandbox_path("sb-1", "/pause"), "/v1/sandboxes/sb-1/pause"), "an action");
	CHECK(path_is(ctl_path("/v1/snapshots", "a b/../c", ""), "/v1/snapshots/a%20b%2F..%2Fc"),
	      "a snapshot ref is one escaped segment");
	CHECK(path_is(ctl_path("/v1/templates", "minimal:v1", "/pool"), "/v1/templates/minimal%3Av1/pool"),
	      "a template ref with a tag");
}

static void test_print_lines(void)
{
	json_t *ok = json_pack("{s:[s,s]}", "children", "sb-1", "sb-2");
	json_t *bad = json_pack("{s:[s,i]}", "children", "sb-1", 2);
	space_err e = { 0 };
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	CHECK(ctl_print_lines(f, ok, "children", &e) == 0, "a list of ids");
	CHECK(ctl_print_lines(f, bad, "children", &e) < 0 && strstr(e.msg, "non-string"),
	      "a non-string refused: %s", e.msg);
	CHECK(ctl_print_lines(f, ok, "missing", &e) < 0 && strstr(e.msg, "\"missing\""),
	      "a missing list named: %s", e.msg);
	fclose(f);
	CHECK(strcmp(out, "sb-1\nsb-2\n") == 0, "one per line, nothing of a refused list");
	free(out);
	json_decref(ok);
	json_decref(bad);
}

static int run_nothing(struct ctl *c, int argc, char **argv)
{
	(void)c, (void)argc, (void)argv;
	return 0;
}

/* ctl_parse_opts without --wait, its usage message kept off the test's output. */
static int parse_quietly(struct ctl *c, const struct ctl_verb *v, int argc, char **argv)
{
	int saved = dup(2), null = open("/dev/null", O_WRONLY), rc;

	fflush(stderr);
	dup2(null, 2);
	rc = ctl_parse_opts(c, v, argc, argv, NULL);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(null);
	return rc;
}

static void test_parse_opts(void)
{
	static const struct ctl_verb v = { .name = "t", .usage = "[--wait] ID", .summary = "",
					   .run = run_nothing };
	char a0[] = "spacectl t", a1[] = "sb-1", a2[] = "--wait", a3[] = "--json";
	char *argv[] = { a0, a1, a2, a3, NULL };
	struct ctl c = { .verb = "t" };
	bool wait = false;
	int rc;

	optind = 0;
	rc = ctl_parse_opts(&c, &v, 4, argv, &wait);
	CHECK(rc == -1 && wait && c.json && optind == 3 && strcmp(argv[optind], "sb-1") == 0,
	      "--wait and --json after the id; the id left at optind");
	argv[1] = a2;
	argv[2] = a1;
	optind = 0;
	rc = parse_quietly(&c, &v, 3, argv);
	CHECK(rc == CTL_EXIT_USAGE, "--wait refused where a verb has none (%d)", rc);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	test_http_error();
	test_write_all();
	test_args();
	test_table();
	RUN(test_sizes);
	test_on_timeout();
	test_paths();
	test_print_lines();
	test_parse_opts();
	return DONE();
}
