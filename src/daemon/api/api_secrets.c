/* api_secrets.c -- /v1/secrets: values the egress gateways inject into requests. A value goes
 * in and never comes out: no response and no log line carries one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "front/req.h"
#include "egress/policy.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

static json_t *secret_json(const struct secret_rec *s)
{
	char c[32], u[32];
	json_t *hosts = json_loads(s->hosts[0] ? s->hosts : "[]", 0, NULL);

	fmt_time(c, s->created_ms);
	fmt_time(u, s->updated_ms);
	return json_pack("{s:s,s:o,s:s,s:s}", "name", s->name, "hosts", hosts ? hosts : json_array(), "created_at", c,
			 "updated_at", u);
}

/* The name in the path, or a 400/404 answered. */
static const char *name_param(struct http_req *r, bool for_put)
{
	const char *name = r->param[0];

	if (egress_secret_name_valid(name))
		return name;
	if (for_put)
		http_reply_error(r->req, 400, "bad_request", "a secret's name is 1 to %d of [A-Za-z0-9_.-]",
				 EGRESS_SECRET_NAME_MAX);
	else
		http_reply_error(r->req, 404, "not_found", "no secret '%.64s'", name);
	return NULL;
}

/* Every read and write of a secret is made on the store's thread (api_read): the loop goes on
 * meanwhile. What changed is told to the running sandboxes' gateways from the loop. */
struct secret_job {
	char name[EGRESS_SECRET_NAME_MAX + 1];
	char *value;        /* put: cleared before it is freed */
	size_t len;
	char hosts[SECRET_HOSTS_MAX]; /* put: the binding, normalised JSON */
	struct secret_rec rec;
	bool created;
};

static void job_release(void *arg)
{
	struct secret_job *j = arg;

	if (j->value) {
		explicit_bzero(j->value, j->len);
		free(j->value);
	}
	free(j);
}

static struct secret_job *job_new(struct http_req *r, const char *name)
{
	struct secret_job *j = calloc(1, sizeof(*j));

	if (!j)
		http_reply_error(r->req, 500, "internal", "out of memory");
	else
		snprintf(j->name, sizeof(j->name), "%s", name);
	return j;
}

static int put_write(struct store *conn, void *arg, space_err *err)
{
	struct secret_job *j = arg;

	return store_secret_put(conn, j->name, j->value, j->hosts, &j->rec, &j->created, err);
}

static void put_reply(struct spaced *d, struct evhttp_request *req, void *arg, int rc, const space_err *err)
{
	struct secret_job *j = arg;

	if (rc < 0) {
		http_reply_err(req, err);
		return;
	}
	sandbox_secret_changed(d, j->name);
	http_reply_json(req, j->created ? 201 : 200, secret_json(&j->rec));
}

void api_secrets_put(struct http_req *r)
{
	const char *name = name_param(r, true), *value;
	struct secret_job *j = NULL;
	space_err err = { 0 };
	json_t *body, *v;
	char hosts[SECRET_HOSTS_MAX];
	size_t len;

	if (!name || !(body = http_body_json(r)))
		return;
	if (req_secret(body, &value, &len, hosts, sizeof(hosts), &err) < 0) {
		http_reply_err(r->req, &err);
	} else if ((j = job_new(r, name))) {
		snprintf(j->hosts, sizeof(j->hosts), "%s", hosts);
		j->value = malloc(len + 1);
		if (!j->value) {
			job_release(j);
			http_reply_error(r->req, 500, "internal", "out of memory");
		} else {
			memcpy(j->value, value, len + 1);
			j->len = len;
			api_read(r, put_write, put_reply, job_release, j);
		}
	}
	/* The body's copy of the value: cleared before it is freed. */
	v = json_object_get(body, "value");
	if (json_is_string(v))
		explicit_bzero((char *)json_string_value(v), json_string_length(v));
	json_decref(body);
}

static int add_secret(const struct secret_rec *s, void *arg)
{
	return json_array_append_new(arg, secret_json(s)) < 0;
}

static json_t *list_read(struct store *conn, void *arg, space_err *err)
{
	json_t *arr = json_array();

	(void)arg;
	if (!arr)
		return NULL;
	if (store_secret_each(conn, add_secret, arr, err) < 0) {
		json_decref(arr);
		return NULL;
	}
	return json_pack("{s:o}", "secrets", arr);
}

void api_secrets_list(struct http_req *r)
{
	api_read_json(r, list_read, NULL, NULL);
}

static json_t *get_read(struct store *conn, void *arg, space_err *err)
{
	struct secret_job *j = arg;

	if (store_secret_get(conn, j->name, &j->rec, NULL, err) < 0)
		return NULL;
	return secret_json(&j->rec);
}

void api_secrets_get(struct http_req *r)
{
	const char *name = name_param(r, false);
	struct secret_job *j;

	if (name && (j = job_new(r, name)))
		api_read_json(r, get_read, job_release, j);
}

static int delete_write(struct store *conn, void *arg, space_err *err)
{
	struct secret_job *j = arg;

	return store_secret_delete(conn, j->name, err);
}

static void delete_reply(struct spaced *d, struct evhttp_request *req, void *arg, int rc, const space_err *err)
{
	struct secret_job *j = arg;

	if (rc < 0) {
		http_reply_err(req, err);
		return;
	}
	sandbox_secret_changed(d, j->name);
	http_reply_empty(req, 204);
}

void api_secrets_delete(struct http_req *r)
{
	const char *name = name_param(r, false);
	struct secret_job *j;

	if (name && (j = job_new(r, name)))
		api_read(r, delete_write, delete_reply, job_release, j);
}
