/* webhook.c -- the daemon's webhooks: creating (after the URL is checked), changing,
 * deleting, listing, and keeping them in the store (webhook.h) */
#include <event2/dns.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "log.h"
#include "store/store.h"
#include "webhook_int.h"

static struct webhooks *hooks(struct spaced *d)
{
	return d->webhooks;
}

const char *webhook_secret(const struct webhook *w)
{
	return w->secret;
}

const char *webhook_id(const struct webhook *w)
{
	return w->id;
}

void webhook_view(const struct webhook *w, struct webhook_view *out)
{
	*out = (struct webhook_view){ .id = w->id, .url = w->url, .name = w->name, .format = w->fmt->name,
				      .mask = w->mask, .enabled = w->enabled, .created_ms = w->created_ms,
				      .cursor = w->cursor, .pending_attempts = w->have_cur ? w->attempts : 0,
				      .last_error = w->last_error };
}

/* ---- the stored record ---- */

static json_t *mask_json(unsigned mask)
{
	json_t *a = json_array();

	for (int t = 0; a && t < EVT__COUNT; t++)
		if (mask & (1u << t))
			json_array_append_new(a, json_string(ev_type_name(t)));
	return a;
}

static char *record(const struct webhook *w)
{
	json_t *j = json_pack("{s:s,s:s,s:s,s:o,s:s,s:b,s:I}", "url", w->url, "name", w->name, "format",
			      w->fmt->name, "events", mask_json(w->mask), "secret", w->secret, "enabled",
			      w->enabled, "created_ms", (json_int_t)w->created_ms);
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

	json_decref(j);
	return s;
}

enum job_kind { JOB_PUT, JOB_CURSOR, JOB_DELETE, JOB_LOG };

struct job {
	enum job_kind kind;
	char id[ID_LEN];
	int64_t cursor, time_ms;
	char *body;
};

static void job_run(struct store *conn, void *arg)
{
	struct job *j = arg;
	space_err err = { 0 };
	int rc = 0;

	switch (j->kind) {
	case JOB_PUT: rc = store_webhook_put(conn, j->id, j->cursor, j->body, &err); break;
	case JOB_CURSOR: rc = store_webhook_cursor(conn, j->id, j->cursor, &err); break;
	case JOB_DELETE: rc = store_webhook_delete(conn, j->id, &err); break;
	case JOB_LOG: rc = store_delivery_put(conn, j->id, j->time_ms, j->body, &err); break;
	}
	if (rc < 0 && !(j->kind == JOB_DELETE && err.code == ENOENT))
		log_error("webhook %s: %s", j->id, err.msg);
}

static void job_done(void *arg, bool ran)
{
	struct job *j = arg;

	(void)ran;
	free(j->body);
	free(j);
}

static void queue(struct spaced *d, enum job_kind kind, const char *id, int64_t cursor, char *body)
{
	struct job *j = calloc(1, sizeof(*j));
	space_err err = { 0 };

	if (!j) {
		free(body);
		log_error("webhook %s: not stored: out of memory", id);
		return;
	}
	*j = (struct job){ .kind = kind, .cursor = cursor, .time_ms = now_ms(), .body = body };
	snprintf(j->id, sizeof(j->id), "%s", id);
	if (store_async(d->store, job_run, job_done, j, &err) < 0) {
		log_error("webhook %s: not stored: %s", id, err.msg);
		job_done(j, false);
	}
}

void wh_save(struct webhook *w)
{
	char *body = record(w);

	if (!body) {
		log_error("webhook %s: not stored: out of memory", w->id);
		return;
	}
	w->saved_cursor = w->cursor;
	queue(w->d, JOB_PUT, w->id, w->cursor, body);
}

void wh_save_cursor(struct webhook *w)
{
	if (w->cursor == w->saved_cursor)
		return;
	w->saved_cursor = w->cursor;
	queue(w->d, JOB_CURSOR, w->id, w->cursor, NULL);
}

void wh_log(struct webhook *w, json_t *attempt)
{
	char *body = attempt ? json_dumps(attempt, JSON_COMPACT) : NULL;

	json_decref(attempt);
	if (body)
		queue(w->d, JOB_LOG, w->id, 0, body);
}

/* ---- the registry ---- */

static struct webhook *webhook_new(struct spaced *d)
{
	struct webhook *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	w->d = d;
	w->fmt = &space_webhook_format;
	w->enabled = true;
	return w;
}

