/* e2b_list.c -- what E2B's control plane reads: GET /v2/sandboxes (filtered, paged),
 * GET /sandboxes/{id}, its metrics, GET /snapshots and GET /templates */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <unistd.h>

#include "front/front.h"
#include "cleanup.h"
#include "e2b.h"
#include "e2b_ctl.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

/* The template image's size in MiB (0 if the template is gone). */
static int64_t disk_mb(struct store *st, const char *digest)
{
	struct template_rec t = { 0 };
	space_err err = { 0 };
	int64_t mb = 0;

	if (digest[0] && store_template_get(st, digest, &t, &err) == 0)
		mb = (t.image_bytes + (1 << 20) - 1) >> 20;
	template_rec_clear(&t);
	return mb;
}

/* A page: items after the one named by the token (an id, in the store's creation order,
 * which deleted rows keep, so a token stays valid), at most limit of them; next names the
 * last one returned when more match. Filled on the store's thread (e2b_read: the strings
 * are the page's own copies), answered on the loop. */
struct page {
	struct store *st;
	char *after;
	bool passed;
	int limit, count;
	char last[ID_LEN], next[ID_LEN];
	json_t *arr;
	bool oom;
	/* sandboxes */
	unsigned states;
	struct strmap filter;
	/* snapshots */
	char *sandbox_id, *name;
	int (*read)(struct store *conn, struct page *p, space_err *err);
};

/* Skips up to the token; false when the item is still before it. */
static bool page_past(struct page *p, const char *id)
{
	if (p->passed)
		return true;
	if (strcmp(id, p->after) == 0)
		p->passed = true;
	return false;
}

/* Adds j (taken); nonzero to stop: the page is full and one more matched. */
static int page_add(struct page *p, const char *id, json_t *j)
{
	if (p->count == p->limit) {
		json_decref(j);
		snprintf(p->next, sizeof(p->next), "%s", p->last);
		return 1;
	}
	if (!j || json_array_append_new(p->arr, j) < 0) {
		p->oom = true;
		return 1;
	}
	p->count++;
	snprintf(p->last, sizeof(p->last), "%s", id);
	return 0;
}

static void page_reply(struct spaced *d, struct evhttp_request *req, void *arg, int rc, const space_err *err)
{
	struct page *p = arg;

	(void)d;
	if (rc < 0) {
		e2b_reply_err(req, err);
		return;
	}
	if (p->oom) {
		e2b_reply_error(req, 500, "out of memory listing");
		return;
	}
	if (p->after && !p->passed) {
		e2b_reply_error(req, 400, "nextToken is not one this server gave");
		return;
	}
	if (p->next[0])
		evhttp_add_header(evhttp_request_get_output_headers(req), "X-Next-Token", p->next);
	http_reply_json(req, 200, json_incref(p->arr));
}

static int page_read(struct store *conn, void *arg, space_err *err)
{
	struct page *p = arg;

	p->st = conn;
	return p->read(conn, p, err);
}

static void page_free(void *arg)
{
	struct page *p = arg;

	strmap_free(&p->filter);
	json_decref(p->arr);
	free(p->after);
	free(p->sandbox_id);
	free(p->name);
	free(p);
}

/* A copy of query parameter key (NULL when absent); false when out of memory. */
static bool query_dup(struct http_req *r, const char *key, char **out)
{
	const char *v = http_query(r, key);

	*out = v ? strdup(v) : NULL;
	return !v || *out;
}

static bool meta_matches(const struct sandbox_rec *sb, const struct strmap *f)
{
	for (size_t i = 0; i < f->n; i++) {
		json_t *v = json_object_get(sb->metadata, f->keys[i]);

		if (!json_is_string(v) || strcmp(json_string_value(v), f->values[i]) != 0)
			return false;
	}
	return true;
}

static int add_sandbox(const struct sandbox_rec *sb, void *arg)
{
	struct page *p = arg;
	enum e2b_state st;

	if (!page_past(p, sb->id))
		return 0;
	st = e2b_state_of(sb->state);
	if (!sandbox_visible(sb) || st == E2B_NONE || !(p->states & (1u << st)) || !meta_matches(sb, &p->filter))
		return 0;
	return page_add(p, sb->id, e2b_sandbox_json(sb, disk_mb(p->st, sb->template_digest)));
}

static struct page *page_new(struct http_req *r, space_err *err)
{
	struct page *p = calloc(1, sizeof(*p));

	if (!p) {
		err_set(err, ENOMEM, "out of memory");
		return NULL;
	}
	if (!query_dup(r, "nextToken", &p->after) || !(p->arr = json_array())) {
		page_free(p);
		err_set(err, ENOMEM, "out of memory");
		return NULL;
	}
	p->passed = !p->after || !p->after[0];
	if (e2b_req_limit(http_query(r, "limit"), &p->limit, err) < 0) {
		page_free(p);
		return NULL;
	}
	return p;
}

static int sandboxes_read(struct store *conn, struct page *p, space_err *err)
{
	/* Every state, deleted ones too: the token may name one deleted since. */
	return store_sandbox_each(conn, (1u << SB__COUNT) - 1, add_sandbox, p, err);
}

