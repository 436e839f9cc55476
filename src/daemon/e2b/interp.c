/* interp.c -- PLACEHOLDER: being written */
#include "e2b.h"
#include "connect.h"
void interp_execute(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void interp_contexts_list(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void interp_contexts_create(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void interp_contexts_delete(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void interp_contexts_restart(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void interp_contexts_interrupt(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
