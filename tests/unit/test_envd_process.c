/* test_envd_process.c -- envd's process.Process messages: StartRequest into exec_req, selectors,
 * input, signals, and the events and listings we render (e2b/envd_proc.h) */
#include <string.h>

#include "harness.h"
#include "e2b/envd_proc.h"

static json_t *J(const char *s)
{
	json_error_t e;
	json_t *j = json_loads(s, 0, &e);

	if (!j)
		printf("# bad test JSON: %s: %s\n", s, e.text);
	return j;
}

static char *dump(json_t *j)
{
	static char buf[4096];
	char *s = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;

	snprintf(buf, sizeof(buf), "%s", s ? s : "(null)");
	free(s);
	json_decref(j);
	return buf;
}

static void test_start_req(void)
{
	struct exec_req r;
	space_err err = { 0 };
	json_t *b;

	b = J("{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",\"echo hi\"],\"envs\":{\"A\":\"1\"},"
	      "\"cwd\":\"/tmp\"},\"stdin\":false,\"tag\":\"t1\"}");
	EXPECT(envd_start_req(b, "user", &r, &err) == 0);
	EXPECT(r.argv.n == 4 && strcmp(r.argv.v[0], "/bin/bash") == 0 && strcmp(r.argv.v[3], "echo hi") == 0);
	EXPECT(strcmp(strmap_get(&r.env, "A"), "1") == 0);
	EXPECT(strcmp(r.cwd, "/tmp") == 0 && strcmp(r.user, "user") == 0 && strcmp(r.tag, "t1") == 0);
	EXPECT(!r.stdin_open && r.pty_rows == 0);
	exec_req_free(&r);
	json_decref(b);

	/* stdin absent: open (envd's default); a PTY as numbers or strings */
	b = J("{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-i\",\"-l\"]},\"pty\":{\"size\":{\"cols\":\"100\",\"rows\":30}}}");
	EXPECT(envd_start_req(b, "", &r, &err) == 0);
	EXPECT(r.stdin_open && r.pty_rows == 30 && r.pty_cols == 100 && r.user[0] == '\0' && r.tag[0] == '\0');
	exec_req_free(&r);
	json_decref(b);

	/* refused by the shared validators (req_exec / spec.h) */
	static const char *const bad[] = {
		"{}",
		"{\"process\":{}}",
		"{\"process\":{\"cmd\":\"\"}}",
		"{\"process\":{\"cmd\":3}}",
		"{\"process\":{\"cmd\":\"x\",\"args\":[1]}}",
		"{\"process\":{\"cmd\":\"x\",\"args\":\"a\"}}",
		"{\"process\":{\"cmd\":\"x\",\"envs\":{\"A\":1}}}",
		"{\"process\":{\"cmd\":\"x\",\"envs\":{\"A=B\":\"1\"}}}",
		"{\"process\":{\"cmd\":\"x\",\"cwd\":\"relative\"}}",
		"{\"process\":{\"cmd\":\"x\"},\"stdin\":\"yes\"}",
		"{\"process\":{\"cmd\":\"x\"},\"tag\":5}",
		"{\"process\":{\"cmd\":\"x\"},\"tag\":\"a\\u0001b\"}",
		"{\"process\":{\"cmd\":\"x\"},\"pty\":{\"size\":{\"cols\":0,\"rows\":10}}}",
		"{\"process\":{\"cmd\":\"x\"},\"pty\":{\"size\":{\"cols\":-1,\"rows\":10}}}",
		"{\"process\":{\"cmd\":\"x\"},\"pty\":{}}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		space_err e = { 0 };

		b = J(bad[i]);
		if (envd_start_req(b, "", &r, &e) == 0) {
			printf("# accepted: %s\n", bad[i]);
			EXPECT(0);
			exec_req_free(&r);
		} else {
			EXPECT(e.code != 0 && e.msg[0]);
		}
		json_decref(b);
	}
	b = J("{\"process\":{\"cmd\":\"x\"}}");
	EXPECT(envd_start_req(b, "bad user!", &r, &err) < 0);
	json_decref(b);
}

