/* api_ports.c -- a sandbox's ports on /v1 (docs/api/reference.md "Ports"): what listens and what
 * is exposed (GET .../ports), public or not (PUT .../ports/{port}), tokens that open one port
 * (POST and DELETE .../ports/{port}/tokens[/{id}]). The rules are the core's (sandbox/ports.h);
 * the URLs come from the port proxy's naming (ports/ports_front.h). */
#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "daemon.h"
#include "front/render.h"
#include "log.h"
#include "ports/ports_front.h"
#include "sandbox/icmd.h"
#include "sandbox/ports.h"
#include "sandbox/sandbox.h"

#define LISTEN_TIMEOUT_MS 5000
#define LISTEN_TEXT_MAX (1u << 20)

static void url_of(const struct spaced *d, const char *sb_id, uint16_t port, char *out, size_t len)
{
	port_url(d->cfg.data_url, d->cfg.ports_domain, port, sb_id, out, len);
}

/* param i as a port; answers 400 and returns -1 when it is not one. */
static int port_param(struct http_req *r, int i)
{
	int p = port_parse(r->param[i], strlen(r->param[i]));

	if (p < 0)
		http_reply_error(r->req, 400, "bad_request", "'%.16s' is not a port (1..65535)", r->param[i]);
	return p;
}

/* ---- GET /v1/sandboxes/{id}/ports ---- */

struct ports_job {
	struct http_hold hold; /* first */
	struct spaced *d;
	struct evhttp_request *req;
	struct icmd *cmd;
	struct evbuffer *text;
	json_t *listening;     /* array, or NULL: not known (it does not run) */
	struct port_exposed x;
};

static void job_free(void *arg)
{
	struct ports_job *j = arg;

	if (j->text)
		evbuffer_free(j->text);
	json_decref(j->listening);
	json_decref(j->x.out);
	free(j);
}

static int exposed_read(struct store *conn, void *arg, space_err *err)
{
	struct ports_job *j = arg;

	port_exposed_read(conn, &j->x);
	if (j->x.rc < 0)
		*err = j->x.err;
	return j->x.rc;
}

static int by_port(const void *a, const void *b)
{
	json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "port"));
	json_int_t y = json_integer_value(json_object_get(*(json_t *const *)b, "port"));

	return (x > y) - (x < y);
}

/* One entry per port that listens or is exposed, by port. */
static json_t *render(struct spaced *d, struct ports_job *j)
{
	json_t *ports = json_object_get(j->x.out, "ports"), *list = json_array(), *e, *v;
	bool all = json_is_true(json_object_get(j->x.out, "public_all"));
	const char *key;
	size_t i, n;
	char url[512];

	json_array_foreach(j->listening, i, v) {
		char k[8];

		snprintf(k, sizeof(k), "%d", (int)json_integer_value(json_object_get(v, "port")));
		e = json_object_get(ports, k);
		json_array_append_new(list, json_pack("{s:O,s:b,s:O,s:O,s:b,s:I}", "port", json_object_get(v, "port"),
						      "listening", 1, "address", json_object_get(v, "address"),
						      "reachable", json_object_get(v, "reachable"), "public",
						      all || json_is_true(json_object_get(e, "public")), "tokens",
						      (json_int_t)json_integer_value(json_object_get(e, "tokens"))));
		if (e)
			json_object_del(ports, k);
	}
	json_object_foreach(ports, key, e) {
		json_array_append_new(list, json_pack("{s:i,s:o,s:b,s:I}", "port", atoi(key), "listening",
						      j->listening ? json_false() : json_null(), "public",
						      all || json_is_true(json_object_get(e, "public")), "tokens",
						      (json_int_t)json_integer_value(json_object_get(e, "tokens"))));
	}
	n = json_array_size(list);
	if (n > 1) {
		json_t **a = malloc(n * sizeof(*a));

		for (i = 0; a && i < n; i++)
			a[i] = json_incref(json_array_get(list, i));
		if (a) {
			qsort(a, n, sizeof(*a), by_port);
			json_array_clear(list);
			for (i = 0; i < n; i++)
				json_array_append_new(list, a[i]);
			free(a);
		}
	}
	json_array_foreach(list, i, e) {
		url_of(d, j->x.sb_id, (uint16_t)json_integer_value(json_object_get(e, "port")), url, sizeof(url));
		json_object_set_new(e, "url", json_string(url));
	}
	url_of(d, j->x.sb_id, 0, url, sizeof(url));
	return json_pack("{s:s,s:s,s:b,s:o}", "sandbox_id", j->x.sb_id, "pattern", url, "public_all", all, "ports",
			 list);
}

