/* daemon.h -- the spaced context shared by every daemon component */
#ifndef SPACE_DAEMON_H
#define SPACE_DAEMON_H

#include <event2/event.h>
#include <jansson.h>
#include <limits.h>

#include "err.h"
#include "model/model.h"
#include "vmm/vm.h"

#define SPACE_VERSION "0.1.0"

struct config {
	char listen[128];          /* control plane ADDR:PORT (127.0.0.1:7070) */
	char data_listen[128];     /* data plane ADDR:PORT (127.0.0.1:7071) */
	char state_dir[PATH_MAX];
	char api_key[256];
	char templates_dir[PATH_MAX]; /* where `make` put the templates */
	char accel[8];             /* auto | kvm | tcg */
	int token_ttl_s;           /* data-plane token lifetime (default 900) */
	int tb_size_mib;           /* TCG translation cache per VM (default 32) */
	int max_sandboxes;         /* running at once (default 64) */
	int default_timeout_s;     /* sandbox lifetime when create names none (default 900) */
	int max_body_bytes;        /* control-plane request bodies (default 1 MiB) */
	int max_stdin_bytes;       /* one data-plane stdin request (default 4 MiB) */
	char data_url[256];        /* base URL handed to clients for the data plane */
};

struct sandbox;
struct session;
struct evhttp;

struct spaced {
	struct event_base *base;
	struct config cfg;
	struct store *store;
	enum accel accel;
	char accel_reason[256];
	struct evhttp *api_http;
	struct evhttp *data_http;
	struct sandbox *sandboxes; /* runtime objects of sandboxes not deleted */
	char state_tag[17];        /* short hash of state_dir: names sock/mem dirs */
	int64_t started_ms;
	struct event *tick;        /* periodic: expiry, reconcile */
	struct op_waiter *op_waiters; /* long-polls on operations (ops.c) */
};

/* config.c: defaults, then environment (SPACE_*), then flags. Exits on bad flags. */
void config_load(struct config *cfg, int argc, char **argv);

/* paths.c: where a sandbox's files live. */
void path_run_dir(const struct spaced *d, const char *sb_id, char out[PATH_MAX]);
void path_sock_dir(const struct spaced *d, const char *sb_id, char out[PATH_MAX]);
void path_mem_file(const struct spaced *d, const char *sb_id, char out[PATH_MAX]);
void path_console_log(const struct spaced *d, const char *sb_id, char out[PATH_MAX]);
void path_session_spool(const struct spaced *d, const char *sb_id, const char *ss_id, char out[PATH_MAX]);

/* templates.c: import what `make` built (templates_dir/<name>/template.json). */
int templates_import(struct spaced *d, space_err *err);

/* api.c / dataplane.c: the two HTTP listeners. */
int api_start(struct spaced *d, space_err *err);
int dataplane_start(struct spaced *d, space_err *err);

/* ---- sandboxes (sandbox.c) ---- */

/* Validates a create request ({template, vcpus, memory_mib, env, metadata,
 * timeout_s}), persists the sandbox (creating) and its create operation, and
 * starts the VM. EINVAL: bad request; ENOENT: unknown template; EAGAIN: at
 * capacity. Fills the records as stored. */
int sandbox_create(struct spaced *d, json_t *req, struct sandbox_rec *sb, struct op_rec *op, space_err *err);
/* Starts deletion (operation kind delete). ENOENT unknown, EBUSY if deleting/deleted. */
int sandbox_delete(struct spaced *d, const char *id, struct sandbox_rec *sb, struct op_rec *op, space_err *err);
/* Runtime object of a live (not deleted) sandbox, or NULL. */
struct sandbox *sandbox_find(struct spaced *d, const char *id);
/* Start-up: load sandboxes from the store, adopt surviving QEMUs, fail the
 * rest, resume open operations. */
