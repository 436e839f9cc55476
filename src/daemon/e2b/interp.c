/* interp.c -- E2B's code interpreter ("port 49999"): POST /execute streamed as NDJSON, and
 * /contexts, over one long-lived interpreter process per context in the guest.
 *
 * A context is guest/interp/space_interp.py run as a session the daemon owns
 * (session_open_internal with stdin: never listed, stored or reachable by clients' tokens). The
 * daemon writes one JSON request line per execution to its stdin; the program answers on its
 * stdout with protocol lines (interp_line.h), which are parsed, checked, re-encoded and sent
 * to the client one per line, ending at end_of_execution. Executions in one context run one at
 * a time, in arrival order (a bounded queue). Contexts live in the daemon's memory only:
 *  - the interpreter exits or fails (killed, out of memory, sandbox stopped): the execution in
 *    flight ends with an error line; the context gets a fresh interpreter on its next use
 *    (its variables are gone, like a Jupyter kernel that died);
 *  - pause/resume (and E2B's pause/connect): the guest's memory, the process included, comes
 *    back, so the session and the context's state normally go on;
 *  - the sandbox is deleted: its contexts go with it;
 *  - the daemon restarts: contexts are forgotten (their ids answer 404; the next /execute
 *    without context_id makes a fresh default context), and the old interpreters, orphaned
 *    daemon-channel sessions, are killed when the agent reports them (agent.c);
 *  - a fork or a sandbox made from a snapshot: the child has no contexts (the copied
 *    interpreters are orphans there, killed the same way).
 * A client that goes away mid-execution: the interpreter gets SIGINT (KeyboardInterrupt), as
 * the SDK's timeoutMs then means "stop this"; what it still prints is read and dropped, and the
 * queue goes on at its end_of_execution. Queued executions whose client left are dropped.
 * SIGINT (that, or POST /contexts/{id}/interrupt) is sent only once the interpreter has said it
 * runs the execution (number_of_executions): during Python's start-up it would end it.
 * Code that catches KeyboardInterrupt forever keeps its context busy: restart the context.
 * Code in a context can write to the protocol fd itself (it runs in the same process): what it
 * writes is checked like any line, so it can confuse only its own context's replies.
 * Bounds: INTERP_MAX_CONTEXTS per sandbox, INTERP_MAX_QUEUE waiting executions per context,
 * the request sizes and INTERP_MAX_LINE per guest line (interp_line.h), INTERP_HIGH_WATER
 * queued to a client before the interpreter is paced. */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "e2b.h"
#include "interp_line.h"
#include "log.h"
#include "sandbox/sandbox.h"

#define INTERP_PROGRAM "/usr/local/lib/space/space_interp.py"
#define INTERP_MAX_CONTEXTS 16 /* per sandbox */
#define INTERP_MAX_QUEUE 16    /* executions waiting in one context */
#define INTERP_DEFAULT_CWD "/home/user"
/* Bytes queued to one client before we stop reading the interpreter (it then waits: the
 * session's output is paced by what we took). */
#define INTERP_HIGH_WATER (1u << 20)
/* What the interpreter wrote to its own stderr (before its redirect: e.g. no such program),
 * kept for the error line when it dies. */
#define INTERP_STDERR_KEEP 512

struct interp_ctx;

struct interp_exec {
	struct http_hold hold; /* first: on_gone gets &hold */
	struct interp_ctx *ctx;
	char *line; /* the request line, until written */
	bool held;  /* the client is still there */
	bool sent;  /* written to the interpreter */
	bool running; /* the interpreter said it started it (number_of_executions) */
	bool interrupt; /* SIGINT asked for before it ran */
	struct interp_exec *next;
};

