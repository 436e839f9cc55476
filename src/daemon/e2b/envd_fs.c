/* envd_fs.c -- envd's filesystem.Filesystem (Connect, JSON codec) over the file-operation engine
 * (api/files.h): Stat, MakeDir, Move, ListDir, Remove as unary calls, WatchDir as a server
 * stream (the polled watchers are envd_watch.c's). Each call is one agent operation (Move is a
 * rename, then a stat of the result); the agent's output is parsed and re-encoded in envd's
 * shapes. */
#include <ctype.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "front/fop.h"
#include "connect.h"
#include "daemon.h"
#include "e2b.h"
#include "envd_fs.h"
#include "sandbox/sandbox.h"
#include "sandbox/spec.h"

/* ---- shared helpers (envd_fs.h) ---- */

int envd_abs_path(struct http_req *r, const char *user, const char *p, char *out, space_err *err)
{
	char home[ENVD_USER_MAX + 8];
	int n;

	if (!p)
		p = "";
	if (p[0] == '/') {
		n = snprintf(out, ENVD_PATH_MAX + 1, "%s", p);
	} else {
		if (!user || !*user) {
			struct sandbox *sb = sandbox_find(r->d, e2b_sandbox_id(r));

			user = sb && sandbox_default_user(sb)[0] ? sandbox_default_user(sb) : "root";
		}
		if (strcmp(user, "root") == 0)
			snprintf(home, sizeof(home), "/root");
		else
			snprintf(home, sizeof(home), "/home/%s", user);
		if (p[0] == '~' && (p[1] == '/' || !p[1]))
			p += p[1] ? 2 : 1;
		n = snprintf(out, ENVD_PATH_MAX + 1, "%s%s%s", home, *p ? "/" : "", p);
	}
	if (n < 0 || n > ENVD_PATH_MAX)
		return err_set(err, EINVAL, "path is longer than %d bytes", ENVD_PATH_MAX);
	return 0;
}

void envd_rfc3339(double t, char out[40])
{
	double sec;
	long us;
	time_t s;
	struct tm tm;

	if (!(t >= 0 && t <= 253402300799.0)) /* NaN too */
		t = 0;
	sec = (double)(int64_t)t;
	us = (long)((t - sec) * 1e6 + 0.5);
	if (us >= 1000000)
		sec += 1, us -= 1000000;
	s = (time_t)sec;
	gmtime_r(&s, &tm);
	snprintf(out, 40, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
		 tm.tm_hour, tm.tm_min, tm.tm_sec, us);
}

static const char *file_type(const char *t)
{
	if (!t)
		return "FILE_TYPE_UNSPECIFIED";
	if (strcmp(t, "file") == 0)
		return "FILE_TYPE_FILE";
	if (strcmp(t, "dir") == 0)
		return "FILE_TYPE_DIRECTORY";
	if (strcmp(t, "symlink") == 0)
		return "FILE_TYPE_SYMLINK";
	return "FILE_TYPE_UNSPECIFIED";
}

static const char *str_or(const json_t *e, const char *k, const char *dflt)
{
	const char *v = json_string_value(json_object_get(e, k));

	return v ? v : dflt;
}

