/* spec.c -- string maps and lists for typed requests, and the validators every front end uses */
#include "spec.h"

#include <stdlib.h>
#include <string.h>

#include "proto.h"

/* ---- strmap ---- */

static int grow(void ***a, void ***b, size_t *cap, size_t need)
{
	size_t n = *cap ? *cap * 2 : 8;
	void **na, **nb;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	na = realloc(*a, n * sizeof(*na));
	if (!na)
		return -1;
	*a = na;
	if (b) {
		nb = realloc(*b, n * sizeof(*nb));
		if (!nb)
			return -1;
		*b = nb;
	}
	*cap = n;
	return 0;
}

int strmap_set(struct strmap *m, const char *key, const char *value)
{
	char *v = strdup(value), *k;

	if (!v)
		return -1;
	for (size_t i = 0; i < m->n; i++) {
		if (strcmp(m->keys[i], key) == 0) {
			free(m->values[i]);
			m->values[i] = v;
			return 0;
		}
	}
	k = strdup(key);
	if (!k || grow((void ***)&m->keys, (void ***)&m->values, &m->cap, m->n + 1) < 0) {
		free(k);
		free(v);
		return -1;
	}
	m->keys[m->n] = k;
	m->values[m->n] = v;
	m->n++;
	return 0;
}

const char *strmap_get(const struct strmap *m, const char *key)
{
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->keys[i], key) == 0)
			return m->values[i];
	return NULL;
}

void strmap_free(struct strmap *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->keys[i]);
		free(m->values[i]);
	}
	free(m->keys);
	free(m->values);
	memset(m, 0, sizeof(*m));
}