struct interp_ctx {
	struct interp_sb *sb;
	char id[ID_LEN];
	char cwd[INTERP_MAX_CWD + 1];
	bool is_default;
	struct session *s;
	struct session_watch w; /* set while s */
	struct event *kick;
	char *buf; /* a partial stdout line */
	size_t len, cap;
	bool skipping; /* inside a line over INTERP_MAX_LINE */
	char err[INTERP_STDERR_KEEP];
	size_t errlen;
	struct interp_exec *cur;          /* running: sent, its end not seen yet */
	struct interp_exec *head, *tail;  /* waiting */
	unsigned nqueued;
	struct interp_ctx *next;
};

/* The contexts of one sandbox. Reachable from `sandboxes` until the sandbox is gone. */
struct interp_sb {
	struct spaced *d;
	char id[ID_LEN];
	struct interp_ctx *ctxs;
	unsigned nctx;
	struct interp_sb *next;
};

static struct interp_sb *sandboxes;

/* ---- replies ---- */

static void exec_free(struct interp_exec *e)
{
	free(e->line);
	free(e);
}

static void exec_send(struct interp_exec *e, const char *data, size_t len)
{
	struct evbuffer *b;

	if (!e->held)
		return;
	b = evbuffer_new();
	if (!b || evbuffer_add(b, data, len) < 0) {
		log_warn("interp: out of memory sending a line");
	} else {
		evhttp_send_reply_chunk(e->hold.req, b);
	}
	if (b)
		evbuffer_free(b);
}

/* Ends the client's reply (if still there), optionally with an error line first; frees e. */
static void exec_finish(struct interp_exec *e, const char *err_name, const char *err_value)
{
	if (e->held) {
		if (err_name) {
			char *l = interp_error_line(err_name, err_value);

			if (l)
				exec_send(e, l, strlen(l));
			free(l);
		}
		http_hold_end(&e->hold);
		evhttp_send_reply_end(e->hold.req);
		e->held = false;
	}
	exec_free(e);
}

/* ---- contexts ---- */

static struct interp_sb *sb_get(struct spaced *d, const char *id, bool create)
{
	struct interp_sb *b;

	for (b = sandboxes; b; b = b->next)
		if (b->d == d && strcmp(b->id, id) == 0)
			return b;
	if (!create || !(b = calloc(1, sizeof(*b))))
		return NULL;
	b->d = d;
	snprintf(b->id, sizeof(b->id), "%s", id);
	b->next = sandboxes;
	sandboxes = b;
	return b;
}

static struct interp_ctx *ctx_find(struct interp_sb *b, const char *id)
{
	for (struct interp_ctx *c = b ? b->ctxs : NULL; c; c = c->next)
		if (strcmp(c->id, id) == 0)
			return c;
	return NULL;
}

static void ctx_unwatch(struct interp_ctx *c)
{
	if (c->s) {
		session_watch_del(&c->w);
		c->s = NULL;
	}
	c->len = 0;
	c->skipping = false;
	c->errlen = 0;
}

/* Ends every execution of c (in flight and queued) with an error line. */
static void ctx_fail_all(struct interp_ctx *c, const char *name, const char *value)
{
	struct interp_exec *e;

	if (c->cur) {
		exec_finish(c->cur, name, value);
		c->cur = NULL;
	}
	while ((e = c->head)) {
		c->head = e->next;
		exec_finish(e, name, value);
	}
	c->tail = NULL;
	c->nqueued = 0;
}

/* c->s, unless the sandbox's sessions were freed under it (sessions_free cleared the watch;
 * the kick that handles it may not have run yet). */
static struct session *ctx_session(struct interp_ctx *c)
{
	if (c->s && !c->w.s)
		c->s = NULL;
	return c->s;
}

/* Stops c's interpreter (it ends in the guest; its end is not waited for). */
static void ctx_stop(struct interp_ctx *c)
{
	struct session *s = ctx_session(c);

	ctx_unwatch(c);
	if (s)
		session_cancel(s);
}

