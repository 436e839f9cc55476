/* client.c -- spacectl's HTTP helpers over libcurl (see client.h) */
#include "client.h"

#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"

/* Bodies we buffer (JSON answers, error bodies) are bounded so that a broken
 * or hostile server cannot make spacectl eat all memory. */
#define BODY_MAX (64u * 1024 * 1024)
#define CONNECT_TIMEOUT_S 10
#define CALL_TIMEOUT_S 60
/* The server may hold an operation long-poll this long (wait=..). */
#define OP_WAIT_S 30

struct xfer {
	const struct http_req *rq;
	struct http_resp *rs;
	CURL *h;
	bool too_big;
	bool opened;
};

struct http_conn {
	CURL *h;
};

struct http_conn *http_conn_new(void)
{
	struct http_conn *conn = calloc(1, sizeof(*conn));

	if (conn && !(conn->h = curl_easy_init())) {
		free(conn);
		return NULL;
	}
	return conn;
}

void http_conn_free(struct http_conn *conn)
{
	if (conn) {
		curl_easy_cleanup(conn->h);
		free(conn);
	}
}

static size_t on_upload(char *buf, size_t size, size_t nmemb, void *arg)
{
	const struct http_req *rq = arg;
	size_t n = rq->source(buf, size * nmemb, rq->source_arg);

	return n == HTTP_SOURCE_ABORT ? CURL_READFUNC_ABORT : n;
}

int ctl_http_init(space_err *e)
{
	CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);

	if (rc != CURLE_OK)
		return err_set(e, EIO, "initialising libcurl: %s", curl_easy_strerror(rc));
	return 0;
}

static long status_of(CURL *h)
{
	long code = 0;

	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	return code;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *arg)
{
	struct xfer *x = arg;
	struct http_resp *rs = x->rs;
	size_t n = size * nmemb;
	long code = status_of(x->h);
	char *nb;

	if (x->rq->sink && code / 100 == 2) {
		if (x->rq->sink(p, n, x->rq->sink_arg) == n)
			return n;
		rs->sink_stopped = true;
		return 0;
	}
	if (rs->len + n > BODY_MAX) {
		x->too_big = true;
		return 0;
	}
	nb = realloc(rs->body, rs->len + n + 1);
	if (!nb) {
		x->too_big = true;
		return 0;
	}
	rs->body = nb;
	memcpy(rs->body + rs->len, p, n);
	rs->len += n;
	rs->body[rs->len] = '\0';
	return n;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *arg)
{
	struct xfer *x = arg;
	size_t n = size * nmemb;

	/* The blank line ends a header block; 1xx blocks are not the answer. */
	if ((n == 2 && p[0] == '\r' && p[1] == '\n') || (n == 1 && p[0] == '\n')) {
		long code = status_of(x->h);

		if (code / 100 == 2 && !x->opened && x->rq->on_open) {
			x->opened = true;
			x->rq->on_open(x->rq->sink_arg);
		}
	}
	return n;
}

static struct curl_slist *add_header(struct curl_slist *l, const char *name,
				     const char *value, bool *oom)
{
	struct curl_slist *nl;
	_cleanup_free_ char *line = NULL;

	if (asprintf(&line, "%s: %s", name, value) < 0) {
		*oom = true;
		return l;
	}
	nl = curl_slist_append(l, line);
	if (!nl) {
		*oom = true;
		return l;
	}
	return nl;
}

