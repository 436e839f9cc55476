/* files.c -- a sandbox's files API for cp and ls (see files.h) */
#include "files.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"

/* Transfers have no overall limit; this long without a byte is a dead one. */
#define IDLE_S 60
#define CALL_TIMEOUT_S 60
#define MAX_LINKS 16

char *files_url(const struct files *f, const char *route, const char *path, const char *extra)
{
	_cleanup_free_ char *sb = ctl_sandbox_path(f->id, route), *p = ctl_escape(path);
	_cleanup_free_ char *u = f->user ? ctl_escape(f->user) : NULL;
	char *url;

	if (!sb || !p || (f->user && !u))
		return NULL;
	if (asprintf(&url, "%s%s?path=%s%s%s%s", f->c->url, sb, p, u ? "&user=" : "", u ? u : "",
		     extra ? extra : "") < 0)
		return NULL;
	return url;
}

static int need_key(const struct files *f, space_err *e)
{
	if (!f->c->api_key || !*f->c->api_key)
		return err_set(e, EACCES,
			       "no API key: set SPACE_API_KEY or SPACE_API_KEY_FILE, or pass --api-key");
	return 0;
}

int files_get_json(const struct files *f, const char *route, const char *path, const char *extra,
		   json_t **out, space_err *e)
{
	_cleanup_free_ char *url = files_url(f, route, path, extra);
	struct http_req rq = {
		.method = "GET",
		.bearer = f->c->api_key,
		.accept = "application/json",
		.timeout_s = 0,
		.idle_s = IDLE_S, /* a deep listing streams for a while */
	};
	struct http_resp rs;
	json_error_t jerr;
	int rc = 0;

	*out = NULL;
	if (need_key(f, e) < 0)
		return -1;
	if (!url)
		return err_set(e, ENOMEM, "out of memory");
	rq.url = url;
	if (http_do(&rq, &rs, e) < 0) {
		rc = -1;
	} else if (rs.status / 100 != 2) {
		rc = http_error_brief(&rs, e);
	} else {
		*out = json_loadb(rs.body ? rs.body : "", rs.len, 0, &jerr);
		if (!*out)
			rc = err_set(e, EBADMSG, "GET %s: invalid JSON in the answer: %s", url,
				     jerr.text);
	}
	http_resp_free(&rs);
	return rc;
}

int files_stat(const struct files *f, const char *path, json_t **entry, space_err *e)
{
	space_err e2 = { 0 };

	if (files_get_json(f, "/files/stat", path, "", entry, &e2) == 0) {
		if (!json_is_object(*entry)) {
			json_decref(*entry);
			*entry = NULL;
			return err_set(e, EBADMSG, "stat %s: the answer is not an entry", path);
		}
		return 0;
	}
	*e = e2;
	if (e2.code == ENOENT) {
		*entry = NULL;
		return 0;
	}
	return -1;
}

/* A 404 from a files route means no such path or no such sandbox: ask
 * which, so that a typo in the id is not reported as a missing directory. */
static int sandbox_exists(const struct files *f, space_err *e)
{
	_cleanup_free_ char *path = ctl_sandbox_path(f->id, ""), *url = NULL;
	struct http_req rq = {
		.method = "GET",
		.bearer = f->c->api_key,
		.accept = "application/json",
		.timeout_s = CALL_TIMEOUT_S,
	};
	struct http_resp rs;
	int rc = 0;

	if (!path || asprintf(&url, "%s%s", f->c->url, path) < 0)
		return err_set(e, ENOMEM, "out of memory");
	rq.url = url;
	if (http_do(&rq, &rs, e) < 0)
		rc = -1;
	else if (rs.status / 100 != 2)
		rc = http_error_brief(&rs, e);
	http_resp_free(&rs);
	return rc;
}

