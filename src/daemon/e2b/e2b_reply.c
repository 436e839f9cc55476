/* e2b_reply.c -- E2B's error shape on its control plane and envd's plain routes:
 * {"code": <HTTP status>, "message": "..."} */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "e2b.h"

json_t *e2b_error_body(int status, const char *message)
{
	return json_pack("{s:i,s:s}", "code", status, "message", message ? message : "");
}

void e2b_reply_error(struct evhttp_request *req, int status, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	http_reply_json(req, status, e2b_error_body(status, msg));
}

void e2b_reply_err(struct evhttp_request *req, const space_err *e)
{
	int status = err_http_status(e->code);

	e2b_reply_error(req, status, "%s", e->msg[0] ? e->msg : strerror(e->code));
}
