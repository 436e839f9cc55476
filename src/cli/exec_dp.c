/* exec_dp.c -- `spacectl exec`'s data-plane side: credentials, token
 * refresh, stdin forwarding and signal forwarding (see exec.h) */
#include "exec.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"

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

int exec_dp_post(struct exec_session *s, const char *suffix, const void *body,
		 size_t len, const char *content_type, struct http_resp *rs, space_err *e)
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
			.timeout_s = 0, /* stdin may be paced by a slow process */
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

int exec_send_signal(struct exec_session *s, int signo, space_err *e)
{
	struct http_resp rs;
	char body[64];
	int rc = 0;

	/* By number: identical for the signals we forward on every Linux
	 * architecture, and no name table to disagree about. */
	snprintf(body, sizeof(body), "{\"signal\":%d}", signo);
	if (exec_dp_post(s, "/signal", body, strlen(body), "application/json", &rs, e) < 0)
		rc = -1;
	else if (rs.status / 100 != 2)
		rc = http_error(&rs, e);
	http_resp_free(&rs);
	return rc;
}

static void stdin_warn(const struct exec_session *s, const char *what, const space_err *e)
{
	fprintf(stderr, "spacectl: %s: stdin: %s%s%s\n", s->c->verb, what, e ? ": " : "",
		e ? e->msg : "");
}

static void *stdin_main(void *arg)
{
	struct exec_session *s = arg;
	_cleanup_free_ char *buf = malloc(EXEC_STDIN_CHUNK);
	struct http_resp rs;
	space_err e = { 0 };

	if (!buf) {
		stdin_warn(s, "out of memory", NULL);
		return NULL;
	}
	for (;;) {
		/* Forward whatever one read() gives: an interactive user's line
		 * goes out at once instead of waiting for a full chunk. */
		ssize_t n = read(STDIN_FILENO, buf, EXEC_STDIN_CHUNK);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err_sys(&e, errno, "reading");
			stdin_warn(s, "closing it", &e);
			n = 0;
		}
		if (exec_dp_post(s, n ? "/stdin" : "/stdin/close", buf, (size_t)n,
				 "application/octet-stream", &rs, &e) < 0) {
			stdin_warn(s, "forwarding stopped", &e);
			http_resp_free(&rs);
			return NULL;
		}
		if (rs.status == 409) {
			/* The process finished or closed its stdin: nothing
			 * more to deliver, and the output stream says why. */
			http_resp_free(&rs);
			return NULL;
		}
		if (rs.status / 100 != 2) {
			http_error(&rs, &e);
			stdin_warn(s, "forwarding stopped", &e);
			http_resp_free(&rs);
			return NULL;
		}
		http_resp_free(&rs);
		if (n == 0)
			return NULL;
	}
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

static sigset_t forwarded_signals(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	return set;
}

static void *signal_main(void *arg)
{
	struct exec_session *s = arg;
	sigset_t set = forwarded_signals();
	space_err e = { 0 };
	int sig, count = 0;

	for (;;) {
		if (sigwait(&set, &sig) != 0)
			continue;
		if (++count == 1) {
			/* The command decides what the signal means; its exit
			 * arrives on the output stream as usual. */
			if (exec_send_signal(s, sig, &e) < 0)
				fprintf(stderr, "spacectl: %s: forwarding %s: %s\n", s->c->verb,
					strsignal(sig), e.msg);
			continue;
		}
		fprintf(stderr, "spacectl: %s: %s again: leaving; the command may still be running "
				"(session %s)\n", s->c->verb, strsignal(sig), s->session_id);
		fflush(stdout);
		_exit(128 + sig);
	}
	return NULL;
}

int exec_start_signals(struct exec_session *s, space_err *e)
{
	sigset_t set = forwarded_signals();
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
