/* ca.c -- generating a sandbox's own certificate authority (see ca.h) */
#include "ca.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <string.h>

#define CA_DAYS (10 * 365 + 3)

/* What OpenSSL said last, as context for an error message; clears its queue. */
static int ssl_fail(space_err *err, const char *what)
{
	unsigned long e = ERR_peek_last_error();
	char buf[256] = "unknown error";

	if (e)
		ERR_error_string_n(e, buf, sizeof(buf));
	ERR_clear_error();
	return err_set(err, EIO, "%s: %s", what, buf);
}

/* A random positive 127-bit serial (RFC 5280: at most 20 octets, positive). */
static int set_random_serial(X509 *x)
{
	unsigned char raw[16];
	BIGNUM *bn;
	int ok;

	if (RAND_bytes(raw, sizeof(raw)) != 1)
		return -1;
	raw[0] &= 0x7f;
	raw[0] |= 0x01; /* never zero */
	bn = BN_bin2bn(raw, sizeof(raw), NULL);
	ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL;
	BN_free(bn);
	return ok ? 0 : -1;
}

int egress_x509_add_ext(X509 *x, X509V3_CTX *ctx, int nid, const char *value)
{
	X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
	int ok;

	if (!ext)
		return -1;
	ok = X509_add_ext(x, ext, -1);
	X509_EXTENSION_free(ext);
	return ok ? 0 : -1;
}

int egress_x509_start(X509 *x, const char *cn, long days)
{
	if (!X509_set_version(x, 2) || set_random_serial(x) < 0 ||
	    !X509_gmtime_adj(X509_getm_notBefore(x), -24L * 3600) ||
	    !X509_time_adj_ex(X509_getm_notAfter(x), (int)days, 0, NULL) ||
	    !X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_UTF8,
					(const unsigned char *)cn, -1, -1, 0))
		return -1;
	return 0;
}

/* The self-signed certificate of the CA for `key`. */
static X509 *make_cert(const char *cn, EVP_PKEY *key)
{
	X509 *x = X509_new();
	X509V3_CTX ctx;

	if (!x || egress_x509_start(x, cn, CA_DAYS) < 0 ||
	    !X509_set_issuer_name(x, X509_get_subject_name(x)) || !X509_set_pubkey(x, key))
		goto fail;
	X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
	if (egress_x509_add_ext(x, &ctx, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") < 0 ||
	    egress_x509_add_ext(x, &ctx, NID_key_usage, "critical,keyCertSign,cRLSign") < 0 ||
	    egress_x509_add_ext(x, &ctx, NID_subject_key_identifier, "hash") < 0 ||
	    !X509_sign(x, key, EVP_sha256()))
		goto fail;
	return x;
fail:
	X509_free(x);
	return NULL;
}

/* The contents of a memory BIO as a malloc'ed string. */
static char *bio_string(BIO *b)
{
	char *data;
	long n = BIO_get_mem_data(b, &data);
	char *s;

	if (n < 0 || !(s = malloc((size_t)n + 1)))
		return NULL;
	memcpy(s, data, (size_t)n);
	s[n] = '\0';
	return s;
}

static char *cert_pem_string(X509 *x)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *s = NULL;

	if (b && PEM_write_bio_X509(b, x))
		s = bio_string(b);
	BIO_free(b);
	return s;
}

/* The key's PEM passes through a secure-heap BIO, cleared when freed. */
static char *key_pem_string(EVP_PKEY *key)
{
	BIO *b = BIO_new(BIO_s_secmem());
	char *s = NULL;

	if (b && PEM_write_bio_PrivateKey(b, key, NULL, NULL, 0, NULL, NULL))
		s = bio_string(b);
	BIO_free(b);
	return s;
}

int egress_ca_generate(const char *common_name, char **cert_pem, char **key_pem, space_err *err)
{
	EVP_PKEY *key;
	X509 *x;
	char *c = NULL, *k = NULL;

	if (!common_name || !common_name[0] || strlen(common_name) > 64)
		return err_set(err, EINVAL, "CA common name must be 1..64 bytes");
	ERR_clear_error();
	key = EVP_EC_gen("P-256");
	if (!key)
		return ssl_fail(err, "generating CA key");
	x = make_cert(common_name, key);
	if (x) {
		c = cert_pem_string(x);
		k = key_pem_string(key);
	}
	X509_free(x);
	EVP_PKEY_free(key);
	if (!c || !k) {
		free(c);
		if (k)
			explicit_bzero(k, strlen(k));
		free(k);
		return ssl_fail(err, "making CA certificate");
	}
	*cert_pem = c;
	*key_pem = k;
	return 0;
}
