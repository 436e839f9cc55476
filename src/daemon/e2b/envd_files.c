/* envd_files.c -- envd's plain HTTP routes: GET /health, GET /files (the raw bytes, streamed by
 * the file engine's read), POST /files (multipart/form-data, streamed through multipart.c into
 * the engine's atomic write, one operation per file part, in order). Errors in envd's shape
 * {"code": <status>, "message": "..."}. */
#include <event2/buffer.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "front/fop.h"
#include "daemon.h"
#include "e2b.h"
#include "envd_fs.h"
#include "http/body.h"
#include "multipart.h"
#include "sandbox/sandbox.h"

/* Body bytes kept unparsed at most (the parser needs MP_HEADER_MAX + a delimiter at once). */
#define UPLOAD_RAW_MAX (256u << 10)

void envd_health(struct http_req *r)
{
	const char *id = e2b_sandbox_id(r);
	struct sandbox *sb = id_valid(id, "sb-") ? sandbox_find(r->d, id) : NULL;
	const struct sandbox_rec *rec = sb ? sandbox_record(sb) : NULL;

	if (!rec || !sandbox_visible(rec) || rec->state != SB_RUNNING) {
		e2b_reply_error(r->req, 502, "sandbox not found or not running");
		return;
	}
	http_reply_empty(r->req, 204);
}

static void plain_error(struct fop *f, int e, int status, const char *code, const char *msg)
{
	(void)e;
	(void)code;
	e2b_reply_error(fop_req(f), status, "%s", msg);
}

/* ---- GET /files ---- */

static int read_header(struct fop *f)
{
	struct evkeyvalq *hdrs = evhttp_request_get_output_headers(fop_req(f));
	json_t *h = fop_header(f);
	json_int_t size = json_integer_value(json_object_get(h, "size"));
	json_int_t off = json_integer_value(json_object_get(h, "offset"));
	json_int_t len = json_integer_value(json_object_get(h, "length"));

	/* The whole file was asked for: the guest's header must say so, and the engine holds
	 * the body to exactly that length (fop_reply_start_sized). */
	if (size < 0 || off != 0 || len != size)
		return -1;
	evhttp_add_header(hdrs, "Content-Type", "application/octet-stream");
	fop_reply_start_sized(f, 200, "OK", (uint64_t)len);
	return 0;
}

static int read_raw(struct fop *f, const uint8_t *p, size_t n, struct evbuffer *out)
{
	(void)f;
	return evbuffer_add(out, p, n);
}

static const struct fop_kind k_read = {
	.kind = SESS_KIND_FILE, .on_header = read_header, .on_raw = read_raw, .on_error = plain_error,
};

/* The user and the path of a /files request; -1 having answered. */
static int files_target(struct http_req *r, char user[ENVD_USER_MAX], const char *p, char *path)
{
	space_err err = { 0 };

	if (envd_user(r, true, user, &err) < 0 || envd_abs_path(r, user, p, path, &err) < 0) {
		e2b_reply_error(r->req, 400, "%s", err.msg);
		return -1;
	}
	return 0;
}

void envd_files_get(struct http_req *r)
{
	char user[ENVD_USER_MAX], path[ENVD_PATH_MAX + 1];
	const char *q = http_query(r, "path");

	if (!q || !*q) {
		e2b_reply_error(r->req, 400, "path is required");
		return;
	}
	if (files_target(r, user, q, path) < 0)
		return;
	fop_run(r, e2b_sandbox_id(r), &k_read, (const char *[]){ "read", path, NULL }, user[0] ? user : NULL, NULL);
}

/* ---- POST /files ----
 * The upload's state outlives each part's operation: refs counts its owners (the route while it
 * holds the request between parts, and each operation whose ctx it is). */

struct upload {
	struct http_hold hold; /* first: upload_gone gets &hold */
	struct spaced *d;
	struct evhttp_request *req;
	struct http_body *b;
	struct evbuffer *raw; /* body bytes not yet parsed */
	struct mp mp;
	struct fop *cur;      /* the operation writing the current part, once it pulled */
	json_t *results;
	int refs;
	bool skipping;        /* a part that is not a file: dropped */
	char sb[ID_LEN];
	char user[ENVD_USER_MAX];
	char qpath[ENVD_PATH_MAX + 1]; /* ?path= resolved, "" when absent */
	char path[ENVD_PATH_MAX + 1];  /* the part being written */
};

