/* e2b_sandboxes.c -- PLACEHOLDER: being written */
#include "e2b.h"
#include "connect.h"
void e2b_create(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void e2b_list(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void e2b_get(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void e2b_kill(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void e2b_connect(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void e2b_resume(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void e2b_pause(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void e2b_timeout(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void e2b_refresh(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void e2b_metrics(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void e2b_network(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void e2b_fork(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void e2b_snapshot(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void e2b_snapshots_list(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void e2b_templates_list(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