static void ctx_free(struct interp_ctx *c, const char *why)
{
	struct interp_ctx **pp;

	ctx_fail_all(c, "ContextGone", why);
	ctx_stop(c);
	for (pp = &c->sb->ctxs; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	c->sb->nctx--;
	if (c->kick)
		event_free(c->kick);
	free(c->buf);
	free(c);
}

static void sb_free(struct interp_sb *b, const char *why)
{
	struct interp_sb **pp;

	while (b->ctxs)
		ctx_free(b->ctxs, why);
	for (pp = &sandboxes; *pp; pp = &(*pp)->next)
		if (*pp == b) {
			*pp = b->next;
			break;
		}
	free(b);
}

static void ctx_pump(struct interp_ctx *c);

static void on_kick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	ctx_pump(arg);
}

/* From the session's notify loop: only schedule. */
static void on_watch(struct session_watch *w)
{
	struct interp_ctx *c = (struct interp_ctx *)((char *)w - offsetof(struct interp_ctx, w));

	event_active(c->kick, 0, 0);
}

static struct interp_ctx *ctx_new(struct interp_sb *b, const char *cwd, bool is_default, space_err *err)
{
	struct interp_ctx *c;

	if (b->nctx >= INTERP_MAX_CONTEXTS) {
		err_set(err, EDQUOT, "sandbox %s has %d code contexts already; delete one first", b->id,
			INTERP_MAX_CONTEXTS);
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c || !(c->kick = event_new(b->d->base, -1, 0, on_kick, c))) {
		free(c);
		err_set(err, ENOMEM, "out of memory");
		return NULL;
	}
	c->sb = b;
	id_new(c->id, "ctx-");
	snprintf(c->cwd, sizeof(c->cwd), "%s", cwd && *cwd ? cwd : INTERP_DEFAULT_CWD);
	c->is_default = is_default;
	c->next = b->ctxs;
	b->ctxs = c;
	b->nctx++;
	return c;
}

/* Starts c's interpreter if it has none. */
static int ctx_ensure(struct interp_ctx *c, space_err *err)
{
	const char *argv[] = { "/usr/bin/python3", "-u", INTERP_PROGRAM, "--cwd", c->cwd, NULL };
	struct session *s;

	if (ctx_session(c))
		return 0;
	s = session_open_internal(c->sb->d, c->sb->id, SESS_KIND_PROCESS, argv, NULL, true, err);
	if (!s)
		return -1;
	c->s = s;
	c->w.fn = on_watch;
	c->w.pos = session_output_start(s);
	session_watch_add(s, &c->w);
	c->len = 0;
	c->skipping = false;
	c->errlen = 0;
	return 0;
}

/* Writes the next queued execution to the interpreter, if none is running. */
static void ctx_next(struct interp_ctx *c)
{
	space_err err = { 0 };
	struct interp_exec *e;

	while (!c->cur && (e = c->head)) {
		c->head = e->next;
		if (!c->head)
			c->tail = NULL;
		c->nqueued--;
		e->next = NULL;
		if (!e->held) {
			exec_free(e);
			continue;
		}
		if (ctx_ensure(c, &err) < 0 || session_stdin(c->s, e->line, strlen(e->line), 0, &err) < 0) {
			log_warn("interp %s/%s: %s", c->sb->id, c->id, err.msg);
			exec_finish(e, "InterpreterUnavailable", err.msg);
			err = (space_err){ 0 };
			continue;
		}
		free(e->line);
		e->line = NULL;
		e->sent = true;
		c->cur = e;
	}
}

/* SIGINT to the code of the execution in flight. Only once the interpreter has said it runs it:
 * before, the program may still be starting, and a SIGINT then would end it (Python installs
 * its handler late in its start-up); the request is kept until then. */
static void ctx_interrupt(struct interp_ctx *c)
{
	space_err err = { 0 };

	if (!c->cur || !ctx_session(c))
		return;
	if (!c->cur->running) {
		c->cur->interrupt = true;
		return;
	}
	if (session_signal(c->s, SIGINT, &err) < 0)
		log_warn("interp %s/%s: interrupting: %s", c->sb->id, c->id, err.msg);
}

