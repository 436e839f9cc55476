/* dp_ws.c -- a session over one WebSocket (docs/design/channels.md): output as binary messages
 * [u8 stream][bytes] from an offset, stdin as binary messages, resize / signal / stdin_close as
 * JSON text messages, and the exit as a last text message. Memory is bounded both ways: output
 * waits while the socket is behind, input waits while the session's stdin is full. */
#include <event2/event.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "front/req.h"
#include "daemon.h"
#include "dataplane.h"
#include "http/ws.h"
#include "log.h"
#include "metrics/metrics.h"
#include "sandbox/sandbox.h"

/* Output bytes per message at most. */
#define WSA_CHUNK (64u << 10)
/* Bytes queued toward the client before we wait for it. */
#define WSA_HIGH_WATER (1u << 20)
/* The largest message a client may send (stdin chunks, control messages). */
#define WSA_MAX_MESSAGE (1u << 20)

struct wsa {
	struct ws *ws;
	struct session_watch w;
	struct event *kick;
	uint8_t *buf;
	bool watching, ended, paused_in;
	struct evbuffer *pending_in; /* stdin the session could not take yet */
};

static void wsa_release(struct wsa *a)
{
	if (a->watching) {
		if (a->w.s)
			session_set_stdin_room_cb(a->w.s, NULL, NULL);
		session_watch_del(&a->w);
	}
	if (a->kick)
		event_free(a->kick);
	if (a->pending_in)
		evbuffer_free(a->pending_in);
	free(a->buf);
	free(a);
}

static void wsa_text(struct wsa *a, json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

	json_decref(j);
	if (s)
		ws_send(a->ws, false, s, strlen(s));
	free(s);
}

static void wsa_error(struct wsa *a, const char *msg)
{
	wsa_text(a, json_pack("{s:s,s:s}", "type", "error", "message", msg));
}

/* The session ended and the client has all its output: say how, then close. */
static void wsa_exit(struct wsa *a, struct session *s)
{
	const struct session_rec *rec = session_rec(s);

	a->ended = true;
	if (rec->state == SESS_FAILED) {
		wsa_error(a, rec->error[0] ? rec->error : "the session failed");
		ws_close(a->ws, 1011, "session failed");
		return;
	}
	wsa_text(a, json_pack("{s:s,s:o,s:o}", "type", "exit", "exit_code",
			      rec->exit_signal ? json_null() : json_integer(rec->exit_code), "signal",
			      rec->exit_signal ? json_integer(rec->exit_signal) : json_null()));
	ws_close(a->ws, 1000, "exited");
}

static void wsa_pump_out(struct wsa *a)
{
	struct session *s = a->w.s;
	space_err err = { 0 };
	bool moved = false;
	ssize_t n = 0;

	if (!s) {
		if (!a->ended) {
			a->ended = true;
			wsa_error(a, "the session is no longer available");
			ws_close(a->ws, 1011, "session gone");
		}
		return;
	}
	while (!a->ended && ws_queued(a->ws) < WSA_HIGH_WATER) {
		int stream = 1;

		if (a->w.pos < session_output_start(s)) {
			uint64_t kept = session_output_start(s);

			wsa_text(a, json_pack("{s:s,s:I,s:I}", "type", "dropped", "from", (json_int_t)a->w.pos, "to",
					      (json_int_t)kept));
			a->w.pos = kept;
			moved = true;
			continue;
		}
		n = session_output_read(s, a->w.pos, &stream, a->buf + 1, WSA_CHUNK, &err);
		if (n < 0) {
			wsa_error(a, err.msg);
			a->ended = true;
			ws_close(a->ws, 1011, "output unavailable");
			return;
		}
		if (n == 0)
			break;
		a->buf[0] = (uint8_t)(stream == 2 ? 2 : 1);
		ws_send(a->ws, true, a->buf, (size_t)n + 1);
		metrics_output_sent(MX_TR_WEBSOCKET, stream, (uint64_t)n);
		a->w.pos += (uint64_t)n;
		moved = true;
	}
	if (moved)
		session_watch_progress(&a->w);
	if (!a->ended && n == 0 && session_done(s) && a->w.pos >= session_output_length(s))
		wsa_exit(a, s);
}

/* Stdin that waited for room goes first; reading the socket resumes once it is all in. */
static void wsa_pump_in(struct wsa *a)
{
	struct session *s = a->w.s;
	space_err err = { 0 };
	size_t n;

	if (!s || !a->paused_in)
		return;
	while ((n = evbuffer_get_length(a->pending_in)) > 0) {
		size_t room = session_stdin_room(s);

		if (!room)
			return;
		if (n > room)
			n = room;
		if (session_stdin(s, evbuffer_pullup(a->pending_in, (ev_ssize_t)n), n, 0, &err) < 0) {
			evbuffer_drain(a->pending_in, evbuffer_get_length(a->pending_in));
			wsa_error(a, err.msg);
			break;
		}
		evbuffer_drain(a->pending_in, n);
	}
	a->paused_in = false;
	ws_pause_reading(a->ws, false);
}