static void upload_unref(struct upload *u)
{
	if (--u->refs > 0)
		return;
	if (u->raw)
		evbuffer_free(u->raw);
	json_decref(u->results);
	free(u);
}

static void upload_free_ctx(void *ctx)
{
	struct upload *u = ctx;

	u->cur = NULL;
	upload_unref(u);
}

/* Moves what the body has into raw (bounded); -1 when the body failed. */
static int upload_fill(struct upload *u)
{
	size_t have = evbuffer_get_length(u->raw);

	if (!u->b)
		return 0;
	if (http_body_failed(u->b))
		return -1;
	if (have < UPLOAD_RAW_MAX)
		http_body_read(u->b, u->raw, UPLOAD_RAW_MAX - have);
	return 0;
}

/* The next parser event over raw; *p and *n: the data of MP_DATA, *used what the event consumed. */
static enum mp_event upload_next(struct upload *u, const uint8_t **p, size_t *n, size_t *used)
{
	size_t len = evbuffer_get_length(u->raw);
	bool eof = !u->b || (http_body_done(u->b) && !http_body_buffered(u->b));
	const uint8_t *buf = len ? evbuffer_pullup(u->raw, -1) : (const uint8_t *)"";

	return mp_next(&u->mp, buf, len, eof, used, p, n);
}

static void upload_step(struct upload *u);
static void upload_gone(struct http_hold *h);

static int upload_pull(struct fop *f, struct evbuffer *in, size_t room)
{
	struct upload *u = fop_ctx(f);

	u->cur = f;
	for (;;) {
		const uint8_t *p;
		size_t n, used;
		enum mp_event ev;

		if (upload_fill(u) < 0)
			return -1;
		ev = upload_next(u, &p, &n, &used);
		switch (ev) {
		case MP_DATA:
			if (n > room)
				n = room;
			evbuffer_add(in, p, n);
			evbuffer_drain(u->raw, n);
			room -= n;
			if (!room)
				return 0;
			continue;
		case MP_PART_END:
			evbuffer_drain(u->raw, used);
			return 1;
		case MP_NEED_MORE:
			evbuffer_drain(u->raw, used);
			if (u->b && http_body_buffered(u->b) && evbuffer_get_length(u->raw) < UPLOAD_RAW_MAX)
				continue;
			return 0;
		default:
			return -1;
		}
	}
}

static void upload_done(struct fop *f, struct evbuffer *out)
{
	struct upload *u = fop_ctx(f);
	const char *base = strrchr(u->path, '/');

	(void)out;
	json_array_append_new(u->results, json_pack("{s:s,s:s,s:s}", "name", base ? base + 1 : u->path, "type", "file",
						     "path", u->path));
	u->cur = NULL;
	u->refs++; /* the route holds the request again */
	http_hold_begin(&u->hold, u->req, upload_gone, u->d->conns);
	upload_step(u);
}

static const struct fop_kind k_upload = {
	.kind = SESS_KIND_FILE, .with_stdin = true, .on_end = NULL, .pull_stdin = upload_pull,
	.on_error = plain_error, .on_done = upload_done, .free_ctx = upload_free_ctx,
};

static void upload_answer_error(struct upload *u, int status, const char *msg)
{
	http_hold_end(&u->hold);
	e2b_reply_error(u->req, status, "%s", msg);
	upload_unref(u);
}

