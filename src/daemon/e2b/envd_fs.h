/* envd_fs.h -- what envd_fs.c (filesystem.Filesystem) and envd_files.c (GET/POST /files) share:
 * the user a request names, paths resolved as envd resolves them, and the agent's Entry
 * rendered as envd's EntryInfo. */
#ifndef SPACE_E2B_ENVD_FS_H
#define SPACE_E2B_ENVD_FS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "err.h"
#include "http/http.h"

#define ENVD_PATH_MAX 4095

/* p as an absolute path (out: ENVD_PATH_MAX + 1 bytes): a relative one (or "~/...") under the
 * home of user (or of the sandbox's default user): /root for root, /home/<user> otherwise, as in
 * E2B's templates. 0, or -1 with EINVAL. */
int envd_abs_path(struct http_req *r, const char *user, const char *p, char *out, space_err *err);
/* The agent's Entry {name,path,type,size,mode,permissions,owner,group,mtime,symlink_target} as
 * envd's EntryInfo (pure; new reference, NULL when out of memory). */
json_t *envd_entry_info(const json_t *e);
/* Unix seconds as protobuf's JSON Timestamp (RFC 3339, UTC, microseconds) (pure). */
void envd_rfc3339(double t, char out[40]);

#endif
