/* tool_exec.c -- run_command and run_code: a session of the core (as /v1's and envd's are,
 * session_create) run to its end, its output read as it comes: sent on as progress
 * notifications when the client asked for them, kept up to MCP_OUTPUT_MAX per stream for the
 * result (the rest is read and counted, so the process is never held back by us), and the
 * exit code. The process gets a deadline (the timeout argument); a client that leaves kills
 * it. run_code is the same over `python3 -` with the code on stdin. */
#include <event2/buffer.h>
#include <event2/event.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "front/req.h"
#include "mcp.h"
#include "sandbox/sandbox.h"

#define RUN_CHUNK (32u << 10)
#define RUN_DEFAULT_TIMEOUT_S 60

/* Freed exactly once: by run_end (answered) or run_cancel (the client left). The session
 * watch only schedules work (event_active), never frees from inside the session's loop. */
struct run {
	struct mcp_call *c;
	struct session_watch w;
	bool watching;
	struct event *kick;
	struct evbuffer *out[2]; /* stdout, stderr: what the result keeps */
	uint64_t total[2];       /* bytes each stream wrote */
	uint64_t sent;           /* bytes sent as progress */
	uint64_t dropped;        /* bytes the output caps dropped before we read them */
	int64_t deadline_ms;
	int timeout_s;
	uint8_t buf[RUN_CHUNK];
};

static void run_free(struct run *u)
{
	if (u->watching)
		session_watch_del(&u->w);
	if (u->kick)
		event_free(u->kick);
	for (int i = 0; i < 2; i++)
		if (u->out[i])
			evbuffer_free(u->out[i]);
	free(u);
}

static void run_cancel(void *arg)
{
	struct run *u = arg;

	if (u->watching && u->w.s)
		session_cancel(u->w.s);
	run_free(u);
}

/* One stream's kept text, with a note when it was cut. */
static json_t *stream_text(struct run *u, int i, json_t *notes, const char *name)
{
	size_t n = evbuffer_get_length(u->out[i]);
	const char *p = n ? (const char *)evbuffer_pullup(u->out[i], -1) : "";
	bool cut;
	json_t *t = mcp_text(p ? p : "", p ? n : 0, MCP_OUTPUT_MAX, &cut);

	if (cut || u->total[i] > n) {
		char note[160];

		snprintf(note, sizeof(note), "%s truncated: %llu bytes written, the first %zu kept", name,
			 (unsigned long long)u->total[i], mcp_utf8_cut(p ? p : "", n, MCP_OUTPUT_MAX));
		json_array_append_new(notes, json_string(note));
	}
	return t;
}

static void run_end(struct run *u, struct session *s)
{
	const struct session_rec *rec = session_rec(s);
	json_t *notes = json_array(), *res;
	bool timed_out;

	if (rec->state == SESS_FAILED) {
		mcp_call_fail(u->c, "%s: the command could not run: %s", u->c->tool->name,
			      rec->error[0] ? rec->error : "failed");
		json_decref(notes);
		run_free(u);
		return;
	}
	timed_out = rec->exit_signal && now_ms() >= u->deadline_ms;
	res = json_pack("{s:o,s:o,s:i}", "stdout", stream_text(u, 0, notes, "stdout"), "stderr",
			stream_text(u, 1, notes, "stderr"), "exit_code", rec->exit_signal ? -1 : rec->exit_code);
	if (res && rec->exit_signal)
		json_object_set_new(res, "signal", json_integer(rec->exit_signal));
	if (res && timed_out) {
		char note[96];

		snprintf(note, sizeof(note), "killed after the timeout of %d s", u->timeout_s);
		json_array_append_new(notes, json_string(note));
	}
	if (res && u->dropped) {
		char note[96];

		snprintf(note, sizeof(note), "%llu bytes of output were dropped by the session's output cap",
			 (unsigned long long)u->dropped);
		json_array_append_new(notes, json_string(note));
	}
	if (res && json_array_size(notes))
		json_object_set(res, "notes", notes);
	json_decref(notes);
	mcp_call_done(u->c, mcp_tool_json(res));
	run_free(u);
}

