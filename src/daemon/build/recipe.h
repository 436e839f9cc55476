/* recipe.h -- a template build's request (POST /v1/templates/builds) as the core takes it:
 * parsed, every value checked, each step in one canonical form, and the cache key of each
 * step's result. Pure: no I/O, no daemon (tests/unit/test_build_recipe.c). */
#ifndef SPACE_BUILD_RECIPE_H
#define SPACE_BUILD_RECIPE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "err.h"

#define RECIPE_STEPS_MAX 128
#define RECIPE_RUN_MAX 65536        /* a run step's command (or its argv, all bytes) */
#define RECIPE_PATH_MAX 1024
#define RECIPE_START_TIMEOUT_MAX 600
#define RECIPE_DIGEST_LEN 72
#define RECIPE_DISK_MAX_MIB (256 * 1024)        /* "sha256:" + 64 hex + NUL */

enum step_kind { STEP_RUN, STEP_COPY, STEP_ENV, STEP_WORKDIR, STEP_USER, STEP__COUNT };
const char *step_kind_name(enum step_kind k);

struct recipe_step {
	enum step_kind kind;
	json_t *canon;      /* the step as one canonical object ({"run": ...}, {"copy": {...}} ...) */
	char *text;         /* one line for logs and GET: "RUN apt-get install -y jq" */
	/* run: a shell command (argv NULL) or an argv (shell NULL) */
	char *shell;
	json_t *argv;
	/* copy: context path (no leading '/', no "..", "" = the whole context), destination
	 * (absolute once resolved against the workdir in force: recipe_resolve_dest) and the
	 * owner to give what it copies ("" = root:root, as Docker's COPY) */
	char src[RECIPE_PATH_MAX], dest[RECIPE_PATH_MAX], chown[72];
	/* env: the variables it sets; workdir, user: the value */
	json_t *env;
	char value[RECIPE_PATH_MAX];
};

struct recipe {
	char name[64];
	json_t *tags;                      /* array of "name:tag", at least one ("name:latest") */
	char from_ref[128];                /* a template ref; "" when from_image */
	char from_image[RECIPE_DIGEST_LEN]; /* a context digest holding an image archive; "" else */
	char context[RECIPE_DIGEST_LEN];   /* "" when no step copies */
	struct recipe_step *steps;
	size_t nsteps;
	json_t *start;                     /* {"cmd", "ready"?, "timeout_s"} or NULL */
	int vcpus, memory_mib;             /* 0: the base's */
	int disk_mib;                      /* the image's size; 0: the base's */
	json_t *network;                   /* the builder's egress policy (as given), NULL: deny all */
	json_t *expose;                    /* array of ports, or NULL */
	json_t *labels;                    /* object of strings, or NULL */
};

/* Parses and checks body; EINVAL with a message naming the field ("steps[2].copy.src: ...").
 * The network policy is only checked to be an object here: the core parses it as any. */
int recipe_parse(const json_t *body, struct recipe *out, space_err *err);
void recipe_free(struct recipe *r);

/* A context or image digest as a client writes it: "sha256:<64 lowercase hex>". */
bool recipe_is_digest(const char *s);
/* A template name: [a-z0-9][a-z0-9._-]{0,62}. A tag part: [A-Za-z0-9_][A-Za-z0-9._-]{0,127}. */
bool recipe_name_ok(const char *s);
bool recipe_tag_ok(const char *s);

/* What commands run with at step i and after: the environment, working directory and user
 * that the env, workdir and user steps before i (base_* first) make. */
struct recipe_state {
	json_t *env;        /* object (new reference) */
	char workdir[RECIPE_PATH_MAX];
	char user[64];
};
/* The state before step `upto` (upto = nsteps: the template's defaults), from the base's env,
 * workdir ("" = "/") and user. -1 ENOMEM. */
int recipe_state_at(const struct recipe *r, size_t upto, const json_t *base_env, const char *base_workdir,
		    const char *base_user, struct recipe_state *out, space_err *err);
void recipe_state_free(struct recipe_state *s);
/* A copy's destination made absolute against workdir (a trailing '/' kept: "into this
 * directory"). -1 EINVAL when too long. */
int recipe_resolve_dest(const char *dest, const char *workdir, char out[RECIPE_PATH_MAX], space_err *err);

/* The cache key of step i's result: sha256 over the parent key, the step's canonical form and
 * what it reads (inputs: for a copy, the hash of the context entries under its src; else "").
 * A step that changes no disk (env, workdir, user) still gets a key: later steps depend on it.
 * out: 64 hex + NUL. */
void recipe_step_key(const char *parent_key, const struct recipe_step *s, const char *inputs, char out[65]);
/* Whether step s writes the disk (run, copy): only those have a layer. */
bool recipe_step_has_layer(const struct recipe_step *s);

#endif
