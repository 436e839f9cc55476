/* files.h -- a sandbox's files API (docs/design/channels.md, "Files") for
 * `spacectl cp` and `spacectl ls ID:PATH`: control plane, API key, bodies
 * streamed both ways */
#ifndef SPACE_CLI_FILES_H
#define SPACE_CLI_FILES_H

#include <jansson.h>

#include "client.h"
#include "cp.h"

struct files {
	const struct ctl *c;
	const char *id;
	const char *user; /* the user=... the operations run as; NULL: the template's default */
};

/* "<url>/v1/sandboxes/<id><route>?path=<path>[&user=<user>]<extra>"; extra
 * is "" or "&k=v...".  To free(); NULL when out of memory. */
char *files_url(const struct files *f, const char *route, const char *path, const char *extra);

/* GET /files/stat: 0 with *entry (to json_decref), or NULL when nothing is
 * at path (or no such sandbox): then e holds the server's message saying
 * which.  -1 with e set on any other failure. */
int files_stat(const struct files *f, const char *path, json_t **entry, space_err *e);

/* What is at path, symbolic links followed (16 at most): CP_MISSING when
 * nothing is, CP_FILE for a dangling link (a copy replaces it). */
int files_kind(const struct files *f, const char *path, enum cp_kind *kind, space_err *e);

/* GET a JSON answer (list, stat). */
int files_get_json(const struct files *f, const char *route, const char *path, const char *extra,
		   json_t **out, space_err *e);

/* GET route, the 2xx body streamed into sink.  -1 with e set on failure; a
 * transfer the sink stopped also returns -1 (the sink's owner knows why). */
int files_get(const struct files *f, const char *route, const char *path, const char *extra,
	      http_sink_fn sink, void *arg, space_err *e);

/* PUT route with the body pulled from source: size bytes, or chunked when
 * size < 0.  The JSON answer in *out if out is not NULL.  -1 with e set; a
 * transfer the source aborted also returns -1. */
int files_put(const struct files *f, const char *route, const char *path, const char *extra,
	      http_source_fn source, void *arg, long long size, json_t **out, space_err *e);

/* An API Entry's mtime as seconds and nanoseconds.  0, or -1 when absent. */
int files_entry_mtime(const json_t *entry, long long *sec, long *nsec);

#endif
