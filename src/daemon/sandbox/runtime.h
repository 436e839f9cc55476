/* runtime.h -- the sandbox core's insides: live sandboxes and sessions, and how its files share them */
#ifndef SPACE_RUNTIME_H
#define SPACE_RUNTIME_H

#include <event2/buffer.h>
#include <event2/event.h>
#include <stdbool.h>

#include "daemon.h"
#include "model/model.h"
#include "phases.h"
#include "proto.h"
#include "sandbox/sandbox.h"
#include "spool.h"
#include "vmm/jail.h"
#include "vmm/qcow2.h"
#include "vmm/vm.h"

struct agent;
struct capture;
struct gw;
struct net_ns_op;

/* The sandbox's netns and CA are ready for its VM (err NULL), or why not (egress.c). */
typedef void (*egress_ready_cb)(struct sandbox *sb, const space_err *err);

/* Called once when a VM being brought up is ready for commands (error NULL),
 * or why it is not. */
typedef void (*bringup_cb)(struct sandbox *sb, const char *error);

struct start_run;
struct sandbox {
	struct spaced *d;
	char event_reason[160];    /* why its next lifecycle event happens ("" = no reason given) */
	int64_t warned_expiry;     /* the expires_ms its timeout_warning was for */
	struct sandbox_rec rec;
	struct template_rec tmpl;
	struct vm *vm;
	struct agent *agent;       /* host end of the agent channel; NULL until it answers */
	struct session *sessions;  /* every session of this sandbox, newest first */
	struct op_rec op;          /* the operation in flight (op.id[0] == 0: none) */
	struct event *timer;       /* bring-up deadline */
	struct start_run *start;   /* its template's start command being readied (start_cmd.c) */
	bringup_cb up_done;        /* a bring-up in progress (launch.c) */
	struct event *launch_ev;   /* its QEMU is started from here, a loop turn later */
	char launch_snap[PATH_MAX]; /* ... from this snapshot's directory ("" = boot) */
	bool launch_snap_own;       /* ... whose memory image no other VM maps (a suspend
				     * snapshot, the fork snapshot of a single child) */
	bool identity_done;        /* this VM got its identity (clock, entropy, hostname) */
	bool identity_sent;        /* H_IDENTITY is on its way on this connection */
	bool guest_ran;            /* this VM's vCPUs ran (a restored guest may have written its disk) */
	struct capture *capture;   /* a snapshot being taken (capture.c) */
	struct event *act_timer;   /* the deadline of the action in flight (stop) or of the warm-up */
	uint32_t warm_chan;        /* the warm-up command's channel while it runs (warmup.c) */
	void (*warm_done)(struct sandbox *sb);
	uint64_t out_kept;         /* output bytes its loaded sessions keep (sandbox_output_max_mib) */
	uint64_t out_evicted;      /* ... and those of ended sessions whose objects were let go */
	/* Egress (egress.c): its gateway while its VM lives (NULL: none now), the generation
	 * of the last policy sent, and whether its VM has the network device. */
	struct gw *gw;
	uint64_t net_gen;
	bool net_dev;
	bool launch_snap_net;      /* the snapshot launched from had the network device */
	int64_t gw_retry_ms;       /* a gateway that failed to start is tried again after this */
	struct net_ns_op *net_op;  /* its netns being made (launch waits for it) */
	egress_ready_cb net_ready; /* ... and what then goes on */
	bool net_pending;          /* the first policy push to a new gateway is under way */
	bool net_waiting;          /* ... and the bring-up waits for it to end */
	bool net_repush;           /* the policy changed meanwhile: push again once it ends */
	bool net_resolving;        /* its secrets are being read for a push (egress.c) */
	uint64_t gw_seq;           /* counts its gateways: which one a secrets read was for */
	bool vm_next;              /* launch: the network is ready, QEMU starts on the next turn */
	bool unsaved;              /* its last store write failed: sandbox_tick writes it again */
	int64_t suspended_bytes;   /* what the saved state of its last suspend here takes (0: not known) */
	struct disk_share *share;  /* its disk being copied to the shared directory (disks.c) */
	struct start_phases phases; /* its last start, step by step (phases.c) */
	/* A template build's VM (role build, build_vm.c): whom it tells that it runs (or could
	 * not start) and that a layer was taken. NULL: its build is gone (it is deleted). */
	struct port_set *ports;    /* its public ports, once read (ports.c) */
	int port_conns;            /* connections to its ports open now (ports.c) */
	int64_t active_ms;         /* its last activity seen (suspend_idle; 0: none yet) */
	build_vm_up_fn build_up;
	build_vm_layer_fn build_layer;
	void *build_arg;
	struct sandbox *next;
};