int files_kind(const struct files *f, const char *path, enum cp_kind *kind, space_err *e)
{
	_cleanup_free_ char *cur = strdup(path);
	int hop;

	if (!cur)
		return err_set(e, ENOMEM, "out of memory");
	for (hop = 0; hop <= MAX_LINKS; hop++) {
		json_t *en;
		const char *target;
		char *next;

		if (files_stat(f, cur, &en, e) < 0)
			return -1;
		if (!en) {
			/* Nothing there; behind a link, the link is replaced. */
			if (hop == 0 && sandbox_exists(f, e) < 0)
				return -1;
			*kind = hop ? CP_FILE : CP_MISSING;
			return 0;
		}
		*kind = cp_kind_of_type(ctl_jstr(en, "type", NULL));
		if (*kind != CP_SYMLINK) {
			json_decref(en);
			return 0;
		}
		target = ctl_jstr(en, "symlink_target", NULL);
		if (!target || !*target) {
			json_decref(en);
			*kind = CP_FILE;
			return 0;
		}
		if (target[0] == '/') {
			next = strdup(target);
		} else {
			_cleanup_free_ char *dir = cp_dir(cur);

			next = dir ? cp_join(dir, target) : NULL;
		}
		json_decref(en);
		if (!next)
			return err_set(e, ENOMEM, "out of memory");
		free(cur);
		cur = next;
	}
	return err_set(e, ELOOP, "%s: too many levels of symbolic links", path);
}

int files_get(const struct files *f, const char *route, const char *path, const char *extra,
	      http_sink_fn sink, void *arg, space_err *e)
{
	_cleanup_free_ char *url = files_url(f, route, path, extra);
	struct http_req rq = {
		.method = "GET",
		.bearer = f->c->api_key,
		.timeout_s = 0,
		.idle_s = IDLE_S,
		.sink = sink,
		.sink_arg = arg,
	};
	struct http_resp rs;
	int rc = 0;

	if (need_key(f, e) < 0)
		return -1;
	if (!url)
		return err_set(e, ENOMEM, "out of memory");
	rq.url = url;
	if (http_do(&rq, &rs, e) < 0)
		rc = -1;
	else if (rs.sink_stopped)
		rc = err_set(e, ECANCELED, "GET %s: stopped", url);
	else if (rs.status / 100 != 2)
		rc = http_error_brief(&rs, e);
	http_resp_free(&rs);
	return rc;
}

int files_put(const struct files *f, const char *route, const char *path, const char *extra,
	      http_source_fn source, void *arg, long long size, json_t **out, space_err *e)
{
	_cleanup_free_ char *url = files_url(f, route, path, extra);
	struct http_req rq = {
		.method = "PUT",
		.bearer = f->c->api_key,
		.accept = "application/json",
		.content_type = "application/octet-stream",
		.timeout_s = 0,
		.idle_s = IDLE_S,
		.source = source,
		.source_arg = arg,
		.upload_size = size,
	};
	struct http_resp rs;
	int rc = 0;

	if (out)
		*out = NULL;
	if (need_key(f, e) < 0)
		return -1;
	if (!url)
		return err_set(e, ENOMEM, "out of memory");
	if (strstr(route, "/tar"))
		rq.content_type = "application/x-tar";
	rq.url = url;
	if (http_do(&rq, &rs, e) < 0) {
		rc = -1;
	} else if (rs.status / 100 != 2) {
		rc = http_error_brief(&rs, e);
	} else if (out && rs.len) {
		*out = json_loadb(rs.body, rs.len, 0, NULL);
	}
	http_resp_free(&rs);
	return rc;
}

int files_entry_mtime(const json_t *entry, long long *sec, long *nsec)
{
	json_t *m = json_object_get(entry, "mtime");
	double d, whole;

	if (json_is_integer(m)) {
		*sec = json_integer_value(m);
		*nsec = 0;
		return 0;
	}
	if (!json_is_real(m))
		return -1;
	d = json_real_value(m);
	if (!(d > -9e15 && d < 9e15))
		return -1;
	whole = (double)(long long)d; /* floor without libm */
	if (whole > d)
		whole -= 1;
	*sec = (long long)whole;
	*nsec = (long)((d - whole) * 1e9);
	if (*nsec > 999999999)
		*nsec = 999999999;
	if (*nsec < 0)
		*nsec = 0;
	return 0;
}
