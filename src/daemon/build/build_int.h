/* build_int.h -- a build's runtime object, shared by the build/ folder's files only:
 * build.c (the plan and the steps' order), build_exec.c (one command in the builder VM),
 * build_log.c (the record and the event log), build_result.c (the layer made a template). */
#ifndef SPACE_BUILD_INT_H
#define SPACE_BUILD_INT_H

#include <limits.h>

#include "build/build.h"
#include "sandbox/sandbox.h"

#define BUILD_LOG_MAX (32u << 20)  /* a build's event log; past it output is left out, with a note */
#define BUILD_DATA_MAX 8192        /* one log record's output bytes */
#define BUILD_STEP_TIMEOUT_MS (3600 * 1000)

struct bstep {
	enum bstep_state state;
	bool cached;
	int64_t started_ms, duration_ms;
	char key[65];
};

struct proc_job;
struct icmd;
struct build;
/* One command's end: exit code (-1 when it did not exit: error says why), what it printed. */
typedef void (*build_exec_cb)(struct build *b, int code, const char *error, const char *out);

struct build {
	struct spaced *d;
	char id[ID_LEN];
	struct recipe rc;
	json_t *request;          /* the body as posted (the record keeps it) */
	enum build_state state;
	char error[512];
	char digest[80];
	struct op_rec op;
	struct template_rec base;
	struct bstep *steps;
	char final_key[65];
	size_t cur;               /* the step running (nsteps: the result) */
	char sb_id[ID_LEN];       /* the builder VM, "" when none */
	char layer_id[ID_LEN];    /* the newest layer it has */
	char layer_key[65];       /* that layer's key */
	char dir[PATH_MAX];       /* <state>/builds/<id> */
	int64_t created_ms, finished_ms;
	/* the event log */
	int logfd;
	uint64_t log_len;
	bool log_capped;
	struct build_watch *watches;
	/* the command running in the builder (build_exec.c) */
	struct icmd *cmd;
	bool log_output;          /* its output goes to the log (a run step's) */
	build_exec_cb done;
	/* the copy step under way: its uid, gid (-1: root's) */
	long copy_uid, copy_gid;
	char copy_tar[PATH_MAX];
	char out_dir[1024];       /* where its tar is extracted in the guest */
	/* the flatten (build_result.c) */
	struct proc_job *job;
	bool result_reading;      /* a read on the store's thread holds b (build_result.c) */
	/* a promote (build_promote.c): the snapshot of the sandbox, its operation's waiter */
	char promote_snap[ID_LEN];
	char sb_promote[ID_LEN];  /* the sandbox promoted */
	struct op_waiter *waiter;
	struct build *next;
};

/* build.c */
struct build *build_alloc(struct build_plan *p, space_err *err);
/* A new build's log, operation and place in the list; then it runs (state running). */
int build_register(struct build *b, space_err *err);
void build_fail(struct build *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void build_step_state(struct build *b, size_t i, enum bstep_state st);
/* build_result.c: template.json's content for a build of rc on base whose last layer is
 * final_key, with its "build_key" (what makes it: an equal key is the same template). */
json_t *build_template_config(const struct recipe *rc, const struct template_rec *base, const char *final_key,
			      space_err *err);
/* A template already made with the build's key: its tags moved to it, the build done. */
void build_result_reuse(struct build *b, const struct template_rec *made);
/* build_result.c: the layer snap_id made into the template; build_succeeded or build_fail. */
void build_result_start(struct build *b, const char *snap_id);
void build_result_cancel(struct build *b);
void build_succeeded(struct build *b, const char *digest);

/* build_exec.c: argv (NULL-terminated; kind: a command, or the agent's own file operation) as
 * user in the builder VM with env and cwd; stdin from the file at in_path (NULL: none); its
 * output logged as step b->cur's when log is set; done runs once. -1 (err): it did not start. */
int build_exec(struct build *b, enum sess_kind kind, const char *const *argv, const char *user, const json_t *env,
	       const char *cwd, const char *in_path, bool log, build_exec_cb done, space_err *err);
void build_exec_cancel(struct build *b);

/* build_gc.c: the oldest layers deleted past --build-cache-max (after each build). */
void builds_gc(struct spaced *d);

/* build_log.c */
int build_log_open(struct build *b, bool create, space_err *err);
/* One record: type and a JSON object (the reference is taken). */
void build_log_add(struct build *b, const char *type, json_t *data);
/* The step's output as log records (invalid UTF-8 shown as U+FFFD). */
void build_log_output(struct build *b, size_t step, const char *bytes, size_t len);
/* The record (<dir>/build.json) written again, whole (write and rename). */
void build_save(struct build *b);
void build_free(struct build *b);

#endif
