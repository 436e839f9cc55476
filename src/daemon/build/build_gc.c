/* build_gc.c -- the builds' cache kept within --build-cache-max: after each build, the layer
 * snapshots (".layer-<key>") are listed on the store's thread, and the oldest deleted until the
 * rest fit, never one a build still running started from or made. A deleted layer's files go
 * (a VM cloned from it keeps its disk chain and memory pages: snapshots.c); a later build of
 * that step runs it again. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "build_int.h"
#include "log.h"
#include "store/store.h"

#define GC_KEEP_MAX 64 /* layers of running builds kept whatever their age */

struct gc_layer {
	char id[ID_LEN];
	char dir[PATH_MAX];
	int64_t bytes, created_ms;
};

struct gc_job {
	int64_t cap;
	char keep[GC_KEEP_MAX][ID_LEN];
	size_t nkeep;
	struct gc_layer *layers;
	size_t n, cap_n;
	char (*gone)[PATH_MAX]; /* the dirs deleted, for the loop's image cache */
	size_t ngone;
	int64_t freed;
};

static int collect(const struct snapshot_rec *s, void *arg)
{
	struct gc_job *j = arg;

	if (strncmp(s->name, ".layer-", 7) != 0 || s->state != SNAPS_READY)
		return 0;
	if (j->n == j->cap_n) {
		size_t c = j->cap_n ? j->cap_n * 2 : 64;
		struct gc_layer *nl = realloc(j->layers, c * sizeof(*nl));

		if (!nl)
			return 1;
		j->layers = nl;
		j->cap_n = c;
	}
	struct gc_layer *l = &j->layers[j->n++];
	snprintf(l->id, sizeof(l->id), "%s", s->id);
	snprintf(l->dir, sizeof(l->dir), "%s", s->dir);
	l->bytes = s->bytes;
	l->created_ms = s->created_ms;
	return 0;
}

static int oldest_first(const void *a, const void *b)
{
	const struct gc_layer *x = a, *y = b;

	return x->created_ms < y->created_ms ? -1 : x->created_ms > y->created_ms;
}

static bool kept(const struct gc_job *j, const char *id)
{
	for (size_t i = 0; i < j->nkeep; i++)
		if (strcmp(j->keep[i], id) == 0)
			return true;
	return false;
}

static void gc_read(struct store *conn, void *arg)
{
	struct gc_job *j = arg;
	int64_t total = 0;
	space_err err = { 0 };

	if (store_snapshot_each(conn, 1u << SNAP_NAMED, collect, j, &err) < 0) {
		log_warn("build cache: listing its layers: %s", err.msg);
		return;
	}
	for (size_t i = 0; i < j->n; i++)
		total += j->layers[i].bytes;
	if (total <= j->cap || !(j->gone = calloc(j->n, sizeof(*j->gone))))
		return;
	qsort(j->layers, j->n, sizeof(*j->layers), oldest_first);
	for (size_t i = 0; i < j->n && total > j->cap; i++) {
		struct gc_layer *l = &j->layers[i];

		if (kept(j, l->id))
			continue;
		err_clear(&err);
		if (snapshot_delete_on(conn, l->id, j->gone[j->ngone], &err) < 0) {
			log_warn("build cache: deleting layer %s: %s", l->id, err.msg);
			continue;
		}
		j->ngone++;
		total -= l->bytes;
		j->freed += l->bytes;
	}
}

static void gc_done(void *arg, bool ran)
{
	struct gc_job *j = arg;

	for (size_t i = 0; ran && i < j->ngone; i++)
		snapshot_forget_image(j->gone[i]);
	if (ran && j->ngone)
		log_info("build cache: %zu layer%s deleted (%lld MiB), the oldest past --build-cache-max", j->ngone,
			 j->ngone == 1 ? "" : "s", (long long)(j->freed >> 20));
	free(j->gone);
	free(j->layers);
	free(j);
}

void builds_gc(struct spaced *d)
{
	struct gc_job *j = calloc(1, sizeof(*j));
	space_err err = { 0 };

	if (!j)
		return;
	j->cap = (int64_t)d->cfg.build_cache_max_mib << 20;
	for (struct build *b = d->builds; b && j->nkeep < GC_KEEP_MAX; b = b->next)
		if (!build_ended(b) && b->layer_id[0])
			snprintf(j->keep[j->nkeep++], ID_LEN, "%s", b->layer_id);
	if (store_async(d->store, gc_read, gc_done, j, &err) < 0) {
		log_warn("build cache: %s", err.msg);
		free(j);
	}
}
