/* sandbox.h -- the sandbox core as front ends see it: typed requests in, records and operations out */
#ifndef SPACE_SANDBOX_H
#define SPACE_SANDBOX_H

#include <sys/types.h>

#include "daemon.h"
#include "sandbox/spec.h"

/*
 * Errors: ENOENT unknown id; EINVAL a request the rules refuse; EBUSY a
 * request the sandbox's state refuses (409: the message names the state and
 * any operation in flight); EDQUOT the node has no room (429); others are
 * internal. Records handed out are the caller's: clear them.
 */

/* ---- sandboxes ---- */

struct store;
/* The record of a sandbox a request names that this process does not hold, read on the
 * store's thread before its handler runs (api.c's prepare step): sandbox_get answers from it
 * while d->sb_pre points at it. rc < 0: none (err says why). */
struct sandbox_pre {
	struct spaced *d;
	char id[ID_LEN];
	int rc;
	space_err err;
	struct sandbox_rec rec;
};
/* What a create reads from the store, read beforehand on the store's thread (create_read runs
 * there: api_read, store_async) so that the loop makes no round trip for it: the named snapshot
 * asked for, the template, the ready snapshot a create would clone. net: egress_enabled. */
struct create_reads {
	bool done;                /* from and tmpl were read (create_prepare takes them) */
	bool ready_read;          /* ready was looked for (none found: .id[0] == 0) */
	struct snapshot_rec from;
	struct template_rec tmpl;
	struct snapshot_rec ready;
	json_t *policy;           /* the create's policy with its secret values (egress_resolve), if it injects any */
};
int create_read(struct store *conn, bool net, const struct create_req *req, struct create_reads *out,
		space_err *err);
void create_reads_clear(struct create_reads *c);
/* A create whose reads wait for the store's thread (the front ends' POST): the request and
 * what create_read read. create_job_read is a read for api_read (and the like: it touches
 * only the job and the connection); create_job_free frees a job. */
struct create_job {
	struct create_req req;
	bool net;
	struct create_reads pre;
};
struct create_job *create_job_new(struct spaced *d);
int create_job_read(struct store *conn, void *arg, space_err *err);
void create_job_free(void *arg);
/* Persists a new sandbox (creating) and its create operation, then starts it the fastest way
 * there is: a warm pool's VM, a clone of the template's ready snapshot (or of req->snapshot),
 * else a cold boot. With what create_read read (required); what it takes is moved out. */
int sandbox_create_read(struct spaced *d, const struct create_req *req, struct create_reads *pre,
			struct sandbox_rec *out, struct op_rec *op, space_err *err);
/* The record a create of req would make (a new id; template or snapshot resolved from pre,
 * which it takes as sandbox_create_read does), nothing started, stored or held: what an api
 * process writes as the intent a node claims (cluster/intent.c). Clear *out. */
int sandbox_create_record(struct spaced *d, const struct create_req *req, struct create_reads *pre,
			  struct sandbox_rec *out, space_err *err);
/* Whether this daemon gives VMs a network device (which ready snapshots it clones). */
bool sandbox_net(const struct spaced *d);
/* Clients' sandboxes this process is bringing up (creating or restoring) now: a node's
 * claims in flight (cluster/node.c paces its claims by them). */
int sandbox_bringing_up(const struct spaced *d);
/* Fencing (cluster/reconcile.c): for each client's sandbox whose VM runs here, made before
 * since_ms, why(rec, arg) says why the cluster gave up on it (NULL: it stays); those it names
 * have their VM stopped, logged with the reason. */
typedef const char *(*sandbox_fence_fn)(const struct sandbox_rec *rec, void *arg);
void sandbox_fence(struct spaced *d, int64_t since_ms, sandbox_fence_fn why, void *arg);
/* A create a node claimed (cluster/node.c): req->claim_sb_id and claim_op_id as the api
 * process wrote them (EINVAL if either is missing). */
int sandbox_create_claimed(struct spaced *d, const struct create_req *req, struct create_reads *pre,
			   space_err *err);