static void test_basic_user(void)
{
	char u[40];
	space_err err = { 0 };

	EXPECT(envd_basic_user(NULL, u, sizeof(u), &err) == 0 && u[0] == '\0');
	EXPECT(envd_basic_user("Basic dXNlcjo=", u, sizeof(u), &err) == 0 && strcmp(u, "user") == 0);
	EXPECT(envd_basic_user("basic cm9vdDo", u, sizeof(u), &err) == 0 && strcmp(u, "root") == 0);
	EXPECT(envd_basic_user("Basic Og==", u, sizeof(u), &err) == 0 && u[0] == '\0');
	EXPECT(envd_basic_user("Bearer x", u, sizeof(u), &err) < 0);
	EXPECT(envd_basic_user("Basic !!!", u, sizeof(u), &err) < 0);
	EXPECT(envd_basic_user("Basic AAA=", u, sizeof(u), &err) < 0); /* a NUL inside */
	EXPECT(envd_basic_user("Basic YWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYQ==", u, sizeof(u),
			       &err) < 0);
}

static void test_selector_input_signal(void)
{
	space_err err = { 0 };
	const char *tag;
	uint8_t *data;
	size_t len;
	bool pty;
	int pid, sig;
	json_t *b;

	b = J("{\"process\":{\"pid\":42}}");
	EXPECT(envd_selector(b, &pid, &tag, &err) == 0 && pid == 42 && !tag);
	json_decref(b);
	b = J("{\"process\":{\"pid\":\"43\"}}");
	EXPECT(envd_selector(b, &pid, &tag, &err) == 0 && pid == 43);
	json_decref(b);
	b = J("{\"process\":{\"tag\":\"web\"}}");
	EXPECT(envd_selector(b, &pid, &tag, &err) == 0 && pid == 0 && strcmp(tag, "web") == 0);
	json_decref(b);
	static const char *const bad[] = { "{}", "{\"process\":{}}", "{\"process\":{\"pid\":0}}",
					   "{\"process\":{\"pid\":-1}}", "{\"process\":{\"pid\":1,\"tag\":\"x\"}}",
					   "{\"process\":{\"pid\":\"1x\"}}", "{\"process\":{\"pid\":1e3}}",
					   "{\"process\":{\"pid\":99999999999}}" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		b = J(bad[i]);
		EXPECT(envd_selector(b, &pid, &tag, &err) < 0);
		json_decref(b);
	}

	b = J("{\"input\":{\"stdin\":\"aGVsbG8K\"}}");
	EXPECT(envd_input(b, &data, &len, &pty, &err) == 0 && len == 6 && memcmp(data, "hello\n", 6) == 0 && !pty);
	free(data);
	json_decref(b);
	b = J("{\"input\":{\"pty\":\"\"}}");
	EXPECT(envd_input(b, &data, &len, &pty, &err) == 0 && len == 0 && pty);
	free(data);
	json_decref(b);
	b = J("{\"input\":{\"stdin\":\"a$b\"}}");
	EXPECT(envd_input(b, &data, &len, &pty, &err) < 0 && !data);
	json_decref(b);
	b = J("{\"input\":{}}");
	EXPECT(envd_input(b, &data, &len, &pty, &err) < 0);
	json_decref(b);

	b = J("{\"signal\":\"SIGNAL_SIGKILL\"}");
	EXPECT(envd_signal(b, &sig, &err) == 0 && sig == 9);
	json_decref(b);
	b = J("{\"signal\":\"SIGNAL_SIGTERM\"}");
	EXPECT(envd_signal(b, &sig, &err) == 0 && sig == 15);
	json_decref(b);
	b = J("{\"signal\":9}");
	EXPECT(envd_signal(b, &sig, &err) == 0 && sig == 9);
	json_decref(b);
	static const char *const badsig[] = { "{}", "{\"signal\":\"SIGNAL_UNSPECIFIED\"}", "{\"signal\":0}",
					      "{\"signal\":65}", "{\"signal\":\"KILL\"}" };
	for (size_t i = 0; i < sizeof(badsig) / sizeof(badsig[0]); i++) {
		b = J(badsig[i]);
		EXPECT(envd_signal(b, &sig, &err) < 0);
		json_decref(b);
	}
}

