/* spec.h -- typed requests for the sandbox core, and one validator per concept.
 *
 * Front ends (our /v1 API, later the E2B one) parse their wire format into
 * these structs, checking each value with the validators here, so a rule
 * such as "what an environment variable may be" exists once. The core takes
 * only these structs. */
#ifndef SPACE_SPEC_H
#define SPACE_SPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "model/model.h"

/* Limits (also in docs/api/reference.md). */
#define SPEC_ENV_MAX 1024          /* variables in one env map */
#define SPEC_ENV_KEY_MAX 256
#define SPEC_ENV_VALUE_MAX 32768
#define SPEC_META_MAX 128          /* metadata entries */
#define SPEC_META_KEY_MAX 128
#define SPEC_META_VALUE_MAX 4096
#define SPEC_ARGV_MAX 4096
#define SPEC_CWD_MAX 1024
#define SPEC_USER_MAX 32
#define SPEC_NAME_MAX 100          /* snapshot names */
#define SPEC_VCPUS_MAX 16
#define SPEC_MEMORY_MIN 64
#define SPEC_MEMORY_MAX 65536
#define SPEC_TIMEOUT_MAX 604800    /* a week */
#define SPEC_FORK_MAX 16
#define SPEC_TOKEN_TTL_MAX 86400
#define SPEC_POOL_MAX 64
#define SPEC_TAG_MAX 255           /* a session's tag (E2B's process tag) */

/* An ordered map of strings (keys unique), owning its strings. */
struct strmap {
	size_t n, cap;
	char **keys, **values;
};
/* Adds or replaces; -1 on allocation failure. */
int strmap_set(struct strmap *m, const char *key, const char *value);
const char *strmap_get(const struct strmap *m, const char *key);
void strmap_free(struct strmap *m);
/* A JSON object of the map (new reference), NULL on allocation failure. */
json_t *strmap_to_json(const struct strmap *m);

/* A list of strings, owning them. */
struct strlist {
	size_t n, cap;
	char **v;
};
int strlist_add(struct strlist *l, const char *s);
void strlist_free(struct strlist *l);
json_t *strlist_to_json(const struct strlist *l);

/* ---- validators: 0, or -1 with EINVAL and a message naming `what` ---- */
int spec_check_env_entry(const char *what, const char *key, size_t vlen, space_err *err);
int spec_check_meta_entry(const char *key, size_t vlen, space_err *err);
int spec_check_argv_entry(size_t i, const char *arg, size_t len, space_err *err);
int spec_check_cwd(const char *cwd, space_err *err);
int spec_check_user(const char *user, space_err *err);
/* A session tag: 0..SPEC_TAG_MAX bytes of printable ASCII or UTF-8 (no control characters). */
int spec_check_tag(const char *tag, size_t len, space_err *err);
/* A snapshot name: 1..SPEC_NAME_MAX of [A-Za-z0-9._-], not starting with
 * '.' or '-', and not shaped like a snapshot id ("sn-" + 16 hex). */
int spec_check_snapshot_name(const char *name, space_err *err);
/* A template reference or snapshot reference, as text: 1..127 printable. */
int spec_check_ref(const char *what, const char *ref, space_err *err);

/* ---- requests ---- */

struct create_req {
	char template_ref[128];   /* "" when created from a snapshot */
	char snapshot[128];       /* a snapshot id or name, "" = from the template */
	int vcpus;                /* 0: the template's (or snapshot's) */
	int memory_mib;           /* 0: the template's (or snapshot's) */
	struct strmap env;
	struct strmap metadata;
	bool timeout_set;
	int64_t timeout_s;        /* 0: never expires */
	bool on_timeout_set;
	enum on_timeout on_timeout;
	json_t *network;          /* egress policy, normalised (no values); NULL: the template's */
	bool ports_public;        /* every port public from the start (E2B's allowPublicTraffic,
				   * its default); false: private (SPACE's default) */
	/* A create a node claimed keeps the ids the api process wrote with the intent (cluster/
	 * node.c fills them, never a client's body); "": new ones. */
	char claim_sb_id[ID_LEN], claim_op_id[ID_LEN];
};

struct exec_req {
	struct strlist argv;
	struct strmap env;
	char cwd[SPEC_CWD_MAX];   /* "" = the user's home */
	char user[SPEC_USER_MAX + 1]; /* "" = the template's default user */
	bool stdin_open;
	int token_ttl_s;          /* 0 = the configured TTL */
	uint16_t pty_rows, pty_cols; /* 0: no terminal; else run on a PTY of this size */
	char tag[SPEC_TAG_MAX + 1]; /* "" = none */
};
/* Whether the core runs r as it is, whichever front end filled it (/v1's req_exec, E2B's
 * envd_start_req): argv 1..SPEC_ARGV_MAX entries (argv[0] not empty), env names and values,
 * cwd, user, token TTL, PTY size, tag. 0, or -1 with EINVAL naming what is wrong. */
int spec_check_exec(const struct exec_req *r, space_err *err);

struct timeout_req {
	int64_t timeout_s;        /* from now; 0 = never expires */
	bool on_timeout_set;
	enum on_timeout on_timeout;
};

void create_req_free(struct create_req *r);
void exec_req_free(struct exec_req *r);

#endif