json_t *envd_entry_info(const json_t *e)
{
	json_int_t size = json_integer_value(json_object_get(e, "size"));
	json_int_t mode = json_integer_value(json_object_get(e, "mode"));
	const char *target = json_string_value(json_object_get(e, "symlink_target"));
	char sz[24], ts[40];
	json_t *o;

	snprintf(sz, sizeof(sz), "%lld", (long long)(size < 0 ? 0 : size));
	envd_rfc3339(json_number_value(json_object_get(e, "mtime")), ts);
	o = json_pack("{s:s,s:s,s:s,s:s,s:I,s:s,s:s,s:s,s:s}", "name", str_or(e, "name", ""), "type",
		      file_type(json_string_value(json_object_get(e, "type"))), "path", str_or(e, "path", ""), "size", sz,
		      "mode", (json_int_t)(mode & 07777), "permissions", str_or(e, "permissions", ""), "owner",
		      str_or(e, "owner", ""), "group", str_or(e, "group", ""), "modifiedTime", ts);
	if (o && target && json_object_set_new(o, "symlinkTarget", json_string(target)) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* ---- calls ---- */

struct fs_call {
	struct spaced *d;
	struct evhttp_request *req;
	char sb[ID_LEN];
	char user[ENVD_USER_MAX];
	char path[ENVD_PATH_MAX + 1]; /* Move: the destination; WatchDir: the watched directory */
	bool stream;
	/* WatchDir: the keepalive timer (every ka_every while no event was sent) and its fop */
	struct event *ka;
	struct timeval ka_every;
	struct fop *f;
	bool sent_since_tick;
	struct envd_watch_state watch;
};

static const char *connect_code_for(int e, int status)
{
	if (e)
		return connect_code_of_errno(e);
	switch (status) {
	case 400:
		return "invalid_argument";
	case 404:
		return "not_found";
	case 502:
	case 503:
		return "unavailable";
	default:
		return "internal";
	}
}

static void call_error(struct fop *f, int e, int status, const char *code, const char *msg)
{
	struct fs_call *c = fop_ctx(f);

	(void)code;
	if (c->stream)
		connect_stream_reply_error(fop_req(f), connect_code_for(e, status), "%s", msg);
	else
		connect_reply_error(fop_req(f), connect_code_for(e, status), "%s", msg);
}

/* The request's message, user and sandbox; NULL having answered. */
static struct fs_call *call_begin(struct http_req *r, bool stream, json_t **msg)
{
	struct fs_call *c;
	space_err err = { 0 };

	if (!(*msg = connect_request(r, stream)))
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c) {
		json_decref(*msg);
		connect_reply_error(r->req, "internal", "out of memory");
		return NULL;
	}
	c->d = r->d;
	c->req = r->req;
	c->stream = stream;
	snprintf(c->sb, sizeof(c->sb), "%s", e2b_sandbox_id(r));
	if (envd_user(r, false, c->user, &err) < 0) {
		if (stream)
			connect_stream_reply_error(r->req, "invalid_argument", "%s", err.msg);
		else
			connect_reply_error(r->req, "invalid_argument", "%s", err.msg);
		json_decref(*msg);
		free(c);
		return NULL;
	}
	return c;
}

/* A string field of the message as an absolute path into out; -1 having answered. */
static int msg_path(struct http_req *r, struct fs_call *c, json_t *msg, const char *key, char *out)
{
	json_t *v = json_object_get(msg, key);
	space_err err = { 0 };

	if (v && !json_is_string(v))
		err_set(&err, EINVAL, "%s must be a string", key);
	else
		envd_abs_path(r, c->user, json_string_value(v), out, &err);
	if (!err.code)
		return 0;
	if (c->stream)
		connect_stream_reply_error(r->req, "invalid_argument", "%s", err.msg);
	else
		connect_reply_error(r->req, "invalid_argument", "%s", err.msg);
	return -1;
}

static const char *user_arg(const struct fs_call *c)
{
	return c->user[0] ? c->user : NULL;
}

static int add_json(struct evbuffer *out, json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	int rc = s ? evbuffer_add(out, s, strlen(s)) : -1;

	free(s);
	json_decref(j);
	return rc;
}

/* Stat: {entry} */
/* A unary call whose message names one path: the operation `op` on it, with up to two further
 * arguments (NULL: none). */
static void path_call(struct http_req *r, const struct fop_kind *k, const char *op, const char *a1, const char *a2)
{
	json_t *msg;
	struct fs_call *c = call_begin(r, false, &msg);
	char path[ENVD_PATH_MAX + 1];
	int rc;

	if (!c)
		return;
	rc = msg_path(r, c, msg, "path", path);
	json_decref(msg);
	if (rc < 0) {
		free(c);
		return;
	}
	fop_run(r, c->sb, k, (const char *[]){ op, path, a1, a2, NULL }, user_arg(c), c);
}

static int stat_end(struct fop *f, struct evbuffer *out)
{
	json_t *e = envd_entry_info(fop_header(f));

	return add_json(out, e ? json_pack("{s:o}", "entry", e) : NULL);
}

static const struct fop_kind k_stat = {
	.kind = SESS_KIND_FILE, .on_end = stat_end, .on_error = call_error, .free_ctx = free,
};

void envd_fs_stat(struct http_req *r)
{
	path_call(r, &k_stat, "stat", NULL, NULL);
}

/* MakeDir: parents as needed; an existing directory is already_exists (the SDK's false). */
static int mkdir_end(struct fop *f, struct evbuffer *out)
{
	json_t *h = fop_header(f);
	const char *p = json_string_value(json_object_get(h, "path"));
	const char *base = p ? strrchr(p, '/') : NULL;

	if (!json_is_true(json_object_get(h, "created")))
		return 0; /* on_done answers */
	return add_json(out, json_pack("{s:{s:s,s:s,s:s}}", "entry", "name", base && base[1] ? base + 1 : "/", "type",
				       "FILE_TYPE_DIRECTORY", "path", p ? p : ""));
}

static void mkdir_done(struct fop *f, struct evbuffer *out)
{
	struct evkeyvalq *hdrs = evhttp_request_get_output_headers(fop_req(f));

	if (!evbuffer_get_length(out)) {
		connect_reply_error(fop_req(f), "already_exists", "directory '%s' already exists",
				    json_string_value(json_object_get(fop_header(f), "path")));
		return;
	}
	evhttp_add_header(hdrs, "Content-Type", "application/json");
	evhttp_send_reply(fop_req(f), 200, "OK", out);
}

static const struct fop_kind k_mkdir = {
	.kind = SESS_KIND_FILE, .on_end = mkdir_end, .on_error = call_error, .on_done = mkdir_done, .free_ctx = free,
};

void envd_fs_make_dir(struct http_req *r)
{
	path_call(r, &k_mkdir, "mkdir", "-", "-p");
}

/* Move: rename (replacing), then the destination's entry from a stat. */
static int noop_end(struct fop *f, struct evbuffer *out)
{
	(void)f;
	(void)out;
	return 0;
}

static void move_done(struct fop *f, struct evbuffer *out)
{
	struct fs_call *c = fop_ctx(f), *n = malloc(sizeof(*n));
	struct http_req rr;

	(void)out;
	if (!n) {
		connect_reply_error(fop_req(f), "internal", "out of memory");
		return;
	}
	*n = *c;
	memset(&rr, 0, sizeof(rr));
	rr.d = c->d;
	rr.req = c->req;
	fop_run(&rr, n->sb, &k_stat, (const char *[]){ "stat", n->path, NULL }, user_arg(n), n);
}

static const struct fop_kind k_move = {
	.kind = SESS_KIND_FILE, .on_end = noop_end, .on_error = call_error, .on_done = move_done, .free_ctx = free,
};

void envd_fs_move(struct http_req *r)
{
	json_t *msg;
	struct fs_call *c = call_begin(r, false, &msg);
	char from[ENVD_PATH_MAX + 1];
	int rc;

	if (!c)
		return;
	rc = msg_path(r, c, msg, "source", from);
	if (rc == 0)
		rc = msg_path(r, c, msg, "destination", c->path);
	json_decref(msg);
	if (rc < 0) {
		free(c);
		return;
	}
	fop_run(r, c->sb, &k_move, (const char *[]){ "rename", from, c->path, NULL }, user_arg(c), c);
}

/* ListDir: {entries: [...]}, streamed entry by entry. */
static int list_header(struct fop *f)
{
	evhttp_add_header(evhttp_request_get_output_headers(fop_req(f)), "Content-Type", "application/json");
	fop_reply_start(f, 200, "OK");
	fop_set_first(f, true);
	return evbuffer_add(fop_out(f), "{\"entries\":[", 12);
}

static int list_line(struct fop *f, const char *line, size_t len, struct evbuffer *out)
{
	json_t *j = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	json_t *e = json_is_object(j) ? envd_entry_info(j) : NULL;

	json_decref(j);
	if (!e)
		return -1;
	if (!fop_set_first(f, false))
		evbuffer_add(out, ",", 1);
	return add_json(out, e);
}

static int list_end(struct fop *f, struct evbuffer *out)
{
	(void)f;
	return evbuffer_add(out, "]}", 2);
}

static const struct fop_kind k_list = {
	.kind = SESS_KIND_FILE, .on_header = list_header, .on_line = list_line, .on_end = list_end,
	.on_error = call_error, .free_ctx = free,
};

void envd_fs_list_dir(struct http_req *r)
{
	json_t *msg, *dv;
	struct fs_call *c = call_begin(r, false, &msg);
	char path[ENVD_PATH_MAX + 1], sd[8];
	json_int_t depth = 1;
	int rc;

	if (!c)
		return;
	rc = msg_path(r, c, msg, "path", path);
	dv = json_object_get(msg, "depth");
	if (rc == 0 && dv) {
		/* uint32: a number, or a string of digits */
		if (json_is_integer(dv))
			depth = json_integer_value(dv);
		else if (json_is_string(dv) && strspn(json_string_value(dv), "0123456789") == strlen(json_string_value(dv)) &&
			 json_string_length(dv) > 0 && json_string_length(dv) < 10)
			depth = atoll(json_string_value(dv));
		else
			depth = -1;
		if (depth < 0) {
			connect_reply_error(r->req, "invalid_argument", "depth must be a non-negative integer");
			rc = -1;
		}
	}
	json_decref(msg);
	if (rc < 0) {
		free(c);
		return;
	}
	if (depth < 1)
		depth = 1;
	if (depth > 64)
		depth = 64; /* the agent's bound */
	snprintf(sd, sizeof(sd), "%d", (int)depth);
	fop_run(r, c->sb, &k_list, (const char *[]){ "list", path, sd, NULL }, user_arg(c), c);
}

/* Remove: recursive, as envd's os.RemoveAll (a missing path is not_found, as envd answers). */
static int empty_end(struct fop *f, struct evbuffer *out)
{
	(void)f;
	return evbuffer_add(out, "{}", 2);
}

static const struct fop_kind k_remove = {
	.kind = SESS_KIND_FILE, .on_end = empty_end, .on_error = call_error, .free_ctx = free,
};

void envd_fs_remove(struct http_req *r)
{
	path_call(r, &k_remove, "remove", "-r", NULL);
}

/* ---- WatchDir: a server stream of envelopes ---- */

static const char *event_type(const char *t)
{
	static const struct {
		const char *ours, *envd;
	} map[] = {
		{ "create", "EVENT_TYPE_CREATE" }, { "write", "EVENT_TYPE_WRITE" },   { "remove", "EVENT_TYPE_REMOVE" },
		{ "rename", "EVENT_TYPE_RENAME" }, { "chmod", "EVENT_TYPE_CHMOD" },
	};

	for (size_t i = 0; t && i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(t, map[i].ours) == 0)
			return map[i].envd;
	return NULL;
}

static int envelope(struct evbuffer *out, uint8_t flags, json_t *msg)
{
	int rc = msg ? connect_envelope_add(out, flags, msg) : -1;

	json_decref(msg);
	return rc;
}

/* While no event went out for a whole interval: {"keepalive":{}}, added to the engine's chunk
 * and sent by its next pump (fop_poke), so it never overtakes or splits an event. */
static void watch_keepalive(evutil_socket_t fd, short what, void *arg)
{
	struct fs_call *c = arg;

	(void)fd;
	(void)what;
	if (!c->sent_since_tick && envelope(fop_out(c->f), 0, json_pack("{s:{}}", "keepalive")) == 0)
		fop_poke(c->f);
	c->sent_since_tick = false;
}

static void watch_free(void *ctx)
{
	struct fs_call *c = ctx;

	if (c->ka)
		event_free(c->ka);
	free(c);
}

static int watch_header(struct fop *f)
{
	struct fs_call *c = fop_ctx(f);
	const char *p = json_string_value(json_object_get(fop_header(f), "path"));

	if (p && strlen(p) <= ENVD_PATH_MAX)
		snprintf(c->path, sizeof(c->path), "%s", p);
	evhttp_add_header(evhttp_request_get_output_headers(fop_req(f)), "Content-Type", "application/connect+json");
	fop_reply_start(f, 200, "OK");
	c->f = f;
	if (!(c->ka = event_new(c->d->base, -1, EV_PERSIST, watch_keepalive, c)) || evtimer_add(c->ka, &c->ka_every) < 0)
		return -1;
	return envelope(fop_out(f), 0, json_pack("{s:{}}", "start"));
}

/* The length of the user's name inside a temporary name ".<name>.space-XXXXXX" (the agent's
 * fs_write.c), or 0 when base is not one. */
static size_t temp_base_len(const char *base)
{
	static const char sfx[] = ".space-";
	size_t n = strlen(base), k = sizeof(sfx) - 1;

	if (n < 1 + 1 + k + 6 || base[0] != '.' || strncmp(base + n - 6 - k, sfx, k) != 0)
		return 0;
	for (size_t i = n - 6; i < n; i++)
		if (!isalnum((unsigned char)base[i]))
			return 0;
	return n - 6 - k - 1;
}

/* "#<inode>": the name the kernel gives an O_TMPFILE's dentry (fs_write.c writes into one
 * before it links it in), seen by inotify as its owner and mode are set. */
static bool tmpfile_name(const char *base)
{
	if (base[0] != '#' || !base[1])
		return false;
	for (const char *c = base + 1; *c; c++)
		if (!isdigit((unsigned char)*c))
			return false;
	return true;
}

static int add_event(json_t *evs, const char *name, const char *type)
{
	return json_array_append_new(evs, json_pack("{s:s,s:s}", "name", name, "type", type));
}

/* name: relative to the watched directory. */
static int map_event(struct envd_watch_state *st, const char *name, const char *t, const char *type, json_t *evs)
{
	const char *slash = strrchr(name, '/');
	const char *base = slash ? slash + 1 : name;
	size_t bl = temp_base_len(base), dl = (size_t)(base - name);

	/* An unnamed temporary file of SPACE's write only ever has its attributes or content
	 * changed (a user's file of that name is also created, renamed and removed, and shown). */
	if (tmpfile_name(base) && (strcmp(t, "chmod") == 0 || strcmp(t, "write") == 0))
		return 0;
	if (bl) {
		/* SPACE's temporary file: never shown; renamed away, it lands on its user's name */
		if (strcmp(t, "rename") == 0 && dl + bl < sizeof(st->landing))
			snprintf(st->landing, sizeof(st->landing), "%.*s%.*s", (int)dl, name, (int)bl, base + 1);
		return 0;
	}
	if (strcmp(t, "create") == 0 && st->landing[0] && strcmp(name, st->landing) == 0) {
		st->landing[0] = '\0';
		return add_event(evs, name, "EVENT_TYPE_CREATE") < 0 || add_event(evs, name, "EVENT_TYPE_WRITE") < 0
			       ? -1 : 0;
	}
	return add_event(evs, name, type);
}

int envd_watch_event(struct envd_watch_state *st, const char *dir, const char *line, size_t len, json_t **evs)
{
	json_t *j = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	const char *t = json_string_value(json_object_get(j, "type"));
	const char *type = event_type(t);
	const char *p = json_string_value(json_object_get(j, "path"));
	size_t rl = strlen(dir);
	const char *name;
	int rc = 0;

	*evs = NULL;
	if (!json_is_object(j) || !(*evs = json_array())) {
		json_decref(j);
		return -1;
	}
	if (t && strcmp(t, "overflow") == 0) {
		rc = 1;
	} else if (type && p) {
		/* envd names the entry relative to the watched directory */
		if (rl > 1 && strncmp(p, dir, rl) == 0 && p[rl] == '/')
			name = p + rl + 1;
		else if (rl == 1 && p[0] == '/' && p[1])
			name = p + 1;
		else
			name = strrchr(p, '/') ? strrchr(p, '/') + 1 : p;
		rc = map_event(st, name, t, type, *evs);
	}
	json_decref(j);
	if (rc < 0) {
		json_decref(*evs);
		*evs = NULL;
	}
	return rc;
}

static int watch_line(struct fop *f, const char *line, size_t len, struct evbuffer *out)
{
	struct fs_call *c = fop_ctx(f);
	json_t *evs, *ev;
	size_t i;
	int rc = envd_watch_event(&c->watch, c->path, line, len, &evs);

	if (rc < 0)
		return -1;
	/* a lost-events note has no envelope in envd's stream */
	json_array_foreach(evs, i, ev) {
		c->sent_since_tick = true;
		if (envelope(out, 0, json_pack("{s:O}", "filesystem", ev)) < 0) {
			json_decref(evs);
			return -1;
		}
	}
	json_decref(evs);
	return 0;
}

static int watch_end(struct fop *f, struct evbuffer *out)
{
	(void)f;
	return envelope(out, CONNECT_FLAG_END, connect_end_message(NULL, NULL));
}

static const struct fop_kind k_watch = {
	.kind = SESS_KIND_WATCH, .on_header = watch_header, .on_line = watch_line, .on_end = watch_end,
	.on_error = call_error, .free_ctx = watch_free,
};

void envd_fs_watch_dir(struct http_req *r)
{
	json_t *msg, *rec;
	struct fs_call *c = call_begin(r, true, &msg);
	bool recursive;
	int rc;

	if (!c)
		return;
	rc = msg_path(r, c, msg, "path", c->path);
	rec = json_object_get(msg, "recursive");
	recursive = json_is_true(rec);
	json_decref(msg);
	if (rc < 0) {
		free(c);
		return;
	}
	c->ka_every.tv_sec = (time_t)connect_keepalive_s(r->req);
	fop_run(r, c->sb, &k_watch, (const char *[]){ "watch", c->path, recursive ? "-r" : NULL, NULL }, user_arg(c),
		c);
}
