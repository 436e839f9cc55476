/* e2b_req.c -- E2B's control-plane request bodies and queries into the core's typed requests,
 * every value checked by the core's validators (sandbox/spec.h) or our /v1 parsers (api/req.h) */
#include <stdlib.h>
#include <string.h>

#include "front/req.h"
#include "e2b_ctl.h"
#include "http/http.h"

/* E2B's "no internet": the whole IPv4 space denied. */
#define ALL_V4 "0.0.0.0/0"
/* Our allow entry for every name (egress.md): with ALL_V4 it is E2B's internet. */
#define ALL_NAMES "*"

static int get_bool(json_t *body, const char *key, int *out, space_err *err)
{
	json_t *v = json_object_get(body, key);

	*out = -1;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_boolean(v))
		return err_set(err, EINVAL, "%s must be true or false", key);
	*out = json_is_true(v);
	return 0;
}

static int get_secs(json_t *body, const char *key, long long lo, long long *out, bool *set, space_err *err)
{
	json_t *v = json_object_get(body, key);

	*set = false;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > SPEC_TIMEOUT_MAX)
		return err_set(err, EINVAL, "%s must be a whole number of seconds from %lld to %d", key, lo,
			       SPEC_TIMEOUT_MAX);
	*out = json_integer_value(v);
	*set = true;
	return 0;
}

/* A list of strings (absent or null: NULL); borrowed. */
static int get_list(const json_t *obj, const char *key, const json_t **out, space_err *err)
{
	const json_t *v = json_object_get(obj, key), *x;
	size_t i;

	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_array(v))
		return err_set(err, EINVAL, "network.%s must be an array of strings", key);
	json_array_foreach(v, i, x)
		if (!json_is_string(x))
			return err_set(err, EINVAL, "network.%s[%zu] must be a string", key, i);
	*out = v;
	return 0;
}

static bool list_has(const json_t *l, const char *s)
{
	const json_t *x;
	size_t i;

	json_array_foreach(l, i, x)
		if (strcmp(json_string_value(x), s) == 0)
			return true;
	return false;
}

/* Fields of an object whose presence we must refuse (something E2B does that we do not). */
static int refuse_present(const json_t *obj, const char *key, const char *why, space_err *err)
{
	const json_t *v = json_object_get(obj, key);

	if (!v || json_is_null(v) || (json_is_array(v) && json_array_size(v) == 0) ||
	    (json_is_object(v) && json_object_size(v) == 0))
		return 0;
	return err_set(err, EINVAL, "%s is not supported here: %s", key, why);
}

int e2b_req_network(int allow_internet, const json_t *network, json_t **out, space_err *err)
{
	const json_t *allow = NULL, *deny = NULL, *x;
	json_t *pol, *a, *d;
	bool closed;
	size_t i;
	int rc;

	*out = NULL;
	if (network && !json_is_null(network)) {
		if (!json_is_object(network))
			return err_set(err, EINVAL, "network must be an object");
		if (get_list(network, "allowOut", &allow, err) < 0 || get_list(network, "denyOut", &deny, err) < 0 ||
		    refuse_present(network, "rules", "per-host transform rules", err) < 0 ||
		    refuse_present(network, "egressProxy", "an egress proxy", err) < 0)
			return -1;
	}
	closed = allow_internet == 0 || (deny && list_has(deny, ALL_V4));
	pol = json_object();
	a = json_array();
	d = json_array();
	if (!pol || !a || !d || json_object_set_new(pol, "allow", a) < 0 || json_object_set_new(pol, "deny", d) < 0) {
		json_decref(pol);
		return err_set(err, ENOMEM, "out of memory");
	}
	if (!closed && (json_array_append_new(a, json_string(ALL_V4)) < 0 ||
			json_array_append_new(a, json_string(ALL_NAMES)) < 0))
		goto oom;
	if (allow) {
		json_array_foreach(allow, i, x) {
			if (!closed && (strcmp(json_string_value(x), ALL_V4) == 0 ||
					strcmp(json_string_value(x), ALL_NAMES) == 0))
				continue; /* there already */
			if (json_array_append(a, (json_t *)x) < 0)
				goto oom;
		}
	}
	if (deny && !closed) {
		json_array_foreach(deny, i, x) {
			if (!(allow && list_has(allow, json_string_value(x))) && json_array_append(d, (json_t *)x) < 0)
				goto oom;
		}
	}
	rc = req_network(pol, out, err);
	json_decref(pol);
	return rc;
oom:
	json_decref(pol);
	return err_set(err, ENOMEM, "out of memory");
}

