/* tls.c -- OpenSSL contexts for the daemon's listeners and for an api process's relays to nodes
 * (tls.h). Verification is OpenSSL's own: chain to the configured CA, then the name. */
#include "tls.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static int fail(space_err *err, const char *what, const char *file)
{
	char why[256] = "";

	http_tls_last_error(why, sizeof(why));
	return err_set(err, EINVAL, "tls: %s %s: %s", what, file, why[0] ? why : "unreadable");
}

void http_tls_last_error(char *out, size_t len)
{
	unsigned long e = ERR_get_error(), next;

	/* the last one queued is usually the most specific */
	while ((next = ERR_get_error()))
		e = next;
	out[0] = '\0';
	if (e)
		ERR_error_string_n(e, out, len);
}

/* The server offers HTTP/1.1 whatever the client lists (h2 is not spoken here). */
static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
		       unsigned int inlen, void *arg)
{
	static const unsigned char h11[] = "\x08http/1.1";

	(void)ssl;
	(void)arg;
	if (SSL_select_next_proto((unsigned char **)out, outlen, h11, sizeof(h11) - 1, in, inlen) !=
	    OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_NOACK;
	return SSL_TLSEXT_ERR_OK;
}

SSL_CTX *http_tls_server_ctx(const char *cert, const char *key, space_err *err)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

	if (!ctx) {
		err_set(err, ENOMEM, "tls: out of memory");
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
		fail(err, "certificate", cert);
		SSL_CTX_free(ctx);
		return NULL;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
		fail(err, "key", key);
		SSL_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

SSL_CTX *http_tls_client_ctx(const char *ca, space_err *err)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

	if (!ctx) {
		err_set(err, ENOMEM, "tls: out of memory");
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1) {
		fail(err, "CA bundle", ca);
		SSL_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

SSL *http_tls_client(SSL_CTX *ctx, const char *name)
{
	static const unsigned char h11[] = "\x08http/1.1";
	SSL *ssl = SSL_new(ctx);
	X509_VERIFY_PARAM *vp = ssl ? SSL_get0_param(ssl) : NULL;
	unsigned char addr[16];
	bool ip = inet_pton(AF_INET, name, addr) == 1 || inet_pton(AF_INET6, name, addr) == 1;

	if (!ssl)
		return NULL;
	X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	if ((ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, name) : X509_VERIFY_PARAM_set1_host(vp, name, 0)) != 1 ||
	    (!ip && SSL_set_tlsext_host_name(ssl, name) != 1) || SSL_set_alpn_protos(ssl, h11, sizeof(h11) - 1) != 0) {
		SSL_free(ssl);
		return NULL;
	}
	return ssl;
}