json_t *strmap_to_json(const struct strmap *m)
{
	json_t *o = json_object();

	for (size_t i = 0; o && i < m->n; i++) {
		if (json_object_set_new(o, m->keys[i], json_string(m->values[i])) < 0) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

/* ---- strlist ---- */

int strlist_add(struct strlist *l, const char *s)
{
	char *c = strdup(s);

	if (!c || grow((void ***)&l->v, NULL, &l->cap, l->n + 1) < 0) {
		free(c);
		return -1;
	}
	l->v[l->n++] = c;
	return 0;
}

void strlist_free(struct strlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

json_t *strlist_to_json(const struct strlist *l)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < l->n; i++) {
		if (json_array_append_new(a, json_string(l->v[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* ---- validators ---- */

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
	       c == '-' || c == '.';
}

int spec_check_env_entry(const char *what, const char *key, size_t vlen, space_err *err)
{
	size_t n = strlen(key);

	if (n == 0 || n > SPEC_ENV_KEY_MAX || strchr(key, '='))
		return err_set(err, EINVAL, "%s: invalid variable name '%.64s' (1 to %d bytes, no '=')", what,
			       key, SPEC_ENV_KEY_MAX);
	if (vlen > SPEC_ENV_VALUE_MAX)
		return err_set(err, EINVAL, "%s.%.64s: values are at most %d bytes", what, key,
			       SPEC_ENV_VALUE_MAX);
	return 0;
}

int spec_check_meta_entry(const char *key, size_t vlen, space_err *err)
{
	size_t n = strlen(key);

	if (n == 0 || n > SPEC_META_KEY_MAX)
		return err_set(err, EINVAL, "metadata keys must be 1 to %d bytes", SPEC_META_KEY_MAX);
	if (vlen > SPEC_META_VALUE_MAX)
		return err_set(err, EINVAL, "metadata.%.64s: values are at most %d bytes", key,
			       SPEC_META_VALUE_MAX);
	return 0;
}

int spec_check_argv_entry(size_t i, const char *arg, size_t len, space_err *err)
{
	if (memchr(arg, '\0', len))
		return err_set(err, EINVAL, "argv[%zu] contains a NUL byte", i);
	if (i == 0 && len == 0)
		return err_set(err, EINVAL, "argv[0] must not be empty");
	return 0;
}

int spec_check_cwd(const char *cwd, space_err *err)
{
	size_t n = strlen(cwd);

	if (n >= SPEC_CWD_MAX || (n && cwd[0] != '/'))
		return err_set(err, EINVAL, "cwd must be an absolute path shorter than %d bytes", SPEC_CWD_MAX);
	return 0;
}

int spec_check_tag(const char *tag, size_t len, space_err *err)
{
	if (len > SPEC_TAG_MAX || strlen(tag) != len)
		return err_set(err, EINVAL, "tag must be at most %d bytes, without NUL", SPEC_TAG_MAX);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)tag[i] < 0x20 || tag[i] == 0x7f)
			return err_set(err, EINVAL, "tag must not contain control characters");
	return 0;
}

int spec_check_user(const char *u, space_err *err)
{
	size_t n = strlen(u);

	if (n == 0 || n > SPEC_USER_MAX)
		goto bad;
	for (size_t i = 0; i < n; i++)
		if (!name_char(u[i]))
			goto bad;
	return 0;
bad:
	return err_set(err, EINVAL, "user must be a user name (1 to %d letters, digits, _ - .)", SPEC_USER_MAX);
}

static int check_exec_env(const struct strmap *env, space_err *err)
{
	if (env->n > SPEC_ENV_MAX)
		return err_set(err, EINVAL, "env has more than %d entries", SPEC_ENV_MAX);
	for (size_t i = 0; i < env->n; i++)
		if (spec_check_env_entry("env", env->keys[i], strlen(env->values[i]), err) < 0)
			return -1;
	return 0;
}

int spec_check_exec(const struct exec_req *r, space_err *err)
{
	if (r->argv.n < 1 || r->argv.n > SPEC_ARGV_MAX)
		return err_set(err, EINVAL, "argv must be an array of 1 to %d strings", SPEC_ARGV_MAX);
	for (size_t i = 0; i < r->argv.n; i++)
		if (spec_check_argv_entry(i, r->argv.v[i], strlen(r->argv.v[i]), err) < 0)
			return -1;
	if (check_exec_env(&r->env, err) < 0 || spec_check_cwd(r->cwd, err) < 0 ||
	    (r->user[0] && spec_check_user(r->user, err) < 0) ||
	    spec_check_tag(r->tag, strlen(r->tag), err) < 0)
		return -1;
	if (r->token_ttl_s < 0 || r->token_ttl_s > SPEC_TOKEN_TTL_MAX)
		return err_set(err, EINVAL, "token_ttl_s must be 1 to %d", SPEC_TOKEN_TTL_MAX);
	if ((r->pty_rows == 0) != (r->pty_cols == 0) || r->pty_rows > PROTO_PTY_MAX_DIM ||
	    r->pty_cols > PROTO_PTY_MAX_DIM)
		return err_set(err, EINVAL, "pty rows and cols must be 1 to %d", PROTO_PTY_MAX_DIM);
	return 0;
}

int spec_check_snapshot_name(const char *name, space_err *err)
{
	size_t n = strlen(name);

	if (n == 0 || n > SPEC_NAME_MAX || name[0] == '.' || name[0] == '-')
		goto bad;
	for (size_t i = 0; i < n; i++)
		if (!name_char(name[i]))
			goto bad;
	if (id_valid(name, "sn-"))
		return err_set(err, EINVAL, "a snapshot name must not look like a snapshot id");
	return 0;
bad:
	return err_set(err, EINVAL,
		       "a snapshot name is 1 to %d letters, digits, _ - . (not starting with . or -)",
		       SPEC_NAME_MAX);
}

int spec_check_ref(const char *what, const char *ref, space_err *err)
{
	size_t n = strlen(ref);

	if (n == 0 || n > 127)
		return err_set(err, EINVAL, "%s must be 1 to 127 characters", what);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)ref[i] < 0x21 || (unsigned char)ref[i] > 0x7e)
			return err_set(err, EINVAL, "%s must be printable ASCII without spaces", what);
	return 0;
}

void create_req_free(struct create_req *r)
{
	strmap_free(&r->env);
	strmap_free(&r->metadata);
	json_decref(r->network);
	r->network = NULL;
}

void exec_req_free(struct exec_req *r)
{
	strlist_free(&r->argv);
	strmap_free(&r->env);
}
