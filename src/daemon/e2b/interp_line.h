/* interp_line.h -- the code interpreter's wire, pure (unit-tested: tests/unit/test_interp.c):
 * what a client's POST /execute and POST /contexts may say, and which lines the guest's
 * interpreter (guest/interp/space_interp.py) may send back. Every guest line is hostile: it is
 * parsed, checked against the few known shapes and re-encoded; anything else is dropped. */
#ifndef SPACE_E2B_INTERP_LINE_H
#define SPACE_E2B_INTERP_LINE_H

#include <jansson.h>
#include <stddef.h>

#include "err.h"

/* One line from the guest at most (a PNG figure is the largest). Longer lines are dropped. */
#define INTERP_MAX_LINE (4u << 20)
/* The code of one execution, and its env_vars. */
#define INTERP_MAX_CODE (1u << 20)
#define INTERP_MAX_ENV 128
#define INTERP_MAX_ENV_NAME 256
#define INTERP_MAX_ENV_VALUE (32u << 10)
/* A context's working directory. */
#define INTERP_MAX_CWD 1024
/* The context id a client may name (ours: "ctx-" + 16 hex). */
#define INTERP_MAX_CTX_ID 64

enum interp_line_type {
	INTERP_LINE_BAD = 0, /* not ours: dropped */
	INTERP_LINE_STDOUT,
	INTERP_LINE_STDERR,
	INTERP_LINE_RESULT,
	INTERP_LINE_ERROR,
	INTERP_LINE_COUNT, /* number_of_executions */
	INTERP_LINE_END,   /* end_of_execution */
};

/* Checks one guest line (without its '\n') and re-encodes it: a malloc'd compact JSON text
 * with only the known fields, or NULL (BAD) with *type set either way. */
char *interp_line_check(const char *line, size_t len, enum interp_line_type *type);

/* POST /execute's body: {code, context_id?, language?, env_vars?}. On success *line is the
 * malloc'd request line for the guest ("{...}\n"), ctx_id the named context ("" if none). */
int interp_execute_parse(const json_t *body, char **line, char ctx_id[INTERP_MAX_CTX_ID + 1],
			 space_err *err);
/* POST /contexts's body: {language?, cwd?}; cwd "" if absent. */
int interp_context_parse(const json_t *body, char cwd[INTERP_MAX_CWD + 1], space_err *err);
/* The error line the daemon itself sends (e.g. the interpreter died): compact JSON + "\n". */
char *interp_error_line(const char *name, const char *value);

#endif
