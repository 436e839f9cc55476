/* ops.c -- operations: the record of each asynchronous change, and long-polls on them */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "metrics/metrics.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

struct op_waiter {
	struct spaced *d;
	char id[ID_LEN];
	op_wait_cb cb;
	void *arg;
	struct event *timer;
	unsigned reads;   /* reads of its operation on the store's thread, not back yet */
	bool dead;        /* fired or cancelled: freed when the last read is back */
	bool first_final; /* timeout 0: the first look fires whatever the state */
	struct op_waiter *next;
};

int op_begin(struct spaced *d, enum op_kind kind, const char *sb_id, const char *op_id, struct op_rec *op,
	     space_err *err)
{
	memset(op, 0, sizeof(*op));
	/* The operation an api process wrote with the intent a node claimed keeps its id. */
	if (op_id && op_id[0]) {
		snprintf(op->id, sizeof(op->id), "%s", op_id);
	} else {
		id_new(op->id, "op-");
	}
	op->kind = kind;
	snprintf(op->sandbox_id, sizeof(op->sandbox_id), "%s", sb_id);
	op->state = OP_PENDING;
	op->created_ms = op->updated_ms = now_ms();
	if (store_op_put(d->store, op, err) < 0)
		return err_wrap(err, "recording %s operation", op_kind_name(kind));
	return 0;
}

struct op_unsaved {
	struct op_rec op;
	struct op_unsaved *next;
};

static struct op_unsaved **unsaved_find(struct spaced *d, const char *id)
{
	struct op_unsaved **pp;

	for (pp = &d->op_unsaved; *pp; pp = &(*pp)->next)
		if (strcmp((*pp)->op.id, id) == 0)
			break;
	return pp;
}

static void unsaved_drop(struct op_unsaved **pp)
{
	struct op_unsaved *u = *pp;

	*pp = u->next;
	op_rec_clear(&u->op);
	free(u);
}

/* Keeps the newest version of op to write again (replacing an older one). */
static void unsaved_keep(struct spaced *d, const struct op_rec *op)
{
	struct op_unsaved **pp = unsaved_find(d, op->id), *u = *pp;

	if (!u) {
		if (!(u = calloc(1, sizeof(*u)))) {
			log_error("operation %s: out of memory keeping it to write again", op->id);
			return;
		}
		*pp = u;
	} else {
		op_rec_clear(&u->op);
	}
	op_copy(&u->op, op);
}

/* Writes op; on failure keeps it for ops_retry (a write that succeeds later supersedes it). */
static void op_save(struct spaced *d, const struct op_rec *op)
{
	space_err err = { 0 };
	struct op_unsaved **pp;

	if (store_op_put(d->store, op, &err) == 0) {
		if (*(pp = unsaved_find(d, op->id)))
			unsaved_drop(pp);
		return;
	}
	log_error("operation %s: %s (kept; written again on the next tick)", op->id, err.msg);
	unsaved_keep(d, op);
}

void ops_retry(struct spaced *d)
{
	struct op_unsaved **pp = &d->op_unsaved;
	space_err err = { 0 };

	while (*pp) {
		if (store_op_put(d->store, &(*pp)->op, &err) == 0) {
			log_info("operation %s: written to the store again", (*pp)->op.id);
			unsaved_drop(pp);
			continue;
		}
		err_clear(&err);
		pp = &(*pp)->next;
	}
}

void ops_unsaved_free(struct spaced *d)
{
	while (d->op_unsaved) {
		log_warn("operation %s: exiting before the store took its last state",
			 d->op_unsaved->op.id);
		unsaved_drop(&d->op_unsaved);
	}
}

static void waiter_unlink(struct op_waiter *w)
{
	struct op_waiter **pp;

	for (pp = &w->d->op_waiters; *pp; pp = &(*pp)->next) {
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	}
}

static void waiter_release(struct op_waiter *w)
{
	if (w->reads == 0)
		free(w);
}

static void waiter_fire(struct op_waiter *w, const struct op_rec *op)
{
	waiter_unlink(w);
	event_free(w->timer);
	w->timer = NULL;
	w->dead = true;
	w->cb(w->d, op, w->arg);
	waiter_release(w);
}

