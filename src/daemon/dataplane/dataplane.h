/* dataplane.h -- the data-plane listener's handlers and their pure helpers */
#ifndef SPACE_DATAPLANE_H
#define SPACE_DATAPLANE_H

#include <event2/buffer.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "front/front.h"
#include "http/http.h"

struct spaced;
/* The data-plane listener (dataplane.c) over the tables listeners.c assembles, and /v1's
 * session and file routes on it (sessions opened by their tokens, files by a files token). */
int dataplane_start(struct spaced *d, const struct front_tables *t, space_err *err);
extern const struct http_route dp_routes[];
extern const size_t dp_nroutes;

/* {"signal": "SIGTERM" | "TERM" | 15 | "15"} -> signal number (1..64), or
 * -1 with EINVAL. */
int signal_parse(const json_t *v, space_err *err);
/* "SIGTERM"/"TERM" (any case) -> 15; -1 if unknown. */
int signal_from_name(const char *name);

/* Where a data-plane request's session token is taken from (pure;
 * unit-tested): the Authorization header, or ?token= only on a GET of a
 * stream (EventSource cannot set headers); ?token= anywhere else is refused
 * even beside a header, so that clients stop putting tokens in URLs. */
enum dp_token_src { DP_TOKEN_NONE, DP_TOKEN_HEADER, DP_TOKEN_QUERY, DP_TOKEN_QUERY_REFUSED };
enum dp_token_src dp_token_source(enum evhttp_cmd_type method, bool stream_route, bool has_header, bool has_query);

/* dp_ws.c: GET /v1/sessions/{sid}/ws, the whole session over one WebSocket. */
void dp_ws(struct http_req *r);
/* dp_attach.c: POST|GET /v1/sessions/{sid}/attach as server-sent events. */
void dp_attach(struct http_req *r);
/* Appends one SSE event: "event: <event>\nid: <id>\ndata: <base64>\n\n".
 * Returns 0, or -1 when out of memory. */
int sse_format_data(struct evbuffer *out, const char *event, uint64_t id, const void *data, size_t len);
/* Where a reader starts: Last-Event-ID, else ?offset=, else 0. -1 with
 * EINVAL if it is not a number or lies beyond `length`. */
int sse_start_offset(const char *last_event_id, const char *offset_param, uint64_t length, uint64_t *out,
		     space_err *err);

#endif
