/* envd_watch.c -- envd's polled watchers: filesystem.Filesystem CreateWatcher, GetWatcherEvents,
 * RemoveWatcher (what the Python SDK's synchronous watch_dir uses). A watcher is a watch the
 * daemon runs in the guest for itself (an ephemeral session of kind watch, docs/design/
 * channels.md), tied to no request: its events are parsed as WatchDir parses them
 * (envd_watch_event) into a bounded queue that each GetWatcherEvents empties.
 *
 * Promises:
 * - Ids are 16 random hex digits, found only with the token of the sandbox that made them
 *   (another sandbox's: not_found, as an unknown id). At most WATCHERS_PER_SANDBOX per sandbox
 *   (resource_exhausted beyond).
 * - CreateWatcher answers once the guest's watch is in place (its header line), so whatever
 *   happens after the answer is seen; a path that is missing or not a directory is answered
 *   with the operation's error (not_found, invalid_argument...).
 * - The queue keeps the newest WATCHER_MAX_EVENTS events and WATCHER_MAX_BYTES of names; beyond
 *   either the oldest are dropped. The next GetWatcherEvents answers what was kept and says how
 *   many were lost in the header X-Space-Events-Dropped (envd's message has no field for it;
 *   the guest's own inotify overflow counts as one); the first loss of a run is logged.
 * - A watcher whose guest watch ended (the directory was removed, the sandbox was suspended or
 *   stopped, the agent failed it) answers its remaining events once, then not_found with why it
 *   ended, and is freed. The SDK raises on any error, so a caller learns the watch is over.
 *
 * Lifetime: a watcher is in d->envd_watchers and watches its session from creation until it is
 * freed, exactly once, by one of: RemoveWatcher; the GetWatcherEvents that finds it ended and
 * empty; the client of a CreateWatcher not yet answered going away (on_gone); a failed create;
 * or its session going away with the sandbox's runtime (deleted, or the daemon stopping:
 * sessions_free hands every watch w->s == NULL). So every watcher is freed at shutdown with the
 * sandboxes, and no watcher outlives its sandbox. */
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "connect.h"
#include "daemon.h"
#include "e2b.h"
#include "envd_fs.h"
#include "log.h"
#include "sandbox/sandbox.h"

/* Each watcher is a live session of its sandbox and counts against max_sessions_per_sandbox
 * (default 64): a quarter of that leaves the rest to processes and file operations. */
#define WATCHERS_PER_SANDBOX 16
#define WATCHER_MAX_EVENTS 4096
#define WATCHER_MAX_BYTES (1u << 20)
/* One event line (the agent's paths are at most 4095 bytes, escaped): at most this long. */
#define WATCHER_LINE_MAX (64u << 10)
/* What we keep of the operation's stderr (its error JSON). */
#define WATCHER_ERR_MAX 4096
/* Output bytes handled per loop turn before yielding to other work. */
#define WATCHER_TURN (1u << 20)
#define WATCHER_ID_HEX 16

struct envd_watcher {
	struct envd_watcher *next;
	struct spaced *d;
	struct session_watch w;
	struct http_hold hold;  /* the CreateWatcher request until the watch is in place */
	bool held, ready, ended, skip_line, logged_drop;
	struct event *kick;
	char id[ID_LEN];
	char sb[ID_LEN];
	char dir[ENVD_PATH_MAX + 1]; /* as the agent's header line names it */
	char why[256];               /* why it ended */
	struct envd_watch_state watch;
	struct evbuffer *line, *err;
	/* The queue: a ring of FilesystemEvent objects, oldest at head. */
	json_t *ev[WATCHER_MAX_EVENTS];
	unsigned head, n;
	size_t bytes;
	uint64_t dropped;            /* since the last GetWatcherEvents */
};

#define WATCHER_OF(ptr, member) ((struct envd_watcher *)((char *)(ptr) - offsetof(struct envd_watcher, member)))

static void queue_clear(struct envd_watcher *x)
{
	for (unsigned i = 0; i < x->n; i++)
		json_decref(x->ev[(x->head + i) % WATCHER_MAX_EVENTS]);
	x->head = x->n = 0;
	x->bytes = 0;
}

static size_t event_cost(const json_t *ev)
{
	return json_string_length(json_object_get(ev, "name")) + 32;
}

static void note_dropped(struct envd_watcher *x, uint64_t n)
{
	if (!x->dropped && !x->logged_drop)
		log_warn("e2b watcher %s (sandbox %s): events dropped (the queue holds %d); the next "
			 "GetWatcherEvents answers what is kept",
			 x->id, x->sb, WATCHER_MAX_EVENTS);
	x->logged_drop = true;
	x->dropped += n;
}

