/* interp_line.c -- the code interpreter's wire, pure: requests in, guest lines checked */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interp_line.h"

/* A string member of at most max bytes; absent is fine. -1: present but not such a string. */
static int opt_string(const json_t *o, const char *key, size_t max, const char **out)
{
	const json_t *v = json_object_get(o, key);

	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v) || json_string_length(v) > max || strlen(json_string_value(v)) != json_string_length(v))
		return -1;
	*out = json_string_value(v);
	return 0;
}

static char *dump_line(json_t *j, bool newline)
{
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	char *out;
	size_t n;

	json_decref(j);
	if (!s || !newline)
		return s;
	n = strlen(s);
	out = realloc(s, n + 2);
	if (!out) {
		free(s);
		return NULL;
	}
	out[n] = '\n';
	out[n + 1] = 0;
	return out;
}

/* Copies the string fields in keys (each at most the line's size: the line bounds them). */
static int copy_strings(const json_t *in, json_t *out, const char *const *keys, bool required)
{
	for (size_t i = 0; keys[i]; i++) {
		const char *s;

		if (opt_string(in, keys[i], INTERP_MAX_LINE, &s) < 0)
			return -1;
		if (!s) {
			if (required)
				return -1;
			continue;
		}
		if (json_object_set_new(out, keys[i], json_string(s)) < 0)
			return -1;
	}
	return 0;
}

static const char *const result_strings[] = { "text", "html", "markdown", "svg", "png", "jpeg",
					      "pdf", "latex", "javascript", NULL };

static json_t *check(const json_t *in, enum interp_line_type *type)
{
	static const char *const stream_keys[] = { "text", NULL };
	static const char *const stamp_keys[] = { "timestamp", NULL };
	static const char *const error_keys[] = { "name", "value", "traceback", NULL };
	const char *t = json_string_value(json_object_get(in, "type"));
	json_t *out = json_object();

	if (!out || !t || !json_is_object(in))
		goto bad;
	if (json_object_set_new(out, "type", json_string(t)) < 0)
		goto bad;
	if (strcmp(t, "stdout") == 0 || strcmp(t, "stderr") == 0) {
		*type = t[3] == 'o' ? INTERP_LINE_STDOUT : INTERP_LINE_STDERR;
		if (copy_strings(in, out, stream_keys, true) < 0 || copy_strings(in, out, stamp_keys, false) < 0)
			goto bad;
		const json_t *ts = json_object_get(out, "timestamp");
		if (ts && json_string_length(ts) > 64)
			json_object_del(out, "timestamp");
	} else if (strcmp(t, "result") == 0) {
		const json_t *main = json_object_get(in, "is_main_result");
		const json_t *j = json_object_get(in, "json");

		*type = INTERP_LINE_RESULT;
		if (copy_strings(in, out, result_strings, false) < 0)
			goto bad;
		if (main && !json_is_boolean(main))
			goto bad;
		if (json_object_set_new(out, "is_main_result", json_boolean(json_is_true(main))) < 0)
			goto bad;
		/* Rich JSON output (a _repr_json_): an object or an array, copied as it is. */
		if (j && (json_is_object(j) || json_is_array(j)) &&
		    json_object_set_new(out, "json", json_deep_copy(j)) < 0)
			goto bad;
	} else if (strcmp(t, "error") == 0) {
		*type = INTERP_LINE_ERROR;
		if (copy_strings(in, out, error_keys, true) < 0)
			goto bad;
	} else if (strcmp(t, "number_of_executions") == 0) {
		const json_t *n = json_object_get(in, "execution_count");

		*type = INTERP_LINE_COUNT;
		if (!json_is_integer(n) || json_integer_value(n) < 0 ||
		    json_object_set_new(out, "execution_count", json_integer(json_integer_value(n))) < 0)
			goto bad;
	} else if (strcmp(t, "end_of_execution") == 0) {
		*type = INTERP_LINE_END;
	} else {
		goto bad;
	}
	return out;
bad:
	*type = INTERP_LINE_BAD;
	json_decref(out);
	return NULL;
}

char *interp_line_check(const char *line, size_t len, enum interp_line_type *type)
{
	json_error_t jerr;
	json_t *in, *out;

	*type = INTERP_LINE_BAD;
	if (len > INTERP_MAX_LINE)
		return NULL;
	in = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!in)
		return NULL;
	out = check(in, type);
	json_decref(in);
	if (!out)
		return NULL;
	char *s = dump_line(out, false);
	if (!s)
		*type = INTERP_LINE_BAD;
	return s;
}

