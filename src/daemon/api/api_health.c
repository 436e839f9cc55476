/* api_health.c -- GET /v1/healthz and /v1/readyz: the probes of an orchestrator (Kubernetes'
 * liveness and readiness). They need no API key (kubelet sends none), so they say nothing
 * beyond "ok" and the names and results of the checks: no versions, paths or error texts
 * (those go to the log). */
#include <string.h>

#include "api.h"
#include "daemon.h"
#include "log.h"
#include "store/store.h"

bool api_health_public(const struct http_req *r)
{
	return r->method == EVHTTP_REQ_GET && r->nseg == 2 && strcmp(r->seg[0], "v1") == 0 &&
	       (strcmp(r->seg[1], "healthz") == 0 || strcmp(r->seg[1], "readyz") == 0);
}

/* Liveness: the event loop took the request and answered it. Nothing else is checked, so that
 * a slow or absent database (readiness's business) never gets a live daemon restarted. */
void api_healthz(struct http_req *r)
{
	http_reply_json(r->req, 200, json_pack("{s:s}", "status", "ok"));
}

/* One round trip: a read of a key nobody sets; ENOENT is the database answering. */
static bool store_answers(struct spaced *d)
{
	space_err err = { 0 };
	char v[8];

	if (store_kv_get(d->store, "readyz:probe", v, sizeof(v), &err) == 0 || err.code == ENOENT)
		return true;
	log_warn("readyz: the store does not answer: %s", err.msg);
	return false;
}

static int count_template(const struct template_rec *t, void *arg)
{
	(void)t;
	(*(int *)arg)++;
	return 0;
}

static bool templates_imported(struct spaced *d)
{
	space_err err = { 0 };
	int n = 0;

	if (store_template_each(d->store, count_template, &n, &err) < 0) {
		log_warn("readyz: listing templates: %s", err.msg);
		return false;
	}
	return n > 0;
}

/* Readiness: 200 while this process can do its work: the store answers and, where VMs run
 * (roles all and node), templates are imported and the accelerator chosen. 503 otherwise. */
void api_readyz(struct http_req *r)
{
	struct spaced *d = r->d;
	bool store = store_answers(d), ready = store;
	json_t *checks = json_object();

	json_object_set_new(checks, "store", json_string(store ? "ok" : "failed"));
	if (d->cfg.role != DROLE_API) {
		/* Without the store the templates cannot be asked about: not asked twice. */
		bool tmpl = store && templates_imported(d), accel = d->accel_reason[0] != '\0';

		json_object_set_new(checks, "templates", json_string(!store ? "unknown" : tmpl ? "ok" : "none imported"));
		json_object_set_new(checks, "accelerator", json_string(accel ? "ok" : "not chosen"));
		ready = ready && tmpl && accel;
	}
	http_reply_json(r->req, ready ? 200 : 503,
			json_pack("{s:s,s:o}", "status", ready ? "ok" : "unready", "checks", checks));
}
