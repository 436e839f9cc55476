/* err.h -- errors that carry context up the call chain (contract: docs/design/errors.md) */
#ifndef SPACE_ERR_H
#define SPACE_ERR_H

#include <errno.h>
#include <stddef.h>

/*
 * A failing function fills a space_err and returns -1.  `code` is an errno
 * value chosen for its meaning to the caller (ENOENT: unknown id, EINVAL: bad
 * input, EBUSY: wrong state, E2BIG: too large, EACCES: not allowed, EIO and
 * others: internal).  The API maps it to an HTTP status with err_http_status().
 * Callers higher up prefix context with err_wrap(): "starting vm sb-1: qmp
 * connect: Connection refused".
 */
typedef struct space_err {
	int code;
	char msg[1024];
} space_err;

int err_set(space_err *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Like err_set, appending ": strerror(code)". */
int err_sys(space_err *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Prefix context to an error already set; keeps its code. */
int err_wrap(space_err *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void err_clear(space_err *e);

/* HTTP status and stable error code string ("not_found", ...) for e->code. */
int err_http_status(int code);
const char *err_code_name(int code);

#endif
