/* test_connect.c -- the pure parts of the Connect codec (src/daemon/e2b/connect.c): envelopes
 * written and parsed back (whole, partial, several in a row, oversized, compressed, unknown
 * flags, not a JSON object), the end-of-stream message, the code -> HTTP status table, errno ->
 * code, and Connect-Timeout-Ms parsing */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "e2b/connect.h"
#include "harness.h"

/* The bytes of an evbuffer, as one contiguous copy (caller frees). */
static uint8_t *drain(struct evbuffer *b, size_t *len)
{
	uint8_t *p;

	*len = evbuffer_get_length(b);
	p = malloc(*len ? *len : 1);
	if (!p)
		abort();
	evbuffer_remove(b, p, *len);
	return p;
}

static void envelope_round_trip(void)
{
	struct evbuffer *b = evbuffer_new();
	json_t *msg = json_pack("{s:{s:{s:i}}}", "event", "start", "pid", 42);
	json_t *got = NULL;
	space_err err = { 0 };
	uint8_t flags = 0xff;
	size_t len, used = 0;
	uint8_t *p;

	EXPECT_EQ(connect_envelope_add(b, 0, msg), 0);
	p = drain(b, &len);
	/* [flags][u32 big-endian length][compact JSON] */
	EXPECT_EQ(p[0], 0);
	EXPECT_EQ(len, 5 + strlen("{\"event\":{\"start\":{\"pid\":42}}}"));
	EXPECT_EQ(((uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4]), len - 5);
	EXPECT(memcmp(p + 5, "{\"event\":{\"start\":{\"pid\":42}}}", len - 5) == 0);
	EXPECT_EQ(connect_envelope_parse(p, len, &flags, &got, &used, &err), 0);
	EXPECT_EQ(flags, 0);
	EXPECT_EQ(used, len);
	EXPECT(got && json_equal(got, msg));
	json_decref(got);
	free(p);
	json_decref(msg);
	evbuffer_free(b);
}

/* Every prefix shorter than the whole envelope is "need more" (1), never an error or a message. */
static void envelope_partial(void)
{
	struct evbuffer *b = evbuffer_new();
	json_t *msg = json_pack("{s:s}", "path", "/home/user");
	space_err err = { 0 };
	size_t len, used;
	uint8_t flags;
	uint8_t *p;

	EXPECT_EQ(connect_envelope_add(b, 0, msg), 0);
	p = drain(b, &len);
	for (size_t i = 0; i < len; i++) {
		json_t *got = (json_t *)1;

		used = 0;
		EXPECT_EQ(connect_envelope_parse(p, i, &flags, &got, &used, &err), 1);
		EXPECT(got == NULL);
		EXPECT_EQ(used, 0);
	}
	free(p);
	json_decref(msg);
	evbuffer_free(b);
}

/* Two envelopes back to back: the first parse uses exactly the first one. */
static void envelope_sequence(void)
{
	struct evbuffer *b = evbuffer_new();
	json_t *a = json_pack("{s:i}", "a", 1), *end = connect_end_message(NULL, NULL);
	json_t *got = NULL;
	space_err err = { 0 };
	size_t len, used = 0, off;
	uint8_t flags = 0;
	uint8_t *p;

	EXPECT_EQ(connect_envelope_add(b, 0, a), 0);
	EXPECT_EQ(connect_envelope_add(b, CONNECT_FLAG_END, end), 0);
	p = drain(b, &len);
	EXPECT_EQ(connect_envelope_parse(p, len, &flags, &got, &used, &err), 0);
	EXPECT_EQ(flags, 0);
	EXPECT(got && json_equal(got, a));
	json_decref(got);
	off = used;
	EXPECT_EQ(off, 5 + strlen("{\"a\":1}"));
	got = NULL;
	EXPECT_EQ(connect_envelope_parse(p + off, len - off, &flags, &got, &used, &err), 0);
	EXPECT_EQ(flags, CONNECT_FLAG_END);
	EXPECT(got && json_is_object(got) && json_object_size(got) == 0);
	EXPECT_EQ(off + used, len);
	json_decref(got);
	free(p);
	json_decref(a);
	json_decref(end);
	evbuffer_free(b);
}

