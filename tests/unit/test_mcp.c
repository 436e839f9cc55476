/* test_mcp.c -- the MCP front end's pure parts: JSON-RPC envelopes (jsonrpc.c), version
 * negotiation and sessions (lifecycle.c), the tool table's schemas and argument checks, text
 * truncation (tools.c) and resource URIs (resources.c) */
#include <string.h>

#include "daemon/mcp/mcp.h"
#include "harness.h"

static json_t *J(const char *text)
{
	json_error_t e;
	json_t *j = json_loads(text, 0, &e);

	if (!j)
		NOTE("bad test JSON %s: %s", text, e.text);
	return j;
}

static int err_code_of(const json_t *reply)
{
	return (int)json_integer_value(json_object_get(json_object_get(reply, "error"), "code"));
}

static void test_parse_body(void)
{
	static const struct {
		const char *body;
		int code;   /* 0: parses */
		size_t n;   /* messages */
		bool batch;
	} cases[] = {
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", 0, 1, false },
		{ "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"},{\"jsonrpc\":\"2.0\",\"method\":\"x\"}]", 0, 2, true },
		{ "", MCP_INVALID_REQUEST, 0, false },
		{ "{bad", MCP_PARSE_ERROR, 0, false },
		{ "{\"a\":1,\"a\":2}", MCP_PARSE_ERROR, 0, false }, /* duplicate keys refused */
		{ "[]", MCP_INVALID_REQUEST, 0, false },
		{ "42", MCP_PARSE_ERROR, 0, false },              /* jansson wants an array or object */
		{ "\"x\"", MCP_PARSE_ERROR, 0, false },
		{ "{} trailing", MCP_PARSE_ERROR, 0, false },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *msgs = NULL, *reply = NULL;
		bool batch = false;
		int rc = mcp_parse_body(cases[i].body, strlen(cases[i].body), &msgs, &batch, &reply);

		if (cases[i].code == 0) {
			CHECK(rc == 0 && json_array_size(msgs) == cases[i].n && batch == cases[i].batch && !reply,
			      "parse %s", cases[i].body);
		} else {
			CHECK(rc < 0 && !msgs && err_code_of(reply) == cases[i].code &&
				      json_is_null(json_object_get(reply, "id")),
			      "parse '%s' -> %d (got %d)", cases[i].body, cases[i].code, err_code_of(reply));
		}
		json_decref(msgs);
		json_decref(reply);
	}
	/* A batch over the limit. */
	char big[8192];
	size_t o = 0;

	big[o++] = '[';
	for (int i = 0; i <= MCP_BATCH_MAX; i++)
		o += (size_t)snprintf(big + o, sizeof(big) - o, "%s{\"jsonrpc\":\"2.0\",\"method\":\"x\"}", i ? "," : "");
	big[o++] = ']';
	json_t *msgs = NULL, *reply = NULL;
	bool batch;

	CHECK(mcp_parse_body(big, o, &msgs, &batch, &reply) < 0 && err_code_of(reply) == MCP_INVALID_REQUEST,
	      "a batch of %d messages is refused", MCP_BATCH_MAX + 1);
	json_decref(reply);
}

static void test_classify(void)
{
	static const struct {
		const char *msg;
		enum mcp_kind kind;
	} cases[] = {
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", MCP_REQUEST },
		{ "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"tools/list\",\"params\":{}}", MCP_REQUEST },
		{ "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", MCP_NOTIFICATION },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}", MCP_RESPONSE },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":1,\"message\":\"x\"}}", MCP_RESPONSE },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"error\":{}}", MCP_INVALID },
		{ "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", MCP_INVALID },
		{ "{\"id\":1,\"method\":\"ping\"}", MCP_INVALID },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", MCP_INVALID },
		{ "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", MCP_INVALID },
		{ "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}", MCP_INVALID },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":7}", MCP_INVALID },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\"}", MCP_INVALID },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":\"s\"}", MCP_INVALID },
		{ "[1]", MCP_INVALID },
		{ "{\"jsonrpc\":\"2.0\"}", MCP_INVALID },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *m = J(cases[i].msg);
		const char *why;
		enum mcp_kind k = mcp_classify(m, &why);

		CHECK(k == cases[i].kind && (k != MCP_INVALID || why), "classify %s -> %d (got %d%s%s)", cases[i].msg,
		      cases[i].kind, k, why ? ": " : "", why ? why : "");
		json_decref(m);
	}
	/* an id string over the limit */
	char msg[512];

	snprintf(msg, sizeof(msg), "{\"jsonrpc\":\"2.0\",\"id\":\"%0200d\",\"method\":\"ping\"}", 1);
	json_t *m = J(msg);
	const char *why;

	CHECK(mcp_classify(m, &why) == MCP_INVALID, "a 200-byte id is refused");
	json_decref(m);
}

