/* test_files_api.c -- the files routes' pure parts: Range headers, errno -> HTTP status and
 * code, and PTY sizes in requests */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "front/fop.h"
#include "front/req.h"
#include "harness.h"

static void range_forms(void)
{
	uint64_t off = 7, len = 7;

	EXPECT_EQ(files_parse_range(NULL, &off, &len), 1);
	EXPECT_EQ(files_parse_range("bytes=0-0", &off, &len), 0);
	EXPECT_EQ(off, 0);
	EXPECT_EQ(len, 1);
	EXPECT_EQ(files_parse_range("bytes=100-1099", &off, &len), 0);
	EXPECT_EQ(off, 100);
	EXPECT_EQ(len, 1000);
	EXPECT_EQ(files_parse_range("BYTES=5-", &off, &len), 0);
	EXPECT_EQ(off, 5);
	EXPECT(len == UINT64_MAX);
	/* Forms served as the whole file (RFC 9110 lets a server ignore Range). */
	EXPECT_EQ(files_parse_range("bytes=-500", &off, &len), 1);
	EXPECT_EQ(files_parse_range("bytes=0-1,5-6", &off, &len), 1);
	/* Malformed. */
	EXPECT_EQ(files_parse_range("items=0-1", &off, &len), -1);
	EXPECT_EQ(files_parse_range("bytes=5", &off, &len), -1);
	EXPECT_EQ(files_parse_range("bytes=9-3", &off, &len), -1);
	EXPECT_EQ(files_parse_range("bytes=x-3", &off, &len), -1);
	EXPECT_EQ(files_parse_range("bytes=1-y", &off, &len), -1);
	EXPECT_EQ(files_parse_range("bytes=+1-3", &off, &len), -1);
	EXPECT_EQ(files_parse_range("bytes=99999999999999999999999-", &off, &len), -1);
	EXPECT_EQ(files_parse_range("bytes=123456789012345678901234567890-", &off, &len), -1);
}

static void errno_map(void)
{
	static const struct {
		int e, status;
		const char *code;
	} want[] = {
		{ ENOENT, 404, "not_found" },      { EEXIST, 409, "already_exists" },
		{ ENOTEMPTY, 409, "not_empty" },   { EACCES, 403, "permission_denied" },
		{ EPERM, 403, "permission_denied" }, { ENOTDIR, 400, "not_a_directory" },
		{ EISDIR, 400, "is_a_directory" }, { EINVAL, 400, "invalid_argument" },
		{ ERANGE, 416, "range_not_satisfiable" }, { ENOSPC, 507, "no_space" },
		{ EROFS, 403, "read_only" },       { EIO, 500, "io_error" },
		{ 0, 500, "io_error" },            { 200, 500, "io_error" },
	};

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		int status = 0;
		const char *code = NULL;

		files_errno_http(want[i].e, &status, &code);
		EXPECT_EQ(status, want[i].status);
		EXPECT(code && strcmp(code, want[i].code) == 0);
	}
}

static void pty_sizes(void)
{
	space_err err = { 0 };
	uint16_t rows = 0, cols = 0;
	json_t *j;

	j = json_pack("{s:i,s:i}", "rows", 50, "cols", 132);
	EXPECT_EQ(req_pty_size(j, &rows, &cols, &err), 0);
	EXPECT_EQ(rows, 50);
	EXPECT_EQ(cols, 132);
	json_decref(j);
	j = json_object();
	EXPECT_EQ(req_pty_size(j, &rows, &cols, &err), 0);
	EXPECT_EQ(rows, 24);
	EXPECT_EQ(cols, 80);
	json_decref(j);
	const char *bad[] = { "{\"rows\":0,\"cols\":80}", "{\"rows\":1001,\"cols\":80}", "{\"rows\":24,\"cols\":-1}",
			      "{\"rows\":\"24\"}", "{\"rows\":24,\"depth\":1}", "[]" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		j = json_loads(bad[i], 0, NULL);
		err_clear(&err);
		EXPECT_EQ(req_pty_size(j, &rows, &cols, &err), -1);
		EXPECT_EQ(err.code, EINVAL);
		json_decref(j);
	}
}

int main(void)
{
	RUN(range_forms);
	RUN(errno_map);
	RUN(pty_sizes);
	return DONE();
}
