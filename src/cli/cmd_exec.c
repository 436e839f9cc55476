/* cmd_exec.c -- `spacectl exec`: run a command in a sandbox and relay its
 * output live, exiting with its status.
 *
 * The output stream is followed on this thread; stdin forwarding and signal
 * forwarding run on their own threads (exec_dp.c).  Because those threads
 * may be inside libcurl when the command ends, this verb ends the process
 * with _exit() after flushing, rather than returning through main(). */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "b64.h"
#include "cleanup.h"
#include "cli.h"
#include "exec.h"
#include "sse.h"
#include "tty.h"

/* Reconnects in a row without progress before giving up, and the backoff. */
#define STREAM_RETRIES 5
#define BACKOFF_FIRST_MS 250
#define BACKOFF_MAX_MS 4000
/* The daemon sends a keepalive every 15 s: this much silence means the
 * connection is dead even if TCP has not noticed. */
#define STREAM_IDLE_S 60
/* A connection that lasted this long counts as healthy. */
#define STREAM_HEALTHY_S 10

struct stream {
	struct exec_session *s;
	bool want_stdin;
	bool stdin_started;
	struct sse_parser parser;
	char *last_id;      /* id of the last event fully handled, NULL if none */
	unsigned char *buf; /* base64 decoding buffer */
	size_t buf_cap;
	bool progressed;    /* this connection delivered an event */
	bool done;          /* exit or error event: status is final */
	int status;
	space_err err;      /* set with done && status == CTL_EXIT_EXEC */
};

static int finish(struct stream *st, int status)
{
	st->done = true;
	st->status = status;
	return 1; /* stop parsing */
}

static int on_output(struct stream *st, const struct sse_event *ev, int fd)
{
	ssize_t n;

	if (CTL_B64_DECODED_MAX(ev->data_len) > st->buf_cap) {
		size_t cap = CTL_B64_DECODED_MAX(ev->data_len);
		unsigned char *nb = realloc(st->buf, cap);

		if (!nb) {
			err_set(&st->err, ENOMEM, "out of memory decoding output");
			return finish(st, CTL_EXIT_EXEC);
		}
		st->buf = nb;
		st->buf_cap = cap;
	}
	n = ctl_b64_decode(ev->data, ev->data_len, st->buf);
	if (n < 0) {
		err_set(&st->err, EBADMSG, "invalid base64 in the %s event with id '%s'",
			ev->type, ev->id);
		return finish(st, CTL_EXIT_EXEC);
	}
	if (ctl_write_all(fd, st->buf, (size_t)n) < 0) {
		if (fd == STDOUT_FILENO) {
			int saved = errno;

			if (saved == EPIPE) {
				/* Our reader went away: end the remote command as a
				 * local one writing into a closed pipe would end. */
				space_err ignored;

				exec_send_signal(st->s, NULL, SIGPIPE, &ignored);
				return finish(st, 128 + SIGPIPE);
			}
			err_sys(&st->err, saved, "writing the output");
			return finish(st, CTL_EXIT_EXEC);
		}
		/* A closed or failing stderr is not worth stopping for. */
	}
	return 0;
}

static int on_exit_event(struct stream *st, const struct sse_event *ev)
{
	json_t *j = json_loadb(ev->data, ev->data_len, 0, NULL);
	json_t *code = json_object_get(j, "exit_code"), *sig = json_object_get(j, "signal");
	int status;

	if (json_is_integer(code)) {
		status = (int)(json_integer_value(code) & 0xff);
	} else if (json_is_integer(sig) && json_integer_value(sig) > 0 &&
		   json_integer_value(sig) < 128) {
		status = 128 + (int)json_integer_value(sig); /* like a shell */
	} else {
		err_set(&st->err, EBADMSG, "the exit event has neither exit_code nor signal: %.200s",
			ev->data);
		status = CTL_EXIT_EXEC;
	}
	json_decref(j);
	return finish(st, status);
}

