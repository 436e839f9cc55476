/* test_limits.c -- hostile clients, the pure parts: cap accounting, where a data-plane token may
 * come from, token redaction in logged URIs, and which key files are accepted. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "dataplane/dataplane.h"
#include "http/http.h"
#include "keyfile.h"

static void test_caps(void)
{
	CHECK(http_cap_check(0, 0, 10, 5) == HTTP_CAP_OK, "empty: admitted");
	CHECK(http_cap_check(9, 4, 10, 5) == HTTP_CAP_OK, "one below both caps: admitted");
	CHECK(http_cap_check(10, 0, 10, 5) == HTTP_CAP_TOTAL, "at the total cap: refused (total)");
	CHECK(http_cap_check(3, 5, 10, 5) == HTTP_CAP_GROUP, "at the group cap: refused (group)");
	CHECK(http_cap_check(10, 5, 10, 5) == HTTP_CAP_TOTAL, "both full: the total cap is named");
	CHECK(http_cap_check(100000, 100000, 0, 0) == HTTP_CAP_OK, "0 = no cap");
	CHECK(http_cap_check(1, 100000, 2, 0) == HTTP_CAP_OK, "no group cap: only the total counts");
}

static void test_token_source(void)
{
	CHECK(dp_token_source(EVHTTP_REQ_GET, true, false, true) == DP_TOKEN_QUERY, "GET attach: ?token= taken");
	CHECK(dp_token_source(EVHTTP_REQ_GET, true, true, true) == DP_TOKEN_HEADER, "GET attach: header wins");
	CHECK(dp_token_source(EVHTTP_REQ_POST, true, false, true) == DP_TOKEN_QUERY_REFUSED,
	      "POST attach: ?token= refused (a script can set headers)");
	CHECK(dp_token_source(EVHTTP_REQ_GET, false, false, true) == DP_TOKEN_QUERY_REFUSED,
	      "GET session: ?token= refused");
	CHECK(dp_token_source(EVHTTP_REQ_POST, false, true, true) == DP_TOKEN_QUERY_REFUSED,
	      "stdin: ?token= refused even beside a header");
	CHECK(dp_token_source(EVHTTP_REQ_POST, false, true, false) == DP_TOKEN_HEADER, "stdin: header");
	CHECK(dp_token_source(EVHTTP_REQ_GET, true, false, false) == DP_TOKEN_NONE, "nothing: none");
}

static void redact(const char *in, const char *want, size_t outlen)
{
	char out[256];

	http_redact_uri(in, out, outlen);
	CHECK(strcmp(out, want) == 0, "redact %s -> %s (got %s)", in, want, out);
}

static void test_redact(void)
{
	redact("/v1/sessions/ss-1/attach?token=abc", "/v1/sessions/ss-1/attach?token=REDACTED", 256);
	redact("/v1/x?offset=5&token=abc&close=1", "/v1/x?offset=5&token=REDACTED&close=1", 256);
	redact("/v1/x?TOKEN=abc#frag", "/v1/x?TOKEN=REDACTED#frag", 256);
	redact("/v1/x?token=a&token=b", "/v1/x?token=REDACTED&token=REDACTED", 256);
	redact("/v1/x?mytoken=abc", "/v1/x?mytoken=abc", 256);
	redact("/v1/token=abc", "/v1/token=abc", 256);
	redact("/v1/x?token=", "/v1/x?token=REDACTED", 256);
	redact("/v1/x?token=secretsecret", "/v1/x?token=REDACTE", 20); /* cut, never the secret */
	redact("/a?token=abcdef", "/a?t", 5);
	redact(NULL, "", 256);
	redact("/v1/x?%74oken=abc&%54OKEN=def", "/v1/x?%74oken=REDACTED&%54OKEN=REDACTED", 256);
	redact("/v1/x?tok%65n=abc", "/v1/x?tok%65n=REDACTED", 256);
	redact("/v1/x?token&x=1", "/v1/x?token&x=1", 256);
	redact("/v1/x?a=1&&token=z", "/v1/x?a=1&&token=REDACTED", 256);
}

static void key_file(const char *name, const char *content, mode_t mode, int want, const char *want_key)
{
	char path[] = "/tmp/space-test-keyXXXXXX", key[64] = "";
	space_err err = { 0 };
	int fd = mkstemp(path), rc;

	if (!CHECK(fd >= 0, "mkstemp"))
		return;
	if (write(fd, content, strlen(content)) != (ssize_t)strlen(content))
		NOTE("short write");
	fchmod(fd, mode);
	close(fd);
	rc = keyfile_read(path, key, sizeof(key), &err);
	CHECK(rc == want && (rc < 0 || strcmp(key, want_key) == 0), "key file %s: %s", name,
	      rc < 0 ? err.msg : key);
	unlink(path);
}

static void test_key_files(void)
{
	struct stat st = { .st_mode = S_IFREG | 0600, .st_uid = 1000 };
	space_err err = { 0 };

	key_file("0600 with newline", "sk-abc\n", 0600, 0, "sk-abc");
	key_file("0400 no newline, CRLF", "sk-abc\r\n", 0400, 0, "sk-abc");
	key_file("0640", "sk-abc\n", 0640, -1, NULL);
	key_file("0604", "sk-abc\n", 0604, -1, NULL);
	key_file("0602", "sk-abc\n", 0602, -1, NULL);
	key_file("empty", "\n", 0600, -1, NULL);
	key_file("two words", "sk abc\n", 0600, -1, NULL);
	key_file("two lines", "sk-abc\nsk-def\n", 0600, -1, NULL);
	key_file("too long", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 0600, -1, NULL);
	CHECK(keyfile_check("k", &st, 1000, &err) == 0, "owner's own 0600 file");
	CHECK(keyfile_check("k", &st, 1001, &err) == -1 && err.code == EACCES, "another user's file: %s", err.msg);
	st.st_uid = 0;
	CHECK(keyfile_check("k", &st, 1001, &err) == 0, "root's file");
	st.st_mode = S_IFIFO | 0600;
	CHECK(keyfile_check("k", &st, 0, &err) == -1 && err.code == EINVAL, "a FIFO: %s", err.msg);
	st.st_mode = S_IFDIR | 0700;
	CHECK(keyfile_check("k", &st, 0, &err) == -1, "a directory");
	err = (space_err){ 0 };
	CHECK(keyfile_read("/nonexistent/key", (char[8]){ 0 }, 8, &err) == -1 && err.code == ENOENT,
	      "a missing file: %s", err.msg);
}

int main(void)
{
	test_caps();
	test_token_source();
	test_redact();
	test_key_files();
	return DONE();
}
