/* fsop_main.c -- the file operations' entry point: argv[0] picks the operation from a table,
 * the rest is split into positionals and flags, and the result convention of
 * docs/design/channels.md is applied in one place: exit 0 with the header line (and body) on
 * stdout, or exit = errno with one JSON line {"errno","error","message","path"} on stderr. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../fsops.h"
#include "fs.h"

struct fs_opdef {
	const char *name;
	int (*run)(struct fs_out *o, const struct fs_args *a, struct fs_fail *f);
	int min_pos, max_pos;
	const char *flags; /* the letters accepted as -X */
	size_t outbuf;	   /* stdout buffer: large for bodies, small for one header line */
};

static const struct fs_opdef ops[] = {
	{ "read", fs_op_read, 1, 3, "", FS_BUF_SIZE },
	{ "write", fs_op_write, 1, 2, "p", 4096 },
	{ "list", fs_op_list, 1, 2, "", FS_BUF_SIZE },
	{ "stat", fs_op_stat, 1, 1, "", 4096 },
	{ "mkdir", fs_op_mkdir, 1, 2, "p", 4096 },
	{ "remove", fs_op_remove, 1, 1, "r", 4096 },
	{ "rename", fs_op_rename, 2, 2, "n", 4096 },
	{ "tar-out", fs_op_tar_out, 1, 1, "", FS_BUF_SIZE },
	{ "tar-in", fs_op_tar_in, 1, 1, "", 4096 },
	{ "watch", fs_op_watch, 1, 1, "r", 64 * 1024 },
};

static __attribute__((format(printf, 5, 0))) int vfail(struct fs_fail *f, bool sys, int code,
							  const char *path, const char *fmt,
							  va_list ap)
{
	size_t n;

	f->e.code = code > 0 ? code : EIO;
	f->path = path;
	vsnprintf(f->e.msg, sizeof(f->e.msg), fmt, ap);
	if (sys) {
		n = strlen(f->e.msg);
		snprintf(f->e.msg + n, sizeof(f->e.msg) - n, ": %s", strerror(f->e.code));
	}
	return -1;
}

int fs_fail(struct fs_fail *f, int code, const char *path, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfail(f, false, code, path, fmt, ap);
	va_end(ap);
	return -1;
}

int fs_failsys(struct fs_fail *f, int code, const char *path, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfail(f, true, code, path, fmt, ap);
	va_end(ap);
	return -1;
}

const char *fs_errno_name(int e, char buf[16])
{
	static const struct {
		int e;
		const char *name;
	} names[] = {
#define N(x) { x, #x }
		N(EPERM), N(ENOENT), N(ESRCH), N(EINTR), N(EIO), N(ENXIO), N(E2BIG),
		N(ENOEXEC), N(EBADF), N(ECHILD), N(EAGAIN), N(ENOMEM), N(EACCES), N(EFAULT),
		N(ENOTBLK), N(EBUSY), N(EEXIST), N(EXDEV), N(ENODEV), N(ENOTDIR), N(EISDIR),
		N(EINVAL), N(ENFILE), N(EMFILE), N(ENOTTY), N(ETXTBSY), N(EFBIG), N(ENOSPC),
		N(ESPIPE), N(EROFS), N(EMLINK), N(EPIPE), N(EDOM), N(ERANGE), N(EDEADLK),
		N(ENAMETOOLONG), N(ENOLCK), N(ENOSYS), N(ENOTEMPTY), N(ELOOP), N(ENODATA),
		N(EOVERFLOW), N(EILSEQ), N(EOPNOTSUPP), N(ETIMEDOUT), N(ESTALE), N(EDQUOT),
		N(ECANCELED), N(EBADMSG), N(ENOTCONN), N(EUCLEAN),
#undef N
	};
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].e == e)
			return names[i].name;
	snprintf(buf, 16, "E%d", e);
	return buf;
}

int fs_check_path(struct fs_fail *f, const char *path)
{
	if (!path || path[0] != '/')
		return fs_fail(f, EINVAL, path, "%s: not an absolute path", path ? path : "(none)");
	if (strlen(path) > FS_PATH_MAX)
		return fs_fail(f, ENAMETOOLONG, NULL, "path longer than %d bytes", FS_PATH_MAX);
	return 0;
}

