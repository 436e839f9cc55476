/* recipe.c -- parse and check a template build's request; canonical steps and their keys */
#include "recipe.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/spec.h"

static const char *const kind_names[STEP__COUNT] = {
	[STEP_RUN] = "run", [STEP_COPY] = "copy", [STEP_ENV] = "env", [STEP_WORKDIR] = "workdir",
	[STEP_USER] = "user",
};

const char *step_kind_name(enum step_kind k)
{
	return (unsigned)k < STEP__COUNT ? kind_names[k] : "?";
}

bool recipe_is_digest(const char *s)
{
	return s && strncmp(s, "sha256:", 7) == 0 && strlen(s) == 71 &&
	       strspn(s + 7, "0123456789abcdef") == 64;
}

static bool chars_ok(const char *s, const char *first, const char *rest, size_t max)
{
	size_t n = s ? strlen(s) : 0;

	return n >= 1 && n <= max && strchr(first, s[0]) && s[0] && strspn(s + 1, rest) == n - 1;
}

#define LOWER "abcdefghijklmnopqrstuvwxyz0123456789"
#define ANY LOWER "ABCDEFGHIJKLMNOPQRSTUVWXYZ_"

bool recipe_name_ok(const char *s)
{
	return chars_ok(s, LOWER, LOWER "._-", 63);
}

bool recipe_tag_ok(const char *s)
{
	return chars_ok(s, ANY, ANY ".-", 127);
}

/* ---- one line of text per step, for logs ---- */

static char *one_line(const char *kind, const char *body)
{
	size_t n = strlen(kind) + strlen(body) + 2;
	char *t = malloc(n > 512 ? 512 : n);

	if (!t)
		return NULL;
	snprintf(t, n > 512 ? 512 : n, "%s %s", kind, body);
	for (char *p = t; *p; p++)
		if (*p == '\n' || *p == '\r' || *p == '\t')
			*p = ' ';
	return t;
}

static char *json_line(const char *kind, const json_t *v)
{
	char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY), *t;

	if (!s)
		return NULL;
	t = one_line(kind, s);
	free(s);
	return t;
}

/* ---- steps ---- */

static int bad(space_err *err, size_t i, const char *field, const char *msg)
{
	return err_set(err, EINVAL, "steps[%zu]%s: %s", i, field, msg);
}

static int parse_run(const json_t *v, size_t i, struct recipe_step *s, space_err *err)
{
	size_t total = 0, j;
	json_t *a;

	if (json_is_string(v)) {
		if (!json_string_length(v) || json_string_length(v) > RECIPE_RUN_MAX ||
		    strlen(json_string_value(v)) != json_string_length(v))
			return bad(err, i, ".run", "a command of 1 to 65536 bytes without NUL");
		s->shell = strdup(json_string_value(v));
		s->canon = json_pack("{s:s}", "run", s->shell);
		s->text = one_line("RUN", s->shell);
		return s->shell && s->canon && s->text ? 0 : err_set(err, ENOMEM, "out of memory");
	}
	if (!json_is_array(v) || !json_array_size(v) || json_array_size(v) > SPEC_ARGV_MAX)
		return bad(err, i, ".run", "a command line (string) or an argv (array of strings)");
	json_array_foreach (v, j, a) {
		if (!json_is_string(a) || strlen(json_string_value(a)) != json_string_length(a) ||
		    (j == 0 && !json_string_length(a)))
			return bad(err, i, ".run", "argv entries are strings without NUL, argv[0] not empty");
		total += json_string_length(a);
	}
	if (total > RECIPE_RUN_MAX)
		return bad(err, i, ".run", "argv over 65536 bytes");
	s->argv = json_deep_copy(v);
	s->canon = json_pack("{s:O}", "run", s->argv);
	s->text = json_line("RUN", v);
	return s->argv && s->canon && s->text ? 0 : err_set(err, ENOMEM, "out of memory");
}

/* A path inside the context: relative, no "..", no NUL; "./" and "/" prefixes and empty
 * components dropped ("" or "." = the whole context). */
static int clean_src(const char *in, char out[RECIPE_PATH_MAX])
{
	size_t o = 0;
	const char *p = in;

	while (*p) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);

		if (n == 2 && p[0] == '.' && p[1] == '.')
			return -1;
		if (n && !(n == 1 && p[0] == '.')) {
			if (o + n + 2 >= RECIPE_PATH_MAX)
				return -1;
			if (o)
				out[o++] = '/';
			memcpy(out + o, p, n);
			o += n;
		}
		p += n + (e ? 1 : 0);
	}
	out[o] = '\0';
	return 0;
}

