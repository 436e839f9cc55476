/* exchange.h -- one POST to /mcp in flight (transport.c) as the tool-facing calls (call.c) see
 * it: internal to src/daemon/mcp/. Lifetime: an exchange is freed exactly once, by the reply
 * going out (transport.c), by the client leaving while the exchange held the request (its hold's
 * on_gone), or by mcp_call_gone (it left while a step holding the request itself ran). */
#ifndef SPACE_MCP_EXCHANGE_H
#define SPACE_MCP_EXCHANGE_H

#include <event2/event.h>

#include "mcp.h"

struct mcp_x {
	struct http_hold hold; /* first: x_gone gets &hold */
	struct spaced *d;
	struct evhttp_request *req;
	json_t *msgs;        /* the messages, an array */
	size_t next;         /* the next one to run */
	bool batch;
	json_t *out;         /* the responses so far */
	bool accepts_sse;    /* Accept names text/event-stream */
	bool sse;            /* the reply began as an event stream */
	bool held;
	struct mcp_call call;
	json_t *call_id;     /* the id of the tools/call in flight (NULL: none) */
	json_t *call_args;   /* arguments the exchange made (resources/read), else NULL */
	void (*cancel)(void *arg);
	void *cancel_arg;
	struct event *kick;  /* runs the next message, outside the callback that finished one */
	char sid[MCP_SID_LEN];
	struct mcp_x *lprev, *lnext; /* in `calls` while a tool runs */
	bool listed;
};

void mcp_x_free(struct mcp_x *x);
/* The request held by the exchange (idempotent), or let go of (for a step that holds it). */
void mcp_x_hold(struct mcp_x *x);
void mcp_x_unhold(struct mcp_x *x);
/* A response (stolen; NULL: an internal error) for the reply. */
void mcp_x_add(struct mcp_x *x, json_t *msg);
/* The reply as an event stream: its head, then one `event: message` per message. */
void mcp_x_sse_begin(struct mcp_x *x);
int mcp_x_sse_event(struct mcp_x *x, const json_t *msg);
/* Off the list of exchanges whose tool runs (no-op when not on it). */
void mcp_x_unlist(struct mcp_x *x);

#endif
