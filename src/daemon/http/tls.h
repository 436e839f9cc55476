/* tls.h -- TLS for the daemon's HTTP: a listener served over TLS (--tls-cert/--tls-key: a
 * node's, for its api processes), and the verified client an api process relays to https://
 * nodes with (--cluster-ca, --cluster-tls-name). OpenSSL through libevent's openssl
 * bufferevents; docs/design/cluster.md "Between api and node". */
#ifndef SPACE_HTTP_TLS_H
#define SPACE_HTTP_TLS_H

#include <openssl/ssl.h>

#include "err.h"

/* A server context from a PEM certificate chain and its key (TLS 1.2 and later; ALPN
 * http/1.1 only). NULL with err naming the file and OpenSSL's reason. */
SSL_CTX *http_tls_server_ctx(const char *cert, const char *key, space_err *err);
/* A client context that verifies peers against the PEM bundle ca (TLS 1.2 and later). */
SSL_CTX *http_tls_client_ctx(const char *ca, space_err *err);
/* One verified client connection's SSL: the peer's certificate must chain to the context's
 * CA and name `name` (a DNS name, or an IP address literal). NULL when out of memory. */
SSL *http_tls_client(SSL_CTX *ctx, const char *name);
/* The most specific error OpenSSL's queue holds (for a message naming a bad file); "" if none. */
void http_tls_last_error(char *out, size_t len);

#endif
