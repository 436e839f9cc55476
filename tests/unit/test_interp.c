/* test_interp.c -- the code interpreter's wire (src/daemon/e2b/interp_line.c): which guest
 * lines pass and how they are re-encoded, and what POST /execute and POST /contexts accept. */
#include <stdlib.h>
#include <string.h>

#include "daemon/e2b/interp_line.h"
#include "harness.h"

static char *check(const char *line, enum interp_line_type *t)
{
	return interp_line_check(line, strlen(line), t);
}

static int same(const char *got, const char *want)
{
	if (!got || strcmp(got, want) != 0) {
		NOTE("got %s, want %s", got ? got : "(null)", want);
		return 0;
	}
	return 1;
}

static void test_known_lines(void)
{
	enum interp_line_type t;
	char *s;

	s = check("{\"type\":\"stdout\",\"text\":\"hi\\n\",\"timestamp\":\"2024\",\"extra\":1}", &t);
	EXPECT(same(s, "{\"type\":\"stdout\",\"text\":\"hi\\n\",\"timestamp\":\"2024\"}"));
	EXPECT_EQ(t, INTERP_LINE_STDOUT);
	free(s);
	s = check("{\"type\":\"stderr\",\"text\":\"e\"}", &t);
	EXPECT(same(s, "{\"type\":\"stderr\",\"text\":\"e\"}"));
	EXPECT_EQ(t, INTERP_LINE_STDERR);
	free(s);
	s = check("{\"type\":\"result\",\"text\":\"42\",\"is_main_result\":true,\"png\":\"AAAA\",\"evil\":{}}", &t);
	EXPECT(same(s, "{\"type\":\"result\",\"text\":\"42\",\"png\":\"AAAA\",\"is_main_result\":true}"));
	EXPECT_EQ(t, INTERP_LINE_RESULT);
	free(s);
	s = check("{\"type\":\"result\",\"json\":{\"a\":[1]}}", &t);
	EXPECT(same(s, "{\"type\":\"result\",\"is_main_result\":false,\"json\":{\"a\":[1]}}"));
	free(s);
	s = check("{\"type\":\"error\",\"name\":\"ZeroDivisionError\",\"value\":\"division by zero\",\"traceback\":\"T\"}", &t);
	EXPECT(same(s, "{\"type\":\"error\",\"name\":\"ZeroDivisionError\",\"value\":\"division by zero\",\"traceback\":\"T\"}"));
	EXPECT_EQ(t, INTERP_LINE_ERROR);
	free(s);
	s = check("{\"type\":\"number_of_executions\",\"execution_count\":3}", &t);
	EXPECT(same(s, "{\"type\":\"number_of_executions\",\"execution_count\":3}"));
	EXPECT_EQ(t, INTERP_LINE_COUNT);
	free(s);
	s = check("{\"type\":\"end_of_execution\",\"junk\":\"x\"}", &t);
	EXPECT(same(s, "{\"type\":\"end_of_execution\"}"));
	EXPECT_EQ(t, INTERP_LINE_END);
	free(s);
}

static void test_hostile_lines(void)
{
	static const char *const bad[] = {
		"", "not json", "[]", "42", "{}", "{\"type\":1}", "{\"type\":\"exec\"}",
		"{\"type\":\"stdout\"}",                         /* no text */
		"{\"type\":\"stdout\",\"text\":5}",               /* not a string */
		"{\"type\":\"stdout\",\"text\":\"a\\u0000b\"}",    /* NUL */
		"{\"type\":\"stdout\",\"text\":\"a\",\"text\":\"b\"}", /* duplicate key */
		"{\"type\":\"result\",\"is_main_result\":\"yes\"}",
		"{\"type\":\"result\",\"png\":[1]}",
		"{\"type\":\"error\",\"name\":\"E\"}",
		"{\"type\":\"number_of_executions\",\"execution_count\":-1}",
		"{\"type\":\"number_of_executions\",\"execution_count\":\"1\"}",
		"{\"type\":\"stdout\",\"text\":\"\xff\"}",         /* bad UTF-8 */
		"{\"type\":\"end_of_execution\"} trailing",
	};
	enum interp_line_type t;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *s = check(bad[i], &t);

		if (s || t != INTERP_LINE_BAD)
			NOTE("accepted: %s", bad[i]);
		EXPECT(!s);
		EXPECT_EQ(t, INTERP_LINE_BAD);
		free(s);
	}
	/* Over the line bound: refused before parsing. */
	size_t n = INTERP_MAX_LINE + 64;
	char *big = malloc(n + 1);
	memset(big, 'a', n);
	memcpy(big, "{\"type\":\"stdout\",\"text\":\"", 25);
	memcpy(big + n - 2, "\"}", 2);
	big[n] = 0;
	char *s = interp_line_check(big, n, &t);
	EXPECT(!s);
	EXPECT_EQ(t, INTERP_LINE_BAD);
	free(s);
	free(big);
}

