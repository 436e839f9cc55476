/* cmd_cp.c -- `spacectl cp`: copy files and trees between here and a
 * sandbox, with docker cp's rules for where they land (cp_plan.c).
 *
 * Nothing is held whole in memory: a file goes up as a streamed PUT from its
 * descriptor, a tree as a tar archive made while curl pulls it (tar_write.c);
 * a file comes down into a temporary file renamed into place, a tree through
 * a tar reader fed as the bytes arrive into an extractor that never writes
 * outside the destination (tar_read.c, tar_extract.c). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "cli.h"
#include "cp.h"
#include "files.h"
#include "progress.h"
#include "tar.h"

#define CHUNK (256 * 1024)
/* The deepest listing the API gives, for a tree's total size. */
#define LIST_DEPTH_MAX 64

struct copy {
	const struct ctl *c;
	struct files f;
	struct progress prog;
	bool failed;  /* a callback stopped the transfer: err says why */
	space_err err;
	/* upload sources */
	int fd;
	unsigned long long left;
	const char *what;
	struct tar_writer *tw;
	/* download sinks */
	struct afile af;
	bool af_open;
	struct tar_reader tr;
	struct tar_extract *tx;
	unsigned long long bytes;
};

static void cp_warn(const char *msg, void *arg)
{
	struct copy *cp = arg;

	progress_clear(&cp->prog);
	fprintf(stderr, "spacectl: cp: %s\n", msg);
}

static int fail(struct copy *cp, const space_err *e)
{
	progress_clear(&cp->prog);
	return ctl_fail(cp->c, e, CTL_EXIT_FAIL);
}

/* ---- sources --------------------------------------------------------- */

/* A regular file: exactly the size it had, no more. */
static size_t file_source(char *buf, size_t n, void *arg)
{
	struct copy *cp = arg;
	ssize_t r;

	if (n > cp->left)
		n = (size_t)cp->left;
	if (n == 0)
		return 0;
	do
		r = read(cp->fd, buf, n);
	while (r < 0 && errno == EINTR);
	if (r <= 0) {
		if (r < 0)
			err_sys(&cp->err, errno, "reading %s", cp->what);
		else
			err_set(&cp->err, EIO, "%s: the file shrank while it was being read",
				cp->what);
		cp->failed = true;
		return HTTP_SOURCE_ABORT;
	}
	cp->left -= (unsigned long long)r;
	cp->bytes += (unsigned long long)r;
	progress_set(&cp->prog, cp->bytes);
	return (size_t)r;
}

static size_t tar_source(char *buf, size_t n, void *arg)
{
	struct copy *cp = arg;
	ssize_t r = tarw_read(cp->tw, buf, n, &cp->err);

	if (r < 0) {
		cp->failed = true;
		return HTTP_SOURCE_ABORT;
	}
	progress_set(&cp->prog, tarw_file_bytes(cp->tw));
	return (size_t)r;
}

/* `cp - ID:DIR`: a tar archive on our stdin, as it comes. */
static size_t stdin_source(char *buf, size_t n, void *arg)
{
	struct copy *cp = arg;
	ssize_t r;

	do
		r = read(STDIN_FILENO, buf, n);
	while (r < 0 && errno == EINTR);
	if (r < 0) {
		err_sys(&cp->err, errno, "reading stdin");
		cp->failed = true;
		return HTTP_SOURCE_ABORT;
	}
	cp->bytes += (unsigned long long)r;
	progress_set(&cp->prog, cp->bytes);
	return (size_t)r;
}

/* ---- sinks ----------------------------------------------------------- */

static size_t file_sink(const char *p, size_t n, void *arg)
{
	struct copy *cp = arg;

	if (afile_write(&cp->af, p, n, &cp->err) < 0) {
		cp->failed = true;
		return 0;
	}
	cp->bytes += n;
	progress_set(&cp->prog, cp->bytes);
	return n;
}

static size_t tar_sink(const char *p, size_t n, void *arg)
{
	struct copy *cp = arg;

	if (tarr_feed(&cp->tr, p, n, &cp->err) < 0) {
		cp->failed = true;
		return 0;
	}
	progress_set(&cp->prog, tarx_file_bytes(cp->tx));
	return n;
}

