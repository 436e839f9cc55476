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
	SB__COUNT
};
const char *sb_state_name(enum sb_state s);
int sb_state_parse(const char *name); /* -1 if unknown */
/* The sandbox state machine: may a sandbox go from `from` to `to`? */
bool sb_transition_ok(enum sb_state from, enum sb_state to);
/* True for states in which a QEMU process should exist. */
bool sb_state_has_vm(enum sb_state s);

enum op_state { OP_PENDING, OP_RUNNING, OP_SUCCEEDED, OP_FAILED, OP__COUNT };
const char *op_state_name(enum op_state s);
int op_state_parse(const char *name);
bool op_state_done(enum op_state s);

enum sess_state { SESS_CREATED, SESS_RUNNING, SESS_EXITED, SESS_FAILED, SESS__COUNT };
const char *sess_state_name(enum sess_state s);
int sess_state_parse(const char *name);

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
};

struct op_rec {
	char id[ID_LEN];
	char kind[16];           /* create, delete, ... */
	char sandbox_id[ID_LEN];
	enum op_state state;
	char error[512];
	int64_t created_ms, updated_ms;
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
void sandbox_rec_clear(struct sandbox_rec *s);
void session_rec_clear(struct session_rec *s);

/* Identifiers: prefix + 16 random lowercase hex chars ("sb-", "op-", "ss-"). */
void id_new(char out[ID_LEN], const char *prefix);
/* Does s look like an id we could have made with this prefix? */
bool id_valid(const char *s, const char *prefix);

int64_t now_ms(void);
/* RFC 3339 UTC with milliseconds, e.g. 2026-11-30T05:38:27.123Z */
void fmt_time(char out[32], int64_t ms);

#endif
