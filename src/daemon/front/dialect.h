/* dialect.h -- what a front end's dialect (http.h: struct http_dialect) carries beyond its error
 * shape: how an api process's intent writers (cluster/intent.c) answer for its routes */
#ifndef SPACE_FRONT_DIALECT_H
#define SPACE_FRONT_DIALECT_H

#include <stdbool.h>

#include "http/http.h"

struct spaced;
struct sandbox_rec;
struct op_rec;

/* http_dialect.ext of a front end whose routes an api process may write as intent. */
struct front_intent_reply {
	/* 404: the request names no sandbox ("sb-..." malformed, or none in the store). */
	void (*no_sandbox)(struct evhttp_request *req, const char *id);
	/* The intent was written (a create, a restore), or a delete was closed in the store:
	 * answer as the front end's handler would (sb: the record as written; op: its operation). */
	void (*accepted)(struct spaced *d, struct evhttp_request *req, const struct sandbox_rec *sb,
			 const struct op_rec *op);
	/* A restore answers once the sandbox runs (E2B's connect and resume): the request waits for
	 * its operation, then goes to the node that did it. false: accepted answers at once. */
	bool restore_waits;
};

static inline const struct front_intent_reply *front_intent_of(const struct http_dialect *dl)
{
	return dl ? (const struct front_intent_reply *)dl->ext : NULL;
}

#endif
