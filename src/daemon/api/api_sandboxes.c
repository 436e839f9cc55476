/* api_sandboxes.c -- /v1/sandboxes: create, list (filtered), get, delete, console logs */
#include <event2/buffer.h>
#include <fcntl.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api.h"
#include "api/req.h"
#include "cleanup.h"
#include "render.h"
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

json_t *api_sandbox_json(struct spaced *d, const struct sandbox_rec *sb)
{
	int64_t saved = -1;

	if (sb->state == SB_SUSPENDED && sb->snapshot_id[0]) {
		struct snapshot_rec snap;
		space_err err = { 0 };

		if (store_snapshot_get(d->store, sb->snapshot_id, &snap, &err) == 0) {
			saved = snap.bytes;
			snapshot_rec_clear(&snap);
		}
	}
	return sandbox_to_json(sb, saved);
}

void api_reply_accepted(struct http_req *r, const struct sandbox_rec *sb, const struct op_rec *op)
{
	api_reply_stored(r, 202, json_pack("{s:o,s:o}", "sandbox", api_sandbox_json(r->d, sb), "operation",
					   op_to_json(op)));
}

void api_sandboxes_create(struct http_req *r)
{
	struct sandbox_rec sb = { 0 };
	struct op_rec op = { 0 };
	struct create_req req;
	space_err err = { 0 };
	json_t *body = http_body_json(r);

	if (!body)
		return;
	if (req_create(body, &req, &err) < 0) {
		http_reply_err(r->req, &err);
	} else {
		if (sandbox_create(r->d, &req, &sb, &op, &err) < 0)
			http_reply_err(r->req, &err);
		else
			api_reply_accepted(r, &sb, &op);
		create_req_free(&req);
	}
	json_decref(body);
	sandbox_rec_clear(&sb);
	op_rec_clear(&op);
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

struct list_ctx {
	struct spaced *d;
	json_t *arr;
	struct evkeyvalq *query;
	bool oom;
};

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

static int add_sandbox(const struct sandbox_rec *sb, void *arg)
{
	struct list_ctx *c = arg;
	json_t *j;

	if (!sandbox_visible(sb) || !metadata_matches(sb, c->query))
		return 0;
	j = api_sandbox_json(c->d, sb);
	if (!j || json_array_append_new(c->arr, j) < 0)
		c->oom = true;
	return 0;
}

void api_sandboxes_list(struct http_req *r)
{
	struct list_ctx c = { .d = r->d, .query = &r->query };
	space_err err = { 0 };
	unsigned mask;

	if (api_parse_states(http_query(r, "state"), &mask, &err) < 0) {
		http_reply_err(r->req, &err);
		return;
	}
	c.arr = json_array();
	if (!c.arr) {
		http_reply_error(r->req, 500, "internal", "out of memory");
		return;
	}
	if (store_sandbox_each(r->d->store, mask, add_sandbox, &c, &err) < 0) {
		json_decref(c.arr);
		http_reply_err(r->req, &err);
		return;
	}
	if (c.oom) {
		json_decref(c.arr);
		http_reply_error(r->req, 500, "internal", "out of memory listing sandboxes");
		return;
	}
	http_reply_json(r->req, 200, json_pack("{s:o}", "sandboxes", c.arr));
}

void api_sandboxes_get(struct http_req *r)
{
	struct sandbox_rec sb = { 0 };

	if (api_sandbox_param(r, 0, &sb) < 0)
		return;
	http_reply_json(r->req, 200, api_sandbox_json(r->d, &sb));
	sandbox_rec_clear(&sb);
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