static void wake_waiters(struct spaced *d, const struct op_rec *op)
{
	struct op_waiter *w = d->op_waiters, *next;

	for (; w; w = next) {
		next = w->next;
		if (strcmp(w->id, op->id) == 0) {
			/* Firing may free the next waiter too (a callback that cancels another):
			 * start over from the head after each. */
			waiter_fire(w, op);
			next = d->op_waiters;
		}
	}
}

void op_running(struct spaced *d, struct op_rec *op)
{
	op->state = OP_RUNNING;
	op->updated_ms = now_ms();
	op_save(d, op);
}

void op_finish(struct spaced *d, struct op_rec *op, const char *error)
{
	if (!op->id[0] || op_state_done(op->state))
		return;
	op->state = error ? OP_FAILED : OP_SUCCEEDED;
	snprintf(op->error, sizeof(op->error), "%s", error ? error : "");
	op->updated_ms = now_ms();
	op_save(d, op);
	metrics_op_finished(op->kind, !error, (double)(op->updated_ms - op->created_ms) / 1000.0);
	log_info("operation %s (%s %s) %s%s%s", op->id, op_kind_name(op->kind), op->sandbox_id,
		 op_state_name(op->state), error ? ": " : "", error ? error : "");
	wake_waiters(d, op);
}

void op_copy(struct op_rec *dst, const struct op_rec *src)
{
	*dst = *src;
	dst->result = json_incref(src->result);
}

/* A waiter's read of its operation, on the store's thread (behind the writes queued before it:
 * an operation that finished before the read was queued is seen done). */
struct waiter_read {
	struct op_waiter *w;
	bool final;        /* the timeout's: fire whatever the state */
	int rc;
	struct op_rec op;
	space_err err;
};

static void waiter_read(struct store *conn, void *arg)
{
	struct waiter_read *q = arg;

	q->rc = store_op_get(conn, q->w->id, &q->op, &q->err);
}

static void waiter_fire_failed(struct op_waiter *w, const char *why)
{
	struct op_rec failed = { 0 };

	snprintf(failed.id, sizeof(failed.id), "%s", w->id);
	failed.state = OP_FAILED;
	snprintf(failed.error, sizeof(failed.error), "%s", why);
	waiter_fire(w, &failed);
}

static void waiter_read_done(void *arg, bool ran)
{
	struct waiter_read *q = arg;
	struct op_waiter *w = q->w;

	w->reads--;
	if (w->dead)
		waiter_release(w);
	else if (!ran)
		waiter_fire_failed(w, "the daemon is stopping");
	else if (q->rc < 0 && q->err.code == ENOENT)
		waiter_fire_failed(w, "no such operation");
	else if (q->rc < 0 && q->final)
		waiter_fire_failed(w, q->err.msg);
	else if (q->rc == 0 && (q->final || op_state_done(q->op.state)))
		waiter_fire(w, &q->op);
	/* else: not done yet, or the store failed before the timeout: wait on */
	if (ran && q->rc == 0)
		op_rec_clear(&q->op);
	free(q);
}

static void waiter_look(struct op_waiter *w, bool final)
{
	struct waiter_read *q = calloc(1, sizeof(*q));
	space_err err = { 0 };

	if (!q) {
		waiter_fire_failed(w, "out of memory");
		return;
	}
	q->w = w;
	q->final = final;
	w->reads++;
	if (store_async(w->d->store, waiter_read, waiter_read_done, q, &err) < 0) {
		q->rc = -1;
		q->err = err;
		waiter_read_done(q, true);
	}
}

static void waiter_first(evutil_socket_t fd, short what, void *arg)
{
	struct op_waiter *w = arg;

	(void)fd;
	(void)what;
	w->reads--;
	if (w->dead)
		waiter_release(w);
	else
		waiter_look(w, w->first_final);
}

static void waiter_timeout(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	waiter_look(arg, true);
}

/* The waiter is registered first, then its operation read off the loop: an operation that
 * finishes after the registration wakes it (wake_waiters); one that finished before is seen
 * done by the read. */
