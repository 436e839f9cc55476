/* req.c -- JSON request bodies of the /v1 API parsed into the core's typed requests, every value
 * checked by the core's validators (sandbox/spec.h) */
#include <string.h>

#include "front/req.h"
#include "proto.h"
#include "egress/binding.h"
#include "egress/policy.h"

/* Refuses fields the request does not know (a typo must not pass silently). */
static int only_fields(json_t *body, const char *const *known, space_err *err)
{
	const char *k;
	json_t *v;

	if (!json_is_object(body))
		return err_set(err, EINVAL, "request body must be a JSON object");
	json_object_foreach(body, k, v) {
		int i;

		for (i = 0; known[i] && strcmp(known[i], k); i++)
			;
		if (!known[i])
			return err_set(err, EINVAL, "unknown field '%.64s'", k);
	}
	return 0;
}

/* An optional integer in [lo, hi]; *set tells whether it was given. */
static int get_int(json_t *body, const char *key, long long lo, long long hi, long long *out, bool *set,
		   space_err *err)
{
	json_t *v = json_object_get(body, key);

	if (set)
		*set = false;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return err_set(err, EINVAL, "%s must be an integer from %lld to %lld", key, lo, hi);
	*out = json_integer_value(v);
	if (set)
		*set = true;
	return 0;
}

/* An optional string of 1..max-1 bytes into out ("" when absent). */
static int get_str(json_t *body, const char *key, char *out, size_t max, space_err *err)
{
	json_t *v = json_object_get(body, key);

	out[0] = '\0';
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v) || json_string_length(v) >= max ||
	    memchr(json_string_value(v), '\0', json_string_length(v)))
		return err_set(err, EINVAL, "%s must be a string of at most %zu bytes", key, max - 1);
	memcpy(out, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

int req_string_map(json_t *body, const char *key, bool env, struct strmap *out, space_err *err)
{
	json_t *v = json_object_get(body, key), *x;
	size_t max = env ? SPEC_ENV_MAX : SPEC_META_MAX;
	const char *k;

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_object(v))
		return err_set(err, EINVAL, "%s must be an object of strings", key);
	if (json_object_size(v) > max)
		return err_set(err, EINVAL, "%s has more than %zu entries", key, max);
	json_object_foreach(v, k, x) {
		if (!json_is_string(x))
			return err_set(err, EINVAL, "%s.%.64s must be a string", key, k);
		if ((env ? spec_check_env_entry(key, k, json_string_length(x), err)
			 : spec_check_meta_entry(k, json_string_length(x), err)) < 0)
			return -1;
		if (memchr(json_string_value(x), '\0', json_string_length(x)))
			return err_set(err, EINVAL, "%s.%.64s must not hold NUL", key, k);
		if (strmap_set(out, k, json_string_value(x)) < 0)
			return err_set(err, ENOMEM, "out of memory");
	}
	return 0;
}

static int get_on_timeout(json_t *body, bool *set, enum on_timeout *out, space_err *err)
{
	char v[16];
	int t;

	*set = false;
	if (get_str(body, "on_timeout", v, sizeof(v), err) < 0)
		return err_set(err, EINVAL, "on_timeout must be \"delete\" or \"suspend\"");
	if (!v[0])
		return 0;
	if ((t = on_timeout_parse(v)) < 0)
		return err_set(err, EINVAL, "on_timeout must be \"delete\" or \"suspend\"");
	*out = (enum on_timeout)t;
	*set = true;
	return 0;
}

int req_network(const json_t *policy, json_t **out, space_err *err)
{
	struct egress_policy *p = NULL;
	space_err e = { 0 };

	*out = NULL;
	if (!json_is_object(policy))
		return err_set(err, EINVAL, "network must be an object {\"allow\": [...], \"deny\": [...], \"inject\": [...]}");
	if (egress_policy_parse(policy, false, &p, &e) < 0)
		return err_set(err, EINVAL, "network: %s", e.msg);
	*out = egress_policy_json(p, false);
	egress_policy_free(p);
	return *out ? 0 : err_set(err, ENOMEM, "out of memory");
}

