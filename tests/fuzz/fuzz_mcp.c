/* fuzz_mcp.c -- libFuzzer target: a POST body to /mcp through the MCP front end's pure parsers:
 * mcp_parse_body (one message or a batch), mcp_classify of each message, every tool's schema
 * check (mcp_args_check) on each message's params.arguments, and the input as a resource URI
 * (mcp_uri_parse) and as text to render (mcp_text, mcp_utf8_cut).
 *
 * Besides the sanitizers, the contracts are checked: a refused body answers one of the
 * envelope's error codes; a refused argument set carries EINVAL and a message; a URI that
 * parses names a sandbox id and an absolute path; rendered text is valid JSON of at most three
 * bytes per input byte. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/mcp.h"
#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MUST(c) do { if (!(c)) { fprintf(stderr, "fuzz_mcp: %s:%d: %s\n", __FILE__, __LINE__, #c); abort(); } } while (0)

static void check_args(const json_t *m)
{
	json_t *args = json_object_get(json_object_get(m, "params"), "arguments");

	if (!args)
		return;
	for (size_t i = 0; i < mcp_ntools; i++) {
		space_err err = { 0 };
		int rc = mcp_args_check(mcp_tools[i].schema, args, &err);

		MUST(rc == 0 || (rc == -1 && err.code == EINVAL && err.msg[0]));
	}
}

static void check_text(const uint8_t *data, size_t size)
{
	bool cut;
	size_t max = size ? data[0] : 0;
	json_t *t = mcp_text((const char *)data, size, max, &cut);

	MUST(t && json_is_string(t));
	MUST(json_string_length(t) <= 3 * (size < max ? size : max));
	MUST(cut == (mcp_utf8_cut((const char *)data, size, max) < size));
	json_decref(t);
}

static void check_uri(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1), id[ID_LEN], path[4096];

	if (!s)
		return;
	memcpy(s, data, size);
	s[size] = '\0';
	if (mcp_uri_parse(s, id, sizeof(id), path, sizeof(path)) == 0) {
		MUST(id_valid(id, "sb-"));
		MUST(path[0] == '/' && strlen(path) > 1);
	}
	free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *msgs = NULL, *reply = NULL, *m;
	bool batch = false;
	size_t i;

	if (mcp_parse_body((const char *)data, size, &msgs, &batch, &reply) < 0) {
		int code = (int)json_integer_value(json_object_get(json_object_get(reply, "error"), "code"));

		MUST(!msgs && reply);
		MUST(code == MCP_PARSE_ERROR || code == MCP_INVALID_REQUEST || code == MCP_INTERNAL_ERROR);
	} else {
		MUST(json_is_array(msgs) && json_array_size(msgs) >= 1 && json_array_size(msgs) <= MCP_BATCH_MAX);
		MUST(batch || json_array_size(msgs) == 1);
		json_array_foreach(msgs, i, m) {
			const char *why = NULL;
			enum mcp_kind k = mcp_classify(m, &why);

			MUST((k == MCP_INVALID) == (why != NULL));
			if (k == MCP_REQUEST || k == MCP_NOTIFICATION)
				check_args(m);
		}
	}
	json_decref(msgs);
	json_decref(reply);
	check_text(data, size);
	check_uri(data, size);
	return 0;
}