/* Python only: the one language the guest program runs. */
static int check_language(const json_t *body, space_err *err)
{
	const char *lang;

	if (opt_string(body, "language", 64, &lang) < 0)
		return err_set(err, EINVAL, "language must be a string");
	if (lang && *lang && strcmp(lang, "python") != 0 && strcmp(lang, "python3") != 0)
		return err_set(err, EINVAL, "language %.64s is not supported: only python", lang);
	return 0;
}

int interp_execute_parse(const json_t *body, char **line, char ctx_id[INTERP_MAX_CTX_ID + 1], space_err *err)
{
	const json_t *env = json_object_get(body, "env_vars");
	const char *code, *id, *k;
	json_t *req, *jenv, *v;

	*line = NULL;
	ctx_id[0] = 0;
	if (!json_is_object(body))
		return err_set(err, EINVAL, "the body must be a JSON object");
	if (opt_string(body, "code", INTERP_MAX_CODE, &code) < 0 || !code)
		return err_set(err, EINVAL, "code must be a string of at most %u bytes without NUL",
			       INTERP_MAX_CODE);
	if (opt_string(body, "context_id", INTERP_MAX_CTX_ID, &id) < 0)
		return err_set(err, EINVAL, "context_id must be a string of at most %d bytes", INTERP_MAX_CTX_ID);
	if (check_language(body, err) < 0)
		return -1;
	if (env && !json_is_null(env) && !json_is_object(env))
		return err_set(err, EINVAL, "env_vars must be an object of strings");
	if (json_is_object(env) && json_object_size(env) > INTERP_MAX_ENV)
		return err_set(err, EINVAL, "env_vars has more than %d entries", INTERP_MAX_ENV);
	jenv = json_object();
	req = json_object();
	if (!jenv || !req)
		goto nomem;
	if (json_is_object(env)) {
		json_object_foreach((json_t *)env, k, v) {
			size_t kl = strlen(k);

			if (!kl || kl > INTERP_MAX_ENV_NAME || strchr(k, '=') || !json_is_string(v) ||
			    json_string_length(v) > INTERP_MAX_ENV_VALUE ||
			    strlen(json_string_value(v)) != json_string_length(v)) {
				json_decref(jenv);
				json_decref(req);
				return err_set(err, EINVAL,
					       "env_vars: each name is 1-%d bytes without '=', each value a string of at most %u bytes without NUL",
					       INTERP_MAX_ENV_NAME, INTERP_MAX_ENV_VALUE);
			}
			if (json_object_set_new(jenv, k, json_string(json_string_value(v))) < 0)
				goto nomem;
		}
	}
	if (json_object_set_new(req, "code", json_string(code)) < 0 || json_object_set(req, "env_vars", jenv) < 0)
		goto nomem;
	json_decref(jenv);
	jenv = NULL;
	*line = dump_line(req, true);
	if (!*line)
		return err_set(err, ENOMEM, "out of memory");
	if (id)
		snprintf(ctx_id, INTERP_MAX_CTX_ID + 1, "%s", id);
	return 0;
nomem:
	json_decref(jenv);
	json_decref(req);
	return err_set(err, ENOMEM, "out of memory");
}

int interp_context_parse(const json_t *body, char cwd[INTERP_MAX_CWD + 1], space_err *err)
{
	const char *c;

	cwd[0] = 0;
	if (!json_is_object(body))
		return err_set(err, EINVAL, "the body must be a JSON object");
	if (check_language(body, err) < 0)
		return -1;
	if (opt_string(body, "cwd", INTERP_MAX_CWD, &c) < 0)
		return err_set(err, EINVAL, "cwd must be a string of at most %d bytes", INTERP_MAX_CWD);
	if (c && *c) {
		if (c[0] != '/')
			return err_set(err, EINVAL, "cwd must be an absolute path");
		snprintf(cwd, INTERP_MAX_CWD + 1, "%s", c);
	}
	return 0;
}

char *interp_error_line(const char *name, const char *value)
{
	return dump_line(json_pack("{s:s,s:s,s:s,s:s}", "type", "error", "name", name, "value", value,
				   "traceback", ""),
			 true);
}