int req_secret(json_t *body, const char **value, size_t *len, char *hosts, size_t hosts_len, space_err *err)
{
	static const char *const known[] = { "value", "hosts", NULL };
	json_t *v = json_object_get(body, "value"), *norm = NULL;
	char *text;

	if (only_fields(body, known, err) < 0)
		return -1;
	if (!json_is_string(v))
		return err_set(err, EINVAL, "value is required: a string");
	if (!egress_secret_value_valid(json_string_value(v), json_string_length(v)))
		return err_set(err, EINVAL, "value must be 1 to %d bytes without CR, LF or NUL",
			       EGRESS_SECRET_VALUE_MAX);
	if (egress_binding_parse(json_object_get(body, "hosts"), &norm, err) < 0)
		return -1;
	text = json_dumps(norm, JSON_COMPACT);
	json_decref(norm);
	if (!text || strlen(text) >= hosts_len) {
		free(text);
		return err_set(err, EINVAL, "hosts: longer than %zu bytes as JSON", hosts_len - 1);
	}
	snprintf(hosts, hosts_len, "%s", text);
	free(text);
	*value = json_string_value(v);
	*len = json_string_length(v);
	return 0;
}

int req_create(json_t *body, struct create_req *r, space_err *err)
{
	static const char *const known[] = { "template", "snapshot", "vcpus", "memory_mib", "env",
					     "metadata", "timeout_s", "on_timeout", "network", NULL };
	long long vcpus = 0, mem = 0, timeout = 0;

	memset(r, 0, sizeof(*r));
	if (only_fields(body, known, err) < 0)
		return -1;
	if (get_str(body, "template", r->template_ref, sizeof(r->template_ref), err) < 0 ||
	    get_str(body, "snapshot", r->snapshot, sizeof(r->snapshot), err) < 0)
		return -1;
	if (!r->template_ref[0] && !r->snapshot[0])
		return err_set(err, EINVAL, "template is required: a template reference such as \"base\""
					    " (or snapshot: a snapshot's name or id)");
	if (r->template_ref[0] && r->snapshot[0])
		return err_set(err, EINVAL, "give template or snapshot, not both");
	if ((r->template_ref[0] && spec_check_ref("template", r->template_ref, err) < 0) ||
	    (r->snapshot[0] && spec_check_ref("snapshot", r->snapshot, err) < 0))
		return -1;
	if (get_int(body, "vcpus", 1, SPEC_VCPUS_MAX, &vcpus, NULL, err) < 0 ||
	    get_int(body, "memory_mib", SPEC_MEMORY_MIN, SPEC_MEMORY_MAX, &mem, NULL, err) < 0 ||
	    get_int(body, "timeout_s", 0, SPEC_TIMEOUT_MAX, &timeout, &r->timeout_set, err) < 0 ||
	    get_on_timeout(body, &r->on_timeout_set, &r->on_timeout, err) < 0 ||
	    req_string_map(body, "env", true, &r->env, err) < 0 || req_string_map(body, "metadata", false, &r->metadata, err) < 0 ||
	    (json_object_get(body, "network") && !json_is_null(json_object_get(body, "network")) &&
	     req_network(json_object_get(body, "network"), &r->network, err) < 0)) {
		create_req_free(r);
		return -1;
	}
	r->vcpus = (int)vcpus;
	r->memory_mib = (int)mem;
	r->timeout_s = timeout;
	return 0;
}