struct session {
	struct spaced *d;
	struct sandbox *sb;
	struct session_rec rec;
	struct spool *spool;       /* opened on first use */
	uint64_t acked;            /* furthest output offset acknowledged to the agent, on any
				    * connection (after a restart: what the spool held) */
	bool ack_due;              /* output arrived in this read pass: acknowledge at its end */
	bool out_paused;           /* an ACK waits for disk space (sessions_tick) */
	uint64_t delivered;        /* furthest offset any reader has taken */
	struct session_watch *watches;
	bool exec_sent;            /* H_EXEC is on its way (or done) for this agent connection */
	bool start_wanted;         /* attached while the agent was not connected */
	bool exec_here;            /* this daemon process sent H_EXEC (flow_start_resend) */
	struct evbuffer *stdin_q;  /* stdin accepted from clients, not yet sent */
	struct evbuffer *stdin_unacked; /* [stdin_acked, stdin_sent): sent, kept until the agent
					 * acknowledges it (resent after a reconnect if lost) */
	uint64_t stdin_sent, stdin_acked;
	bool stdin_close_req, stdin_close_sent;
	bool released;             /* agent was told to forget the channel */
	bool kill_wanted;          /* cancelled while the agent was away: SIGKILL after its hello */
	bool free_running;         /* unread output never pauses the process (E2B's processes) */
	int64_t kill_at_ms;        /* a client's deadline for the process: SIGKILL then (0: none) */
	bool unsaved;              /* its last store write failed: sandbox_tick writes it again */
	bool ephemeral;            /* the daemon's own (a file operation, a watch): never stored or
				    * listed; freed with its spool once ended and unwatched */
	void (*on_stdin_room)(struct session *s, void *arg); /* stdin was acknowledged */
	void *stdin_room_arg;
	struct session *next;
};

/* Output bytes a reader may lag behind before the process is paced. */
#define SESSION_MAX_LAG (8u << 20)
/* An ended session nobody reads is let go this long after it ended (reloaded on demand). */
#define SESSION_EVICT_AFTER_MS 5000
/* Stdin bytes the daemon queues for one session. */
#define SESSION_MAX_STDIN_QUEUE (16u << 20)

/* build_vm.c: a build VM's bring-up ended (error NULL: it runs); its build is told. */
void build_vm_up(struct sandbox *sb, const char *error);

/* sandbox.c: the registry and what every action shares */
void sandbox_persist(struct sandbox *sb);
/* Moves to state `to` (checked against the state machine) and persists. */
void sandbox_set_state(struct sandbox *sb, enum sb_state to);
struct sandbox *sandbox_new(struct spaced *d);
/* A sandbox's VM life ended badly: failed, with why; the op in flight fails. */
void sandbox_fail(struct sandbox *sb, const char *why);
/* Deleting is done (or there was no VM to kill): files gone, state deleted. */
void sandbox_finish_delete(struct sandbox *sb);
/* Starts deletion (preempting any operation in flight). */
void sandbox_start_delete(struct sandbox *sb, const char *why);
/* Frees a deleted sandbox's runtime object (it must be unlinked first). */
void sandbox_free(struct sandbox *sb);
int sandbox_count(struct spaced *d, enum sb_role role, const char *digest, enum sb_state state);
void sandbox_copy_out(const struct sandbox *sb, struct sandbox_rec *out, struct op_rec *op);
/* The VM's own paths and sizes (launch.c fills the memory and state). */
struct spec_bufs {
	char run_dir[PATH_MAX], sock_dir[PATH_MAX], kernel[PATH_MAX];
	char image[PATH_MAX], state[PATH_MAX], jail_dir[PATH_MAX];
	char disks[PATH_MAX], images[PATH_MAX], shared[PATH_MAX];
	const char *layer_dirs[4];
};
void sandbox_spec(struct sandbox *sb, struct vm_spec *spec, struct spec_bufs *b);
/* The uid sb's next QEMU runs as: its own if still free, else the lowest
 * free one of the configured range (0 with --no-jail). */
int sandbox_jail_uid(struct sandbox *sb, space_err *err);

