/* proxy.h -- relaying a request, and everything after it, to another spaced.
 *
 * An api process (--role api) owns no VM: a request about a sandbox goes to the node that owns
 * it. http_proxy() takes the client's connection over (as ws_accept does), sends the request to
 * the node with "Connection: close" (a WebSocket upgrade keeps its Upgrade), and from then on
 * relays bytes both ways until either side closes: replies of any length, chunked and
 * event-stream output, WebSocket frames. Nothing is parsed or buffered whole; each direction
 * stops reading while the other side's queue is above PROXY_QUEUE_HIGH. A node that cannot be
 * reached (or closes before saying anything) gets the client a 502 JSON reply.
 * docs/design/cluster.md, "Routing". */
#ifndef SPACE_HTTP_PROXY_H
#define SPACE_HTTP_PROXY_H

#include "http.h"

#define PROXY_QUEUE_HIGH (1u << 20)

/* Upstream as "http://IP:PORT" (an IPv4 or [IPv6] literal: no name lookups on the loop).
 * 0 once the connection is taken over; -1 with err set, nothing sent and the request
 * still the caller's to answer, when the URL is not one we can reach or memory is short. */
int http_proxy(struct http_req *r, const char *upstream_url, space_err *err);

/* The same for a request whose head the plane's host_takes claimed (r->taken: its body unread):
 * the connection is taken over (http_take_over) and everything the client sent from its first
 * byte goes to the node untouched, but for HTTP_PEER_HEADER added after the request line; the
 * node's own host front end answers it. -1 with err set and the request still the caller's
 * when nothing was taken. */
int http_proxy_taken(struct spaced *d, struct evhttp_request *req, const char *upstream_url, space_err *err);

/* Pure part (unit-tested): "http://1.2.3.4:7070[/]" -> "1.2.3.4:7070" in hostport. */
int http_proxy_hostport(const char *url, char *hostport, size_t len, space_err *err);
/* Whether a request header is the proxy's to drop (hop-by-hop, or rewritten: Host,
 * Content-Length). */
bool http_proxy_drops_header(const char *name);

#endif
