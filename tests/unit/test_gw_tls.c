/* test_gw_tls.c -- the gateway's TLS: CA generation, leaves verified by a real handshake in
 * memory, upstream host name checks, and the SNI peek on ClientHellos OpenSSL wrote */
#include <openssl/err.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "egress/ca.h"
#include "harness.h"
#include "tls.h"

static char *ca1_cert, *ca1_key, *ca2_cert, *ca2_key;
static char ca1_file[] = "/tmp/test_gw_tls.XXXXXX";

static void free_key(char *k)
{
	if (k)
		explicit_bzero(k, strlen(k));
	free(k);
}

static int write_file(char *tmpl, const char *text)
{
	int fd = mkstemp(tmpl);
	size_t n = strlen(text);
	int ok = fd >= 0 && write(fd, text, n) == (ssize_t)n;

	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

/* Drives both ends over a BIO pair until both finished or one failed: 0 or -1. */
static int handshake(SSL *client, SSL *server)
{
	BIO *a, *b;
	int cdone = 0, sdone = 0;

	if (!BIO_new_bio_pair(&a, 0, &b, 0))
		return -1;
	SSL_set_bio(client, a, a);
	SSL_set_bio(server, b, b);
	for (int i = 0; i < 50 && !(cdone && sdone); i++) {
		int rc;

		if (!cdone) {
			rc = SSL_do_handshake(client);
			if (rc == 1)
				cdone = 1;
			else if (SSL_get_error(client, rc) != SSL_ERROR_WANT_READ)
				return -1;
		}
		if (!sdone) {
			rc = SSL_do_handshake(server);
			if (rc == 1)
				sdone = 1;
			else if (SSL_get_error(server, rc) != SSL_ERROR_WANT_READ)
				return -1;
		}
	}
	return cdone && sdone ? 0 : -1;
}

static uint8_t *client_hello_alpn(const char *sni, int max_version, const unsigned char *alpn,
				  unsigned alpn_len, size_t *len);

/* A ClientHello as OpenSSL's client writes it (sni NULL: none); malloc'ed, *len bytes. */
static uint8_t *client_hello(const char *sni, int max_version, size_t *len)
{
	return client_hello_alpn(sni, max_version, NULL, 0, len);
}

/* The same offering ALPN protocols (the wire form: length-prefixed names; NULL: no ALPN). */
static uint8_t *client_hello_alpn(const char *sni, int max_version, const unsigned char *alpn,
				  unsigned alpn_len, size_t *len)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *ssl = SSL_new(ctx);
	BIO *in = BIO_new(BIO_s_mem()), *out = BIO_new(BIO_s_mem());
	uint8_t *buf = NULL;
	char *data;
	long n;

	BIO_set_mem_eof_return(in, -1);
	SSL_set_bio(ssl, in, out);
	if (max_version)
		SSL_set_max_proto_version(ssl, max_version);
	if (sni)
		SSL_set_tlsext_host_name(ssl, sni);
	if (alpn)
		SSL_set_alpn_protos(ssl, alpn, alpn_len);
	SSL_set_connect_state(ssl);
	SSL_do_handshake(ssl);
	n = BIO_get_mem_data(out, &data);
	if (n > 0 && (buf = malloc((size_t)n))) {
		memcpy(buf, data, (size_t)n);
		*len = (size_t)n;
	}
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	ERR_clear_error();
	return buf;
}

static void ca_generate(void)
{
	space_err err = { 0 };

	CHECK(egress_ca_generate("space sandbox test CA", &ca1_cert, &ca1_key, &err) == 0, "CA 1: %s",
	      err.msg);
	CHECK(egress_ca_generate("space sandbox test CA 2", &ca2_cert, &ca2_key, &err) == 0, "CA 2");
	CHECK(ca1_cert && strstr(ca1_cert, "BEGIN CERTIFICATE") && ca1_key && strstr(ca1_key, "PRIVATE KEY"),
	      "PEM cert and key");
	CHECK(egress_ca_generate("", &ca2_cert, &ca2_key, &err) == -1 && err.code == EINVAL, "empty CN refused");
	CHECK(write_file(ca1_file, ca1_cert) == 0, "CA 1 written to %s", ca1_file);
}

