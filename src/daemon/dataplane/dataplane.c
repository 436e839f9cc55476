/* dataplane.c -- the data-plane listener: session-token auth, stdin, signals, session state */
#include "dataplane.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "daemon.h"
#include "sandbox/sandbox.h"
#include "log.h"
#include "store/store.h"
#include "front/front.h"
#include "front/render.h"
#include "front/req.h"

static const struct {
	const char *name;
	int signo;
} signal_names[] = {
	{ "HUP", SIGHUP },     { "INT", SIGINT },       { "QUIT", SIGQUIT },   { "ILL", SIGILL },
	{ "TRAP", SIGTRAP },   { "ABRT", SIGABRT },     { "IOT", SIGIOT },     { "BUS", SIGBUS },
	{ "FPE", SIGFPE },     { "KILL", SIGKILL },     { "USR1", SIGUSR1 },   { "SEGV", SIGSEGV },
	{ "USR2", SIGUSR2 },   { "PIPE", SIGPIPE },     { "ALRM", SIGALRM },   { "TERM", SIGTERM },
	{ "STKFLT", SIGSTKFLT }, { "CHLD", SIGCHLD },   { "CONT", SIGCONT },   { "STOP", SIGSTOP },
	{ "TSTP", SIGTSTP },   { "TTIN", SIGTTIN },     { "TTOU", SIGTTOU },   { "URG", SIGURG },
	{ "XCPU", SIGXCPU },   { "XFSZ", SIGXFSZ },     { "VTALRM", SIGVTALRM }, { "PROF", SIGPROF },
	{ "WINCH", SIGWINCH }, { "IO", SIGIO },         { "POLL", SIGPOLL },   { "PWR", SIGPWR },
	{ "SYS", SIGSYS },
};

int signal_from_name(const char *name)
{
	if (strncasecmp(name, "SIG", 3) == 0)
		name += 3;
	for (size_t i = 0; i < sizeof(signal_names) / sizeof(signal_names[0]); i++)
		if (strcasecmp(name, signal_names[i].name) == 0)
			return signal_names[i].signo;
	return -1;
}

int signal_parse(const json_t *v, space_err *err)
{
	json_int_t n = -1;

	if (json_is_integer(v)) {
		n = json_integer_value(v);
	} else if (json_is_string(v)) {
		const char *s = json_string_value(v);
		uint64_t u;
		if (http_parse_u64(s, &u) == 0)
			n = u <= 64 ? (json_int_t)u : -1;
		else if ((n = signal_from_name(s)) < 0)
			return err_set(err, EINVAL, "unknown signal '%s'", s);
	} else {
		return err_set(err, EINVAL, "signal must be a name (\"SIGTERM\") or a number");
	}
	if (n < 1 || n > 64)
		return err_set(err, EINVAL, "signal number must be 1..64");
	return (int)n;
}

enum dp_token_src dp_token_source(enum evhttp_cmd_type method, bool stream_route, bool has_header, bool has_query)
{
	/* A token in the URL ends up in access logs, proxies and browser
	 * history: only a browser's EventSource (a GET, no headers) needs it. */
	if (has_query && !(method == EVHTTP_REQ_GET && stream_route))
		return DP_TOKEN_QUERY_REFUSED;
	if (has_header)
		return DP_TOKEN_HEADER;
	return has_query ? DP_TOKEN_QUERY : DP_TOKEN_NONE;
}

static bool is_stream_route(const struct http_req *r)
{
	return r->nseg == 4 && (strcmp(r->seg[3], "attach") == 0 || strcmp(r->seg[3], "ws") == 0);
}

/* A files token this process has not seen: its row is read on the store's thread. */
static int files_verdict(struct http_req *r, void *arg)
{
	space_err err = { 0 };

	if (token_job_verdict(r->d, arg, &err) < 0) {
		http_reply_err(r->req, &err);
		return -1;
	}
	return 0;
}

