/* build.h -- template builds (POST /v1/templates/builds) as the core runs them: a recipe
 * (recipe.h) whose steps run one by one in a builder VM (sandbox/build_vm.c), each disk-changing
 * step's result kept as a layer snapshot under its cache key, the last layer flattened into a
 * template imported like `make`'s. Every build's record and event log live in
 * <state>/builds (build_log.c); docs/design/builds.md. */
#ifndef SPACE_BUILD_BUILD_H
#define SPACE_BUILD_BUILD_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "build/recipe.h"
#include "err.h"
#include "model/model.h"
#include "sandbox/sandbox.h"

enum build_state { BUILD_PENDING, BUILD_RUNNING, BUILD_SUCCEEDED, BUILD_FAILED };
enum bstep_state { BSTEP_PENDING, BSTEP_RUNNING, BSTEP_DONE, BSTEP_FAILED };
const char *build_state_name(enum build_state s);
const char *bstep_state_name(enum bstep_state s);

/* What a build needs from the store and the context before it starts, read on the store's
 * thread (build_plan_read): the base template, each step's key, the newest cached layer. */
struct build_plan {
	struct spaced *d;
	json_t *body;           /* the request as posted */
	struct recipe rc;
	bool net;
	struct template_rec base;
	char (*keys)[65];       /* one per step */
	char final_key[65];     /* the last step's key (the base's digest hex without steps) */
	long cached_upto;       /* steps [0, cached_upto) are in the layer found; -1: none */
	char layer_id[ID_LEN];  /* that layer's snapshot */
	struct create_req req;  /* the builder's create: from the base or from that layer */
	struct create_reads pre; /* what that create reads (create_read) */
	int64_t disk_bytes;     /* the base's image size (disk_mib must not shrink it) */
	struct template_rec made; /* every step cached and this template made by an equal build
				   * before (digest[0] != 0): it is the result again */
};
/* Parses body into a new plan (EINVAL naming the field): the caller reads it on the store's
 * thread (build_plan_read), then starts it on the loop (build_start). */
struct build_plan *build_plan_new(struct spaced *d, const json_t *body, space_err *err);
int build_plan_read(struct store *conn, struct build_plan *p, space_err *err);
void build_plan_free(struct build_plan *p);

/* Starts the build planned (moved out of p): its record, its operation and its builder VM.
 * *out: the build's JSON as GET answers it (new reference); op_id: its operation. */
int build_start(struct build_plan *p, json_t **out, char op_id[ID_LEN], space_err *err);

struct build;
/* A build by id, NULL when unknown. */
struct build *build_find(struct spaced *d, const char *id);
/* The build as GET /v1/templates/builds/{id} renders it (new reference). */
json_t *build_json(const struct build *b);
/* Every build, newest first (new reference). */
json_t *builds_json(struct spaced *d);
bool build_ended(const struct build *b);

/* The event log: records "type\tjson\n" appended as the build goes (types log, step, end).
 * Offsets are bytes into it. A reader reads whole records from off (build_log_read); when
 * there is nothing more and the build has not ended it registers a watcher (fn(arg) runs on
 * the loop when the log grows or the build ends), removed with build_log_unwatch. */
struct build_watch {
	void (*fn)(void *arg);
	void *arg;
	struct build_watch *next;
};
/* Appends to out (SSE-framed: "id: <offset after>\nevent: <type>\ndata: <json>\n\n") the
 * records from *off, up to about max bytes; moves *off. 0, or -1 (err). */
int build_log_read(struct build *b, uint64_t *off, size_t max, void *evbuffer_out, space_err *err);
uint64_t build_log_length(const struct build *b);
void build_log_watch(struct build *b, struct build_watch *w);
void build_log_unwatch(struct build *b, struct build_watch *w);

/* A client's running sandbox made a template: body {"name", "tags"?, "memory"?} (memory true:
 * EINVAL, not supported yet). Its snapshot action runs (refused as any snapshot would be), then the
 * snapshot's disk becomes the template as a build's last layer does. Answers as build_start. */
int build_promote(struct spaced *d, const char *sb_id, const json_t *body, json_t **out, char op_id[ID_LEN],
		  space_err *err);

/* At start: the builds on record are loaded; those a previous daemon left running failed. */
void builds_load(struct spaced *d);
void builds_free(struct spaced *d);

#endif
