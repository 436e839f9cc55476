/* exec_dp.c -- `spacectl exec`'s data-plane side: credentials, token
 * refresh, stdin forwarding and signal forwarding (see exec.h) */
#include "exec.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "tty.h"

/* Install url/token from a data_plane object; caller holds the lock. */
static int set_creds(struct exec_session *s, const json_t *dp, space_err *e)
{
	const char *url = ctl_jstr(dp, "url", NULL), *token = ctl_jstr(dp, "token", NULL);
	char *nu, *nt;

	if (!url || !*url || !token)
		return err_set(e, EBADMSG, "the answer has no data_plane url and token");
	nu = ctl_trim_url(url);
	nt = strdup(token);
	if (!nu || !nt) {
		free(nu);
		free(nt);
		return err_set(e, ENOMEM, "out of memory");
	}
	free(s->dp_url);
	free(s->token);
	s->dp_url = nu;
	s->token = nt;
	s->gen++;
	return 0;
}

int exec_session_init(struct exec_session *s, const struct ctl *c, const char *sandbox_id,
		      const char *session_id, const json_t *data_plane, space_err *e)
{
	memset(s, 0, sizeof(*s));
	s->c = c;
	pthread_mutex_init(&s->lock, NULL);
	s->sandbox_id = strdup(sandbox_id);
	s->session_id = strdup(session_id);
	if (!s->sandbox_id || !s->session_id)
		return err_set(e, ENOMEM, "out of memory");
	return set_creds(s, data_plane, e);
}

void exec_session_free(struct exec_session *s)
{
	free(s->sandbox_id);
	free(s->session_id);
	free(s->dp_url);
	free(s->token);
	pthread_mutex_destroy(&s->lock);
}

int exec_creds_get(struct exec_session *s, struct exec_creds *cr, space_err *e)
{
	pthread_mutex_lock(&s->lock);
	cr->dp_url = strdup(s->dp_url);
	cr->token = strdup(s->token);
	cr->gen = s->gen;
	pthread_mutex_unlock(&s->lock);
	if (!cr->dp_url || !cr->token) {
		exec_creds_free(cr);
		return err_set(e, ENOMEM, "out of memory");
	}
	return 0;
}

void exec_creds_free(struct exec_creds *cr)
{
	free(cr->dp_url);
	free(cr->token);
	cr->dp_url = cr->token = NULL;
}

int exec_refresh_token(struct exec_session *s, unsigned seen_gen, space_err *e)
{
	_cleanup_free_ char *sb = ctl_escape(s->sandbox_id), *ss = ctl_escape(s->session_id);
	_cleanup_free_ char *path = NULL;
	json_t *resp = NULL;
	int rc = 0;

	if (!sb || !ss || asprintf(&path, "/v1/sandboxes/%s/sessions/%s/token", sb, ss) < 0)
		return err_set(e, ENOMEM, "out of memory");
	/* Held across the request: a second thread that got 401 waits here
	 * and then sees the new generation instead of refreshing again
	 * (which would revoke the token the first thread just got). */
	pthread_mutex_lock(&s->lock);
	if (s->gen == seen_gen) {
		if (ctl_call(s->c, "POST", path, NULL, &resp, e) < 0)
			rc = err_wrap(e, "renewing the session token");
		else
			rc = set_creds(s, json_object_get(resp, "data_plane"), e);
	}
	pthread_mutex_unlock(&s->lock);
	json_decref(resp);
	return rc;
}

char *exec_dp_url(const struct exec_session *s, const struct exec_creds *cr,
		  const char *suffix)
{
	_cleanup_free_ char *sid = ctl_escape(s->session_id);
	char *url;

	if (!sid || asprintf(&url, "%s/v1/sessions/%s%s", cr->dp_url, sid, suffix) < 0)
		return NULL;
	return url;
}

int exec_dp_post(struct exec_session *s, struct http_conn *conn, const char *suffix,
		 const void *body, size_t len, const char *content_type, long timeout_s,
		 struct http_resp *rs, space_err *e)
{
	int attempt;

	memset(rs, 0, sizeof(*rs));
	for (attempt = 0;; attempt++) {
		struct exec_creds cr;
		_cleanup_free_ char *url = NULL;
		struct http_req rq = {
			.method = "POST",
			.body = body,
			.body_len = len,
			.content_type = content_type,
			.timeout_s = timeout_s,
			.conn = conn,
		};
		int rc;

		if (exec_creds_get(s, &cr, e) < 0)
			return -1;
		url = exec_dp_url(s, &cr, suffix);
		if (!url) {
			exec_creds_free(&cr);
			return err_set(e, ENOMEM, "out of memory");
		}
		rq.url = url;
		rq.bearer = cr.token;
		rc = http_do(&rq, rs, e);
		if (rc == 0 && rs->status == 401 && attempt == 0) {
			http_resp_free(rs);
			rc = exec_refresh_token(s, cr.gen, e);
			exec_creds_free(&cr);
			if (rc < 0)
				return -1;
			continue;
		}
		exec_creds_free(&cr);
		return rc;
	}
}