/* /v1/sandboxes/{id}/files...: opened by a files token of that sandbox. */
static int dp_auth_files(struct http_req *r, const char *token)
{
	struct token_job *q;
	struct token_row row;
	space_err err = { 0 };
	int rc;

	if (!id_valid(r->param[0], "sb-") || !sandbox_find(r->d, r->param[0])) {
		http_reply_error(r->req, 404, "not_found", "no sandbox '%.64s'", r->param[0]);
		return -1;
	}
	rc = token_check(r->d, r->param[0], TOKEN_SCOPE_FILES, token, &row, &err);
	if (rc < 0) {
		http_reply_err(r->req, &err);
		return -1;
	}
	if (rc == 0)
		return 0;
	if (!(q = token_job_new(r->param[0], TOKEN_SCOPE_FILES, &row))) {
		http_reply_error(r->req, 500, "internal", "out of memory");
		return -1;
	}
	return api_step_read(r, token_job_read, files_verdict, free, q);
}

/* The token of this request into `token`; -1 having answered 401. */
static int dp_token(struct http_req *r, char *token, size_t len)
{
	const char *h = evhttp_find_header(evhttp_request_get_input_headers(r->req), "Authorization");
	const char *q = http_query(r, "token");

	switch (dp_token_source(r->method, is_stream_route(r), h != NULL, q != NULL)) {
	case DP_TOKEN_HEADER:
		if (http_bearer(h, token, len) == 0)
			return 0;
		http_reply_error(r->req, 401, "unauthorized", "malformed Authorization header");
		return -1;
	case DP_TOKEN_QUERY:
		if (strlen(q) < len) {
			strcpy(token, q);
			return 0;
		}
		http_reply_error(r->req, 401, "unauthorized", "invalid token");
		return -1;
	case DP_TOKEN_QUERY_REFUSED:
		http_reply_error(r->req, 401, "unauthorized",
				 "?token= is accepted only on GET /v1/sessions/{id}/attach (for EventSource); "
				 "send Authorization: Bearer <token>");
		return -1;
	case DP_TOKEN_NONE:
		break;
	}
	http_reply_error(r->req, 401, "unauthorized", "missing session token (Authorization: Bearer <token>)");
	return -1;
}

static int session_auth(struct http_req *r, struct session *s, const char *token)
{
	space_err err = { 0 };

	if (session_check_token(s, token, &err) < 0) {
		http_reply_error(r->req, 401, "unauthorized", "%s", err.msg[0] ? err.msg : "invalid token");
		return -1;
	}
	r->obj = s;
	return 0;
}

/* A session not in memory (an ended one let go of, one of a sandbox this process does not
 * run, or none): its record is read on the store's thread. */
struct session_later {
	char sid[ID_LEN];
	char token[128];
	struct session_rec rec;
	int rc;
	space_err err;
};

static void session_read(struct store *conn, void *arg)
{
	struct session_later *q = arg;

	q->rc = store_session_get(conn, q->sid, &q->rec, &q->err);
}

static int session_verdict(struct http_req *r, void *arg)
{
	struct session_later *q = arg;
	struct session *s = NULL;

	if (q->rc == 0)
		s = session_find_stored(r->d, &q->rec);
	else if (q->err.code != ENOENT)
		log_error("session %s: %s", q->sid, q->err.msg);
	if (!s) {
		http_reply_error(r->req, 404, "not_found", "no session '%s'", q->sid);
		return -1;
	}
	return session_auth(r, s, q->token);
}

static void session_later_free(void *arg)
{
	struct session_later *q = arg;

	explicit_bzero(q->token, sizeof(q->token));
	session_rec_clear(&q->rec);
	free(q);
}

/* The session named in the path, opened only by its own current token. The
 * API key is no token: it opens nothing here. */
