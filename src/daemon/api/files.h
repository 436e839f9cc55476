/* files.h -- /v1's file routes over the file-operation engine (front/fop.h), on both planes:
 * the control plane (API key) and the data plane (a files token) */
#ifndef SPACE_API_FILES_H
#define SPACE_API_FILES_H

#include "front/fop.h"
#include "http/http.h"

/* The routes, for the control plane (API key) and the data plane (a files token). */
void api_files_read(struct http_req *r);
void api_files_write(struct http_req *r);
void api_files_remove(struct http_req *r);
void api_files_stat(struct http_req *r);
void api_files_list(struct http_req *r);
void api_files_mkdir(struct http_req *r);
void api_files_rename(struct http_req *r);
void api_files_tar_get(struct http_req *r);
void api_files_tar_put(struct http_req *r);
void api_files_watch(struct http_req *r);
void api_tokens_create(struct http_req *r);

/* The routes whose request bodies stream (http/body.h), on both planes. */
#define FILES_STREAM_ROUTE_ENTRIES                                           \
	{ EVHTTP_REQ_PUT, "/v1/sandboxes/{}/files", api_files_write, NULL, HTTP_PLACE_SANDBOX, 0, NULL, NULL }, \
	{ EVHTTP_REQ_PUT, "/v1/sandboxes/{}/files/tar", api_files_tar_put, NULL, HTTP_PLACE_SANDBOX, 0, NULL, NULL }
#define FILES_NSTREAM_ROUTES 2
extern const struct http_route files_stream_routes[FILES_NSTREAM_ROUTES];
/* The same routes on the data plane (api_files.c), opened by a files token there
 * (dataplane.c's auth), relayed by an api process to the sandbox's node. */
extern const struct http_route api_files_dp_routes[];
extern const size_t api_files_dp_nroutes;

#endif