int http_do(const struct http_req *rq, struct http_resp *rs, space_err *e)
{
	char errbuf[CURL_ERROR_SIZE] = "";
	struct curl_slist *hdrs = NULL;
	struct xfer x = { .rq = rq, .rs = rs };
	const char *method = rq->method ? rq->method : "GET";
	bool oom = false;
	CURLcode rc;
	CURL *h;

	memset(rs, 0, sizeof(*rs));
	if (rq->conn) {
		/* Options go, the connection cache stays. */
		h = rq->conn->h;
		curl_easy_reset(h);
	} else {
		h = curl_easy_init();
	}
	if (!h)
		return err_set(e, ENOMEM, "%s %s: cannot create a libcurl handle", method, rq->url);
	x.h = h;

	if (rq->bearer) {
		_cleanup_free_ char *auth = NULL;

		if (asprintf(&auth, "Bearer %s", rq->bearer) < 0)
			oom = true;
		else
			hdrs = add_header(hdrs, "Authorization", auth, &oom);
	}
	if (rq->content_type)
		hdrs = add_header(hdrs, "Content-Type", rq->content_type, &oom);
	if (rq->accept)
		hdrs = add_header(hdrs, "Accept", rq->accept, &oom);
	if (rq->last_event_id)
		hdrs = add_header(hdrs, "Last-Event-ID", rq->last_event_id, &oom);
	/* No "Expect: 100-continue" round trip before large bodies. */
	hdrs = add_header(hdrs, "Expect", "", &oom);
	if (rq->source && rq->upload_size < 0)
		hdrs = add_header(hdrs, "Transfer-Encoding", "chunked", &oom);
	if (oom) {
		curl_slist_free_all(hdrs);
		if (!rq->conn)
			curl_easy_cleanup(h);
		return err_set(e, ENOMEM, "%s %s: out of memory", method, rq->url);
	}

	curl_easy_setopt(h, CURLOPT_URL, rq->url);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	/* Threads (exec's stdin and signal forwarding) share the process:
	 * libcurl must not play with signals. */
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "spacectl/0.1");
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, (long)CONNECT_TIMEOUT_S);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, rq->timeout_s);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	if (rq->idle_s > 0) {
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, rq->idle_s);
	}
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &x);
	if (rq->source) {
		/* Streamed: PUT by default, or whatever method was asked. */
		curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, on_upload);
		curl_easy_setopt(h, CURLOPT_READDATA, rq);
		curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE,
				 (curl_off_t)(rq->upload_size < 0 ? -1 : rq->upload_size));
		if (strcmp(method, "PUT") != 0)
			curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	} else if (strcmp(method, "GET") == 0) {
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	} else if (strcmp(method, "POST") == 0) {
		curl_easy_setopt(h, CURLOPT_POST, 1L);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->body ? rq->body : "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
	} else {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
		if (rq->body) {
			curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->body);
			curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
					 (curl_off_t)rq->body_len);
		}
	}

	rc = curl_easy_perform(h);
	rs->curl_code = (int)rc;
	rs->status = status_of(h);
	curl_slist_free_all(hdrs);
	if (!rq->conn)
		curl_easy_cleanup(h);

	if (rc == CURLE_WRITE_ERROR && rs->sink_stopped)
		return 0;
	if (x.too_big)
		return err_set(e, E2BIG, "%s %s: response body over %u MiB", method,
			       rq->url, BODY_MAX >> 20);
	if (rc != CURLE_OK)
		return err_set(e, EIO, "%s %s: %s", method, rq->url,
			       errbuf[0] ? errbuf : curl_easy_strerror(rc));
	return 0;
}

void http_resp_free(struct http_resp *rs)
{
	free(rs->body);
	rs->body = NULL;
	rs->len = 0;
}

int http_error(const struct http_resp *rs, space_err *e)
{
	json_t *j = NULL, *eo;
	const char *code, *msg;
	char snippet[201];
	size_t i, n;

	if (rs->len)
		j = json_loadb(rs->body, rs->len, 0, NULL);
	eo = json_object_get(j, "error");
	code = json_string_value(json_object_get(eo, "code"));
	msg = json_string_value(json_object_get(eo, "message"));
	if (code || msg) {
		err_set(e, EIO, "%s (%s, HTTP %ld)", msg ? msg : "no message",
			code ? code : "no code", rs->status);
		json_decref(j);
		return -1;
	}
	json_decref(j);
	if (!rs->len)
		return err_set(e, EIO, "unexpected HTTP %ld response with no body", rs->status);
	/* Show the start of whatever came, made printable. */
	n = rs->len < sizeof(snippet) - 1 ? rs->len : sizeof(snippet) - 1;
	for (i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)rs->body[i];

		snippet[i] = (ch < 0x20 || ch == 0x7f) ? ' ' : (char)ch;
	}
	snippet[n] = '\0';
	return err_set(e, EIO, "unexpected HTTP %ld response: %s%s", rs->status, snippet,
		       rs->len > n ? "..." : "");
}