static bool chown_ok(const char *s)
{
	const char *colon = strchr(s, ':');
	char u[64];

	if (strlen(s) >= 72)
		return false;
	snprintf(u, sizeof(u), "%.*s", colon ? (int)(colon - s) : (int)strlen(s), s);
	if (!chars_ok(u, ANY "-.", ANY "-.", 32))
		return false;
	return !colon || chars_ok(colon + 1, ANY "-.", ANY "-.", 32);
}

static int parse_copy(const json_t *v, size_t i, struct recipe_step *s, space_err *err)
{
	const char *src = NULL, *dest = NULL, *chown = NULL;
	json_error_t jerr;
	char line[RECIPE_PATH_MAX * 2 + 100];

	if (!json_is_object(v) ||
	    json_unpack_ex((json_t *)v, &jerr, JSON_STRICT, "{s:s,s:s,s?s}", "src", &src, "dest", &dest, "chown",
			   &chown) < 0)
		return bad(err, i, ".copy", "{\"src\": string, \"dest\": string, \"chown\"?: \"user[:group]\"}");
	if (strlen(src) >= RECIPE_PATH_MAX || clean_src(src, s->src) < 0)
		return bad(err, i, ".copy.src", "a path inside the context (no \"..\")");
	if (!dest[0] || strlen(dest) >= RECIPE_PATH_MAX || strstr(dest, "/../") || strcmp(dest, "..") == 0 ||
	    strncmp(dest, "../", 3) == 0 || (strlen(dest) >= 3 && strcmp(dest + strlen(dest) - 3, "/..") == 0))
		return bad(err, i, ".copy.dest", "a path (absolute, or relative to the workdir) without \"..\"");
	snprintf(s->dest, sizeof(s->dest), "%s", dest);
	if (chown && (!chown[0] || !chown_ok(chown)))
		return bad(err, i, ".copy.chown", "user or user:group (names or numbers)");
	snprintf(s->chown, sizeof(s->chown), "%s", chown ? chown : "");
	s->canon = chown ? json_pack("{s:{s:s,s:s,s:s}}", "copy", "src", s->src, "dest", s->dest, "chown", s->chown)
			 : json_pack("{s:{s:s,s:s}}", "copy", "src", s->src, "dest", s->dest);
	snprintf(line, sizeof(line), "%s%s%s %s", chown ? "--chown=" : "", chown ? chown : "", chown ? " " : "",
		 s->src[0] ? s->src : ".");
	snprintf(line + strlen(line), sizeof(line) - strlen(line), " %s", s->dest);
	s->text = one_line("COPY", line);
	return s->canon && s->text ? 0 : err_set(err, ENOMEM, "out of memory");
}

static int parse_env(const json_t *v, size_t i, struct recipe_step *s, space_err *err)
{
	const char *k;
	json_t *x;

	if (!json_is_object(v) || !json_object_size(v) || json_object_size(v) > SPEC_ENV_MAX)
		return bad(err, i, ".env", "an object of 1 to 1024 string values");
	json_object_foreach ((json_t *)v, k, x) {
		if (!json_is_string(x))
			return bad(err, i, ".env", "values are strings");
		if (spec_check_env_entry("env", k, json_string_length(x), err) < 0)
			return err_wrap(err, "steps[%zu]", i);
		if (strlen(json_string_value(x)) != json_string_length(x))
			return bad(err, i, ".env", "values without NUL");
	}
	s->env = json_deep_copy(v);
	s->canon = json_pack("{s:O}", "env", s->env);
	s->text = json_line("ENV", v);
	return s->env && s->canon && s->text ? 0 : err_set(err, ENOMEM, "out of memory");
}

static int parse_word(const json_t *v, size_t i, struct recipe_step *s, space_err *err)
{
	const char *k = s->kind == STEP_USER ? "user" : "workdir";
	const char *val = json_string_value(v);
	space_err e = { 0 };

	if (!val || strlen(val) != json_string_length(v))
		return bad(err, i, s->kind == STEP_USER ? ".user" : ".workdir", "a string");
	if (s->kind == STEP_USER ? spec_check_user(val, &e) < 0
				 : !val[0] || strlen(val) >= RECIPE_PATH_MAX || strstr(val, "/../"))
		return bad(err, i, s->kind == STEP_USER ? ".user" : ".workdir",
			   s->kind == STEP_USER ? e.msg : "a path (absolute, or relative to the workdir)");
	snprintf(s->value, sizeof(s->value), "%s", val);
	s->canon = json_pack("{s:s}", k, val);
	s->text = one_line(s->kind == STEP_USER ? "USER" : "WORKDIR", val);
	return s->canon && s->text ? 0 : err_set(err, ENOMEM, "out of memory");
}