/* A row this process did not load at start, loaded while the loop serves: its template and
 * sessions (and, with reconcile, its open operations) are read on the store's thread, then it
 * is made on the loop as start-up would have (a claim that failed: reconcile false, no VM is
 * looked for; a row of this node the process does not know, a claim whose answer never came
 * back: reconcile true, its open operations attached and reconciled exactly as at start, its
 * QEMU adopted if one runs, else its interrupted action decides). One loaded meanwhile is
 * left as it is. then(d, id, arg, err) last (err NULL: it is loaded), if not NULL; -1 (then
 * never runs) if the read could not be queued. */
typedef void (*sandbox_loaded_fn)(struct spaced *d, const char *id, void *arg, const space_err *err);
int sandbox_load_later(struct spaced *d, const struct sandbox_rec *rec, bool reconcile, sandbox_loaded_fn then,
		       void *arg, space_err *err);
/* Was sandbox id let go of (deleted, then dropped from the runtime) at since_ms or after?
 * (The last 256 only: enough for what a read queued behind the writes can miss.) */
bool sandbox_reaped_since(const struct spaced *d, const char *id, int64_t since_ms);
/* A restore a node claimed: a suspended sandbox that another node left (loaded here first:
 * sandbox_load_later), restored from the shared directory under operation op_id. */
int sandbox_restore_claimed(struct spaced *d, const char *sb_id, const char *op_id, space_err *err);
/* Starts a lifecycle operation on a sandbox: pause, resume, suspend, restore,
 * stop, start or delete (docs/design/lifecycle.md). */
int sandbox_act(struct spaced *d, const char *id, enum op_kind kind, struct sandbox_rec *sb,
		struct op_rec *op, space_err *err);
/* Whichever of start, resume or restore applies; a running sandbox needs
 * none: op->id is then "". */
int sandbox_wake(struct spaced *d, const char *id, struct sandbox_rec *sb, struct op_rec *op,
		 space_err *err);
/* count new sandboxes with copies (copy-on-write) of the parent's memory and
 * disk at one instant; `children` gets their records (a JSON array of ids). */
int sandbox_fork(struct spaced *d, const char *id, int count, struct sandbox_rec *sb,
		 struct op_rec *op, json_t **children, space_err *err);
/* A named snapshot (memory and disk) that outlives the sandbox. Its front end asks first,
 * on the store's thread, whether the name is free (snapshot_name_free: 409 if not); the
 * database's unique name is the last word. */
int sandbox_snapshot(struct spaced *d, const char *id, const char *name, struct sandbox_rec *sb,
		     struct op_rec *op, struct snapshot_rec *snap, space_err *err);
int sandbox_set_timeout(struct spaced *d, const char *id, const struct timeout_req *req,
			struct sandbox_rec *sb, space_err *err);
/* Egress (egress.c). Replaces a sandbox's policy (normalised, borrowed): stored, then sent
 * to its gateway if its VM runs, returning once the gateway acknowledged it (resolved: the
 * policy with its secret values, read on the store's thread by egress_resolve). EBUSY for a
 * deleted, deleting or failed sandbox; a stopped or suspended one just keeps it. */
int sandbox_set_network(struct spaced *d, const char *id, json_t *network, const json_t *resolved,
			struct sandbox_rec *out, space_err *err);
/* A policy as its gateway gets it, each inject rule's secret value read from conn (the store's
 * thread); egress_resolved_free wipes the values as it frees it. */
bool egress_injects_secrets(const json_t *network);
json_t *egress_resolve(struct store *conn, const json_t *network, space_err *err);
/* Every inject rule of network names a host its secret is bound to (PUT /v1/secrets "hosts")?
 * 0, or -1 with EINVAL naming the secret and the host. Read on the store's thread: a create
 * (create_read), PUT .../network. A secret that does not exist is no refusal (it injects
 * nothing until it is put; then its hosts decide, egress_resolve). */
int egress_check_bindings(struct store *conn, const json_t *network, space_err *err);
void egress_resolved_free(json_t *policy);
/* A secret was set or deleted: every running gateway whose policy names it gets it again. */
void sandbox_secret_changed(struct spaced *d, const char *name);
/* <run_dir>/egress: the gateway's audit log directory. */
void path_egress_dir(struct spaced *d, const char *sb_id, char out[PATH_MAX]);

