/* api_operations.c -- GET /v1/operations/{id}, with ?wait=N long-polling until the operation is done */
#include <stdio.h>
#include <stdlib.h>

#include "api.h"
#include "daemon.h"
#include "sandbox/sandbox.h"
#include "front/render.h"
#include "store/store.h"

#define WAIT_MAX_S 60

/* A held request waiting for its operation. Freed by whichever comes first:
 * the waiter's callback (reply sent) or the client going away (waiter
 * cancelled). */
struct op_poll {
	struct http_hold hold; /* first: on_gone gets &hold */
	struct op_waiter *waiter;
};

static void poll_done(struct spaced *d, const struct op_rec *op, void *arg)
{
	struct op_poll *p = arg;
	struct evhttp_request *req = p->hold.req;

	http_hold_end(&p->hold);
	/* A finished operation is told only once what it wrote is in the store (the sandbox's
	 * new state was queued before it): a crash right after the answer loses nothing. */
	if (op_state_done(op->state))
		api_reply_stored_to(d, req, 200, op_to_json(op));
	else
		http_reply_json(req, 200, op_to_json(op));
	free(p);
}

static void poll_gone(struct http_hold *h)
{
	struct op_poll *p = (struct op_poll *)h;

	op_wait_cancel(p->waiter);
	free(p);
}

/* Holds the request until the operation is done or wait_s pass. */
static void op_hold(struct spaced *d, struct evhttp_request *req, const char *id, uint64_t wait)
{
	space_err err = { 0 };
	struct op_poll *p = calloc(1, sizeof(*p));

	if (!p) {
		http_reply_error(req, 500, "internal", "out of memory");
		return;
	}
	/* op_wait never calls back from inside itself (daemon.h), so the hold
	 * can begin after it. */
	if (op_wait(d, id, (int)wait, poll_done, p, &p->waiter, &err) < 0) {
		free(p);
		if (err.code == ENOENT)
			http_reply_error(req, 404, "not_found", "no operation '%s'", id);
		else
			http_reply_err(req, &err);
		return;
	}
	http_hold_begin(&p->hold, req, poll_gone, d->conns);
}

/* The first read is made on the store's thread (api_read); a wait goes on from there. */
struct op_get {
	char id[ID_LEN];
	uint64_t wait;
	struct op_rec op;
};

static int op_get_read(struct store *conn, void *arg, space_err *err)
{
	struct op_get *g = arg;

	return store_op_get(conn, g->id, &g->op, err);
}

static void op_get_reply(struct spaced *d, struct evhttp_request *req, void *arg, int rc, const space_err *err)
{
	struct op_get *g = arg;

	if (rc < 0 && err->code == ENOENT)
		http_reply_error(req, 404, "not_found", "no operation '%s'", g->id);
	else if (rc < 0)
		http_reply_err(req, err);
	else if (g->wait == 0 || op_state_done(g->op.state))
		http_reply_json(req, 200, op_to_json(&g->op));
	else
		op_hold(d, req, g->id, g->wait);
}

static void op_get_release(void *arg)
{
	struct op_get *g = arg;

	op_rec_clear(&g->op); /* its result JSON was loaded by store_op_get */
	free(g);
}

void api_operations_get(struct http_req *r)
{
	const char *id = r->param[0], *wait_s = http_query(r, "wait");
	struct op_get *g;
	uint64_t wait = 0;

	if (!id_valid(id, "op-")) {
		http_reply_error(r->req, 404, "not_found", "no operation '%s'", id);
		return;
	}
	if (wait_s && (http_parse_u64(wait_s, &wait) < 0 || wait > WAIT_MAX_S)) {
		http_reply_error(r->req, 400, "bad_request", "wait must be a whole number of seconds, 0..%d",
				 WAIT_MAX_S);
		return;
	}
	if (!(g = calloc(1, sizeof(*g)))) {
		http_reply_error(r->req, 500, "internal", "out of memory");
		return;
	}
	snprintf(g->id, sizeof(g->id), "%s", id);
	g->wait = wait;
	api_read(r, op_get_read, op_get_reply, op_get_release, g);
}
