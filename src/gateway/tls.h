/* tls.h -- what the gateway needs of TLS: the SNI and ALPN offer of a ClientHello it has only
 * peeked at, and both ends of an interception (the default for TLS): a server-side SSL with a
 * leaf certificate for the name signed by the sandbox's CA, and a client-side SSL to the real
 * host verified against the upstream CA bundle (docs/design/egress.md). OpenSSL does all
 * parsing. */
#ifndef SPACE_GW_TLS_H
#define SPACE_GW_TLS_H

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct gw_tls;

/* upstream_ca_file: PEM bundle the upstream's chain must verify against (NULL: the system's
 * default, /etc/ssl/certs/ca-certificates.crt). Reads it now (before privileges drop). */
struct gw_tls *gw_tls_new(const char *upstream_ca_file, space_err *err);
void gw_tls_free(struct gw_tls *t);

/* Sets (or replaces) the sandbox's CA used to sign leaf certificates; leaves minted with an
 * older CA are forgotten. -1 if the PEMs do not parse or do not belong together. */
int gw_tls_set_ca(struct gw_tls *t, const char *cert_pem, const char *key_pem, space_err *err);
int gw_tls_has_ca(const struct gw_tls *t);

/* What the gateway needs of a ClientHello. */
struct gw_hello {
	char sni[254];     /* lower-case; "" when it carries none */
	bool alpn_offered; /* an ALPN extension */
	bool alpn_http11;  /* ... that lists http/1.1 */
};
/* gw_tls_peek_sni's parse, with the ALPN offer too; the same return values. */
int gw_tls_peek_hello(const uint8_t *buf, size_t len, struct gw_hello *out);

/* Peeks at the first bytes a client sent. Returns 1 and the SNI host name (lower-case; ""
 * when the ClientHello carries none) once a whole ClientHello is in buf; 0 if buf is a
 * prefix of a ClientHello and more bytes are needed; -1 if buf is not (the start of) a TLS
 * ClientHello, or is malformed. Never reads past len. */
int gw_tls_peek_sni(const uint8_t *buf, size_t len, char *out, size_t outlen);

/* A new server-side SSL (accept state) presenting a leaf certificate for `name` (cached per
 * name, CN and subjectAltName DNS:name, signed by the CA, valid 1 day back to 30 days on).
 * NULL without a CA or on failure. */
SSL *gw_tls_server(struct gw_tls *t, const char *name, space_err *err);

/* A new client-side SSL (connect state) for `name`: SNI set, peer verified against the
 * upstream bundle, host name checked (X509_VERIFY_PARAM_set1_host); ALPN offers http/1.1
 * when alpn_http11 (what the guest's side selected), else nothing. */
SSL *gw_tls_client(struct gw_tls *t, const char *name, bool alpn_http11, space_err *err);

#endif
