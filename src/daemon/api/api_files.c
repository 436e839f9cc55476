/* api_files.c -- /v1/sandboxes/{id}/files...: read, write, list, stat, mkdir, remove, rename,
 * tar both ways and watch (docs/design/channels.md), on both planes; and files tokens */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "api/api.h"
#include "api/files.h"
#include "front/render.h"
#include "daemon.h"
#include "sandbox/sandbox.h"
#include "sandbox/spec.h"

#define FILES_PATH_MAX 4095

/* ---- request parts ---- */

static bool query_true(const char *v)
{
	return v && (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0);
}

static int check_path(const char *what, const char *p, space_err *err)
{
	if (!p || !*p)
		return err_set(err, EINVAL, "%s is required (an absolute path in the sandbox)", what);
	if (p[0] != '/')
		return err_set(err, EINVAL, "%s must be an absolute path, not '%.200s'", what, p);
	if (strlen(p) > FILES_PATH_MAX)
		return err_set(err, EINVAL, "%s is longer than %d bytes", what, FILES_PATH_MAX);
	return 0;
}

static int check_mode(const char *m, space_err *err)
{
	size_t n = m ? strlen(m) : 0;

	if (n < 1 || n > 4 || strspn(m, "01234567") != n)
		return err_set(err, EINVAL, "mode must be octal permissions like 0644");
	return 0;
}

/* The sandbox id, ?path= and ?user= every route takes; -1 having answered. */
static int common(struct http_req *r, const char **path, const char **user)
{
	space_err err = { 0 };

	if (!id_valid(r->param[0], "sb-")) {
		http_reply_error(r->req, 404, "not_found", "no sandbox '%.64s'", r->param[0]);
		return -1;
	}
	*user = http_query(r, "user");
	if (*user && spec_check_user(*user, &err) < 0) {
		http_reply_err(r->req, &err);
		return -1;
	}
	if (path) {
		*path = http_query(r, "path");
		if (check_path("path", *path, &err) < 0) {
			http_reply_err(r->req, &err);
			return -1;
		}
	}
	return 0;
}

/* ---- unary operations: the header line is the answer ---- */

static int unary_end(struct fop *f, struct evbuffer *out)
{
	char *s = json_dumps(fop_header(f), JSON_COMPACT);

	if (!s)
		return -1;
	evbuffer_add(out, s, strlen(s));
	free(s);
	return 0;
}

static const struct fop_kind k_unary = { .kind = SESS_KIND_FILE, .on_end = unary_end };
static const struct fop_kind k_unary_stdin = { .kind = SESS_KIND_FILE, .with_stdin = true, .on_end = unary_end };

static int mkdir_end(struct fop *f, struct evbuffer *out)
{
	if (json_is_true(json_object_get(fop_header(f), "created")))
		fop_set_status(f, 201);
	return unary_end(f, out);
}

static const struct fop_kind k_mkdir = { .kind = SESS_KIND_FILE, .on_end = mkdir_end };

void api_files_stat(struct http_req *r)
{
	const char *path, *user;

	if (common(r, &path, &user) < 0)
		return;
	fop_run(r, r->param[0], &k_unary, (const char *[]){ "stat", path, NULL }, user, NULL);
}

void api_files_remove(struct http_req *r)
{
	const char *path, *user;
	bool rec = query_true(http_query(r, "recursive"));

	if (common(r, &path, &user) < 0)
		return;
	fop_run(r, r->param[0], &k_unary, (const char *[]){ "remove", path, rec ? "-r" : NULL, NULL }, user, NULL);
}

/* A JSON body's string field, copied into the request's own storage (the body is freed). */
static const char *body_str(json_t *body, const char *key, char *buf, size_t len)
{
	const char *v = json_string_value(json_object_get(body, key));

	if (!v || strlen(v) >= len)
		return v ? "" : NULL;
	snprintf(buf, len, "%s", v);
	return buf;
}

