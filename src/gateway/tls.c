/* tls.c -- SNI peeking, leaf certificates for interception and verified upstream TLS (tls.h) */
#include "tls.h"

#include "egress/ca.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_UPSTREAM_CA "/etc/ssl/certs/ca-certificates.crt"
#define LEAF_CACHE 256
#define LEAF_DAYS 30
#define NAME_MAX_LEN 253

struct leaf {
	char name[NAME_MAX_LEN + 1];
	X509 *cert;
	uint64_t used; /* LRU tick; the least recently used entry is replaced when full */
};

struct gw_tls {
	SSL_CTX *client_ctx; /* upstream: verifies against the bundle read at gw_tls_new */
	SSL_CTX *server_ctx; /* toward the guest: each SSL gets its leaf */
	EVP_PKEY *leaf_key;  /* one key for every leaf of this gateway */
	X509 *ca_cert;
	EVP_PKEY *ca_key;
	struct leaf leaves[LEAF_CACHE];
	size_t nleaves;
	uint64_t tick;
};

/* What OpenSSL said last, as context for an error message; clears its queue (which the
 * gateway's other SSL objects consult through SSL_get_error). */
static int ssl_fail(space_err *err, int code, const char *what, const char *name)
{
	unsigned long e = ERR_peek_last_error();
	char buf[256] = "unknown error";

	if (e)
		ERR_error_string_n(e, buf, sizeof(buf));
	ERR_clear_error();
	return err_set(err, code, "%s%s%s: %s", what, name ? " " : "", name ? name : "", buf);
}

/* A host name we put into a certificate, a config string or the policy: [A-Za-z0-9._-]. */
static bool name_ok(const char *s, size_t n)
{
	if (n == 0 || n > NAME_MAX_LEN)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '-' || c == '_'))
			return false;
	}
	return true;
}

/* ---- SNI peek ---- */

struct peek {
	bool reached;  /* the ClientHello callback ran: the whole hello was parsed */
	bool bad;      /* its server_name extension is malformed or names something we refuse */
	struct gw_hello *out;
};

/* The server_name extension (RFC 6066 3): u16 list length, then entries of u8 type, u16
 * length, name. Exactly one entry, of type host_name, filling the list exactly (what
 * OpenSSL itself accepts later in the handshake). */
static bool parse_sni(const unsigned char *p, size_t n, struct peek *pk)
{
	size_t list, len;

	if (n < 2)
		return false;
	list = (size_t)p[0] << 8 | p[1];
	if (list != n - 2 || list < 3)
		return false;
	if (p[2] != TLSEXT_NAMETYPE_host_name)
		return false;
	len = (size_t)p[3] << 8 | p[4];
	if (len != list - 3 || !name_ok((const char *)p + 5, len))
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = p[5 + i];

		pk->out->sni[i] = (char)(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
	}
	pk->out->sni[len] = '\0';
	return true;
}

/* The ALPN extension (RFC 7301 3.1): u16 list length, then u8-length-prefixed protocol names.
 * Only whether "http/1.1" is among them matters (the one protocol the gateway speaks inside
 * TLS); a malformed list is taken as offering nothing. */
static void parse_alpn(const unsigned char *p, size_t n, struct gw_hello *h)
{
	size_t list, i;

	if (n < 2 || (list = (size_t)p[0] << 8 | p[1]) != n - 2)
		return;
	h->alpn_offered = true;
	for (i = 2; i < n;) {
		size_t len = p[i];

		if (len == 0 || i + 1 + len > n)
			return;
		if (len == 8 && memcmp(p + i + 1, "http/1.1", 8) == 0)
			h->alpn_http11 = true;
		i += 1 + len;
	}
}

static int peek_hello_cb(SSL *ssl, int *alert, void *arg)
{
	struct peek *pk = SSL_get_app_data(ssl);
	const unsigned char *ext;
	size_t n;

	(void)arg;
	pk->reached = true;
	if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &ext, &n) == 1 &&
	    !parse_sni(ext, n, pk))
		pk->bad = true;
	if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_application_layer_protocol_negotiation, &ext, &n) == 1)
		parse_alpn(ext, n, pk->out);
	/* We only wanted to read the hello: stop the handshake here. */
	*alert = SSL_AD_HANDSHAKE_FAILURE;
	return SSL_CLIENT_HELLO_ERROR;
}