/* launch.c: bringing a VM up, and what its guest reports */
/* After a restart: a running VM that was adopted mid-bring-up gets its agent
 * and identity the same way. */
void sandbox_bringup_adopted(struct sandbox *sb, bringup_cb done);
/* Starts sb's VM: a cold boot from sb->rec.disk, or the snapshot's memory and
 * device state (snap non-NULL). done runs once the guest answers and has its
 * identity, or with why not (the VM is then gone or being killed). */
int sandbox_launch(struct sandbox *sb, const struct snapshot_rec *snap, bringup_cb done, space_err *err);
extern const struct vm_events sandbox_vm_events;
/* A connection to the agent is up and its H_HELLO queued: a VM being brought up gets its
 * identity right behind it, without waiting for the answer. */
void sandbox_agent_connected(struct sandbox *sb);
/* The agent answered its first HELLO on this connection. */
void sandbox_agent_ready(struct sandbox *sb);
/* The agent applied (or tried) the identity it was sent. */
void sandbox_identity_applied(struct sandbox *sb, uint32_t applied, int error);
/* The first policy push of its new gateway ended: a bring-up that waited for it ends. */
void sandbox_network_ready(struct sandbox *sb);
/* The agent connection dropped while QEMU lives on (reconnect later). */
void sandbox_agent_lost(struct sandbox *sb, const char *why);
/* Sends the guest its wall clock (after vCPUs were stopped for a while). */
void sandbox_send_clock(struct sandbox *sb);

/* warmup.c: a first command no client waits for */
/* Runs it; done (once) when it finished and the agent forgot it, or after a
 * timeout (the VM is usable either way). */
int sandbox_warm_up(struct sandbox *sb, void (*done)(struct sandbox *sb), space_err *err);
void sandbox_warm_exit(struct sandbox *sb, uint32_t chan);
void sandbox_pong(struct sandbox *sb, uint64_t cookie);
/* Not warming up (done, or never asked). */
bool sandbox_warm(const struct sandbox *sb);

/* identity.c: what makes a clone itself */
/* H_IDENTITY for sb: the wall clock, fresh host entropy, its hostname, and
 * the network configuration hook (empty until the egress gateway fills it). */
int identity_send(struct sandbox *sb, space_err *err);
/* The H_IDENTITY net payload of every sandbox (docs/design/egress.md): eth0
 * EGRESS_GUEST_ADDR/EGRESS_PREFIX_LEN, gateway and DNS EGRESS_GW_ADDR, and ca_pem (the
 * sandbox's CA certificate; NULL or "": none). Appends to net; -1 if the CA is over
 * PROTO_NET_MAX_CA or the writer failed. */
int identity_net_payload(struct proto_wr *net, const char *ca_pem);

/* egress.c: the sandbox's network (docs/design/egress.md) */
/* Do this daemon's VMs get a network device (it runs as root)? */
bool egress_enabled(const struct spaced *d);
/* Before a launch with the device, step 1: the netns (made by a child while the loop goes
 * on) and the CA. Returns 1 if both are there now, 0 if ready(sb, NULL or why) comes from
 * the loop later, -1 on failure. */
int egress_prepare(struct sandbox *sb, egress_ready_cb ready, space_err *err);
/* Step 2: the gateway, adopted or started, and its first policy push under way (from the
 * loop). One that will not start is logged and tried again later: the guest reaches
 * nothing meanwhile. */
void egress_gateway_up(struct sandbox *sb);
/* The bring-up is about to end: true if it must wait for the first push to be answered
 * (then sandbox_network_ready() ends it). */
bool egress_wait_ready(struct sandbox *sb);
/* Sends sb->rec.network (secret values resolved) to its gateway, if it has one; waits
 * for the acknowledgement (a push still under way is followed by this one). resolved: the
 * policy with its values, read on the store's thread by the caller (egress_resolve), so that
 * it is in force before the caller answers; NULL: a policy that injects secrets is sent once
 * their values are read there (the loop never reads them). */
int egress_push(struct sandbox *sb, const json_t *resolved, space_err *err);
/* Its VM is gone: the gateway goes too (the next launch brings it back). */
void egress_down(struct sandbox *sb);
/* Deletion: gateway, netns. (The CA and audit files go with its run_dir.) */
void egress_remove(struct sandbox *sb);
/* Periodic: a gateway that died while its VM runs is started again. */
void egress_tick(struct spaced *d);
/* After the start-up reconcile: spare netns are kept from then on (--net-spares); at
 * shutdown they are removed. */