static void wsa_kick(evutil_socket_t fd, short what, void *arg)
{
	struct wsa *a = arg;

	(void)fd;
	(void)what;
	wsa_pump_in(a);
	wsa_pump_out(a);
}

static void wsa_wake(struct session_watch *w)
{
	struct wsa *a = (struct wsa *)((char *)w - offsetof(struct wsa, w));

	event_active(a->kick, 0, 0);
}

static void wsa_stdin_room(struct session *s, void *arg)
{
	struct wsa *a = arg;

	(void)s;
	if (a->paused_in)
		event_active(a->kick, 0, 0);
}

static void wsa_stdin(struct wsa *a, const uint8_t *data, size_t len)
{
	struct session *s = a->w.s;
	space_err err = { 0 };
	size_t room;

	if (!s || !len)
		return;
	room = session_stdin_room(s);
	if (a->paused_in || room < len) {
		/* Keep what does not fit and stop reading until the guest has taken it. */
		size_t now = a->paused_in ? 0 : room;

		if (now && session_stdin(s, data, now, 0, &err) < 0) {
			wsa_error(a, err.msg);
			return;
		}
		evbuffer_add(a->pending_in, data + now, len - now);
		a->paused_in = true;
		ws_pause_reading(a->ws, true);
		return;
	}
	if (session_stdin(s, data, len, 0, &err) < 0)
		wsa_error(a, err.msg);
}

static void wsa_control(struct wsa *a, const uint8_t *data, size_t len)
{
	struct session *s = a->w.s;
	json_t *j = json_loadb((const char *)data, len, JSON_REJECT_DUPLICATES, NULL);
	const char *type = json_string_value(json_object_get(j, "type"));
	space_err err = { 0 };

	if (!s) {
		json_decref(j);
		return;
	}
	if (!type) {
		err_set(&err, EINVAL, "a text message is a JSON object with a \"type\"");
	} else if (strcmp(type, "resize") == 0) {
		uint16_t rows = 0, cols = 0;
		json_t *size = json_pack("{s:O?,s:O?}", "rows", json_object_get(j, "rows"), "cols",
					 json_object_get(j, "cols"));

		if (req_pty_size(size, &rows, &cols, &err) == 0)
			session_resize(s, rows, cols, &err);
		json_decref(size);
	} else if (strcmp(type, "signal") == 0) {
		int signo = signal_parse(json_object_get(j, "signal"), &err);

		if (signo > 0)
			session_signal(s, signo, &err);
	} else if (strcmp(type, "stdin_close") == 0) {
		session_stdin(s, NULL, 0, 1, &err);
	} else {
		err_set(&err, EINVAL, "unknown message type '%.40s' (resize, signal, stdin_close)", type);
	}
	json_decref(j);
	if (err.code)
		wsa_error(a, err.msg);
}

static void wsa_message(struct ws *ws, bool binary, const uint8_t *data, size_t len, void *arg)
{
	struct wsa *a = arg;

	(void)ws;
	if (binary)
		wsa_stdin(a, data, len);
	else
		wsa_control(a, data, len);
}

static void wsa_writable(struct ws *ws, void *arg)
{
	struct wsa *a = arg;

	(void)ws;
	event_active(a->kick, 0, 0);
}

static void wsa_closed(struct ws *ws, void *arg)
{
	(void)ws;
	wsa_release(arg);
}

static const struct ws_ops wsa_ops = {
	.on_message = wsa_message,
	.on_writable = wsa_writable,
	.on_close = wsa_closed,
};

void dp_ws(struct http_req *r)
{
	struct session *s = r->obj;
	space_err err = { 0 };
	uint64_t start;
	struct wsa *a;

	if (sse_start_offset(NULL, http_query(r, "offset"), session_output_length(s), &start, &err) < 0) {
		http_reply_err(r->req, &err);
		return;
	}
	a = calloc(1, sizeof(*a));
	if (a) {
		a->buf = malloc(WSA_CHUNK + 1);
		a->pending_in = evbuffer_new();
		a->kick = event_new(r->d->base, -1, 0, wsa_kick, a);
	}
	if (!a || !a->buf || !a->pending_in || !a->kick) {
		if (a)
			wsa_release(a);
		http_reply_error(r->req, 500, "internal", "out of memory");
		return;
	}
	if (session_start(s, &err) < 0) {
		wsa_release(a);
		http_reply_err(r->req, &err);
		return;
	}
	a->ws = ws_accept(r, &wsa_ops, a, WSA_MAX_MESSAGE);
	if (!a->ws) {
		wsa_release(a); /* ws_accept answered */
		return;
	}
	a->w.fn = wsa_wake;
	a->w.pos = start;
	session_watch_add(s, &a->w);
	a->watching = true;
	session_set_stdin_room_cb(s, wsa_stdin_room, a);
	event_active(a->kick, 0, 0);
}
