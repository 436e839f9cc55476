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

/* The checks that ask the database run on the store's thread (store_async): a slow or absent
 * database holds the probe (kubelet's timeout then says unready), never the loop. */
struct probe {
	struct http_hold hold; /* first: on_gone gets &hold */
	bool gone;             /* the client went away: only free */
	bool vms;              /* this process runs VMs: templates are checked too */
	bool accel;            /* the accelerator was chosen (asked on the loop: no database) */
	bool store, templates;
};

static void probe_gone(struct http_hold *h)
{
	((struct probe *)h)->gone = true;
}

static int count_template(const struct template_rec *t, void *arg)
{
	(void)t;
	(*(int *)arg)++;
	return 0;
}

/* One round trip (a read of a key nobody sets: ENOENT is the database answering), then,
 * where VMs run, whether any template is imported. On the store's thread. */
static void probe_store(struct store *conn, void *arg)
{
	struct probe *p = arg;
	space_err err = { 0 };
	char v[8];
	int n = 0;

	p->store = store_kv_get(conn, "readyz:probe", v, sizeof(v), &err) == 0 || err.code == ENOENT;
	if (!p->store) {
		log_warn("readyz: the store does not answer: %s", err.msg);
		return;
	}
	if (!p->vms)
		return;
	err_clear(&err);
	if (store_template_each(conn, count_template, &n, &err) < 0)
		log_warn("readyz: listing templates: %s", err.msg);
	p->templates = n > 0;
}

/* Readiness: 200 while this process can do its work: the store answers and, where VMs run
 * (roles all and node), templates are imported and the accelerator chosen. 503 otherwise. */
static void probe_done(void *arg, bool ran)
{
	struct probe *p = arg;
	struct evhttp_request *req = p->hold.req;
	json_t *checks;
	bool ready = ran && p->store;

	if (p->gone) {
		free(p);
		return;
	}
	http_hold_end(&p->hold);
	checks = json_object();
	json_object_set_new(checks, "store", json_string(ready ? "ok" : "failed"));
	if (p->vms) {
		/* Without the store the templates cannot be asked about: not asked twice. */
		json_object_set_new(checks, "templates",
				    json_string(!ready ? "unknown" : p->templates ? "ok" : "none imported"));
		json_object_set_new(checks, "accelerator", json_string(p->accel ? "ok" : "not chosen"));
		ready = ready && p->templates && p->accel;
	}
	free(p);
	http_reply_json(req, ready ? 200 : 503,
			json_pack("{s:s,s:o}", "status", ready ? "ok" : "unready", "checks", checks));
}

void api_readyz(struct http_req *r)
{
	struct probe *p = calloc(1, sizeof(*p));
	space_err err = { 0 };

	if (!p) {
		http_reply_error(r->req, 500, "internal", "out of memory");
		return;
	}
	p->vms = r->d->cfg.role != DROLE_API;
	p->accel = r->d->accel_reason[0] != '\0';
	http_hold_begin(&p->hold, r->req, probe_gone, r->d->conns);
	if (store_async(r->d->store, probe_store, probe_done, p, &err) < 0) {
		p->store = false;
		probe_done(p, false);
	}
}
