/* webhook_sign.c -- what a receiver checks a delivery by: pure, unit-tested
 * (tests/unit/test_events.c) */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "webhook.h"

static void hex(const unsigned char *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = '\0';
}

int wh_sign_space(const char *secret, int64_t ts, const char *body, size_t len, char out[65])
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int maclen = 0;
	char prefix[24];
	int plen = snprintf(prefix, sizeof(prefix), "%lld.", (long long)ts);
	unsigned char *msg = malloc((size_t)plen + len + 1);

	if (!msg)
		return -1;
	memcpy(msg, prefix, (size_t)plen);
	memcpy(msg + plen, body, len);
	if (!HMAC(EVP_sha256(), secret, (int)strlen(secret), msg, (size_t)plen + len, mac, &maclen) || maclen != 32) {
		free(msg);
		return -1;
	}
	free(msg);
	hex(mac, 32, out);
	return 0;
}

int wh_sign_e2b(const char *secret, const char *body, size_t len, char out[48])
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	unsigned char b64[48];
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	int ok, n;

	ok = c && EVP_DigestInit_ex(c, EVP_sha256(), NULL) && EVP_DigestUpdate(c, secret, strlen(secret)) &&
	     EVP_DigestUpdate(c, body, len) && EVP_DigestFinal_ex(c, md, NULL);
	EVP_MD_CTX_free(c);
	if (!ok)
		return -1;
	n = EVP_EncodeBlock(b64, md, SHA256_DIGEST_LENGTH);
	while (n > 0 && b64[n - 1] == '=')
		n--;
	memcpy(out, b64, (size_t)n);
	out[n] = '\0';
	return 0;
}

int64_t wh_backoff_ms(int attempt)
{
	int64_t ms = 1000;

	/* 1 s, 2 s, 4 s ... up to a minute between tries. */
	for (int i = 1; i < attempt && ms < 60000; i++)
		ms *= 2;
	return ms > 60000 ? 60000 : ms;
}