/* Signals and resizes are small: a daemon that does not answer them in this
 * long is not going to. */
#define CONTROL_TIMEOUT_S 10

int exec_send_signal(struct exec_session *s, struct http_conn *conn, int signo, space_err *e)
{
	struct http_resp rs;
	char body[64];
	int rc = 0;

	/* By number: identical for the signals we forward on every Linux
	 * architecture, and no name table to disagree about. */
	snprintf(body, sizeof(body), "{\"signal\":%d}", signo);
	if (exec_dp_post(s, conn, "/signal", body, strlen(body), "application/json",
			 CONTROL_TIMEOUT_S, &rs, e) < 0)
		rc = -1;
	else if (rs.status / 100 != 2)
		rc = http_error(&rs, e);
	http_resp_free(&rs);
	return rc;
}

int exec_send_resize(struct exec_session *s, struct http_conn *conn, unsigned rows,
		     unsigned cols, space_err *e)
{
	struct http_resp rs;
	char body[64];
	int rc = 0;

	snprintf(body, sizeof(body), "{\"rows\":%u,\"cols\":%u}", rows, cols);
	if (exec_dp_post(s, conn, "/resize", body, strlen(body), "application/json",
			 CONTROL_TIMEOUT_S, &rs, e) < 0)
		rc = -1;
	else if (rs.status == 409)
		rc = 0; /* ended (or not started yet): nothing to resize */
	else if (rs.status / 100 != 2)
		rc = http_error(&rs, e);
	http_resp_free(&rs);
	return rc;
}

int exec_term_size(unsigned *rows, unsigned *cols)
{
	if (tty_winsize(STDIN_FILENO, rows, cols) == 0 ||
	    tty_winsize(STDOUT_FILENO, rows, cols) == 0)
		return 0;
	return -1;
}

/* A message from a helper thread: the terminal may be raw. */
static void warn(const struct exec_session *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void warn(const struct exec_session *s, const char *fmt, ...)
{
	char msg[1400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "spacectl: %s: %s%s", s->c->verb, msg, tty_eol());
}

/* Reconnects in a row for one stdin chunk (the output stream's figures), and
 * the pause while the command's stdin queue is full. */
#define STDIN_TRIES 6
#define STDIN_BACKOFF_FIRST_MS 250
#define STDIN_BACKOFF_MAX_MS 4000
#define STDIN_FULL_WAIT_MS 100

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Deliver one chunk (n == 0: the close).  Returns 1 when delivered, 0 when
 * the command takes no more (it ended or closed its stdin), -1 (e set) when
 * forwarding failed for good. */
static int stdin_deliver(struct exec_session *s, struct http_conn *conn, const char *buf,
			 size_t n, space_err *e)
{
	long backoff = STDIN_BACKOFF_FIRST_MS;
	int failures = 0;

	for (;;) {
		struct http_resp rs;
		int rc = exec_dp_post(s, conn, n ? "/stdin" : "/stdin/close", buf, n,
				      "application/octet-stream", 0, &rs, e);
		long status = rs.status;

		if (rc == 0 && status / 100 == 2) {
			http_resp_free(&rs);
			return 1;
		}
		if (rc == 0 && status == 409) {
			/* The process finished or closed its stdin: the
			 * output stream says why. */
			http_resp_free(&rs);
			return 0;
		}
		if (rc == 0 && status == 503) {
			/* Its stdin queue is full: it is alive, only slow. */
			http_resp_free(&rs);
			sleep_ms(STDIN_FULL_WAIT_MS);
			continue;
		}
		if (rc == 0 && status >= 500) {
			http_error(&rs, e);
			rc = -1;
		} else if (rc == 0) {
			/* Refused for good (unknown session, ...). */
			http_error(&rs, e);
			http_resp_free(&rs);
			return -1;
		}
		http_resp_free(&rs);
		/* No answer (the daemon restarting?): the chunk may or may not
		 * have arrived; sending it again is the lesser evil. */
		if (++failures >= STDIN_TRIES)
			return -1;
		sleep_ms(backoff);
		backoff = backoff * 2 > STDIN_BACKOFF_MAX_MS ? STDIN_BACKOFF_MAX_MS : backoff * 2;
	}
}

static void *stdin_main(void *arg)
{
	struct exec_session *s = arg;
	_cleanup_free_ char *buf = malloc(EXEC_STDIN_CHUNK);
	struct http_conn *conn = http_conn_new();
	space_err e = { 0 };

	if (!buf || !conn) {
		warn(s, "stdin: out of memory");
		http_conn_free(conn);
		return NULL;
	}
	for (;;) {
		/* Forward whatever one read() gives: an interactive user's line
		 * (or, on a raw terminal, keystroke) goes out at once instead of
		 * waiting for a full chunk. */
		ssize_t n = read(STDIN_FILENO, buf, EXEC_STDIN_CHUNK);
		int rc;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err_sys(&e, errno, "reading");
			warn(s, "stdin: closing it: %s", e.msg);
			n = 0;
		}
		rc = stdin_deliver(s, conn, buf, (size_t)n, &e);
		if (rc < 0 && s->raw) {
			/* Nothing typed can reach the command any more, not
			 * even ^C: leave rather than hold the terminal. */
			tty_restore();
			warn(s, "stdin: forwarding failed: %s; leaving (the command may still "
				"be running, session %s)", e.msg, s->session_id);
			fflush(stdout);
			_exit(CTL_EXIT_EXEC);
		}
		if (rc < 0)
			warn(s, "stdin: forwarding stopped: %s", e.msg);
		if (rc <= 0 || n == 0)
			break;
	}
	http_conn_free(conn);
	return NULL;
}