static void hdr(uint8_t *p, uint8_t flags, uint32_t n)
{
	p[0] = flags;
	p[1] = (uint8_t)(n >> 24);
	p[2] = (uint8_t)(n >> 16);
	p[3] = (uint8_t)(n >> 8);
	p[4] = (uint8_t)n;
}

static void envelope_refused(void)
{
	uint8_t p[64];
	json_t *got;
	space_err err;
	size_t used;
	uint8_t flags;

	/* Compressed: refused from the header alone (we announce no compression). */
	hdr(p, CONNECT_FLAG_COMPRESSED, 2);
	memcpy(p + 5, "{}", 2);
	err = (space_err){ 0 };
	got = NULL;
	EXPECT_EQ(connect_envelope_parse(p, 7, &flags, &got, &used, &err), -1);
	EXPECT_EQ(err.code, EINVAL);
	EXPECT(got == NULL);
	err = (space_err){ 0 };
	EXPECT_EQ(connect_envelope_parse(p, 5, &flags, &got, &used, &err), -1);
	EXPECT_EQ(err.code, EINVAL);
	/* Unknown flag bits. */
	hdr(p, 0x80, 2);
	err = (space_err){ 0 };
	EXPECT_EQ(connect_envelope_parse(p, 7, &flags, &got, &used, &err), -1);
	EXPECT_EQ(err.code, EINVAL);
	/* Oversized: refused from the header, before the body arrives (no 4 GiB buffering). */
	hdr(p, 0, CONNECT_MAX_MESSAGE + 1);
	err = (space_err){ 0 };
	EXPECT_EQ(connect_envelope_parse(p, 5, &flags, &got, &used, &err), -1);
	EXPECT_EQ(err.code, EINVAL);
	hdr(p, 0, 0xffffffffu);
	err = (space_err){ 0 };
	EXPECT_EQ(connect_envelope_parse(p, 5, &flags, &got, &used, &err), -1);
	/* Exactly the limit is still "need more", not an error. */
	hdr(p, 0, CONNECT_MAX_MESSAGE);
	err = (space_err){ 0 };
	EXPECT_EQ(connect_envelope_parse(p, 5, &flags, &got, &used, &err), 1);
	/* Not a JSON object, or not JSON. */
	hdr(p, 0, 2);
	memcpy(p + 5, "[]", 2);
	err = (space_err){ 0 };
	EXPECT_EQ(connect_envelope_parse(p, 7, &flags, &got, &used, &err), -1);
	EXPECT_EQ(err.code, EINVAL);
	EXPECT(got == NULL);
	hdr(p, 0, 3);
	memcpy(p + 5, "{\"a", 3);
	err = (space_err){ 0 };
	EXPECT_EQ(connect_envelope_parse(p, 8, &flags, &got, &used, &err), -1);
	hdr(p, 0, 4);
	memcpy(p + 5, "null", 4);
	err = (space_err){ 0 };
	EXPECT_EQ(connect_envelope_parse(p, 9, &flags, &got, &used, &err), -1);
	/* Duplicate keys are refused (one meaning per message). */
	hdr(p, 0, 13);
	memcpy(p + 5, "{\"a\":1,\"a\":2}", 13);
	err = (space_err){ 0 };
	EXPECT_EQ(connect_envelope_parse(p, 18, &flags, &got, &used, &err), -1);
	/* An empty message is the empty object (proto3: every field at its default). */
	hdr(p, 0, 0);
	got = NULL;
	err = (space_err){ 0 };
	EXPECT_EQ(connect_envelope_parse(p, 5, &flags, &got, &used, &err), 0);
	EXPECT(got && json_is_object(got) && json_object_size(got) == 0);
	EXPECT_EQ(used, 5);
	json_decref(got);
}