static void ctx_line(struct interp_ctx *c, const char *line, size_t len)
{
	enum interp_line_type type;
	char *out = interp_line_check(line, len, &type);

	if (!out) {
		log_warn("interp %s/%s: dropped a line the interpreter should not send (%zu bytes)", c->sb->id,
			 c->id, len);
		return;
	}
	if (c->cur) {
		size_t n = strlen(out);

		out[n] = '\n'; /* replaces the NUL: sent by length */
		exec_send(c->cur, out, n + 1);
	}
	free(out);
	if (type == INTERP_LINE_COUNT && c->cur && !c->cur->running) {
		c->cur->running = true;
		if (c->cur->interrupt || !c->cur->held)
			ctx_interrupt(c);
	}
	if (type == INTERP_LINE_END && c->cur) {
		exec_finish(c->cur, NULL, NULL);
		c->cur = NULL;
		ctx_next(c);
	}
}

/* Splits the interpreter's stdout into lines. */
static void ctx_take(struct interp_ctx *c, const char *p, size_t n)
{
	while (n) {
		const char *nl = memchr(p, '\n', n);
		size_t k = nl ? (size_t)(nl - p) : n;

		if (!c->skipping) {
			if (c->len + k > INTERP_MAX_LINE) {
				log_warn("interp %s/%s: dropped a line over %u bytes", c->sb->id, c->id, INTERP_MAX_LINE);
				c->skipping = true;
				c->len = 0;
			} else {
				if (c->len + k > c->cap) {
					size_t cap = c->cap ? c->cap : 4096;
					char *b;

					while (cap < c->len + k)
						cap *= 2;
					b = realloc(c->buf, cap);
					if (!b) {
						c->skipping = true;
						c->len = 0;
						goto next;
					}
					c->buf = b;
					c->cap = cap;
				}
				memcpy(c->buf + c->len, p, k);
				c->len += k;
			}
		}
next:
		if (!nl)
			return;
		if (!c->skipping && c->len)
			ctx_line(c, c->buf, c->len);
		c->skipping = false;
		c->len = 0;
		/* A large buffer is not kept for the context's life. */
		if (c->cap > (64u << 10)) {
			free(c->buf);
			c->buf = NULL;
			c->cap = 0;
		}
		p += k + 1;
		n -= k + 1;
	}
}

static bool client_full(struct interp_ctx *c)
{
	struct bufferevent *bev;

	if (!c->cur || !c->cur->held)
		return false;
	bev = evhttp_connection_get_bufferevent(c->cur->hold.evcon);
	return bev && evbuffer_get_length(bufferevent_get_output(bev)) >= INTERP_HIGH_WATER;
}

