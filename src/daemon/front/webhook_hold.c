/* webhook_hold.c -- a webhook create as any front end answers it: the request is held while
 * the core checks the URL (a name is resolved), then the front end's reply renders the result;
 * a client gone meanwhile is answered by nobody (the webhook, if made, stands) */
#include <stddef.h>
#include <stdlib.h>

#include "daemon.h"
#include "front/front.h"

struct held_create {
	struct spaced *d;
	struct http_hold hold;
	front_webhook_reply_fn reply;
	bool gone;
};

static void held_gone(struct http_hold *h)
{
	((struct held_create *)((char *)h - offsetof(struct held_create, hold)))->gone = true;
}

static void held_done(void *arg, const struct webhook *w, const space_err *err)
{
	struct held_create *c = arg;
	struct evhttp_request *req = c->hold.req;

	if (!c->gone) {
		http_hold_end(&c->hold);
		c->reply(c->d, req, w, err);
	}
	free(c);
}

int front_webhook_create(struct http_req *r, const struct webhook_req *req, front_webhook_reply_fn reply)
{
	struct held_create *c = calloc(1, sizeof(*c));

	if (!c)
		return -1;
	*c = (struct held_create){ .d = r->d, .reply = reply };
	http_hold_begin(&c->hold, r->req, held_gone, r->d->conns);
	webhook_create(r->d, req, held_done, c);
	return 0;
}
