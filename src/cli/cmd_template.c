/* cmd_template.c -- `spacectl template build`: a Dockerfile turned into a template build.
 *
 * The Dockerfile becomes a build request (dockerfile.c) before anything is sent.  The
 * context is walked with .dockerignore's rules (dockerignore.c) into a list of entries, each
 * then archived as tar_write.c archives one path (a header, and a file's data; a directory's
 * entries come from the list, not from the writer), the whole streamed to PUT /v1/contexts.
 * The build is started (POST /v1/templates/builds) and followed on its event stream
 * (sse.c): resumed after the last byte offset when the stream breaks, then, if it keeps
 * breaking, by polling the build. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "cli.h"
#include "dockerfile.h"
#include "dockerignore.h"
#include "progress.h"
#include "sse.h"
#include "tar.h"
#include "tty.h"

#define CONTEXT_MAX (1ULL << 30)     /* the largest context we send */
#define CONTEXT_ENTRIES_MAX 100000   /* the daemon's limit on a context's entries */
#define WALK_DEPTH_MAX 512
#define DOCKERFILE_MAX (4u << 20)
#define DOCKERIGNORE_MAX (1u << 20)
#define STREAM_TRIES 3   /* log stream attempts in a row that get nothing */
#define POLL_TRIES 5     /* failed polls in a row before giving up */
#define POLL_MS 500
#define POST_TIMEOUT_S 600 /* the daemon hashes the copies' sources before it answers */
#define IDLE_S 300       /* a stream or upload silent this long is broken */
#define TAIL_MAX (64u * 1024) /* a failed step's output shown on a terminal */

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void warn_msg(const char *msg, void *arg)
{
	struct progress *p = arg;

	if (p)
		progress_clear(p);
	fprintf(stderr, "spacectl: template: %s\n", msg);
}

/* ---- options -------------------------------------------------------- */

struct opts {
	const char *file; /* -f; NULL: DIR/Dockerfile */
	const char *dir;
	char name[DF_NAME_MAX + 1];
	json_t *tags;       /* the tag parts, each once */
	json_t *build_args; /* --build-arg K=V */
};

/* -t NAME[:TAG]: every -t names the same template; no tag means "latest".  The request's
 * "tags" are the tag parts alone (the daemon prefixes the name). */
static int add_tag(const struct ctl_verb *v, struct opts *o, const char *arg)
{
	char name[DF_NAME_MAX + 1], tag[DF_TAG_MAX + 1];
	space_err e = { 0 };
	json_t *t;
	size_t i;

	if (dockerfile_tag_arg(arg, name, tag, &e) < 0)
		return ctl_usage_error(v, "%s", e.msg);
	if (o->name[0] && strcmp(o->name, name) != 0)
		return ctl_usage_error(v, "-t %s: every -t names the same template (%s)", arg, o->name);
	snprintf(o->name, sizeof(o->name), "%s", name);
	json_array_foreach(o->tags, i, t)
		if (strcmp(json_string_value(t), tag) == 0)
			return -1;
	if (json_array_size(o->tags) >= DF_TAGS_MAX)
		return ctl_usage_error(v, "-t %s: at most %d tags in one build", arg, DF_TAGS_MAX);
	return json_array_append_new(o->tags, json_string(tag)) < 0 ? CTL_EXIT_FAIL : -1;
}

/* --build-arg K=V, or K alone: its value from the environment (none there: not set). */
static int add_build_arg(const struct ctl_verb *v, struct opts *o, const char *arg)
{
	const char *env;

	if (strchr(arg, '=')) {
		if (ctl_kv_add(o->build_args, arg) < 0)
			return ctl_usage_error(v, "--build-arg %s: want NAME=VALUE", arg);
		return -1;
	}
	if (!*arg)
		return ctl_usage_error(v, "--build-arg: want NAME=VALUE");
	env = getenv(arg);
	if (env && json_object_set_new(o->build_args, arg, json_string(env)) < 0)
		return CTL_EXIT_FAIL;
	return -1;
}