/* Made once (the gateway is single-threaded) and kept for the life of the process. */
static SSL_CTX *peek_ctx(void)
{
	static SSL_CTX *ctx;

	if (!ctx) {
		ctx = SSL_CTX_new(TLS_server_method());
		if (ctx)
			SSL_CTX_set_client_hello_cb(ctx, peek_hello_cb, NULL);
	}
	return ctx;
}

/* Runs a throwaway server SSL over the bytes: 1 hello parsed, 0 need more, -1 not TLS. */
static int peek_run(SSL_CTX *ctx, const uint8_t *buf, size_t len, struct peek *pk)
{
	SSL *ssl = SSL_new(ctx);
	BIO *in = BIO_new_mem_buf(buf, (int)len), *out = BIO_new(BIO_s_mem());
	int rc = -1;

	if (!ssl || !in || !out) {
		SSL_free(ssl);
		BIO_free(in);
		BIO_free(out);
		return -1;
	}
	/* An empty read-only mem BIO reports "retry" instead of EOF: that is "need more". */
	BIO_set_mem_eof_return(in, -1);
	SSL_set_bio(ssl, in, out); /* ssl owns both now */
	SSL_set_app_data(ssl, pk);
	SSL_set_accept_state(ssl);
	int r = SSL_do_handshake(ssl);
	if (pk->reached)
		rc = pk->bad ? -1 : 1;
	else if (r <= 0 && SSL_get_error(ssl, r) == SSL_ERROR_WANT_READ && BIO_pending(in) == 0)
		rc = 0;
	SSL_free(ssl);
	return rc;
}

int gw_tls_peek_hello(const uint8_t *buf, size_t len, struct gw_hello *out)
{
	struct peek pk = { .out = out };
	SSL_CTX *ctx;
	int rc;

	memset(out, 0, sizeof(*out));
	if (len == 0)
		return 0;
	if (buf[0] != 0x16) /* a handshake record: anything else is not a ClientHello */
		return -1;
	if (len > 16 * 1024 * 1024 || !(ctx = peek_ctx()))
		return -1;
	ERR_clear_error();
	rc = peek_run(ctx, buf, len, &pk);
	ERR_clear_error();
	if (rc != 1)
		memset(out, 0, sizeof(*out));
	return rc;
}

int gw_tls_peek_sni(const uint8_t *buf, size_t len, char *out, size_t outlen)
{
	struct gw_hello h;
	int rc = gw_tls_peek_hello(buf, len, &h);

	if (rc == 1) {
		if (strlen(h.sni) + 1 > outlen)
			return -1;
		memcpy(out, h.sni, strlen(h.sni) + 1);
	}
	return rc;
}

/* ---- contexts ---- */

static SSL_CTX *client_ctx_new(const char *ca_file, space_err *err)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

	if (!ctx) {
		ssl_fail(err, EIO, "upstream TLS context", NULL);
		return NULL;
	}
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) ||
	    !SSL_CTX_load_verify_locations(ctx, ca_file, NULL)) {
		ssl_fail(err, EIO, "loading upstream CA bundle", ca_file);
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	return ctx;
}

/* ALPN toward the guest, honestly: the gateway parses HTTP/1.1 inside TLS and nothing else,
 * so it selects http/1.1 when the guest offers it and otherwise no protocol at all (an
 * h2-only client then either gives up or speaks HTTP/2 anyway, whose preface the HTTP relay
 * refuses). Selecting h2 would hand the guest a framing whose :authority nobody checks. */
static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
		       unsigned int inlen, void *arg)
{
	static const unsigned char http11[] = "\x08http/1.1";

	(void)ssl, (void)arg;
	for (unsigned int i = 0; i < inlen;) {
		unsigned int len = in[i];

		if (i + 1 + len > inlen)
			break;
		if (len == 8 && memcmp(in + i + 1, http11 + 1, 8) == 0) {
			*out = in + i + 1;
			*outlen = 8;
			return SSL_TLSEXT_ERR_OK;
		}
		i += 1 + len;
	}
	return SSL_TLSEXT_ERR_NOACK;
}

