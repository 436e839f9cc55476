/* tools.c -- the MCP tool table: each tool's name, description and input schema (the one
 * source of its arguments' rules at this layer: tools/list shows it, mcp_args_check enforces
 * it before the tool runs), and the helpers the tools render their results with. What a value
 * means for a sandbox is checked again by the core's own parsers (front/req.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mcp.h"

#define SB "\"sandbox_id\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64,\"description\":\"the sandbox's id, as create_sandbox or list_sandboxes gave it (sb-...)\"}"
#define PATH_ARG(what) "\"path\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4095,\"description\":\"" what "\"}"

const struct mcp_tool mcp_tools[] = {
	{ "create_sandbox",
	  "Create a sandbox (a Linux microVM) from a template and wait until it runs. Returns its sandbox_id. "
	  "Template \"base\" has python3, \"minimal\" only a shell, \"code-interpreter-v1\" what run_code needs. "
	  "The network is closed unless internet is true or a network policy is given.",
	  "{\"type\":\"object\",\"properties\":{"
	  "\"template\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":127,\"description\":\"template name (default \\\"base\\\")\"},"
	  "\"snapshot\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":127,\"description\":\"start from this snapshot (a name or sn- id) instead of a template\"},"
	  "\"internet\":{\"type\":\"boolean\",\"description\":\"outbound access to the public internet (default false)\"},"
	  "\"network\":{\"type\":\"object\",\"description\":\"an egress policy: {\\\"allow\\\": [CIDRs or host names], \\\"deny\\\": [...]}\"},"
	  "\"timeout\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":604800,\"description\":\"seconds until it is deleted (0: never; default: the template's)\"},"
	  "\"env\":{\"type\":\"object\",\"description\":\"environment variables of its commands (strings)\"}"
	  "},\"additionalProperties\":false}",
	  mcp_tool_create, false, false },
	{ "run_command",
	  "Run a shell command (/bin/sh -c) in a sandbox and wait for it to end. Returns stdout, stderr and "
	  "exit_code; output beyond 64 KiB per stream is cut (with a note). With a progressToken the output also "
	  "comes as progress notifications while it runs.",
	  "{\"type\":\"object\",\"properties\":{" SB ","
	  "\"command\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":65536,\"description\":\"a shell command line\"},"
	  "\"cwd\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":1023,\"description\":\"working directory (default: the user's home)\"},"
	  "\"user\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":32,\"description\":\"user to run as (default: the template's)\"},"
	  "\"env\":{\"type\":\"object\",\"description\":\"extra environment variables (strings)\"},"
	  "\"timeout\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":3600,\"description\":\"seconds before it is killed (default 60)\"}"
	  "},\"required\":[\"sandbox_id\",\"command\"],\"additionalProperties\":false}",
	  mcp_tool_run_command, false, false },
	{ "run_code",
	  "Run Python code in a sandbox and return what it printed and its error, if any. Needs python3 in the "
	  "template (\"base\", \"code-interpreter-v1\"). Each call is a fresh interpreter.",
	  "{\"type\":\"object\",\"properties\":{" SB ","
	  "\"code\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":262144,\"description\":\"Python source\"},"
	  "\"timeout\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":3600,\"description\":\"seconds before it is killed (default 60)\"}"
	  "},\"required\":[\"sandbox_id\",\"code\"],\"additionalProperties\":false}",
	  mcp_tool_run_code, false, false },
	{ "read_file",
	  "Read a file of a sandbox. Text comes as text (invalid UTF-8 replaced); at most 256 KiB (a note says when it was cut).",
	  "{\"type\":\"object\",\"properties\":{" SB "," PATH_ARG("absolute path of the file") "},"
	  "\"required\":[\"sandbox_id\",\"path\"],\"additionalProperties\":false}",
	  mcp_tool_read_file, true, false },
	{ "write_file",
	  "Write a file in a sandbox (created or replaced whole, atomically; missing parent directories are made).",
	  "{\"type\":\"object\",\"properties\":{" SB "," PATH_ARG("absolute path of the file") ","
	  "\"content\":{\"type\":\"string\",\"maxLength\":1048576,\"description\":\"the file's text\"}"
	  "},\"required\":[\"sandbox_id\",\"path\",\"content\"],\"additionalProperties\":false}",
	  mcp_tool_write_file, false, false },
	{ "list_files",
	  "List a directory of a sandbox: each entry's name, type, size and mode (at most 1000 entries).",
	  "{\"type\":\"object\",\"properties\":{" SB "," PATH_ARG("absolute path of the directory (default /home/user)") ","
	  "\"depth\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":8,\"description\":\"levels to descend (default 1)\"}"
	  "},\"required\":[\"sandbox_id\"],\"additionalProperties\":false}",
	  mcp_tool_list_files, true, false },
	{ "expose_port",
	  "Make a TCP port of a sandbox reachable over HTTP: returns its URL and, unless public, a token to send "
	  "as the X-Space-Token header (or ?space_token=).",
	  "{\"type\":\"object\",\"properties\":{" SB ","
	  "\"port\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":65535},"
	  "\"public\":{\"type\":\"boolean\",\"description\":\"open to anyone, without a token (default false)\"}"
	  "},\"required\":[\"sandbox_id\",\"port\"],\"additionalProperties\":false}",
	  mcp_tool_expose_port, false, false },
	{ "fork_sandbox",
	  "Copy a running sandbox (memory and disk, at one instant) into new sandboxes; returns their ids.",
	  "{\"type\":\"object\",\"properties\":{" SB ","
	  "\"count\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":16,\"description\":\"how many copies (default 1)\"}"
	  "},\"required\":[\"sandbox_id\"],\"additionalProperties\":false}",
	  mcp_tool_fork, false, false },
	{ "snapshot",
	  "Save a sandbox (memory and disk) as a named snapshot that outlives it; create_sandbox can start from it "
	  "(its snapshot argument).",
	  "{\"type\":\"object\",\"properties\":{" SB ","
	  "\"name\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":100,\"description\":\"letters, digits, . _ -\"}"
	  "},\"required\":[\"sandbox_id\",\"name\"],\"additionalProperties\":false}",
	  mcp_tool_snapshot, false, false },
	{ "pause",
	  "Pause a sandbox: its vCPUs stop (mode \"memory\", the default) or its memory goes to disk and the VM exits "
	  "(mode \"disk\"). resume brings it back as it was.",
	  "{\"type\":\"object\",\"properties\":{" SB ","
	  "\"mode\":{\"type\":\"string\",\"enum\":[\"memory\",\"disk\"]}"
	  "},\"required\":[\"sandbox_id\"],\"additionalProperties\":false}",
	  mcp_tool_pause, false, false },
	{ "resume",
	  "Resume a paused, suspended or stopped sandbox and wait until it runs.",
	  "{\"type\":\"object\",\"properties\":{" SB "},\"required\":[\"sandbox_id\"],\"additionalProperties\":false}",
	  mcp_tool_resume, false, false },
	{ "delete_sandbox",
	  "Delete a sandbox and everything in it.",
	  "{\"type\":\"object\",\"properties\":{" SB "},\"required\":[\"sandbox_id\"],\"additionalProperties\":false}",
	  mcp_tool_delete, false, true },
	{ "list_sandboxes",
	  "List the sandboxes that exist (not deleted): id, template, state, created_at.",
	  "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}",
	  mcp_tool_list_sandboxes, true, false },
};
const size_t mcp_ntools = sizeof(mcp_tools) / sizeof(mcp_tools[0]);

const struct mcp_tool *mcp_tool_find(const char *name)
{
	for (size_t i = 0; name && i < mcp_ntools; i++)
		if (strcmp(mcp_tools[i].name, name) == 0)
			return &mcp_tools[i];
	return NULL;
}

json_t *mcp_tools_list(void)
{
	json_t *arr = json_array();

	for (size_t i = 0; arr && i < mcp_ntools; i++) {
		const struct mcp_tool *t = &mcp_tools[i];
		json_t *schema = json_loads(t->schema, 0, NULL);
		json_t *one = schema ? json_pack("{s:s,s:s,s:o,s:{s:b,s:b}}", "name", t->name, "description",
						 t->description, "inputSchema", schema, "annotations", "readOnlyHint",
						 t->read_only, "destructiveHint", t->destructive)
				     : NULL;

		if (!one || json_array_append_new(arr, one) < 0) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr ? json_pack("{s:o}", "tools", arr) : NULL;
}

/* ---- argument checks ---- */