void e2b_list(struct http_req *r)
{
	struct evkeyval *kv;
	space_err err = { 0 };
	struct page *p = page_new(r, &err);

	if (!p)
		goto fail;
	/* state=running&state=paused (the SDK's array) or state=running,paused. */
	TAILQ_FOREACH(kv, &r->query, next)
		if (strcmp(kv->key, "state") == 0 && e2b_req_states(kv->value, &p->states, &err) < 0)
			goto fail;
	if (!p->states)
		p->states = E2B_STATE_RUNNING | E2B_STATE_PAUSED;
	if (e2b_req_metadata_filter(http_query(r, "metadata"), &p->filter, &err) < 0)
		goto fail;
	p->read = sandboxes_read;
	api_read(r, page_read, page_reply, page_free, p);
	return;
fail:
	e2b_reply_err(r->req, &err);
	if (p)
		page_free(p);
}

/* GET /sandboxes/{id}: the template's size is read on the store's thread. */
struct get_job {
	struct sandbox_rec sb;
	int64_t mb;
};

static int get_read(struct store *conn, void *arg, space_err *err)
{
	struct get_job *g = arg;

	(void)err;
	g->mb = disk_mb(conn, g->sb.template_digest);
	return 0;
}

static void get_reply(struct spaced *d, struct evhttp_request *req, void *arg, int rc, const space_err *err)
{
	struct get_job *g = arg;
	json_t *o = e2b_sandbox_detail_json(&g->sb, g->mb);

	(void)d;
	(void)rc;
	(void)err;
	if (!o) {
		e2b_reply_error(req, 500, "out of memory");
		return;
	}
	http_reply_json(req, 200, o);
}

static void get_free(void *arg)
{
	struct get_job *g = arg;

	sandbox_rec_clear(&g->sb);
	free(g);
}

void e2b_get(struct http_req *r)
{
	struct get_job *g = calloc(1, sizeof(*g));

	if (!g) {
		e2b_reply_error(r->req, 500, "out of memory");
		return;
	}
	if (e2b_sandbox_param(r, &g->sb) < 0) {
		free(g);
		return;
	}
	api_read(r, get_read, get_reply, get_free, g);
}

/* Reads a small /proc file whole into buf (NUL-terminated); -1 if it cannot. */
static int read_small(const char *path, char *buf, size_t len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	do
		n = read(fd, buf, len - 1);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

/* One sample from the QEMU process (its CPU time and resident memory), or [] when the
 * sandbox has no VM now: never an invented figure. */
void e2b_metrics(struct http_req *r)
{
	struct sandbox_rec sb = { 0 };
	char path[64], stat_buf[4096], up[128];
	json_t *arr = json_array(), *m = NULL;
	int64_t disk_used = -1;
	double uptime;
	struct stat st;

	if (!arr) {
		e2b_reply_error(r->req, 500, "out of memory");
		return;
	}
	if (e2b_sandbox_param(r, &sb) < 0) {
		json_decref(arr);
		return;
	}
	if (sb.disk[0] && stat(sb.disk, &st) == 0)
		disk_used = (int64_t)st.st_blocks * 512;
	snprintf(path, sizeof(path), "/proc/%d/stat", sb.pid);
	if (sb.pid > 0 && sb.state == SB_RUNNING && read_small(path, stat_buf, sizeof(stat_buf)) == 0 &&
	    read_small("/proc/uptime", up, sizeof(up)) == 0 && sscanf(up, "%lf", &uptime) == 1)
		m = e2b_metrics_json(stat_buf, sb.pid_start, uptime, sysconf(_SC_CLK_TCK), sysconf(_SC_PAGESIZE), &sb,
				     disk_used, now_ms());
	if (m)
		json_array_append_new(arr, m);
	http_reply_json(r->req, 200, arr);
	sandbox_rec_clear(&sb);
}

static int add_snapshot(const struct snapshot_rec *s, void *arg)
{
	struct page *p = arg;

	if (!page_past(p, s->id))
		return 0;
	if (s->state != SNAPS_READY || (p->sandbox_id && strcmp(p->sandbox_id, s->sandbox_id) != 0) ||
	    (p->name && strcmp(p->name, s->name) != 0))
		return 0;
	return page_add(p, s->id, e2b_snapshot_json(s));
}

static int snapshots_read(struct store *conn, struct page *p, space_err *err)
{
	return store_snapshot_each(conn, 1u << SNAP_NAMED, add_snapshot, p, err);
}

void e2b_snapshots_list(struct http_req *r)
{
	space_err err = { 0 };
	struct page *p = page_new(r, &err);

	if (!p || !query_dup(r, "sandboxID", &p->sandbox_id) || !query_dup(r, "name", &p->name)) {
		if (p) {
			page_free(p);
			err_set(&err, ENOMEM, "out of memory");
		}
		e2b_reply_err(r->req, &err);
		return;
	}
	p->read = snapshots_read;
	api_read(r, page_read, page_reply, page_free, p);
}

static int add_template(const struct template_rec *t, void *arg)
{
	json_t *j = e2b_template_json(t);

	if (j)
		json_array_append_new(arg, j);
	return 0;
}

static int templates_read(struct store *conn, struct page *p, space_err *err)
{
	return store_template_each(conn, add_template, p->arr, err);
}

void e2b_templates_list(struct http_req *r)
{
	struct page *p = calloc(1, sizeof(*p));

	if (!p || !(p->arr = json_array())) {
		free(p);
		e2b_reply_error(r->req, 500, "out of memory");
		return;
	}
	p->passed = true;
	p->read = templates_read;
	api_read(r, page_read, page_reply, page_free, p);
}