static void exposed_reply(struct spaced *d, struct evhttp_request *req, void *arg, int rc, const space_err *err)
{
	struct ports_job *j = arg;

	if (rc < 0)
		http_reply_err(req, err);
	else
		http_reply_json(req, 200, render(d, j));
}

static void listen_output(void *arg, const char *buf, size_t len)
{
	struct ports_job *j = arg;

	if (evbuffer_get_length(j->text) + len <= LISTEN_TEXT_MAX)
		evbuffer_add(j->text, buf, len);
}

static void listen_done(void *arg, int code, const char *error, const char *out)
{
	struct ports_job *j = arg;
	size_t n = evbuffer_get_length(j->text);
	const char *text = (const char *)evbuffer_pullup(j->text, -1);

	(void)code;
	(void)out;
	j->cmd = NULL;
	if (error)
		log_warn("ports: reading what listens in sandbox %s: %s", j->x.sb_id, error);
	else if ((j->listening = json_array()) && text)
		port_listening_parse(text, n, j->listening);
	http_hold_end(&j->hold);
	api_read_to(j->d, j->req, exposed_read, exposed_reply, job_free, j);
}

static void listen_gone(struct http_hold *h)
{
	struct ports_job *j = (struct ports_job *)h;

	icmd_cancel(j->cmd);
	job_free(j);
}

void api_ports_list(struct http_req *r)
{
	static const char *const argv[] = { "cat", "/proc/net/tcp", "/proc/net/tcp6", NULL };
	struct sandbox_rec sb = { 0 };
	struct ports_job *j;
	space_err err = { 0 };
	bool runs;

	if (api_sandbox_param(r, 0, &sb) < 0)
		return;
	runs = sb.state == SB_RUNNING;
	j = calloc(1, sizeof(*j));
	if (j) {
		snprintf(j->x.sb_id, sizeof(j->x.sb_id), "%s", sb.id);
		j->d = r->d;
		j->req = r->req;
	}
	sandbox_rec_clear(&sb);
	if (!j || (runs && !(j->text = evbuffer_new()))) {
		free(j);
		http_reply_error(r->req, 500, "internal", "out of memory");
		return;
	}
	if (!runs) {
		api_read(r, exposed_read, exposed_reply, job_free, j);
		return;
	}
	struct icmd_spec spec = { .kind = SESS_KIND_PROCESS, .argv = argv, .timeout_ms = LISTEN_TIMEOUT_MS,
				  .output = listen_output, .done = listen_done, .arg = j };

	http_hold_begin(&j->hold, r->req, listen_gone, r->d->conns);
	if (!(j->cmd = icmd_start(r->d, j->x.sb_id, &spec, &err))) {
		log_warn("ports: reading what listens in sandbox %s: %s", j->x.sb_id, err.msg);
		http_hold_end(&j->hold);
		api_read(r, exposed_read, exposed_reply, job_free, j);
	}
}

/* ---- PUT /v1/sandboxes/{id}/ports/{port} ---- */

void api_ports_put(struct http_req *r)
{
	json_t *body, *pub;
	space_err err = { 0 };
	char url[512];
	int port = port_param(r, 1);

	if (port < 0 || !(body = http_body_json(r)))
		return;
	pub = json_object_get(body, "public");
	if (!json_is_boolean(pub) || json_object_size(body) != 1)
		err_set(&err, EINVAL, "the body is {\"public\": true|false}");
	else
		port_set_public(r->d, r->param[0], (uint16_t)port, json_is_true(pub), &err);
	if (err.code) {
		json_decref(body);
		http_reply_err(r->req, &err);
		return;
	}
	url_of(r->d, r->param[0], (uint16_t)port, url, sizeof(url));
	api_reply_stored(r, 200, json_pack("{s:s,s:i,s:O,s:s}", "sandbox_id", r->param[0], "port", port, "public", pub,
					   "url", url));
	json_decref(body);
}