/* The CA is what the contract says: a CA, pathlen 0, signing certificates, 10 years. */
static void ca_properties(void)
{
	BIO *b = BIO_new_mem_buf(ca1_cert, -1);
	X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);
	int days = 0, secs = 0;

	EXPECT(x != NULL);
	if (!x) {
		BIO_free(b);
		return;
	}
	EXPECT_EQ(X509_check_ca(x), 1);
	EXPECT_EQ(X509_get_pathlen(x), 0);
	EXPECT(X509_get_key_usage(x) & KU_KEY_CERT_SIGN);
	EXPECT(X509_get0_subject_key_id(x) != NULL);
	EXPECT(ASN1_TIME_diff(&days, &secs, X509_get0_notBefore(x), X509_get0_notAfter(x)));
	EXPECT(days >= 3650);
	EXPECT(X509_cmp_current_time(X509_get0_notBefore(x)) < 0);
	X509_free(x);
	BIO_free(b);
}

static void set_ca(void)
{
	space_err err = { 0 };
	struct gw_tls *t = gw_tls_new(ca1_file, &err);

	EXPECT(t != NULL);
	if (!t)
		return;
	EXPECT_EQ(gw_tls_has_ca(t), 0);
	EXPECT(gw_tls_server(t, "api.example.test", &err) == NULL);
	EXPECT_EQ(gw_tls_set_ca(t, ca1_cert, ca2_key, &err), -1);
	EXPECT_EQ(err.code, EINVAL);
	EXPECT_EQ(gw_tls_has_ca(t), 0);
	EXPECT_EQ(gw_tls_set_ca(t, "not a pem", ca1_key, &err), -1);
	EXPECT_EQ(gw_tls_set_ca(t, ca1_cert, "not a pem", &err), -1);
	EXPECT_EQ(gw_tls_set_ca(t, ca1_cert, ca1_key, &err), 0);
	EXPECT_EQ(gw_tls_has_ca(t), 1);
	/* A failed replacement keeps the CA there was. */
	EXPECT_EQ(gw_tls_set_ca(t, ca2_cert, ca1_key, &err), -1);
	EXPECT_EQ(gw_tls_has_ca(t), 1);
	EXPECT(ERR_peek_error() == 0);
	gw_tls_free(t);
}

static void missing_bundle(void)
{
	space_err err = { 0 };

	EXPECT(gw_tls_new("/nonexistent/bundle.pem", &err) == NULL);
	EXPECT(strstr(err.msg, "/nonexistent/bundle.pem") != NULL);
	gw_tls_free(NULL);
}

/* One interception pair: the guest side minted for server_name, the upstream side (which
 * trusts CA 1 through the bundle) checking client_name. Returns the handshake's result. */
static int intercept(struct gw_tls *t, const char *server_name, const char *client_name, long *verify)
{
	space_err err = { 0 };
	SSL *s = gw_tls_server(t, server_name, &err);
	SSL *c = gw_tls_client(t, client_name, false, &err);
	int rc = -1;

	if (s && c) {
		rc = handshake(c, s);
		*verify = SSL_get_verify_result(c);
		if (rc == 0)
			rc = SSL_version(c) >= TLS1_2_VERSION ? 0 : -1;
	}
	SSL_free(s);
	SSL_free(c);
	ERR_clear_error();
	return rc;
}

