/* api_contexts.c -- PUT /v1/contexts: a build context (a tar) streamed to <state>/contexts,
 * hashed as it comes, checked, and stored once under its digest (build/context.c). */
#include <event2/buffer.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "build/context.h"
#include "daemon.h"
#include "http/body.h"

struct ctx_put {
	struct spaced *d;
	struct evhttp_request *req;
	struct http_hold hold;
	struct http_body *body;
	struct context_upload *up;
	struct evbuffer *chunk;
	bool held;
};

static void put_free(struct ctx_put *p)
{
	if (p->body)
		http_body_notify(p->body, NULL, NULL);
	context_upload_abort(p->up);
	if (p->chunk)
		evbuffer_free(p->chunk);
	free(p);
}

static void put_gone(struct http_hold *h)
{
	struct ctx_put *p = (struct ctx_put *)((char *)h - offsetof(struct ctx_put, hold));

	p->body = NULL; /* failed with the connection: never touched again */
	put_free(p);
}

static void put_answer(struct ctx_put *p, const space_err *err)
{
	char digest[72];
	uint64_t bytes = 0;
	space_err e = { 0 };

	if (p->held)
		http_hold_end(&p->hold);
	if (err) {
		http_reply_err(p->req, err);
	} else {
		struct context_upload *u = p->up;

		p->up = NULL;
		if (context_upload_finish(u, digest, &bytes, &e) < 0)
			http_reply_err(p->req, &e);
		else
			http_reply_json(p->req, 201, json_pack("{s:s,s:I}", "context", digest, "bytes", (json_int_t)bytes));
	}
	put_free(p);
}

static void put_more(struct http_body *b, void *arg)
{
	struct ctx_put *p = arg;
	space_err err = { 0 };

	if (http_body_failed(b)) {
		err_set(&err, EINVAL, "the body ended before its end (a context is one tar)");
		put_answer(p, &err);
		return;
	}
	while (http_body_read(b, p->chunk, 1u << 20) > 0) {
		size_t n = evbuffer_get_length(p->chunk);
		const void *bytes = evbuffer_pullup(p->chunk, (ssize_t)n);

		if (context_upload_write(p->up, bytes, n, &err) < 0) {
			put_answer(p, &err);
			return;
		}
		evbuffer_drain(p->chunk, n);
	}
	if (http_body_done(b))
		put_answer(p, NULL);
}

void api_contexts_put(struct http_req *r)
{
	struct ctx_put *p = calloc(1, sizeof(*p));
	char dir[PATH_MAX];
	space_err err = { 0 };
	uint64_t max = (uint64_t)r->d->cfg.context_max_mib << 20;

	if (!p || !(p->chunk = evbuffer_new())) {
		free(p);
		http_req_error(r, 500, "internal", "out of memory");
		return;
	}
	p->d = r->d;
	p->req = r->req;
	snprintf(dir, sizeof(dir), "%s/contexts", r->d->cfg.state_dir);
	if (!(p->up = context_upload_begin(dir, max, &err))) {
		put_free(p);
		http_req_err(r, &err);
		return;
	}
	p->body = http_body_get(r);
	if (!p->body) {
		/* read whole by evhttp (a small body, or a relay) */
		struct evbuffer *in = evhttp_request_get_input_buffer(r->req);
		size_t n = evbuffer_get_length(in);

		if (context_upload_write(p->up, evbuffer_pullup(in, (ssize_t)n), n, &err) < 0) {
			put_answer(p, &err);
			return;
		}
		put_answer(p, NULL);
		return;
	}
	if (http_body_length(p->body) != UINT64_MAX && http_body_length(p->body) > max) {
		p->body = NULL;
		err_set(&err, E2BIG, "the context is over its limit of %llu MiB", (unsigned long long)(max >> 20));
		put_answer(p, &err);
		return;
	}
	http_hold_begin(&p->hold, r->req, put_gone, r->d->conns);
	p->held = true;
	http_body_notify(p->body, put_more, p);
}