/* What the saved state of a suspended sandbox this process holds takes, as its suspend here
 * measured it; -1: not suspended, or not known here (GET reads it on the store's thread). */
int64_t sandbox_suspended_bytes(const struct sandbox *sb);
/* A sandbox a client may see (warm-pool VMs and the daemon's own are not): one this process
 * holds, or the one a control-plane request names, read before its handler (d->sb_pre).
 * Never a store read: anything else is ENOENT. */
int sandbox_get(struct spaced *d, const char *id, struct sandbox_rec *out, space_err *err);
bool sandbox_visible(const struct sandbox_rec *r);
/* Runtime object of a live (not deleted) sandbox, or NULL. */
struct sandbox *sandbox_find(struct spaced *d, const char *id);
/* Its record as the runtime holds it now (valid until the next loop turn). */
const struct sandbox_rec *sandbox_record(const struct sandbox *sb);
/* Its template's default user ("" when the template names none). */
const char *sandbox_default_user(const struct sandbox *sb);
/* Start-up: load sandboxes and snapshots from the store, adopt surviving
 * QEMUs, fail or finish what was interrupted. */
int sandbox_reconcile(struct spaced *d, space_err *err);
/* Periodic: timeouts, pools, ready snapshots, unused disk layers. */
void sandbox_tick(struct spaced *d);
/* Frees the runtime (QEMUs live on) at shutdown. */
void sandbox_shutdown(struct spaced *d);

/* ---- template builds' VMs (build_vm.c) ---- */

/* A build's VM: role build, hidden from clients, under the build's egress policy (network,
 * normalised; NULL: deny all), made as any create from what create_read read for req (its
 * template_ref a digest, or its snapshot a layer's name). up(d, sb_id, error, arg) runs once
 * it runs or could not start; layer(d, snap_id, error, arg) once a layer it was asked for is
 * taken. The VM is the build's until build_vm_end. */
typedef void (*build_vm_up_fn)(struct spaced *d, const char *sb_id, const char *error, void *arg);
typedef void (*build_vm_layer_fn)(struct spaced *d, const char *snap_id, const char *error, void *arg);
int build_vm_start(struct spaced *d, const struct create_req *req, struct create_reads *pre, const json_t *network,
		   build_vm_up_fn up, build_vm_layer_fn layer, void *arg, char sb_id[ID_LEN], space_err *err);
/* Its memory and disk now, as the snapshot `name` (a layer: ".layer-<key>", never a name a
 * client can give); the VM runs on. */
int build_vm_layer(struct spaced *d, const char *sb_id, const char *name, space_err *err);
/* A promote (POST /v1/sandboxes/{id}/template): the client's sandbox's template (a copy; its
 * state checked as a snapshot's would be), then its snapshot action under a hidden name
 * (".promote-..."), refused as any snapshot would be; op_id: that operation. */
int build_vm_template_of(struct spaced *d, const char *sb_id, struct template_rec *out, space_err *err);
int build_vm_snapshot_of(struct spaced *d, const char *sb_id, const char *name, char op_id[ID_LEN], space_err *err);
/* The build is done with it: deleted (nothing more is told). */
void build_vm_end(struct spaced *d, const char *sb_id, const char *why);
/* A build VM whose build is gone (a daemon restart): deleted (sandbox_tick). */
void build_vm_reap(struct spaced *d);
/* Is this snapshot one a client sees (GET /v1/snapshots): ready ones, and named ones but a
 * build's layers? */
bool snapshot_visible(const struct snapshot_rec *s);

/* ---- snapshots (snapshots.c) ---- */

/* ref: an id ("sn-...") or a named snapshot's name, read on st (the store's thread:
 * store_async, api_read). Only named snapshots are visible by name; ready, fork and suspend
 * ones by id. */
struct store;
int snapshot_lookup(struct store *st, const char *ref, struct snapshot_rec *out, space_err *err);
/* 0 if name is a valid snapshot name no snapshot has (EINVAL, EEXIST, or the store's error). */
int snapshot_name_free(struct store *conn, const char *name, space_err *err);
/* A front end's POST of a named snapshot: the name asked for is checked on the store's thread
 * (snapshot_req_read, an api_read read), then sandbox_snapshot runs on the loop. */