static int errno_of_code(const char *code)
{
	static const struct {
		const char *code;
		int err;
	} map[] = {
		{ "not_found", ENOENT },	  { "already_exists", EEXIST },
		{ "not_empty", ENOTEMPTY },	  { "permission_denied", EACCES },
		{ "not_a_directory", ENOTDIR },	  { "is_a_directory", EISDIR },
		{ "invalid_argument", EINVAL },	  { "bad_request", EINVAL },
		{ "range_not_satisfiable", ERANGE }, { "no_space", ENOSPC },
		{ "read_only", EROFS },		  { "conflict", EBUSY },
		{ "unauthorized", EACCES },	  { "unavailable", EAGAIN },
	};
	size_t i;

	for (i = 0; code && i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(code, map[i].code) == 0)
			return map[i].err;
	return EIO;
}

int http_error_brief(const struct http_resp *rs, space_err *e)
{
	json_t *j = rs->len ? json_loadb(rs->body, rs->len, 0, NULL) : NULL;
	json_t *eo = json_object_get(j, "error");
	const char *code = json_string_value(json_object_get(eo, "code"));
	const char *msg = json_string_value(json_object_get(eo, "message"));

	if (msg && *msg)
		err_set(e, errno_of_code(code), "%s", msg);
	else if (rs->status == 413) /* libevent's own page, not the API's JSON */
		err_set(e, E2BIG, "the daemon refused a request body this large (HTTP 413)");
	else
		http_error(rs, e);
	json_decref(j);
	return -1;
}

static int need_key(const struct ctl *c, space_err *e)
{
	if (!c->api_key || !*c->api_key)
		return err_set(e, EACCES,
			       "no API key: set SPACE_API_KEY or SPACE_API_KEY_FILE, or pass --api-key");
	return 0;
}

static int call_timeout(const struct ctl *c, const char *method, const char *path,
			json_t *body, json_t **out, long timeout_s, space_err *e)
{
	_cleanup_free_ char *url = NULL, *payload = NULL;
	struct http_resp rs;
	struct http_req rq = {
		.method = method,
		.bearer = c->api_key,
		.accept = "application/json",
		.timeout_s = timeout_s,
	};
	json_error_t jerr;
	json_t *v;

	if (out)
		*out = NULL;
	if (need_key(c, e) < 0)
		return -1;
	if (asprintf(&url, "%s%s", c->url, path) < 0)
		return err_set(e, ENOMEM, "out of memory");
	rq.url = url;
	if (body) {
		payload = json_dumps(body, JSON_COMPACT);
		if (!payload)
			return err_set(e, ENOMEM, "encoding the request body");
		rq.body = payload;
		rq.body_len = strlen(payload);
		rq.content_type = "application/json";
	}
	if (http_do(&rq, &rs, e) < 0) {
		http_resp_free(&rs);
		return -1;
	}
	if (rs.status / 100 != 2) {
		http_error(&rs, e);
		http_resp_free(&rs);
		return -1;
	}
	if (rs.len == 0 || !out) {
		http_resp_free(&rs);
		return 0;
	}
	v = json_loadb(rs.body, rs.len, 0, &jerr);
	http_resp_free(&rs);
	if (!v)
		return err_set(e, EBADMSG, "%s %s: invalid JSON in the response: %s (line %d)",
			       method, url, jerr.text, jerr.line);
	*out = v;
	return 0;
}

int ctl_call(const struct ctl *c, const char *method, const char *path,
	     json_t *body, json_t **out, space_err *e)
{
	return call_timeout(c, method, path, body, out, CALL_TIMEOUT_S, e);
}

struct fd_sink {
	int fd;
	int err;
};

static size_t fd_sink_write(const char *p, size_t n, void *arg)
{
	struct fd_sink *s = arg;

	if (ctl_write_all(s->fd, p, n) < 0) {
		s->err = errno;
		return 0;
	}
	return n;
}