int exec_start_stdin(struct exec_session *s, space_err *e)
{
	pthread_t t;
	int rc = pthread_create(&t, NULL, stdin_main, s);

	if (rc)
		return err_sys(e, rc, "starting the stdin thread");
	pthread_detach(t);
	return 0;
}

static sigset_t handled_signals(const struct exec_session *s)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	if (s->tty) {
		sigaddset(&set, SIGHUP);
		sigaddset(&set, SIGWINCH);
	}
	if (s->raw) {
		sigaddset(&set, SIGTSTP);
		sigaddset(&set, SIGCONT);
	}
	return set;
}

static void follow_window(struct exec_session *s, struct http_conn *conn)
{
	unsigned rows, cols;
	space_err e = { 0 };

	if (exec_term_size(&rows, &cols) < 0 || (rows == s->rows && cols == s->cols))
		return;
	if (exec_send_resize(s, conn, rows, cols, &e) < 0) {
		warn(s, "resizing the terminal: %s", e.msg);
		return;
	}
	s->rows = rows;
	s->cols = cols;
}

/* Leave on a signal that ends a terminal session: the terminal back as it
 * was, then the command hung up as a closed terminal would (bash and most
 * shells exit on SIGHUP), then spacectl gone with 128+sig. */
static __attribute__((noreturn)) void hang_up(struct exec_session *s, struct http_conn *conn,
					      int sig)
{
	space_err e = { 0 };

	tty_restore();
	if (exec_send_signal(s, conn, SIGHUP, &e) < 0)
		warn(s, "%s: hanging up the command: %s (session %s)", strsignal(sig), e.msg,
		     s->session_id);
	else
		warn(s, "%s: hung up the command (session %s)", strsignal(sig), s->session_id);
	fflush(stdout);
	_exit(128 + sig);
}

static void *signal_main(void *arg)
{
	struct exec_session *s = arg;
	sigset_t set = handled_signals(s);
	struct http_conn *conn = http_conn_new(); /* NULL: fresh connections */
	space_err e = { 0 };
	int sig, count = 0;

	for (;;) {
		if (sigwait(&set, &sig) != 0)
			continue;
		if (sig == SIGWINCH) {
			follow_window(s, conn);
			continue;
		}
		if (sig == SIGTSTP) {
			/* kill -TSTP (^Z on a raw terminal is the command's):
			 * stop with the terminal as we found it. */
			tty_restore();
			kill(getpid(), SIGSTOP);
			continue; /* SIGCONT follows */
		}
		if (sig == SIGCONT) {
			/* Back in the foreground: whoever ran meanwhile may
			 * have changed the terminal and its size. */
			if (tty_raw(STDIN_FILENO, &e) < 0)
				warn(s, "%s", e.msg);
			follow_window(s, conn);
			continue;
		}
		if (sig == SIGHUP || s->raw)
			hang_up(s, conn, sig);
		if (++count == 1) {
			/* The command decides what the signal means; its exit
			 * arrives on the output stream as usual. */
			if (exec_send_signal(s, conn, sig, &e) < 0)
				warn(s, "forwarding %s: %s", strsignal(sig), e.msg);
			continue;
		}
		tty_restore();
		warn(s, "%s again: leaving; the command may still be running (session %s)",
		     strsignal(sig), s->session_id);
		fflush(stdout);
		_exit(128 + sig);
	}
	return NULL;
}

int exec_start_signals(struct exec_session *s, space_err *e)
{
	sigset_t set = handled_signals(s);
	pthread_t t;
	int rc;

	rc = pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (rc)
		return err_sys(e, rc, "blocking signals");
	rc = pthread_create(&t, NULL, signal_main, s);
	if (rc)
		return err_sys(e, rc, "starting the signal thread");
	pthread_detach(t);
	return 0;
}
