/* reply_stored.c -- replies that announce new rows are sent once the store has them */
#include <stdlib.h>

#include "front.h"
#include "daemon.h"
#include "store/store.h"

/* The rows a handler wrote (a sandbox, an operation, a session) went to the store's thread
 * (store_write_behind). The reply waits there for them, behind a job that does nothing
 * (store_async): what a client is told exists is in the store before the client hears of
 * it, so another process (an api process routing by session) finds it, and a crash right
 * after the reply loses nothing the client knows of. The loop never waits meanwhile. */
struct stored {
	struct http_hold hold; /* first: on_gone gets &hold */
	int status;
	json_t *body;
	bool gone;             /* the client went away: only free */
};

static void stored_gone(struct http_hold *h)
{
	((struct stored *)h)->gone = true;
}

static void stored_barrier(struct store *conn, void *arg)
{
	(void)conn;
	(void)arg;
}

static void stored_done(void *arg, bool ran)
{
	struct stored *s = arg;
	struct evhttp_request *req = s->hold.req;

	if (!s->gone) {
		http_hold_end(&s->hold);
		if (ran)
			http_reply_json(req, s->status, json_incref(s->body));
		else
			http_reply_error(req, 503, "unavailable", "the daemon is stopping");
	}
	json_decref(s->body);
	free(s);
}

void api_reply_stored_to(struct spaced *d, struct evhttp_request *req, int status, json_t *body)
{
	struct stored *s = body ? calloc(1, sizeof(*s)) : NULL;
	space_err err = { 0 };

	if (!s) {
		json_decref(body);
		http_reply_error(req, 500, "internal", "out of memory");
		return;
	}
	s->status = status;
	s->body = body;
	http_hold_begin(&s->hold, req, stored_gone, d->conns);
	if (store_async(d->store, stored_barrier, stored_done, s, &err) < 0) {
		http_hold_end(&s->hold);
		http_reply_json(req, status, body);
		free(s);
	}
}

void api_reply_stored(struct http_req *r, int status, json_t *body)
{
	api_reply_stored_to(r->d, r->req, status, body);
}