void egress_start(struct spaced *d);
void egress_shutdown(struct spaced *d);
/* Start-up, after the VMs were adopted: stale netns removed, gateways adopted or started. */
void egress_reconcile(struct spaced *d);
/* The sandbox's CA certificate (PEM, malloc'ed), NULL if it has none. */
char *egress_ca_cert(const struct sandbox *sb);
bool egress_policy_names_secret(const json_t *network, const char *name);
/* A secret was set or deleted: every running gateway whose policy names it gets it again. */
void egress_secret_changed(struct spaced *d, const char *name);

/* lifecycle.c: the action table */
struct lc_args {
	int count;                  /* fork */
	const char *name;           /* snapshot */
	json_t *children;           /* fork: ids made by the caller (borrowed) */
	const char *op_id;          /* a claimed restore: the api process's operation id (NULL: new) */
};
/* Checks the action may start now (409 with the state and operation if
 * not), records the operation, moves to the action's transient state and
 * starts it. */
int lifecycle_begin(struct sandbox *sb, enum op_kind kind, const struct lc_args *args, space_err *err);
/* The action in flight ended: err NULL on success. Sets the action's final
 * state (or back where it started) and finishes the operation. */
void lifecycle_done(struct sandbox *sb, const char *error);
/* After a restart, an operation found in flight: its action decides. */
void lifecycle_reconcile(struct sandbox *sb);
/* The message of a 409 for kind on sb ("sandbox sb-.. is paused; pause needs running"). */
int lifecycle_refuse(struct sandbox *sb, enum op_kind kind, space_err *err);
/* The live sandbox a client names for `kind`: ENOENT unknown (or not a
 * client's), EBUSY already deleted. */
struct sandbox *sandbox_find_for(struct spaced *d, const char *id, enum op_kind kind, space_err *err);

/* act_read.c: read(conn, arg) on the store's thread, behind the writes queued before; then
 * step(sb, arg) on the loop, with sb NULL if the sandbox is gone or its operation (the one in
 * flight at the call) ended meanwhile. step always runs once unless this returns -1 (then
 * neither runs; arg stays the caller's). */
int act_read(struct sandbox *sb, void (*read)(struct store *conn, void *arg),
	     void (*step)(struct sandbox *sb, void *arg), void *arg, space_err *err);

/* A snapshot record an action reads by id (act_read): snapshot_read_new (NULL when out of
 * memory), snapshot_read_run on the store's thread, snapshot_read_free after the step. */
struct snapshot_read {
	char id[ID_LEN];
	struct snapshot_rec snap;
	int rc;
	space_err err;
};
struct snapshot_read *snapshot_read_new(const char *id);
void snapshot_read_run(struct store *conn, void *arg);
void snapshot_read_free(struct snapshot_read *q);

/* act_*.c: each action's start and reconcile */
int act_pause_start(struct sandbox *sb, const struct lc_args *a, space_err *err);
int act_resume_start(struct sandbox *sb, const struct lc_args *a, space_err *err);
int act_suspend_start(struct sandbox *sb, const struct lc_args *a, space_err *err);
int act_restore_start(struct sandbox *sb, const struct lc_args *a, space_err *err);
int act_stop_start(struct sandbox *sb, const struct lc_args *a, space_err *err);
int act_start_start(struct sandbox *sb, const struct lc_args *a, space_err *err);
int act_fork_start(struct sandbox *sb, const struct lc_args *a, space_err *err);
int act_snapshot_start(struct sandbox *sb, const struct lc_args *a, space_err *err);
void act_pause_reconcile(struct sandbox *sb);
void act_resume_reconcile(struct sandbox *sb);
void act_capture_reconcile(struct sandbox *sb);
void act_restore_reconcile(struct sandbox *sb);
void act_stop_reconcile(struct sandbox *sb);
void act_boot_reconcile(struct sandbox *sb);
/* The VM of a stopping (suspending) sandbox exited: true when that was the
 * action's doing and it is finished. */
bool act_stop_vm_exited(struct sandbox *sb);
bool act_suspend_vm_exited(struct sandbox *sb);
/* A fork child's parent capture ended (err NULL: start the child from snap). */
void act_fork_child_go(struct sandbox *child, const struct snapshot_rec *snap, const char *error);

