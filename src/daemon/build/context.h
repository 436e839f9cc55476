/* context.h -- build contexts: tars of build files a client uploads (PUT /v1/contexts), stored
 * once under <state>/contexts/<hex>.tar by the sha256 of their bytes, with a manifest of their
 * entries (<hex>.json) that copy steps hash and select from. docs/design/builds.md. */
#ifndef SPACE_BUILD_CONTEXT_H
#define SPACE_BUILD_CONTEXT_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define CONTEXT_ENTRIES_MAX 100000

/* An upload under way: bytes are hashed and written to a file beside the store as they come. */
struct context_upload;
/* dir: <state>/contexts (made if missing); max: the most bytes a context may have. */
struct context_upload *context_upload_begin(const char *dir, uint64_t max, space_err *err);
/* E2BIG past max (the upload is then dead: abort it). */
int context_upload_write(struct context_upload *u, const void *buf, size_t len, space_err *err);
/* Checks the tar (EINVAL naming the entry: an absolute name, "..", a device, a hard link to
 * nothing before it...), writes its manifest and moves it into place under its digest
 * (one already there is kept: the same bytes). digest: "sha256:<hex>". Frees u. */
int context_upload_finish(struct context_upload *u, char digest[72], uint64_t *bytes, space_err *err);
void context_upload_abort(struct context_upload *u);

/* Is there a context of this digest in dir? 0, or ENOENT. */
int context_exists(const char *dir, const char *digest, space_err *err);
/* The hash of what a copy of src reads: every entry at or under src (path, type, mode, owner,
 * size, content hash, link target), in the manifest's order. ENOENT when src names nothing. */
int context_inputs(const char *dir, const char *digest, const char *src, char out[65], space_err *err);

/* Where a copy puts what it takes: the directory to extract into, made with its parents. */
struct context_pick {
	char dir[1024];
	uint64_t bytes; /* of the tar written */
};
/* Writes to `out` a tar of the entries at or under src, named as a copy to dest (absolute;
 * a trailing '/' means "into this directory") places them relative to pick->dir: a directory's
 * contents go into dest; a file becomes dest (or dest/<its name>). Owners are 0:0, or uid:gid
 * when both are given (>= 0). ENOENT when src names nothing. */
int context_pick(const char *dir, const char *digest, const char *src, const char *dest, long uid, long gid,
		 const char *out, struct context_pick *pick, space_err *err);

#endif
