/* envd_files.c -- PLACEHOLDER: being written */
#include "e2b.h"
#include "connect.h"
void envd_health(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void envd_files_get(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void envd_files_post(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
