/* events.h -- lifecycle events: what happened to a sandbox, in order, kept for a while, for
 * readers (GET /v1/events, E2B's /events/sandboxes) and webhooks (webhook.h).
 * docs/design/events.md.
 *
 * The core emits an event where a sandbox's state changes (sandbox_set_state), where a user's
 * sandbox comes to be (a create, a claim from a pool, a fork's children), where a fork or a
 * snapshot is done, where a timeout is set, and before a timeout runs out. Each event gets the
 * next cursor (seq: 1, 2, ...; one past the largest stored at start), is kept in memory (the
 * newest EVENTS_RING of them) and written to the store on its thread, and wakes whoever waits:
 * long-polls, streams, the webhook deliverer. Older events are read from the store. */
#ifndef SPACE_EVENTS_H
#define SPACE_EVENTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "model/model.h"

#define EVENTS_RING 8192
#define EVENTS_PAGE_MAX 1000

enum ev_type {
	EVT_CREATED,
	EVT_RUNNING,
	EVT_PAUSED,
	EVT_RESUMED,
	EVT_SUSPENDED,
	EVT_RESTORED,
	EVT_FORKED,
	EVT_STOPPED,
	EVT_DELETED,
	EVT_FAILED,
	EVT_TIMEOUT_WARNING,
	EVT_TIMEOUT_SET,
	EVT_SNAPSHOTTED,
	EVT__COUNT
};
#define EVT_ALL ((1u << EVT__COUNT) - 1)

struct sb_event {
	int64_t seq, time_ms;
	enum ev_type type;
	char sandbox_id[ID_LEN];
	char operation_id[ID_LEN]; /* "" = none */
	char template_ref[128];
	char template_digest[80];
	char state[16];            /* the sandbox's state after it */
	char reason[256];          /* why, "" = none */
	json_t *data;              /* more (a fork's children, a timeout's time); NULL = none */
};

/* ---- pure (event_types.c, unit-tested) ---- */
/* "sandbox.created" ... */
const char *ev_type_name(enum ev_type t);
/* "created" or "sandbox.created" -> the type; -1 when unknown. */
int ev_type_parse(const char *s);
/* A comma-separated list ("created,sandbox.deleted"; "" or "*": all) or a JSON array of names
 * (NULL: all) -> a mask of 1u << type. -1 with err (EINVAL, naming the bad one). */
int ev_types_csv(const char *csv, unsigned *mask, space_err *err);
int ev_types_json(const json_t *arr, unsigned *mask, space_err *err);
/* The event a state change is, or -1 when it is none (a failed action's way back). */
int ev_for_transition(enum sb_state from, enum sb_state to);
/* The event as SPACE renders it (GET /v1/events, a SPACE webhook's body); and parsed back
 * from that form (the store's rows): -1 with err when it is not one. */
json_t *event_json(const struct sb_event *e);
int event_from_json(const json_t *j, struct sb_event *out, space_err *err);
void event_clear(struct sb_event *e);

/* ---- the daemon's events (events.c) ---- */
struct spaced;
struct sandbox;

/* At start, after the store is open: the cursor goes on from the stored ones, and the newest
 * come back into memory. */
int events_init(struct spaced *d, space_err *err);
void events_free(struct spaced *d);
/* Emits one event about sb (its id, template, state and operation in flight are read from it);
 * data is taken over (may be NULL). Only users' sandboxes have events. */
void events_emit(struct sandbox *sb, enum ev_type type, const char *reason, json_t *data);
/* The same, from the fields of e (the caller fills sandbox_id...; seq and time are given here). */
void events_emit_raw(struct spaced *d, struct sb_event *e);
/* sandbox_set_state: the event a state change is, if any. */
void events_transition(struct sandbox *sb, enum sb_state from, enum sb_state to);
/* Periodic (sandbox_tick): old events and deliveries go. */
void events_tick(struct spaced *d);

/* The newest cursor given (0: none yet), and the oldest still in memory (after it, a read
 * needs no store). */
int64_t events_last_seq(const struct spaced *d);
int64_t events_mem_oldest(const struct spaced *d);
/* Events in memory with seq > after, matching sandbox (NULL: any) and mask, ascending, at
 * most limit: fn each; returns how many. */
int events_mem_each(const struct spaced *d, int64_t after, const char *sandbox, unsigned mask, int limit,
		    int (*fn)(const struct sb_event *e, void *arg), void *arg);

/* ---- reading (events_read.c) ----
 * A page of the events after q->after that match (q->sandbox "" = any; q->mask), at most
 * q->limit (1..EVENTS_PAGE_MAX), from memory or the store; when there is none and wait_ms > 0,
 * the first that comes within it. fn(arg, page, NULL) once (page->cursor: the last event
 * looked at, the next query's after; page->more: more are there already), or fn(arg, NULL,
 * err). fn may run before events_query returns (then it returns NULL); else the handle, to
 * cancel with while it waits (a client gone): fn is not called then. The page's events are
 * the caller's only during fn. */
struct events_query {
	int64_t after;
	char sandbox[ID_LEN];
	unsigned mask;
	int limit;
	int wait_ms;
};
struct events_page {
	struct sb_event *v;
	size_t n;
	int64_t cursor;
	bool more;
};
typedef void (*events_page_fn)(void *arg, struct events_page *page, const space_err *err);
struct events_wait;
struct events_wait *events_query(struct spaced *d, const struct events_query *q, events_page_fn fn, void *arg);
void events_query_cancel(struct events_wait *w);
void events_page_free(struct events_page *p);

/* Whoever waits for new events: fn is called for each event emitted while it is added. */
struct events_sub {
	void (*fn)(struct events_sub *s, const struct sb_event *e);
	struct events_sub *next;
};
void events_subscribe(struct spaced *d, struct events_sub *s);
void events_unsubscribe(struct spaced *d, struct events_sub *s);

#endif
