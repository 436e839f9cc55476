/* proc.h -- child processes of the daemon: argv building, spawning, pidfds, /proc checks */
#ifndef SPACE_PROC_H
#define SPACE_PROC_H

#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

/* A growable NULL-terminated argument vector. An allocation failure is
 * sticky (`failed`) so a builder checks once at the end, not after each add. */
struct strv {
	char **v;
	size_t n, cap;
	bool failed;
};
void strv_add(struct strv *s, const char *str);
void strv_addf(struct strv *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void strv_free(struct strv *s);
/* Index of the first element equal to str, or -1. */
int strv_find(const struct strv *s, const char *str);

/* How a child is set up between fork() and exec(). Every step that fails is
 * reported to the parent (proc_spawn returns -1 with the step named). */
struct spawn_opts {
	char *const *argv;   /* argv[0] is looked up in PATH (unless clear_env) */
	char *const *env_add; /* "K=V" strings added to the inherited environment, may be NULL */
	int stdin_fd;        /* 0 or -1: /dev/null (fd 0 of the daemon is never passed) */
	int stdout_fd;       /* -1: /dev/null */
	int stderr_fd;       /* -1: /dev/null */
	/* Descriptors the child inherits as fds 3, 4, ...: pass_fds[i] becomes
	 * 3 + i. Every other descriptor of the daemon is closed on exec. */
	const int *pass_fds;
	int npass;
	bool new_session;    /* setsid(): no controlling terminal, own process group */
	int nice;            /* added to the child's nice value (0: unchanged) */
	bool netns;          /* unshare(CLONE_NEWNET) and bring lo up */
	/* Before that unshare: setns into this named netns, open its TAP
	 * (tap_name, IFF_TAP|IFF_NO_PI) and keep it as descriptor tap_fd, so the
	 * program holds the TAP and no socket of that netns (docs/design/egress.md).
	 * NULL: none. Needs netns. */
	const char *netns_path;
	const char *tap_name;
	int tap_fd;
	/* Confinement, applied in this order right before exec (see proc.c):
	 * join each cgroup (write our pid to <dir>/cgroup.procs); enter the
	 * jail at jail_root (jail_enter); drop to uid/gid with no capabilities
	 * and no_new_privs (jail_drop_privileges); the seccomp denylist. */
	const char *const *cgroup_dirs;
	int ncgroups;
	const char *jail_root;  /* NULL: the host's file system */
	uid_t uid;              /* 0: keep (with gid) */
	gid_t gid;
	bool seccomp;
	bool clear_env;         /* exec with an empty environment; argv[0] must be absolute */
	/* No transparent huge pages in the program (PR_SET_THP_DISABLE, kept across exec):
	 * memory it touches sparsely then costs the pages touched, not 2 MiB a touch. */
	bool no_thp;
	/* >= 0: exec this open binary (execveat AT_EMPTY_PATH) instead of
	 * argv[0], for a program that lies outside the jail it runs in. 0 is
	 * never a binary of ours, so 0 means none too. */
	int exec_fd;
};

/* fork + exec. On success *pid is the child and *pidfd (if pidfd != NULL) a
 * close-on-exec pidfd for it; the caller owns both and must reap the child.
 * Waits until the child has exec'd (or failed to), which under load can take
 * a scheduler slice or more: not for the event loop's hot paths. */
/* A descriptor every child closes first thing after fork, before anything else (the daemon's
 * state-dir lock: a flock is held until every copy of it is closed, and a child killed in its
 * set-up, or slow in it, would otherwise keep a restarted daemon out). */
void proc_close_in_children(int fd);
/* For a child forked outside proc_spawn (net/netns.c): closes that descriptor. */
void proc_child_started(void);
int proc_spawn(const struct spawn_opts *o, pid_t *pid, int *pidfd, space_err *err);
/* fork, without waiting for the exec: *statusfd (close-on-exec,
 * non-blocking) gets the child's report if a step fails before exec; read it
 * with proc_spawn_failure once the child has exited. */
int proc_spawn_async(const struct spawn_opts *o, pid_t *pid, int *pidfd, int *statusfd, space_err *err);
/* Why a child of proc_spawn_async failed before exec ("exec: No such file
 * or directory"), or "" if it did exec (or said nothing). */
void proc_spawn_failure(int statusfd, char *buf, size_t len);

/* argv0 as an absolute path: itself if it has a '/', else the first
 * executable of that name in $PATH. -1 (ENOENT) if there is none. */
int proc_which(const char *argv0, char *out, size_t len);

/* Runs argv to completion (bounded by timeout_ms: SIGKILL after), output to
 * log_fd (-1: /dev/null). Fails with the exit status in the message. For short
 * synchronous steps such as `qemu-img create`. */
int proc_run(char *const *argv, int log_fd, int timeout_ms, space_err *err);

/* pidfd_open(2) / pidfd_send_signal(2) (Linux >= 5.3), errno on failure. */
int proc_pidfd_open(pid_t pid);
int proc_pidfd_signal(int pidfd, int sig);

/* Waits up to timeout_ms for a child to end (pidfd readable) and reaps it.
 * Returns 0 and the wait status, or -1 (ETIMEDOUT: still running). */
int proc_wait_child(pid_t pid, int pidfd, int timeout_ms, int *status);
/* SIGKILL + reap, bounded (for failed starts). */
void proc_kill_reap(pid_t pid, int pidfd);

/* "exited with status N" / "killed by signal N" for a wait status. */
void proc_status_text(int status, char *buf, size_t len);

/* The starttime field (22) of a /proc/<pid>/stat line; parses after the last
 * ')' because comm may contain spaces and parentheses. -1 on a bad line. */
int proc_stat_parse_starttime(const char *stat, uint64_t *out);
/* Does /proc/<pid>/cmdline contain the argument `flag` directly followed by
 * an argument equal to `value` or starting with `value,`? */
bool proc_cmdline_has(pid_t pid, const char *flag, const char *value);
/* Same, over a NUL-separated buffer (testable without a process). */
bool cmdline_buf_has(const char *buf, size_t len, const char *flag, const char *value);

/* A listening SOCK_STREAM unix socket at path (an old socket file there is
 * replaced), mode 0600, close-on-exec. */
int unix_listen(const char *path, int *fd, space_err *err);
/* Connects a SOCK_STREAM unix socket (close-on-exec, non-blocking). */
int unix_connect(const char *path, int *fd, space_err *err);

/* Milliseconds on CLOCK_MONOTONIC. */
int64_t mono_ms(void);

/* What a log file says since its last "--- " header line, lines joined with
 * " / " (for "qemu said: ..." in errors); "" if nothing. */
void file_last_line(const char *path, char *buf, size_t len);

/* A helper binary installed beside the running one (build/bin/spaced and build/bin/<name>;
 * the sanitized build/san/bin/spaced runs the sanitized helpers): $env if set, else the
 * running binary's directory + name, resolved once into path (static storage the caller
 * owns, empty at first). */
const char *proc_sibling_binary(const char *env, const char *name, char path[PATH_MAX]);

#endif