int req_exec(json_t *body, struct exec_req *r, space_err *err)
{
	static const char *const known[] = { "argv", "env", "cwd", "user", "stdin", "token_ttl_s", "pty", NULL };
	json_t *argv = json_object_get(body, "argv"), *v;
	long long ttl = 0;
	size_t i;

	memset(r, 0, sizeof(*r));
	if (only_fields(body, known, err) < 0)
		return -1;
	if (!json_is_array(argv) || json_array_size(argv) < 1 || json_array_size(argv) > SPEC_ARGV_MAX)
		return err_set(err, EINVAL, "argv must be an array of 1 to %d strings", SPEC_ARGV_MAX);
	json_array_foreach(argv, i, v) {
		if (!json_is_string(v)) {
			exec_req_free(r);
			return err_set(err, EINVAL, "argv[%zu] must be a string", i);
		}
		if (spec_check_argv_entry(i, json_string_value(v), json_string_length(v), err) < 0 ||
		    strlist_add(&r->argv, json_string_value(v)) < 0) {
			exec_req_free(r);
			return err->code ? -1 : err_set(err, ENOMEM, "out of memory");
		}
	}
	if (req_string_map(body, "env", true, &r->env, err) < 0 || get_str(body, "cwd", r->cwd, sizeof(r->cwd), err) < 0 ||
	    get_str(body, "user", r->user, sizeof(r->user), err) < 0 ||
	    get_int(body, "token_ttl_s", 1, SPEC_TOKEN_TTL_MAX, &ttl, NULL, err) < 0)
		goto fail;
	v = json_object_get(body, "stdin");
	if (v && !json_is_null(v)) {
		if (!json_is_boolean(v)) {
			err_set(err, EINVAL, "stdin must be true or false");
			goto fail;
		}
		r->stdin_open = json_is_true(v);
	}
	r->token_ttl_s = (int)ttl;
	v = json_object_get(body, "pty");
	if (v && !json_is_null(v) && req_pty_size(v, &r->pty_rows, &r->pty_cols, err) < 0)
		goto fail;
	if (r->pty_rows)
		r->stdin_open = true; /* a terminal always has input */
	/* What the core runs, checked as every front end's exec is (spec.h). */
	if (spec_check_exec(r, err) < 0)
		goto fail;
	return 0;
fail:
	exec_req_free(r);
	return -1;
}

int req_pty_size(json_t *v, uint16_t *rows, uint16_t *cols, space_err *err)
{
	static const char *const known[] = { "rows", "cols", NULL };
	long long r = 24, c = 80;

	if (!json_is_object(v))
		return err_set(err, EINVAL, "pty must be an object {\"rows\":N,\"cols\":N}");
	if (only_fields(v, known, err) < 0 || get_int(v, "rows", 1, PROTO_PTY_MAX_DIM, &r, NULL, err) < 0 ||
	    get_int(v, "cols", 1, PROTO_PTY_MAX_DIM, &c, NULL, err) < 0)
		return -1;
	*rows = (uint16_t)r;
	*cols = (uint16_t)c;
	return 0;
}

int req_fork(json_t *body, int *count, space_err *err)
{
	static const char *const known[] = { "count", NULL };
	long long n = 1;

	if (only_fields(body, known, err) < 0 || get_int(body, "count", 1, SPEC_FORK_MAX, &n, NULL, err) < 0)
		return -1;
	*count = (int)n;
	return 0;
}

int req_snapshot(json_t *body, char *name, size_t len, space_err *err)
{
	static const char *const known[] = { "name", NULL };

	if (only_fields(body, known, err) < 0 || get_str(body, "name", name, len, err) < 0)
		return -1;
	if (!name[0])
		return err_set(err, EINVAL, "name is required: the snapshot's name");
	return spec_check_snapshot_name(name, err);
}

int req_timeout(json_t *body, struct timeout_req *r, space_err *err)
{
	static const char *const known[] = { "timeout_s", "on_timeout", NULL };
	long long t = 0;
	bool set;

	memset(r, 0, sizeof(*r));
	if (only_fields(body, known, err) < 0 ||
	    get_int(body, "timeout_s", 0, SPEC_TIMEOUT_MAX, &t, &set, err) < 0 ||
	    get_on_timeout(body, &r->on_timeout_set, &r->on_timeout, err) < 0)
		return -1;
	if (!set)
		return err_set(err, EINVAL, "timeout_s is required: seconds from now (0: never)");
	r->timeout_s = t;
	return 0;
}

int req_token(json_t *body, int *ttl_s, space_err *err)
{
	static const char *const known[] = { "token_ttl_s", NULL };
	long long ttl = 0;

	if (only_fields(body, known, err) < 0 ||
	    get_int(body, "token_ttl_s", 1, SPEC_TOKEN_TTL_MAX, &ttl, NULL, err) < 0)
		return -1;
	*ttl_s = (int)ttl;
	return 0;
}

int req_pool(json_t *body, int *size, space_err *err)
{
	static const char *const known[] = { "size", NULL };
	long long n = 0;
	bool set;

	if (only_fields(body, known, err) < 0 || get_int(body, "size", 0, SPEC_POOL_MAX, &n, &set, err) < 0)
		return -1;
	if (!set)
		return err_set(err, EINVAL, "size is required: ready VMs to keep, 0 to %d", SPEC_POOL_MAX);
	*size = (int)n;
	return 0;
}