static void leaf_handshake(void)
{
	space_err err = { 0 };
	struct gw_tls *t = gw_tls_new(ca1_file, &err);
	long verify = -1;

	if (!CHECK(t && gw_tls_set_ca(t, ca1_cert, ca1_key, &err) == 0, "gateway with CA 1"))
		return;
	CHECK(intercept(t, "api.example.test", "api.example.test", &verify) == 0 && verify == X509_V_OK,
	      "leaf for api.example.test verifies against the CA and the host name");
	CHECK(intercept(t, "api.example.test", "api.example.test", &verify) == 0, "again, from the cache");
	CHECK(intercept(t, "api.example.test", "other.example.test", &verify) == -1 &&
		      verify == X509_V_ERR_HOSTNAME_MISMATCH,
	      "a client for another name refuses the leaf");
	CHECK(gw_tls_server(t, "bad name", &err) == NULL && gw_tls_client(t, "a,DNS:b", false, &err) == NULL,
	      "names outside [A-Za-z0-9._-] refused");

	/* More names than the cache holds: the evicted ones are minted again. */
	int bad = 0;
	for (int i = 0; i < 300; i++) {
		char name[64];
		SSL *s;

		snprintf(name, sizeof(name), "h%d.example.test", i);
		s = gw_tls_server(t, name, &err);
		bad += s == NULL;
		SSL_free(s);
	}
	CHECK(bad == 0, "300 names through a 256-entry cache");
	CHECK(intercept(t, "h0.example.test", "h0.example.test", &verify) == 0, "an evicted name minted again");

	/* A new CA: leaves of the old one are forgotten, so a client trusting only CA 1 fails. */
	CHECK(gw_tls_set_ca(t, ca2_cert, ca2_key, &err) == 0, "CA replaced");
	CHECK(intercept(t, "api.example.test", "api.example.test", &verify) == -1 && verify != X509_V_OK,
	      "leaves are signed by the new CA after set_ca");
	gw_tls_free(t);
}

#define H2_HTTP11 "\x02h2\x08http/1.1"
#define H2_ONLY "\x02h2"

/* What the peek says of a ClientHello's ALPN offer. */
static void peek_alpn(void)
{
	static const struct {
		const char *alpn;
		unsigned len;
		bool offered, http11;
	} cases[] = {
		{ NULL, 0, false, false },
		{ H2_HTTP11, sizeof(H2_HTTP11) - 1, true, true },
		{ H2_ONLY, sizeof(H2_ONLY) - 1, true, false },
		{ "\x08http/1.0", 9, true, false },
	};
	struct gw_hello h;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t n = 0;
		uint8_t *b = client_hello_alpn("api.example.test", 0, (const unsigned char *)cases[i].alpn,
					       cases[i].len, &n);

		EXPECT(b && gw_tls_peek_hello(b, n, &h) == 1);
		EXPECT(strcmp(h.sni, "api.example.test") == 0);
		if (h.alpn_offered != cases[i].offered || h.alpn_http11 != cases[i].http11) {
			h_cur = 1;
			NOTE("case %zu: offered %d http/1.1 %d", i, h.alpn_offered, h.alpn_http11);
		}
		free(b);
	}
}

/* ALPN in an interception: what a client offering client_alpn gets selected by the guest
 * side ("failed" if the handshake failed). */
static const char *negotiated(struct gw_tls *t, const char *client_alpn, unsigned len)
{
	static char got[32];
	space_err err = { 0 };
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *s = gw_tls_server(t, "api.example.test", &err), *c = ctx ? SSL_new(ctx) : NULL;
	const unsigned char *sel = NULL;
	unsigned sel_len = 0;

	strcpy(got, "failed");
	if (s && c) {
		SSL_CTX_load_verify_locations(ctx, ca1_file, NULL);
		SSL_set_tlsext_host_name(c, "api.example.test");
		if (client_alpn)
			SSL_set_alpn_protos(c, (const unsigned char *)client_alpn, len);
		SSL_set_connect_state(c);
		if (handshake(c, s) == 0) {
			SSL_get0_alpn_selected(c, &sel, &sel_len);
			snprintf(got, sizeof(got), "%.*s", (int)sel_len, sel ? (const char *)sel : "");
		}
	}
	SSL_free(s);
	SSL_free(c);
	SSL_CTX_free(ctx);
	ERR_clear_error();
	return got;
}