static SSL_CTX *server_ctx_new(space_err *err)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

	if (!ctx || !SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION)) {
		ssl_fail(err, EIO, "guest-side TLS context", NULL);
		SSL_CTX_free(ctx);
		return NULL;
	}
	/* No renegotiation, no 0-RTT data: every byte the relays see has been through one
	 * handshake whose SNI was checked. */
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_set_max_early_data(ctx, 0);
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	return ctx;
}

struct gw_tls *gw_tls_new(const char *upstream_ca_file, space_err *err)
{
	struct gw_tls *t = calloc(1, sizeof(*t));

	if (!t) {
		err_set(err, ENOMEM, "gateway TLS state");
		return NULL;
	}
	ERR_clear_error();
	t->client_ctx = client_ctx_new(upstream_ca_file ? upstream_ca_file : DEFAULT_UPSTREAM_CA, err);
	if (!t->client_ctx)
		goto fail;
	t->server_ctx = server_ctx_new(err);
	if (!t->server_ctx)
		goto fail;
	t->leaf_key = EVP_EC_gen("P-256");
	if (!t->leaf_key) {
		ssl_fail(err, EIO, "generating the leaf key", NULL);
		goto fail;
	}
	return t;
fail:
	gw_tls_free(t);
	return NULL;
}

static void forget_leaves(struct gw_tls *t)
{
	for (size_t i = 0; i < t->nleaves; i++)
		X509_free(t->leaves[i].cert);
	t->nleaves = 0;
}

static void forget_ca(struct gw_tls *t)
{
	forget_leaves(t);
	X509_free(t->ca_cert);
	EVP_PKEY_free(t->ca_key);
	t->ca_cert = NULL;
	t->ca_key = NULL;
}

void gw_tls_free(struct gw_tls *t)
{
	if (!t)
		return;
	forget_ca(t);
	EVP_PKEY_free(t->leaf_key);
	SSL_CTX_free(t->server_ctx);
	SSL_CTX_free(t->client_ctx);
	free(t);
}

/* ---- the sandbox's CA ---- */

static X509 *cert_from_pem(const char *pem)
{
	BIO *b = BIO_new_mem_buf(pem, -1);
	X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;

	BIO_free(b);
	return x;
}

static EVP_PKEY *key_from_pem(const char *pem)
{
	BIO *b = BIO_new_mem_buf(pem, -1);
	EVP_PKEY *k = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;

	BIO_free(b);
	return k;
}

int gw_tls_set_ca(struct gw_tls *t, const char *cert_pem, const char *key_pem, space_err *err)
{
	X509 *cert;
	EVP_PKEY *key;

	if (!cert_pem || !key_pem)
		return err_set(err, EINVAL, "CA certificate and key are both needed");
	ERR_clear_error();
	cert = cert_from_pem(cert_pem);
	if (!cert)
		return ssl_fail(err, EINVAL, "CA certificate", NULL);
	key = key_from_pem(key_pem);
	if (!key) {
		X509_free(cert);
		return ssl_fail(err, EINVAL, "CA key", NULL);
	}
	if (X509_check_private_key(cert, key) != 1) {
		X509_free(cert);
		EVP_PKEY_free(key);
		return ssl_fail(err, EINVAL, "CA key does not match its certificate", NULL);
	}
	forget_ca(t);
	t->ca_cert = cert;
	t->ca_key = key;
	return 0;
}

int gw_tls_has_ca(const struct gw_tls *t)
{
	return t && t->ca_cert && t->ca_key;
}

/* ---- leaves ---- */

