/* tool_files.c -- read_file, write_file and list_files (and resources/read, a read_file
 * answered as resource contents) over the file-operation engine every front end uses
 * (front/fop.h): the guest's operation runs as one reply, and these routes take the request
 * over at its end (on_done, on_error) to answer a JSON-RPC result instead of raw bytes. */
#include <event2/buffer.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "front/fop.h"
#include "mcp.h"
#include "sandbox/sandbox.h"

/* The route's state, freed by the engine (free_ctx) whatever happened: a call it never
 * answered (the client left) ends there. */
struct fctx {
	struct mcp_call *c;
	bool answered;
	const char *content;  /* write_file: the content (borrowed from the call's arguments) */
	size_t clen, coff;
	json_t *entries;      /* list_files */
	size_t nentries;      /* every entry the guest listed */
	char path[4096];
};

static void fctx_free(void *arg)
{
	struct fctx *x = arg;

	if (!x)
		return;
	if (!x->answered)
		mcp_call_gone(x->c);
	json_decref(x->entries);
	free(x);
}

static void on_error(struct fop *f, int e, int status, const char *code, const char *msg)
{
	struct fctx *x = fop_ctx(f);

	(void)e;
	(void)status;
	(void)code;
	x->answered = true;
	mcp_call_fail(x->c, "%s %s: %s", x->c->tool->name, x->path, msg);
}

/* The call's sandbox and path (absolute); a new context, or NULL having answered. */
static struct fctx *begin(struct mcp_call *c, const char *path, const char **id)
{
	struct fctx *x;

	if (mcp_arg_sandbox(c, id) < 0)
		return NULL;
	if (!path || path[0] != '/') {
		mcp_call_fail(c, "%s: path must be an absolute path in the sandbox, such as /home/user/a.txt, not '%.200s'",
			      c->tool->name, path ? path : "");
		return NULL;
	}
	if (!(x = calloc(1, sizeof(*x)))) {
		mcp_call_fail(c, "%s: out of memory", c->tool->name);
		return NULL;
	}
	x->c = c;
	snprintf(x->path, sizeof(x->path), "%s", path);
	return x;
}

/* Hands the request to the engine (which holds it until on_done or on_error). */
static void run(struct mcp_call *c, const char *id, const struct fop_kind *k, const char *const *argv, struct fctx *x)
{
	struct http_req r = { .d = c->d, .req = mcp_call_req(c) };

	mcp_call_unhold(c);
	fop_run(&r, id, k, argv, NULL, x);
}

/* ---- read_file ---- */

static int read_header(struct fop *f)
{
	json_t *h = fop_header(f);
	json_int_t size = json_integer_value(json_object_get(h, "size"));
	json_int_t off = json_integer_value(json_object_get(h, "offset"));
	json_int_t len = json_integer_value(json_object_get(h, "length"));

	/* The guest's word must describe what was asked for: from 0, at most what we asked. */
	if (size < 0 || off != 0 || len < 0 || len > size || (uint64_t)len > MCP_READ_MAX + 4)
		return -1;
	return 0;
}

static int read_raw(struct fop *f, const uint8_t *p, size_t n, struct evbuffer *out)
{
	(void)f;
	if (evbuffer_get_length(out) + n > MCP_READ_MAX + 4)
		return -1;
	return evbuffer_add(out, p, n);
}

static void read_done(struct fop *f, struct evbuffer *out)
{
	struct fctx *x = fop_ctx(f);
	struct mcp_call *c = x->c;
	json_int_t size = json_integer_value(json_object_get(fop_header(f), "size"));
	size_t n = evbuffer_get_length(out);
	const char *p = n ? (const char *)evbuffer_pullup(out, -1) : "";
	bool cut;
	json_t *text = mcp_text(p ? p : "", p ? n : 0, MCP_READ_MAX, &cut);
	char *shown = NULL;

	x->answered = true;
	if (!text) {
		mcp_call_fail(c, "read_file: out of memory");
		return;
	}
	cut = cut || (uint64_t)size > n;
	if (c->uri) {
		/* resources/read: the contents, not a tool result */
		mcp_call_done(c, json_pack("{s:[{s:s,s:s,s:o}]}", "contents", "uri", c->uri, "mimeType", "text/plain",
					   "text", text));
		return;
	}
	/* The text an agent reads says when it is not the whole file. */
	if (cut && asprintf(&shown, "%s\n[truncated: the file has %" PRId64 " bytes; the first %zu are shown]",
			    json_string_value(text), (int64_t)size, json_string_length(text)) < 0)
		shown = NULL;
	mcp_call_done(c, mcp_tool_result(shown ? shown : json_string_value(text),
					 json_pack("{s:s,s:O,s:I,s:b}", "path", x->path, "content", text, "size", size,
						   "truncated", cut),
					 false));
	json_decref(text);
	free(shown);
}

