/* envd_fs.h -- what envd_fs.c (filesystem.Filesystem), envd_watch.c (its polled watchers) and
 * envd_files.c (GET/POST /files) share: paths resolved as envd resolves them, the agent's Entry
 * rendered as envd's EntryInfo, and the agent's watch events as envd's FilesystemEvent. */
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
/* What a watch remembers between its lines: the user's file SPACE's atomic write (the agent's
 * fs_write.c: a temporary ".<name>.space-XXXXXX" renamed over <name>) is landing on. */
struct envd_watch_state {
	char landing[ENVD_PATH_MAX + 1];
};
/* One event line of the agent's watch (docs/design/channels.md) as envd's FilesystemEvents
 * {name, type}, the name relative to dir (the watched directory as the watch's header line
 * named it) (pure but for st). *evs: a new array of 0..2 events. SPACE's own temporary files
 * are not shown; a temporary file renamed over a name is shown as envd shows a write to it
 * (create, then write). 0, 1 when the line says the guest's event queue overflowed (events were
 * lost), -1 when it is malformed or out of memory (*evs NULL). */
int envd_watch_event(struct envd_watch_state *st, const char *dir, const char *line, size_t len, json_t **evs);

#endif
