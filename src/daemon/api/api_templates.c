/* api_templates.c -- GET /v1/templates and /v1/templates/{ref} */
#include <string.h>

#include "api.h"
#include "daemon.h"
#include "render.h"
#include "store/store.h"

static int add_template(const struct template_rec *t, void *arg)
{
	json_t *j = template_to_json(t);

	if (!j)
		return -1;
	return json_array_append_new(arg, j);
}

void api_templates_list(struct http_req *r)
{
	json_t *arr = json_array();
	space_err err = { 0 };

	if (!arr) {
		http_reply_error(r->req, 500, "internal", "out of memory");
		return;
	}
	if (store_template_each(r->d->store, add_template, arr, &err) < 0) {
		json_decref(arr);
		http_reply_err(r->req, &err);
		return;
	}
	http_reply_json(r->req, 200, json_pack("{s:o}", "templates", arr));
}

void api_templates_get(struct http_req *r)
{
	struct template_rec t = { 0 };
	space_err err = { 0 };
	const char *ref = r->param[0];

	if (!ref[0] || strlen(ref) >= 256) {
		http_reply_error(r->req, 404, "not_found", "no such template");
		return;
	}
	if (store_template_resolve(r->d->store, ref, &t, &err) < 0) {
		if (err.code == ENOENT || err.code == EINVAL)
			http_reply_error(r->req, 404, "not_found", "no template '%s'", ref);
		else
			http_reply_err(r->req, &err);
		return;
	}
	http_reply_json(r->req, 200, template_to_json(&t));
	template_rec_clear(&t);
}
