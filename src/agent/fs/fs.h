/* fs.h -- internals of the file operations (src/agent/fs/, entry point fsop_main in ../fsops.h).
 * Contract: docs/design/channels.md, "File operations (kind 3/4)".
 *
 * Every operation runs in a forked child of the agent as the requested user (maybe root),
 * against a filesystem that untrusted code controls: sizes, depths and counts are bounded, and
 * where the contract says a symlink is not followed, names are resolved relative to directory
 * fds with O_NOFOLLOW / AT_SYMLINK_NOFOLLOW. */
#ifndef SPACE_AGENT_FS_H
#define SPACE_AGENT_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "err.h"

#define FS_PATH_MAX 4095	     /* longest path accepted in argv (bytes) */
#define FS_BUF_SIZE (256 * 1024)     /* I/O buffer for file data, tar streams, listings */
#define FS_LIST_MAX_DEPTH 64	     /* list PATH DEPTH: 1..64 */
#define FS_TREE_MAX_DEPTH 256	     /* tar-out and watch -r: directory levels below PATH */
#define FS_DIR_MAX_ENTRIES (1 << 22) /* names of one directory held at once (sorted) */

/* ---- fsop_main.c: command line and failure report */

/* One operation's command line after argv[0]: positional arguments and single-letter flags
 * ("-p", "-r", "-n"; a lone "-" is a positional, as `write PATH - -p`). */
struct fs_args {
	const char *pos[3];
	int npos;
	bool p, r, n;
};

/* What an operation leaves for fsop_main when it fails: e (code = the errno, msg = the
 * message) and the path the failure is about. */
struct fs_fail {
	space_err e;
	const char *path;
};