/* A leaf for `name` (already checked by name_ok, so safe inside "DNS:%s"). */
static X509 *mint_leaf(struct gw_tls *t, const char *name)
{
	X509 *x = X509_new();
	X509V3_CTX ctx;
	char san[NAME_MAX_LEN + 8];

	snprintf(san, sizeof(san), "DNS:%s", name);
	if (!x || egress_x509_start(x, name, LEAF_DAYS) < 0 ||
	    !X509_set_issuer_name(x, X509_get_subject_name(t->ca_cert)) || !X509_set_pubkey(x, t->leaf_key))
		goto fail;
	X509V3_set_ctx(&ctx, t->ca_cert, x, NULL, NULL, 0);
	if (egress_x509_add_ext(x, &ctx, NID_basic_constraints, "critical,CA:FALSE") < 0 ||
	    egress_x509_add_ext(x, &ctx, NID_key_usage, "critical,digitalSignature") < 0 ||
	    egress_x509_add_ext(x, &ctx, NID_ext_key_usage, "serverAuth") < 0 ||
	    egress_x509_add_ext(x, &ctx, NID_subject_alt_name, san) < 0 ||
	    egress_x509_add_ext(x, &ctx, NID_authority_key_identifier, "keyid") < 0 ||
	    !X509_sign(x, t->ca_key, EVP_sha256()))
		goto fail;
	return x;
fail:
	X509_free(x);
	return NULL;
}

/* The cached leaf for name, minting (and caching, evicting the least recently used) if
 * needed. Borrowed: valid until the next call or gw_tls_set_ca. */
static X509 *leaf_for(struct gw_tls *t, const char *name)
{
	struct leaf *slot = NULL;
	X509 *x;

	for (size_t i = 0; i < t->nleaves; i++) {
		if (strcmp(t->leaves[i].name, name) == 0) {
			t->leaves[i].used = ++t->tick;
			return t->leaves[i].cert;
		}
	}
	x = mint_leaf(t, name);
	if (!x)
		return NULL;
	if (t->nleaves < LEAF_CACHE) {
		slot = &t->leaves[t->nleaves++];
	} else {
		slot = &t->leaves[0];
		for (size_t i = 1; i < t->nleaves; i++)
			if (t->leaves[i].used < slot->used)
				slot = &t->leaves[i];
		X509_free(slot->cert);
	}
	snprintf(slot->name, sizeof(slot->name), "%s", name);
	slot->cert = x;
	slot->used = ++t->tick;
	return x;
}

SSL *gw_tls_server(struct gw_tls *t, const char *name, space_err *err)
{
	X509 *leaf;
	SSL *ssl;

	if (!gw_tls_has_ca(t)) {
		err_set(err, EINVAL, "no CA to sign a certificate for %s", name);
		return NULL;
	}
	if (!name || !name_ok(name, strlen(name))) {
		err_set(err, EINVAL, "not a host name a certificate can be made for");
		return NULL;
	}
	ERR_clear_error();
	leaf = leaf_for(t, name);
	if (!leaf) {
		ssl_fail(err, EIO, "minting a certificate for", name);
		return NULL;
	}
	ssl = SSL_new(t->server_ctx);
	if (!ssl || SSL_use_certificate(ssl, leaf) != 1 || SSL_use_PrivateKey(ssl, t->leaf_key) != 1) {
		SSL_free(ssl);
		ssl_fail(err, EIO, "TLS server for", name);
		return NULL;
	}
	SSL_set_accept_state(ssl);
	return ssl;
}

SSL *gw_tls_client(struct gw_tls *t, const char *name, bool alpn_http11, space_err *err)
{
	static const unsigned char http11[] = "\x08http/1.1";
	SSL *ssl;

	if (!name || !name_ok(name, strlen(name))) {
		err_set(err, EINVAL, "not a host name to connect to with TLS");
		return NULL;
	}
	ERR_clear_error();
	ssl = SSL_new(t->client_ctx);
	/* (SSL_set_alpn_protos returns 0 on success) */
	if (!ssl || SSL_set_tlsext_host_name(ssl, name) != 1 || SSL_set1_host(ssl, name) != 1 ||
	    (alpn_http11 && SSL_set_alpn_protos(ssl, http11, sizeof(http11) - 1) != 0)) {
		SSL_free(ssl);
		ssl_fail(err, EIO, "TLS client for", name);
		return NULL;
	}
	SSL_set_connect_state(ssl);
	return ssl;
}