static void webhook_free(struct webhook *w)
{
	wh_stop(w);
	explicit_bzero(w->secret, sizeof(w->secret));
	free(w);
}

static void link_last(struct webhooks *hs, struct webhook *w)
{
	struct webhook **pp = &hs->list;

	while (*pp)
		pp = &(*pp)->next;
	*pp = w;
	hs->n++;
}

static int load_one(const char *id, int64_t cursor, const char *body, void *arg)
{
	struct spaced *d = arg;
	json_t *j = json_loads(body, 0, NULL);
	struct webhook *w = webhook_new(d);
	space_err err = { 0 };
	const char *url = json_string_value(json_object_get(j, "url"));
	const char *fmt = json_string_value(json_object_get(j, "format"));

	if (!w || !j || !url || wh_url_parse(url, &w->u, &err) < 0 ||
	    ev_types_json(json_object_get(j, "events"), &w->mask, &err) < 0 ||
	    !(w->fmt = webhook_format_find(fmt ? fmt : "space"))) {
		log_warn("webhook %s: its stored record is not one (%s): skipped", id, err.msg[0] ? err.msg : "bad JSON");
		json_decref(j);
		free(w);
		return 0;
	}
	snprintf(w->id, sizeof(w->id), "%s", id);
	snprintf(w->url, sizeof(w->url), "%s", url);
	snprintf(w->name, sizeof(w->name), "%s", json_string_value(json_object_get(j, "name")) ?: "");
	snprintf(w->secret, sizeof(w->secret), "%s", json_string_value(json_object_get(j, "secret")) ?: "");
	w->enabled = !json_is_false(json_object_get(j, "enabled"));
	w->created_ms = json_integer_value(json_object_get(j, "created_ms"));
	w->cursor = w->saved_cursor = cursor;
	json_decref(j);
	link_last(hooks(d), w);
	return 0;
}

int webhooks_init(struct spaced *d, space_err *err)
{
	struct webhooks *hs = calloc(1, sizeof(*hs));

	if (!hs)
		return err_set(err, ENOMEM, "out of memory");
	d->webhooks = hs;
	if (store_webhooks_each(d->store, load_one, d, err) < 0)
		return err_wrap(err, "webhooks");
	/* What was not delivered before the restart goes now. */
	webhooks_kick(d);
	return 0;
}

void webhooks_free(struct spaced *d)
{
	struct webhooks *hs = hooks(d);

	if (!hs)
		return;
	for (struct webhook *w = hs->list, *next; w; w = next) {
		next = w->next;
		wh_save_cursor(w); /* (the store takes it before it closes) */
		webhook_free(w);
	}
	wh_deliver_free(hs);
	free(hs);
	d->webhooks = NULL;
}

void webhooks_kick(struct spaced *d)
{
	struct webhooks *hs = hooks(d);

	for (struct webhook *w = hs ? hs->list : NULL; w; w = w->next)
		wh_pump(w);
}

void webhooks_tick(struct spaced *d)
{
	struct webhooks *hs = hooks(d);

	for (struct webhook *w = hs ? hs->list : NULL; w; w = w->next)
		wh_save_cursor(w);
	webhooks_kick(d);
}

struct webhook *webhook_find(struct spaced *d, const char *id)
{
	struct webhooks *hs = hooks(d);

	for (struct webhook *w = hs ? hs->list : NULL; w; w = w->next)
		if (strcmp(w->id, id) == 0)
			return w;
	return NULL;
}

void webhooks_each(struct spaced *d, int (*fn)(const struct webhook *w, void *arg), void *arg)
{
	struct webhooks *hs = hooks(d);

	for (struct webhook *w = hs ? hs->list : NULL; w; w = w->next)
		if (fn(w, arg))
			return;
}

static int check_req(const struct webhook_req *req, struct wh_url *u, const struct webhook_format **fmt,
		     space_err *err)
{
	if (req->url && wh_url_parse(req->url, u, err) < 0)
		return -1;
	if (req->secret && (strlen(req->secret) < 16 || strlen(req->secret) >= WH_SECRET_MAX))
		return err_set(err, EINVAL, "secret: 16 to %d characters (what deliveries are signed with)",
			       WH_SECRET_MAX - 1);
	if (req->name && strlen(req->name) >= WH_NAME_MAX)
		return err_set(err, EINVAL, "name: at most %d characters", WH_NAME_MAX - 1);
	if (!(*fmt = webhook_format_find(req->format ? req->format : "space")))
		return err_set(err, EINVAL, "format: unknown");
	if (req->mask == 0)
		return err_set(err, EINVAL, "events: at least one event type");
	return 0;
}