static size_t stdout_sink(const char *p, size_t n, void *arg)
{
	struct copy *cp = arg;

	if (ctl_write_all(STDOUT_FILENO, p, n) < 0) {
		err_sys(&cp->err, errno, "writing stdout");
		cp->failed = true;
		return 0;
	}
	cp->bytes += n;
	progress_set(&cp->prog, cp->bytes);
	return n;
}

/* The error to show: the callback's when it stopped the transfer. */
static int transfer_failed(struct copy *cp, space_err *e)
{
	return fail(cp, cp->failed ? &cp->err : e);
}

/* ---- local side ------------------------------------------------------ */

static enum cp_kind kind_of_mode(mode_t m)
{
	if (S_ISREG(m))
		return CP_FILE;
	if (S_ISDIR(m))
		return CP_DIR;
	if (S_ISLNK(m))
		return CP_SYMLINK;
	return CP_OTHER;
}

/* The local destination's kind, links followed (a dangling one: CP_FILE). */
static int local_kind(const char *path, enum cp_kind *kind, space_err *e)
{
	struct stat st;

	if (stat(path, &st) == 0) {
		*kind = kind_of_mode(st.st_mode);
		return 0;
	}
	if (errno != ENOENT)
		return err_sys(e, errno, "%s", path);
	*kind = lstat(path, &st) == 0 ? CP_FILE : CP_MISSING;
	return 0;
}

/* The sizes of the regular files of a sandbox tree, for progress; -1 when
 * unknown. */
static long long remote_tree_bytes(struct copy *cp, const char *path)
{
	json_t *resp, *item;
	space_err e = { 0 };
	long long total = 0;
	char extra[32];
	size_t i;

	snprintf(extra, sizeof(extra), "&depth=%d", LIST_DEPTH_MAX);
	if (files_get_json(&cp->f, "/files/list", path, extra, &resp, &e) < 0)
		return -1;
	json_array_foreach(json_object_get(resp, "entries"), i, item)
		if (strcmp(ctl_jstr(item, "type", ""), "file") == 0)
			total += ctl_jint(item, "size", 0);
	json_decref(resp);
	return total;
}

/* ---- local -> sandbox ------------------------------------------------ */

static int upload_stdin(struct copy *cp, const char *arg, const char *dst)
{
	enum cp_kind dk;
	space_err e = { 0 };

	if (files_kind(&cp->f, dst, &dk, &e) < 0)
		return fail(cp, &e);
	if (dk != CP_DIR) {
		err_set(&e, ENOTDIR, "%s: %s (a tar archive from stdin goes into an existing "
			"directory)", arg, dk == CP_MISSING ? "no such directory" : "not a directory");
		return fail(cp, &e);
	}
	if (files_put(&cp->f, "/files/tar", dst, "", stdin_source, cp, -1, NULL, &e) < 0)
		return transfer_failed(cp, &e);
	progress_clear(&cp->prog);
	return CTL_EXIT_OK;
}