static int dp_auth(struct http_req *r)
{
	const char *sid = r->param[0];
	struct session_later *q;
	struct session *s;
	char token[128];
	int rc;

	if (dp_token(r, token, sizeof(token)) < 0)
		return -1;
	if (strcmp(r->seg[1], "sandboxes") == 0) {
		rc = dp_auth_files(r, token);
		explicit_bzero(token, sizeof(token));
		return rc;
	}
	if (!id_valid(sid, "ss-")) {
		explicit_bzero(token, sizeof(token));
		http_reply_error(r->req, 404, "not_found", "no session '%s'", sid);
		return -1;
	}
	s = session_loaded(r->d, sid);
	if (s) {
		rc = session_auth(r, s, token);
	} else if (!(q = calloc(1, sizeof(*q)))) {
		http_reply_error(r->req, 500, "internal", "out of memory");
		rc = -1;
	} else {
		snprintf(q->sid, sizeof(q->sid), "%s", sid);
		memcpy(q->token, token, sizeof(q->token));
		rc = api_step_read(r, session_read, session_verdict, session_later_free, q);
	}
	explicit_bzero(token, sizeof(token));
	return rc;
}

/* dp_auth's verdict from a request's head, before its body is read (http_plane.head_auth):
 * from memory only; a session or token this process has not seen is UNKNOWN (budgeted). */
static enum http_head_verdict dp_head_auth(struct http_req *r, struct evkeyvalq *hdrs)
{
	const char *h = evhttp_find_header(hdrs, "Authorization");
	enum http_head_verdict v = HTTP_HEAD_REFUSED;
	struct token_row row;
	space_err err = { 0 };
	struct session *s;
	char token[128];
	int rc;

	if (!r->next)
		return HTTP_HEAD_REFUSED; /* no route: answered 404 without its body */
	if (!h || http_bearer(h, token, sizeof(token)) < 0)
		return HTTP_HEAD_REFUSED;
	if (strcmp(r->seg[1], "sandboxes") == 0) {
		if (id_valid(r->param[0], "sb-") && sandbox_find(r->d, r->param[0])) {
			rc = token_check(r->d, r->param[0], TOKEN_SCOPE_FILES, token, &row, &err);
			v = rc == 0 ? HTTP_HEAD_AUTHED : rc > 0 ? HTTP_HEAD_UNKNOWN : HTTP_HEAD_REFUSED;
		}
	} else if (id_valid(r->param[0], "ss-")) {
		s = session_loaded(r->d, r->param[0]);
		v = !s ? HTTP_HEAD_UNKNOWN : session_check_token(s, token, &err) == 0 ? HTTP_HEAD_AUTHED : HTTP_HEAD_REFUSED;
	}
	explicit_bzero(token, sizeof(token));
	return v;
}

/* An api process checks no token (the node does): a body with one is budgeted, one without
 * any is refused before it is read. */
static enum http_head_verdict dp_head_relay(struct http_req *r, struct evkeyvalq *hdrs)
{
	(void)r;
	if (evhttp_find_header(hdrs, "Authorization") || evhttp_find_header(hdrs, "X-Access-Token") ||
	    evhttp_find_header(hdrs, "E2B-Traffic-Access-Token"))
		return HTTP_HEAD_UNKNOWN;
	return HTTP_HEAD_REFUSED;
}

static void dp_session_get(struct http_req *r)
{
	struct session *s = r->obj;

	http_reply_json(r->req, 200, session_to_json(session_rec(s), session_output_length(s), session_output_start(s)));
}

static bool query_true(const char *v)
{
	return v && (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0);
}

static void dp_stdin(struct http_req *r)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(r->req);
	size_t len = evbuffer_get_length(in);
	const void *data = len ? (const void *)evbuffer_pullup(in, -1) : (const void *)"";
	space_err err = { 0 };

	if (!data) {
		http_reply_error(r->req, 500, "internal", "out of memory reading stdin");
		return;
	}
	if (session_stdin(r->obj, data, len, query_true(http_query(r, "close")), &err) < 0)
		http_reply_err(r->req, &err);
	else
		http_reply_empty(r->req, 204);
}

static void dp_stdin_close(struct http_req *r)
{
	space_err err = { 0 };

	if (session_stdin(r->obj, NULL, 0, 1, &err) < 0)
		http_reply_err(r->req, &err);
	else
		http_reply_empty(r->req, 204);
}

