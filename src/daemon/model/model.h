/* model.h -- the daemon's resources (sandbox, operation, session, template) and their states */
#ifndef SPACE_MODEL_H
#define SPACE_MODEL_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#define ID_LEN 32 /* "sb-" + 16 hex + NUL fits with room */

enum sb_state {
	SB_CREATING,
	SB_RUNNING,
	SB_PAUSING,
	SB_PAUSED,
	SB_SUSPENDING,
	SB_SUSPENDED,
	SB_RESTORING,
	SB_STOPPING,
	SB_STOPPED,
	SB_DELETING,
	SB_DELETED,
	SB_FAILED,
	/* Its node's lease expired (or its VM is gone with the node): the row is kept with the
	 * reason in error; only delete leaves it (docs/design/cluster.md). */
	SB_LOST,
	SB__COUNT
};
const char *sb_state_name(enum sb_state s);
int sb_state_parse(const char *name); /* -1 if unknown */
/* The sandbox state machine: may a sandbox go from `from` to `to`? */
bool sb_transition_ok(enum sb_state from, enum sb_state to);
/* True for states in which a QEMU process should exist. */
bool sb_state_has_vm(enum sb_state s);

/* What an operation does (docs/design/lifecycle.md has each one's states). */
enum op_kind {
	OPK_CREATE,
	OPK_DELETE,
	OPK_PAUSE,
	OPK_RESUME,
	OPK_SUSPEND,
	OPK_RESTORE,
	OPK_STOP,
	OPK_START,
	OPK_FORK,
	OPK_SNAPSHOT,
	OPK_BUILD,     /* a template build (build/): no sandbox of a client's */
	OPK__COUNT
};
const char *op_kind_name(enum op_kind k);
int op_kind_parse(const char *name);

enum op_state { OP_PENDING, OP_RUNNING, OP_SUCCEEDED, OP_FAILED, OP__COUNT };
const char *op_state_name(enum op_state s);
int op_state_parse(const char *name);
bool op_state_done(enum op_state s);

enum sess_state { SESS_CREATED, SESS_RUNNING, SESS_EXITED, SESS_FAILED, SESS__COUNT };
/* What a session's channel is (docs/design/channels.md): a command, a command on a terminal,
 * a file operation or a filesystem watch run by the agent itself. */
enum sess_kind { SESS_KIND_PROCESS, SESS_KIND_PTY, SESS_KIND_FILE, SESS_KIND_WATCH, SESS_KIND__COUNT };

/* How a sandbox's VM first came up: a cold boot, a clone of its template's
 * ready snapshot or of a named snapshot, a VM taken from a warm pool, or a
 * fork of another sandbox. */
enum start_kind { START_BOOT, START_CLONE, START_POOL, START_FORK, START__COUNT };
const char *start_kind_name(enum start_kind k);
int start_kind_parse(const char *name);

/* What happens when a sandbox's timeout is reached. */
/* What a timeout does: delete, suspend, or suspend once the sandbox has been idle (no session
 * running, no port traffic) for timeout_s, counted from its last activity. */
enum on_timeout { ON_TIMEOUT_DELETE, ON_TIMEOUT_SUSPEND, ON_TIMEOUT_SUSPEND_IDLE, ON_TIMEOUT__COUNT };
const char *on_timeout_name(enum on_timeout t);
int on_timeout_parse(const char *name);

/* Who a sandbox is for: a client, a warm pool (not visible until a create
 * claims it), or the daemon itself (the VM a ready snapshot is taken from). */
/* builder: a ready snapshot's VM (ready.c); build: a template build's (build_vm.c) */
enum sb_role { ROLE_USER, ROLE_POOL, ROLE_BUILDER, ROLE_BUILD, ROLE__COUNT };
const char *sb_role_name(enum sb_role r);
int sb_role_parse(const char *name);

/* Snapshots: memory image + device state + a frozen disk layer. */
enum snap_kind { SNAP_READY, SNAP_NAMED, SNAP_SUSPEND, SNAP_FORK, SNAP__COUNT };
const char *snap_kind_name(enum snap_kind k);
int snap_kind_parse(const char *name);

enum snap_state { SNAPS_CREATING, SNAPS_READY, SNAPS_FAILED, SNAPS__COUNT };
const char *snap_state_name(enum snap_state s);
int snap_state_parse(const char *name);
const char *sess_state_name(enum sess_state s);
int sess_state_parse(const char *name);
const char *sess_kind_name(enum sess_kind k);
int sess_kind_parse(const char *name);

struct template_rec {
	char digest[80];    /* "sha256:<64 hex>" */
	char name[64];
	json_t *tags;       /* array of "name:tag" strings */
	char dir[PATH_MAX]; /* directory holding vmlinuz, rootfs.ext4, template.json */
	int vcpus;
	int memory_mib;
	char default_user[64];
	json_t *env;        /* object: default environment */
	int64_t created_ms;
	int64_t image_bytes;
	/* Schema v4: the default egress policy of its sandboxes (template.json's "network",
	 * normalised, no values); {} = deny-all. */
	json_t *network;
	/* Schema v9 (PostgreSQL v4): what a build made its defaults beyond env and user, from
	 * template.json: {"workdir"?, "start"?, "expose"?, "labels"?, "from"?}; NULL: none. */
	json_t *config;
};

