/* api.h -- control-plane handlers, one file per resource (api_<resource>.c), routed by api.c */
#ifndef SPACE_API_H
#define SPACE_API_H

#include "http/http.h"

/* api_info.c */
void api_info_get(struct http_req *r);
/* api_templates.c */
void api_templates_list(struct http_req *r);
void api_templates_get(struct http_req *r);
/* api_sandboxes.c */
void api_sandboxes_create(struct http_req *r);
void api_sandboxes_list(struct http_req *r);
void api_sandboxes_get(struct http_req *r);
void api_sandboxes_delete(struct http_req *r);
void api_sandboxes_logs(struct http_req *r);
/* api_operations.c */
void api_operations_get(struct http_req *r);
/* api_sessions.c */
void api_sessions_create(struct http_req *r);
void api_sessions_list(struct http_req *r);
void api_sessions_get(struct http_req *r);
void api_sessions_token(struct http_req *r);

/* The stored sandbox named by path parameter i: 0, or -1 having answered
 * 404 (malformed or unknown id) or 500. Clear *out with sandbox_rec_clear. */
struct sandbox_rec;
int api_sandbox_param(struct http_req *r, int i, struct sandbox_rec *out);

/* Parses "state=a,b" into a mask of 1 << sb_state (0 when absent). -1 with
 * err on an unknown state. */
int api_parse_states(const char *list, unsigned *mask, space_err *err);

#endif
