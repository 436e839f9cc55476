/* http_resp.h -- the framing of an HTTP relay's upstream->guest direction: which response
 * answers which request, so that the relay goes raw only once the upstream has accepted an
 * Upgrade (101) or a CONNECT (2xx) (docs/design/egress.md "HTTP request"). It only reads: the
 * bytes themselves pass to the guest unmodified. http-parser in HTTP_RESPONSE mode; no I/O. */
#ifndef SPACE_GW_HTTP_RESP_H
#define SPACE_GW_HTTP_RESP_H

#include <http_parser.h>
#include <stdbool.h>
#include <stddef.h>

/* Requests relayed but not answered yet, at most (pipelining beyond this is held back). */
#define GW_RESP_PENDING_MAX 32

/* What a relayed request needs of its response's framing. */
enum gw_req_kind {
	GW_REQ_PLAIN,
	GW_REQ_HEAD,    /* the response has no body whatever its headers say */
	GW_REQ_UPGRADE, /* a 101 switches protocols */
	GW_REQ_CONNECT, /* a 2xx opens a tunnel */
};

enum gw_resp_rc {
	GW_RESP_OK,     /* everything fed was framed (or waits for more) */
	GW_RESP_SWITCH, /* the upstream accepted the upgrade or CONNECT: what follows is not HTTP */
	GW_RESP_BAD,    /* not a well-framed HTTP/1 response */
};

struct gw_resp {
	http_parser p;
	enum gw_req_kind kind[GW_RESP_PENDING_MAX]; /* a ring: the oldest unanswered first */
	int head, n;
	bool switched;
};

void gw_resp_init(struct gw_resp *r);
/* A request was relayed; -1 if GW_RESP_PENDING_MAX are unanswered already. */
int gw_resp_expect(struct gw_resp *r, enum gw_req_kind k);
/* Requests relayed and not yet answered by a final (non-1xx) response. */
int gw_resp_pending(const struct gw_resp *r);
/* Reads upstream bytes in order. After GW_RESP_SWITCH (or GW_RESP_BAD) nothing more is read:
 * the rest of that chunk and everything after belong to the new protocol. */
enum gw_resp_rc gw_resp_feed(struct gw_resp *r, const char *data, size_t len);

#endif