static int parse_step(const json_t *v, size_t i, struct recipe_step *s, space_err *err)
{
	const char *key;
	json_t *val;
	int k;

	if (!json_is_object(v) || json_object_size(v) != 1)
		return bad(err, i, "", "an object with one key: run, copy, env, workdir or user");
	json_object_foreach ((json_t *)v, key, val) {
		for (k = 0; k < STEP__COUNT && strcmp(key, kind_names[k]) != 0; k++)
			;
		if (k == STEP__COUNT)
			return err_set(err, EINVAL, "steps[%zu]: unknown step '%.40s' (run, copy, env, workdir, user)", i, key);
		s->kind = (enum step_kind)k;
		switch (s->kind) {
		case STEP_RUN: return parse_run(val, i, s, err);
		case STEP_COPY: return parse_copy(val, i, s, err);
		case STEP_ENV: return parse_env(val, i, s, err);
		default: return parse_word(val, i, s, err);
		}
	}
	return -1;
}

/* ---- the request ---- */

static int parse_tags(const json_t *tags, struct recipe *r, space_err *err)
{
	size_t i;
	json_t *t;

	if (!(r->tags = json_array()))
		return err_set(err, ENOMEM, "out of memory");
	if (!tags)
		return json_array_append_new(r->tags, json_sprintf("%s:latest", r->name)) < 0
			       ? err_set(err, ENOMEM, "out of memory") : 0;
	if (!json_is_array(tags) || !json_array_size(tags) || json_array_size(tags) > 32)
		return err_set(err, EINVAL, "tags: an array of 1 to 32 tags");
	json_array_foreach (tags, i, t) {
		if (!recipe_tag_ok(json_string_value(t)))
			return err_set(err, EINVAL,
				       "tags[%zu]: a tag is 1 to 127 of [A-Za-z0-9_.-], not starting with '.' or '-'", i);
		if (json_array_append_new(r->tags, json_sprintf("%s:%s", r->name, json_string_value(t))) < 0)
			return err_set(err, ENOMEM, "out of memory");
	}
	return 0;
}

static int parse_from(const json_t *from, struct recipe *r, space_err *err)
{
	const char *img = NULL;
	json_error_t jerr;

	if (json_is_string(from)) {
		if (spec_check_ref("from", json_string_value(from), err) < 0)
			return -1;
		snprintf(r->from_ref, sizeof(r->from_ref), "%s", json_string_value(from));
		return 0;
	}
	if (json_is_object(from) && json_unpack_ex((json_t *)from, &jerr, JSON_STRICT, "{s:s}", "image", &img) == 0) {
		if (!recipe_is_digest(img))
			return err_set(err, EINVAL, "from.image: the digest of an uploaded context (sha256:<64 hex>)");
		snprintf(r->from_image, sizeof(r->from_image), "%s", img);
		return 0;
	}
	return err_set(err, EINVAL, "from: a template ref (\"base\", \"name:tag\", \"sha256:...\") or {\"image\": \"sha256:...\"}");
}

static int parse_start(const json_t *v, struct recipe *r, space_err *err)
{
	const char *cmd = NULL, *ready = NULL;
	int timeout = 60;
	json_error_t jerr;

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_object(v) || json_unpack_ex((json_t *)v, &jerr, JSON_STRICT, "{s:s,s?s,s?i}", "cmd", &cmd, "ready",
						 &ready, "timeout_s", &timeout) < 0)
		return err_set(err, EINVAL, "start: {\"cmd\": string, \"ready\"?: string, \"timeout_s\"?: integer}");
	if (!cmd[0] || strlen(cmd) > RECIPE_RUN_MAX || (ready && (!ready[0] || strlen(ready) > RECIPE_RUN_MAX)))
		return err_set(err, EINVAL, "start: cmd and ready are commands of 1 to 65536 bytes");
	if (timeout < 1 || timeout > RECIPE_START_TIMEOUT_MAX)
		return err_set(err, EINVAL, "start.timeout_s: 1 to %d", RECIPE_START_TIMEOUT_MAX);
	r->start = ready ? json_pack("{s:s,s:s,s:i}", "cmd", cmd, "ready", ready, "timeout_s", timeout)
			 : json_pack("{s:s,s:i}", "cmd", cmd, "timeout_s", timeout);
	return r->start ? 0 : err_set(err, ENOMEM, "out of memory");
}

