/* read_async.c -- a handler's reads on the store's thread, its reply on the loop */
#include <stdlib.h>

#include "front.h"
#include "daemon.h"
#include "store/store.h"

/* A handler that reads the store (a list, a row this process does not hold in memory) hands
 * the read to the store's thread (store_async), behind every write queued before it, and
 * replies when it is back: the loop serves everyone else meanwhile, even while the database
 * stalls. The request is held; a client that leaves only gets its read discarded. */
struct read_job {
	struct http_hold hold; /* first: on_gone gets &hold */
	struct spaced *d;
	api_read_fn read;
	api_reply_fn reply;
	void (*release)(void *arg);
	void *arg;
	int rc;
	space_err err;
	bool gone;
};

static void job_gone(struct http_hold *h)
{
	((struct read_job *)h)->gone = true;
}

static void job_read(struct store *conn, void *arg)
{
	struct read_job *j = arg;

	j->rc = j->read(conn, j->arg, &j->err);
}

static void job_done(void *arg, bool ran)
{
	struct read_job *j = arg;
	struct evhttp_request *req = j->hold.req;

	if (!j->gone) {
		http_hold_end(&j->hold);
		if (ran)
			j->reply(j->d, req, j->arg, j->rc, &j->err);
		else
			http_reply_error(req, 503, "unavailable", "the daemon is stopping");
	}
	if (j->release)
		j->release(j->arg);
	free(j);
}

void api_read_to(struct spaced *d, struct evhttp_request *req, api_read_fn read, api_reply_fn reply,
		 void (*release)(void *arg), void *arg)
{
	struct read_job *j = calloc(1, sizeof(*j));
	space_err err = { 0 };

	if (!j) {
		if (release)
			release(arg);
		http_reply_error(req, 500, "internal", "out of memory");
		return;
	}
	j->d = d;
	j->read = read;
	j->reply = reply;
	j->release = release;
	j->arg = arg;
	http_hold_begin(&j->hold, req, job_gone, d->conns);
	/* Without write-behind (a tool's store) the job runs here and now. */
	if (store_async(d->store, job_read, job_done, j, &err) < 0) {
		http_hold_end(&j->hold);
		http_reply_err(req, &err);
		if (release)
			release(arg);
		free(j);
	}
}

void api_read(struct http_req *r, api_read_fn read, api_reply_fn reply, void (*release)(void *arg), void *arg)
{
	api_read_to(r->d, r->req, read, reply, release, arg);
}

/* The common case: the read renders the whole reply body. */
struct json_job {
	api_json_fn fn;
	void *arg;
	void (*release)(void *arg);
	json_t *out;
};

static int json_read(struct store *conn, void *arg, space_err *err)
{
	struct json_job *j = arg;

	j->out = j->fn(conn, j->arg, err);
	if (!j->out && !err->code)
		err_set(err, ENOMEM, "out of memory");
	return j->out ? 0 : -1;
}

static void json_reply(struct spaced *d, struct evhttp_request *req, void *arg, int rc, const space_err *err)
{
	struct json_job *j = arg;

	(void)d;
	if (rc < 0) {
		http_reply_err(req, err);
		return;
	}
	http_reply_json(req, 200, j->out);
	j->out = NULL;
}

static void json_release(void *arg)
{
	struct json_job *j = arg;

	json_decref(j->out);
	if (j->release)
		j->release(j->arg);
	free(j);
}

void api_reply_no_content(struct spaced *d, struct evhttp_request *req, void *arg, int rc, const space_err *err)
{
	(void)d;
	(void)arg;
	if (rc < 0)
		http_reply_err(req, err);
	else
		http_reply_empty(req, 204);
}

void api_read_json(struct http_req *r, api_json_fn fn, void (*release)(void *arg), void *arg)
{
	struct json_job *j = calloc(1, sizeof(*j));

	if (!j) {
		if (release)
			release(arg);
		http_reply_error(r->req, 500, "internal", "out of memory");
		return;
	}
	j->fn = fn;
	j->arg = arg;
	j->release = release;
	api_read(r, json_read, json_reply, json_release, j);
}

/* ---- a step before the handler (http_plane.auth or .prepare) that reads the store ----
 * A data-plane request names a session or carries a token this process has not seen, a
 * control-plane request names a sandbox it does not hold: what it names is read behind the
 * queued writes (store_async), and the loop serves everyone else meanwhile. A client that
 * leaves only has its read discarded. */
struct step_job {
	struct http_hold hold; /* first: on_gone gets &hold */
	struct http_req *r;
	bool gone;
	void (*read)(struct store *conn, void *arg);
	int (*verdict)(struct http_req *r, void *arg);
	void (*release)(void *arg);
	void *arg;
};

static void step_gone(struct http_hold *h)
{
	((struct step_job *)h)->gone = true;
}

static void step_read(struct store *conn, void *arg)
{
	struct step_job *l = arg;

	l->read(conn, l->arg);
}

static void step_done(void *arg, bool ran)
{
	struct step_job *l = arg;
	struct http_req *r = l->r;
	bool go_on = false;

	if (!l->gone) {
		http_hold_end(&l->hold);
		if (!ran)
			http_reply_error(r->req, 503, "unavailable", "the daemon is stopping");
		else
			go_on = l->verdict(r, l->arg) == 0;
	}
	/* The handler runs before release: it may use what the read left in arg. */
	http_auth_done(r, go_on);
	if (l->release)
		l->release(l->arg);
	free(l);
}

int api_step_read(struct http_req *r, void (*read)(struct store *conn, void *arg),
		  int (*verdict)(struct http_req *r, void *arg), void (*release)(void *arg), void *arg)
{
	struct step_job *l = calloc(1, sizeof(*l));
	space_err err = { 0 };

	if (!l) {
		if (release)
			release(arg);
		http_reply_error(r->req, 500, "internal", "out of memory");
		return -1;
	}
	l->r = r;
	l->read = read;
	l->verdict = verdict;
	l->release = release;
	l->arg = arg;
	http_hold_begin(&l->hold, r->req, step_gone, r->d->conns);
	if (store_async(r->d->store, step_read, step_done, l, &err) < 0) {
		http_hold_end(&l->hold);
		if (release)
			release(arg);
		free(l);
		http_reply_error(r->req, 503, "unavailable", "%s", err.msg);
		return -1;
	}
	return 1;
}
