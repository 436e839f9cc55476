/* err.c -- error values with context (see err.h) */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int err_set(space_err *e, int code, const char *fmt, ...)
{
	va_list ap;

	if (!e)
		return -1;
	e->code = code ? code : EIO;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	return -1;
}

int err_sys(space_err *e, int code, const char *fmt, ...)
{
	va_list ap;
	size_t n;

	if (!e)
		return -1;
	e->code = code ? code : EIO;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	n = strlen(e->msg);
	snprintf(e->msg + n, sizeof(e->msg) - n, ": %s", strerror(e->code));
	return -1;
}

int err_wrap(space_err *e, const char *fmt, ...)
{
	char prefix[512], old[sizeof(e->msg)];
	va_list ap;

	if (!e)
		return -1;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, e->msg, sizeof(old));
	snprintf(e->msg, sizeof(e->msg), "%s: %s", prefix, old);
	if (!e->code)
		e->code = EIO;
	return -1;
}

void err_clear(space_err *e)
{
	if (e) {
		e->code = 0;
		e->msg[0] = '\0';
	}
}

int err_http_status(int code)
{
	switch (code) {
	case EINVAL:
	case EBADMSG:
		return 400;
	case EACCES:
	case EPERM:
		return 401;
	case ENOENT:
	case ESRCH:
		return 404;
	case EBUSY:
	case EEXIST:
	case EALREADY:
	case ECANCELED:
		return 409;
	case EDQUOT:
		return 429;
	case ENOSPC:
	case EAGAIN:
		return 503;
	case E2BIG:
	case EMSGSIZE:
		return 413;
	case ETIMEDOUT:
		return 504;
	default:
		return 500;
	}
}

const char *err_code_name(int code)
{
	switch (err_http_status(code)) {
	case 400:
		return "bad_request";
	case 401:
		return "unauthorized";
	case 404:
		return "not_found";
	case 409:
		return "conflict";
	case 413:
		return "payload_too_large";
	case 429:
		return "at_capacity";
	case 503:
		return "unavailable";
	case 504:
		return "timeout";
	default:
		return "internal";
	}
}