/* What the upstream side's ClientHello offers: 1 http/1.1, 0 no ALPN, -1 anything else. */
static int upstream_offer(struct gw_tls *t, bool http11)
{
	space_err err = { 0 };
	SSL *c = gw_tls_client(t, "api.example.test", http11, &err);
	BIO *in = BIO_new(BIO_s_mem()), *out = BIO_new(BIO_s_mem());
	struct gw_hello h = { .alpn_offered = true };
	char *data;
	long n;
	int rc = -1;

	if (c && in && out) {
		BIO_set_mem_eof_return(in, -1);
		SSL_set_bio(c, in, out); /* c owns them now */
		in = out = NULL;
		SSL_do_handshake(c);
		n = BIO_get_mem_data(SSL_get_wbio(c), &data);
		if (n > 0 && gw_tls_peek_hello((const uint8_t *)data, (size_t)n, &h) == 1)
			rc = h.alpn_http11 ? 1 : h.alpn_offered ? -1 : 0;
	}
	BIO_free(in);
	BIO_free(out);
	SSL_free(c);
	ERR_clear_error();
	return rc;
}

/* The guest side selects http/1.1 when offered, else nothing (an h2-only client gets no
 * protocol); the upstream side offers http/1.1 only when the guest's side selected it. */
static void alpn(void)
{
	space_err err = { 0 };
	struct gw_tls *t = gw_tls_new(ca1_file, &err);

	if (!CHECK(t && gw_tls_set_ca(t, ca1_cert, ca1_key, &err) == 0, "gateway with CA 1"))
		return;
	EXPECT(strcmp(negotiated(t, H2_HTTP11, sizeof(H2_HTTP11) - 1), "http/1.1") == 0);
	EXPECT(strcmp(negotiated(t, H2_ONLY, sizeof(H2_ONLY) - 1), "") == 0);
	EXPECT(strcmp(negotiated(t, NULL, 0), "") == 0);
	EXPECT_EQ(upstream_offer(t, true), 1);
	EXPECT_EQ(upstream_offer(t, false), 0);
	gw_tls_free(t);
}

static int peek(const uint8_t *b, size_t n, char *out, size_t outlen)
{
	int rc = gw_tls_peek_sni(b, n, out, outlen);

	if (ERR_peek_error() != 0)
		return 99; /* the peek must leave OpenSSL's error queue clean */
	return rc;
}

/* Every strict prefix of a hello needs more bytes; the whole one is parsed. */
static void peek_prefixes(const uint8_t *h, size_t n, const char *want, const char *what)
{
	char name[256];
	size_t early = 0;

	for (size_t i = 0; i < n; i++) {
		uint8_t *cp = malloc(i ? i : 1);

		memcpy(cp, h, i);
		if (peek(cp, i, name, sizeof(name)) != 0) {
			if (!early)
				NOTE("%s: prefix of %zu bytes gave %d", what, i, peek(cp, i, name, sizeof(name)));
			early++;
		}
		free(cp);
	}
	CHECK(early == 0, "%s: all %zu strict prefixes need more bytes", what, n);
	name[0] = 'x';
	CHECK(peek(h, n, name, sizeof(name)) == 1 && strcmp(name, want) == 0, "%s: SNI \"%s\"", what, want);
}

static void peek_real_hellos(void)
{
	size_t n = 0;
	uint8_t *h = client_hello("api.example.test", 0, &n);

	if (!CHECK(h && n > 100, "a TLS 1.3 ClientHello from OpenSSL (%zu bytes)", n))
		return;
	peek_prefixes(h, n, "api.example.test", "with SNI");
	free(h);

	h = client_hello(NULL, 0, &n);
	peek_prefixes(h, n, "", "without SNI");
	free(h);

	h = client_hello("Mixed.Case-Name_1.EXAMPLE", TLS1_2_VERSION, &n);
	peek_prefixes(h, n, "mixed.case-name_1.example", "TLS 1.2 only, upper case lowered");
	free(h);
}

static void peek_limits(void)
{
	size_t n = 0;
	uint8_t *h = client_hello("api.example.test", 0, &n);
	uint8_t *cp;
	char name[256];

	if (!h)
		return;
	/* More bytes after the hello (a client pipelining): still 1. */
	cp = malloc(n + 10);
	memcpy(cp, h, n);
	memset(cp + n, 0x17, 10);
	EXPECT_EQ(peek(cp, n + 10, name, sizeof(name)), 1);
	free(cp);
	/* The name does not fit the caller's buffer: -1, nothing written past it. */
	EXPECT_EQ(peek(h, n, name, 16), -1);
	EXPECT_EQ(peek(h, n, name, 17), 1);
	free(h);
}

