/* cli.h -- what spacectl's verbs share: the verb table entry, usage
 * errors, argument parsing helpers, showing an answer, table output and
 * requests that start an operation */
#ifndef SPACE_CLI_CLI_H
#define SPACE_CLI_CLI_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "client.h"

struct ctl_verb {
	const char *name;
	const char *usage;   /* after "spacectl <name> " */
	const char *summary; /* one line for `spacectl help` */
	const char *help;    /* option details for `spacectl help <name>` */
	/* argv[0] is "spacectl <name>" (getopt's messages use it). */
	int (*run)(struct ctl *c, int argc, char **argv);
};

extern const struct ctl_verb ctl_verb_info, ctl_verb_templates, ctl_verb_create,
	ctl_verb_ls, ctl_verb_exec, ctl_verb_logs, ctl_verb_rm;
/* cmd_lifecycle.c */
extern const struct ctl_verb ctl_verb_pause, ctl_verb_resume, ctl_verb_suspend,
	ctl_verb_restore, ctl_verb_stop, ctl_verb_start, ctl_verb_wake;
extern const struct ctl_verb ctl_verb_fork, ctl_verb_snapshot, ctl_verb_snapshots,
	ctl_verb_snapshot_rm, ctl_verb_timeout, ctl_verb_pool;
/* cmd_cp.c */
extern const struct ctl_verb ctl_verb_cp;
/* cmd_network.c, cmd_secret.c, cmd_egress.c */
extern const struct ctl_verb ctl_verb_network, ctl_verb_secret, ctl_verb_egress;
extern const struct ctl_verb ctl_verb_ports, ctl_verb_expose, ctl_verb_port_forward;
extern const struct ctl_verb ctl_verb_template; /* cmd_template.c */
extern const struct ctl_verb ctl_verb_events, ctl_verb_webhook; /* cmd_events.c */
extern const struct ctl_verb ctl_verb_mcp;      /* cmd_mcp.c */

/* Print "spacectl: <verb>: <msg>" (if fmt) and the usage line on stderr;
 * returns CTL_EXIT_USAGE. */
int ctl_usage_error(const struct ctl_verb *v, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void ctl_print_help(const struct ctl_verb *v, FILE *out);
/* Print "spacectl: <verb>: <e->msg>"; returns `status`. */
int ctl_fail(const struct ctl *c, const space_err *e, int status);

/* Seconds a sandbox may live, as far as spacectl checks: a number, not the
 * daemon's limit (it says what that is). */
#define CTL_SECONDS_MAX (1L << 30)

/* Add "K=V" to a JSON object of strings.  Returns -1 if arg has no '=' or
 * an empty key. */
int ctl_kv_add(json_t *obj, const char *arg);
/* Parse a decimal integer in [min, max], the whole string.  0 or -1. */
int ctl_parse_long(const char *s, long min, long max, long *out);
/* Handle a getopt result that is --json ('j'), --help ('h') or unknown.
 * Returns -1 to go on (--json), else the exit status to return at once. */
int ctl_common_opt(struct ctl *c, const struct ctl_verb *v, int opt);
/* Parse the options --json, --help and, where wait is not NULL, --wait (which
 * sets *wait); the arguments are left from optind on.  Returns -1 to go on,
 * else the exit status to return at once (help printed, or a usage error). */
int ctl_parse_opts(struct ctl *c, const struct ctl_verb *v, int argc, char **argv, bool *wait);
/* ctl_parse_opts without --wait, for a verb that takes no argument. */
int ctl_parse_json_only(struct ctl *c, const struct ctl_verb *v, int argc, char **argv);
/* Whether s is a value of on_timeout ("delete" or "suspend"). */
bool ctl_on_timeout_ok(const char *s);
/* 1536 -> "1.5 KiB", 0 -> "0 B": sizes for tables, 3 significant digits at most. */
void ctl_fmt_bytes(long long n, char *out, size_t len);
/* Print each string of the array at key of obj on a line of its own.
 * Returns 0, or -1 with e set when it is missing or holds a non-string. */
int ctl_print_lines(FILE *out, const json_t *obj, const char *key, space_err *e);

/*
 * A request that starts an operation (202 {"sandbox":..,"operation":..,...}),
 * and what the verb shows of it.  ctl_op_run() sends it; prints what `print`
 * takes from the answer unless --json, before any wait, so a script learns the
 * ids even when the wait fails; with `wait`, long-polls the operation and
 * fails with its error; with --json, prints the answer, after a wait with the
 * operation and sandbox as they are at the end.  An answer whose operation is
 * null started none (wake of a running sandbox): nothing to wait for.
 */
struct ctl_op {
	const char *method;
	const char *path;
	json_t *body; /* NULL: none */
	const char *what; /* prefixed to errors ("sb-…: ..."); NULL: nothing */
	bool wait;
	/* Print the ids the verb promises; -1 with e set if the answer lacks them. */
	int (*print)(const json_t *resp, space_err *e);
	/* After the wait, with --json: bring the rest of the answer up to date.
	 * NULL: the sandbox alone is. */
	int (*refresh)(const struct ctl *c, json_t *resp, space_err *e);
};

/* Returns the exit status. */
int ctl_op_run(const struct ctl *c, const struct ctl_op *o);
/* The whole of a verb `[--wait] [--json] ID...`: METHOD /v1/sandboxes/<id><suffix>
 * (with body {} unless DELETE) for each id, printing each operation id.  Goes
 * on after a failure (the others are still acted on); exit 1 if one failed. */
int ctl_op_each(struct ctl *c, const struct ctl_verb *v, int argc, char **argv,
		const char *method, const char *suffix);

/* GET path and print the answer: as it is with --json, else with show(),
 * which returns the exit status.  Returns the exit status. */
int ctl_get_show(const struct ctl *c, const char *path,
		 int (*show)(const struct ctl *c, const json_t *resp));

/* A text table with a header row; columns padded to their widest cell. */
struct ctl_table {
	size_t ncols, nrows, cap;
	char **cells; /* row-major, row 0 the header */
};

int ctl_table_init(struct ctl_table *t, size_t ncols, const char *const *header);
/* Add a row of ncols cells (copied; NULL prints as "-"). */
int ctl_table_add(struct ctl_table *t, const char *const *row);
void ctl_table_print(const struct ctl_table *t, FILE *out);
void ctl_table_free(struct ctl_table *t);
/* Print the array at key of resp as a table under header, one row per
 * element added by add_row() (which returns ctl_table_add's result); a
 * missing array is an error.  Returns the exit status. */
int ctl_print_list(const struct ctl *c, const json_t *resp, const char *key, size_t ncols,
		   const char *const *header, int (*add_row)(struct ctl_table *t, const json_t *item));

#endif