struct create {
	struct spaced *d;
	struct webhook *w;
	webhook_created_fn done;
	void *arg;
};

static void create_resolved(void *arg, const struct sockaddr *sa, const space_err *rerr)
{
	struct create *c = arg;
	struct webhook *w = c->w;
	struct webhooks *hs = hooks(c->d);

	(void)sa;
	if (rerr) {
		c->done(c->arg, NULL, rerr);
		webhook_free(w);
	} else if (hs->n >= WH_MAX) {
		space_err err = { 0 };

		err_set(&err, ENOSPC, "at most %d webhooks: delete one first", WH_MAX);
		c->done(c->arg, NULL, &err);
		webhook_free(w);
	} else {
		link_last(hs, w);
		wh_save(w);
		log_info("webhook %s: created for %s", w->id, w->url);
		c->done(c->arg, w, NULL);
	}
	free(c);
}

void webhook_create(struct spaced *d, const struct webhook_req *req, webhook_created_fn done, void *arg)
{
	struct create *c = calloc(1, sizeof(*c));
	struct webhook *w = webhook_new(d);
	space_err err = { 0 };

	if (!c || !w) {
		free(c);
		free(w);
		err_set(&err, ENOMEM, "out of memory");
		done(arg, NULL, &err);
		return;
	}
	if (!req->url)
		err_set(&err, EINVAL, "url: required");
	else if (!req->secret)
		err_set(&err, EINVAL, "secret: required (16 or more characters; deliveries are signed with it)");
	if (err.code || check_req(req, &w->u, &w->fmt, &err) < 0) {
		done(arg, NULL, &err);
		free(c);
		free(w);
		return;
	}
	id_new(w->id, "wh-");
	snprintf(w->url, sizeof(w->url), "%s", req->url);
	snprintf(w->secret, sizeof(w->secret), "%s", req->secret);
	snprintf(w->name, sizeof(w->name), "%s", req->name ? req->name : "");
	w->mask = req->mask;
	w->enabled = req->enabled;
	w->created_ms = now_ms();
	w->cursor = events_last_seq(d);
	*c = (struct create){ .d = d, .w = w, .done = done, .arg = arg };
	if (wh_resolve(d, &w->u, create_resolved, c, &w->dns) < 0) {
		err_set(&err, ENOMEM, "out of memory");
		done(arg, NULL, &err);
		free(c);
		webhook_free(w);
	}
}

int webhook_update(struct spaced *d, const char *id, const struct webhook_req *req, space_err *err)
{
	struct webhook *w = webhook_find(d, id);
	const struct webhook_format *fmt;
	struct wh_url u = { 0 };

	if (!w)
		return err_set(err, ENOENT, "no webhook '%.64s'", id);
	if (check_req(req, &u, &fmt, err) < 0)
		return -1;
	if (req->url) {
		if (u.host_is_ip) {
			struct sockaddr_storage ss;
			int len = sizeof(ss);
			char hp[300];

			snprintf(hp, sizeof(hp), strchr(u.host, ':') ? "[%s]:%d" : "%s:%d", u.host, u.port);
			if (evutil_parse_sockaddr_port(hp, (struct sockaddr *)&ss, &len) < 0 ||
			    wh_addr_check((struct sockaddr *)&ss, d->cfg.webhooks_allow_loopback, err) < 0)
				return -1;
		}
		w->u = u;
		snprintf(w->url, sizeof(w->url), "%s", req->url);
	}
	if (req->secret)
		snprintf(w->secret, sizeof(w->secret), "%s", req->secret);
	if (req->name)
		snprintf(w->name, sizeof(w->name), "%s", req->name);
	w->mask = req->mask;
	w->enabled = req->enabled;
	wh_save(w);
	wh_pump(w);
	return 0;
}

int webhook_delete(struct spaced *d, const char *id, space_err *err)
{
	struct webhooks *hs = hooks(d);

	for (struct webhook **pp = &hs->list; *pp; pp = &(*pp)->next) {
		struct webhook *w = *pp;

		if (strcmp(w->id, id) != 0)
			continue;
		*pp = w->next;
		hs->n--;
		queue(d, JOB_DELETE, w->id, 0, NULL);
		log_info("webhook %s: deleted", w->id);
		webhook_free(w);
		return 0;
	}
	return err_set(err, ENOENT, "no webhook '%.64s'", id);
}