/* Starts writing the part just begun; the route's hold and reference go to the operation. */
static void upload_start_part(struct upload *u)
{
	struct http_req rr;
	space_err err = { 0 };
	const char *p = u->qpath[0] ? u->qpath : u->mp.filename;

	memset(&rr, 0, sizeof(rr));
	rr.d = u->d;
	rr.req = u->req;
	if (!u->qpath[0] && (!u->mp.has_filename || !u->mp.filename[0])) {
		upload_answer_error(u, 400, "a file part needs a filename (its path) when ?path= is absent");
		return;
	}
	/* envd_abs_path reads the E2b-Sandbox-Id header from req */
	if (u->qpath[0])
		snprintf(u->path, sizeof(u->path), "%s", u->qpath);
	else if (envd_abs_path(&rr, u->user, p, u->path, &err) < 0) {
		upload_answer_error(u, 400, err.msg);
		return;
	}
	http_hold_end(&u->hold);
	u->refs++; /* the operation's */
	fop_run(&rr, u->sb, &k_upload, (const char *[]){ "write", u->path, "-", "-p", NULL }, u->user[0] ? u->user : NULL,
		u);
	upload_unref(u); /* the route's */
}

/* The route holds the request: parse up to the next file part (and start its write), or the
 * end (and answer). */
static void upload_step(struct upload *u)
{
	for (;;) {
		const uint8_t *p;
		size_t n, used;
		enum mp_event ev;

		if (upload_fill(u) < 0) {
			upload_answer_error(u, 400, "the request body was malformed or cut short");
			return;
		}
		ev = upload_next(u, &p, &n, &used);
		switch (ev) {
		case MP_PART:
			evbuffer_drain(u->raw, used);
			u->skipping = strcmp(u->mp.name, "file") != 0;
			if (!u->skipping) {
				upload_start_part(u);
				return;
			}
			continue;
		case MP_DATA:
		case MP_PART_END:
			evbuffer_drain(u->raw, used);
			continue;
		case MP_DONE:
			if (!json_array_size(u->results)) {
				upload_answer_error(u, 400, "no file part in the multipart body");
				return;
			}
			http_hold_end(&u->hold);
			http_reply_json(u->req, 200, json_incref(u->results));
			upload_unref(u);
			return;
		case MP_NEED_MORE:
			evbuffer_drain(u->raw, used);
			if (u->b && http_body_buffered(u->b) && evbuffer_get_length(u->raw) < UPLOAD_RAW_MAX)
				continue;
			return; /* upload_body_more calls again */
		default: {
			char msg[160];

			snprintf(msg, sizeof(msg), "malformed multipart body: %s", u->mp.error ? u->mp.error : "?");
			upload_answer_error(u, 400, msg);
			return;
		}
		}
	}
}

static void upload_gone(struct http_hold *h)
{
	/* the client left while no operation ran: the body must not be touched again */
	struct upload *u = (struct upload *)h;

	u->b = NULL;
	upload_unref(u);
}

static void upload_body_more(struct http_body *b, void *arg)
{
	struct upload *u = arg;

	(void)b;
	if (u->cur)
		fop_poke(u->cur);
	else if (u->hold.active)
		upload_step(u);
}

void envd_files_post(struct http_req *r)
{
	const char *ct = evhttp_find_header(evhttp_request_get_input_headers(r->req), "Content-Type");
	const char *q = http_query(r, "path");
	char boundary[MP_BOUNDARY_MAX + 1];
	struct upload *u;

	if (mp_boundary(ct, boundary) < 0) {
		e2b_reply_error(r->req, 400, "the body must be multipart/form-data with a boundary");
		return;
	}
	u = calloc(1, sizeof(*u));
	if (!u || !(u->raw = evbuffer_new()) || !(u->results = json_array()) || mp_init(&u->mp, boundary) < 0) {
		if (u) {
			u->refs = 1;
			upload_unref(u);
		}
		e2b_reply_error(r->req, 500, "out of memory");
		return;
	}
	u->refs = 1;
	u->d = r->d;
	u->req = r->req;
	snprintf(u->sb, sizeof(u->sb), "%s", e2b_sandbox_id(r));
	if (files_target(r, u->user, q && *q ? q : "/", u->qpath) < 0) {
		upload_unref(u);
		return;
	}
	if (!q || !*q)
		u->qpath[0] = '\0';
	u->b = http_body_get(r);
	if (!u->b)
		evbuffer_add_buffer(u->raw, evhttp_request_get_input_buffer(r->req));
	http_hold_begin(&u->hold, r->req, upload_gone, r->d->conns);
	if (u->b)
		http_body_notify(u->b, upload_body_more, u);
	upload_step(u);
}