static bool type_is(const json_t *v, const char *type)
{
	if (strcmp(type, "string") == 0)
		return json_is_string(v);
	if (strcmp(type, "integer") == 0)
		return json_is_integer(v);
	if (strcmp(type, "number") == 0)
		return json_is_number(v);
	if (strcmp(type, "boolean") == 0)
		return json_is_boolean(v);
	if (strcmp(type, "object") == 0)
		return json_is_object(v);
	if (strcmp(type, "array") == 0)
		return json_is_array(v);
	return false;
}

static int check_one(const char *name, const json_t *prop, const json_t *v, space_err *err)
{
	const char *type = json_string_value(json_object_get(prop, "type"));
	const json_t *min = json_object_get(prop, "minimum"), *max = json_object_get(prop, "maximum");
	const json_t *minl = json_object_get(prop, "minLength"), *maxl = json_object_get(prop, "maxLength");
	const json_t *en = json_object_get(prop, "enum"), *e;
	size_t i;

	if (type && !type_is(v, type))
		return err_set(err, EINVAL, "argument '%s' must be %s %s", name,
			       strchr("aeiou", type[0]) ? "an" : "a", type);
	if (json_is_integer(v) && min && json_integer_value(v) < json_integer_value(min))
		return err_set(err, EINVAL, "argument '%s' must be at least %lld", name,
			       (long long)json_integer_value(min));
	if (json_is_integer(v) && max && json_integer_value(v) > json_integer_value(max))
		return err_set(err, EINVAL, "argument '%s' must be at most %lld", name,
			       (long long)json_integer_value(max));
	if (json_is_string(v) && minl && json_string_length(v) < (size_t)json_integer_value(minl))
		return err_set(err, EINVAL, "argument '%s' must not be empty", name);
	if (json_is_string(v) && maxl && json_string_length(v) > (size_t)json_integer_value(maxl))
		return err_set(err, EINVAL, "argument '%s' is longer than %lld bytes", name,
			       (long long)json_integer_value(maxl));
	if (json_is_string(v) && strlen(json_string_value(v)) != json_string_length(v))
		return err_set(err, EINVAL, "argument '%s' holds a NUL character", name);
	if (en) {
		json_array_foreach(en, i, e)
			if (json_equal(e, v))
				return 0;
		return err_set(err, EINVAL, "argument '%s' must be one of the values its schema lists", name);
	}
	return 0;
}