static void queue_drop_oldest(struct envd_watcher *x)
{
	json_t *old = x->ev[x->head];

	x->bytes -= event_cost(old);
	json_decref(old);
	x->head = (x->head + 1) % WATCHER_MAX_EVENTS;
	x->n--;
	note_dropped(x, 1);
}

/* Takes ev's reference. */
static void queue_push(struct envd_watcher *x, json_t *ev)
{
	size_t cost = event_cost(ev);

	while (x->n && (x->n == WATCHER_MAX_EVENTS || x->bytes + cost > WATCHER_MAX_BYTES))
		queue_drop_oldest(x);
	x->ev[(x->head + x->n) % WATCHER_MAX_EVENTS] = ev;
	x->n++;
	x->bytes += cost;
}

/* Frees x (the lifetime rules are in the file's comment). An unanswered CreateWatcher gets
 * code/msg (code NULL: none is owed, its client is gone). */
static void watcher_free(struct envd_watcher *x, const char *code, const char *msg)
{
	struct envd_watcher **pp;

	for (pp = &x->d->envd_watchers; *pp; pp = &(*pp)->next) {
		if (*pp == x) {
			*pp = x->next;
			break;
		}
	}
	if (x->held) {
		http_hold_end(&x->hold);
		if (code)
			connect_reply_error(x->hold.req, code, "%s", msg);
	}
	if (x->w.s) {
		session_cancel(x->w.s); /* may wake us: the kick is freed below, never run */
		session_watch_del(&x->w);
	}
	if (x->kick)
		event_free(x->kick);
	if (x->line)
		evbuffer_free(x->line);
	if (x->err)
		evbuffer_free(x->err);
	queue_clear(x);
	free(x);
}

/* The operation's stderr JSON message, else text. */
static void error_text(struct envd_watcher *x, const char *text, char *out, size_t len)
{
	size_t n = evbuffer_get_length(x->err);
	char *p = n ? (char *)evbuffer_pullup(x->err, -1) : NULL;
	char *nl = p ? memchr(p, '\n', n) : NULL;
	json_t *j = p ? json_loadb(p, nl ? (size_t)(nl - p) : n, 0, NULL) : NULL;
	const char *m = json_string_value(json_object_get(j, "message"));

	snprintf(out, len, "%s", m ? m : text);
	json_decref(j);
}

/* The guest's watch is over: an unanswered create gets its error (x freed), else x is kept
 * ended until its last events are taken. */
static void watcher_ended(struct envd_watcher *x, const struct session_rec *rec)
{
	char msg[1024];
	int e = rec->exit_code > 0 && rec->exit_code < 256 ? rec->exit_code : EIO;

	if (rec->state == SESS_FAILED)
		snprintf(msg, sizeof(msg), "%s", rec->error[0] ? rec->error : "the watch failed");
	else if (rec->exit_signal || rec->exit_code != 0)
		error_text(x, strerror(e), msg, sizeof(msg));
	else
		snprintf(msg, sizeof(msg), "the watched directory is gone");
	if (!x->ready) {
		const char *code = rec->state == SESS_FAILED ? "unavailable" : connect_code_of_errno(e);

		watcher_free(x, code, msg);
		return;
	}
	x->ended = true;
	snprintf(x->why, sizeof(x->why), "%s", msg);
}

/* One complete stdout line: the header (the watch is in place: answer the create), then events. */
static int watcher_line(struct envd_watcher *x, const char *line, size_t len)
{
	json_t *evs, *ev;
	size_t i;
	int rc;

	if (!x->ready) {
		json_t *h = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
		const char *p = json_string_value(json_object_get(h, "path"));

		if (!p || strlen(p) > ENVD_PATH_MAX) {
			json_decref(h);
			return -1;
		}
		snprintf(x->dir, sizeof(x->dir), "%s", p);
		json_decref(h);
		x->ready = true;
		if (x->held) {
			http_hold_end(&x->hold);
			x->held = false;
			connect_reply(x->hold.req, json_pack("{s:s}", "watcherId", x->id));
		}
		return 0;
	}
	rc = envd_watch_event(&x->watch, x->dir, line, len, &evs);
	if (rc < 0)
		return -1;
	if (rc == 1)
		note_dropped(x, 1);
	json_array_foreach(evs, i, ev)
		queue_push(x, json_incref(ev));
	json_decref(evs);
	return 0;
}

