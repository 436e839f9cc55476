/* api_sandboxes.c -- /v1/sandboxes: create, list (filtered), get, delete, console logs */
#include <event2/buffer.h>
#include <fcntl.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api.h"
#include "front/req.h"
#include "cleanup.h"
#include "front/render.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

/* The console log is answered from its last this many bytes. */
#define LOGS_MAX (1u << 20)
#define METADATA_PREFIX "metadata."

int api_sandbox_param(struct http_req *r, int i, struct sandbox_rec *out)
{
	space_err err = { 0 };

	if (sandbox_get(r->d, r->param[i], out, &err) < 0) {
		http_reply_err(r->req, &err);
		return -1;
	}
	return 0;
}

/* What a suspended sandbox's saved state takes (-1: not suspended, or not known). */
static int64_t saved_bytes(struct store *st, const struct sandbox_rec *sb)
{
	struct snapshot_rec snap;
	space_err err = { 0 };
	int64_t saved = -1;

	if (sb->state == SB_SUSPENDED && sb->snapshot_id[0] &&
	    store_snapshot_get(st, sb->snapshot_id, &snap, &err) == 0) {
		saved = snap.bytes;
		snapshot_rec_clear(&snap);
	}
	return saved;
}

/* A reply's sandbox (an action's 202): what its saved state takes as this process knows it,
 * never a store read on the loop (GET reads it on the store's thread). */
json_t *api_sandbox_json(struct spaced *d, const struct sandbox_rec *sb)
{
	const struct sandbox *held = sandbox_find(d, sb->id);

	return sandbox_to_json(sb, held ? sandbox_suspended_bytes(held) : -1);
}

/* A record another thread read, kept past the read: its JSON members are shared. */
static void rec_keep(struct sandbox_rec *dst, const struct sandbox_rec *src)
{
	*dst = *src;
	dst->env = json_incref(src->env);
	dst->metadata = json_incref(src->metadata);
	dst->network = json_incref(src->network);
}

void api_reply_accepted_to(struct spaced *d, struct evhttp_request *req, const struct sandbox_rec *sb,
			   const struct op_rec *op)
{
	api_reply_stored_to(d, req, 202, json_pack("{s:o,s:o}", "sandbox", api_sandbox_json(d, sb), "operation",
						   op_to_json(op)));
}

void api_reply_accepted(struct http_req *r, const struct sandbox_rec *sb, const struct op_rec *op)
{
	api_reply_accepted_to(r->d, r->req, sb, op);
}

/* POST /v1/sandboxes: what the create reads (template, snapshots) is read on the store's
 * thread (create_job_read); the sandbox is made on the loop with it. */

static void create_reply(struct spaced *d, struct evhttp_request *req, void *arg, int rc, const space_err *err)
{
	struct create_job *j = arg;
	struct sandbox_rec sb = { 0 };
	struct op_rec op = { 0 };
	space_err e2 = { 0 };

	/* A failed read is answered as the create would answer it (it fails the same way). */
	if (rc < 0)
		http_reply_err(req, err);
	else if (sandbox_create_read(d, &j->req, &j->pre, &sb, &op, &e2) < 0)
		http_reply_err(req, &e2);
	else
		api_reply_accepted_to(d, req, &sb, &op);
	sandbox_rec_clear(&sb);
	op_rec_clear(&op);
}

void api_sandboxes_create(struct http_req *r)
{
	struct create_job *j;
	space_err err = { 0 };
	json_t *body = http_body_json(r);

	if (!body)
		return;
	if (!(j = create_job_new(r->d))) {
		http_reply_error(r->req, 500, "internal", "out of memory");
	} else if (req_create(body, &j->req, &err) < 0) {
		http_reply_err(r->req, &err);
		free(j);
	} else {
		api_read(r, create_job_read, create_reply, create_job_free, j);
	}
	json_decref(body);
}

int api_parse_states(const char *list, unsigned *mask, space_err *err)
{
	char buf[512], *save = NULL, *tok;

	*mask = 0;
	if (!list)
		return 0;
	if (strlen(list) >= sizeof(buf))
		return err_set(err, EINVAL, "state filter is too long");
	strcpy(buf, list);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int st = sb_state_parse(tok);
		if (st < 0)
			return err_set(err, EINVAL, "unknown state '%s'", tok);
		*mask |= 1u << st;
	}
	if (*mask == 0)
		return err_set(err, EINVAL, "empty state filter");
	return 0;
}