static void test_replies(void)
{
	json_t *id = json_string("q1"), *r = mcp_result(id, json_pack("{s:i}", "x", 1));
	json_t *e = mcp_error(NULL, MCP_METHOD_NOT_FOUND, "method '%s' is not served", "nope");
	json_t *n = mcp_notification("notifications/progress", NULL);

	CHECK(r && json_equal(json_object_get(r, "id"), id) && json_integer_value(json_object_get(json_object_get(r, "result"), "x")) == 1 &&
		      strcmp(json_string_value(json_object_get(r, "jsonrpc")), "2.0") == 0,
	      "a result carries the id and the result");
	CHECK(e && json_is_null(json_object_get(e, "id")) && err_code_of(e) == MCP_METHOD_NOT_FOUND &&
		      strstr(json_string_value(json_object_get(json_object_get(e, "error"), "message")), "nope"),
	      "an error carries code and message (id null)");
	CHECK(n && !json_object_get(n, "id") && json_is_object(json_object_get(n, "params")), "a notification has no id");
	CHECK(mcp_result(id, NULL) == NULL, "no result: NULL");
	json_decref(id);
	json_decref(r);
	json_decref(e);
	json_decref(n);
}

static void test_negotiate(void)
{
	CHECK(strcmp(mcp_negotiate("2024-11-05"), "2024-11-05") == 0, "a served version is echoed (2024-11-05)");
	CHECK(strcmp(mcp_negotiate("2025-03-26"), "2025-03-26") == 0, "2025-03-26 is echoed");
	CHECK(strcmp(mcp_negotiate("2025-06-18"), "2025-06-18") == 0, "2025-06-18 is echoed");
	CHECK(strcmp(mcp_negotiate("2025-11-25"), "2025-06-18") == 0, "an unknown (newer) version gets the newest served");
	CHECK(strcmp(mcp_negotiate(NULL), "2025-06-18") == 0, "none: the newest");
	CHECK(!mcp_version_served("1999-01-01") && mcp_version_served("2025-03-26"), "version_served");
	json_t *r = mcp_initialize_result("2025-03-26");

	CHECK(r && strcmp(json_string_value(json_object_get(r, "protocolVersion")), "2025-03-26") == 0 &&
		      json_object_get(json_object_get(r, "capabilities"), "tools") &&
		      json_object_get(json_object_get(r, "capabilities"), "resources"),
	      "initialize offers tools and resources");
	json_decref(r);
}

static void test_sessions(void)
{
	char a[MCP_SID_LEN], b[MCP_SID_LEN], first[MCP_SID_LEN];
	int64_t t = 1000000;

	mcp_sessions_reset();
	mcp_session_new(a, "2025-06-18", t);
	mcp_session_new(b, "2025-06-18", t);
	CHECK(strncmp(a, "mcp-", 4) == 0 && strcmp(a, b) != 0, "ids are distinct (%s, %s)", a, b);
	CHECK(mcp_session_touch(a, t + 1) == 0 && mcp_session_touch("mcp-nope", t) < 0 && mcp_session_touch("", t) < 0,
	      "touch knows live sessions only");
	CHECK(mcp_session_end(a) == 0 && mcp_session_touch(a, t + 2) < 0 && mcp_session_end(a) < 0, "end ends it once");
	CHECK(mcp_session_touch(b, t + MCP_SESSION_IDLE_MS + 10) < 0, "an idle session expires");
	/* Full: the least recently used goes. */
	mcp_sessions_reset();
	mcp_session_new(first, "v", t);
	for (int i = 1; i < MCP_SESSIONS_MAX; i++) {
		char x[MCP_SID_LEN];

		mcp_session_new(x, "v", t + i);
	}
	mcp_session_touch(first, t + MCP_SESSIONS_MAX); /* now the newest */
	mcp_session_new(a, "v", t + MCP_SESSIONS_MAX + 1);
	CHECK(mcp_session_touch(first, t + MCP_SESSIONS_MAX + 2) == 0 && mcp_session_touch(a, t + MCP_SESSIONS_MAX + 2) == 0,
	      "a full table forgets the least recently used, not a busy one");
	mcp_sessions_reset();
}