static int parse_extras(const json_t *expose, const json_t *labels, struct recipe *r, space_err *err)
{
	size_t i;
	const char *k;
	json_t *v;

	if (expose) {
		if (!json_is_array(expose) || json_array_size(expose) > 64)
			return err_set(err, EINVAL, "expose: an array of at most 64 ports");
		json_array_foreach (expose, i, v)
			if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 65535)
				return err_set(err, EINVAL, "expose[%zu]: a port 1 to 65535", i);
		r->expose = json_deep_copy(expose);
	}
	if (labels) {
		if (!json_is_object(labels) || json_object_size(labels) > SPEC_META_MAX)
			return err_set(err, EINVAL, "labels: an object of at most %d strings", SPEC_META_MAX);
		json_object_foreach ((json_t *)labels, k, v)
			if (!json_is_string(v) || spec_check_meta_entry(k, json_string_length(v), err) < 0)
				return err->code ? err_wrap(err, "labels") : err_set(err, EINVAL, "labels: values are strings");
		r->labels = json_deep_copy(labels);
	}
	return 0;
}

static int parse_sizes(int vcpus, int mem, int disk, struct recipe *r, space_err *err)
{
	if (disk && (disk < 64 || disk > RECIPE_DISK_MAX_MIB))
		return err_set(err, EINVAL, "disk_mib: 64 to %d (and not below the base's image)", RECIPE_DISK_MAX_MIB);
	r->disk_mib = disk;
	if (vcpus && (vcpus < 1 || vcpus > SPEC_VCPUS_MAX))
		return err_set(err, EINVAL, "vcpus: 1 to %d", SPEC_VCPUS_MAX);
	if (mem && (mem < SPEC_MEMORY_MIN || mem > SPEC_MEMORY_MAX))
		return err_set(err, EINVAL, "memory_mib: %d to %d", SPEC_MEMORY_MIN, SPEC_MEMORY_MAX);
	r->vcpus = vcpus;
	r->memory_mib = mem;
	return 0;
}

static int parse_steps(const json_t *steps, struct recipe *r, space_err *err)
{
	size_t i;
	json_t *v;

	if (!steps)
		return 0;
	if (!json_is_array(steps) || json_array_size(steps) > RECIPE_STEPS_MAX)
		return err_set(err, EINVAL, "steps: an array of at most %d steps", RECIPE_STEPS_MAX);
	if (json_array_size(steps) && !(r->steps = calloc(json_array_size(steps), sizeof(*r->steps))))
		return err_set(err, ENOMEM, "out of memory");
	json_array_foreach (steps, i, v) {
		r->nsteps = i + 1;
		if (parse_step(v, i, &r->steps[i], err) < 0)
			return -1;
		if (r->steps[i].kind == STEP_COPY && !r->context[0])
			return err_set(err, EINVAL, "steps[%zu]: a copy needs a context (PUT /v1/contexts)", i);
	}
	return 0;
}

int recipe_parse(const json_t *body, struct recipe *r, space_err *err)
{
	const char *name = NULL, *context = NULL;
	json_t *tags = NULL, *from = NULL, *steps = NULL, *start = NULL, *network = NULL, *expose = NULL,
	       *labels = NULL;
	int vcpus = 0, mem = 0, disk = 0;
	json_error_t jerr;

	memset(r, 0, sizeof(*r));
	if (!json_is_object(body) ||
	    json_unpack_ex((json_t *)body, &jerr, JSON_STRICT, "{s:s,s?o,s:o,s?s,s?o,s?o,s?i,s?i,s?i,s?o,s?o,s?o}",
			   "name", &name, "tags", &tags, "from", &from, "context", &context, "steps", &steps, "start",
			   &start, "vcpus", &vcpus, "memory_mib", &mem, "disk_mib", &disk, "network", &network, "expose", &expose, "labels",
			   &labels) < 0)
		return err_set(err, EINVAL, "%s", jerr.text);
	if (!recipe_name_ok(name))
		return err_set(err, EINVAL, "name: 1 to 63 of [a-z0-9._-], starting with a letter or digit");
	snprintf(r->name, sizeof(r->name), "%s", name);
	if (context) {
		if (!recipe_is_digest(context))
			return err_set(err, EINVAL, "context: the digest PUT /v1/contexts answered (sha256:<64 hex>)");
		snprintf(r->context, sizeof(r->context), "%s", context);
	}
	if (network && !json_is_null(network) && !json_is_object(network))
		return err_set(err, EINVAL, "network: an egress policy object");
	if (network && json_is_object(network) && !(r->network = json_deep_copy(network)))
		return err_set(err, ENOMEM, "out of memory");
	if (parse_tags(tags, r, err) < 0 || parse_from(from, r, err) < 0 || parse_steps(steps, r, err) < 0 ||
	    parse_start(start, r, err) < 0 || parse_sizes(vcpus, mem, disk, r, err) < 0 ||
	    parse_extras(expose, labels, r, err) < 0)
		return -1;
	return 0;
}

