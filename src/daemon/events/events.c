/* events.c -- the daemon's lifecycle events: the cursor, the newest ones in memory, their rows
 * written on the store's thread, and whoever waits for the next one (events.h) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "events.h"
#include "log.h"
#include "store/store.h"
#include "webhook.h"

struct events {
	struct sb_event ring[EVENTS_RING]; /* slot seq % EVENTS_RING */
	int64_t last;                      /* the newest seq given (0: none) */
	int64_t oldest;                    /* the oldest seq in the ring (0: none) */
	struct events_sub *subs;
	int64_t pruned_ms;                 /* when old rows were last dropped */
	bool notifying;
};

/* ---- loading what the last run stored ---- */

static int load_one(const struct event_row *row, void *arg)
{
	struct events *ev = arg;
	struct sb_event e;
	space_err err = { 0 };
	json_t *j = json_loads(row->body, 0, NULL);

	if (!j || event_from_json(j, &e, &err) < 0) {
		log_warn("events: stored event %lld is not one (%s): skipped", (long long)row->seq,
			 j ? err.msg : "not JSON");
		json_decref(j);
		return 0;
	}
	json_decref(j);
	e.seq = row->seq;
	event_clear(&ev->ring[e.seq % EVENTS_RING]);
	ev->ring[e.seq % EVENTS_RING] = e;
	if (!ev->oldest)
		ev->oldest = e.seq;
	return 0;
}

int events_init(struct spaced *d, space_err *err)
{
	struct events *ev = calloc(1, sizeof(*ev));
	int64_t max = 0;

	if (!ev)
		return err_set(err, ENOMEM, "out of memory");
	d->events = ev;
	if (store_events_max(d->store, &max, err) < 0)
		return err_wrap(err, "events: the last cursor");
	ev->last = max;
	if (max > 0 && store_events_each(d->store, max > EVENTS_RING ? max - EVENTS_RING : 0, NULL, 0, load_one, ev,
					 err) < 0)
		return err_wrap(err, "events: the newest ones");
	if (!ev->oldest)
		ev->oldest = max + 1;
	return webhooks_init(d, err);
}

void events_free(struct spaced *d)
{
	struct events *ev = d->events;

	if (!ev)
		return;
	webhooks_free(d);
	for (size_t i = 0; i < EVENTS_RING; i++)
		event_clear(&ev->ring[i]);
	free(ev);
	d->events = NULL;
}

/* ---- writing ---- */

struct put_job {
	struct event_row row;
	char *body;
};

static void put_run(struct store *conn, void *arg)
{
	struct put_job *j = arg;
	space_err err = { 0 };

	if (store_event_put(conn, &j->row, &err) < 0)
		log_error("events: event %lld was not stored: %s", (long long)j->row.seq, err.msg);
}

static void put_done(void *arg, bool ran)
{
	struct put_job *j = arg;

	if (!ran)
		log_warn("events: event %lld was not stored (the store stopped first)", (long long)j->row.seq);
	free(j->body);
	free(j);
}

static void store_event(struct spaced *d, const struct sb_event *e)
{
	struct put_job *j = calloc(1, sizeof(*j));
	json_t *body = event_json(e);
	space_err err = { 0 };

	if (!j || !body || !(j->body = json_dumps(body, JSON_COMPACT))) {
		log_error("events: event %lld was not stored: out of memory", (long long)e->seq);
		json_decref(body);
		if (j)
			free(j);
		return;
	}
	json_decref(body);
	j->row = (struct event_row){ .seq = e->seq, .time_ms = e->time_ms, .body = j->body };
	snprintf(j->row.sandbox_id, sizeof(j->row.sandbox_id), "%s", e->sandbox_id);
	if (store_async(d->store, put_run, put_done, j, &err) < 0) {
		log_error("events: event %lld was not stored: %s", (long long)e->seq, err.msg);
		free(j->body);
		free(j);
	}
}

/* ---- emitting ---- */

void events_emit_raw(struct spaced *d, struct sb_event *e)
{
	struct events *ev = d->events;
	struct sb_event *slot;

	if (!ev) {
		event_clear(e);
		return;
	}
	e->seq = ++ev->last;
	e->time_ms = now_ms();
	slot = &ev->ring[e->seq % EVENTS_RING];
	event_clear(slot);
	*slot = *e;
	if (ev->oldest <= e->seq - EVENTS_RING)
		ev->oldest = e->seq - EVENTS_RING + 1;
	store_event(d, slot);
	log_info("event %lld: %s %s%s%s", (long long)slot->seq, ev_type_name(slot->type), slot->sandbox_id,
		 slot->reason[0] ? ": " : "", slot->reason);
	/* A subscriber may unsubscribe itself (or be freed) from inside its callback. */
	for (struct events_sub *s = ev->subs, *next; s; s = next) {
		next = s->next;
		s->fn(s, slot);
	}
	webhooks_kick(d);
}

/* ---- reading from memory ---- */

int64_t events_last_seq(const struct spaced *d)
{
	return d->events ? d->events->last : 0;
}

int64_t events_mem_oldest(const struct spaced *d)
{
	return d->events ? d->events->oldest : 1;
}

int events_mem_each(const struct spaced *d, int64_t after, const char *sandbox, unsigned mask, int limit,
		    int (*fn)(const struct sb_event *e, void *arg), void *arg)
{
	const struct events *ev = d->events;
	int n = 0;

	if (!ev)
		return 0;
	if (after < ev->oldest - 1)
		after = ev->oldest - 1;
	for (int64_t s = after + 1; s <= ev->last && (limit <= 0 || n < limit); s++) {
		const struct sb_event *e = &ev->ring[s % EVENTS_RING];

		if (e->seq != s || !(mask & (1u << e->type)) || (sandbox && strcmp(sandbox, e->sandbox_id) != 0))
			continue;
		n++;
		if (fn(e, arg))
			break;
	}
	return n;
}

/* ---- waiting ---- */

void events_subscribe(struct spaced *d, struct events_sub *s)
{
	s->next = d->events->subs;
	d->events->subs = s;
}

void events_unsubscribe(struct spaced *d, struct events_sub *s)
{
	if (!d->events)
		return;
	for (struct events_sub **pp = &d->events->subs; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			s->next = NULL;
			return;
		}
}

/* ---- keeping ---- */

static void prune_run(struct store *conn, void *arg)
{
	int64_t *before = arg;
	space_err err = { 0 };

	if (store_events_prune(conn, *before, &err) < 0)
		log_warn("events: old events were not dropped: %s", err.msg);
}

static void prune_done(void *arg, bool ran)
{
	(void)ran;
	free(arg);
}

void events_tick(struct spaced *d)
{
	struct events *ev = d->events;
	int64_t now = now_ms(), *before;
	space_err err = { 0 };

	if (!ev)
		return;
	webhooks_tick(d);
	if (now - ev->pruned_ms < 60000)
		return;
	ev->pruned_ms = now;
	if (!(before = malloc(sizeof(*before))))
		return;
	*before = now - (int64_t)d->cfg.events_retention_s * 1000;
	/* Memory keeps what the store keeps: an event past its time is gone from both. */
	for (int64_t s = ev->oldest; s <= ev->last; s++) {
		struct sb_event *e = &ev->ring[s % EVENTS_RING];

		if (e->seq == s && e->time_ms >= *before)
			break;
		event_clear(e);
		e->seq = 0;
		ev->oldest = s + 1;
	}
	if (store_async(d->store, prune_run, prune_done, before, &err) < 0) {
		log_warn("events: %s", err.msg);
		free(before);
	}
}
