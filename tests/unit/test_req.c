/* test_req.c -- /v1 request bodies into typed requests, and the validators they share */
#include <string.h>

#include "daemon/front/req.h"
#include "harness.h"

static json_t *J(const char *text)
{
	json_error_t e;
	json_t *j = json_loads(text, 0, &e);

	if (!j)
		NOTE("bad test JSON %s: %s", text, e.text);
	return j;
}

/* Parses text with fn; returns the error code (0 on success). */
#define PARSE(fn, text, out)                                        \
	({                                                          \
		space_err e_ = { 0 };                               \
		json_t *b_ = J(text);                               \
		int rc_ = fn(b_, out, &e_);                         \
		json_decref(b_);                                    \
		if (rc_ < 0)                                        \
			snprintf(last, sizeof(last), "%s", e_.msg); \
		rc_ < 0 ? e_.code : 0;                              \
	})

static char last[1024];

static void test_create(void)
{
	struct create_req r;

	CHECK(PARSE(req_create, "{\"template\":\"base\"}", &r) == 0 && !strcmp(r.template_ref, "base") &&
		      !r.timeout_set && !r.vcpus && !r.snapshot[0],
	      "a template is all a create needs");
	create_req_free(&r);
	CHECK(PARSE(req_create,
		    "{\"template\":\"base:latest\",\"vcpus\":2,\"memory_mib\":512,\"timeout_s\":0,"
		    "\"on_timeout\":\"suspend\",\"env\":{\"A\":\"1\"},\"metadata\":{\"k\":\"v\"}}",
		    &r) == 0 &&
		      r.vcpus == 2 && r.memory_mib == 512 && r.timeout_set && r.timeout_s == 0 &&
		      r.on_timeout_set && r.on_timeout == ON_TIMEOUT_SUSPEND && r.env.n == 1 &&
		      !strcmp(strmap_get(&r.env, "A"), "1") && !strcmp(strmap_get(&r.metadata, "k"), "v"),
	      "every field of a create");
	create_req_free(&r);
	CHECK(PARSE(req_create, "{\"snapshot\":\"golden\"}", &r) == 0 && !strcmp(r.snapshot, "golden"),
	      "or a snapshot");
	create_req_free(&r);
	CHECK(PARSE(req_create, "{}", &r) == EINVAL && strstr(last, "template is required"), "%s", last);
	CHECK(PARSE(req_create, "{\"template\":\"a\",\"snapshot\":\"b\"}", &r) == EINVAL, "not both");
	CHECK(PARSE(req_create, "{\"template\":\"base\",\"templat\":1}", &r) == EINVAL &&
		      strstr(last, "unknown field 'templat'"),
	      "an unknown field is named: %s", last);
	CHECK(PARSE(req_create, "{\"template\":\"base\",\"vcpus\":0}", &r) == EINVAL, "vcpus 0");
	CHECK(PARSE(req_create, "{\"template\":\"base\",\"memory_mib\":\"1G\"}", &r) == EINVAL, "memory as text");
	CHECK(PARSE(req_create, "{\"template\":\"base\",\"on_timeout\":\"pause\"}", &r) == EINVAL &&
		      strstr(last, "on_timeout"),
	      "on_timeout other than delete/suspend: %s", last);
	CHECK(PARSE(req_create, "{\"template\":\"base\",\"env\":{\"A=B\":\"x\"}}", &r) == EINVAL &&
		      strstr(last, "invalid variable name"),
	      "env names cannot hold '=': %s", last);
	CHECK(PARSE(req_create, "{\"template\":\"base\",\"metadata\":{\"k\":1}}", &r) == EINVAL,
	      "metadata values are strings");
	CHECK(PARSE(req_create, "{\"template\":\"a b\"}", &r) == EINVAL, "a template reference has no spaces");
	CHECK(PARSE(req_create, "[1]", &r) == EINVAL, "a body that is not an object");
}

static void test_exec(void)
{
	struct exec_req r;

	CHECK(PARSE(req_exec, "{\"argv\":[\"echo\",\"hi\"],\"env\":{\"X\":\"y\"},\"cwd\":\"/tmp\","
			      "\"user\":\"user\",\"stdin\":true,\"token_ttl_s\":60}",
		    &r) == 0 &&
		      r.argv.n == 2 && !strcmp(r.argv.v[1], "hi") && !strcmp(r.cwd, "/tmp") &&
		      !strcmp(r.user, "user") && r.stdin_open && r.token_ttl_s == 60,
	      "every field of a command");
	exec_req_free(&r);
	CHECK(PARSE(req_exec, "{\"argv\":[]}", &r) == EINVAL, "empty argv");
	CHECK(PARSE(req_exec, "{\"argv\":[\"\"]}", &r) == EINVAL, "empty argv[0]");
	CHECK(PARSE(req_exec, "{\"argv\":[\"a\",2]}", &r) == EINVAL && strstr(last, "argv[1]"), "%s", last);
	CHECK(PARSE(req_exec, "{\"argv\":[\"a\"],\"cwd\":\"tmp\"}", &r) == EINVAL, "relative cwd");
	CHECK(PARSE(req_exec, "{\"argv\":[\"a\"],\"user\":\"ro ot\"}", &r) == EINVAL, "user with a space");
	CHECK(PARSE(req_exec, "{\"argv\":[\"a\"],\"stdin\":1}", &r) == EINVAL, "stdin must be a boolean");
	CHECK(PARSE(req_exec, "{\"argv\":[\"a\"],\"token_ttl_s\":86401}", &r) == EINVAL, "token ttl over a day");
}

static int fork_count(json_t *b, int *n, space_err *e)
{
	return req_fork(b, n, e);
}

static void test_small(void)
{
	struct timeout_req t;
	int n;
	char name[SPEC_NAME_MAX + 1];
	space_err e = { 0 };
	json_t *b;

	CHECK(PARSE(fork_count, "{}", &n) == 0 && n == 1, "fork: count defaults to 1");
	CHECK(PARSE(fork_count, "{\"count\":3}", &n) == 0 && n == 3, "fork: count 3");
	CHECK(PARSE(fork_count, "{\"count\":17}", &n) == EINVAL, "fork: at most %d", SPEC_FORK_MAX);
	CHECK(PARSE(req_timeout, "{\"timeout_s\":60,\"on_timeout\":\"suspend\"}", &t) == 0 && t.timeout_s == 60 &&
		      t.on_timeout == ON_TIMEOUT_SUSPEND,
	      "timeout");
	CHECK(PARSE(req_timeout, "{}", &t) == EINVAL, "timeout needs timeout_s");
	b = J("{\"name\":\"golden-1.0\"}");
	CHECK(req_snapshot(b, name, sizeof(name), &e) == 0 && !strcmp(name, "golden-1.0"), "snapshot name");
	json_decref(b);
	b = J("{\"name\":\"sn-0123456789abcdef\"}");
	CHECK(req_snapshot(b, name, sizeof(name), &e) < 0, "a name shaped like an id is refused");
	json_decref(b);
	b = J("{\"name\":\"-x\"}");
	CHECK(req_snapshot(b, name, sizeof(name), &e) < 0, "a name starting with '-' is refused");
	json_decref(b);
	b = J("{\"size\":2}");
	CHECK(req_pool(b, &n, &e) == 0 && n == 2, "pool size");
	json_decref(b);
	b = J("{\"size\":-1}");
	CHECK(req_pool(b, &n, &e) < 0, "a negative pool size");
	json_decref(b);
}

int main(void)
{
	RUN(test_create);
	RUN(test_exec);
	RUN(test_small);
	return DONE();
}
