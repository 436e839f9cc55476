/* sniff.h -- does a stream start like an HTTP/1 request? The gateway's test for which relay a
 * connection's first bytes need (proxy.c for plain TCP, relay.c inside intercepted TLS). Pure. */
#ifndef SPACE_GW_SNIFF_H
#define SPACE_GW_SNIFF_H

#include <stddef.h>
#include <stdint.h>

/* Longest method token taken as a request line's start. */
#define GW_SNIFF_METHOD_MAX 32

/* 1: the bytes start like a request line as any HTTP/1 server would read one (empty lines
 * skipped, then a token of RFC 9110 tchars and a space); 0: they still might (only empty
 * lines, or a token without its space yet); -1: no server would take them for a request. */
int gw_sniff_http(const uint8_t *b, size_t n);

#endif