int e2b_req_create(json_t *body, struct create_req *r, space_err *err)
{
	json_t *v;
	long long t = 0;
	int auto_pause, internet;

	memset(r, 0, sizeof(*r));
	if (!json_is_object(body))
		return err_set(err, EINVAL, "request body must be a JSON object");
	v = json_object_get(body, "templateID");
	if (v && !json_is_null(v)) {
		if (!json_is_string(v) || json_string_length(v) >= sizeof(r->template_ref) ||
		    memchr(json_string_value(v), '\0', json_string_length(v)))
			return err_set(err, EINVAL, "templateID must be a string of at most %zu bytes",
				       sizeof(r->template_ref) - 1);
		memcpy(r->template_ref, json_string_value(v), json_string_length(v) + 1);
	} else {
		snprintf(r->template_ref, sizeof(r->template_ref), "%s", E2B_DEFAULT_TEMPLATE);
	}
	if (spec_check_ref("templateID", r->template_ref, err) < 0)
		return -1;
	if (refuse_present(body, "volumeMounts", "volumes", err) < 0 ||
	    refuse_present(body, "mcp", "MCP gateways", err) < 0 ||
	    refuse_present(body, "iam", "IAM tokens", err) < 0)
		return -1;
	v = json_object_get(body, "autoResume");
	if (v && !json_is_null(v)) {
		if (!json_is_object(v))
			return err_set(err, EINVAL, "autoResume must be an object {\"enabled\": bool}");
		if (json_is_true(json_object_get(v, "enabled")))
			return err_set(err, EINVAL, "autoResume is not supported here: resume with connect");
	}
	if (get_secs(body, "timeout", 0, &t, &r->timeout_set, err) < 0 || get_bool(body, "autoPause", &auto_pause, err) < 0 ||
	    get_bool(body, "allow_internet_access", &internet, err) < 0 || get_bool(body, "secure", &(int){ 0 }, err) < 0 ||
	    get_bool(body, "autoPauseMemory", &(int){ 0 }, err) < 0)
		return -1;
	r->timeout_s = t;
	if (auto_pause >= 0) {
		r->on_timeout_set = true;
		r->on_timeout = auto_pause ? ON_TIMEOUT_SUSPEND : ON_TIMEOUT_DELETE;
	}
	/* E2B's sandbox URLs are open unless network.allowPublicTraffic is false: then its traffic
	 * token (e2b-traffic-access-token) opens them */
	v = json_object_get(json_object_get(body, "network"), "allowPublicTraffic");
	if (v && !json_is_null(v) && !json_is_boolean(v))
		return err_set(err, EINVAL, "network.allowPublicTraffic must be a boolean");
	r->ports_public = !v || json_is_null(v) || json_is_true(v);
	if (req_string_map(body, "envVars", true, &r->env, err) < 0 ||
	    req_string_map(body, "metadata", false, &r->metadata, err) < 0 ||
	    e2b_req_network(internet, json_object_get(body, "network"), &r->network, err) < 0) {
		create_req_free(r);
		return -1;
	}
	return 0;
}

int e2b_req_network_update(json_t *body, json_t **out, space_err *err)
{
	int internet;

	*out = NULL;
	if (!json_is_object(body))
		return err_set(err, EINVAL, "request body must be a JSON object");
	if (get_bool(body, "allow_internet_access", &internet, err) < 0)
		return -1;
	/* The update's body is the network object itself (allowOut, denyOut, ...). */
	return e2b_req_network(internet, body, out, err);
}

int e2b_req_timeout(json_t *body, const char *key, struct timeout_req *out, bool *set, space_err *err)
{
	long long t = 0;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(body))
		return err_set(err, EINVAL, "request body must be a JSON object");
	if (get_secs(body, key, 0, &t, set, err) < 0)
		return -1;
	out->timeout_s = t;
	return 0;
}

int e2b_req_fork(json_t *body, int *count, struct timeout_req *t, bool *tset, space_err *err)
{
	json_t *v;

	if (e2b_req_timeout(body, "timeout", t, tset, err) < 0)
		return -1;
	*count = 1;
	v = json_object_get(body, "count");
	if (v && !json_is_null(v)) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > SPEC_FORK_MAX)
			return err_set(err, EINVAL, "count must be an integer from 1 to %d", SPEC_FORK_MAX);
		*count = (int)json_integer_value(v);
	}
	return 0;
}

