/* api_snapshots.c -- GET /v1/snapshots, GET and DELETE /v1/snapshots/{id or name} */
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "front/render.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

/* Lists and gets are read and rendered on the store's thread (api_read_json). */
static int add_snapshot(const struct snapshot_rec *s, void *arg)
{
	json_t *j;

	/* Fork and suspend snapshots and template builds' layers are the daemon's own business;
	 * ready ones are listed so a client can see what creates clone. */
	if (!snapshot_visible(s))
		return 0;
	j = snapshot_to_json(s);
	return j ? json_array_append_new(arg, j) : -1;
}

static json_t *list_read(struct store *conn, void *arg, space_err *err)
{
	json_t *arr = json_array();

	(void)arg;
	if (!arr)
		return NULL;
	if (store_snapshot_each(conn, 0, add_snapshot, arr, err) < 0) {
		json_decref(arr);
		if (!err->code)
			err_set(err, ENOMEM, "out of memory listing snapshots");
		return NULL;
	}
	return json_pack("{s:o}", "snapshots", arr);
}

void api_snapshots_list(struct http_req *r)
{
	api_read_json(r, list_read, NULL, NULL);
}

static json_t *get_read(struct store *conn, void *arg, space_err *err)
{
	struct snapshot_rec snap;
	json_t *j;

	if (snapshot_lookup(conn, arg, &snap, err) < 0)
		return NULL;
	j = snapshot_to_json(&snap);
	snapshot_rec_clear(&snap);
	return j;
}

void api_snapshots_get(struct http_req *r)
{
	char *ref = strdup(r->param[0]);

	if (!ref) {
		http_reply_error(r->req, 500, "internal", "out of memory");
		return;
	}
	api_read_json(r, get_read, free, ref);
}

/* A DELETE decides, removes the files and the row on the store's thread; the loop replies
 * and forgets the sealed memory copy. */
struct del_job {
	char ref[256];
	char dir[PATH_MAX];
};

static int del_read(struct store *conn, void *arg, space_err *err)
{
	struct del_job *j = arg;

	return snapshot_delete_on(conn, j->ref, j->dir, err);
}

/* Whether the client waited or not: a sealed copy can hold gigabytes. */
static void del_release(void *arg)
{
	struct del_job *j = arg;

	snapshot_forget_image(j->dir);
	free(j);
}

void api_snapshots_delete(struct http_req *r)
{
	struct del_job *j = calloc(1, sizeof(*j));

	if (!j) {
		http_reply_error(r->req, 500, "internal", "out of memory");
		return;
	}
	snprintf(j->ref, sizeof(j->ref), "%s", r->param[0]);
	api_read(r, del_read, api_reply_no_content, del_release, j);
}