static const struct fop_kind k_read = {
	.kind = SESS_KIND_FILE, .on_header = read_header, .on_raw = read_raw, .on_error = on_error,
	.on_done = read_done, .free_ctx = fctx_free,
};

void mcp_tool_read_file(struct mcp_call *c)
{
	const char *id;
	struct fctx *x = begin(c, mcp_arg_str(c, "path"), &id);
	char len[24];

	if (!x)
		return;
	snprintf(len, sizeof(len), "%u", MCP_READ_MAX + 4);
	run(c, id, &k_read, (const char *[]){ "read", x->path, "0", len, NULL }, x);
}

/* ---- write_file ---- */

static int write_stdin(struct fop *f, struct evbuffer *in, size_t room)
{
	struct fctx *x = fop_ctx(f);
	size_t n = x->clen - x->coff < room ? x->clen - x->coff : room;

	if (n && evbuffer_add(in, x->content + x->coff, n) < 0)
		return -1;
	x->coff += n;
	return x->coff == x->clen ? 1 : 0;
}

static void write_done(struct fop *f, struct evbuffer *out)
{
	struct fctx *x = fop_ctx(f);

	(void)out;
	x->answered = true;
	mcp_call_done(x->c, mcp_tool_json(json_pack("{s:s,s:I}", "path", x->path, "bytes", (json_int_t)x->clen)));
}

static const struct fop_kind k_write = {
	.kind = SESS_KIND_FILE, .with_stdin = true, .pull_stdin = write_stdin, .on_error = on_error,
	.on_done = write_done, .free_ctx = fctx_free,
};

void mcp_tool_write_file(struct mcp_call *c)
{
	const char *id;
	struct fctx *x = begin(c, mcp_arg_str(c, "path"), &id);
	json_t *content = json_object_get(c->args, "content");

	if (!x)
		return;
	x->content = json_string_value(content);
	x->clen = json_string_length(content);
	run(c, id, &k_write, (const char *[]){ "write", x->path, "-", "-p", NULL }, x);
}

/* ---- list_files ---- */

static int list_line(struct fop *f, const char *line, size_t len, struct evbuffer *out)
{
	struct fctx *x = fop_ctx(f);
	json_t *e;

	(void)out;
	if (++x->nentries > MCP_LIST_MAX)
		return 0; /* counted, not kept */
	e = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(e)) {
		json_decref(e);
		return -1;
	}
	return json_array_append_new(x->entries, e);
}

static void list_done(struct fop *f, struct evbuffer *out)
{
	struct fctx *x = fop_ctx(f);
	json_t *res;

	(void)out;
	x->answered = true;
	res = json_pack("{s:s,s:O}", "path", x->path, "entries", x->entries);
	if (res && x->nentries > MCP_LIST_MAX) {
		char note[128];

		snprintf(note, sizeof(note), "truncated: %zu entries, the first %d are listed", x->nentries, MCP_LIST_MAX);
		json_object_set_new(res, "note", json_string(note));
	}
	mcp_call_done(x->c, mcp_tool_json(res));
}

static const struct fop_kind k_list = {
	.kind = SESS_KIND_FILE, .on_line = list_line, .on_error = on_error, .on_done = list_done,
	.free_ctx = fctx_free,
};

void mcp_tool_list_files(struct mcp_call *c)
{
	const char *id, *path = mcp_arg_str(c, "path");
	struct fctx *x = begin(c, path ? path : "/home/user", &id);
	char depth[8];

	if (!x)
		return;
	if (!(x->entries = json_array())) {
		x->answered = true;
		mcp_call_fail(c, "list_files: out of memory");
		fctx_free(x);
		return;
	}
	snprintf(depth, sizeof(depth), "%d", (int)mcp_arg_int(c, "depth", 1));
	run(c, id, &k_list, (const char *[]){ "list", x->path, depth, NULL }, x);
}