/* start_cmd.c: the template's start command (template config "start": {cmd, ready?,
 * timeout_s}) started detached in the running VM and its ready command polled until it exits
 * 0: done(sb, NULL), or done(sb, why) past the timeout. Cancelled with the sandbox. */
typedef void (*start_cmd_cb)(struct sandbox *sb, const char *error);
bool start_cmd_wanted(const struct sandbox *sb);
int start_cmd_begin(struct sandbox *sb, start_cmd_cb done, space_err *err);
void start_cmd_cancel(struct sandbox *sb);

/* capture.c: stop, freeze the disk, save memory and devices into a snapshot */
typedef void (*capture_cb)(struct sandbox *sb, struct snapshot_rec *snap, const char *error);
/* Takes a snapshot of kind `kind` of sb's VM. freeze: give the snapshot its
 * own read-only disk layer (and a seed overlay to start clones on); resume:
 * let the VM run again afterwards (else it stays paused: the caller ends
 * it). done gets the snapshot record (ready, persisted) or why it failed (no
 * record left behind). */
int capture_start(struct sandbox *sb, enum snap_kind kind, const char *name, bool freeze, bool resume,
		  capture_cb done, space_err *err);
void capture_abort(struct sandbox *sb, const char *why);
/* A copy of the record of the capture under way (sb->capture set): the caller clears it. */
void capture_record(const struct sandbox *sb, struct snapshot_rec *out);
/* Would capture_start refuse now? (For a fork, before its children exist.) */
int capture_check(struct sandbox *sb, enum snap_kind kind, bool freeze, space_err *err);
/* Forgets a capture without a word (the daemon is shutting down). */
void capture_drop(struct sandbox *sb);

/* snapshots.c */
/* A new snapshot record (state creating) for sb, and its directory; the caller stores it. */
int snapshot_begin(struct spaced *d, struct sandbox *sb, enum snap_kind kind, const char *name,
		   struct snapshot_rec *out, space_err *err);
/* Removes a snapshot's files and record, on the store's thread (behind the writes queued
 * before); its sealed memory copy is forgotten at once. */
void snapshot_remove(struct spaced *d, const struct snapshot_rec *snap);
/* The same for a snapshot known by id only: its record is read there first. "" or an id
 * without a record: nothing. */
void snapshot_drop(struct spaced *d, const char *id);
/* The same, then then(d, sb_id) on the loop once it is done (not if the daemon stops first);
 * -1 (then never runs) if it could not be queued. */
int snapshot_drop_then(struct spaced *d, const char *id, void (*then)(struct spaced *d, const char *sb_id),
		       const char *sb_id);
/* Do its files exist? (tmpfs snapshots do not survive a host reboot.) */
bool snapshot_files_ok(const struct snapshot_rec *snap);
/* Start-up: drop snapshots whose files are gone or which were being made. */
void snapshots_reconcile(struct spaced *d);

/* disks.c: qcow2 layers under <state>/disks */
/* A new, unused layer path. */
void disk_new_path(struct spaced *d, char out[PATH_MAX]);
/* A new layer for a sandbox: a copy of `seed` (an empty overlay whose backing
 * file is a template image or a frozen layer). */
int disk_from_seed(struct spaced *d, const char *seed, char out[PATH_MAX], space_err *err);
/* --shared-dir (a node of a cluster): a suspended sandbox's disk, its whole chain, copied into
 * one layer under <shared>/disks so that any node can restore it, by a qemu-img the loop does
 * not wait for; then sb->rec.disk names the copy and done(sb, NULL) runs (done(sb, why): it
 * stays where it was). disk_share_cancel (a deletion, the daemon stopping) kills the copy;
 * done is not called. */
typedef void (*disk_shared_cb)(struct sandbox *sb, const char *error);
int disk_share(struct sandbox *sb, disk_shared_cb done, space_err *err);
void disk_share_cancel(struct sandbox *sb);
/* The template's seed overlay, made once (qemu-img) next to its image. */
int disk_template_seed(struct spaced *d, const struct template_rec *t, char out[PATH_MAX], space_err *err);
/* Deletes layers no sandbox or snapshot reaches through its backing chain. */
void disks_gc(struct spaced *d);
/* Is an action (an operation, a capture) under way on any sandbox? */
bool sandbox_busy(struct spaced *d);

