/* wsc.h -- a WebSocket client (RFC 6455) over a libcurl connection (CURLOPT_CONNECT_ONLY: the
 * same TCP and TLS as every other request of spacectl's), enough for a port's tunnel: binary
 * messages both ways, masked client frames, pings answered, the close handshake. One thread. */
#ifndef SPACE_CLI_WSC_H
#define SPACE_CLI_WSC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct wsc;
/* Connects to url (ws:// or wss://) with `Authorization: Bearer token` and upgrades; NULL with
 * e set (the server's error message when it answered something other than 101). */
struct wsc *wsc_open(const char *url, const char *token, space_err *e);
void wsc_free(struct wsc *w);
/* The socket to poll for reading (bytes may also be buffered: call wsc_recv until it says 0). */
int wsc_fd(const struct wsc *w);
/* Sends one binary message; -1 with e set. */
int wsc_send(struct wsc *w, const void *data, size_t len, space_err *e);
/* Reads what is there without blocking: 1 with one message's bytes in *data and *len (valid until
 * the next call), 0 when nothing whole is there yet; at the end -2 (closed normally: e has the
 * reason) or -1 (failed, or closed with an error code: e says why). */
int wsc_recv(struct wsc *w, const uint8_t **data, size_t *len, space_err *e);
/* Sends a close frame (best effort). */
void wsc_close(struct wsc *w);

/* Pure parts (unit-tested). */
/* A client frame header for len bytes with mask; returns its size (6, 8 or 14). */
size_t wsc_frame_header(uint8_t out[14], uint8_t opcode, uint64_t len, const uint8_t mask[4]);
/* A server frame at the start of buf (n bytes): 1 with its parts, 0 when more is needed, -1 when
 * it is malformed (masked, a control frame over 125 bytes, a length over max). */
int wsc_frame_parse(const uint8_t *buf, size_t n, size_t max, bool *fin, uint8_t *opcode, size_t *hlen,
		    uint64_t *plen);

#endif