/* -1 to go on, else the exit status. */
static int parse_opts(struct ctl *c, const struct ctl_verb *v, int argc, char **argv,
		      struct opts *o)
{
	static const struct option opts[] = {
		{ "file", required_argument, NULL, 'f' },
		{ "tag", required_argument, NULL, 't' },
		{ "build-arg", required_argument, NULL, 'a' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int opt, rc = -1;

	while (rc < 0 && (opt = getopt_long(argc, argv, "f:t:h", opts, NULL)) != -1) {
		if (opt == 'f')
			o->file = optarg;
		else if (opt == 't')
			rc = add_tag(v, o, optarg);
		else if (opt == 'a')
			rc = add_build_arg(v, o, optarg);
		else
			rc = ctl_common_opt(c, v, opt);
	}
	if (rc >= 0)
		return rc;
	if (argc - optind != 1)
		return ctl_usage_error(v, argc == optind ? "missing the context directory" :
							   "one context directory only");
	if (!json_array_size(o->tags))
		return ctl_usage_error(v, "missing -t NAME[:TAG]");
	o->dir = argv[optind];
	return -1;
}

/* ---- local files ---------------------------------------------------- */

/* All of a file ("-": stdin), at most max bytes, NUL-terminated. */
static int read_all(const char *path, size_t max, char **out, size_t *len, space_err *e)
{
	bool in = strcmp(path, "-") == 0;
	int fd = in ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC), err = 0;
	size_t n = 0, cap = 0;
	char *buf = NULL;

	if (fd < 0)
		return err_sys(e, errno, "%s", path);
	for (;;) {
		ssize_t r;

		if (n + 4096 + 1 > cap) {
			char *nb = realloc(buf, cap = (n + 4096 + 1) * 2);

			if (!nb) {
				err = ENOMEM;
				break;
			}
			buf = nb;
		}
		r = read(fd, buf + n, cap - n - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			err = r < 0 ? errno : 0;
			break;
		}
		if ((n += (size_t)r) > max) {
			err = E2BIG;
			break;
		}
	}
	if (!in)
		close(fd);
	if (err) {
		free(buf);
		if (err == E2BIG)
			return err_set(e, E2BIG, "%s: over %zu bytes", path, max);
		return err_sys(e, err, "reading %s", path);
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

/* ---- the context: what is sent -------------------------------------- */

struct entry {
	char *rel;  /* relative to the context root */
	char type;  /* TAR_FILE, TAR_DIR, TAR_SYMLINK */
};

struct ctx {
	const char *root;
	const struct dockerignore *di;
	struct entry *v;
	size_t n, cap;
	unsigned long long bytes; /* the tar's size, near enough (pax records not counted) */
};

static void ctx_free(struct ctx *x)
{
	size_t i;

	for (i = 0; i < x->n; i++)
		free(x->v[i].rel);
	free(x->v);
	x->v = NULL;
	x->n = x->cap = 0;
}

static char *join(const char *a, const char *b)
{
	char *s;

	return asprintf(&s, "%s/%s", a, b) < 0 ? NULL : s;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t n)
{
	while (n)
		free(names[--n]);
	free(names);
}

/* A directory's names, sorted (as tar_write.c sorts them). */
static int list_dir(const char *path, char ***out, size_t *nout, space_err *e)
{
	_cleanup_closedir_ DIR *d = opendir(path);
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;

	if (!d)
		return err_sys(e, errno, "%s", path);
	while ((errno = 0, de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap = cap ? cap * 2 : 32) * sizeof(*nn));

			if (!nn)
				break;
			names = nn;
		}
		if (!(names[n] = strdup(de->d_name)))
			break;
		n++;
	}
	if (de || errno) {
		int err = de ? ENOMEM : errno;

		free_names(names, n);
		return err_sys(e, err, "%s: reading the directory", path);
	}
	if (n > 1)
		qsort(names, n, sizeof(*names), by_name);
	*out = names;
	*nout = n;
	return 0;
}

/* What an entry adds to the tar: its header (and pax records for a long name), its data. */
static unsigned long long entry_bytes(const char *rel, unsigned long long size)
{
	return TAR_BLOCK + (strlen(rel) > 100 ? 2 * TAR_BLOCK : 0) +
	       (size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
}

/* Refused as soon as the walk goes past a limit (not after walking all of a huge tree). */
static int add_entry(struct ctx *x, char *rel, char type, unsigned long long size, space_err *e)
{
	char sz[32];

	if (x->n >= CONTEXT_ENTRIES_MAX || x->bytes + entry_bytes(rel, size) > CONTEXT_MAX) {
		free(rel);
		if (x->n >= CONTEXT_ENTRIES_MAX)
			return err_set(e, E2BIG, "the build context has over %d entries (add to "
				       ".dockerignore)", CONTEXT_ENTRIES_MAX);
		ctl_fmt_bytes((long long)(x->bytes + size), sz, sizeof(sz));
		return err_set(e, E2BIG, "the build context is over 1 GiB (%s so far: add to "
			       ".dockerignore)", sz);
	}
	if (x->n == x->cap) {
		size_t cap = x->cap ? x->cap * 2 : 256;
		struct entry *v = realloc(x->v, cap * sizeof(*v));

		if (!v) {
			free(rel);
			return err_set(e, ENOMEM, "out of memory");
		}
		x->v = v;
		x->cap = cap;
	}
	x->v[x->n].rel = rel;
	x->v[x->n++].type = type;
	x->bytes += entry_bytes(rel, size);
	return 0;
}

static int walk_dir(struct ctx *x, const char *rel, int depth, space_err *e);

/* One name of a directory: added unless .dockerignore excludes it; an excluded directory is
 * gone into when an exception could bring back something below it, and kept only then. */
static int walk_entry(struct ctx *x, const char *dir, const char *name, int depth, space_err *e)
{
	char *rel = dir ? join(dir, name) : strdup(name);
	_cleanup_free_ char *path = rel ? join(x->root, rel) : NULL;
	bool excluded;
	struct stat st;
	size_t at = x->n;
	char type;

	if (!path) {
		free(rel);
		return err_set(e, ENOMEM, "out of memory");
	}
	if (lstat(path, &st) < 0) {
		free(rel);
		return errno == ENOENT ? 0 : err_sys(e, errno, "%s", path);
	}
	type = S_ISREG(st.st_mode) ? TAR_FILE : S_ISDIR(st.st_mode) ? TAR_DIR :
	       S_ISLNK(st.st_mode) ? TAR_SYMLINK : 0;
	excluded = dockerignore_excluded(x->di, rel);
	if (!type && !excluded)
		fprintf(stderr, "spacectl: template: skipping %s: not a regular file, directory or "
			"symbolic link\n", path);
	if (!type || (excluded && (type != TAR_DIR || !dockerignore_may_include_under(x->di, rel)))) {
		free(rel);
		return 0;
	}
	if (add_entry(x, rel, type, type == TAR_FILE ? (unsigned long long)st.st_size : 0, e) < 0)
		return -1;
	if (type != TAR_DIR)
		return 0;
	if (walk_dir(x, rel, depth + 1, e) < 0)
		return -1;
	if (excluded && x->n == at + 1) { /* nothing below came back */
		x->bytes -= entry_bytes(rel, 0);
		free(x->v[--x->n].rel);
	}
	return 0;
}

static int walk_dir(struct ctx *x, const char *rel, int depth, space_err *e)
{
	_cleanup_free_ char *path = rel ? join(x->root, rel) : strdup(x->root);
	char **names = NULL;
	size_t n = 0, i;
	int rc = 0;

	if (!path)
		return err_set(e, ENOMEM, "out of memory");
	if (depth > WALK_DEPTH_MAX)
		return err_set(e, ELOOP, "%s: more than %d levels of directories", path,
			       WALK_DEPTH_MAX);
	if (list_dir(path, &names, &n, e) < 0)
		return -1;
	for (i = 0; i < n && rc == 0; i++)
		rc = walk_entry(x, rel, names[i], depth, e);
	free_names(names, n);
	return rc;
}

static int walk_context(struct ctx *x, space_err *e)
{
	x->bytes = 2 * TAR_BLOCK; /* the end-of-archive marker */
	return walk_dir(x, NULL, 0, e);
}

/* A path as a .dockerignore pattern that matches it alone. */
static char *literal_pattern(const char *prefix, const char *path)
{
	size_t n = strlen(prefix), i;
	char *p = malloc(n + 2 * strlen(path) + 1), *w;

	if (!p)
		return NULL;
	memcpy(p, prefix, n);
	for (w = p + n, i = 0; path[i]; i++) {
		if (strchr("*?[]\\", path[i]))
			*w++ = '\\';
		*w++ = path[i];
	}
	*w = '\0';
	return p;
}

/* The Dockerfile's path relative to the context root; NULL when it lies outside (or is
 * stdin). */
static char *dockerfile_rel(const char *dir, const char *file)
{
	_cleanup_free_ char *rd = realpath(dir, NULL), *rf = NULL;
	size_t n;

	if (strcmp(file, "-") == 0 || !rd || !(rf = realpath(file, NULL)))
		return NULL;
	n = strlen(rd);
	if (strncmp(rf, rd, n) != 0 || (n > 1 && rf[n] != '/'))
		return NULL;
	return strdup(rf + n + (n > 1));
}

/* DIR/.dockerignore, with exceptions that keep it and the Dockerfile in the context. */
static struct dockerignore *load_ignore(const struct opts *o, const char *file, int *status,
					space_err *e)
{
	_cleanup_free_ char *path = join(o->dir, ".dockerignore"), *text = NULL, *rel = NULL;
	_cleanup_free_ char *keep = NULL;
	struct dockerignore *di = dockerignore_new();
	size_t len = 0;

	*status = CTL_EXIT_FAIL;
	if (!path || !di) {
		dockerignore_free(di);
		err_set(e, ENOMEM, "out of memory");
		return NULL;
	}
	if (read_all(path, DOCKERIGNORE_MAX, &text, &len, e) < 0) {
		if (e->code != ENOENT)
			goto fail;
		err_clear(e);
	}
	if (text && dockerignore_parse(di, path, text, len, e) < 0) {
		*status = CTL_EXIT_USAGE;
		goto fail;
	}
	rel = dockerfile_rel(o->dir, file);
	keep = rel ? literal_pattern("!", rel) : NULL;
	if (dockerignore_add(di, "!.dockerignore", e) < 0 || (rel && !keep) ||
	    (keep && dockerignore_add(di, keep, e) < 0))
		goto fail;
	return di;
fail:
	dockerignore_free(di);
	return NULL;
}

/* ---- the context as a tar, as curl pulls it -------------------------- */

/* What an upload source failed of (the transfer only says "aborted"). */
struct source {
	bool failed;
	space_err err;
	struct progress prog;
	unsigned long long out; /* bytes handed out */
};

struct ctx_stream {
	struct source src;
	const struct ctx *x;
	size_t i;                /* the next entry */
	struct tar_writer *w;    /* the entry being archived */
	struct tar_reader r;     /* its header blocks, parsed to learn its data's size */
	bool in_header, got_header;
	unsigned long long data; /* its data and padding still to pass on */
	char blk[TAR_BLOCK];
	size_t blk_len, blk_off;
	size_t trailer;          /* end-of-archive zeros still due */
};

static int header_begin(void *arg, const struct tar_entry *en, space_err *e)
{
	struct ctx_stream *s = arg;

	(void)e;
	if (!s->got_header) {
		s->got_header = true;
		s->data = (en->size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
	}
	return 0;
}

static const struct tar_reader_ops header_ops = { .begin = header_begin };

/* The writer of one path, named as it is relative to the context root. */
static int open_entry(struct ctx_stream *s, space_err *e)
{
	const struct entry *en = &s->x->v[s->i];
	_cleanup_free_ char *path = join(s->x->root, en->rel);

	if (!path)
		return err_set(e, ENOMEM, "out of memory");
	s->w = tarw_new(path, en->rel, warn_msg, &s->src.prog, e);
	if (!s->w)
		return -1;
	tarr_init(&s->r, &header_ops, s);
	s->in_header = true;
	s->got_header = false;
	s->data = 0;
	return 0;
}

static void close_entry(struct ctx_stream *s)
{
	tarr_free(&s->r);
	tarw_free(s->w);
	s->w = NULL;
	s->i++;
}

/* The next header block of the entry (pax blocks first, then its ustar header). */
static int header_block(struct ctx_stream *s, space_err *e)
{
	ssize_t r = tarw_read(s->w, s->blk, TAR_BLOCK, e);

	if (r < 0)
		return -1;
	if (r != TAR_BLOCK)
		return err_set(e, EIO, "%s: a short tar header", s->x->v[s->i].rel);
	if (tarr_feed(&s->r, s->blk, TAR_BLOCK, e) < 0)
		return -1;
	s->blk_len = TAR_BLOCK;
	s->blk_off = 0;
	if (s->got_header)
		s->in_header = false;
	return 0;
}

/* A file's data (and padding), straight from its writer. */
static ssize_t entry_data(struct ctx_stream *s, char *buf, size_t n, space_err *e)
{
	ssize_t r = tarw_read(s->w, buf, n < s->data ? n : (size_t)s->data, e);

	if (r == 0)
		return err_set(e, EIO, "%s: the archive of it ended early", s->x->v[s->i].rel);
	if (r > 0)
		s->data -= (unsigned long long)r;
	return r;
}

static ssize_t ctx_read(struct ctx_stream *s, char *buf, size_t n, space_err *e)
{
	size_t out = 0;

	while (out < n) {
		if (s->blk_off < s->blk_len) {
			size_t k = s->blk_len - s->blk_off < n - out ? s->blk_len - s->blk_off : n - out;

			memcpy(buf + out, s->blk + s->blk_off, k);
			s->blk_off += k;
			out += k;
		} else if (s->w && s->in_header) {
			if (header_block(s, e) < 0)
				return -1;
		} else if (s->w && s->data) {
			ssize_t r = entry_data(s, buf + out, n - out, e);

			if (r < 0)
				return -1;
			out += (size_t)r;
		} else if (s->w) {
			close_entry(s);
		} else if (s->i < s->x->n) {
			if (open_entry(s, e) < 0)
				return -1;
		} else if (s->trailer) {
			size_t k = s->trailer < n - out ? s->trailer : n - out;

			memset(buf + out, 0, k);
			s->trailer -= k;
			out += k;
		} else {
			break;
		}
	}
	s->src.out += out;
	if (s->src.out > CONTEXT_MAX + (CONTEXT_MAX >> 4))
		return err_set(e, E2BIG, "the build context grew over 1 GiB while it was sent");
	return (ssize_t)out;
}

static size_t ctx_source(char *buf, size_t n, void *arg)
{
	struct ctx_stream *s = arg;
	ssize_t r = ctx_read(s, buf, n, &s->src.err);

	if (r < 0) {
		s->src.failed = true;
		return HTTP_SOURCE_ABORT;
	}
	progress_set(&s->src.prog, s->src.out);
	return (size_t)r;
}

static void ctx_stream_free(struct ctx_stream *s)
{
	if (s->w) {
		tarr_free(&s->r);
		tarw_free(s->w);
		s->w = NULL;
	}
}

/* An image archive (FROM oci-archive:PATH): the file as it is. */
struct file_stream {
	struct source src;
	int fd;
	const char *path;
	unsigned long long left;
};

static size_t file_source(char *buf, size_t n, void *arg)
{
	struct file_stream *f = arg;
	ssize_t r;

	if (n > f->left)
		n = (size_t)f->left;
	if (n == 0)
		return 0;
	do
		r = read(f->fd, buf, n);
	while (r < 0 && errno == EINTR);
	if (r <= 0) {
		if (r < 0)
			err_sys(&f->src.err, errno, "reading %s", f->path);
		else
			err_set(&f->src.err, EIO, "%s: the file shrank while it was being read", f->path);
		f->src.failed = true;
		return HTTP_SOURCE_ABORT;
	}
	f->left -= (unsigned long long)r;
	f->src.out += (unsigned long long)r;
	progress_set(&f->src.prog, f->src.out);
	return (size_t)r;
}

/* ---- uploads -------------------------------------------------------- */

static int need_api_key(const struct ctl *c, space_err *e)
{
	if (!c->api_key || !*c->api_key)
		return err_set(e, EACCES, "no API key: set SPACE_API_KEY or SPACE_API_KEY_FILE, or "
			       "pass --api-key");
	return 0;
}

/* The digest of the 201 answer {"context": "sha256:...", "bytes": N}. */
static int context_digest(const struct http_resp *rs, char **digest, space_err *e)
{
	json_t *j = json_loadb(rs->body ? rs->body : "", rs->len, 0, NULL);
	const char *d = ctl_jstr(j, "context", NULL);

	*digest = d && strncmp(d, "sha256:", 7) == 0 ? strdup(d) : NULL;
	json_decref(j);
	if (!*digest)
		return err_set(e, EBADMSG, "PUT /v1/contexts: the answer has no context digest");
	return 0;
}

/* PUT /v1/contexts from a source (size < 0: chunked).  *digest: "sha256:..." to free(). */
static int put_context(const struct ctl *c, http_source_fn fn, struct source *src,
		       long long size, char **digest, space_err *e)
{
	_cleanup_free_ char *url = NULL;
	struct http_resp rs;
	struct http_req rq = {
		.method = "PUT",
		.bearer = c->api_key,
		.content_type = "application/x-tar",
		.accept = "application/json",
		.idle_s = IDLE_S,
		.source = fn,
		.source_arg = src,
		.upload_size = size,
	};
	int rc = 0;

	if (need_api_key(c, e) < 0)
		return -1;
	if (asprintf(&url, "%s/v1/contexts", c->url) < 0)
		return err_set(e, ENOMEM, "out of memory");
	rq.url = url;
	rc = http_do(&rq, &rs, e);
	progress_clear(&src->prog);
	if (src->failed)
		rc = (*e = src->err, -1);
	else if (rc == 0 && rs.status / 100 != 2)
		rc = http_error_brief(&rs, e);
	else if (rc == 0)
		rc = context_digest(&rs, digest, e);
	http_resp_free(&rs);
	return rc;
}

static int upload_context(const struct ctl *c, const struct ctx *x, bool show, char **digest,
			  space_err *e)
{
	struct ctx_stream s = { .x = x, .trailer = 2 * TAR_BLOCK };
	int rc;

	progress_start(&s.src.prog, show, (long long)x->bytes);
	rc = put_context(c, ctx_source, &s.src, -1, digest, e);
	ctx_stream_free(&s);
	return rc < 0 ? err_wrap(e, "sending the build context") : 0;
}

static int upload_archive(const struct ctl *c, const char *path, bool show, char **digest,
			  space_err *e)
{
	struct file_stream f = { .path = path };
	struct stat st;
	int rc;

	f.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (f.fd < 0 || fstat(f.fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		rc = f.fd < 0 ? errno : EINVAL;
		if (f.fd >= 0)
			close(f.fd);
		return rc == EINVAL ? err_set(e, EINVAL, "%s: not a regular file", path)
				    : err_sys(e, rc, "%s", path);
	}
	f.left = (unsigned long long)st.st_size;
	progress_start(&f.src.prog, show, (long long)st.st_size);
	rc = put_context(c, file_source, &f.src, (long long)st.st_size, digest, e);
	close(f.fd);
	return rc < 0 ? err_wrap(e, "sending the image archive %s", path) : 0;
}

/* ---- following the build -------------------------------------------- */

enum { SHOWN_NONE, SHOWN_RUNNING, SHOWN_DONE };

struct follow {
	const struct ctl *c;
	const char *id;
	const json_t *meta;   /* our steps' texts */
	const json_t *dsteps; /* the daemon's steps (their texts, when ours are short) */
	size_t nsteps;
	bool tty;
	FILE *logs;           /* the steps' output without a terminal: stdout (stderr with --json) */
	unsigned cols;
	struct sse_parser sse;
	bool got_bytes;
	enum sse_status sse_err; /* the parser failed: the stream is of no use */
	unsigned char *shown; /* per step */
	int open;             /* the step whose line is drawn but not ended; -1 */
	double open_t0, drawn_at;
	char *tail;           /* the open step's last output (terminal) */
	size_t tail_len;
	int tail_step;
	bool ended;           /* an end event came */
	char *state, *digest, *error;
};

static size_t utf8_chars(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

/* The text of step i on one line, at most max characters (0: no limit), "..." where cut. */
static void step_text(const struct follow *f, size_t i, size_t max, char *out, size_t cap)
{
	const char *t = ctl_jstr(json_array_get(f->meta, i), "text", NULL);
	size_t n = 0, chars = 0, keep;

	if (!t)
		t = ctl_jstr(json_array_get(f->dsteps, i), "text", "?");
	keep = max && utf8_chars(t) > max ? (max > 3 ? max - 3 : 0) : (size_t)-1;
	for (; *t; t++) {
		unsigned char ch = (unsigned char)*t;

		/* Only whole characters, and room for "..." */
		if ((ch & 0xc0) != 0x80 && (chars++ == keep || n + 8 > cap))
			break;
		out[n++] = ch < 0x20 || ch == 0x7f ? ' ' : (char)ch;
	}
	if (*t)
		memcpy(out + n, "...", 3), n += 3;
	out[n] = '\0';
}

static void fmt_duration(long long ms, char *out, size_t n)
{
	if (ms < 0)
		out[0] = '\0';
	else if (ms < 60000)
		snprintf(out, n, " %.1fs", (double)ms / 1000.0);
	else
		snprintf(out, n, " %lldm%02llds", ms / 60000, ms / 1000 % 60);
}

/* "[2/5] RUN make" (cut to the terminal's width when on one). */
static void step_head(const struct follow *f, size_t i, char *out, size_t cap)
{
	char text[1024];
	int k = snprintf(out, cap, "[%zu/%zu] ", i + 1, f->nsteps);
	size_t room = f->tty && f->cols > (unsigned)k + 30 ? f->cols - (unsigned)k - 24 : f->tty ? 20 : 0;

	step_text(f, i, room, text, sizeof(text));
	snprintf(out + k, cap - (size_t)k, "%s", text);
}

static void end_open_line(struct follow *f)
{
	if (f->tty && f->open >= 0)
		fputc('\n', stderr);
	f->open = -1;
}

static void draw_running(struct follow *f, size_t i)
{
	char head[1200], el[32] = "";

	step_head(f, i, head, sizeof(head));
	if (!f->tty) {
		fprintf(stderr, "%s\n", head);
		return;
	}
	if (now_s() - f->open_t0 >= 1)
		snprintf(el, sizeof(el), " %.0fs", now_s() - f->open_t0);
	fprintf(stderr, "\r%s ...%s\033[K", head, el);
	fflush(stderr);
	f->drawn_at = now_s();
}

static void show_tail(struct follow *f, size_t i)
{
	if (!f->tty || f->tail_step != (int)i || !f->tail_len)
		return;
	fwrite(f->tail, 1, f->tail_len, stderr);
	if (f->tail[f->tail_len - 1] != '\n')
		fputc('\n', stderr);
}

static void draw_final(struct follow *f, size_t i, const char *state, bool cached, long long ms)
{
	char head[1200], dur[32];

	step_head(f, i, head, sizeof(head));
	fmt_duration(ms, dur, sizeof(dur));
	if (f->open >= 0 && f->open != (int)i)
		end_open_line(f);
	fprintf(stderr, "%s%s ... %s%s%s\n", f->tty && f->open == (int)i ? "\r" : "", head,
		cached ? "cached" : strcmp(state, "failed") == 0 ? "failed" : "done", cached ? "" : dur,
		f->tty ? "\033[K" : "");
	f->open = -1;
	if (strcmp(state, "failed") == 0)
		show_tail(f, i);
	fflush(stderr);
}

/* A step's state as an event or a poll says it; each change shown once. */
static void step_update(struct follow *f, long long idx, const char *state, bool cached,
			long long ms)
{
	size_t i = (size_t)idx;

	if (idx < 0 || i >= f->nsteps)
		return;
	if (strcmp(state, "running") == 0 && f->shown[i] == SHOWN_NONE) {
		end_open_line(f);
		f->shown[i] = SHOWN_RUNNING;
		f->open = f->tty ? (int)i : -1;
		f->open_t0 = now_s();
		draw_running(f, i);
	} else if ((strcmp(state, "done") == 0 || strcmp(state, "failed") == 0) &&
		   f->shown[i] != SHOWN_DONE) {
		f->shown[i] = SHOWN_DONE;
		draw_final(f, i, state, cached, ms);
	}
}

static void tail_add(struct follow *f, int step, const char *p, size_t n)
{
	if (step != f->tail_step) {
		f->tail_len = 0;
		f->tail_step = step;
	}
	if (n >= TAIL_MAX) {
		p += n - TAIL_MAX;
		n = TAIL_MAX;
	}
	if (f->tail_len + n > TAIL_MAX) {
		size_t drop = f->tail_len + n - TAIL_MAX;

		memmove(f->tail, f->tail + drop, f->tail_len - drop);
		f->tail_len -= drop;
	}
	memcpy(f->tail + f->tail_len, p, n);
	f->tail_len += n;
}

static void on_log(struct follow *f, const json_t *d)
{
	const json_t *data = json_object_get(d, "data");
	int step = (int)ctl_jint(d, "step", -1);

	if (!json_is_string(data))
		return;
	if (!f->tty) {
		fwrite(json_string_value(data), 1, json_string_length(data), f->logs);
		fflush(f->logs);
		return;
	}
	tail_add(f, step, json_string_value(data), json_string_length(data));
	if (f->open == step && now_s() - f->drawn_at >= 0.5)
		draw_running(f, (size_t)step);
}

static void on_end(struct follow *f, const json_t *d)
{
	free(f->state);
	free(f->digest);
	free(f->error);
	f->state = strdup(ctl_jstr(d, "state", "failed"));
	f->digest = ctl_jstr(d, "digest", NULL) ? strdup(ctl_jstr(d, "digest", NULL)) : NULL;
	f->error = ctl_jstr(d, "error", NULL) ? strdup(ctl_jstr(d, "error", NULL)) : NULL;
	f->ended = true;
}

static int on_event(const struct sse_event *ev, void *arg)
{
	struct follow *f = arg;
	json_t *d = json_loadb(ev->data, ev->data_len, 0, NULL);
	int stop = 0;

	if (!json_is_object(d)) {
		json_decref(d);
		return 0; /* not ours to understand */
	}
	if (strcmp(ev->type, "log") == 0) {
		on_log(f, d);
	} else if (strcmp(ev->type, "step") == 0) {
		step_update(f, ctl_jint(d, "index", -1), ctl_jstr(d, "state", ""),
			    json_is_true(json_object_get(d, "cached")), ctl_jint(d, "duration_ms", -1));
	} else if (strcmp(ev->type, "end") == 0) {
		on_end(f, d);
		stop = 1;
	}
	json_decref(d);
	return stop;
}

static size_t logs_sink(const char *p, size_t n, void *arg)
{
	struct follow *f = arg;
	enum sse_status st = sse_parser_feed(&f->sse, p, n);

	f->got_bytes = true;
	if (st == SSE_OK)
		return n;
	if (st != SSE_STOP)
		f->sse_err = st;
	return 0;
}

/* One GET of the event stream from the last offset: 1 when the end event came, 0 when the
 * stream broke, -1 (e set) when streaming is no use (a 4xx answer, a broken stream). */
static int stream_once(struct follow *f, const char *path, space_err *e)
{
	_cleanup_free_ char *url = NULL;
	const char *last = sse_parser_last_id(&f->sse);
	struct http_resp rs;
	struct http_req rq = {
		.method = "GET",
		.bearer = f->c->api_key,
		.accept = "text/event-stream",
		.last_event_id = *last ? last : NULL,
		.idle_s = IDLE_S,
		.sink = logs_sink,
		.sink_arg = f,
	};
	int rc;

	if (asprintf(&url, "%s%s", f->c->url, path) < 0)
		return err_set(e, ENOMEM, "out of memory");
	rq.url = url;
	f->got_bytes = false;
	rc = http_do(&rq, &rs, e);
	sse_parser_reset(&f->sse);
	if (f->ended) {
		http_resp_free(&rs);
		return 1;
	}
	if (f->sse_err != SSE_OK)
		rc = err_set(e, EBADMSG, "the log stream: %s", sse_parser_strerror(f->sse_err));
	else if (rc == 0 && rs.status / 100 == 4)
		rc = http_error(&rs, e);
	else if (rc == 0 && rs.status / 100 != 2)
		http_error(&rs, e); /* a 5xx: worth another try */
	else if (rc == 0)
		err_set(e, EIO, "the log stream ended before the build did");
	else
		rc = 0; /* no answer: worth another try */
	http_resp_free(&rs);
	return rc;
}

/* 0 when the end event came; -1 when the stream kept breaking (then poll). */
static int follow_stream(struct follow *f)
{
	_cleanup_free_ char *path = ctl_path("/v1/templates/builds", f->id, "/logs");
	space_err e = { 0 };
	int fails = 0, rc = 0;

	if (!path)
		return -1;
	while (fails < STREAM_TRIES) {
		rc = stream_once(f, path, &e);
		if (rc != 0)
			break;
		fails = f->got_bytes ? 0 : fails + 1;
		sleep_ms(POLL_MS);
	}
	if (rc == 1)
		return 0;
	end_open_line(f);
	fprintf(stderr, "spacectl: template: %s; following the build's state instead\n", e.msg);
	return -1;
}

/* Poll GET /v1/templates/builds/{id} until the build ends; *final the Build. */
static int poll_build(struct follow *f, json_t **final, space_err *e)
{
	_cleanup_free_ char *path = ctl_path("/v1/templates/builds", f->id, "");
	int errs = 0;

	if (!path)
		return err_set(e, ENOMEM, "out of memory");
	for (;;) {
		json_t *b = NULL, *s;
		const char *state;
		size_t i;

		if (ctl_call(f->c, "GET", path, NULL, &b, e) < 0) {
			if (++errs >= POLL_TRIES)
				return -1;
			sleep_ms(POLL_MS);
			continue;
		}
		errs = 0;
		json_array_foreach(json_object_get(b, "steps"), i, s)
			step_update(f, ctl_jint(s, "index", (long long)i), ctl_jstr(s, "state", ""),
				    json_is_true(json_object_get(s, "cached")), ctl_jint(s, "duration_ms", -1));
		state = ctl_jstr(b, "state", "");
		if (strcmp(state, "succeeded") == 0 || strcmp(state, "failed") == 0) {
			*final = b;
			return 0;
		}
		json_decref(b);
		sleep_ms(POLL_MS);
	}
}

static void follow_free(struct follow *f)
{
	sse_parser_free(&f->sse);
	free(f->shown);
	free(f->tail);
	free(f->state);
	free(f->digest);
	free(f->error);
}

/* ---- the verb ------------------------------------------------------- */

/* The request: name, tags, the base, the context, then the Dockerfile's rest. */
static json_t *request(const struct opts *o, const struct dockerfile *df, const char *context,
		       const char *image)
{
	json_t *body = json_pack("{s:s,s:O}", "name", o->name, "tags", o->tags);

	if (!body)
		return NULL;
	if ((image && json_object_set_new(body, "from", json_pack("{s:s}", "image", image)) < 0) ||
	    (!image && json_object_set(body, "from", json_object_get(df->req, "from")) < 0) ||
	    (context && json_object_set_new(body, "context", json_string(context)) < 0) ||
	    json_object_update_missing(body, df->req) < 0) {
		json_decref(body);
		return NULL;
	}
	return body;
}

/* Print what the build made, or why it failed; the exit status. */
static int report(struct follow *f, const struct opts *o, json_t *final)
{
	const char *state = final ? ctl_jstr(final, "state", "") : f->state ? f->state : "";
	const char *digest = final ? ctl_jstr(final, "digest", "-") : f->digest ? f->digest : "-";
	const char *error = final ? ctl_jstr(final, "error", NULL) : f->error;
	json_t *t;
	size_t i;

	end_open_line(f);
	if (f->c->json && final)
		ctl_print_json(final);
	if (strcmp(state, "succeeded") != 0) {
		fflush(stdout);
		fprintf(stderr, "spacectl: template: build %s failed: %s\n", f->id,
			error ? error : "no reason given");
		return CTL_EXIT_FAIL;
	}
	if (!f->c->json)
		json_array_foreach(o->tags, i, t)
			printf("%s:%s %s\n", o->name, json_string_value(t), digest);
	return CTL_EXIT_OK;
}

/* Follow the build started (its answer resp) to its end; the exit status. */
static int follow_build(const struct ctl *c, const struct opts *o, const struct dockerfile *df,
			const json_t *resp)
{
	const json_t *build = json_object_get(resp, "build");
	struct follow f = { .c = c, .meta = df->meta, .open = -1, .tail_step = -1 };
	json_t *final = NULL;
	space_err e = { 0 };
	unsigned rows;
	int rc;

	f.id = ctl_jstr(build, "id", NULL);
	if (!f.id) {
		err_set(&e, EBADMSG, "POST /v1/templates/builds: the answer has no build id");
		return ctl_fail(c, &e, CTL_EXIT_FAIL);
	}
	f.dsteps = json_object_get(build, "steps");
	f.nsteps = json_array_size(f.dsteps) > json_array_size(df->meta) ? json_array_size(f.dsteps)
									 : json_array_size(df->meta);
	f.tty = isatty(STDERR_FILENO);
	f.logs = c->json ? stderr : stdout;
	if (!f.tty || tty_winsize(STDERR_FILENO, &rows, &f.cols) < 0)
		f.cols = 80;
	f.shown = calloc(f.nsteps + 1, 1);
	f.tail = malloc(TAIL_MAX);
	sse_parser_init(&f.sse, SSE_DEFAULT_MAX, on_event, &f);
	fprintf(stderr, "build %s: %s, %zu steps\n", f.id, o->name, f.nsteps);
	if (!f.shown || !f.tail) {
		err_set(&e, ENOMEM, "out of memory");
		rc = ctl_fail(c, &e, CTL_EXIT_FAIL);
	} else if ((follow_stream(&f) < 0 || c->json) && poll_build(&f, &final, &e) < 0) {
		end_open_line(&f);
		rc = ctl_fail(c, &e, CTL_EXIT_FAIL);
	} else {
		rc = report(&f, o, final);
	}
	json_decref(final);
	follow_free(&f);
	return rc;
}

/* Walk the context and check the copy sources against it.  -1 to go on, else the exit
 * status. */
static int prepare_context(const struct ctl *c, const struct opts *o, const char *file,
			   struct dockerfile *df, struct ctx *x, struct dockerignore **di)
{
	_cleanup_free_ const char **paths = NULL;
	space_err e = { 0 };
	int status = CTL_EXIT_FAIL;
	char sz[32];
	size_t i;

	if (!(*di = load_ignore(o, file, &status, &e)))
		return ctl_fail(c, &e, status);
	x->root = o->dir;
	x->di = *di;
	if (walk_context(x, &e) < 0)
		return ctl_fail(c, &e, CTL_EXIT_FAIL);
	if (x->n && !(paths = malloc(x->n * sizeof(*paths)))) {
		err_set(&e, ENOMEM, "out of memory");
		return ctl_fail(c, &e, CTL_EXIT_FAIL);
	}
	for (i = 0; i < x->n; i++)
		paths[i] = x->v[i].rel;
	if (dockerfile_resolve_sources(df, file, paths, x->n, &e) < 0)
		return ctl_fail(c, &e, CTL_EXIT_USAGE);
	ctl_fmt_bytes((long long)x->bytes, sz, sizeof(sz));
	fprintf(stderr, "build context: %zu entries, %s\n", x->n, sz);
	return -1;
}

/* The daemon's "from: template REF: why" less what FROM's line says already. */
static const char *from_why(const char *msg, const struct dockerfile *df)
{
	const char *ref = ctl_jstr(df->req, "from", "");
	size_t n = strlen(ref);

	if (strncmp(msg, "from: template ", 15) == 0 && n && strncmp(msg + 15, ref, n) == 0 &&
	    strncmp(msg + 15 + n, ": ", 2) == 0)
		msg += 15 + n + 2;
	if (strncmp(msg, "store: resolve template ", 24) == 0 && n && strncmp(msg + 24, ref, n) == 0 &&
	    strncmp(msg + 24 + n, ": ", 2) == 0)
		msg += 24 + n + 2;
	return msg;
}

/* The daemon's refusal of the request, said against the Dockerfile where it can be: a step's
 * ("steps[3].copy.chown: ...") with the line the step comes from, the base's with FROM's. */
static int build_refused(const struct dockerfile *df, const char *file, const struct http_resp *rs,
			 space_err *e)
{
	json_t *j = rs->len ? json_loadb(rs->body, rs->len, 0, NULL) : NULL;
	json_t *eo = json_object_get(j, "error"), *m;
	const char *msg = json_string_value(json_object_get(eo, "message"));
	const char *code = ctl_jstr(eo, "code", "no code");
	size_t i;
	int k = 0;

	if (df->archive && msg && strncmp(msg, "from.image", 10) == 0)
		err_set(e, ENOTSUP, "%s:%d: FROM an image archive (%s): the daemon does not build "
			"from image archives yet (%s, HTTP %ld); FROM a template instead (spacectl "
			"templates lists them)", file, df->from_line, df->archive, msg, rs->status);
	else if (msg && sscanf(msg, "steps[%zu]%n", &i, &k) == 1 && k &&
		 (m = json_array_get(df->meta, i)))
		err_set(e, EINVAL, "%s:%d: %s: the daemon refused it: %s (%s, HTTP %ld)", file,
			(int)ctl_jint(m, "line", 0), ctl_jstr(m, "text", "?"), msg, code, rs->status);
	else if (msg && strncmp(msg, "from", 4) == 0 && strchr(":. ", msg[4]) && !df->archive)
		err_set(e, EINVAL, "%s:%d: FROM %s: %s (%s, HTTP %ld); FROM names a SPACE template "
			"(spacectl templates lists them): images are not pulled from registries", file,
			df->from_line, ctl_jstr(df->req, "from", "?"), from_why(msg, df), code,
			rs->status);
	else
		http_error(rs, e);
	json_decref(j);
	return -1;
}

/* POST /v1/templates/builds; *resp its 202 answer. */
static int post_build(const struct ctl *c, const struct dockerfile *df, const char *file,
		      const json_t *body, json_t **resp, space_err *e)
{
	_cleanup_free_ char *url = NULL, *payload = json_dumps(body, JSON_COMPACT);
	struct http_resp rs;
	struct http_req rq = {
		.method = "POST",
		.bearer = c->api_key,
		.content_type = "application/json",
		.accept = "application/json",
		.timeout_s = POST_TIMEOUT_S,
	};
	int rc;

	if (need_api_key(c, e) < 0)
		return -1;
	if (!payload || asprintf(&url, "%s/v1/templates/builds", c->url) < 0)
		return err_set(e, ENOMEM, "out of memory");
	rq.url = url;
	rq.body = payload;
	rq.body_len = strlen(payload);
	rc = http_do(&rq, &rs, e);
	if (rc == 0 && rs.status / 100 != 2)
		rc = build_refused(df, file, &rs, e);
	else if (rc == 0 && !(*resp = json_loadb(rs.body ? rs.body : "", rs.len, 0, NULL)))
		rc = err_set(e, EBADMSG, "POST /v1/templates/builds: the answer is not JSON");
	http_resp_free(&rs);
	return rc;
}

/* Upload what the build needs, start it, follow it. */
static int start_build(const struct ctl *c, const struct opts *o, const char *file,
		       struct dockerfile *df, const struct ctx *x)
{
	_cleanup_free_ char *image = NULL, *context = NULL;
	bool show = isatty(STDERR_FILENO);
	json_t *body = NULL, *resp = NULL;
	space_err e = { 0 };
	int rc;

	if (df->archive && upload_archive(c, df->archive, show, &image, &e) < 0)
		return ctl_fail(c, &e, CTL_EXIT_FAIL);
	if (dockerfile_has_copy(df) && upload_context(c, x, show, &context, &e) < 0)
		return ctl_fail(c, &e, CTL_EXIT_FAIL);
	if (!(body = request(o, df, context, image)))
		err_set(&e, ENOMEM, "out of memory");
	if (!body || post_build(c, df, file, body, &resp, &e) < 0)
		rc = ctl_fail(c, &e, CTL_EXIT_FAIL);
	else
		rc = follow_build(c, o, df, resp);
	json_decref(body);
	json_decref(resp);
	return rc;
}

/* Read and parse the Dockerfile.  -1 to go on, else the exit status. */
static int load_dockerfile(const struct ctl *c, const struct opts *o, const char *file,
			   struct dockerfile *df)
{
	_cleanup_free_ char *text = NULL;
	space_err e = { 0 };
	size_t len = 0;

	if (read_all(file, DOCKERFILE_MAX, &text, &len, &e) < 0)
		return ctl_fail(c, &e, CTL_EXIT_FAIL);
	if (dockerfile_parse(file, text, len, o->build_args, warn_msg, NULL, df, &e) < 0)
		return ctl_fail(c, &e, e.code == ENOMEM ? CTL_EXIT_FAIL : CTL_EXIT_USAGE);
	return -1;
}

static int cmd_build(struct ctl *c, const struct ctl_verb *v, int argc, char **argv)
{
	struct opts o = { .tags = json_array(), .build_args = json_object() };
	_cleanup_free_ char *dflt = NULL;
	struct dockerfile df = { 0 };
	struct dockerignore *di = NULL;
	struct ctx x = { 0 };
	const char *file = NULL;
	int rc;

	rc = o.tags && o.build_args ? parse_opts(c, v, argc, argv, &o) : CTL_EXIT_FAIL;
	/* "Dockerfile", not "./Dockerfile", in messages when DIR is "." */
	if (rc < 0 && !o.file)
		dflt = strcmp(o.dir, ".") == 0 ? strdup("Dockerfile") : join(o.dir, "Dockerfile");
	if (rc < 0 && !(file = o.file ? o.file : dflt))
		rc = CTL_EXIT_FAIL;
	if (rc < 0)
		rc = load_dockerfile(c, &o, file, &df);
	if (rc < 0 && dockerfile_has_copy(&df))
		rc = prepare_context(c, &o, file, &df, &x, &di);
	if (rc < 0)
		rc = start_build(c, &o, file, &df, &x);
	ctx_free(&x);
	dockerignore_free(di);
	dockerfile_free(&df);
	json_decref(o.tags);
	json_decref(o.build_args);
	return rc;
}

static int run(struct ctl *c, int argc, char **argv)
{
	static char prog[] = "spacectl template build";
	const struct ctl_verb *v = &ctl_verb_template;

	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		ctl_print_help(v, stdout);
		return CTL_EXIT_OK;
	}
	if (argc < 2)
		return ctl_usage_error(v, "missing the subcommand (build)");
	if (strcmp(argv[1], "build") != 0)
		return ctl_usage_error(v, "unknown subcommand '%s' (build)", argv[1]);
	argv[1] = prog;
	return cmd_build(c, v, argc - 1, argv + 1);
}

const struct ctl_verb ctl_verb_template = {
	.name = "template",
	.usage = "build [-f DOCKERFILE] -t NAME[:TAG] [-t NAME:TAG2]... [--build-arg K=V]... [--json] DIR",
	.summary = "build a template from a Dockerfile",
	.help = "Turns the Dockerfile (default DIR/Dockerfile; '-' reads it from stdin) into a build\n"
		"of the daemon, sends DIR as the build context (.dockerignore honoured, at most\n"
		"1 GiB; sent only when a COPY or ADD needs it), starts the build and follows it: on\n"
		"a terminal one line per step (\"[2/5] RUN make ... done 3.2s\", \"cached\"), the\n"
		"output of a step that fails; else the steps' output on stdout, step lines on\n"
		"stderr.  Prints \"NAME:TAG DIGEST\" for each tag.  Exit 1 when the build fails, 2\n"
		"for a bad command line or a Dockerfile it cannot take (\"Dockerfile:7: HEALTHCHECK\n"
		"is not supported\").  Ctrl-C stops following, not the build.\n"
		"\n"
		"One stage: FROM a template (base, name:tag, sha256:...) or an image archive\n"
		"(oci-archive:PATH, docker-archive:PATH: uploaded first; the daemon does not build\n"
		"from archives yet and says so).  RUN, COPY and ADD of local paths (--chown only),\n"
		"ENV, WORKDIR, USER (the group is dropped: the user's own applies), ARG (shell-form\n"
		"RUNs get ARG values in their environment), LABEL, EXPOSE (TCP), CMD and ENTRYPOINT\n"
		"(made one shell command line the template starts with).  MAINTAINER is ignored.\n"
		"Refused: HEALTHCHECK, VOLUME, ONBUILD, SHELL, STOPSIGNAL, heredocs, RUN\n"
		"--mount/--network, COPY --from/--chmod, ADD of a URL.\n"
		"\n"
		"Options:\n"
		"  -f, --file F       the Dockerfile (relative to the current directory)\n"
		"  -t, --tag N[:T]    the template's name and a tag (default latest; 1 to 127 of\n"
		"                     [A-Za-z0-9_.-]); repeatable (32 at most), one name\n"
		"  --build-arg K=V    an ARG's value (K alone: from the environment); repeatable\n"
		"  --json             print the finished build's JSON (GET /v1/templates/builds/ID)\n"
		"\n"
		"  spacectl template build -t myenv:v1 .\n"
		"  spacectl template build -f docker/Dockerfile -t api:1.2 -t api:latest \\\n"
		"      --build-arg VERSION=1.2 .\n",
	.run = run,
};