static const uint8_t *find(const uint8_t *h, size_t n, const char *s)
{
	return memmem(h, n, s, strlen(s));
}

/* ClientHellos whose server_name is malicious: bad bytes, inner lengths that lie. */
static void peek_malicious(void)
{
	char name[256];
	size_t n = 0;
	uint8_t *h = client_hello("evil/../x y", 0, &n);

	EXPECT(h != NULL);
	if (h)
		EXPECT_EQ(peek(h, n, name, sizeof(name)), -1);
	free(h);

	h = client_hello("api.example.test", 0, &n);
	if (!h)
		return;
	uint8_t *p = (uint8_t *)find(h, n, "api.example.test");
	EXPECT(p != NULL);
	if (p) {
		size_t off = (size_t)(p - h);

		h[off - 4]++; /* server_name list length one more than the extension holds */
		EXPECT_EQ(peek(h, n, name, sizeof(name)), -1);
		h[off - 4]--;
		h[off - 1]--; /* host name shorter than the list says */
		EXPECT_EQ(peek(h, n, name, sizeof(name)), -1);
		h[off - 1]++;
		h[off - 3] = 1; /* not host_name */
		EXPECT_EQ(peek(h, n, name, sizeof(name)), -1);
		h[off - 3] = 0;
		p[3] = 0; /* a NUL inside the name */
		EXPECT_EQ(peek(h, n, name, sizeof(name)), -1);
		p[3] = '.';
		EXPECT_EQ(peek(h, n, name, sizeof(name)), 1);
		h[5] = 2; /* a ServerHello, not a ClientHello */
		EXPECT_EQ(peek(h, n, name, sizeof(name)), -1);
	}
	free(h);
}

static void peek_not_tls(void)
{
	static const char http[] = "GET / HTTP/1.1\r\nHost: api.example.test\r\n\r\n";
	static const uint8_t short_hello[] = { 0x16, 3, 1, 0, 5, 1, 0, 0, 1, 0 };
	static const uint8_t bad_version[] = { 0x16, 0x7f, 0x7f, 0, 5, 1, 0, 0, 1, 0 };
	static const uint8_t huge_record[] = { 0x16, 3, 1, 0xff, 0xff };
	static const uint8_t alert[] = { 0x15, 3, 1, 0, 2, 2, 40 };
	uint8_t junk[512];
	char name[256];

	EXPECT_EQ(peek((const uint8_t *)http, strlen(http), name, sizeof(name)), -1);
	EXPECT_EQ(peek((const uint8_t *)"G", 1, name, sizeof(name)), -1);
	EXPECT_EQ(peek(short_hello, sizeof(short_hello), name, sizeof(name)), -1);
	EXPECT_EQ(peek(bad_version, sizeof(bad_version), name, sizeof(name)), -1);
	EXPECT_EQ(peek(huge_record, sizeof(huge_record), name, sizeof(name)), -1);
	EXPECT_EQ(peek(alert, sizeof(alert), name, sizeof(name)), -1);
	EXPECT_EQ(peek(junk, 0, name, sizeof(name)), 0);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)(i * 131 + 7);
	junk[0] = 0x16;
	junk[1] = 3;
	junk[2] = 1;
	junk[3] = 1;
	junk[4] = 0xf0;
	EXPECT_EQ(peek(junk, sizeof(junk), name, sizeof(name)), -1);
}

int main(void)
{
	RUN(ca_generate);
	if (!ca1_cert || !ca2_cert)
		return DONE();
	RUN(ca_properties);
	RUN(set_ca);
	RUN(missing_bundle);
	RUN(leaf_handshake);
	RUN(alpn);
	RUN(peek_alpn);
	RUN(peek_real_hellos);
	RUN(peek_limits);
	RUN(peek_malicious);
	RUN(peek_not_tls);
	unlink(ca1_file);
	free(ca1_cert);
	free(ca2_cert);
	free_key(ca1_key);
	free_key(ca2_key);
	return DONE();
}
