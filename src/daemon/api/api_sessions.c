/* api_sessions.c -- /v1/sandboxes/{id}/sessions: create, list, get, and fresh data-plane tokens */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "front/req.h"
#include "front/render.h"
#include "sandbox/sandbox.h"
#include "store/store.h"


/* A session as the API shows it: the live object's record when the session
 * is loaded (fresher than the store), else the stored one. */
static json_t *session_json(struct spaced *d, const struct session_rec *stored)
{
	struct session *s = session_find_stored(d, stored);

	if (s)
		return session_to_json(session_rec(s), session_output_length(s), session_output_start(s));
	return session_to_json(stored, 0, 0);
}

void api_sessions_create(struct http_req *r)
{
	const char *sb_id = r->param[0];
	struct session_rec rec = { 0 };
	struct exec_req req;
	space_err err = { 0 };
	char token[65];
	json_t *body;
	int rc;

	if (!id_valid(sb_id, "sb-")) {
		http_reply_error(r->req, 404, "not_found", "no sandbox '%s'", sb_id);
		return;
	}
	body = http_body_json(r);
	if (!body)
		return;
	rc = req_exec(body, &req, &err);
	if (rc == 0) {
		rc = session_create(r->d, sb_id, &req, &rec, token, &err);
		exec_req_free(&req);
	}
	if (rc < 0) {
		http_reply_err(r->req, &err);
	} else {
		api_reply_stored(r, 201,
				json_pack("{s:o,s:o}", "session", session_to_json(&rec, 0, 0), "data_plane",
					  data_plane_to_json(r->d->cfg.data_url, token, rec.token_expires_ms)));
	}
	explicit_bzero(token, sizeof(token));
	json_decref(body);
	session_rec_clear(&rec);
}

/* Lists and gets read the sandbox (unless this process runs it) and the session rows on the
 * store's thread; each is rendered on the loop from its live object when there is one. */
struct ss_read {
	char sb_id[ID_LEN], ss_id[ID_LEN]; /* ss_id "": the sandbox's list */
	bool sb_known;                     /* this process runs the sandbox */
	struct session_rec *v;
	size_t n, cap;
};

static int keep_session(const struct session_rec *s, void *arg)
{
	struct ss_read *q = arg;
	struct session_rec *k;

	if (q->n == q->cap) {
		size_t cap = q->cap ? q->cap * 2 : 16;
		struct session_rec *v = realloc(q->v, cap * sizeof(*v));

		if (!v)
			return -1;
		q->v = v;
		q->cap = cap;
	}
	k = &q->v[q->n++];
	*k = *s;
	k->argv = json_incref(s->argv);
	k->env = json_incref(s->env);
	return 0;
}

static int sessions_read(struct store *conn, void *arg, space_err *err)
{
	struct ss_read *q = arg;
	struct session_rec rec = { 0 };
	struct sandbox_rec sb = { 0 };
	int rc;

	if (q->ss_id[0]) {
		if (store_session_get(conn, q->ss_id, &rec, err) < 0 || strcmp(rec.sandbox_id, q->sb_id) != 0) {
			if (!err->code || err->code == ENOENT)
				err_set(err, ENOENT, "no session '%s' in sandbox '%s'", q->ss_id, q->sb_id);
			session_rec_clear(&rec);
			return -1;
		}
		rc = keep_session(&rec, q);
		session_rec_clear(&rec);
		return rc < 0 ? err_set(err, ENOMEM, "out of memory") : 0;
	}
	if (!q->sb_known) {
		if (store_sandbox_get(conn, q->sb_id, &sb, err) < 0 || !sandbox_visible(&sb)) {
			if (!err->code || err->code == ENOENT)
				err_set(err, ENOENT, "no sandbox '%.64s'", q->sb_id);
			sandbox_rec_clear(&sb);
			return -1;
		}
		sandbox_rec_clear(&sb);
	}
	if (store_session_each(conn, q->sb_id, keep_session, q, err) < 0)
		return err->code ? -1 : err_set(err, ENOMEM, "out of memory listing sessions");
	return 0;
}

static void sessions_reply(struct spaced *d, struct evhttp_request *req, void *arg, int rc, const space_err *err)
{
	struct ss_read *q = arg;
	json_t *arr;

	if (rc < 0) {
		http_reply_err(req, err);
		return;
	}
	if (q->ss_id[0]) {
		http_reply_json(req, 200, session_json(d, &q->v[0]));
		return;
	}
	if (!(arr = json_array())) {
		http_reply_error(req, 500, "internal", "out of memory");
		return;
	}
	for (size_t i = 0; i < q->n; i++) {
		json_t *j = session_json(d, &q->v[i]);

		if (!j || json_array_append_new(arr, j) < 0) {
			json_decref(arr);
			http_reply_error(req, 500, "internal", "out of memory listing sessions");
			return;
		}
	}
	http_reply_json(req, 200, json_pack("{s:o}", "sessions", arr));
}

