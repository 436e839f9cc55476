/* envd_fs.c -- PLACEHOLDER: being written */
#include "e2b.h"
#include "connect.h"
void envd_fs_stat(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void envd_fs_make_dir(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void envd_fs_move(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void envd_fs_list_dir(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void envd_fs_remove(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void envd_fs_watch_dir(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void envd_fs_create_watcher(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void envd_fs_get_watcher_events(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
void envd_fs_remove_watcher(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "not implemented yet");
}