static json_t *js(const char *text)
{
	return json_loads(text, 0, NULL);
}

static void test_execute_parse(void)
{
	char id[INTERP_MAX_CTX_ID + 1], *line = NULL;
	space_err err = { 0 };
	json_t *b;

	b = js("{\"code\":\"x = 1\",\"context_id\":\"ctx-1\",\"env_vars\":{\"A\":\"b\"},\"junk\":1}");
	EXPECT_EQ(interp_execute_parse(b, &line, id, &err), 0);
	EXPECT(same(line, "{\"code\":\"x = 1\",\"env_vars\":{\"A\":\"b\"}}\n"));
	EXPECT(same(id, "ctx-1"));
	free(line);
	json_decref(b);

	b = js("{\"code\":\"1\",\"language\":\"python\",\"context_id\":null,\"env_vars\":null}");
	EXPECT_EQ(interp_execute_parse(b, &line, id, &err), 0);
	EXPECT(same(line, "{\"code\":\"1\",\"env_vars\":{}}\n"));
	EXPECT(same(id, ""));
	free(line);
	json_decref(b);

	static const char *const bad[] = {
		"{}", "{\"code\":1}", "{\"code\":\"1\",\"language\":\"r\"}",
		"{\"code\":\"1\",\"env_vars\":[]}", "{\"code\":\"1\",\"env_vars\":{\"A\":1}}",
		"{\"code\":\"1\",\"env_vars\":{\"A=B\":\"1\"}}", "{\"code\":\"1\",\"env_vars\":{\"\":\"1\"}}",
		"{\"code\":\"1\",\"context_id\":5}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		b = js(bad[i]);
		err = (space_err){ 0 };
		EXPECT_EQ(interp_execute_parse(b, &line, id, &err), -1);
		EXPECT(line == NULL);
		EXPECT(err.code == EINVAL);
		json_decref(b);
	}
	err = (space_err){ 0 };
	b = js("{\"code\":\"1\",\"language\":\"javascript\"}");
	EXPECT_EQ(interp_execute_parse(b, &line, id, &err), -1);
	EXPECT(strstr(err.msg, "only python") != NULL);
	json_decref(b);
}

static void test_context_parse(void)
{
	char cwd[INTERP_MAX_CWD + 1];
	space_err err = { 0 };
	json_t *b;

	b = js("{\"language\":\"python\",\"cwd\":\"/tmp\"}");
	EXPECT_EQ(interp_context_parse(b, cwd, &err), 0);
	EXPECT(same(cwd, "/tmp"));
	json_decref(b);
	b = js("{}");
	EXPECT_EQ(interp_context_parse(b, cwd, &err), 0);
	EXPECT(same(cwd, ""));
	json_decref(b);
	b = js("{\"cwd\":\"relative\"}");
	EXPECT_EQ(interp_context_parse(b, cwd, &err), -1);
	json_decref(b);
	b = js("{\"language\":\"bash\"}");
	EXPECT_EQ(interp_context_parse(b, cwd, &err), -1);
	json_decref(b);
}

static void test_error_line(void)
{
	char *s = interp_error_line("InterpreterDied", "it \"ended\"");

	EXPECT(same(s, "{\"type\":\"error\",\"name\":\"InterpreterDied\",\"value\":\"it \\\"ended\\\"\",\"traceback\":\"\"}\n"));
	free(s);
}

int main(void)
{
	RUN(test_known_lines);
	RUN(test_hostile_lines);
	RUN(test_execute_parse);
	RUN(test_context_parse);
	RUN(test_error_line);
	return DONE();
}