void api_files_mkdir(struct http_req *r)
{
	static char path[FILES_PATH_MAX + 1], mode[8];
	const char *user, *p, *m = NULL;
	space_err err = { 0 };
	json_t *body, *par;
	bool parents;

	if (common(r, NULL, &user) < 0 || !(body = http_body_json(r)))
		return;
	p = body_str(body, "path", path, sizeof(path));
	if (json_object_get(body, "mode"))
		m = body_str(body, "mode", mode, sizeof(mode));
	par = json_object_get(body, "parents");
	parents = json_is_true(par);
	if (check_path("path", p, &err) == 0 && json_object_get(body, "mode"))
		check_mode(m, &err);
	if (!err.code && par && !json_is_boolean(par))
		err_set(&err, EINVAL, "parents must be true or false");
	json_decref(body);
	if (err.code) {
		http_reply_err(r->req, &err);
		return;
	}
	fop_run(r, r->param[0], &k_mkdir, (const char *[]){ "mkdir", path, m ? mode : "-", parents ? "-p" : NULL, NULL },
		user, NULL);
}

void api_files_rename(struct http_req *r)
{
	static char from[FILES_PATH_MAX + 1], to[FILES_PATH_MAX + 1];
	const char *user, *f, *t;
	space_err err = { 0 };
	json_t *body, *ow;
	bool overwrite = true;

	if (common(r, NULL, &user) < 0 || !(body = http_body_json(r)))
		return;
	f = body_str(body, "from", from, sizeof(from));
	t = body_str(body, "to", to, sizeof(to));
	ow = json_object_get(body, "overwrite");
	if (ow && !json_is_boolean(ow))
		err_set(&err, EINVAL, "overwrite must be true or false");
	else if (ow)
		overwrite = json_is_true(ow);
	json_decref(body);
	if (!err.code && check_path("from", f, &err) == 0)
		check_path("to", t, &err);
	if (err.code) {
		http_reply_err(r->req, &err);
		return;
	}
	fop_run(r, r->param[0], &k_unary, (const char *[]){ "rename", from, to, overwrite ? NULL : "-n", NULL }, user,
		NULL);
}

/* ---- write and tar-in: the request body is the operation's stdin ---- */

void api_files_write(struct http_req *r)
{
	const char *path, *user, *mode = http_query(r, "mode");
	bool parents = query_true(http_query(r, "parents"));
	space_err err = { 0 };

	if (common(r, &path, &user) < 0)
		return;
	if (mode && check_mode(mode, &err) < 0) {
		http_reply_err(r->req, &err);
		return;
	}
	fop_run(r, r->param[0], &k_unary_stdin,
		(const char *[]){ "write", path, mode ? mode : "-", parents ? "-p" : NULL, NULL }, user, NULL);
}

void api_files_tar_put(struct http_req *r)
{
	const char *path, *user;

	if (common(r, &path, &user) < 0)
		return;
	fop_run(r, r->param[0], &k_unary_stdin, (const char *[]){ "tar-in", path, NULL }, user, NULL);
}

/* ---- read: raw bytes, whole or a range ---- */

int files_parse_range(const char *h, uint64_t *off, uint64_t *len)
{
	uint64_t a = 0, b = 0;
	const char *p, *dash;
	char num[24];

	if (!h)
		return 1;
	if (strncasecmp(h, "bytes=", 6) != 0)
		return -1;
	p = h + 6;
	if (strchr(p, ','))
		return 1; /* several ranges: the whole file */
	dash = strchr(p, '-');
	if (!dash)
		return -1;
	if (dash == p)
		return 1; /* a suffix: the whole file */
	if ((size_t)(dash - p) >= sizeof(num))
		return -1;
	memcpy(num, p, (size_t)(dash - p));
	num[dash - p] = '\0';
	if (http_parse_u64(num, &a) < 0)
		return -1;
	*off = a;
	if (!dash[1]) {
		*len = UINT64_MAX;
		return 0;
	}
	if (http_parse_u64(dash + 1, &b) < 0 || b < a)
		return -1;
	*len = b - a + 1;
	return 0;
}