int mcp_args_check(const char *schema, const json_t *args, space_err *err)
{
	json_t *s = json_loads(schema, 0, NULL), *props, *req, *v;
	const char *key;
	size_t i;
	int rc = 0;

	if (!s)
		return err_set(err, EINVAL, "internal: a tool's schema does not parse");
	props = json_object_get(s, "properties");
	req = json_object_get(s, "required");
	if (!json_is_object(args)) {
		rc = err_set(err, EINVAL, "arguments must be an object");
		goto out;
	}
	json_array_foreach(req, i, v) {
		if (!json_object_get(args, json_string_value(v))) {
			rc = err_set(err, EINVAL, "missing argument '%s'", json_string_value(v));
			goto out;
		}
	}
	json_object_foreach((json_t *)args, key, v) {
		json_t *p = json_object_get(props, key);

		if (!p) {
			char names[512] = "";
			const char *k2;
			json_t *p2;
			size_t n = 0;

			json_object_foreach(props, k2, p2) {
				(void)p2;
				n += (size_t)snprintf(names + n, n < sizeof(names) ? sizeof(names) - n : 0, "%s%s",
						      n ? ", " : "", k2);
			}
			rc = err_set(err, EINVAL, "unknown argument '%.64s' (this tool takes: %s)", key,
				     names[0] ? names : "none");
			goto out;
		}
		if (json_is_null(v))
			continue; /* as absent */
		if ((rc = check_one(key, p, v, err)) < 0)
			goto out;
	}
out:
	json_decref(s);
	return rc;
}

/* ---- text ---- */

/* The length of the valid UTF-8 character at s (n bytes available), or 0 if there is none. */
static size_t utf8_char(const unsigned char *s, size_t n)
{
	size_t need;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		need = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		need = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		need = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (n < need)
		return 0;
	for (size_t i = 1; i < need; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((need == 3 && cp < 0x800) || (need == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return need;
}

size_t mcp_utf8_cut(const char *s, size_t len, size_t max)
{
	size_t n = len < max ? len : max;

	if (n == len)
		return n;
	/* s[n] is the first byte left out: back off to the start of the character it is in. */
	for (int k = 0; k < 3 && n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80; k++)
		n--;
	return n;
}

json_t *mcp_text(const char *s, size_t len, size_t max, bool *cut)
{
	size_t n = mcp_utf8_cut(s, len, max), o = 0;
	char *buf = malloc(n * 3 + 1);
	json_t *j;

	*cut = n < len;
	if (!buf)
		return NULL;
	for (size_t i = 0; i < n;) {
		size_t c = utf8_char((const unsigned char *)s + i, n - i);

		if (c == 0) {
			memcpy(buf + o, "\xef\xbf\xbd", 3); /* U+FFFD */
			o += 3;
			i++;
			continue;
		}
		memcpy(buf + o, s + i, c);
		o += c;
		i += c;
	}
	j = json_stringn(buf, o);
	free(buf);
	return j;
}

json_t *mcp_tool_result(const char *text, json_t *structured, bool is_error)
{
	json_t *r = json_pack("{s:[{s:s,s:s}],s:b}", "content", "type", "text", "text", text, "isError", is_error);

	if (r && structured && json_object_set_new(r, "structuredContent", structured) < 0) {
		json_decref(r);
		return NULL;
	}
	if (!r)
		json_decref(structured);
	return r;
}

json_t *mcp_tool_json(json_t *structured)
{
	char *text = structured ? json_dumps(structured, JSON_INDENT(2)) : NULL;
	json_t *r;

	if (!text) {
		json_decref(structured);
		return NULL;
	}
	r = mcp_tool_result(text, structured, false);
	free(text);
	return r;
}