int e2b_req_snapshot(json_t *body, char *name, size_t len, space_err *err)
{
	json_t *v;

	name[0] = '\0';
	if (!json_is_object(body))
		return err_set(err, EINVAL, "request body must be a JSON object");
	v = json_object_get(body, "name");
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v) || json_string_length(v) >= len)
		return err_set(err, EINVAL, "name must be a string of at most %zu bytes", len - 1);
	memcpy(name, json_string_value(v), json_string_length(v) + 1);
	return spec_check_snapshot_name(name, err);
}

static int unhex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Percent-decodes s[0..n) ('+' is a space) into out (cap bytes with NUL); -1 if malformed,
 * too long, or decoding to a NUL. */
static int pct_decode(const char *s, size_t n, char *out, size_t cap)
{
	size_t i, o = 0;

	for (i = 0; i < n; i++) {
		int c = (unsigned char)s[i];

		if (c == '%') {
			int h, l;

			if (i + 2 >= n)
				return -1;
			h = unhex(s[i + 1]);
			l = unhex(s[i + 2]);
			if (h < 0 || l < 0)
				return -1;
			c = h * 16 + l;
			i += 2;
		} else if (c == '+') {
			c = ' ';
		}
		if (c == 0 || o + 1 >= cap)
			return -1;
		out[o++] = (char)c;
	}
	out[o] = '\0';
	return 0;
}

int e2b_req_metadata_filter(const char *s, struct strmap *out, space_err *err)
{
	char key[SPEC_META_KEY_MAX + 1], *val = NULL;
	const char *p = s;

	memset(out, 0, sizeof(*out));
	if (!s || !*s)
		return 0;
	val = malloc(SPEC_META_VALUE_MAX + 1);
	if (!val)
		return err_set(err, ENOMEM, "out of memory");
	while (*p) {
		const char *amp = strchr(p, '&'), *end = amp ? amp : p + strlen(p);
		const char *eq = memchr(p, '=', (size_t)(end - p));

		if (end > p) {
			if (out->n >= E2B_FILTER_MAX) {
				err_set(err, EINVAL, "metadata filter has more than %d pairs", E2B_FILTER_MAX);
				goto fail;
			}
			if (!eq || eq == p || pct_decode(p, (size_t)(eq - p), key, sizeof(key)) < 0 ||
			    pct_decode(eq + 1, (size_t)(end - eq - 1), val, SPEC_META_VALUE_MAX + 1) < 0) {
				err_set(err, EINVAL, "metadata filter must be key=value pairs joined by '&', "
						     "percent-encoded");
				goto fail;
			}
			if (strmap_set(out, key, val) < 0) {
				err_set(err, ENOMEM, "out of memory");
				goto fail;
			}
		}
		p = amp ? amp + 1 : end;
	}
	free(val);
	return 0;
fail:
	free(val);
	strmap_free(out);
	memset(out, 0, sizeof(*out));
	return -1;
}

int e2b_req_states(const char *s, unsigned *mask, space_err *err)
{
	const char *p = s;

	while (p && *p) {
		const char *c = strchr(p, ','), *end = c ? c : p + strlen(p);
		size_t n = (size_t)(end - p);

		if (n == 7 && strncmp(p, "running", 7) == 0)
			*mask |= E2B_STATE_RUNNING;
		else if (n == 6 && strncmp(p, "paused", 6) == 0)
			*mask |= E2B_STATE_PAUSED;
		else if (n != 0)
			return err_set(err, EINVAL, "state must be running or paused, not '%.*s'",
				       (int)(n > 32 ? 32 : n), p);
		p = c ? c + 1 : end;
	}
	return 0;
}

int e2b_req_limit(const char *s, int *limit, space_err *err)
{
	uint64_t v;

	*limit = E2B_LIST_DEFAULT;
	if (!s)
		return 0;
	if (http_parse_u64(s, &v) < 0 || v < 1 || v > E2B_LIST_MAX)
		return err_set(err, EINVAL, "limit must be a whole number from 1 to %d", E2B_LIST_MAX);
	*limit = (int)v;
	return 0;
}
