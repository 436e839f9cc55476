/* envd_process.c -- PLACEHOLDER: being written */
#include "e2b.h"
#include "connect.h"
void envd_process_start(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void envd_process_connect(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void envd_process_list(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void envd_process_send_input(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void envd_process_stream_input(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void envd_process_send_signal(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void envd_process_close_stdin(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void envd_process_update(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
