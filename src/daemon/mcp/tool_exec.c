/* tool_exec.c -- run_command and run_code: a session of the core (as /v1's and envd's are,
 * session_create) run to its end, its output read as it comes: sent on as progress
 * notifications when the client asked for them, kept up to MCP_OUTPUT_MAX per stream for the
 * result (the rest is read and counted, so the process is never held back by us), and the
 * exit code. The process gets a deadline (the timeout argument); a client that leaves kills
 * it. run_code runs the code interpreter's program (guest/interp/space_interp.py, in the
 * code-interpreter-v1 template) for one execution: its request line ({"code"}) on stdin, its
 * protocol lines read back (each a JSON object of a known type; only their string members are
 * taken, so the guest can say nothing else), then stdin closed so that it exits. A template without the program gets `python3 -` with the code
 * on stdin instead. */
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
#define INTERP_ARGV0 "/usr/bin/python3"
#define INTERP_PATH "/usr/local/lib/space/space_interp.py"
/* One protocol line kept at most (a larger one, a big figure, is dropped); results kept. */
#define RUN_LINE_MAX (1u << 20)
#define RUN_RESULTS_MAX 16
/* The interpreter's own stderr kept (why it could not start). */
#define RUN_DIAG_MAX 512

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
	/* run_code through the interpreter */
	bool interp;
	struct evbuffer *line;   /* a protocol line being assembled */
	bool skipping;           /* the line in progress is over RUN_LINE_MAX: dropped */
	bool saw_line, saw_end;
	json_t *results, *error;
	char diag[RUN_DIAG_MAX];
	size_t ndiag;
	uint8_t buf[RUN_CHUNK];
};

static void run(struct mcp_call *c, json_t *body, const char *stdin_data);