static void sessions_free(void *arg)
{
	struct ss_read *q = arg;

	for (size_t i = 0; i < q->n; i++)
		session_rec_clear(&q->v[i]);
	free(q->v);
	free(q);
}

static void sessions_read_begin(struct http_req *r, const char *sb_id, const char *ss_id)
{
	struct ss_read *q = calloc(1, sizeof(*q));

	if (!q) {
		http_reply_error(r->req, 500, "internal", "out of memory");
		return;
	}
	snprintf(q->sb_id, sizeof(q->sb_id), "%s", sb_id);
	snprintf(q->ss_id, sizeof(q->ss_id), "%s", ss_id);
	q->sb_known = sandbox_find(r->d, sb_id) != NULL;
	api_read(r, sessions_read, sessions_reply, sessions_free, q);
}

void api_sessions_list(struct http_req *r)
{
	const char *sb_id = r->param[0];
	struct sandbox *sb;

	sb = id_valid(sb_id, "sb-") ? sandbox_find(r->d, sb_id) : NULL;
	if (!id_valid(sb_id, "sb-") || (sb && !sandbox_visible(sandbox_record(sb)))) {
		http_reply_error(r->req, 404, "not_found", "no sandbox '%.64s'", sb_id);
		return;
	}
	sessions_read_begin(r, sb_id, "");
}

void api_sessions_get(struct http_req *r)
{
	const char *sb_id = r->param[0], *ss_id = r->param[1];

	if (!id_valid(sb_id, "sb-") || !id_valid(ss_id, "ss-")) {
		http_reply_error(r->req, 404, "not_found", "no session '%s' in sandbox '%s'", ss_id, sb_id);
		return;
	}
	sessions_read_begin(r, sb_id, ss_id);
}

/* A token for a session let go of: its record is read on the store's thread first. */
struct tok_job {
	char sb_id[ID_LEN], ss_id[ID_LEN];
	int ttl;
	struct session_rec rec;
};

static void tok_reply_to(struct spaced *d, struct evhttp_request *req, const struct tok_job *j,
			 const struct session_rec *stored)
{
	space_err err = { 0 };
	int64_t expires_ms = 0;
	char token[65];

	if (session_new_token(d, j->sb_id, j->ss_id, stored, j->ttl, token, &expires_ms, &err) < 0)
		http_reply_err(req, &err);
	else
		api_reply_stored_to(d, req, 201,
				    json_pack("{s:o}", "data_plane", data_plane_to_json(d->cfg.data_url, token, expires_ms)));
	explicit_bzero(token, sizeof(token));
}

static int tok_read(struct store *conn, void *arg, space_err *err)
{
	struct tok_job *j = arg;

	if (store_session_get(conn, j->ss_id, &j->rec, err) < 0) {
		if (err->code == ENOENT)
			err_set(err, ENOENT, "session %s not found in sandbox %s", j->ss_id, j->sb_id);
		return -1;
	}
	return 0;
}

static void tok_reply(struct spaced *d, struct evhttp_request *req, void *arg, int rc, const space_err *err)
{
	struct tok_job *j = arg;

	if (rc < 0)
		http_reply_err(req, err);
	else
		tok_reply_to(d, req, j, &j->rec);
}

static void tok_release(void *arg)
{
	struct tok_job *j = arg;

	session_rec_clear(&j->rec);
	free(j);
}

void api_sessions_token(struct http_req *r)
{
	const char *sb_id = r->param[0], *ss_id = r->param[1];
	space_err err = { 0 };
	struct tok_job *j;
	int ttl = 0;
	json_t *body;

	if (!id_valid(sb_id, "sb-") || !id_valid(ss_id, "ss-")) {
		http_reply_error(r->req, 404, "not_found", "no session '%s' in sandbox '%s'", ss_id, sb_id);
		return;
	}
	body = http_body_json(r);
	if (!body)
		return;
	if (req_token(body, &ttl, &err) < 0) {
		http_reply_err(r->req, &err);
		json_decref(body);
		return;
	}
	json_decref(body);
	if (!(j = calloc(1, sizeof(*j)))) {
		http_reply_error(r->req, 500, "internal", "out of memory");
		return;
	}
	snprintf(j->sb_id, sizeof(j->sb_id), "%s", sb_id);
	snprintf(j->ss_id, sizeof(j->ss_id), "%s", ss_id);
	j->ttl = ttl;
	/* In memory, or its sandbox is not held here (refused now, from the record read before). */
	if (session_loaded(r->d, ss_id) || !sandbox_find(r->d, sb_id)) {
		tok_reply_to(r->d, r->req, j, NULL);
		tok_release(j);
		return;
	}
	api_read(r, tok_read, tok_reply, tok_release, j);
}
