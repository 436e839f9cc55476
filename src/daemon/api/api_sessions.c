/* api_sessions.c -- /v1/sandboxes/{id}/sessions: create, list, get, and fresh data-plane tokens */
#include <string.h>

#include "api.h"
#include "api/req.h"
#include "render.h"
#include "sandbox/sandbox.h"
#include "store/store.h"


/* A session as the API shows it: the live object's record when the session
 * is loaded (fresher than the store), else the stored one. */
static json_t *session_json(struct spaced *d, const struct session_rec *stored)
{
	struct session *s = session_find(d, stored->id);

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

struct list_ctx {
	struct spaced *d;
	json_t *arr;
	bool oom;
};

static int add_session(const struct session_rec *s, void *arg)
{
	struct list_ctx *c = arg;
	json_t *j = session_json(c->d, s);

	if (!j || json_array_append_new(c->arr, j) < 0)
		c->oom = true;
	return 0;
}

void api_sessions_list(struct http_req *r)
{
	struct sandbox_rec sb = { 0 };
	struct list_ctx c = { .d = r->d };
	space_err err = { 0 };

	if (api_sandbox_param(r, 0, &sb) < 0)
		return;
	c.arr = json_array();
	if (!c.arr) {
		http_reply_error(r->req, 500, "internal", "out of memory");
	} else if (store_session_each(r->d->store, sb.id, add_session, &c, &err) < 0) {
		http_reply_err(r->req, &err);
	} else if (c.oom) {
		http_reply_error(r->req, 500, "internal", "out of memory listing sessions");
	} else {
		http_reply_json(r->req, 200, json_pack("{s:O}", "sessions", c.arr));
	}
	json_decref(c.arr);
	sandbox_rec_clear(&sb);
}

void api_sessions_get(struct http_req *r)
{
	const char *sb_id = r->param[0], *ss_id = r->param[1];
	struct session_rec rec = { 0 };
	space_err err = { 0 };

	if (!id_valid(sb_id, "sb-") || !id_valid(ss_id, "ss-")) {
		http_reply_error(r->req, 404, "not_found", "no session '%s' in sandbox '%s'", ss_id, sb_id);
		return;
	}
	if (store_session_get(r->d->store, ss_id, &rec, &err) < 0) {
		if (err.code == ENOENT)
			http_reply_error(r->req, 404, "not_found", "no session '%s' in sandbox '%s'", ss_id, sb_id);
		else
			http_reply_err(r->req, &err);
		return;
	}
	if (strcmp(rec.sandbox_id, sb_id) != 0)
		http_reply_error(r->req, 404, "not_found", "no session '%s' in sandbox '%s'", ss_id, sb_id);
	else
		http_reply_json(r->req, 200, session_json(r->d, &rec));
	session_rec_clear(&rec);
}

void api_sessions_token(struct http_req *r)
{
	const char *sb_id = r->param[0], *ss_id = r->param[1];
	space_err err = { 0 };
	int64_t expires_ms = 0;
	int ttl = 0;
	char token[65];
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
	if (session_new_token(r->d, sb_id, ss_id, ttl, token, &expires_ms, &err) < 0)
		http_reply_err(r->req, &err);
	else
		api_reply_stored(r, 201,
				json_pack("{s:o}", "data_plane",
					  data_plane_to_json(r->d->cfg.data_url, token, expires_ms)));
	explicit_bzero(token, sizeof(token));
}
