/* dockerfile.h -- a Dockerfile turned into a template build request (POST
 * /v1/templates/builds) for `spacectl template build`.  Pure: text in, JSON out, no file
 * system.  Tests: tests/unit/test_cli_dockerfile.c.
 *
 * Docker's parser rules: parser directives at the top (`# escape=`), line continuations,
 * comments, case-insensitive instructions, JSON exec form or shell form, ARG before and after
 * FROM (--build-arg overrides), $VAR / ${VAR} / ${VAR:-default} (and :+ - +) substitution with
 * quote removal in FROM, COPY, ADD, ENV, LABEL, WORKDIR, USER, EXPOSE; RUN and CMD are left to
 * the shell.  One stage.  What has no equivalent is refused with the line of the instruction:
 * "Dockerfile:7: HEALTHCHECK is not supported".
 */
#ifndef SPACE_CLI_DOCKERFILE_H
#define SPACE_CLI_DOCKERFILE_H

#include <jansson.h>
#include <stddef.h>

#include "err.h"

/* Limits of the build API (the daemon checks them too). */
#define DF_STEPS_MAX 128
#define DF_EXPOSE_MAX 64
#define DF_NAME_MAX 63 /* a template's name: recipe_name_ok, [a-z0-9][a-z0-9._-]{0,62} */
#define DF_TAG_MAX 127 /* a tag: recipe_tag_ok, [A-Za-z0-9_][A-Za-z0-9._-]{0,126} */
#define DF_TAGS_MAX 32 /* tags of one build */

struct dockerfile {
	/* {"from"?, "steps", "start"?, "expose"?, "labels"?}: the request less name, tags and
	 * context.  "from" is missing when the base is an image archive (below). */
	json_t *req;
	/* One object per step, in step order: {"line": N, "text": "RUN make"}, the instruction
	 * the step comes from, for messages and progress lines. */
	json_t *meta;
	/* FROM oci-archive:PATH or docker-archive:PATH: PATH (relative to the current
	 * directory, or absolute), to upload and name as {"image": digest}; else NULL. */
	char *archive;
	/* The FROM instruction's line, for messages about the base. */
	int from_line;
};

/* Warnings (MAINTAINER ignored, build args no ARG uses...): the message alone. */
typedef void (*df_warn_fn)(const char *msg, void *arg);

/*
 * Parse a Dockerfile.  name is the file's name in messages ("Dockerfile" when NULL);
 * build_args (may be NULL) an object of strings from --build-arg.  0 with *out filled (free
 * it with dockerfile_free), or -1 with e set: "<name>:<line>: <what>", EINVAL.
 */
int dockerfile_parse(const char *name, const char *text, size_t len, const json_t *build_args,
		     df_warn_fn warn, void *warn_arg, struct dockerfile *out, space_err *e);
void dockerfile_free(struct dockerfile *df);

/*
 * Check the copy steps' sources against what the context holds (paths relative to its
 * root, '/'-separated, every directory's entries after it): a plain source must be one of
 * them (or "." for the root); a wildcard source ('*', '?', '[') becomes one copy step per
 * path it matches (fnmatch with FNM_PATHNAME, in the paths' order), into a directory when it
 * matches more than one.  0, or -1 with e set ("<name>:<line>: COPY x: not in the build
 * context...").
 */
int dockerfile_resolve_sources(struct dockerfile *df, const char *name, const char *const *paths,
			       size_t npaths, space_err *e);

/*
 * -t NAME[:TAG] split into the template's name and a tag part ("latest" when there is
 * none), each checked as the daemon checks them (recipe_name_ok, recipe_tag_ok: the build
 * request's "tags" hold the tag parts alone).  0, or -1 with e set ("-t ARG: a tag is ...",
 * EINVAL).
 */
int dockerfile_tag_arg(const char *arg, char name[DF_NAME_MAX + 1], char tag[DF_TAG_MAX + 1],
		       space_err *e);

/* Whether the request has a copy step (it then needs a context). */
int dockerfile_has_copy(const struct dockerfile *df);

/* argv as one POSIX shell command line: each word as it is when only [A-Za-z0-9_@%+=:,./-]
 * (not an assignment or reserved word in front), else in single quotes (' as '\'').
 * NULL when out of memory. */
char *dockerfile_shell_join(const json_t *argv);

#endif
