/* http_resp.c -- response framing for the HTTP relay (http_resp.h). The Nth final response
 * answers the Nth request (HTTP/1.1 pipelining); 1xx responses are interim (they answer
 * nothing) except a 101 to an Upgrade request; a response to HEAD has no body, nor a 2xx to
 * CONNECT, which http-parser cannot know without being told (its on_headers_complete return
 * value). The upstream is not the adversary here, the guest is: a guest must never get raw
 * bytes to an upstream the HTTP relay did not see accept them. */
#include "http_resp.h"

#include <string.h>

static enum gw_req_kind front(const struct gw_resp *r)
{
	return r->n ? r->kind[r->head] : GW_REQ_PLAIN; /* a response nobody asked for: plain */
}

static bool switches(const struct gw_resp *r, unsigned status)
{
	enum gw_req_kind k = front(r);

	return r->n && ((k == GW_REQ_UPGRADE && status == 101) ||
			(k == GW_REQ_CONNECT && status / 100 == 2));
}

static int on_headers_complete(http_parser *p)
{
	struct gw_resp *r = p->data;
	unsigned status = p->status_code;

	if (switches(r, status))
		return front(r) == GW_REQ_CONNECT ? 2 : 1; /* no body: the next byte is the tunnel's */
	/* RFC 9112 6.3: these never have a body, whatever Content-Length says (http-parser
	 * would read one for a 304 with a length) */
	return front(r) == GW_REQ_HEAD || status / 100 == 1 || status == 204 || status == 304 ? 1 : 0;
}

static int on_message_complete(http_parser *p)
{
	struct gw_resp *r = p->data;
	unsigned status = p->status_code;

	if (switches(r, status)) {
		r->switched = true;
		http_parser_pause(p, 1); /* stop here: what follows is the new protocol */
	} else if (status / 100 == 1) {
		return 0; /* interim (100 Continue, 103, a 101 nobody asked for): answers nothing */
	}
	if (r->n) {
		r->head = (r->head + 1) % GW_RESP_PENDING_MAX;
		r->n--;
	}
	return 0;
}

static const http_parser_settings settings = {
	.on_headers_complete = on_headers_complete,
	.on_message_complete = on_message_complete,
};

void gw_resp_init(struct gw_resp *r)
{
	memset(r, 0, sizeof(*r));
	http_parser_init(&r->p, HTTP_RESPONSE);
	r->p.data = r;
}

int gw_resp_expect(struct gw_resp *r, enum gw_req_kind k)
{
	if (r->n == GW_RESP_PENDING_MAX)
		return -1;
	r->kind[(r->head + r->n) % GW_RESP_PENDING_MAX] = k;
	r->n++;
	return 0;
}

int gw_resp_pending(const struct gw_resp *r)
{
	return r->n;
}

enum gw_resp_rc gw_resp_feed(struct gw_resp *r, const char *data, size_t len)
{
	while (len && !r->switched) {
		size_t n = http_parser_execute(&r->p, &settings, data, len);

		if (r->switched)
			break;
		if (HTTP_PARSER_ERRNO(&r->p) != HPE_OK || n == 0)
			return GW_RESP_BAD;
		/* n < len without an error: http-parser stopped after a 101 it took for an upgrade
		 * that was not asked for; the next bytes are read as the next response (if the
		 * upstream did switch, they fail to parse, and the relay ends) */
		data += n;
		len -= n;
	}
	return r->switched ? GW_RESP_SWITCH : GW_RESP_OK;
}