int op_wait(struct spaced *d, const char *id, int timeout_s, op_wait_cb cb, void *arg,
	    struct op_waiter **out, space_err *err)
{
	struct timeval tv = { timeout_s > 0 ? timeout_s : 0, 0 }, zero = { 0, 0 };
	struct op_waiter *w;

	if (!id_valid(id, "op-"))
		return err_set(err, ENOENT, "no operation '%.64s'", id);
	w = calloc(1, sizeof(*w));
	if (!w)
		return err_set(err, ENOMEM, "out of memory");
	w->d = d;
	snprintf(w->id, sizeof(w->id), "%s", id);
	w->cb = cb;
	w->arg = arg;
	w->timer = evtimer_new(d->base, waiter_timeout, w);
	if (!w->timer) {
		free(w);
		return err_set(err, ENOMEM, "out of memory");
	}
	if (event_base_once(d->base, -1, EV_TIMEOUT, waiter_first, w, &zero) < 0) {
		event_free(w->timer);
		free(w);
		return err_set(err, ENOMEM, "out of memory");
	}
	w->reads++; /* the first look, from the loop: never a call back from inside op_wait */
	w->first_final = timeout_s <= 0;
	if (timeout_s > 0)
		evtimer_add(w->timer, &tv);
	w->next = d->op_waiters;
	d->op_waiters = w;
	if (out)
		*out = w;
	return 0;
}

void op_wait_cancel(struct op_waiter *w)
{
	if (!w || w->dead)
		return;
	waiter_unlink(w);
	event_free(w->timer);
	w->timer = NULL;
	w->dead = true;
	waiter_release(w);
}

/* An api process's long-polls: the operations they wait for are read on the store's thread
 * (store_async), and the waiters of those done are woken here. One read at a time. */
struct op_poll_read {
	struct spaced *d;
	size_t n;
	char (*ids)[ID_LEN];
	struct op_rec *ops;    /* ops[i].id[0] == '\0': not read */
};

static bool polling, poll_again; /* a read in flight; and another asked for meanwhile */

static void poll_read(struct store *conn, void *arg)
{
	struct op_poll_read *p = arg;
	space_err err = { 0 };

	for (size_t i = 0; i < p->n; i++) {
		if (store_op_get(conn, p->ids[i], &p->ops[i], &err) < 0)
			memset(&p->ops[i], 0, sizeof(p->ops[i]));
		err_clear(&err);
	}
}

static void poll_done(void *arg, bool ran)
{
	struct op_poll_read *p = arg;

	polling = false;
	for (size_t i = 0; i < p->n; i++) {
		/* (waiters cancelled meanwhile are simply not found) */
		if (ran && p->ops[i].id[0] && op_state_done(p->ops[i].state))
			wake_waiters(p->d, &p->ops[i]);
		op_rec_clear(&p->ops[i]);
	}
	free(p->ids);
	free(p->ops);
	/* Asked while this read was out (a notification of a result it may have read too early). */
	if (poll_again) {
		poll_again = false;
		ops_poll(p->d);
	}
	free(p);
}

void ops_poll(struct spaced *d)
{
	struct op_poll_read *p;
	space_err err = { 0 };
	size_t n = 0;

	for (struct op_waiter *w = d->op_waiters; w; w = w->next)
		n++;
	if (polling && n)
		poll_again = true;
	if (polling || !n || !(p = calloc(1, sizeof(*p))))
		return;
	p->d = d;
	p->ids = calloc(n, sizeof(*p->ids));
	p->ops = calloc(n, sizeof(*p->ops));
	if (!p->ids || !p->ops) {
		free(p->ids);
		free(p->ops);
		free(p);
		return;
	}
	for (struct op_waiter *w = d->op_waiters; w; w = w->next)
		memcpy(p->ids[p->n++], w->id, ID_LEN);
	polling = true;
	if (store_async(d->store, poll_read, poll_done, p, &err) < 0) {
		log_warn("operations: %s", err.msg);
		poll_done(p, false);
	}
}