/* create.c */
/* A sandbox of any role (a user's, a pool VM, a ready-snapshot builder) from a request and
 * what create_read read for it (pre: required; its records are moved out). */
int sandbox_create_pre(struct spaced *d, const struct create_req *req, struct create_reads *pre,
		       enum sb_role role, struct sandbox **out, space_err *err);
/* A sandbox record from a create request, template or snapshot resolved (moved out of pre:
 * what create_read read). */
int create_prepare(struct spaced *d, const struct create_req *req, struct sandbox *sb,
		   struct snapshot_rec *from, struct create_reads *pre, space_err *err);

/* A warm-pool or builder VM just came up: its warm-up (create.c). */
void warm_if_daemons(struct sandbox *sb);

/* pool.c */
/* Takes a ready warm-pool VM for a create of this template and size. */
struct sandbox *pool_claim(struct spaced *d, const char *digest, int vcpus, int memory_mib);
void pools_tick(struct spaced *d);
void pools_free(struct spaced *d);

/* ready.c: one snapshot per template to clone creates from */
void ready_tick(struct spaced *d);
/* The builder VM of a ready snapshot is running: snapshot it. */
void ready_builder_up(struct sandbox *sb);

/* session.c */
void session_persist(struct session *s);
/* A runtime session for rec (copied), linked into sb, its spool opened. */
struct session *session_alloc(struct sandbox *sb, const struct session_rec *rec, space_err *err);
/* session_create.c: H_EXEC for this session; -1 if it would not fit one frame. */
int session_exec_encode(const struct session *s, struct proto_wr *w);
/* tokens.c: a deleted sandbox's tokens leave this process's memory; all of them at exit. */
void token_forget_sandbox(struct spaced *d, const char *sb_id);
void tokens_free(struct spaced *d);
/* session_create.c: a fresh 64-hex token and its SHA-256 (hex), which is all that is kept. */
int token_generate(char token[65], char hash[65], space_err *err);
void token_sha256_hex(const char *in, char out[65]);
/* kinds.c: the frame that opens s's channel (H_EXEC or H_OPEN, into *type unless NULL) and its
 * payload; -1 if it would not fit one frame. */
int session_open_encode(const struct session *s, struct proto_wr *w, uint16_t *type);
int sessions_load(struct sandbox *sb, space_err *err);
void sessions_free(struct sandbox *sb);
/* The sandbox failed or is going away: finish sessions still running. */
void sessions_abort(struct sandbox *sb, const char *why);
/* The agent (re)connected: its live channels, then resume every session. */
void sessions_agent_hello(struct sandbox *sb, const uint32_t *chans, const uint32_t *states,
			  const uint64_t *stdin_offs, uint32_t n);
struct session *session_by_chan(struct sandbox *sb, uint32_t chan);
void session_on_started(struct session *s, uint32_t pid);
void session_on_data(struct session *s, int stream, uint64_t off, const uint8_t *p, size_t n);
void session_on_exit(struct session *s, uint64_t final_off, int code, int sig);
void session_on_error(struct session *s, int errnum, const char *msg);
void session_on_stdin_ack(struct session *s, uint64_t off);
/* End of a read pass over the agent channel: one H_ACK per session that got output. */
void sessions_flush_acks(struct sandbox *sb);

/* agent.c: host end of the framed channel to space-agent */
struct agent *agent_new(struct sandbox *sb, const char *sock_path);
/* The same for the VM of a sandbox adopted after a restart: its guest ran and talked to the
 * previous daemon, so bytes of that connection may still sit in its port; a connection
 * that gets no A_HELLO within AGENT_HELLO_TIMEOUT_S is made again (else the guest's agent,
 * discarding up to the next H_HELLO, would wait for ever). */
struct agent *agent_adopt(struct sandbox *sb, const char *sock_path);
void agent_free(struct agent *a);
bool agent_ready(const struct agent *a);
int agent_send(struct agent *a, uint16_t type, uint32_t chan, const void *payload, size_t len);
/* Drop and re-open the channel (after a second): the agent then resends
 * everything not yet acknowledged. Safe inside the channel's callbacks. */
void agent_resync(struct agent *a, const char *why);
/* Bytes queued toward QEMU not yet written (for pacing stdin). */
size_t agent_queued(const struct agent *a);
/* May we log one more line caused by this sandbox's guest? (A token bucket; it reports the
 * lines it suppressed when it lets one through again.) */
bool agent_log_ok(struct agent *a);

#endif
