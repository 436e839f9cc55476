/* build_promote.c -- a running sandbox made a template (POST /v1/sandboxes/{id}/template): its
 * memory and disk taken as a hidden named snapshot by the sandbox's own snapshot action (the
 * sandbox shows it as any snapshot, and runs on), then that snapshot's disk made a template
 * exactly as a build's last layer is (build_result.c), with its template's defaults; the
 * snapshot is deleted once the template is imported. The work is a build: it is listed, has an
 * event log and an operation of kind build. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build_int.h"
#include "log.h"
#include "sandbox/icmd.h"

#define SYNC_TIMEOUT_MS (60 * 1000)

static void on_snapshot(struct spaced *d, const struct op_rec *op, void *arg)
{
	struct build *b = arg;
	const char *snap = json_string_value(json_object_get(op->result, "snapshot_id"));

	(void)d;
	b->waiter = NULL;
	if (op->state != OP_SUCCEEDED || !snap) {
		build_fail(b, "the snapshot of the sandbox: %s", op->error[0] ? op->error : "it did not finish");
		return;
	}
	snprintf(b->promote_snap, sizeof(b->promote_snap), "%s", snap);
	snprintf(b->layer_id, sizeof(b->layer_id), "%s", snap);
	build_result_start(b, snap);
}

static const char *const sync_argv[] = { "/bin/sh", "-c", "sync", NULL };

static void on_synced(void *arg, int code, const char *error, const char *out)
{
	struct build *b = arg;
	char name[80], snap_op[ID_LEN];
	space_err err = { 0 };

	(void)out;
	b->cmd = NULL;
	if (code != 0) {
		build_fail(b, "sync in the sandbox: %s", error ? error : "it failed");
		return;
	}
	snprintf(name, sizeof(name), ".promote-%s", b->id);
	/* The sandbox's own snapshot action: refused as any would be in its state. */
	if (build_vm_snapshot_of(b->d, b->sb_promote, name, snap_op, &err) < 0) {
		build_fail(b, "the snapshot of the sandbox: %s", err.msg);
		return;
	}
	if (op_wait(b->d, snap_op, 3600, on_snapshot, b, &b->waiter, &err) < 0)
		build_fail(b, "waiting for the sandbox's snapshot: %s", err.msg);
}

/* The recipe a promote is: a name, its tags, the sandbox's template; no steps. */
static json_t *promote_recipe(const json_t *body, const char *digest, bool *memory, space_err *err)
{
	const char *name = NULL;
	json_t *tags = NULL;
	int mem = 0;
	json_error_t jerr;

	if (!json_is_object(body) || json_unpack_ex((json_t *)body, &jerr, JSON_STRICT, "{s:s,s?o,s?b}", "name", &name,
						    "tags", &tags, "memory", &mem) < 0) {
		err_set(err, EINVAL, "%s", json_is_object(body) ? jerr.text : "a JSON object {name, tags?, memory?}");
		return NULL;
	}
	*memory = mem;
	return tags ? json_pack("{s:s,s:O,s:s}", "name", name, "tags", tags, "from", digest)
		    : json_pack("{s:s,s:s}", "name", name, "from", digest);
}

int build_promote(struct spaced *d, const char *sb_id, const json_t *body, json_t **out, char op_id[ID_LEN],
		  space_err *err)
{
	struct template_rec tmpl = { 0 };
	struct build_plan *p;
	struct build *b;
	json_t *recipe;
	bool memory = false;
	if (build_vm_template_of(d, sb_id, &tmpl, err) < 0)
		return -1;
	recipe = promote_recipe(body, tmpl.digest, &memory, err);
	if (!recipe || memory) {
		template_rec_clear(&tmpl);
		if (!recipe)
			return -1;
		json_decref(recipe);
		return err_set(err, EINVAL, "memory: a promoted template's ready snapshot from the sandbox's memory is "
					     "not supported yet; its disk is (memory: false)");
	}
	p = build_plan_new(d, recipe, err);
	json_decref(recipe);
	if (!p) {
		template_rec_clear(&tmpl);
		return -1;
	}
	p->base = tmpl;
	snprintf(p->final_key, sizeof(p->final_key), "%s", p->base.digest + 7);
	b = build_alloc(p, err);
	build_plan_free(p);
	if (!b)
		return -1;
	if (build_register(b, err) < 0) {
		build_free(b);
		return -1;
	}
	snprintf(b->sb_promote, sizeof(b->sb_promote), "%s", sb_id);
	log_info("build %s: template %s from sandbox %s", b->id, b->rc.name, sb_id);
	/* What the guest wrote and holds in its page cache reaches the disk first. */
	if (!(b->cmd = icmd_start(d, sb_id, &(struct icmd_spec){ .kind = SESS_KIND_PROCESS, .argv = sync_argv,
								  .user = "root", .timeout_ms = SYNC_TIMEOUT_MS,
								  .done = on_synced, .arg = b }, err)))
		build_fail(b, "sync in the sandbox: %s", err->msg);
	build_save(b);
	snprintf(op_id, ID_LEN, "%s", b->op.id);
	*out = build_json(b);
	return 0;
}