static void dp_signal(struct http_req *r)
{
	space_err err = { 0 };
	json_t *body = http_body_json(r);
	int signo;

	if (!body)
		return;
	signo = signal_parse(json_object_get(body, "signal"), &err);
	json_decref(body);
	if (signo < 0 || session_signal(r->obj, signo, &err) < 0)
		http_reply_err(r->req, &err);
	else
		http_reply_empty(r->req, 204);
}

static void dp_resize(struct http_req *r)
{
	space_err err = { 0 };
	json_t *body = http_body_json(r);
	uint16_t rows = 0, cols = 0;

	if (!body)
		return;
	if (!json_object_get(body, "rows") || !json_object_get(body, "cols"))
		err_set(&err, EINVAL, "rows and cols are required");
	else
		req_pty_size(body, &rows, &cols, &err);
	json_decref(body);
	if (err.code || session_resize(r->obj, rows, cols, &err) < 0)
		http_reply_err(r->req, &err);
	else
		http_reply_empty(r->req, 204);
}

/* /v1's data plane: sessions (relayed by an api process to the node of the session); /v1's file
 * routes (api/files.h: opened here by a files token) and E2B's envd routes join them on this
 * listener (listeners.c). */
const struct http_route dp_routes[] = {
	{ EVHTTP_REQ_GET, "/v1/sessions/{}", dp_session_get, NULL, HTTP_PLACE_SESSION, 0, NULL, NULL },
	{ EVHTTP_REQ_POST, "/v1/sessions/{}/attach", dp_attach, NULL, HTTP_PLACE_SESSION, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/sessions/{}/attach", dp_attach, NULL, HTTP_PLACE_SESSION, 0, NULL, NULL },
	{ EVHTTP_REQ_POST, "/v1/sessions/{}/stdin", dp_stdin, NULL, HTTP_PLACE_SESSION, 0, NULL, NULL },
	{ EVHTTP_REQ_POST, "/v1/sessions/{}/stdin/close", dp_stdin_close, NULL, HTTP_PLACE_SESSION, 0, NULL, NULL },
	{ EVHTTP_REQ_POST, "/v1/sessions/{}/signal", dp_signal, NULL, HTTP_PLACE_SESSION, 0, NULL, NULL },
	{ EVHTTP_REQ_POST, "/v1/sessions/{}/resize", dp_resize, NULL, HTTP_PLACE_SESSION, 0, NULL, NULL },
	{ EVHTTP_REQ_GET, "/v1/sessions/{}/ws", dp_ws, NULL, HTTP_PLACE_SESSION, 0, NULL, NULL },
};
const size_t dp_nroutes = sizeof(dp_routes) / sizeof(dp_routes[0]);

static struct http_plane dp_plane = {
	.name = "data",
	.auth = dp_auth,
	.auth_first = false, /* the route names the session the token must open */
	.head_auth = dp_head_auth,
};

int dataplane_start(struct spaced *d, const struct front_tables *t, space_err *err)
{
	dp_plane.d = d;
	dp_plane.routes = t->routes;
	dp_plane.nroutes = t->nroutes;
	dp_plane.stream_routes = t->stream_routes;
	dp_plane.nstream_routes = t->nstream_routes;
	dp_plane.prefixes = t->prefixes;
	dp_plane.host_takes = t->host_takes;
	dp_plane.host_handler = t->host_handler;
	dp_plane.nprefixes = t->nprefixes;
	dp_plane.max_body = t->max_body ? t->max_body :
		d->cfg.max_stdin_bytes > 0 ? (size_t)d->cfg.max_stdin_bytes : (4u << 20);
	if (t->relay) {
		/* Every route goes to the owning node, which checks the token. */
		dp_plane.auth = NULL;
		dp_plane.head_auth = dp_head_relay;
	}
	dp_plane.tls = d->tls_server;
	if (d->cfg.role == DROLE_NODE)
		dp_plane.peer_key = d->cfg.cluster_key; /* only its api processes reach a node */
	d->data_http = http_listen(d->base, d->cfg.data_listen, &dp_plane, err);
	return d->data_http ? 0 : err_wrap(err, "data plane");
}