static int watcher_stdout(struct envd_watcher *x, const char *p, size_t n)
{
	while (n) {
		const char *nl = memchr(p, '\n', n);
		size_t take = nl ? (size_t)(nl - p) : n;

		if (x->skip_line) {
			/* output was lost under us: what is left of a line is not one */
			if (!nl)
				return 0;
			x->skip_line = false;
		} else {
			if (evbuffer_get_length(x->line) + take > WATCHER_LINE_MAX)
				return -1;
			evbuffer_add(x->line, p, take);
		}
		p += take;
		n -= take;
		if (!nl)
			break;
		p++;
		n--;
		size_t ll = evbuffer_get_length(x->line);
		char *line = (char *)evbuffer_pullup(x->line, -1);
		int rc = watcher_line(x, line ? line : "", ll);

		evbuffer_drain(x->line, ll);
		if (rc < 0)
			return -1;
	}
	return 0;
}

/* Reads what the session produced since the last time. */
static void watcher_pump(struct envd_watcher *x)
{
	struct session *s = x->w.s;
	space_err err = { 0 };
	size_t turn = 0;
	char buf[16384];

	if (!s || x->ended)
		return;
	while (turn < WATCHER_TURN) {
		int stream = 0;
		ssize_t n;

		if (x->w.pos < session_output_start(s)) {
			note_dropped(x, 1);
			x->w.pos = session_output_start(s);
			x->skip_line = true;
			evbuffer_drain(x->line, evbuffer_get_length(x->line));
		}
		n = session_output_read(s, x->w.pos, &stream, buf, sizeof(buf), &err);
		if (n < 0) {
			log_warn("e2b watcher %s: %s", x->id, err.msg);
			if (!x->ready) {
				watcher_free(x, "internal", err.msg);
				return;
			}
			session_cancel(s);
			x->ended = true;
			snprintf(x->why, sizeof(x->why), "%s", err.msg);
			return;
		}
		if (n == 0)
			break;
		x->w.pos += (uint64_t)n;
		turn += (size_t)n;
		if (stream == 2) {
			size_t have = evbuffer_get_length(x->err);

			if (have < WATCHER_ERR_MAX)
				evbuffer_add(x->err, buf, (size_t)n < WATCHER_ERR_MAX - have ? (size_t)n : WATCHER_ERR_MAX - have);
			continue;
		}
		if (watcher_stdout(x, buf, (size_t)n) < 0) {
			if (!x->ready) {
				watcher_free(x, "internal", "the guest agent's answer was malformed");
				return;
			}
			/* a hostile or broken guest: the watch ends here, what was queued is kept */
			session_cancel(s);
			x->ended = true;
			snprintf(x->why, sizeof(x->why), "the guest agent's events were malformed");
			return;
		}
	}
	if (turn)
		session_watch_progress(&x->w);
	if (turn >= WATCHER_TURN)
		event_active(x->kick, 0, 0); /* more later: other work first */
	else if (session_done(s) && x->w.pos >= session_output_length(s))
		watcher_ended(x, session_rec(s));
}

static void watcher_kick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	watcher_pump(arg);
}

static void watcher_wake(struct session_watch *w)
{
	struct envd_watcher *x = WATCHER_OF(w, w);

	if (!w->s) {
		/* sessions_free: the sandbox's runtime is going away (deleted, daemon stopping). It
		 * has unlinked w already and this is w's last use: the watcher goes with it now (the
		 * loop may never turn again to run a deferred free). */
		watcher_free(x, "unavailable", "the sandbox went away");
		return;
	}
	event_active(x->kick, 0, 0);
}

static void watcher_gone(struct http_hold *h)
{
	struct envd_watcher *x = WATCHER_OF(h, hold);

	x->held = false;
	watcher_free(x, NULL, NULL);
}

/* The live watcher id names for this request's sandbox, or NULL. */
static struct envd_watcher *watcher_find(struct http_req *r, const char *id)
{
	const char *sb = e2b_sandbox_id(r);

	for (struct envd_watcher *x = r->d->envd_watchers; x; x = x->next)
		if (x->ready && strcmp(x->id, id) == 0 && strcmp(x->sb, sb) == 0)
			return x;
	return NULL;
}

static bool id_taken(struct spaced *d, const char *id)
{
	for (struct envd_watcher *x = d->envd_watchers; x; x = x->next)
		if (strcmp(x->id, id) == 0)
			return true;
	return false;
}

/* The request's watcherId, or NULL having answered. */
static const char *msg_watcher_id(struct http_req *r, json_t *msg)
{
	const char *id = json_string_value(json_object_get(msg, "watcherId"));

	if (!id) {
		connect_reply_error(r->req, "invalid_argument", "watcherId must be a string");
		return NULL;
	}
	return id;
}

