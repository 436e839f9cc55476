/* fuzz_gw_sni.c -- libFuzzer target: the first bytes a guest sends on a TCP connection, through
 * the gateway's SNI peek (src/gateway/tls.c: gw_tls_peek_sni, OpenSSL's ClientHello parser
 * with our server_name checks).
 *
 * Each input is the connection's first bytes. Besides the sanitizers, the contract is checked:
 * the result is -1, 0 or 1; a name returned is NUL-terminated, lower-case, [a-z0-9._-] only and
 * at most 253 bytes, and nothing is written past the caller's buffer; OpenSSL's error queue is
 * left empty; and the answer does not depend on bytes after a complete hello, nor does any
 * strict prefix of an accepted hello give anything but 0 or the same answer. */
#include <openssl/err.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tls.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MUST(c) do { if (!(c)) { fprintf(stderr, "fuzz_gw_sni: %s:%d: %s\n", __FILE__, __LINE__, #c); abort(); } } while (0)

static void check_name(const char *name, size_t outlen)
{
	size_t n = strnlen(name, outlen);

	MUST(n < outlen && n <= 253);
	for (size_t i = 0; i < n; i++) {
		char c = name[i];

		MUST((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_');
	}
}

/* One peek into a buffer with a guard area after outlen. */
static int peek(const uint8_t *data, size_t size, char *name, size_t outlen)
{
	char buf[512];
	int rc;

	memset(buf, 0x5a, sizeof(buf));
	rc = gw_tls_peek_sni(data, size, buf, outlen);
	MUST(rc == -1 || rc == 0 || rc == 1);
	MUST(ERR_peek_error() == 0);
	for (size_t i = outlen; i < sizeof(buf); i++)
		MUST(buf[i] == 0x5a);
	if (rc == 1) {
		check_name(buf, outlen);
		memcpy(name, buf, strlen(buf) + 1);
	}
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char name[512], again[512];
	int rc = peek(data, size, name, 256);

	if (rc != 1)
		return 0;
	/* A smaller buffer: the same name if it fits, else -1. */
	int small = peek(data, size, again, 8);
	MUST(small == (strlen(name) < 8 ? 1 : -1));
	/* Half the bytes: a prefix of the hello needs more (or, the hello ending sooner, agrees). */
	if (size > 1) {
		int half = peek(data, size / 2, again, 256);

		MUST(half == 0 || (half == 1 && strcmp(again, name) == 0));
	}
	return 0;
}