static bool metadata_matches(const struct sandbox_rec *sb, struct evkeyvalq *query)
{
	struct evkeyval *kv;

	TAILQ_FOREACH(kv, query, next) {
		json_t *v;
		if (strncmp(kv->key, METADATA_PREFIX, strlen(METADATA_PREFIX)) != 0)
			continue;
		v = json_object_get(sb->metadata, kv->key + strlen(METADATA_PREFIX));
		if (!json_is_string(v) || strcmp(json_string_value(v), kv->value) != 0)
			return false;
	}
	return true;
}


/* GET /v1/sandboxes: the rows (and what each suspended one's state takes) are read on the
 * store's thread; filtered by metadata and rendered on the loop. */
struct sb_list {
	unsigned mask;
	struct sandbox_rec *v;
	int64_t *saved;
	size_t n, cap;
	bool oom;
};

static int list_one(const struct sandbox_rec *sb, void *arg)
{
	struct sb_list *l = arg;

	if (!sandbox_visible(sb))
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct sandbox_rec *v = realloc(l->v, cap * sizeof(*v));
		int64_t *saved;

		if (v)
			l->v = v;
		saved = v ? realloc(l->saved, cap * sizeof(*saved)) : NULL;
		if (!saved) {
			l->oom = true;
			return -1;
		}
		l->saved = saved;
		l->cap = cap;
	}
	rec_keep(&l->v[l->n++], sb);
	return 0;
}

static int list_read(struct store *conn, void *arg, space_err *err)
{
	struct sb_list *l = arg;

	if (store_sandbox_each(conn, l->mask, list_one, l, err) < 0 && !l->oom)
		return -1;
	if (l->oom)
		return err_set(err, ENOMEM, "out of memory listing sandboxes");
	for (size_t i = 0; i < l->n; i++)
		l->saved[i] = saved_bytes(conn, &l->v[i]);
	return 0;
}

struct sb_list_req {
	struct sb_list l;
	struct evkeyvalq query; /* the request's ?metadata.k=v filters, copied */
};

static void list_reply(struct spaced *d, struct evhttp_request *req, void *arg, int rc, const space_err *err)
{
	struct sb_list_req *q = arg;
	json_t *arr;

	(void)d;
	if (rc < 0) {
		http_reply_err(req, err);
		return;
	}
	if (!(arr = json_array())) {
		http_reply_error(req, 500, "internal", "out of memory");
		return;
	}
	for (size_t i = 0; i < q->l.n; i++) {
		json_t *j;

		if (!metadata_matches(&q->l.v[i], &q->query))
			continue;
		j = sandbox_to_json(&q->l.v[i], q->l.saved[i]);
		if (!j || json_array_append_new(arr, j) < 0) {
			json_decref(arr);
			http_reply_error(req, 500, "internal", "out of memory listing sandboxes");
			return;
		}
	}
	http_reply_json(req, 200, json_pack("{s:o}", "sandboxes", arr));
}

static void list_release(void *arg)
{
	struct sb_list_req *q = arg;

	for (size_t i = 0; i < q->l.n; i++)
		sandbox_rec_clear(&q->l.v[i]);
	free(q->l.v);
	free(q->l.saved);
	evhttp_clear_headers(&q->query);
	free(q);
}

void api_sandboxes_list(struct http_req *r)
{
	struct sb_list_req *q;
	struct evkeyval *kv;
	space_err err = { 0 };
	unsigned mask;

	if (api_parse_states(http_query(r, "state"), &mask, &err) < 0) {
		http_reply_err(r->req, &err);
		return;
	}
	if (!(q = calloc(1, sizeof(*q)))) {
		http_reply_error(r->req, 500, "internal", "out of memory");
		return;
	}
	q->l.mask = mask;
	TAILQ_INIT(&q->query);
	TAILQ_FOREACH(kv, &r->query, next) {
		if (strncmp(kv->key, METADATA_PREFIX, strlen(METADATA_PREFIX)) == 0 &&
		    evhttp_add_header(&q->query, kv->key, kv->value) < 0) {
			list_release(q);
			http_reply_error(r->req, 500, "internal", "out of memory");
			return;
		}
	}
	api_read(r, list_read, list_reply, list_release, q);
}

/* GET /v1/sandboxes/{id}: one this process runs is answered from memory unless suspended
 * (what its saved state takes is a store read); others are read on the store's thread. */
struct sb_get {
	char id[ID_LEN];
	bool loaded;
	struct sandbox_rec rec;
	int64_t saved;
};