struct read_ctx {
	bool ranged;
	uint64_t off, len; /* what was asked for (len UINT64_MAX: to the end) */
};

static void http_date(double t, char *out, size_t len)
{
	time_t s = (time_t)t;
	struct tm tm;

	gmtime_r(&s, &tm);
	strftime(out, len, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

static int read_header(struct fop *f)
{
	struct read_ctx *c = fop_ctx(f);
	json_t *h = fop_header(f);
	struct evkeyvalq *hdrs = evhttp_request_get_output_headers(fop_req(f));
	json_int_t size = json_integer_value(json_object_get(h, "size"));
	json_int_t off = json_integer_value(json_object_get(h, "offset"));
	json_int_t len = json_integer_value(json_object_get(h, "length"));
	json_int_t mode = json_integer_value(json_object_get(h, "mode"));
	char buf[128];

	/* The header is the guest's word: it must describe what was asked for, and the engine
	 * holds the body to exactly len bytes (fop_reply_start_sized). */
	if (size < 0 || off < 0 || len < 0 || off > size || len > size - off)
		return -1;
	if ((uint64_t)off != c->off)
		return -1;
	if (c->len != UINT64_MAX && (uint64_t)len > c->len)
		return -1;
	if (c->ranged && len == 0 && size > 0)
		return FOP_RANGE_NOT_SATISFIABLE;
	evhttp_add_header(hdrs, "Content-Type", "application/octet-stream");
	snprintf(buf, sizeof(buf), "%" PRId64, (int64_t)size);
	evhttp_add_header(hdrs, "X-Space-File-Size", buf);
	snprintf(buf, sizeof(buf), "%04o", (unsigned)(mode & 07777));
	evhttp_add_header(hdrs, "X-Space-File-Mode", buf);
	http_date(json_number_value(json_object_get(h, "mtime")), buf, sizeof(buf));
	evhttp_add_header(hdrs, "Last-Modified", buf);
	evhttp_add_header(hdrs, "Accept-Ranges", "bytes");
	if (c->ranged) {
		snprintf(buf, sizeof(buf), "bytes %" PRId64 "-%" PRId64 "/%" PRId64, (int64_t)off,
			 (int64_t)(off + len - 1), (int64_t)size);
		evhttp_add_header(hdrs, "Content-Range", buf);
		fop_reply_start_sized(f, 206, "Partial Content", (uint64_t)len);
	} else {
		fop_reply_start_sized(f, 200, "OK", (uint64_t)len);
	}
	return 0;
}

static int raw_body(struct fop *f, const uint8_t *p, size_t n, struct evbuffer *out)
{
	(void)f;
	return evbuffer_add(out, p, n);
}

static const struct fop_kind k_read = {
	.kind = SESS_KIND_FILE, .on_header = read_header, .on_raw = raw_body, .free_ctx = free,
};

void api_files_read(struct http_req *r)
{
	const char *path, *user, *qo = http_query(r, "offset"), *ql = http_query(r, "length");
	uint64_t off = 0, len = UINT64_MAX;
	char so[24] = "0", sl[24] = "";
	struct read_ctx *c;
	int rc;

	if (common(r, &path, &user) < 0)
		return;
	rc = files_parse_range(evhttp_find_header(evhttp_request_get_input_headers(r->req), "Range"), &off, &len);
	if (rc < 0) {
		http_reply_error(r->req, 416, "range_not_satisfiable", "malformed Range header (bytes=A-B or bytes=A-)");
		return;
	}
	if (rc == 1 && ((qo && http_parse_u64(qo, &off) < 0) || (ql && http_parse_u64(ql, &len) < 0))) {
		http_reply_error(r->req, 400, "bad_request", "offset and length must be non-negative integers");
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		http_reply_error(r->req, 500, "internal", "out of memory");
		return;
	}
	c->ranged = rc == 0;
	c->off = off;
	c->len = len;
	snprintf(so, sizeof(so), "%" PRIu64, off);
	if (len != UINT64_MAX)
		snprintf(sl, sizeof(sl), "%" PRIu64, len);
	fop_run(r, r->param[0], &k_read, (const char *[]){ "read", path, so, sl[0] ? sl : NULL, NULL }, user, c);
}

/* ---- list: entries streamed into one JSON document ---- */

/* A line from the guest, checked and re-encoded: what we send is JSON whatever it wrote. */
static int add_json_line(const char *line, size_t len, struct evbuffer *out)
{
	json_t *j = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	char *s = json_is_object(j) ? json_dumps(j, JSON_COMPACT) : NULL;

	json_decref(j);
	if (!s)
		return -1;
	evbuffer_add(out, s, strlen(s));
	free(s);
	return 0;
}

static int list_header(struct fop *f)
{
	evhttp_add_header(evhttp_request_get_output_headers(fop_req(f)), "Content-Type", "application/json");
	fop_reply_start(f, 200, "OK");
	fop_set_first(f, true);
	return fop_open_doc(f, "{\"path\":", json_object_get(fop_header(f), "path"), ",\"entries\":[");
}

static int list_line(struct fop *f, const char *line, size_t len, struct evbuffer *out)
{
	if (!fop_set_first(f, false))
		evbuffer_add(out, ",", 1);
	return add_json_line(line, len, out);
}

static int list_end(struct fop *f, struct evbuffer *out)
{
	(void)f;
	return evbuffer_add(out, "]}", 2);
}

static const struct fop_kind k_list = {
	.kind = SESS_KIND_FILE, .on_header = list_header, .on_line = list_line, .on_end = list_end,
};

void api_files_list(struct http_req *r)
{
	const char *path, *user, *d = http_query(r, "depth");
	uint64_t depth = 1;
	char sd[8];

	if (common(r, &path, &user) < 0)
		return;
	if (d && (http_parse_u64(d, &depth) < 0 || depth < 1 || depth > 64)) {
		http_reply_error(r->req, 400, "bad_request", "depth must be 1..64");
		return;
	}
	snprintf(sd, sizeof(sd), "%" PRIu64, depth);
	fop_run(r, r->param[0], &k_list, (const char *[]){ "list", path, sd, NULL }, user, NULL);
}

/* ---- tar out ---- */

static int tar_header(struct fop *f)
{
	struct evkeyvalq *hdrs = evhttp_request_get_output_headers(fop_req(f));

	evhttp_add_header(hdrs, "Content-Type", "application/x-tar");
	fop_reply_start(f, 200, "OK");
	return 0;
}

static const struct fop_kind k_tar_out = { .kind = SESS_KIND_FILE, .on_header = tar_header, .on_raw = raw_body };

void api_files_tar_get(struct http_req *r)
{
	const char *path, *user;

	if (common(r, &path, &user) < 0)
		return;
	fop_run(r, r->param[0], &k_tar_out, (const char *[]){ "tar-out", path, NULL }, user, NULL);
}

/* ---- watch: events as server-sent events ---- */

/* A comment every WATCH_KEEPALIVE_S, so that clients and proxies that end silent bodies keep a
 * quiet directory's watch (as a command's attach stream does). */
#define WATCH_KEEPALIVE_S 15

struct watch_ctx {
	struct fop *f;
	struct event *alive;
};

static void watch_alive(evutil_socket_t fd, short what, void *arg)
{
	struct watch_ctx *w = arg;
	struct evbuffer *b = evbuffer_new();

	(void)fd;
	(void)what;
	if (!b)
		return;
	evbuffer_add(b, ":\n\n", 3);
	evhttp_send_reply_chunk(fop_req(w->f), b);
	evbuffer_free(b);
}

static void watch_free(void *ctx)
{
	struct watch_ctx *w = ctx;

	if (w && w->alive)
		event_free(w->alive);
	free(w);
}

static int watch_header(struct fop *f)
{
	struct evkeyvalq *hdrs = evhttp_request_get_output_headers(fop_req(f));
	struct watch_ctx *w = fop_ctx(f);
	struct timeval every = { WATCH_KEEPALIVE_S, 0 };
	struct event_base *base = evhttp_connection_get_base(evhttp_request_get_connection(fop_req(f)));

	evhttp_add_header(hdrs, "Content-Type", "text/event-stream");
	evhttp_add_header(hdrs, "Cache-Control", "no-store");
	evhttp_add_header(hdrs, "X-Accel-Buffering", "no");
	fop_reply_start(f, 200, "OK");
	if (w && base && (w->alive = event_new(base, -1, EV_PERSIST, watch_alive, w))) {
		w->f = f;
		evtimer_add(w->alive, &every);
	}
	return fop_open_doc(f, "event: ready\ndata: ", fop_header(f), "\n\n");
}

static int watch_line(struct fop *f, const char *line, size_t len, struct evbuffer *out)
{
	(void)f;
	evbuffer_add(out, "event: fs\ndata: ", 16);
	if (add_json_line(line, len, out) < 0)
		return -1;
	return evbuffer_add(out, "\n\n", 2);
}

static int watch_end(struct fop *f, struct evbuffer *out)
{
	(void)f;
	return evbuffer_add(out, "event: end\ndata: {}\n\n", 21);
}

static const struct fop_kind k_watch = {
	.kind = SESS_KIND_WATCH, .on_header = watch_header, .on_line = watch_line, .on_end = watch_end,
	.free_ctx = watch_free,
};

void api_files_watch(struct http_req *r)
{
	const char *path, *user;
	bool rec = query_true(http_query(r, "recursive"));

	if (common(r, &path, &user) < 0)
		return;
	fop_run(r, r->param[0], &k_watch, (const char *[]){ "watch", path, rec ? "-r" : NULL, NULL }, user,
		calloc(1, sizeof(struct watch_ctx)));
}

/* ---- tokens ---- */

void api_tokens_create(struct http_req *r)
{
	json_t *body, *scope, *ttl;
	space_err err = { 0 };
	int64_t expires = 0;
	char token[65];
	json_int_t ttl_s = 0;

	if (!id_valid(r->param[0], "sb-")) {
		http_reply_error(r->req, 404, "not_found", "no sandbox '%.64s'", r->param[0]);
		return;
	}
	if (!(body = http_body_json(r)))
		return;
	scope = json_object_get(body, "scope");
	ttl = json_object_get(body, "ttl_s");
	if (!json_is_string(scope) || strcmp(json_string_value(scope), "files") != 0)
		err_set(&err, EINVAL, "scope must be \"files\" (session tokens come with their session)");
	else if (ttl && (!json_is_integer(ttl) || json_integer_value(ttl) < 1))
		err_set(&err, EINVAL, "ttl_s must be a positive integer");
	else if (json_object_size(body) > (size_t)(1 + (ttl != NULL)))
		err_set(&err, EINVAL, "unknown field: only scope and ttl_s are taken");
	ttl_s = ttl ? json_integer_value(ttl) : 0;
	json_decref(body);
	if (err.code || token_issue_files(r->d, r->param[0], ttl_s > 1 << 30 ? 1 << 30 : (int)ttl_s, token, &expires,
					  &err) < 0) {
		http_reply_err(r->req, &err);
		return;
	}
	json_t *exp = data_plane_to_json("", "", expires);

	/* once the token's row is in the store (token_issue queued it) */
	api_reply_stored(r, 201,
			 json_pack("{s:s,s:s,s:s,s:s,s:o}", "token", token, "scope", "files", "sandbox_id", r->param[0],
				   "url", r->d->cfg.data_url, "expires_at", json_incref(json_object_get(exp, "expires_at"))));
	json_decref(exp);
	explicit_bzero(token, sizeof(token));
}

const struct http_route files_stream_routes[FILES_NSTREAM_ROUTES] = { FILES_STREAM_ROUTE_ENTRIES };