void recipe_free(struct recipe *r)
{
	for (size_t i = 0; i < r->nsteps; i++) {
		struct recipe_step *s = &r->steps[i];

		json_decref(s->canon);
		json_decref(s->argv);
		json_decref(s->env);
		free(s->text);
		free(s->shell);
	}
	free(r->steps);
	json_decref(r->tags);
	json_decref(r->start);
	json_decref(r->network);
	json_decref(r->expose);
	json_decref(r->labels);
	memset(r, 0, sizeof(*r));
}

/* ---- state and keys ---- */

int recipe_resolve_dest(const char *dest, const char *workdir, char out[RECIPE_PATH_MAX], space_err *err)
{
	int n;

	if (dest[0] == '/')
		n = snprintf(out, RECIPE_PATH_MAX, "%s", dest);
	else
		n = snprintf(out, RECIPE_PATH_MAX, "%s%s%s", workdir[0] ? workdir : "/",
			     workdir[0] && workdir[strlen(workdir) - 1] != '/' ? "/" : "", dest);
	if (n < 0 || n >= RECIPE_PATH_MAX)
		return err_set(err, EINVAL, "path %.100s... is too long", dest);
	return 0;
}

int recipe_state_at(const struct recipe *r, size_t upto, const json_t *base_env, const char *base_workdir,
		    const char *base_user, struct recipe_state *out, space_err *err)
{
	memset(out, 0, sizeof(*out));
	out->env = json_is_object(base_env) ? json_deep_copy(base_env) : json_object();
	if (!out->env)
		return err_set(err, ENOMEM, "out of memory");
	snprintf(out->workdir, sizeof(out->workdir), "%s", base_workdir && base_workdir[0] ? base_workdir : "/");
	snprintf(out->user, sizeof(out->user), "%s", base_user && base_user[0] ? base_user : "root");
	for (size_t i = 0; i < upto && i < r->nsteps; i++) {
		const struct recipe_step *s = &r->steps[i];
		char wd[RECIPE_PATH_MAX];

		if (s->kind == STEP_ENV && json_object_update(out->env, s->env) < 0)
			return err_set(err, ENOMEM, "out of memory");
		if (s->kind == STEP_USER)
			snprintf(out->user, sizeof(out->user), "%s", s->value);
		if (s->kind == STEP_WORKDIR) {
			if (recipe_resolve_dest(s->value, out->workdir, wd, err) < 0)
				return -1;
			snprintf(out->workdir, sizeof(out->workdir), "%s", wd);
		}
	}
	return 0;
}

void recipe_state_free(struct recipe_state *s)
{
	json_decref(s->env);
	s->env = NULL;
}

bool recipe_step_has_layer(const struct recipe_step *s)
{
	return s->kind == STEP_RUN || s->kind == STEP_COPY;
}

void recipe_step_key(const char *parent_key, const struct recipe_step *s, const char *inputs, char out[65])
{
	char *canon = json_dumps(s->canon, JSON_COMPACT | JSON_SORT_KEYS);
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();

	out[0] = '\0';
	if (ctx && canon && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1) {
		EVP_DigestUpdate(ctx, "space-layer-v1\n", 15);
		EVP_DigestUpdate(ctx, parent_key, strlen(parent_key));
		EVP_DigestUpdate(ctx, "\n", 1);
		EVP_DigestUpdate(ctx, canon, strlen(canon));
		EVP_DigestUpdate(ctx, "\n", 1);
		EVP_DigestUpdate(ctx, inputs ? inputs : "", inputs ? strlen(inputs) : 0);
		EVP_DigestFinal_ex(ctx, md, &len);
		for (unsigned int i = 0; i < 32 && i < len; i++)
			snprintf(out + 2 * i, 3, "%02x", md[i]);
	}
	EVP_MD_CTX_free(ctx);
	free(canon);
}