static void run_pump(struct run *u)
{
	struct session *s = u->w.s;
	space_err err = { 0 };
	bool moved = false;

	if (!s) {
		mcp_call_fail(u->c, "%s: the sandbox stopped running", u->c->tool->name);
		run_free(u);
		return;
	}
	for (;;) {
		int stream = 1;
		ssize_t n;

		if (u->w.pos < session_output_start(s)) {
			u->dropped += session_output_start(s) - u->w.pos;
			u->w.pos = session_output_start(s);
			moved = true;
		}
		n = session_output_read(s, u->w.pos, &stream, u->buf, sizeof(u->buf), &err);
		if (n < 0) {
			mcp_call_fail(u->c, "%s: reading its output: %s", u->c->tool->name, err.msg);
			run_free(u);
			return;
		}
		if (n == 0)
			break;
		int i = stream == 2 ? 1 : 0;
		size_t have = evbuffer_get_length(u->out[i]);

		/* Kept up to the cap and a few bytes more (the cut lands on a character's boundary). */
		if (have < MCP_OUTPUT_MAX + 4)
			evbuffer_add(u->out[i], u->buf, (size_t)n < MCP_OUTPUT_MAX + 4 - have ? (size_t)n : MCP_OUTPUT_MAX + 4 - have);
		u->total[i] += (uint64_t)n;
		if (u->sent < MCP_PROGRESS_MAX) {
			size_t take = (size_t)n < MCP_PROGRESS_MAX - u->sent ? (size_t)n : MCP_PROGRESS_MAX - u->sent;

			if (mcp_call_progress(u->c, (double)(u->total[0] + u->total[1]), (const char *)u->buf, take) == 0)
				u->sent += take;
		}
		u->w.pos += (uint64_t)n;
		moved = true;
	}
	if (moved)
		session_watch_progress(&u->w);
	if (session_done(s) && u->w.pos >= session_output_length(s))
		run_end(u, s);
}

static void run_kick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	run_pump(arg);
}

static void run_wake(struct session_watch *w)
{
	struct run *u = (struct run *)((char *)w - offsetof(struct run, w));

	event_active(u->kick, 0, 0);
}

/* Runs argv (with what the exec body adds) and answers when it ends; stdin_data (may be NULL)
 * is the process's whole stdin. */
static void run(struct mcp_call *c, json_t *body, const char *stdin_data)
{
	struct session_rec rec = { 0 };
	struct exec_req req = { 0 };
	space_err err = { 0 };
	char token[65];
	struct session *s;
	struct run *u;
	const char *id;
	int rc;

	if (mcp_arg_sandbox(c, &id) < 0)
		return;
	if (!body || req_exec(body, &req, &err) < 0) {
		mcp_call_err(c, c->tool->name, &err);
		return;
	}
	rc = session_create(c->d, id, &req, &rec, token, &err);
	exec_req_free(&req);
	explicit_bzero(token, sizeof(token));
	if (rc < 0) {
		mcp_call_err(c, c->tool->name, &err);
		return;
	}
	s = session_loaded(c->d, rec.id);
	session_rec_clear(&rec);
	u = calloc(1, sizeof(*u));
	if (u) {
		u->c = c;
		u->out[0] = evbuffer_new();
		u->out[1] = evbuffer_new();
		u->kick = event_new(c->d->base, -1, 0, run_kick, u);
	}
	if (!s || !u || !u->out[0] || !u->out[1] || !u->kick) {
		if (s)
			session_cancel(s);
		if (u)
			run_free(u);
		mcp_call_fail(c, "%s: %s", c->tool->name, s ? "out of memory" : "the session vanished");
		return;
	}
	u->timeout_s = (int)mcp_arg_int(c, "timeout", RUN_DEFAULT_TIMEOUT_S);
	u->deadline_ms = now_ms() + (int64_t)u->timeout_s * 1000;
	session_set_deadline(s, u->deadline_ms);
	if (session_start(s, &err) < 0 ||
	    (stdin_data && session_stdin(s, stdin_data, strlen(stdin_data), 1, &err) < 0)) {
		session_cancel(s);
		run_free(u);
		mcp_call_err(c, c->tool->name, &err);
		return;
	}
	u->w.fn = run_wake;
	session_watch_add(s, &u->w);
	u->watching = true;
	mcp_call_wait(c, run_cancel, u);
	event_active(u->kick, 0, 0);
}

/* The exec body's optional members from the call's arguments. */
static void exec_opts(struct mcp_call *c, json_t *body)
{
	static const char *const keys[] = { "cwd", "user", "env", NULL };

	for (size_t i = 0; body && keys[i]; i++)
		if (json_object_get(c->args, keys[i]) && !json_is_null(json_object_get(c->args, keys[i])))
			json_object_set(body, keys[i], json_object_get(c->args, keys[i]));
}

void mcp_tool_run_command(struct mcp_call *c)
{
	json_t *body = json_pack("{s:[s,s,s]}", "argv", "/bin/sh", "-c", mcp_arg_str(c, "command"));

	exec_opts(c, body);
	run(c, body, NULL);
	json_decref(body);
}

void mcp_tool_run_code(struct mcp_call *c)
{
	json_t *body = json_pack("{s:[s,s],s:b}", "argv", "python3", "-", "stdin", 1);

	run(c, body, mcp_arg_str(c, "code"));
	json_decref(body);
}