int fs_parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return 0;
}

int fs_parse_mode(const char *s, mode_t *out)
{
	unsigned v = 0;
	size_t n = 0;

	for (; *s; s++, n++) {
		if (*s < '0' || *s > '7' || n >= 5)
			return -1;
		v = v * 8 + (unsigned)(*s - '0');
	}
	if (n == 0 || v > 07777)
		return -1;
	*out = (mode_t)v;
	return 0;
}

int fs_header(struct fs_out *o, struct jbuf *b, struct fs_fail *f, const char *path)
{
	if (b->oom)
		return fs_fail(f, ENOMEM, path, "out of memory");
	if (fs_out_put(o, b->p, b->len) < 0 || fs_out_put(o, "\n", 1) < 0 || fs_out_flush(o) < 0)
		return fs_failsys(f, errno, path, "write stdout");
	return 0;
}

/* Split argv[1..] into positionals and flags; -1 with f filled when it does not fit op. */
static int parse_args(const struct fs_opdef *op, int argc, char *const argv[], struct fs_args *a,
		      struct fs_fail *f)
{
	int i;

	memset(a, 0, sizeof(*a));
	for (i = 1; i < argc; i++) {
		const char *s = argv[i];

		if (s[0] == '-' && s[1] && !s[2]) {
			if (!strchr(op->flags, s[1]))
				return fs_fail(f, EINVAL, NULL, "%s: unknown option %s", op->name, s);
			if (s[1] == 'p')
				a->p = true;
			else if (s[1] == 'r')
				a->r = true;
			else if (s[1] == 'n')
				a->n = true;
			continue;
		}
		if (a->npos == op->max_pos)
			return fs_fail(f, EINVAL, NULL, "%s: too many arguments", op->name);
		a->pos[a->npos++] = s;
	}
	if (a->npos < op->min_pos)
		return fs_fail(f, EINVAL, NULL, "%s: missing argument", op->name);
	return 0;
}

/* The stderr line for a failure (written with one write: stderr is a pipe too). */
static void report(const struct fs_fail *f)
{
	struct jbuf b;
	char nb[16];

	jb_init(&b);
	jb_begin(&b);
	jb_ki64(&b, "errno", f->e.code);
	jb_kcstr(&b, "error", fs_errno_name(f->e.code, nb));
	jb_kcstr(&b, "message", f->e.msg);
	if (f->path)
		jb_kcstr(&b, "path", f->path);
	jb_end(&b);
	jb_raw(&b, "\n", 1);
	if (!b.oom)
		fs_write_all(2, b.p, b.len);
	jb_free(&b);
}

int fsop_main(int argc, char *const argv[])
{
	const struct fs_opdef *op = NULL;
	struct fs_fail f = { .e = { 0, "" }, .path = NULL };
	struct fs_args a;
	struct fs_out o;
	size_t i;
	int rc;

	/* A reader that went away is an EPIPE error like any other, and a file size limit an
	 * EFBIG: the failure paths (temp file removal among them) run instead of a signal's
	 * default action. */
	signal(SIGPIPE, SIG_IGN);
	signal(SIGXFSZ, SIG_IGN);
	if (argc < 1 || !argv[0]) {
		fs_fail(&f, EINVAL, NULL, "no operation");
		goto out;
	}
	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (strcmp(argv[0], ops[i].name) == 0)
			op = &ops[i];
	if (!op) {
		fs_fail(&f, EINVAL, NULL, "unknown file operation %.64s", argv[0]);
		goto out;
	}
	if (parse_args(op, argc, argv, &a, &f) < 0)
		goto out;
	if (fs_out_init(&o, 1, op->outbuf) < 0) {
		fs_failsys(&f, errno, NULL, "%s", op->name);
		goto out;
	}
	rc = op->run(&o, &a, &f);
	if (rc == 0 && fs_out_flush(&o) < 0)
		rc = fs_failsys(&f, errno, NULL, "write stdout");
	/* On a failure, whatever is still buffered is dropped: nothing more reaches stdout. */
	fs_out_free(&o);
	if (rc == 0)
		return 0;
out:
	report(&f);
	return f.e.code > 0 && f.e.code < 256 ? f.e.code : EIO;
}