static int upload(struct copy *cp, bool show, const char *src, const char *dst_arg,
		  const char *dst)
{
	struct cp_plan plan = { 0 };
	_cleanup_free_ char *target = NULL;
	enum cp_kind sk, dk = CP_MISSING;
	space_err e = { 0 };
	struct stat st;
	int rc = CTL_EXIT_OK;

	if (strcmp(src, "-") == 0)
		return upload_stdin(cp, dst_arg, dst);
	if (lstat(src, &st) < 0) {
		err_sys(&e, errno, "%s", src);
		return fail(cp, &e);
	}
	sk = kind_of_mode(st.st_mode);
	if (files_kind(&cp->f, dst, &dk, &e) < 0)
		return fail(cp, &e);
	if (cp_plan_make(src, sk, dst, dk, &plan, &e) < 0)
		return fail(cp, &e);
	if (sk == CP_FILE) {
		char extra[32];

		cp->fd = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
		if (cp->fd < 0 || fstat(cp->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			err_sys(&e, cp->fd < 0 ? errno : EINVAL, "%s", src);
			rc = fail(cp, &e);
			goto out;
		}
		fcntl(cp->fd, F_SETFL, fcntl(cp->fd, F_GETFL) & ~O_NONBLOCK);
		target = cp_join(plan.dir, plan.name);
		if (!target) {
			rc = CTL_EXIT_FAIL;
			goto out;
		}
		cp->left = (unsigned long long)st.st_size;
		cp->what = src;
		snprintf(extra, sizeof(extra), "&mode=0%o", (unsigned)(st.st_mode & 07777));
		progress_start(&cp->prog, show, (long long)st.st_size);
		if (files_put(&cp->f, "/files", target, extra, file_source, cp, (long long)st.st_size,
			      NULL, &e) < 0)
			rc = transfer_failed(cp, &e);
	} else {
		/* A directory, or a link copied as a link: a tar archive
		 * extracted in the destination directory. */
		cp->tw = tarw_new(src, plan.name, cp_warn, cp, &e);
		if (!cp->tw) {
			rc = fail(cp, &e);
			goto out;
		}
		progress_start(&cp->prog, show, show && sk == CP_DIR ? tar_tree_bytes(src) : -1);
		if (files_put(&cp->f, "/files/tar", plan.dir, "", tar_source, cp, -1, NULL, &e) < 0)
			rc = transfer_failed(cp, &e);
	}
	progress_clear(&cp->prog);
out:
	if (cp->fd >= 0)
		close(cp->fd);
	tarw_free(cp->tw);
	cp_plan_free(&plan);
	return rc;
}

/* ---- sandbox -> local ------------------------------------------------ */

static int download(struct copy *cp, bool show, const char *src, const char *dst)
{
	_cleanup_free_ char *clean = cp_clean(src);
	struct cp_plan plan = { 0 };
	enum cp_kind sk, dk = CP_MISSING;
	space_err e = { 0 };
	json_t *entry = NULL;
	int dirfd = -1, rc = CTL_EXIT_OK;

	if (!clean)
		return CTL_EXIT_FAIL;
	if (strcmp(dst, "-") == 0) {
		/* docker's `cp ID:SRC -`: the archive itself. */
		fflush(stdout);
		progress_start(&cp->prog, show, -1);
		if (files_get(&cp->f, "/files/tar", clean, "", stdout_sink, cp, &e) < 0)
			return transfer_failed(cp, &e);
		progress_clear(&cp->prog);
		return CTL_EXIT_OK;
	}
	if (files_stat(&cp->f, src, &entry, &e) < 0)
		return fail(cp, &e);
	if (!entry)
		return fail(cp, &e); /* the server says what is missing */
	sk = cp_kind_of_type(ctl_jstr(entry, "type", NULL));
	if (local_kind(dst, &dk, &e) < 0) {
		rc = fail(cp, &e);
		goto out;
	}
	if (cp_plan_make(src, sk, dst, dk, &plan, &e) < 0) {
		rc = fail(cp, &e);
		goto out;
	}
	dirfd = open(plan.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		err_sys(&e, errno, "%s", plan.dir);
		rc = fail(cp, &e);
		goto out;
	}
	afile_arm_signals();
	if (sk == CP_FILE) {
		if (afile_open(&cp->af, dirfd, plan.name, (unsigned)ctl_jint(entry, "mode", 0644),
			       &e) < 0) {
			rc = fail(cp, &e);
			goto out;
		}
		cp->af_open = true;
		cp->af.mtime_set = files_entry_mtime(entry, &cp->af.mtime, &cp->af.mtime_nsec) == 0;
		progress_start(&cp->prog, show, ctl_jint(entry, "size", -1));
		if (files_get(&cp->f, "/files", src, "", file_sink, cp, &e) < 0) {
			rc = transfer_failed(cp, &e);
			goto out;
		}
		cp->af_open = false;
		if (afile_commit(&cp->af, &e) < 0) {
			rc = fail(cp, &e);
			goto out;
		}
	} else {
		cp->tx = tarx_new(dirfd, plan.name, cp_warn, cp, &e);
		if (!cp->tx) {
			rc = fail(cp, &e);
			goto out;
		}
		tarr_init(&cp->tr, &tarx_ops, cp->tx);
		progress_start(&cp->prog, show, show && sk == CP_DIR ? remote_tree_bytes(cp, clean) : -1);
		if (files_get(&cp->f, "/files/tar", clean, "", tar_sink, cp, &e) < 0) {
			rc = transfer_failed(cp, &e);
			goto out;
		}
		if (tarr_finish(&cp->tr, &e) < 0 || tarx_finish(cp->tx, &e) < 0) {
			rc = fail(cp, &e);
			goto out;
		}
	}
	progress_clear(&cp->prog);
out:
	if (cp->af_open)
		afile_abort(&cp->af);
	if (cp->tx) {
		tarr_free(&cp->tr);
		tarx_free(cp->tx);
	}
	if (dirfd >= 0)
		close(dirfd);
	json_decref(entry);
	cp_plan_free(&plan);
	return rc;
}

static int run(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "quiet", no_argument, NULL, 'q' },
		{ "user", required_argument, NULL, 'u' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const struct ctl_verb *v = &ctl_verb_cp;
	_cleanup_free_ char *sid = NULL, *spath = NULL, *did = NULL, *dpath = NULL;
	struct copy cp = { .c = c, .fd = -1 };
	space_err e = { 0 };
	bool quiet = false, show;
	const char *user = NULL;
	int opt, rs, rd = 0;

	while ((opt = getopt_long(argc, argv, "qh", opts, NULL)) != -1) {
		switch (opt) {
		case 'q':
			quiet = true;
			break;
		case 'u':
			user = optarg;
			break;
		case 'h':
			ctl_print_help(v, stdout);
			return CTL_EXIT_OK;
		default:
			return ctl_usage_error(v, NULL);
		}
	}
	if (argc - optind != 2)
		return ctl_usage_error(v, argc - optind < 2 ? "expected SRC and DST" :
							     "expected only SRC and DST");
	rs = cp_parse_remote(argv[optind], &sid, &spath, &e);
	if (rs >= 0)
		rd = cp_parse_remote(argv[optind + 1], &did, &dpath, &e);
	if (rs < 0 || rd < 0)
		return ctl_usage_error(v, "%s", e.msg);
	if (rs && rd)
		return ctl_usage_error(v, "copying from one sandbox to another is not supported: "
				       "copy through a local directory");
	if (!rs && !rd)
		return ctl_usage_error(v, "one of SRC and DST must be ID:PATH");
	show = !quiet && isatty(STDERR_FILENO);
	cp.f.c = c;
	cp.f.user = user;
	if (rd) {
		cp.f.id = did;
		return upload(&cp, show, argv[optind], argv[optind + 1], dpath);
	}
	cp.f.id = sid;
	return download(&cp, show, spath, argv[optind + 1]);
}

const struct ctl_verb ctl_verb_cp = {
	.name = "cp",
	.usage = "[-q] [--user U] SRC DST    (one of them ID:PATH; '-' is a tar stream)",
	.summary = "copy files and directories between here and a sandbox",
	.help = "With docker cp's rules.  A file goes into DST if DST is a directory (or ends\n"
		"in '/', which must then exist), else becomes DST.  A directory goes into DST\n"
		"as DST/NAME if DST is a directory, or becomes DST if it does not exist; SRC\n"
		"ending in '/.' copies the directory's contents instead.  Symbolic links are\n"
		"copied as links.  Modes and mtimes are kept (not setuid/setgid bits); what\n"
		"is copied in belongs to the user the sandbox writes it as, what is copied\n"
		"out belongs to you.  SRC '-' reads a tar archive from stdin and extracts it\n"
		"into the directory DST; DST '-' writes SRC as a tar archive to stdout.\n"
		"Paths in a sandbox are absolute: ID:/PATH.\n"
		"\n"
		"Options:\n"
		"  -q, --quiet  no progress line (it is shown only when stderr is a terminal)\n"
		"  --user U     read and write in the sandbox as this user (default: the\n"
		"               template's)\n"
		"\n"
		"  spacectl cp ./src sb-0123456789abcdef:/home/user/\n"
		"  spacectl cp sb-0123456789abcdef:/var/log/app.log .\n"
		"  tar c data | spacectl cp - sb-0123456789abcdef:/srv\n",
	.run = run,
};