static void test_tool_table(void)
{
	json_t *l = mcp_tools_list(), *t;
	size_t i;
	bool ok = json_array_size(json_object_get(l, "tools")) == mcp_ntools;

	json_array_foreach(json_object_get(l, "tools"), i, t) {
		const json_t *s = json_object_get(t, "inputSchema");

		ok = ok && strcmp(json_string_value(json_object_get(s, "type")), "object") == 0 &&
		     json_is_object(json_object_get(s, "properties")) && json_string_length(json_object_get(t, "description")) > 0;
		for (size_t k = 0; k < i; k++)
			ok = ok && strcmp(mcp_tools[k].name, mcp_tools[i].name) != 0;
	}
	CHECK(ok, "every tool has a unique name, a description and an object schema (%zu tools)", mcp_ntools);
	static const char *const names[] = { "create_sandbox", "run_command", "run_code", "read_file", "write_file",
					     "list_files", "expose_port", "fork_sandbox", "snapshot", "pause",
					     "resume", "delete_sandbox", "list_sandboxes" };
	ok = true;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		ok = ok && mcp_tool_find(names[i]) && strcmp(mcp_tool_find(names[i])->name, names[i]) == 0;
	CHECK(ok && !mcp_tool_find("nope") && !mcp_tool_find(NULL), "find each tool by name");
	json_decref(l);
}

