/* events_read.c -- a page of events after a cursor, for any front end: from memory when the
 * cursor is in it, else from the store on its thread; waiting up to wait_ms for the first one
 * when there is none yet (events.h, "Reading") */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "events.h"
#include "log.h"
#include "store/store.h"

struct events_wait {
	struct spaced *d;
	struct events_query q;
	events_page_fn fn;
	void *arg;
	struct events_sub sub;
	struct event *timer;
	bool subscribed, cancelled, in_store, starting, finished;
	/* a store read: */
	struct events_page page;
	int64_t last_row;
	space_err err;
};

void events_page_free(struct events_page *p)
{
	for (size_t i = 0; i < p->n; i++)
		event_clear(&p->v[i]);
	free(p->v);
	p->v = NULL;
	p->n = 0;
}

static bool matches(const struct events_query *q, const struct sb_event *e)
{
	return (q->mask & (1u << e->type)) && (!q->sandbox[0] || strcmp(q->sandbox, e->sandbox_id) == 0);
}

static int collect(const struct sb_event *e, void *arg)
{
	struct events_page *p = arg;

	p->v[p->n] = *e;
	if (e->data)
		json_incref(e->data);
	p->n++;
	return 0;
}

/* From memory: what matches after q->after, at most q->limit. The cursor is the last event
 * looked at, so that a page of nothing that matched still moves a reader on. */
static int mem_page(struct spaced *d, const struct events_query *q, struct events_page *p)
{
	int64_t last = events_last_seq(d);

	memset(p, 0, sizeof(*p));
	if (!(p->v = calloc((size_t)q->limit, sizeof(*p->v))))
		return -1;
	events_mem_each(d, q->after, q->sandbox[0] ? q->sandbox : NULL, q->mask, q->limit, collect, p);
	p->cursor = (int)p->n == q->limit ? p->v[p->n - 1].seq : (last > q->after ? last : q->after);
	p->more = p->cursor < last;
	return 0;
}

static void wait_free(struct events_wait *w)
{
	if (w->subscribed)
		events_unsubscribe(w->d, &w->sub);
	if (w->timer)
		event_free(w->timer);
	events_page_free(&w->page);
	free(w);
}

static void answer(struct events_wait *w, struct events_page *p, const space_err *err)
{
	if (w->subscribed) {
		events_unsubscribe(w->d, &w->sub);
		w->subscribed = false;
	}
	w->fn(w->arg, p, err);
}

/* ---- waiting for the first one ---- */

static void on_event(struct events_sub *s, const struct sb_event *e)
{
	struct events_wait *w = (struct events_wait *)((char *)s - offsetof(struct events_wait, sub));
	struct events_page p;

	if (!matches(&w->q, e))
		return;
	if (mem_page(w->d, &w->q, &p) < 0)
		return;
	answer(w, &p, NULL);
	events_page_free(&p);
	wait_free(w);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct events_wait *w = arg;
	struct events_page p = { .cursor = events_last_seq(w->d) };

	(void)fd;
	(void)what;
	if (p.cursor < w->q.after)
		p.cursor = w->q.after;
	answer(w, &p, NULL);
	wait_free(w);
}

/* ---- from the store ---- */

static int store_row(const struct event_row *row, void *arg)
{
	struct events_wait *w = arg;
	struct sb_event e;
	space_err err = { 0 };
	json_t *j = json_loads(row->body, 0, NULL);

	w->last_row = row->seq;
	if (j && event_from_json(j, &e, &err) == 0) {
		e.seq = row->seq;
		if (matches(&w->q, &e))
			w->page.v[w->page.n++] = e;
		else
			event_clear(&e);
	}
	json_decref(j);
	return 0;
}

static void store_run(struct store *conn, void *arg)
{
	struct events_wait *w = arg;

	if (!(w->page.v = calloc((size_t)w->q.limit, sizeof(*w->page.v)))) {
		err_set(&w->err, ENOMEM, "out of memory");
		return;
	}
	if (store_events_each(conn, w->q.after, w->q.sandbox[0] ? w->q.sandbox : NULL, w->q.limit, store_row, w,
			      &w->err) < 0)
		events_page_free(&w->page);
}

static void store_done(void *arg, bool ran)
{
	struct events_wait *w = arg;

	if (!ran && !w->err.code)
		err_set(&w->err, EIO, "events: the store is shutting down");
	if (!w->cancelled) {
		if (w->err.code) {
			answer(w, NULL, &w->err);
		} else {
			int64_t last = events_last_seq(w->d);

			w->page.cursor = w->last_row > w->q.after ? w->last_row : w->q.after;
			/* (an api process keeps no events of its own: the store's newest is the newest) */
			w->page.more = (int)w->page.n == w->q.limit || (last && w->page.cursor < last);
			answer(w, &w->page, NULL);
		}
	}
	if (w->starting)
		w->finished = true; /* (a store without its own thread ran it at once) */
	else
		wait_free(w);
}

struct events_wait *events_query(struct spaced *d, const struct events_query *q, events_page_fn fn, void *arg)
{
	struct events_wait *w = calloc(1, sizeof(*w));
	struct events_page p;
	space_err err = { 0 };

	if (!w || q->limit < 1) {
		free(w);
		err_set(&err, ENOMEM, "out of memory");
		fn(arg, NULL, &err);
		return NULL;
	}
	*w = (struct events_wait){ .d = d, .q = *q, .fn = fn, .arg = arg };
	/* Older than memory (or a process that holds none: an api process): the store has them. */
	if (d->cfg.role == DROLE_API || q->after < events_mem_oldest(d) - 1) {
		w->in_store = w->starting = true;
		if (store_async(d->store, store_run, store_done, w, &err) < 0) {
			free(w);
			fn(arg, NULL, &err);
			return NULL;
		}
		w->starting = false;
		if (w->finished) {
			wait_free(w);
			return NULL;
		}
		return w;
	}
	if (mem_page(d, q, &p) < 0) {
		free(w);
		err_set(&err, ENOMEM, "out of memory");
		fn(arg, NULL, &err);
		return NULL;
	}
	if (p.n || q->wait_ms <= 0) {
		fn(arg, &p, NULL);
		events_page_free(&p);
		free(w);
		return NULL;
	}
	events_page_free(&p);
	w->sub.fn = on_event;
	events_subscribe(d, &w->sub);
	w->subscribed = true;
	if (!(w->timer = evtimer_new(d->base, on_timeout, w))) {
		wait_free(w);
		err_set(&err, ENOMEM, "out of memory");
		fn(arg, NULL, &err);
		return NULL;
	}
	struct timeval tv = { q->wait_ms / 1000, (q->wait_ms % 1000) * 1000 };
	evtimer_add(w->timer, &tv);
	return w;
}

void events_query_cancel(struct events_wait *w)
{
	if (!w)
		return;
	/* A store read in flight ends on its own (store_done frees it, answering nobody). */
	if (w->in_store) {
		w->cancelled = true;
		return;
	}
	wait_free(w);
}