struct sandbox_rec {
	char id[ID_LEN];
	enum sb_state state;
	char template_ref[128];  /* as the client asked ("base", "base:latest") */
	char template_digest[80];
	int vcpus;
	int memory_mib;
	json_t *env;             /* object string->string */
	json_t *metadata;        /* object string->string */
	int64_t timeout_s;       /* 0: never expires */
	int64_t created_ms, updated_ms, expires_ms;
	int pid;                 /* QEMU pid, 0 if none */
	uint64_t pid_start;      /* /proc/<pid>/stat starttime, guards pid reuse */
	uint32_t next_chan;      /* next agent channel id to hand out */
	char error[512];         /* why it failed, "" otherwise */
	/* Lifecycle (schema v2). */
	char disk[PATH_MAX];     /* top qcow2 layer the VM writes ("" = legacy run_dir overlay) */
	char parent_id[ID_LEN];  /* the sandbox this one was forked from, "" if none */
	char snapshot_id[ID_LEN]; /* suspended: the snapshot holding its state (kept while it is restored) */
	char source_snapshot[ID_LEN]; /* created from this snapshot ("" = from the template) */
	enum start_kind start_kind;
	enum on_timeout on_timeout;
	enum sb_role role;
	enum sb_state prev_state; /* where an action that fails returns to */
	/* Jail (schema v3): the uid (and gid) its QEMU runs as, 0 if none. */
	uint32_t jail_uid;
	/* Egress (schema v4): its policy, normalised, secret names only; {} = deny-all. */
	json_t *network;
	/* Cluster (schema v7, docs/design/cluster.md): the node that owns it ("" = none: a
	 * single-node daemon, or a create no node has claimed yet), and the row's generation,
	 * bumped by the store on every write (read-only for callers). */
	char node_id[64];
	int64_t generation;
};

struct op_rec {
	char id[ID_LEN];
	enum op_kind kind;
	char sandbox_id[ID_LEN];
	enum op_state state;
	char error[512];
	int64_t created_ms, updated_ms;
	json_t *result;          /* what the operation made (fork: children; snapshot: its id), or NULL */
};

struct snapshot_rec {
	char id[ID_LEN];         /* "sn-..." */
	enum snap_kind kind;
	enum snap_state state;
	char name[128];          /* named snapshots: unique among them; else "" */
	char sandbox_id[ID_LEN]; /* taken from this sandbox */
	char template_ref[128];
	char template_digest[80];
	int vcpus;
	int memory_mib;
	json_t *env;             /* the sandbox's env: clones inherit it */
	uint32_t next_chan;      /* channels in the snapshot's guest memory are below this */
	char dir[PATH_MAX];      /* holds mem (memory image), state (device state), seed.qcow2 */
	char disk[PATH_MAX];     /* frozen disk layer: the backing file of seed.qcow2 */
	int64_t bytes;           /* disk or tmpfs space its files take */
	int64_t created_ms;
	char error[512];
	/* Schema v4: its VM had the network device (docs/design/egress.md); a VM restored
	 * from it must have it exactly when this is set. */
	bool net;
};

struct session_rec {
	char id[ID_LEN];
	char sandbox_id[ID_LEN];
	uint32_t chan;           /* agent channel id, unique within the sandbox */
	json_t *argv;            /* array of strings */
	json_t *env;             /* object string->string */
	char cwd[1024];
	char user[64];
	bool stdin_open;         /* process was given a stdin pipe */
	enum sess_kind kind;
	uint16_t pty_rows, pty_cols; /* SESS_KIND_PTY: the terminal's size (last resize) */
	char tag[256];           /* a name the client chose to find it by (E2B's process tag), "" none */
	enum sess_state state;
	int pid;
	int exit_code;           /* valid when state == SESS_EXITED and signal == 0 */
	int exit_signal;         /* 0 if it exited normally */
	char error[512];
	char token_hash[65];     /* sha256 hex of the current data-plane token */
	int64_t token_expires_ms;
	int64_t created_ms, started_ms, ended_ms;
};

/* Free the json members (the structs themselves are caller-owned). */
void template_rec_clear(struct template_rec *t);
/* *dst = *src with its json members copied (deep: a record another thread reads keeps its own). */
void template_rec_copy(struct template_rec *dst, const struct template_rec *src);
void sandbox_rec_clear(struct sandbox_rec *s);
void session_rec_clear(struct session_rec *s);
void op_rec_clear(struct op_rec *op);
void snapshot_rec_clear(struct snapshot_rec *s);

/* Identifiers: prefix + 16 random lowercase hex chars ("sb-", "op-", "ss-"). */
void id_new(char out[ID_LEN], const char *prefix);
/* Does s look like an id we could have made with this prefix? */
bool id_valid(const char *s, const char *prefix);

int64_t now_ms(void);
/* RFC 3339 UTC with milliseconds, e.g. 2026-11-30T05:38:27.123Z */
void fmt_time(char out[32], int64_t ms);

#endif