struct snapshot_req {
	char *id;                      /* the sandbox */
	char name[SPEC_NAME_MAX + 1];
};
struct snapshot_req *snapshot_req_new(const char *sb_id);
int snapshot_req_read(struct store *conn, void *arg, space_err *err);
void snapshot_req_free(void *arg);
/* DELETE of a named snapshot, whole on the store's thread (conn: store_async, api_read): its
 * files and row; dir is where its files were, for snapshot_forget_image on the loop after. */
int snapshot_delete_on(struct store *conn, const char *ref, char dir[PATH_MAX], space_err *err);
void snapshot_forget_image(const char *dir);
/* Is s a ready snapshot that a sandbox of this template and size may be cloned from (net:
 * whether this daemon gives VMs the network device)? Pure. */
bool snapshot_ready_match(const struct snapshot_rec *s, const char *digest, int vcpus, int memory_mib,
			  bool net);
/* The ready snapshot of a template digest with this size, if one is ready (0; clear *out),
 * else -1, read on st (the store's thread: create_read); net: whether this daemon gives VMs
 * a network device (egress_enabled). */
int snapshot_ready_in(struct store *st, bool net, const char *digest, int vcpus, int memory_mib,
		      struct snapshot_rec *out);

/* ---- warm pools (pool.c) ---- */

/* Keeps `size` ready VMs of template `ref` (0 stops the pool), in two halves: the size is
 * stored on the store's thread (conn: api_read), which names the template; then the loop
 * sizes its pool. */
int pool_store_size(struct store *conn, const char *ref, int size, char name[SPEC_NAME_MAX + 1],
		    space_err *err);
int pool_resize(struct spaced *d, const char *name, int size, space_err *err);
/* What the pool of template `name` holds: target size and VMs ready. */
void pool_counts(struct spaced *d, const char *name, int *size, int *ready);
/* Every pool set (size 0 included, until the daemon restarts): its template name, target size
 * and VMs ready. fn must not change the pools. */
void pool_each(struct spaced *d, void (*fn)(const char *name, int size, int ready, void *arg), void *arg);
/* Pools named at start-up (--pool) and those set earlier (kept in the store). */
int pools_init(struct spaced *d, space_err *err);

/* ---- capacity (capacity.c) ---- */

struct capacity {
	int memory_budget_mib, memory_used_mib;
	int vcpu_budget, vcpus_used;
	int running;                /* VMs that exist (pool and builder VMs included) */
	int max_sandboxes;
	int64_t tmpfs_free_mib;     /* where ready and fork snapshots live */
};
void capacity_get(struct spaced *d, struct capacity *c);
/* What the cluster's nodes that are up have and use, summed from their rows (as of their last
 * renewals): an api process's capacity (GET /v1/info), read on the store's thread (conn). */
int capacity_of_nodes(struct store *conn, int max_sandboxes, struct capacity *c, space_err *err);
/* Room for `count` more VMs of this size beyond those that exist (or are
 * counted already: a sandbox restoring or starting is)? EDQUOT with what is
 * short. */
int capacity_admit(struct spaced *d, int vcpus, int memory_mib, int count, space_err *err);
void capacity_init(struct spaced *d);
/* What each VM takes beyond its guest memory (counted by capacity_get). */
int capacity_overhead_mib(void);
/* Room where a snapshot of this kind and guest size would be written? */
int capacity_snapshot_room(struct spaced *d, enum snap_kind kind, int memory_mib, space_err *err);

/* ---- operations (ops.c) ---- */

/* A new operation record (pending) for sandbox sb_id: op_id is the id an api process wrote
 * with the intent a node claimed (NULL or "": a new one). */
int op_begin(struct spaced *d, enum op_kind kind, const char *sb_id, const char *op_id, struct op_rec *op,
	     space_err *err);
/* Move op to running / succeeded / failed (error text for failed), persist, wake waiters. */
void op_running(struct spaced *d, struct op_rec *op);
void op_finish(struct spaced *d, struct op_rec *op, const char *error);
/* A copy of op (its result referenced too). */
void op_copy(struct op_rec *dst, const struct op_rec *src);
/* Operations whose write failed are kept (a copy) and written again from sandbox_tick, so that
 * a finished operation is never left open in the store by a busy or full disk. */
