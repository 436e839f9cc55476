/* test_fs_util.h -- helpers for the file operation tests (test_fs_*.c): run fsop_main in a
 * forked child with stdin/stdout/stderr on memory files, a scratch directory, small file
 * helpers.  The child leaves through exit(), so LeakSanitizer checks each operation. */
#ifndef SPACE_TEST_FS_UTIL_H
#define SPACE_TEST_FS_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/fs/fs.h"
#include "agent/fsops.h"

struct fsrun {
	int rc;		  /* exit code, or 128 + signal */
	char *out, *err;  /* NUL-terminated copies */
	size_t outlen, errlen;
	json_t *head;	  /* the header line parsed (success), else NULL */
	json_t *error;	  /* the stderr line parsed (failure), else NULL */
	const char *body; /* what follows the header line */
	size_t bodylen;
};

/* A forked child of a test runs fsop_main as the agent's children do: default signal
 * dispositions and an empty mask (spawn.c resets both), whatever the test inherited -- a test
 * run from a background shell has SIGINT and SIGQUIT ignored, and then a kill(SIGINT) of a
 * write would never end it. */
static inline void fs_child_signals(void)
{
	sigset_t none;

	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

static inline void fsrun_free(struct fsrun *r)
{
	free(r->out);
	free(r->err);
	json_decref(r->head);
	json_decref(r->error);
	memset(r, 0, sizeof(*r));
}

static inline char *fd_slurp(int fd, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap + 1);
	ssize_t k;

	lseek(fd, 0, SEEK_SET);
	while (buf && (k = read(fd, buf + n, cap - n)) > 0) {
		n += (size_t)k;
		if (n == cap) {
			char *nb = realloc(buf, cap * 2 + 1);

			if (!nb) {
				free(buf);
				return NULL;
			}
			buf = nb;
			cap *= 2;
		}
	}
	if (buf)
		buf[n] = '\0';
	*len = n;
	return buf;
}

/* Run fsop_main(argv) with stdin = in[0..inlen) (NULL: empty).  argv is NULL-terminated. */
static inline void fsrun_v(struct fsrun *r, const void *in, size_t inlen, char *const argv[])
{
	int fin = memfd_create("in", 0), fout = memfd_create("out", 0), ferr = memfd_create("err", 0);
	int argc = 0, st;
	pid_t pid;
	char *nl;

	memset(r, 0, sizeof(*r));
	while (argv[argc])
		argc++;
	if (in && inlen && write(fin, in, inlen) != (ssize_t)inlen)
		abort();
	lseek(fin, 0, SEEK_SET);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		fs_child_signals();
		dup2(fin, 0);
		dup2(fout, 1);
		dup2(ferr, 2);
		close(fin);
		close(fout);
		close(ferr);
		exit(fsop_main(argc, argv));
	}
	waitpid(pid, &st, 0);
	r->rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	r->out = fd_slurp(fout, &r->outlen);
	r->err = fd_slurp(ferr, &r->errlen);
	close(fin);
	close(fout);
	close(ferr);
	nl = r->out ? memchr(r->out, '\n', r->outlen) : NULL;
	if (r->rc == 0 && nl) {
		r->head = json_loadb(r->out, (size_t)(nl - r->out), 0, NULL);
		r->body = nl + 1;
		r->bodylen = r->outlen - (size_t)(nl + 1 - r->out);
	}
	if (r->rc != 0 && r->err)
		r->error = json_loads(r->err, JSON_DISABLE_EOF_CHECK, NULL);
}

#define FSRUN(r, in, inlen, ...) \
	do { char *const fsrun_argv_[] = { __VA_ARGS__, NULL }; fsrun_v(r, in, inlen, fsrun_argv_); } while (0)

/* The failure's "error" name ("ENOENT"), or "" */
static inline const char *fs_errname(const struct fsrun *r)
{
	const char *s = r->error ? json_string_value(json_object_get(r->error, "error")) : NULL;

	return s ? s : "";
}

static inline json_int_t jint(json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

static inline const char *jstr(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s ? s : "";
}

/* A failure as the contract says: exit = errno, stdout empty, one JSON line with that errno. */
static inline int fs_failed_with(const struct fsrun *r, int e, const char *name)
{
	return r->rc == e && r->outlen == 0 && r->error && jint(r->error, "errno") == e &&
	       strcmp(fs_errname(r), name) == 0 && json_string_value(json_object_get(r->error, "message"));
}

static char fs_tmp[64];
static pid_t fs_tmp_owner;

static int fs_rm_cb(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(p);
	return 0;
}

static inline void fs_tmp_cleanup(void)
{
	/* Only the test process: the forked children leave through exit() too. */
	if (fs_tmp[0] && getpid() == fs_tmp_owner)
		nftw(fs_tmp, fs_rm_cb, 32, FTW_DEPTH | FTW_PHYS);
}

/* A fresh scratch directory (removed at exit). */
static inline const char *fs_tmpdir(void)
{
	snprintf(fs_tmp, sizeof(fs_tmp), "/tmp/test_fs_XXXXXX");
	if (!mkdtemp(fs_tmp))
		abort();
	fs_tmp_owner = getpid();
	atexit(fs_tmp_cleanup);
	return fs_tmp;
}

/* fs_tmp + "/" + the formatted name, in a static ring of buffers. */
static inline __attribute__((format(printf, 1, 2))) const char *P(const char *fmt, ...)
{
	static char bufs[16][4200];
	static int next;
	char *b = bufs[next++ % 16];
	int n = snprintf(b, sizeof(bufs[0]), "%s/", fs_tmp);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(b + n, sizeof(bufs[0]) - (size_t)n, fmt, ap);
	va_end(ap);
	return b;
}

static inline int put_file(const char *path, const void *data, size_t n, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	int rc;

	if (fd < 0)
		return -1;
	rc = write(fd, data, n) == (ssize_t)n ? 0 : -1;
	fchmod(fd, mode);
	close(fd);
	return rc;
}

static inline char *get_file(const char *path, size_t *n)
{
	int fd = open(path, O_RDONLY);
	char *s;

	if (fd < 0)
		return NULL;
	s = fd_slurp(fd, n);
	close(fd);
	return s;
}

static inline int file_is(const char *path, const char *content)
{
	size_t n;
	char *s = get_file(path, &n);
	int ok = s && n == strlen(content) && memcmp(s, content, n) == 0;

	free(s);
	return ok;
}

#endif