static void test_args(void)
{
	static const struct {
		const char *tool, *args, *msg; /* msg NULL: passes */
	} cases[] = {
		{ "run_command", "{\"sandbox_id\":\"sb-1\",\"command\":\"ls\"}", NULL },
		{ "run_command", "{\"sandbox_id\":\"sb-1\"}", "missing argument 'command'" },
		{ "run_command", "{\"command\":\"ls\"}", "missing argument 'sandbox_id'" },
		{ "run_command", "{\"sandbox_id\":\"sb-1\",\"command\":42}", "argument 'command' must be a string" },
		{ "run_command", "{\"sandbox_id\":\"sb-1\",\"command\":\"\"}", "argument 'command' must not be empty" },
		{ "run_command", "{\"sandbox_id\":\"sb-1\",\"command\":\"x\",\"timeout\":0}", "must be at least 1" },
		{ "run_command", "{\"sandbox_id\":\"sb-1\",\"command\":\"x\",\"timeout\":3601}", "must be at most 3600" },
		{ "run_command", "{\"sandbox_id\":\"sb-1\",\"command\":\"x\",\"timeout\":1.5}", "must be an integer" },
		{ "run_command", "{\"sandbox_id\":\"sb-1\",\"command\":\"x\",\"env\":[]}", "must be an object" },
		{ "run_command", "{\"sandbox_id\":\"sb-1\",\"command\":\"x\",\"bogus\":1}", "unknown argument 'bogus'" },
		{ "run_command", "{\"sandbox_id\":\"sb-1\",\"command\":\"x\",\"timeout\":null}", NULL },
		{ "run_command", "[]", "arguments must be an object" },
		{ "create_sandbox", "{}", NULL },
		{ "create_sandbox", "{\"template\":\"base\",\"internet\":true,\"timeout\":600}", NULL },
		{ "create_sandbox", "{\"internet\":\"yes\"}", "must be a boolean" },
		{ "pause", "{\"sandbox_id\":\"sb-1\",\"mode\":\"disk\"}", NULL },
		{ "pause", "{\"sandbox_id\":\"sb-1\",\"mode\":\"cpu\"}", "must be one of" },
		{ "expose_port", "{\"sandbox_id\":\"sb-1\",\"port\":65536}", "at most 65535" },
		{ "list_sandboxes", "{\"x\":1}", "(this tool takes: none)" },
		{ "snapshot", "{\"sandbox_id\":\"sb-1\",\"name\":\"" "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" "\"}", "longer than 100 bytes" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct mcp_tool *t = mcp_tool_find(cases[i].tool);
		json_t *a = J(cases[i].args);
		space_err e = { 0 };
		int rc = t ? mcp_args_check(t->schema, a, &e) : -2;

		if (!cases[i].msg)
			CHECK(rc == 0, "%s %s passes (%s)", cases[i].tool, cases[i].args, e.msg);
		else
			CHECK(rc < 0 && strstr(e.msg, cases[i].msg), "%s %s -> '%s' (got '%s')", cases[i].tool, cases[i].args,
			      cases[i].msg, e.msg);
		json_decref(a);
	}
}

static void test_nul(void)
{
	const char *body = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"a\":\"a\\u0000b\"}}";
	json_t *msgs = NULL, *reply = NULL, *a = json_pack("{s:s,s:s#}", "sandbox_id", "sb-1", "command", "a\0b", (size_t)3);
	space_err e = { 0 };
	bool batch;

	CHECK(mcp_parse_body(body, strlen(body), &msgs, &batch, &reply) < 0 && err_code_of(reply) == MCP_PARSE_ERROR,
	      "a \\u0000 in a message is a parse error");
	CHECK(mcp_args_check(mcp_tool_find("run_command")->schema, a, &e) < 0 && strstr(e.msg, "holds a NUL"),
	      "an argument holding NUL is refused (%s)", e.msg);
	json_decref(reply);
	json_decref(a);
}

static void test_text(void)
{
	bool cut;
	json_t *t;

	CHECK(mcp_utf8_cut("abc", 3, 10) == 3 && mcp_utf8_cut("abcdef", 6, 4) == 4, "cut ascii");
	/* "aé" = 61 c3 a9: a cut after 2 bytes would split é */
	CHECK(mcp_utf8_cut("a\xc3\xa9", 3, 2) == 1, "a cut never splits a character");
	CHECK(mcp_utf8_cut("\xe2\x82\xac\xe2\x82\xac", 6, 4) == 3, "a 3-byte character is kept whole or left out");
	t = mcp_text("hello", 5, 3, &cut);
	CHECK(t && strcmp(json_string_value(t), "hel") == 0 && cut, "text cut to max, flagged");
	json_decref(t);
	t = mcp_text("a\xff" "b\xc3", 4, 100, &cut);
	CHECK(t && strcmp(json_string_value(t), "a\xef\xbf\xbd" "b\xef\xbf\xbd") == 0 && !cut,
	      "invalid UTF-8 becomes U+FFFD (got %s)", t ? json_string_value(t) : "NULL");
	json_decref(t);
	t = mcp_text("\xed\xa0\x80", 3, 100, &cut); /* a UTF-16 surrogate, encoded */
	CHECK(t && strcmp(json_string_value(t), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd") == 0, "surrogates are not UTF-8");
	json_decref(t);
	t = mcp_text("a\0b", 3, 100, &cut);
	CHECK(t && json_string_length(t) == 3, "NUL bytes are kept (JSON escapes them)");
	json_decref(t);
	json_t *r = mcp_tool_result("boom", NULL, true);

	CHECK(r && json_is_true(json_object_get(r, "isError")) &&
		      strcmp(json_string_value(json_object_get(json_array_get(json_object_get(r, "content"), 0), "text")), "boom") == 0,
	      "a tool error is a result with isError");
	json_decref(r);
}

static void test_uri(void)
{
	static const struct {
		const char *uri, *id, *path; /* id NULL: refused */
	} cases[] = {
		{ "space://sandboxes/sb-0123456789abcdef/files/home/user/a.txt", "sb-0123456789abcdef", "/home/user/a.txt" },
		{ "space://sandboxes/sb-0123456789abcdef/files/%2Fetc%2Fhostname", "sb-0123456789abcdef", "/etc/hostname" },
		{ "space://sandboxes/sb-0123456789abcdef/files//etc", "sb-0123456789abcdef", "/etc" },
		{ "space://sandboxes/sb-0123456789abcdef/files/a%20b", "sb-0123456789abcdef", "/a b" },
		{ "space://sandboxes/sb-0123456789abcdef/files/", NULL, NULL },
		{ "space://sandboxes/sb-0123456789abcdef/files/a%00b", NULL, NULL },
		{ "space://sandboxes/sb-0123456789abcdef/files/a%zz", NULL, NULL },
		{ "space://sandboxes/sb-0123456789abcdef/files/a?x", NULL, NULL },
		{ "space://sandboxes/sb-0123456789abcdef/other/a", NULL, NULL },
		{ "space://sandboxes/not-an-id/files/a", NULL, NULL },
		{ "file:///etc/passwd", NULL, NULL },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char id[64] = "", path[256] = "";
		int rc = mcp_uri_parse(cases[i].uri, id, sizeof(id), path, sizeof(path));

		if (cases[i].id)
			CHECK(rc == 0 && strcmp(id, cases[i].id) == 0 && strcmp(path, cases[i].path) == 0, "uri %s -> %s %s (got %s %s)",
			      cases[i].uri, cases[i].id, cases[i].path, id, path);
		else
			CHECK(rc < 0, "uri %s refused", cases[i].uri);
	}
	json_t *t = mcp_resource_templates();

	CHECK(t && strstr(json_string_value(json_object_get(json_array_get(json_object_get(t, "resourceTemplates"), 0),
							    "uriTemplate")),
			  "{sandbox_id}"),
	      "the URI template names sandbox_id");
	json_decref(t);
}

int main(void)
{
	RUN(test_parse_body);
	RUN(test_classify);
	RUN(test_replies);
	RUN(test_negotiate);
	RUN(test_sessions);
	RUN(test_tool_table);
	RUN(test_args);
	RUN(test_nul);
	RUN(test_text);
	RUN(test_uri);
	return DONE();
}