static void test_b64(void)
{
	uint8_t out[16];

	EXPECT(envd_b64_decode("", 0, out) == 0);
	EXPECT(envd_b64_decode("YQ==", 4, out) == 1 && out[0] == 'a');
	EXPECT(envd_b64_decode("YWI", 3, out) == 2 && memcmp(out, "ab", 2) == 0);
	EXPECT(envd_b64_decode("_-8", 3, out) == 2 && out[0] == 0xff && out[1] == 0xef);
	EXPECT(envd_b64_decode("Y", 1, out) < 0);
	EXPECT(envd_b64_decode("Y Q=", 4, out) < 0);
}

static void test_events(void)
{
	struct session_rec r = { 0 };

	EXPECT(strcmp(dump(envd_event_start(123)), "{\"event\":{\"start\":{\"pid\":123}}}") == 0);
	EXPECT(strcmp(dump(envd_event_data("stdout", "hi\n", 3)), "{\"event\":{\"data\":{\"stdout\":\"aGkK\"}}}") == 0);
	EXPECT(strcmp(dump(envd_event_data("pty", "", 0)), "{\"event\":{\"data\":{\"pty\":\"\"}}}") == 0);
	EXPECT(strcmp(dump(envd_event_keepalive()), "{\"event\":{\"keepalive\":{}}}") == 0);
	r.state = SESS_EXITED;
	r.exit_code = 3;
	EXPECT(strcmp(dump(envd_event_end(&r)),
		      "{\"event\":{\"end\":{\"error\":\"exit status 3\",\"exitCode\":3,\"exited\":true,\"status\":\"exit status 3\"}}}") == 0);
	r.exit_code = -1;
	r.exit_signal = 9;
	EXPECT(strcmp(dump(envd_event_end(&r)),
		      "{\"event\":{\"end\":{\"error\":\"signal: killed\",\"exitCode\":-1,\"exited\":false,\"status\":\"signal: killed\"}}}") == 0);
	r.exit_signal = 15;
	EXPECT(strstr(dump(envd_event_end(&r)), "\"error\":\"signal: terminated\"") != NULL);
	r.exit_signal = 0;
	r.exit_code = 0;
	EXPECT(strcmp(dump(envd_event_end(&r)),
		      "{\"event\":{\"end\":{\"exitCode\":0,\"exited\":true,\"status\":\"exit status 0\"}}}") == 0);
	r.exit_code = -1;
	r.exit_signal = 40;
	EXPECT(strstr(dump(envd_event_end(&r)), "\"status\":\"signal: signal 40\"") != NULL);
	r.state = SESS_FAILED;
	snprintf(r.error, sizeof(r.error), "no such file");
	EXPECT(strstr(dump(envd_event_end(&r)), "\"error\":\"no such file\"") != NULL);
}

static void test_process_info(void)
{
	struct session_rec r = { 0 };

	r.argv = json_pack("[s,s,s]", "/bin/bash", "-c", "sleep 9");
	r.env = json_pack("{s:s}", "A", "1");
	r.pid = 77;
	EXPECT(strcmp(dump(envd_process_info(&r)),
		      "{\"config\":{\"args\":[\"-c\",\"sleep 9\"],\"cmd\":\"/bin/bash\",\"envs\":{\"A\":\"1\"}},"
		      "\"pid\":77}") == 0);
	snprintf(r.cwd, sizeof(r.cwd), "/tmp");
	snprintf(r.tag, sizeof(r.tag), "web");
	EXPECT(strcmp(dump(envd_process_info(&r)),
		      "{\"config\":{\"args\":[\"-c\",\"sleep 9\"],\"cmd\":\"/bin/bash\",\"cwd\":\"/tmp\",\"envs\":{"
		      "\"A\":\"1\"}},\"pid\":77,\"tag\":\"web\"}") == 0);
	session_rec_clear(&r);
}

int main(void)
{
	RUN(test_start_req);
	RUN(test_basic_user);
	RUN(test_selector_input_signal);
	RUN(test_b64);
	RUN(test_events);
	RUN(test_process_info);
	return DONE();
}