static int on_event(const struct sse_event *ev, void *arg)
{
	struct stream *st = arg;
	int rc = 0;

	if (strcmp(ev->type, "stdout") == 0) {
		rc = on_output(st, ev, STDOUT_FILENO);
	} else if (strcmp(ev->type, "stderr") == 0) {
		rc = on_output(st, ev, STDERR_FILENO);
	} else if (strcmp(ev->type, "exit") == 0) {
		return on_exit_event(st, ev);
	} else if (strcmp(ev->type, "error") == 0) {
		json_t *j = json_loadb(ev->data, ev->data_len, 0, NULL);
		const char *msg = ctl_jstr(j, "message", NULL);

		if (msg)
			err_set(&st->err, EIO, "%s", msg);
		else
			err_set(&st->err, EIO, "the sandbox reported an error: %.200s", ev->data);
		json_decref(j);
		return finish(st, CTL_EXIT_EXEC);
	}
	/* Other event types are ignored, as the SSE model intends. */
	if (rc == 0 && *ev->id && (!st->last_id || strcmp(st->last_id, ev->id) != 0)) {
		char *id = strdup(ev->id);

		if (!id) {
			err_set(&st->err, ENOMEM, "out of memory");
			return finish(st, CTL_EXIT_EXEC);
		}
		free(st->last_id);
		st->last_id = id;
	}
	st->progressed = true;
	return rc;
}

static size_t stream_sink(const char *p, size_t n, void *arg)
{
	struct stream *st = arg;
	enum sse_status ss;

	ss = sse_parser_feed(&st->parser, p, n);
	if (ss == SSE_OK)
		return n;
	if (ss != SSE_STOP) {
		err_set(&st->err, EBADMSG, "output stream: %s", sse_parser_strerror(ss));
		finish(st, CTL_EXIT_EXEC);
	}
	return 0;
}

