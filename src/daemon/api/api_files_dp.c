/* api_files_dp.c -- /v1's file routes on the data plane (files.h), opened there by a files token */
#include "files.h"

#define DP(m, pat, fn) { EVHTTP_REQ_##m, pat, fn, NULL, HTTP_PLACE_SANDBOX, 0, NULL, NULL }
const struct http_route api_files_dp_routes[] = {
	DP(GET, "/v1/sandboxes/{}/files", api_files_read),
	DP(PUT, "/v1/sandboxes/{}/files", api_files_write),
	DP(DELETE, "/v1/sandboxes/{}/files", api_files_remove),
	DP(GET, "/v1/sandboxes/{}/files/stat", api_files_stat),
	DP(GET, "/v1/sandboxes/{}/files/list", api_files_list),
	DP(POST, "/v1/sandboxes/{}/files/mkdir", api_files_mkdir),
	DP(POST, "/v1/sandboxes/{}/files/rename", api_files_rename),
	DP(GET, "/v1/sandboxes/{}/files/tar", api_files_tar_get),
	DP(PUT, "/v1/sandboxes/{}/files/tar", api_files_tar_put),
	DP(GET, "/v1/sandboxes/{}/files/watch", api_files_watch),
};
const size_t api_files_dp_nroutes = sizeof(api_files_dp_routes) / sizeof(api_files_dp_routes[0]);