static void end_message(void)
{
	json_t *ok = connect_end_message(NULL, "ignored"), *bad = connect_end_message("not_found", "no such file");
	json_t *nomsg = connect_end_message("internal", NULL);
	char *s;

	s = json_dumps(ok, JSON_COMPACT);
	EXPECT(s && strcmp(s, "{}") == 0);
	free(s);
	s = json_dumps(bad, JSON_COMPACT | JSON_SORT_KEYS);
	EXPECT(s && strcmp(s, "{\"error\":{\"code\":\"not_found\",\"message\":\"no such file\"}}") == 0);
	free(s);
	EXPECT(nomsg && strcmp(json_string_value(json_object_get(json_object_get(nomsg, "error"), "message")), "") == 0);
	json_decref(ok);
	json_decref(bad);
	json_decref(nomsg);
}

/* connectrpc.com/docs/protocol#error-codes: the HTTP status of each code. */
static void code_status(void)
{
	static const struct {
		const char *code;
		int status;
	} want[] = {
		{ "canceled", 499 },          { "unknown", 500 },           { "invalid_argument", 400 },
		{ "deadline_exceeded", 504 }, { "not_found", 404 },         { "already_exists", 409 },
		{ "permission_denied", 403 }, { "resource_exhausted", 429 }, { "failed_precondition", 400 },
		{ "aborted", 409 },           { "out_of_range", 400 },      { "unimplemented", 501 },
		{ "internal", 500 },          { "unavailable", 503 },       { "data_loss", 500 },
		{ "unauthenticated", 401 },
	};

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		EXPECT_EQ(connect_code_status(want[i].code), want[i].status);
	EXPECT_EQ(connect_code_status("no_such_code"), 500);
	EXPECT_EQ(connect_code_status("NOT_FOUND"), 500);
	EXPECT_EQ(connect_code_status(""), 500);
	EXPECT_EQ(connect_code_status(NULL), 500);
}

/* The codes the SDK acts on (not_found, already_exists, unavailable) come from the right errnos,
 * and every code produced is one the table knows. */
static void code_of_errno(void)
{
	EXPECT(strcmp(connect_code_of_errno(ENOENT), "not_found") == 0);
	EXPECT(strcmp(connect_code_of_errno(EEXIST), "already_exists") == 0);
	EXPECT(strcmp(connect_code_of_errno(EINVAL), "invalid_argument") == 0);
	EXPECT(strcmp(connect_code_of_errno(EACCES), "permission_denied") == 0);
	EXPECT(strcmp(connect_code_of_errno(EBUSY), "failed_precondition") == 0);
	EXPECT(strcmp(connect_code_of_errno(EAGAIN), "unavailable") == 0);
	EXPECT(strcmp(connect_code_of_errno(ETIMEDOUT), "deadline_exceeded") == 0);
	EXPECT(strcmp(connect_code_of_errno(ENOSPC), "resource_exhausted") == 0);
	EXPECT(strcmp(connect_code_of_errno(12345), "internal") == 0);
	for (int e = 0; e < 200; e++) {
		const char *c = connect_code_of_errno(e);

		EXPECT(c && (connect_code_status(c) != 500 || strcmp(c, "internal") == 0));
	}
}

static void parse_timeout(void)
{
	EXPECT_EQ(connect_parse_timeout(NULL), 0);
	EXPECT_EQ(connect_parse_timeout(""), 0);
	EXPECT_EQ(connect_parse_timeout("60000"), 60000);
	EXPECT_EQ(connect_parse_timeout("0"), 0);
	EXPECT_EQ(connect_parse_timeout("1"), 1);
	/* Connect allows at most 10 digits. */
	EXPECT_EQ(connect_parse_timeout("9999999999"), 9999999999LL);
	EXPECT_EQ(connect_parse_timeout("10000000000"), 0);
	EXPECT_EQ(connect_parse_timeout("-1"), 0);
	EXPECT_EQ(connect_parse_timeout("+5"), 0);
	EXPECT_EQ(connect_parse_timeout("12ms"), 0);
	EXPECT_EQ(connect_parse_timeout(" 12"), 0);
	EXPECT_EQ(connect_parse_timeout("0x10"), 0);
	EXPECT_EQ(connect_parse_timeout("99999999999999999999999"), 0);
}

int main(void)
{
	RUN(envelope_round_trip);
	RUN(envelope_partial);
	RUN(envelope_sequence);
	RUN(envelope_refused);
	RUN(end_message);
	RUN(code_status);
	RUN(code_of_errno);
	RUN(parse_timeout);
	return DONE();
}