/* Reads what the interpreter wrote; handles its end. */
static void ctx_pump(struct interp_ctx *c)
{
	static char chunk[64 << 10];
	struct session *s = c->s;
	space_err err = { 0 };
	char msg[INTERP_STDERR_KEEP + 512];

	if (!s)
		return; /* a stale kick */
	if (!c->w.s) {
		/* The watch lost its session: the sandbox's sessions were freed (sessions_free). */
		c->s = NULL;
		if (!sandbox_find(c->sb->d, c->sb->id)) {
			sb_free(c->sb, "the sandbox is gone");
			return;
		}
		ctx_fail_all(c, "InterpreterDied", "the sandbox's sessions ended");
		return;
	}
	for (;;) {
		int stream = 0;
		ssize_t n;
		uint64_t start = session_output_start(s);

		if (client_full(c)) {
			/* A slow client: look again shortly (the interpreter waits meanwhile). */
			static const struct timeval later = { 0, 50000 };

			event_add(c->kick, &later);
			break;
		}
		if (c->w.pos < start) {
			c->w.pos = start; /* the output caps dropped some: a line may be cut */
			c->len = 0;
			c->skipping = true;
		}
		n = session_output_read(s, c->w.pos, &stream, chunk, sizeof(chunk), &err);
		if (n < 0) {
			log_warn("interp %s/%s: reading output: %s", c->sb->id, c->id, err.msg);
			break;
		}
		if (n == 0)
			break;
		c->w.pos += (uint64_t)n;
		if (stream == 1) {
			ctx_take(c, chunk, (size_t)n);
			if (!c->s) /* the context was freed or restarted under us: never here, but be sure */
				return;
		} else {
			size_t k = (size_t)n < sizeof(c->err) - 1 - c->errlen ? (size_t)n : sizeof(c->err) - 1 - c->errlen;

			memcpy(c->err + c->errlen, chunk, k);
			c->errlen += k;
			c->err[c->errlen] = 0;
		}
	}
	session_watch_progress(&c->w);
	if (session_done(s) && c->w.pos >= session_output_length(s)) {
		const struct session_rec *rec = session_rec(s);

		if (rec->state == SESS_FAILED)
			snprintf(msg, sizeof(msg), "the interpreter failed: %s", rec->error);
		else if (rec->exit_signal)
			snprintf(msg, sizeof(msg), "the interpreter was killed by signal %d", rec->exit_signal);
		else
			snprintf(msg, sizeof(msg), "the interpreter exited with code %d%s%.*s", rec->exit_code,
				 c->errlen ? ": " : "", (int)c->errlen, c->err);
		log_info("interp %s/%s: %s", c->sb->id, c->id, msg);
		ctx_unwatch(c);
		if (c->cur) {
			size_t l = strlen(msg);

			snprintf(msg + l, sizeof(msg) - l, " (the context starts afresh on its next execution)");
			exec_finish(c->cur, "InterpreterDied", msg);
			c->cur = NULL;
		}
		ctx_next(c); /* queued ones get a fresh interpreter */
	}
}

static void exec_gone(struct http_hold *h)
{
	struct interp_exec *e = (struct interp_exec *)h;
	struct interp_ctx *c = e->ctx;

	e->held = false;
	/* Stop the code; its end_of_execution then moves the queue on. Queued ones are dropped
	 * by ctx_next. */
	if (c && c->cur == e)
		ctx_interrupt(c);
}

/* ---- handlers ---- */

static json_t *ctx_json(const struct interp_ctx *c)
{
	return json_pack("{s:s,s:s,s:s}", "id", c->id, "language", "python", "cwd", c->cwd);
}

/* The sandbox's contexts, the sandbox being checked (envd_auth: it exists and runs). */
static struct interp_sb *req_sb(struct http_req *r, bool create)
{
	struct interp_sb *b, *next;

	/* Forget the contexts of sandboxes that are gone (those whose interpreters were running
	 * went when their sessions did; these had none then). */
	for (b = sandboxes; b; b = next) {
		next = b->next;
		if (b->d == r->d && !sandbox_find(r->d, b->id))
			sb_free(b, "the sandbox is gone");
	}
	b = sb_get(r->d, e2b_sandbox_id(r), create);

	if (!b && create)
		e2b_reply_error(r->req, 500, "out of memory");
	return b;
}

static void reply_space_err(struct http_req *r, const space_err *err)
{
	e2b_reply_err(r->req, err);
}

