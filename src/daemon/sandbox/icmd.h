/* icmd.h -- a command the daemon runs in a sandbox for itself (a template build's step, a
 * template's start command and its readiness check): a session never stored, listed or
 * reachable by a token, its stdin fed from a file no faster than the guest takes it, its output
 * handed on as it comes and its first bytes kept, its end told once, from the loop. */
#ifndef SPACE_SANDBOX_ICMD_H
#define SPACE_SANDBOX_ICMD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "model/model.h"

struct spaced;
struct icmd;

#define ICMD_KEEP_MAX 4096 /* the output a command keeps for its caller */

/* Output as it comes (stdout and stderr together, in order). */
typedef void (*icmd_output_fn)(void *arg, const char *buf, size_t len);
/* The end: the exit code (>= 0), or -1 with why (killed, failed to run, the sandbox gone);
 * out: the first ICMD_KEEP_MAX bytes of its output, NUL-terminated. The icmd is freed after. */
typedef void (*icmd_done_fn)(void *arg, int code, const char *error, const char *out);

struct icmd_spec {
	enum sess_kind kind;         /* a command, or the agent's own file operation */
	const char *const *argv;     /* NULL-terminated */
	const char *user;            /* NULL or "": the template's default user */
	const json_t *env;           /* own VMs only (NULL: none) */
	const char *cwd;             /* own VMs only (NULL: the user's home) */
	const char *stdin_path;      /* its stdin, read from this file (NULL: none) */
	bool own_vm;                 /* the sandbox is one of the daemon's own (not a client's) */
	int64_t timeout_ms;          /* killed after this long (0: never) */
	icmd_output_fn output;       /* NULL: not needed */
	icmd_done_fn done;
	void *arg;
};

/* Starts it; NULL (err) when it could not. */
struct icmd *icmd_start(struct spaced *d, const char *sb_id, const struct icmd_spec *spec, space_err *err);
/* Ends it now (SIGKILL if it runs): done is not called. */
void icmd_cancel(struct icmd *c);

#endif