void ops_retry(struct spaced *d);
void ops_unsaved_free(struct spaced *d);

struct op_waiter;
typedef void (*op_wait_cb)(struct spaced *d, const struct op_rec *op, void *arg);
/* Calls cb once, always later from the event loop (never inside op_wait):
 * when operation `id` is done, or after timeout_s with its current record
 * (as soon as it is read if it is already done or timeout_s is 0). The store is
 * read on its thread (store_async), never on the loop. An unknown operation
 * fires cb with a failed record ("no such operation"); ENOENT here only for a
 * malformed id. The waiter is freed right after cb returns. */
int op_wait(struct spaced *d, const char *id, int timeout_s, op_wait_cb cb, void *arg,
	    struct op_waiter **out, space_err *err);
/* Cancels a waiter whose cb has not run yet (e.g. the client went away). */
void op_wait_cancel(struct op_waiter *w);
/* An api process's operations finish elsewhere: fires the waiters of those the store says
 * are done (main.c runs it every 200 ms in --role api). */
void ops_poll(struct spaced *d);

/* ---- sessions (session.c) ---- */

/* Persists a session in state created and issues a data-plane token (hex,
 * 64 chars + NUL). ENOENT unknown sandbox, EBUSY sandbox not running,
 * EINVAL a command that does not fit the agent protocol. */
int session_create(struct spaced *d, const char *sb_id, const struct exec_req *req,
		   struct session_rec *out, char token[65], space_err *err);
/* Sessions not yet ended (created or running), in every sandbox; the daemon's own included. */
int sessions_live(struct spaced *d);
/* A fresh token for an existing session (ttl_s <= 0: the configured TTL): one in memory, or
 * (stored not NULL) one let go of, made again from its record read on the store's thread. */
int session_new_token(struct spaced *d, const char *sb_id, const char *ss_id, const struct session_rec *stored,
		      int ttl_s, char token[65], int64_t *expires_ms, space_err *err);
/* A session the daemon runs for itself (a file operation, a watch: docs/design/channels.md),
 * started at once: never stored or listed, freed with its output once it has ended and nobody
 * watches it. argv is NULL-terminated; user NULL or "" = the template's default user. */
struct session *session_open_internal(struct spaced *d, const char *sb_id, enum sess_kind kind,
				      const char *const *argv, const char *user, bool with_stdin, space_err *err);
/* The same with an environment (an object of strings, NULL: none) and a working directory
 * (NULL or "": the user's home), in one of the daemon's own VMs only (a build's, a builder's,
 * a pool's; ENOENT for a client's): a template build's steps, a template's start command. */
struct session *session_open_internal_in(struct spaced *d, const char *sb_id, enum sess_kind kind,
					 const char *const *argv, const char *user, const json_t *env,
					 const char *cwd, bool with_stdin, space_err *err);
/* tokens.c: a data-plane token that opens the files routes of sandbox sb_id (ttl_s <= 0: the
 * configured TTL). */
int token_issue_files(struct spaced *d, const char *sb_id, int ttl_s, char token[65], int64_t *expires_ms,
		      space_err *err);
/* The same for any scope: TOKEN_SCOPE_FILES, TOKEN_SCOPE_ENVD (the E2B layer's envd and
 * code-interpreter routes of one sandbox). ttl_s > 0, unchecked: callers bound it. */
#define TOKEN_SCOPE_FILES "files"
#define TOKEN_SCOPE_ENVD "envd"
int token_issue(struct spaced *d, const char *sb_id, const char *scope, int64_t ttl_s, char token[65],
		int64_t *expires_ms, space_err *err);
/* Forgets, from this process's memory, sb_id's tokens of scope whose hash starts with
 * hash_prefix (NULL: all of them); returns how many (their rows are the caller's to delete). */
int token_forget_where(struct spaced *d, const char *sb_id, const char *scope, const char *hash_prefix);
/* A token's row, for one this process has not seen: token_check fills hash, token_read (on
 * the store's thread: store_async) the rest, token_verdict judges it on the loop. */