static void run_free(struct run *u)
{
	if (u->watching)
		session_watch_del(&u->w);
	if (u->kick)
		event_free(u->kick);
	for (int i = 0; i < 2; i++)
		if (u->out[i])
			evbuffer_free(u->out[i]);
	if (u->line)
		evbuffer_free(u->line);
	json_decref(u->results);
	json_decref(u->error);
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

/* ---- the code interpreter's lines ---- */

/* Output text of one stream: kept (up to the cap) and sent as progress. */
static void take_output(struct run *u, int i, const char *p, size_t n)
{
	size_t have = evbuffer_get_length(u->out[i]);

	/* Kept up to the cap and a few bytes more (the cut lands on a character's boundary). */
	if (have < MCP_OUTPUT_MAX + 4)
		evbuffer_add(u->out[i], p, n < MCP_OUTPUT_MAX + 4 - have ? n : MCP_OUTPUT_MAX + 4 - have);
	u->total[i] += (uint64_t)n;
	if (u->sent < MCP_PROGRESS_MAX) {
		size_t take = n < MCP_PROGRESS_MAX - u->sent ? n : MCP_PROGRESS_MAX - u->sent;

		if (mcp_call_progress(u->c, (double)(u->total[0] + u->total[1]), p, take) == 0)
			u->sent += take;
	}
}

/* What a result line shows as text: its text, else the kinds of rendering it has. */
static json_t *result_text(const json_t *r)
{
	static const char *const kinds[] = { "html", "markdown", "svg", "png", "jpeg", "latex", "json", NULL };
	const char *t = json_string_value(json_object_get(r, "text"));
	char buf[128] = "";
	size_t o = 0;

	if (t)
		return json_string(t);
	for (size_t i = 0; kinds[i]; i++)
		if (json_object_get(r, kinds[i]))
			o += (size_t)snprintf(buf + o, o < sizeof(buf) ? sizeof(buf) - o : 0, "%s%s", o ? ", " : "[", kinds[i]);
	snprintf(buf + (o < sizeof(buf) ? o : sizeof(buf) - 1), o < sizeof(buf) ? sizeof(buf) - o : 1, "%s",
		 o ? " output]" : "[no text]");
	return json_string(buf);
}

/* A member of a guest line, if it is a string. */
static json_t *str_of(const json_t *j, const char *key)
{
	json_t *v = json_object_get(j, key);

	return json_is_string(v) ? v : NULL;
}

/* One protocol line of the interpreter (guest/interp/space_interp.py's header lists them). */
static void interp_line(struct run *u, struct session *s, const char *line, size_t len)
{
	json_t *j = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	const char *type = json_string_value(str_of(j, "type"));
	const char *text = json_string_value(str_of(j, "text"));
	space_err err = { 0 };

	if (!type) {
		json_decref(j);
		return; /* not a line of the protocol's: dropped */
	}
	u->saw_line = true;
	if (strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0) {
		if (text)
			take_output(u, type[3] == 'e', text, strlen(text));
	} else if (strcmp(type, "result") == 0) {
		if (json_array_size(u->results) < RUN_RESULTS_MAX)
			json_array_append_new(u->results, result_text(j));
	} else if (strcmp(type, "error") == 0) {
		json_decref(u->error);
		u->error = json_pack("{s:O?,s:O?,s:O?}", "name", str_of(j, "name"), "value", str_of(j, "value"),
				     "traceback", str_of(j, "traceback"));
	} else if (strcmp(type, "end_of_execution") == 0) {
		u->saw_end = true;
		(void)session_stdin(s, NULL, 0, 1, &err); /* one execution: it exits at the end of its input */
	}
	json_decref(j);
}

/* The interpreter's stdout bytes, split into lines. */
static void interp_take(struct run *u, struct session *s, const char *p, size_t n)
{
	while (n) {
		const char *nl = memchr(p, '\n', n);
		size_t k = nl ? (size_t)(nl - p) : n;

		if (!u->skipping && evbuffer_get_length(u->line) + k > RUN_LINE_MAX) {
			u->skipping = true;
			evbuffer_drain(u->line, evbuffer_get_length(u->line));
		}
		if (!u->skipping)
			evbuffer_add(u->line, p, k);
		if (!nl)
			return;
		size_t len = evbuffer_get_length(u->line);

		if (!u->skipping && len)
			interp_line(u, s, (const char *)evbuffer_pullup(u->line, -1), len);
		evbuffer_drain(u->line, len);
		u->skipping = false;
		p += k + 1;
		n -= k + 1;
	}
}

static void interp_end(struct run *u, struct session *s)
{
	struct mcp_call *c = u->c;
	const struct session_rec *rec = session_rec(s);
	json_t *notes, *res;

	if (!u->saw_line && rec->state == SESS_EXITED && !rec->exit_signal && rec->exit_code == 2 &&
	    strstr(u->diag, INTERP_PATH)) {
		/* No interpreter in this template: the code runs as a plain python3 program. */
		json_t *body = json_pack("{s:[s,s],s:b}", "argv", "python3", "-", "stdin", 1);

		run_free(u);
		run(c, body, mcp_arg_str(c, "code"));
		json_decref(body);
		return;
	}
	if (!u->saw_line) {
		mcp_call_fail(c, "run_code: the code interpreter could not run (%s)%s%.*s",
			      rec->state == SESS_FAILED ? (rec->error[0] ? rec->error : "failed") : "it exited",
			      u->ndiag ? ": " : "", (int)u->ndiag, u->diag);
		run_free(u);
		return;
	}
	notes = json_array();
	if (!u->saw_end) {
		char note[RUN_DIAG_MAX + 96];

		snprintf(note, sizeof(note), "the interpreter ended before the code did (%s)%s%.*s",
			 rec->exit_signal && now_ms() >= u->deadline_ms ? "killed at the timeout" :
			 rec->state == SESS_FAILED ? (rec->error[0] ? rec->error : "failed") : "exited",
			 u->ndiag ? ": " : "", (int)u->ndiag, u->diag);
		json_array_append_new(notes, json_string(note));
	}
	res = json_pack("{s:o,s:o,s:O,s:O}", "stdout", stream_text(u, 0, notes, "stdout"), "stderr",
			stream_text(u, 1, notes, "stderr"), "results", u->results, "error",
			u->error ? u->error : json_null());
	if (res && json_array_size(notes))
		json_object_set(res, "notes", notes);
	json_decref(notes);
	mcp_call_done(c, mcp_tool_json(res));
	run_free(u);
}

static void run_end(struct run *u, struct session *s)
{
	const struct session_rec *rec = session_rec(s);
	json_t *notes, *res;
	bool timed_out;

	if (u->interp) {
		interp_end(u, s);
		return;
	}
	notes = json_array();
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
		if (!u->interp) {
			take_output(u, stream == 2, (const char *)u->buf, (size_t)n);
		} else if (stream == 2) {
			size_t k = (size_t)n < RUN_DIAG_MAX - 1 - u->ndiag ? (size_t)n : RUN_DIAG_MAX - 1 - u->ndiag;

			memcpy(u->diag + u->ndiag, u->buf, k);
			u->ndiag += k;
			u->diag[u->ndiag] = '\0';
		} else {
			interp_take(u, s, (const char *)u->buf, (size_t)n);
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

static struct run *run_new(struct mcp_call *c)
{
	struct run *u = calloc(1, sizeof(*u));

	if (u) {
		u->c = c;
		u->out[0] = evbuffer_new();
		u->out[1] = evbuffer_new();
		u->kick = event_new(c->d->base, -1, 0, run_kick, u);
	}
	if (!u || !u->out[0] || !u->out[1] || !u->kick) {
		if (u)
			run_free(u);
		return NULL;
	}
	u->timeout_s = (int)mcp_arg_int(c, "timeout", RUN_DEFAULT_TIMEOUT_S);
	u->deadline_ms = now_ms() + (int64_t)u->timeout_s * 1000;
	return u;
}

/* Watches s (started) until it ends; the call waits meanwhile. */
static void run_watch(struct run *u, struct session *s)
{
	session_set_deadline(s, u->deadline_ms);
	u->w.fn = run_wake;
	session_watch_add(s, &u->w);
	u->watching = true;
	mcp_call_wait(u->c, run_cancel, u);
	event_active(u->kick, 0, 0);
}

/* Runs the exec body's command and answers when it ends; stdin_data (may be NULL) is the
 * process's whole stdin. */
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
	if (!s || !(u = run_new(c))) {
		if (s)
			session_cancel(s);
		mcp_call_fail(c, "%s: %s", c->tool->name, s ? "out of memory" : "the session vanished");
		return;
	}
	if (session_start(s, &err) < 0 ||
	    (stdin_data && session_stdin(s, stdin_data, strlen(stdin_data), 1, &err) < 0)) {
		session_cancel(s);
		run_free(u);
		mcp_call_err(c, c->tool->name, &err);
		return;
	}
	run_watch(u, s);
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
	const char *argv[] = { INTERP_ARGV0, "-u", INTERP_PATH, "--cwd", "/home/user", NULL };
	json_t *req = json_pack("{s:s}", "code", mcp_arg_str(c, "code"));
	char *line = req ? json_dumps(req, JSON_COMPACT) : NULL, *nl;
	space_err err = { 0 };
	struct session *s;
	struct run *u;
	const char *id;

	json_decref(req);
	if (mcp_arg_sandbox(c, &id) < 0) {
		free(line);
		return;
	}
	if (!line || !(nl = realloc(line, strlen(line) + 2))) {
		free(line);
		mcp_call_fail(c, "run_code: out of memory");
		return;
	}
	line = nl;
	strcat(line, "\n"); /* JSON_COMPACT has no newline inside: one request line */
	/* The daemon's own session, as interp.c's contexts are: never listed or reachable by a
	 * client's token; it dies with the sandbox. */
	s = session_open_internal(c->d, id, SESS_KIND_PROCESS, argv, NULL, true, &err);
	if (!s) {
		free(line);
		mcp_call_err(c, "run_code", &err);
		return;
	}
	u = run_new(c);
	if (u) {
		u->interp = true;
		u->line = evbuffer_new();
		u->results = json_array();
	}
	if (!u || !u->line || !u->results || session_stdin(s, line, strlen(line), 0, &err) < 0) {
		session_cancel(s);
		if (u)
			run_free(u);
		free(line);
		if (err.code)
			mcp_call_err(c, "run_code", &err);
		else
			mcp_call_fail(c, "run_code: out of memory");
		return;
	}
	free(line);
	run_watch(u, s);
}