static int get_read(struct store *conn, void *arg, space_err *err)
{
	struct sb_get *g = arg;

	if (!g->loaded) {
		if (store_sandbox_get(conn, g->id, &g->rec, err) < 0)
			return -1;
		g->loaded = true; /* rec is ours to clear */
		if (!sandbox_visible(&g->rec))
			return err_set(err, ENOENT, "no sandbox '%.64s'", g->id);
	}
	g->saved = saved_bytes(conn, &g->rec);
	return 0;
}

static void get_reply(struct spaced *d, struct evhttp_request *req, void *arg, int rc, const space_err *err)
{
	struct sb_get *g = arg;

	(void)d;
	if (rc < 0 && err->code == ENOENT)
		http_reply_error(req, 404, "not_found", "no sandbox '%.64s'", g->id);
	else if (rc < 0)
		http_reply_err(req, err);
	else
		http_reply_json(req, 200, sandbox_to_json(&g->rec, g->saved));
}

static void get_release(void *arg)
{
	struct sb_get *g = arg;

	if (g->loaded)
		sandbox_rec_clear(&g->rec);
	free(g);
}

void api_sandboxes_get(struct http_req *r)
{
	const char *id = r->param[0];
	space_err err = { 0 };
	struct sandbox *sb;
	struct sb_get *g;

	if (!id_valid(id, "sb-")) {
		http_reply_error(r->req, 404, "not_found", "no sandbox '%.64s'", id);
		return;
	}
	sb = sandbox_find(r->d, id);
	if (sb && !sandbox_visible(sandbox_record(sb))) {
		http_reply_error(r->req, 404, "not_found", "no sandbox '%.64s'", id);
		return;
	}
	if (sb && sandbox_record(sb)->state != SB_SUSPENDED) {
		struct sandbox_rec rec;

		if (sandbox_get(r->d, id, &rec, &err) < 0) { /* from memory */
			http_reply_err(r->req, &err);
			return;
		}
		http_reply_json(r->req, 200, sandbox_to_json(&rec, -1));
		sandbox_rec_clear(&rec);
		return;
	}
	if (!(g = calloc(1, sizeof(*g)))) {
		http_reply_error(r->req, 500, "internal", "out of memory");
		return;
	}
	snprintf(g->id, sizeof(g->id), "%s", id);
	if (sb) {
		if (sandbox_get(r->d, id, &g->rec, &err) < 0) {
			free(g);
			http_reply_err(r->req, &err);
			return;
		}
		g->loaded = true;
	}
	api_read(r, get_read, get_reply, get_release, g);
}

/* The console log's last LOGS_MAX bytes (the file may still be growing;
 * we send what it held when we looked). No log yet: an empty body. */
void api_sandboxes_logs(struct http_req *r)
{
	struct sandbox_rec sb = { 0 };
	char path[PATH_MAX];
	_cleanup_close_ int fd = -1;
	struct evbuffer *buf;
	struct evbuffer_iovec iov;
	struct stat st;
	off_t from = 0;
	size_t len = 0, got = 0;

	if (api_sandbox_param(r, 0, &sb) < 0)
		return;
	path_console_log(r->d, sb.id, path);
	sandbox_rec_clear(&sb);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno != ENOENT) {
		http_reply_error(r->req, 500, "internal", "opening the console log: %s", strerror(errno));
		return;
	}
	if (fd >= 0) {
		if (fstat(fd, &st) < 0) {
			http_reply_error(r->req, 500, "internal", "reading the console log: %s", strerror(errno));
			return;
		}
		len = st.st_size > (off_t)LOGS_MAX ? LOGS_MAX : (size_t)st.st_size;
		from = st.st_size - (off_t)len;
	}
	buf = evbuffer_new();
	if (!buf) {
		http_reply_error(r->req, 500, "internal", "out of memory");
		return;
	}
	/* Copied rather than sent with sendfile/mmap: the log may be cut
	 * while we send it. */
	if (len > 0 && evbuffer_reserve_space(buf, (ev_ssize_t)len, &iov, 1) == 1) {
		while (got < len) {
			ssize_t n = pread(fd, (char *)iov.iov_base + got, len - got, from + (off_t)got);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			got += (size_t)n;
		}
		iov.iov_len = got;
		evbuffer_commit_space(buf, &iov, 1);
	}
	evhttp_add_header(evhttp_request_get_output_headers(r->req), "Content-Type", "text/plain");
	evhttp_add_header(evhttp_request_get_output_headers(r->req), "Cache-Control", "no-store");
	evhttp_send_reply(r->req, 200, NULL, buf);
	evbuffer_free(buf);
}
