/* fuzz_port.c -- libFuzzer target: the port proxy's hostile inputs. A client's bytes through the
 * request rewriter (src/daemon/ports/port_rw.c: http-parser, header drops, re-framing), fed in
 * pieces; a guest's /proc/net/tcp text through port_listening_parse (src/daemon/sandbox/
 * ports.c); a Host header and a Cookie through port_host_is/port_host_parse/port_cookie_get.
 *
 * Besides the sanitizers, the contracts are checked: once the rewriter stops or goes raw it
 * consumes nothing more; a stopped one has a reason; no header line it writes carries a
 * credential of SPACE's (X-Space-Token, the cluster key, the port cookie) or the API key; what
 * it writes is bounded by what it read; every listening port parsed is 1..65535, once; a parsed
 * name's port is 1..65535 and its id a sandbox id.
 * Byte 0: the mode (% 3); byte 1: the piece size (0: everything at once); the rest: the input. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ports/ports_front.h"
#include "sandbox/ports.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MUST(c) do { if (!(c)) { fprintf(stderr, "fuzz_port: %s:%d: %s\n", __FILE__, __LINE__, #c); abort(); } } while (0)
#define HOST "8000-sb-0123456789abcdef.localhost:7071"
#define KEY "e2b_fuzzkey0123456789"

static bool ci_has(const uint8_t *d, size_t n, const char *needle)
{
	size_t k = strlen(needle);

	for (size_t i = 0; i + k <= n; i++)
		if (strncasecmp((const char *)d + i, needle, k) == 0)
			return true;
	return false;
}

/* Output made of heads alone: every header line (a ':' before any space) is checked. */
static void check_heads(const char *out, size_t n)
{
	static const char *const never[] = { "x-space-token:", "x-space-cluster-key:", "e2b-traffic-access-token:",
					     "x-space-body-stream:" };
	size_t pos = 0;

	while (pos < n) {
		const char *line = out + pos, *nl = memchr(line, '\n', n - pos);
		size_t len = nl ? (size_t)(nl - line) : n - pos;
		const char *colon = memchr(line, ':', len), *space = memchr(line, ' ', len);

		pos += len + 1;
		if (!colon || (space && space < colon))
			continue; /* a request line, or the empty line */
		for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
			MUST(len < strlen(never[i]) || strncasecmp(line, never[i], strlen(never[i])) != 0);
		if (len >= 7 && strncasecmp(line, "cookie:", 7) == 0) {
			/* as the proxy itself reads a cookie: by its name */
			char *v = strndup(line + 7, len - 7), got[64];

			MUST(!v || !port_cookie_get(v, PORT_COOKIE, got, sizeof(got)));
			free(v);
		}
		MUST(!memmem(line, len, KEY, strlen(KEY)));
	}
}

static void rewrite(const uint8_t *d, size_t n, size_t step)
{
	struct port_rw rw;
	struct evbuffer *out = evbuffer_new();
	size_t at = 0;

	if (!out || port_rw_init(&rw, HOST, "peer-of-the-fuzzer", "http", KEY) < 0) {
		if (out)
			evbuffer_free(out);
		return;
	}
	while (at < n) {
		size_t k = step && n - at > step ? step : n - at, used;
		enum port_rw_status before = rw.status;

		used = port_rw_feed(&rw, (const char *)d + at, k, out);
		MUST(used <= k);
		if (before != PORT_RW_OK)
			MUST(used == 0);
		at += used;
		if (rw.status != PORT_RW_OK)
			break;
		MUST(used == k);
	}
	if (rw.status == PORT_RW_STOP)
		MUST(rw.why[0]);
	/* heads grow by at most our own few headers each; a body by its chunk framing, at most 20
	 * bytes for each piece of it (one byte at least) */
	MUST(evbuffer_get_length(out) <= 21 * n + (rw.requests + 1) * 1024);
	/* with no body anywhere the output is heads alone: none carries a credential of ours */
	if (!ci_has(d, n, "content-length") && !ci_has(d, n, "transfer-encoding") && rw.status != PORT_RW_RAW) {
		size_t len = evbuffer_get_length(out);
		const char *o = len ? (const char *)evbuffer_pullup(out, -1) : NULL;

		if (o)
			check_heads(o, len);
	}
	evbuffer_free(out);
	port_rw_free(&rw);
}

static void listening(const uint8_t *d, size_t n)
{
	json_t *out = json_array(), *e;
	size_t i, j;

	if (!out)
		return;
	port_listening_parse((const char *)d, n, out);
	json_array_foreach(out, i, e) {
		json_int_t p = json_integer_value(json_object_get(e, "port"));

		MUST(p >= 1 && p <= 65535);
		MUST(json_is_string(json_object_get(e, "address")) && json_is_boolean(json_object_get(e, "reachable")));
		for (j = 0; j < i; j++)
			MUST(json_integer_value(json_object_get(json_array_get(out, j), "port")) != p);
	}
	json_decref(out);
}

static void names(const uint8_t *d, size_t n)
{
	char id[ID_LEN], v[64];
	uint16_t port = 0;
	space_err err = { 0 };
	char *s = malloc(n + 1);

	if (!s)
		return;
	memcpy(s, d, n);
	s[n] = '\0';
	if (port_host_is(s, n, "localhost") && port_host_parse(s, n, "localhost", &port, id, &err) == 0) {
		MUST(port >= 1);
		MUST(id_valid(id, "sb-"));
	} else if (err.code) {
		MUST(err.code == EINVAL || err.code == ENOENT);
	}
	if (port_cookie_get(s, PORT_COOKIE, v, sizeof(v)))
		MUST(strlen(v) < sizeof(v));
	free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	switch (data[0] % 3) {
	case 0:
		rewrite(data + 2, size - 2, data[1]);
		break;
	case 1:
		listening(data + 2, size - 2);
		break;
	default:
		names(data + 2, size - 2);
		break;
	}
	return 0;
}