void interp_execute(struct http_req *r)
{
	json_t *body = http_body_json(r);
	char ctx_id[INTERP_MAX_CTX_ID + 1];
	space_err err = { 0 };
	struct interp_exec *e;
	struct interp_ctx *c;
	struct interp_sb *b;
	char *line = NULL;

	if (!body)
		return;
	if (interp_execute_parse(body, &line, ctx_id, &err) < 0) {
		json_decref(body);
		reply_space_err(r, &err);
		return;
	}
	json_decref(body);
	if (!(b = req_sb(r, true))) {
		free(line);
		return;
	}
	if (ctx_id[0]) {
		c = ctx_find(b, ctx_id);
		if (!c) {
			free(line);
			e2b_reply_error(r->req, 404, "context %s not found", ctx_id);
			return;
		}
	} else {
		for (c = b->ctxs; c && !c->is_default; c = c->next)
			;
		if (!c && !(c = ctx_new(b, NULL, true, &err))) {
			free(line);
			reply_space_err(r, &err);
			return;
		}
	}
	if (c->nqueued >= INTERP_MAX_QUEUE) {
		free(line);
		e2b_reply_error(r->req, 429, "context %s has %d executions waiting; retry later", c->id,
				INTERP_MAX_QUEUE);
		return;
	}
	/* Start the interpreter now, so that a failure is a plain error status. */
	if (ctx_ensure(c, &err) < 0) {
		free(line);
		reply_space_err(r, &err);
		return;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		free(line);
		e2b_reply_error(r->req, 500, "out of memory");
		return;
	}
	e->ctx = c;
	e->line = line;
	e->held = true;
	evhttp_add_header(evhttp_request_get_output_headers(r->req), "Content-Type", "application/x-ndjson");
	evhttp_add_header(evhttp_request_get_output_headers(r->req), "Cache-Control", "no-store");
	http_reply_start(r->req, 200, "OK");
	http_hold_begin(&e->hold, r->req, exec_gone, r->d->conns);
	if (c->tail)
		c->tail->next = e;
	else
		c->head = e;
	c->tail = e;
	c->nqueued++;
	ctx_next(c);
}

void interp_contexts_list(struct http_req *r)
{
	struct interp_sb *b = req_sb(r, false);
	json_t *a = json_array();

	for (struct interp_ctx *c = b ? b->ctxs : NULL; a && c; c = c->next)
		json_array_append_new(a, ctx_json(c));
	if (!a) {
		e2b_reply_error(r->req, 500, "out of memory");
		return;
	}
	http_reply_json(r->req, 200, a);
}

void interp_contexts_create(struct http_req *r)
{
	json_t *body = http_body_json(r);
	char cwd[INTERP_MAX_CWD + 1];
	space_err err = { 0 };
	struct interp_ctx *c;
	struct interp_sb *b;

	if (!body)
		return;
	if (interp_context_parse(body, cwd, &err) < 0) {
		json_decref(body);
		reply_space_err(r, &err);
		return;
	}
	json_decref(body);
	if (!(b = req_sb(r, true)))
		return;
	if (!(c = ctx_new(b, cwd, false, &err))) {
		reply_space_err(r, &err);
		return;
	}
	if (ctx_ensure(c, &err) < 0) {
		ctx_free(c, "could not start");
		reply_space_err(r, &err);
		return;
	}
	http_reply_json(r->req, 200, ctx_json(c));
}

static struct interp_ctx *req_ctx(struct http_req *r)
{
	struct interp_ctx *c = ctx_find(req_sb(r, false), r->param[0]);

	if (!c)
		e2b_reply_error(r->req, 404, "context %.64s not found", r->param[0]);
	return c;
}

void interp_contexts_delete(struct http_req *r)
{
	struct interp_ctx *c = req_ctx(r);

	if (!c)
		return;
	ctx_free(c, "the context was deleted");
	http_reply_empty(r->req, 204);
}

void interp_contexts_restart(struct http_req *r)
{
	struct interp_ctx *c = req_ctx(r);
	space_err err = { 0 };

	if (!c)
		return;
	ctx_fail_all(c, "ContextRestarted", "the context was restarted");
	ctx_stop(c);
	if (ctx_ensure(c, &err) < 0) {
		reply_space_err(r, &err);
		return;
	}
	http_reply_empty(r->req, 204);
}

void interp_contexts_interrupt(struct http_req *r)
{
	struct interp_ctx *c = req_ctx(r);

	if (!c)
		return;
	ctx_interrupt(c); /* nothing running: nothing to do */
	http_reply_empty(r->req, 204);
}