/* Record a failure (returns -1).  fs_failsys appends ": strerror(code)". */
int fs_fail(struct fs_fail *f, int code, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
int fs_failsys(struct fs_fail *f, int code, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* "ENOENT" for ENOENT, ... ("EIO" style for the usual ones, else "E<number>"). */
const char *fs_errno_name(int e, char buf[16]);
/* An absolute path of at most FS_PATH_MAX bytes, else -1 (EINVAL / ENAMETOOLONG recorded). */
int fs_check_path(struct fs_fail *f, const char *path);
/* Decimal u64 without sign or spaces; -1 if s is anything else or overflows. */
int fs_parse_u64(const char *s, uint64_t *out);
/* Octal mode 0..07777 ("0644", "755"); -1 otherwise. */
int fs_parse_mode(const char *s, mode_t *out);

/* ---- fs_io.c: blocking I/O */

/* Write all n bytes (EINTR retried; EAGAIN waits in poll, should fd be non-blocking). */
int fs_write_all(int fd, const void *p, size_t n);
/* Read until n bytes or end of file; returns the count, or -1 with errno. */
ssize_t fs_read_full(int fd, void *p, size_t n);
/* read() retrying EINTR (and EAGAIN via poll). */
ssize_t fs_read_some(int fd, void *p, size_t n);

/* An output buffer on a blocking fd (stdout).  Nothing reaches the fd before fs_out_flush or
 * the buffer filling up, so a failure detected before the first flush leaves stdout empty. */
struct fs_out {
	int fd;
	char *buf;
	size_t len, cap;
	uint64_t total; /* bytes accepted so far (flushed or not) */
};

int fs_out_init(struct fs_out *o, int fd, size_t cap);
void fs_out_free(struct fs_out *o);
int fs_out_put(struct fs_out *o, const void *p, size_t n);
int fs_out_zero(struct fs_out *o, size_t n);
int fs_out_flush(struct fs_out *o);
/* Free space at the end of the buffer (flushing first if it is full): write up to *room bytes
 * at the returned pointer, then fs_out_commit(o, n). */
char *fs_out_space(struct fs_out *o, size_t *room);
void fs_out_commit(struct fs_out *o, size_t n);

/* ---- fs_json.c: JSON objects with arbitrary bytes in strings */

struct jbuf {
	char *p;
	size_t len, cap;
	bool oom, first;
};

void jb_init(struct jbuf *b);
void jb_free(struct jbuf *b);
void jb_reset(struct jbuf *b);
void jb_raw(struct jbuf *b, const char *s, size_t n);
/* A JSON string of the bytes s[0..n): see fs_json.c for the rule on bytes that are not UTF-8. */
void jb_str(struct jbuf *b, const char *s, size_t n);
void jb_begin(struct jbuf *b);		  /* "{" */
void jb_end(struct jbuf *b);		  /* "}" */
void jb_key(struct jbuf *b, const char *k); /* [","] "k": */
void jb_kstr(struct jbuf *b, const char *k, const char *s, size_t n);
void jb_kcstr(struct jbuf *b, const char *k, const char *s);
void jb_ku64(struct jbuf *b, const char *k, uint64_t v);
void jb_ki64(struct jbuf *b, const char *k, int64_t v);
void jb_kbool(struct jbuf *b, const char *k, bool v);
/* Unix time with 9 decimals (correct for times before 1970 too). */
void jb_ktime(struct jbuf *b, const char *k, const struct timespec *t);

/* ---- fs_names.c: owner and group names from the guest's /etc/passwd and /etc/group */

/* The name of uid (gid), else the number in decimal; the result lives in buf or the cache. */
const char *fs_owner_name(uid_t uid, char buf[24]);
const char *fs_group_name(gid_t gid, char buf[24]);
/* Tests: read these files instead (NULL: /etc/passwd, /etc/group); empties the cache. */
void fs_names_use(const char *passwd_path, const char *group_path);

/* ---- fs_list.c: the Entry object (stat, list) */

/* "-rwxr-xr-x" from st_mode (11 bytes with the NUL). */
void fs_permissions(mode_t m, char out[11]);
const char *fs_type_name(mode_t m); /* "file", "dir", "symlink", "other" */
/* Append the Entry object for st; target is the symlink's target (NULL otherwise). */
void fs_entry_json(struct jbuf *b, const char *name, size_t nlen, const char *path, size_t plen,
		   const struct stat *st, const char *target, size_t tlen);

/* ---- fs_dir.c: directory reading without following symlinks */

/* The names in the directory fd (not "." and ".."), sorted bytewise, in one allocation:
 * *names[i] point into it.  At most FS_DIR_MAX_ENTRIES (else E2BIG).  Returns the count, or -1
 * with errno.  Free *names with free() (the strings are in the same block). */
ssize_t fs_dir_names(int dfd, char ***names);
/* Split a path into its directory and last component without touching the filesystem:
 * trailing slashes are dropped; "/" has no last component (base = ""). dir and base point
 * into buf (strlen(path) + 2 bytes). */
void fs_split(const char *path, char *buf, const char **dir, const char **base);
/* mkdir -p: create path and missing parents with mode (parents 0755); *created tells whether
 * the last component was made.  An existing non-directory: EEXIST (last) / ENOTDIR. */
int fs_mkdir_p(struct fs_fail *f, const char *path, mode_t mode, bool *created);

/* ---- the operations: 0 on success, -1 with *f filled (output already on o, unflushed) */

int fs_op_read(struct fs_out *o, const struct fs_args *a, struct fs_fail *f);
int fs_op_write(struct fs_out *o, const struct fs_args *a, struct fs_fail *f);
/* Tests: make `write` use a named temporary file from the start (as without O_TMPFILE). */
extern bool fs_write_force_named;
int fs_op_list(struct fs_out *o, const struct fs_args *a, struct fs_fail *f);
int fs_op_stat(struct fs_out *o, const struct fs_args *a, struct fs_fail *f);
int fs_op_mkdir(struct fs_out *o, const struct fs_args *a, struct fs_fail *f);
int fs_op_remove(struct fs_out *o, const struct fs_args *a, struct fs_fail *f);
int fs_op_rename(struct fs_out *o, const struct fs_args *a, struct fs_fail *f);
int fs_op_tar_out(struct fs_out *o, const struct fs_args *a, struct fs_fail *f);
int fs_op_tar_in(struct fs_out *o, const struct fs_args *a, struct fs_fail *f);
int fs_op_watch(struct fs_out *o, const struct fs_args *a, struct fs_fail *f);

/* Write a one-object header line ({...}\n) to o and flush it. */
int fs_header(struct fs_out *o, struct jbuf *b, struct fs_fail *f, const char *path);

#endif