int sandbox_reconcile(struct spaced *d, space_err *err);
/* Periodic: expire sandboxes past their timeout. */
void sandbox_tick(struct spaced *d);
/* Running sandboxes (for /v1/info capacity). */
int sandbox_count_running(struct spaced *d);

/* ---- operations (ops.c) ---- */

/* Create a new operation record (pending) for sandbox sb_id. */
int op_begin(struct spaced *d, const char *kind, const char *sb_id, struct op_rec *op, space_err *err);
/* Move op to running / succeeded / failed (error text for failed), persist, wake waiters. */
void op_running(struct spaced *d, struct op_rec *op);
void op_finish(struct spaced *d, struct op_rec *op, const char *error);

struct op_waiter;
typedef void (*op_wait_cb)(struct spaced *d, const struct op_rec *op, void *arg);
/* Calls cb once, always later from the event loop (never inside op_wait):
 * when operation `id` is done, or after timeout_s with its current record
 * (at once if it is already done or timeout_s is 0). ENOENT: unknown
 * operation. The waiter is freed right after cb returns. */
int op_wait(struct spaced *d, const char *id, int timeout_s, op_wait_cb cb, void *arg,
	    struct op_waiter **out, space_err *err);
/* Cancels a waiter whose cb has not run yet (e.g. the client went away). */
void op_wait_cancel(struct op_waiter *w);

/* ---- sessions (session.c) ---- */

/* Validates {argv, env, cwd, user, stdin, token_ttl_s}, persists a session in
 * state created, and issues a data-plane token (hex, 64 chars + NUL).
 * ENOENT unknown sandbox, EBUSY sandbox not running, EINVAL bad request. */
int session_create(struct spaced *d, const char *sb_id, json_t *req, struct session_rec *out,
		   char token[65], space_err *err);
/* A fresh token for an existing session (ttl_s <= 0: the configured TTL). */
int session_new_token(struct spaced *d, const char *sb_id, const char *ss_id, int ttl_s,
		      char token[65], int64_t *expires_ms, space_err *err);
/* Runtime session by id (only sessions of live sandboxes), or NULL. */
struct session *session_find(struct spaced *d, const char *ss_id);
/* Checks a data-plane bearer token for this session: 0, or -1 with EACCES
 * ("invalid token" / "token expired"). Constant-time comparison. */
int session_check_token(struct session *s, const char *token, space_err *err);
const struct session_rec *session_rec(const struct session *s);

/* Starts the process if it has not been started (first attach). */
int session_start(struct session *s, space_err *err);
/* Queues stdin bytes (len may be 0) and optionally closes stdin afterwards.
 * EBUSY: no stdin pipe, stdin closed, or process finished; E2BIG: queue full. */
int session_stdin(struct session *s, const void *data, size_t len, int close_after, space_err *err);
/* EBUSY if the process is not running. */
int session_signal(struct session *s, int signo, space_err *err);

/* Output access for streaming readers. Offsets count output bytes of stdout
 * and stderr together, in the order the agent produced them. */
uint64_t session_output_length(const struct session *s);
/* Reads at most max bytes of one stream's record at offset off; returns bytes
 * (0: nothing there yet), sets *stream (1 stdout, 2 stderr). */
ssize_t session_output_read(struct session *s, uint64_t off, int *stream, void *buf, size_t max,
			    space_err *err);
/* Finished (exited or failed) and all output is in the spool? */
int session_done(const struct session *s);

/* A streaming reader registers a watch: fn runs (from the event loop) when
 * output grows or the session finishes. pos is the reader's delivered offset;
 * the reader must keep it current (it paces the process: output is not
 * acknowledged to the agent while the slowest reader lags too far). */
struct session_watch {
	void (*fn)(struct session_watch *w);
	uint64_t pos;
	struct session *s;
	struct session_watch *next;
};
void session_watch_add(struct session *s, struct session_watch *w);
void session_watch_del(struct session_watch *w);
/* The reader moved w->pos forward: may release back-pressure. */
void session_watch_progress(struct session_watch *w);

#endif