struct token_row {
	char hash[65];
	char owner[ID_LEN];
	char scope[16];
	int64_t expires_ms;
	int rc;
	space_err err;
};
/* Does token open scope's routes of sb_id? 0 yes; -1 no (EACCES); 1: not known here, row
 * names what to read (token_read), then token_verdict answers 0 or -1 (EACCES, or EAGAIN:
 * the store failed). The loop never reads the store for it. */
int token_check(struct spaced *d, const char *sb_id, const char *scope, const char *token,
		struct token_row *row, space_err *err);
void token_read(struct store *conn, struct token_row *row);
int token_verdict(struct spaced *d, const char *sb_id, const char *scope, const struct token_row *row,
		  space_err *err);
/* The same as one job for a step that holds its request (api_step_read): token_job_new (NULL
 * when out of memory) after token_check answered 1; token_job_read on the store's thread;
 * token_job_verdict on the loop; free() it. */
struct token_job {
	char sb_id[ID_LEN];
	char scope[16];
	struct token_row row;
};
struct token_job *token_job_new(const char *sb_id, const char *scope, const struct token_row *row);
void token_job_read(struct store *conn, void *arg);
int token_job_verdict(struct spaced *d, const struct token_job *j, space_err *err);
/* Runtime session by id, among those in memory (no store read): an ended session let go of is
 * made again by session_find_stored from its record, read on the store's thread. */
struct session *session_loaded(struct spaced *d, const char *ss_id);
/* The same for a record already read from the store (on its thread): no store read here. */
struct session *session_find_stored(struct spaced *d, const struct session_rec *rec);
/* Checks a data-plane bearer token for this session: 0, or -1 with EACCES
 * ("invalid token" / "token expired"). Constant-time comparison. */
int session_check_token(struct session *s, const char *token, space_err *err);
const struct session_rec *session_rec(const struct session *s);
/* Calls fn for each session of sandbox sb_id that a client created (not the daemon's own) and
 * that has not ended (created or running), newest first, until fn returns non-zero. fn may
 * act on s (signal, stdin...) but must not create sessions. */
void session_each_live(struct spaced *d, const char *sb_id, int (*fn)(struct session *s, void *arg), void *arg);

/* Starts the process if it has not been started (first attach). */
int session_start(struct session *s, space_err *err);
/* Queues stdin bytes (len may be 0) and optionally closes stdin afterwards.
 * EBUSY: no stdin pipe, stdin closed, or process finished; E2BIG: queue full. */
int session_stdin(struct session *s, const void *data, size_t len, int close_after, space_err *err);
/* EBUSY if the process is not running. */
int session_signal(struct session *s, int signo, space_err *err);
/* The process is killed (session_cancel) at at_ms (wall clock, ms; 0: never) whoever reads
 * it: envd's Connect-Timeout-Ms on Start. Checked by sessions_tick (within a second). */
void session_set_deadline(struct session *s, int64_t at_ms);
/* Ends s whatever it is doing: not started yet, it fails as cancelled; running, SIGKILL (now,
 * or once the agent is back). */
void session_cancel(struct session *s);
/* Stdin bytes the session takes now without queueing beyond a couple of windows (0: none);
 * the callback runs whenever the agent acknowledges stdin (NULL: none). */
size_t session_stdin_room(const struct session *s);
void session_set_stdin_room_cb(struct session *s, void (*fn)(struct session *s, void *arg), void *arg);
/* A PTY session's window size; EBUSY if s is not a terminal or has ended. */
int session_resize(struct session *s, uint16_t rows, uint16_t cols, space_err *err);

/* Output access for streaming readers. Offsets count output bytes of stdout
 * and stderr together, in the order the agent produced them. */
uint64_t session_output_length(const struct session *s);
/* Offset of the first output byte still kept: older bytes were dropped by the output caps. */
uint64_t session_output_start(const struct session *s);
/* Once a second: sessions whose output paused for disk space resume when there is room. */
void sessions_tick(struct spaced *d);
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
/* While no reader is attached, s's output is acknowledged as soon as it is stored (kept within
 * the output caps), so the process never waits for a reader: envd's processes, whose output
 * nobody attached is simply not delivered. Readers attached still pace it. Not persisted: after
 * a daemon restart the session is paced again. */
void session_set_free_running(struct session *s);

#endif