int ctl_get_raw(const struct ctl *c, const char *path, int fd, space_err *e)
{
	_cleanup_free_ char *url = NULL;
	struct fd_sink sink = { .fd = fd };
	struct http_resp rs;
	struct http_req rq = {
		.method = "GET",
		.bearer = c->api_key,
		.timeout_s = 0,
		.idle_s = CALL_TIMEOUT_S,
		.sink = fd_sink_write,
		.sink_arg = &sink,
	};
	int rc = 0;

	if (need_key(c, e) < 0)
		return -1;
	if (asprintf(&url, "%s%s", c->url, path) < 0)
		return err_set(e, ENOMEM, "out of memory");
	rq.url = url;
	if (http_do(&rq, &rs, e) < 0)
		rc = -1;
	else if (rs.sink_stopped)
		rc = err_set(e, sink.err, "writing the output: %s", strerror(sink.err));
	else if (rs.status / 100 != 2)
		rc = http_error(&rs, e);
	http_resp_free(&rs);
	return rc;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int ctl_wait_operation(const struct ctl *c, const char *op_id, json_t **final,
		       space_err *e)
{
	_cleanup_free_ char *esc = ctl_escape(op_id), *path = NULL;

	*final = NULL;
	if (!esc || asprintf(&path, "/v1/operations/%s?wait=%d", esc, OP_WAIT_S) < 0)
		return err_set(e, ENOMEM, "out of memory");
	for (;;) {
		double t0 = now_s();
		const char *state;
		json_t *op;

		if (call_timeout(c, "GET", path, NULL, &op, OP_WAIT_S + CALL_TIMEOUT_S, e) < 0)
			return err_wrap(e, "waiting for %s", op_id);
		state = ctl_jstr(op, "state", NULL);
		if (!state) {
			json_decref(op);
			return err_set(e, EBADMSG, "waiting for %s: the answer has no state",
				       op_id);
		}
		if (strcmp(state, "succeeded") == 0) {
			*final = op;
			return 0;
		}
		if (strcmp(state, "failed") == 0) {
			err_set(e, EIO, "operation %s (%s %s) failed: %s", op_id,
				ctl_jstr(op, "kind", "?"), ctl_jstr(op, "sandbox_id", "?"),
				ctl_jstr(op, "error", "no reason given"));
			json_decref(op);
			return -1;
		}
		json_decref(op);
		/* A server that answers at once instead of holding the poll
		 * must not make us spin. */
		if (now_s() - t0 < 0.5)
			usleep(500 * 1000);
	}
}

char *ctl_trim_url(const char *url)
{
	char *u = strdup(url);
	size_t n;

	if (!u)
		return NULL;
	n = strlen(u);
	while (n && u[n - 1] == '/')
		u[--n] = '\0';
	return u;
}

char *ctl_escape(const char *s)
{
	char *t = curl_easy_escape(NULL, s, 0);
	char *r;

	if (!t)
		return NULL;
	r = strdup(t);
	curl_free(t);
	return r;
}

char *ctl_path(const char *collection, const char *id, const char *suffix)
{
	_cleanup_free_ char *esc = ctl_escape(id);
	char *path;

	if (!esc || asprintf(&path, "%s/%s%s", collection, esc, suffix) < 0)
		return NULL;
	return path;
}

char *ctl_sandbox_path(const char *id, const char *suffix)
{
	return ctl_path("/v1/sandboxes", id, suffix);
}

int ctl_write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				struct pollfd pfd = { .fd = fd, .events = POLLOUT };

				/* A non-blocking fd inherited from the shell:
				 * wait until it drains rather than spin. */
				if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
					return -1;
				continue;
			}
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int ctl_print_json(const json_t *v)
{
	if (!v) {
		puts("null");
		return CTL_EXIT_OK;
	}
	if (json_dumpf(v, stdout, JSON_INDENT(2) | JSON_ENCODE_ANY) < 0)
		return CTL_EXIT_FAIL;
	putchar('\n');
	return CTL_EXIT_OK;
}

const char *ctl_jstr(const json_t *obj, const char *key, const char *dflt)
{
	const char *s = json_string_value(json_object_get(obj, key));

	return s ? s : dflt;
}

long long ctl_jint(const json_t *obj, const char *key, long long dflt)
{
	json_t *v = json_object_get(obj, key);

	if (json_is_integer(v))
		return json_integer_value(v);
	/* Guarded: converting an out-of-range double is undefined. */
	if (json_is_real(v) && json_real_value(v) > -9e18 && json_real_value(v) < 9e18)
		return (long long)json_real_value(v);
	return dflt;
}