/* ---- POST /v1/sandboxes/{id}/ports/{port}/tokens ---- */

void api_ports_token_create(struct http_req *r)
{
	json_t *body, *ttl, *exp;
	space_err err = { 0 };
	char token[65], id[PORT_TOKEN_ID_LEN + 1], url[512], tunnel[512], *browser = NULL;
	int64_t expires = 0;
	json_int_t ttl_s = 0;
	int port = port_param(r, 1);

	if (port < 0 || !(body = http_body_json(r)))
		return;
	ttl = json_object_get(body, "ttl_s");
	if (ttl && (!json_is_integer(ttl) || json_integer_value(ttl) < 1))
		err_set(&err, EINVAL, "ttl_s must be a positive integer");
	else if (json_object_size(body) > (size_t)(ttl != NULL))
		err_set(&err, EINVAL, "unknown field: only ttl_s is taken");
	ttl_s = ttl ? json_integer_value(ttl) : 0;
	json_decref(body);
	if (err.code || port_token_issue(r->d, r->param[0], (uint16_t)port, ttl_s > 1 << 30 ? 1 << 30 : (int)ttl_s,
					 token, id, &expires, &err) < 0) {
		http_reply_err(r->req, &err);
		return;
	}
	url_of(r->d, r->param[0], (uint16_t)port, url, sizeof(url));
	port_tunnel_url(r->d->cfg.data_url, r->param[0], (uint16_t)port, tunnel, sizeof(tunnel));
	exp = data_plane_to_json("", "", expires);
	if (asprintf(&browser, "%s?%s=%s", url, PORT_TOKEN_QUERY, token) < 0)
		browser = NULL;
	/* once the token's row is in the store (token_issue queued it) */
	api_reply_stored(r, 201,
			 json_pack("{s:s,s:s,s:s,s:i,s:s,s:s,s:s?,s:s,s:O}", "token", token, "id", id, "sandbox_id",
				   r->param[0], "port", port, "header", PORT_TOKEN_HEADER, "url", url, "browser_url",
				   browser, "tunnel_url", tunnel, "expires_at", json_object_get(exp, "expires_at")));
	json_decref(exp);
	if (browser)
		explicit_bzero(browser, strlen(browser));
	free(browser);
	explicit_bzero(token, sizeof(token));
}

/* ---- DELETE /v1/sandboxes/{id}/ports/{port}/tokens[/{id}] ---- */

static int revoke_read(struct store *conn, void *arg, space_err *err)
{
	struct port_revoke *pr = arg;

	port_revoke_read(conn, pr);
	if (pr->rc < 0)
		*err = pr->err;
	return pr->rc;
}

static void revoke_reply(struct spaced *d, struct evhttp_request *req, void *arg, int rc, const space_err *err)
{
	struct port_revoke *pr = arg;

	(void)d;
	if (rc < 0)
		http_reply_err(req, err);
	else if (pr->id[0] && !pr->deleted)
		http_reply_error(req, 404, "not_found", "no token '%s' of port %s", pr->id, pr->scope + 5);
	else
		http_reply_json(req, 200, json_pack("{s:i}", "revoked", pr->deleted));
}

void api_ports_token_revoke(struct http_req *r)
{
	struct port_revoke *pr = malloc(sizeof(*pr));
	space_err err = { 0 };
	int port = port_param(r, 1);

	if (port < 0 || !pr) {
		if (port >= 0)
			http_reply_error(r->req, 500, "internal", "out of memory");
		free(pr);
		return;
	}
	if (port_revoke_begin(r->d, r->param[0], (uint16_t)port, r->nparam > 2 ? r->param[2] : NULL, pr, &err) < 0) {
		http_reply_err(r->req, &err);
		free(pr);
		return;
	}
	api_read(r, revoke_read, revoke_reply, free, pr);
}