/* The attach answered 200: the process is starting, stdin may flow. */
static void stream_opened(void *arg)
{
	struct stream *st = arg;

	if (st->want_stdin && !st->stdin_started) {
		space_err e = { 0 };

		st->stdin_started = true;
		if (exec_start_stdin(st->s, &e) < 0)
			fprintf(stderr, "spacectl: exec: %s\n", e.msg);
	}
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Follow the output stream until the exit (or error) event, reconnecting
 * from the last event id when the connection drops.  Returns the status. */
static int follow(struct stream *st)
{
	int failures = 0, auth_failures = 0;
	long backoff = BACKOFF_FIRST_MS;

	for (;;) {
		struct exec_creds cr;
		_cleanup_free_ char *url = NULL;
		struct http_req rq = {
			.method = "POST",
			.accept = "text/event-stream",
			.timeout_s = 0,
			.idle_s = STREAM_IDLE_S,
			.sink = stream_sink,
			.sink_arg = st,
			.on_open = stream_opened,
		};
		struct http_resp rs;
		space_err e = { 0 };
		double t0 = now_s();
		bool healthy;
		int rc;

		if (exec_creds_get(st->s, &cr, &st->err) < 0)
			return CTL_EXIT_EXEC;
		url = exec_dp_url(st->s, &cr, "/attach");
		if (!url) {
			exec_creds_free(&cr);
			err_set(&st->err, ENOMEM, "out of memory");
			return CTL_EXIT_EXEC;
		}
		rq.url = url;
		rq.bearer = cr.token;
		rq.last_event_id = st->last_id;
		/* A partial event from a dropped connection is re-sent after
		 * last_id: forget it. */
		sse_parser_reset(&st->parser);
		st->progressed = false;
		rc = http_do(&rq, &rs, &e);

		if (st->done) {
			exec_creds_free(&cr);
			http_resp_free(&rs);
			return st->status;
		}
		if (rc == 0 && rs.status == 401 && auth_failures++ < 3) {
			/* Expired or replaced token: get a fresh one. */
			http_resp_free(&rs);
			rc = exec_refresh_token(st->s, cr.gen, &st->err);
			exec_creds_free(&cr);
			if (rc < 0)
				return CTL_EXIT_EXEC;
			continue;
		}
		exec_creds_free(&cr);
		if (rc == 0 && rs.status / 100 != 2 && rs.status < 500) {
			/* The server refused for good (unknown session, bad offset). */
			http_error(&rs, &st->err);
			err_wrap(&st->err, "attaching to %s", st->s->session_id);
			http_resp_free(&rs);
			return CTL_EXIT_EXEC;
		}
		if (rc == 0 && rs.status / 100 != 2)
			http_error(&rs, &e);
		else if (rc == 0)
			err_set(&e, EPIPE, "the output stream ended before the command exited");
		http_resp_free(&rs);

		/* Keepalives alone do not count: a server that accepts and
		 * drops us at once must not make us retry forever. */
		healthy = rs.status / 100 == 2 &&
			  (st->progressed || now_s() - t0 >= STREAM_HEALTHY_S);
		if (healthy) {
			failures = 0;
			auth_failures = 0;
			backoff = BACKOFF_FIRST_MS;
		}
		if (++failures > STREAM_RETRIES) {
			err_wrap(&e, "lost the output stream after %d attempts", STREAM_RETRIES + 1);
			st->err = e;
			return CTL_EXIT_EXEC;
		}
		sleep_ms(backoff);
		backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
	}
}

/* POST /v1/sandboxes/{id}/sessions; fills s from the answer. */
static int create_session(struct ctl *c, const char *id, json_t *body,
			  struct exec_session *s, space_err *e)
{
	_cleanup_free_ char *path = ctl_sandbox_path(id, "/sessions");
	json_t *resp = NULL;
	const char *sid;
	int rc;

	if (!path)
		return err_set(e, ENOMEM, "out of memory");
	if (ctl_call(c, "POST", path, body, &resp, e) < 0)
		return -1;
	sid = ctl_jstr(json_object_get(resp, "session"), "id", NULL);
	if (!sid)
		rc = err_set(e, EBADMSG, "the answer has no session id");
	else
		rc = exec_session_init(s, c, id, sid, json_object_get(resp, "data_plane"), e);
	json_decref(resp);
	return rc;
}

static __attribute__((noreturn)) void leave(int status)
{
	tty_restore(); /* _exit() runs no atexit handler */
	fflush(stdout);
	fflush(stderr);
	_exit(status);
}

static int run(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "user", required_argument, NULL, 'u' },
		{ "cwd", required_argument, NULL, 'd' },
		{ "env", required_argument, NULL, 'e' },
		{ "stdin", no_argument, NULL, 'i' },
		{ "interactive", no_argument, NULL, 'i' },
		{ "tty", no_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const struct ctl_verb *v = &ctl_verb_exec;
	json_t *body = json_object(), *env = json_object(), *args = json_array();
	struct stream st = { .status = CTL_EXIT_EXEC };
	struct exec_session s;
	const char *id;
	int opt, i, dd = -1, nopt, first_cmd, status;
	bool want_tty = false;
	unsigned rows = 24, cols = 80;

	if (!body || !env || !args) {
		fprintf(stderr, "spacectl: exec: out of memory\n");
		return CTL_EXIT_EXEC;
	}
	/* "exec [OPTIONS] ID -- ARGV..." (options may follow ID), or without
	 * "--", "exec [OPTIONS] ID ARGV..." where the command's own options
	 * must not be taken for ours. */
	for (i = 1; i < argc; i++)
		if (strcmp(argv[i], "--") == 0) {
			dd = i;
			break;
		}
	nopt = dd >= 0 ? dd : argc;
	while ((opt = getopt_long(nopt, argv, dd >= 0 ? "hit" : "+hit", opts, NULL)) != -1) {
		switch (opt) {
		case 'u':
			json_object_set_new(body, "user", json_string(optarg));
			break;
		case 'd':
			json_object_set_new(body, "cwd", json_string(optarg));
			break;
		case 'e':
			if (ctl_kv_add(env, optarg) < 0)
				return ctl_usage_error(v, "--env: expected K=V (UTF-8), got '%s'",
						       optarg);
			break;
		case 'i':
			st.want_stdin = true;
			break;
		case 't':
			want_tty = true;
			break;
		case 'h':
			ctl_print_help(v, stdout);
			return CTL_EXIT_OK;
		default:
			return ctl_usage_error(v, NULL);
		}
	}
	if (optind >= nopt)
		return ctl_usage_error(v, "missing sandbox id");
	id = argv[optind];
	if (dd >= 0) {
		if (nopt - optind > 1)
			return ctl_usage_error(v, "unexpected argument '%s' before '--'",
					       argv[optind + 1]);
		first_cmd = dd + 1;
	} else {
		first_cmd = optind + 1;
	}
	if (first_cmd >= argc)
		return ctl_usage_error(v, "missing the command to run");
	for (i = first_cmd; i < argc; i++) {
		json_t *a = json_string(argv[i]);

		if (!a)
			return ctl_usage_error(v, "argument %d is not valid UTF-8", i - first_cmd);
		json_array_append_new(args, a);
	}
	json_object_set_new(body, "argv", args);
	if (json_object_size(env))
		json_object_set(body, "env", env);
	if (want_tty) {
		/* Like docker: a terminal for the command needs one here, whose
		 * size it starts with. */
		if (!isatty(STDIN_FILENO)) {
			err_set(&st.err, ENOTTY, "-t needs a terminal on stdin, and stdin is "
				"not a terminal (drop -t to run the command without one)");
			return ctl_fail(c, &st.err, CTL_EXIT_EXEC);
		}
		exec_term_size(&rows, &cols); /* else 24x80 */
		json_object_set_new(body, "pty", json_pack("{s:I,s:I}", "rows", (json_int_t)rows,
							   "cols", (json_int_t)cols));
	}
	/* A PTY session's stdin is always open: say nothing unless -i. */
	if (!want_tty || st.want_stdin)
		json_object_set_new(body, "stdin", json_boolean(st.want_stdin));

	if (create_session(c, id, body, &s, &st.err) < 0) {
		json_decref(body);
		json_decref(env);
		return ctl_fail(c, &st.err, CTL_EXIT_EXEC);
	}
	json_decref(body);
	json_decref(env);
	st.s = &s;
	s.tty = want_tty;
	s.raw = want_tty && st.want_stdin;
	s.rows = rows;
	s.cols = cols;
	sse_parser_init(&st.parser, SSE_DEFAULT_MAX, on_event, &st);
	fflush(stdout); /* nothing of ours may follow the command's bytes late */

	/* Signals first: from here on a SIGINT/SIGTERM/SIGHUP finds the
	 * thread that restores the terminal before leaving. */
	if (exec_start_signals(&s, &st.err) < 0)
		leave(ctl_fail(c, &st.err, CTL_EXIT_EXEC));
	if (s.raw && tty_raw(STDIN_FILENO, &st.err) < 0)
		leave(ctl_fail(c, &st.err, CTL_EXIT_EXEC));
	if (s.tty) {
		/* A resize between our TIOCGWINSZ and the signal thread went
		 * unseen: catch up. */
		unsigned r, cc;

		if (exec_term_size(&r, &cc) == 0 && (r != rows || cc != cols))
			kill(getpid(), SIGWINCH);
	}
	status = follow(&st);
	tty_restore(); /* before any message of ours */
	if (st.err.msg[0])
		ctl_fail(c, &st.err, status);
	/* Not freed: the helper threads may still use the session. */
	leave(status);
}

const struct ctl_verb ctl_verb_exec = {
	.name = "exec",
	.usage = "[-i] [-t] [--user U] [--cwd DIR] [--env K=V]... ID [--] ARGV...",
	.summary = "run a command in a sandbox; exits with its status",
	.help = "The command's stdout and stderr are relayed as they are produced.  Its exit\n"
		"status becomes spacectl's (128+N if killed by signal N); 125 means spacectl\n"
		"could not run the command or lost track of it.  A dropped connection is\n"
		"resumed where it stopped.  The first SIGINT/SIGTERM is forwarded to the\n"
		"command; a second one makes spacectl leave at once.\n"
		"\n"
		"Options:\n"
		"  --user U     run as this user (default: the template's)\n"
		"  --cwd DIR    working directory (default: the user's home)\n"
		"  --env K=V    extra environment (repeatable)\n"
		"  -i, --interactive, --stdin\n"
		"               forward spacectl's stdin to the command, then close it at EOF\n"
		"               (without it the command's stdin is empty)\n"
		"  -t, --tty    run the command on a terminal (a PTY) the size of ours (stdin\n"
		"               must be a terminal); our window size follows.  With -i too,\n"
		"               our terminal goes raw: every key, ^C and ^D included, goes to\n"
		"               the command, and the terminal is put back when spacectl ends.\n"
		"               SIGHUP (and with -it, SIGINT or SIGTERM) sent to spacectl hangs\n"
		"               up the command and ends spacectl with 128+N.\n"
		"\n"
		"  spacectl exec -it sb-0123456789abcdef -- bash\n",
	.run = run,
};