void envd_fs_create_watcher(struct http_req *r)
{
	json_t *msg = connect_request(r, false), *pv;
	char user[ENVD_USER_MAX], path[ENVD_PATH_MAX + 1];
	const char *sb = e2b_sandbox_id(r);
	space_err err = { 0 };
	struct envd_watcher *x;
	bool recursive;
	int count = 0;

	if (!msg)
		return;
	pv = json_object_get(msg, "path");
	recursive = json_is_true(json_object_get(msg, "recursive"));
	if (pv && !json_is_string(pv))
		err_set(&err, EINVAL, "path must be a string");
	else if (envd_user(r, false, user, &err) == 0)
		envd_abs_path(r, user, json_string_value(pv), path, &err);
	json_decref(msg);
	if (err.code) {
		connect_reply_error(r->req, "invalid_argument", "%s", err.msg);
		return;
	}
	for (x = r->d->envd_watchers; x; x = x->next)
		count += strcmp(x->sb, sb) == 0;
	if (count >= WATCHERS_PER_SANDBOX) {
		connect_reply_error(r->req, "resource_exhausted", "this sandbox has %d watchers already (the most): "
				    "remove one first", WATCHERS_PER_SANDBOX);
		return;
	}
	x = calloc(1, sizeof(*x));
	if (!x || !(x->line = evbuffer_new()) || !(x->err = evbuffer_new()) ||
	    !(x->kick = event_new(r->d->base, -1, 0, watcher_kick, x))) {
		if (x) {
			x->d = r->d;
			watcher_free(x, NULL, NULL);
		}
		connect_reply_error(r->req, "internal", "out of memory");
		return;
	}
	x->d = r->d;
	snprintf(x->sb, sizeof(x->sb), "%s", sb);
	do
		id_new(x->id, "");
	while (id_taken(r->d, x->id));
	x->w.fn = watcher_wake;
	x->next = r->d->envd_watchers;
	r->d->envd_watchers = x;
	struct session *s = session_open_internal(r->d, sb, SESS_KIND_WATCH,
						  (const char *[]){ "watch", path, recursive ? "-r" : NULL, NULL },
						  user[0] ? user : NULL, false, &err);
	if (!s) {
		watcher_free(x, NULL, NULL);
		connect_reply_err(r->req, &err);
		return;
	}
	session_watch_add(s, &x->w);
	http_hold_begin(&x->hold, r->req, watcher_gone, r->d->conns);
	x->held = true;
	watcher_pump(x); /* may answer, and free x */
}

/* The watcher a GetWatcherEvents or RemoveWatcher request names, or NULL having answered. */
static struct envd_watcher *watcher_of_request(struct http_req *r)
{
	json_t *msg = connect_request(r, false);
	struct envd_watcher *x;
	const char *id;

	if (!msg)
		return NULL;
	if (!(id = msg_watcher_id(r, msg))) {
		json_decref(msg);
		return NULL;
	}
	x = watcher_find(r, id);
	json_decref(msg);
	if (!x)
		connect_reply_error(r->req, "not_found", "watcher not found");
	return x;
}

void envd_fs_get_watcher_events(struct http_req *r)
{
	struct envd_watcher *x = watcher_of_request(r);
	json_t *events;

	if (!x)
		return;
	if (!x->n && x->ended) {
		char why[sizeof(x->why) + 64];

		snprintf(why, sizeof(why), "the watcher has ended: %s", x->why);
		watcher_free(x, NULL, NULL);
		connect_reply_error(r->req, "not_found", "%s", why);
		return;
	}
	if (!(events = json_array())) {
		connect_reply_error(r->req, "internal", "out of memory");
		return;
	}
	for (unsigned i = 0; i < x->n; i++)
		json_array_append(events, x->ev[(x->head + i) % WATCHER_MAX_EVENTS]);
	if (x->dropped) {
		char n[24];

		snprintf(n, sizeof(n), "%llu", (unsigned long long)x->dropped);
		evhttp_add_header(evhttp_request_get_output_headers(r->req), "X-Space-Events-Dropped", n);
	}
	queue_clear(x);
	x->dropped = 0;
	connect_reply(r->req, json_pack("{s:o}", "events", events));
}

void envd_fs_remove_watcher(struct http_req *r)
{
	struct envd_watcher *x = watcher_of_request(r);

	if (!x)
		return;
	watcher_free(x, NULL, NULL);
	connect_reply(r->req, json_object());
}
