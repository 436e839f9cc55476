/* build.c -- a template build from its plan to its result: the base and the cached layers
 * looked up (build_plan_read, on the store's thread), the builder VM started from the newest
 * layer found, then each step after it in order: env and user change only what later commands
 * run with, workdir makes its directory, run runs its command, copy sends the context's files;
 * after a run or a copy (and after the last step) the VM's disk and memory are kept as the
 * layer of that step's key. Then build_result.c makes the last layer a template. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build/context.h"
#include "build_int.h"
#include "egress/policy.h"
#include "log.h"
#include "store/store.h"

static const char *const build_states[] = { "pending", "running", "succeeded", "failed" };
static const char *const bstep_states[] = { "pending", "running", "done", "failed" };

const char *build_state_name(enum build_state s)
{
	return (unsigned)s < 4 ? build_states[s] : "unknown";
}

const char *bstep_state_name(enum bstep_state s)
{
	return (unsigned)s < 4 ? bstep_states[s] : "unknown";
}

static void contexts_dir(const struct spaced *d, char out[PATH_MAX])
{
	snprintf(out, PATH_MAX, "%s/contexts", d->cfg.state_dir);
}

/* ---- the plan ---- */

struct build_plan *build_plan_new(struct spaced *d, const json_t *body, space_err *err)
{
	struct build_plan *p = calloc(1, sizeof(*p));

	if (!p) {
		err_set(err, ENOMEM, "out of memory");
		return NULL;
	}
	p->d = d;
	p->body = json_incref((json_t *)body);
	p->cached_upto = -1;
	p->net = sandbox_net(d);
	if (recipe_parse(body, &p->rc, err) < 0) {
		build_plan_free(p);
		return NULL;
	}
	if (p->rc.from_image[0]) {
		err_set(err, EINVAL, "from.image: builds from image archives are not supported yet; use a template");
		build_plan_free(p);
		return NULL;
	}
	if (p->rc.nsteps && !(p->keys = calloc(p->rc.nsteps, sizeof(*p->keys)))) {
		err_set(err, ENOMEM, "out of memory");
		build_plan_free(p);
		return NULL;
	}
	return p;
}

void build_plan_free(struct build_plan *p)
{
	if (!p)
		return;
	recipe_free(&p->rc);
	json_decref(p->body);
	template_rec_clear(&p->base);
	template_rec_clear(&p->made);
	free(p->keys);
	create_reads_clear(&p->pre);
	create_req_free(&p->req);
	free(p);
}

static int plan_keys(struct build_plan *p, space_err *err)
{
	char ctx[PATH_MAX];
	const char *parent = p->base.digest + 7;

	contexts_dir(p->d, ctx);
	if (p->rc.context[0] && context_exists(ctx, p->rc.context, err) < 0)
		return err_wrap(err, "context %s", p->rc.context);
	for (size_t i = 0; i < p->rc.nsteps; i++) {
		const struct recipe_step *s = &p->rc.steps[i];
		char inputs[65] = "";

		if (s->kind == STEP_COPY && context_inputs(ctx, p->rc.context, s->src, inputs, err) < 0)
			return err_wrap(err, "steps[%zu].copy.src", i);
		recipe_step_key(parent, s, inputs, p->keys[i]);
		parent = p->keys[i];
	}
	snprintf(p->final_key, sizeof(p->final_key), "%s", parent);
	return 0;
}

/* The newest layer on record among the steps' (a run's, a copy's, the last step's). */
static void plan_layers(struct store *conn, struct build_plan *p)
{
	for (size_t i = p->rc.nsteps; i-- > 0;) {
		struct snapshot_rec snap = { 0 };
		char name[80];
		space_err e = { 0 };

		if (!recipe_step_has_layer(&p->rc.steps[i]) && i != p->rc.nsteps - 1)
			continue;
		snprintf(name, sizeof(name), ".layer-%s", p->keys[i]);
		if (store_snapshot_get_by_name(conn, name, &snap, &e) == 0 && snap.state == SNAPS_READY &&
		    strcmp(snap.template_digest, p->base.digest) == 0) {
			p->cached_upto = (long)i + 1;
			snprintf(p->layer_id, sizeof(p->layer_id), "%s", snap.id);
			snapshot_rec_clear(&snap);
			return;
		}
		snapshot_rec_clear(&snap);
	}
}

struct made_find {
	const char *key;
	struct template_rec *out;
};

static int find_made(const struct template_rec *t, void *arg)
{
	struct made_find *f = arg;
	const char *k = json_string_value(json_object_get(t->config, "build_key"));
	char path[PATH_MAX + 16];

	snprintf(path, sizeof(path), "%s/rootfs.ext4", t->dir);
	if (!k || strcmp(k, f->key) != 0 || access(path, R_OK) != 0)
		return 0;
	template_rec_copy(f->out, t);
	return 1;
}

/* Every step cached: a template an equal build made before (its build_key) is the result. */
static void plan_made(struct store *conn, struct build_plan *p)
{
	space_err e = { 0 };
	json_t *cfg = build_template_config(&p->rc, &p->base, p->final_key, &e);
	struct made_find f = { json_string_value(json_object_get(cfg, "build_key")), &p->made };

	if (f.key && store_template_named(conn, p->rc.name, find_made, &f, &e) < 0)
		log_warn("build of %s: looking for the template made before: %s", p->rc.name, e.msg);
	json_decref(cfg);
}

int build_plan_read(struct store *conn, struct build_plan *p, space_err *err)
{
	if (store_template_resolve(conn, p->rc.from_ref, &p->base, err) < 0)
		return err_wrap(err, "from: template %s", p->rc.from_ref);
	if (plan_keys(p, err) < 0)
		return -1;
	plan_layers(conn, p);
	p->disk_bytes = p->base.image_bytes;
	if (p->rc.disk_mib && (int64_t)p->rc.disk_mib << 20 < p->disk_bytes)
		return err_set(err, EINVAL, "disk_mib: %d MiB is below the base's image (%lld MiB)", p->rc.disk_mib,
			       (long long)(p->disk_bytes >> 20));
	if (p->cached_upto == (long)p->rc.nsteps && p->rc.nsteps) {
		plan_made(conn, p);
		return 0; /* every step cached: no VM, the last layer (or a template made) is the result */
	}
	memset(&p->req, 0, sizeof(p->req));
	if (p->cached_upto > 0) {
		snprintf(p->req.snapshot, sizeof(p->req.snapshot), "%s", p->layer_id);
	} else {
		snprintf(p->req.template_ref, sizeof(p->req.template_ref), "%s", p->base.digest);
		p->req.vcpus = p->rc.vcpus;
		p->req.memory_mib = p->rc.memory_mib;
	}
	p->req.timeout_set = true;
	p->req.timeout_s = 0;
	return create_read(conn, p->net, &p->req, &p->pre, err);
}

/* ---- the build's state ---- */

struct build *build_alloc(struct build_plan *p, space_err *err)
{
	struct build *b = calloc(1, sizeof(*b));

	if (!b || !(b->steps = calloc(p->rc.nsteps ? p->rc.nsteps : 1, sizeof(*b->steps)))) {
		free(b);
		err_set(err, ENOMEM, "out of memory");
		return NULL;
	}
	b->d = p->d;
	b->logfd = -1;
	id_new(b->id, "bd-");
	snprintf(b->dir, sizeof(b->dir), "%s/builds/%s", p->d->cfg.state_dir, b->id);
	b->created_ms = now_ms();
	b->rc = p->rc;
	memset(&p->rc, 0, sizeof(p->rc));
	b->base = p->base;
	memset(&p->base, 0, sizeof(p->base));
	snprintf(b->final_key, sizeof(b->final_key), "%s", p->final_key);
	for (size_t i = 0; i < b->rc.nsteps; i++) {
		snprintf(b->steps[i].key, sizeof(b->steps[i].key), "%s", p->keys[i]);
		if ((long)i < p->cached_upto) {
			b->steps[i].state = BSTEP_DONE;
			b->steps[i].cached = true;
		}
	}
	b->cur = p->cached_upto > 0 ? (size_t)p->cached_upto : 0;
	if (p->cached_upto > 0) {
		snprintf(b->layer_id, sizeof(b->layer_id), "%s", p->layer_id);
		snprintf(b->layer_key, sizeof(b->layer_key), "%s", p->keys[p->cached_upto - 1]);
	}
	return b;
}

static void step_event(struct build *b, size_t i)
{
	const struct bstep *s = &b->steps[i];

	build_log_add(b, "step", json_pack("{s:I,s:s,s:s,s:s,s:b,s:I}", "index", (json_int_t)i, "kind",
					   step_kind_name(b->rc.steps[i].kind), "text", b->rc.steps[i].text, "state",
					   bstep_state_name(s->state), "cached", s->cached, "duration_ms",
					   (json_int_t)s->duration_ms));
}

void build_step_state(struct build *b, size_t i, enum bstep_state st)
{
	struct bstep *s = &b->steps[i];

	if (st == BSTEP_RUNNING)
		s->started_ms = now_ms();
	else if (s->started_ms)
		s->duration_ms = now_ms() - s->started_ms;
	s->state = st;
	step_event(b, i);
	build_save(b);
}

static void end_vm(struct build *b, const char *why)
{
	if (b->sb_id[0])
		build_vm_end(b->d, b->sb_id, why);
	b->sb_id[0] = '\0';
}

static void build_end(struct build *b, enum build_state st)
{
	build_exec_cancel(b);
	end_vm(b, st == BUILD_SUCCEEDED ? "its template build is done" : "its template build failed");
	b->state = st;
	b->finished_ms = now_ms();
	build_log_add(b, "end", json_pack("{s:s,s:s?,s:s?}", "state", build_state_name(st), "digest",
					  b->digest[0] ? b->digest : NULL, "error", b->error[0] ? b->error : NULL));
	build_save(b);
	if (b->op.id[0] && !op_state_done(b->op.state)) {
		json_decref(b->op.result);
		b->op.result = json_pack("{s:s,s:s?}", "build", b->id, "digest", b->digest[0] ? b->digest : NULL);
		op_finish(b->d, &b->op, st == BUILD_SUCCEEDED ? NULL : b->error);
	}
	log_info("build %s (%s): %s%s%s", b->id, b->rc.name, build_state_name(st), b->error[0] ? ": " : " ",
		 b->error[0] ? b->error : b->digest);
	builds_gc(b->d);
}

void build_fail(struct build *b, const char *fmt, ...)
{
	va_list ap;

	if (build_ended(b) && b->finished_ms)
		return;
	va_start(ap, fmt);
	vsnprintf(b->error, sizeof(b->error), fmt, ap);
	va_end(ap);
	if (b->cur < b->rc.nsteps && b->steps[b->cur].state == BSTEP_RUNNING)
		build_step_state(b, b->cur, BSTEP_FAILED);
	build_end(b, BUILD_FAILED);
}

void build_succeeded(struct build *b, const char *digest)
{
	snprintf(b->digest, sizeof(b->digest), "%s", digest);
	build_end(b, BUILD_SUCCEEDED);
}

bool build_ended(const struct build *b)
{
	return b->state == BUILD_SUCCEEDED || b->state == BUILD_FAILED;
}

/* ---- the steps ---- */

static void advance(struct build *b);

static int state_here(struct build *b, size_t upto, struct recipe_state *st)
{
	space_err e = { 0 };

	/* Steps run as root until a user step (the template's own default user is for its
	 * sandboxes' commands, not for building it). */
	const char *bwd = json_string_value(json_object_get(b->base.config, "workdir"));

	if (recipe_state_at(&b->rc, upto, b->base.env, bwd ? bwd : "/", "root", st, &e) < 0) {
		build_fail(b, "step %zu: %s", upto + 1, e.msg);
		return -1;
	}
	return 0;
}

static void on_layer(struct spaced *d, const char *snap_id, const char *error, void *arg)
{
	struct build *b = arg;

	(void)d;
	if (error) {
		build_fail(b, "keeping step %zu's result: %s", b->cur + 1, error);
		return;
	}
	snprintf(b->layer_id, sizeof(b->layer_id), "%s", snap_id);
	snprintf(b->layer_key, sizeof(b->layer_key), "%s", b->cur < b->rc.nsteps ? b->steps[b->cur].key : b->final_key);
	if (b->cur < b->rc.nsteps) {
		build_step_state(b, b->cur, BSTEP_DONE);
		b->cur++;
	}
	advance(b);
}

static void on_synced(struct build *b, int code, const char *error, const char *out)
{
	char name[80];
	space_err e = { 0 };

	(void)out;
	if (code != 0) {
		build_fail(b, "step %zu: sync in the builder: %s", b->cur + 1, error ? error : "failed");
		return;
	}
	snprintf(name, sizeof(name), ".layer-%s", b->cur < b->rc.nsteps ? b->steps[b->cur].key : b->final_key);
	if (build_vm_layer(b->d, b->sb_id, name, &e) < 0)
		build_fail(b, "keeping step %zu's result: %s", b->cur + 1, e.msg);
}

/* What the step wrote reaches the disk, then the VM is kept as the step's layer. */
static void take_layer(struct build *b)
{
	static const char *const argv[] = { "/bin/sh", "-c", "sync", NULL };
	space_err e = { 0 };

	if (build_exec(b, SESS_KIND_PROCESS, argv, "root", NULL, "/", NULL, false, on_synced, &e) < 0)
		build_fail(b, "step %zu: %s", b->cur + 1, e.msg);
}

static void on_run(struct build *b, int code, const char *error, const char *out)
{
	(void)out;
	if (code < 0) {
		build_fail(b, "step %zu (%s): %s", b->cur + 1, b->rc.steps[b->cur].text, error);
		return;
	}
	if (code != 0) {
		build_fail(b, "step %zu (%s) exited with code %d", b->cur + 1, b->rc.steps[b->cur].text, code);
		return;
	}
	take_layer(b);
}

static void run_step(struct build *b, const struct recipe_step *s)
{
	const char *argv[SPEC_ARGV_MAX + 1];
	struct recipe_state st;
	space_err e = { 0 };
	size_t n = 0;

	if (state_here(b, b->cur, &st) < 0)
		return;
	if (s->shell) {
		argv[n++] = "/bin/sh";
		argv[n++] = "-c";
		argv[n++] = s->shell;
	} else {
		for (size_t i = 0; i < json_array_size(s->argv) && n < SPEC_ARGV_MAX; i++)
			argv[n++] = json_string_value(json_array_get(s->argv, i));
	}
	argv[n] = NULL;
	if (build_exec(b, SESS_KIND_PROCESS, argv, st.user, st.env, st.workdir, NULL, true, on_run, &e) < 0)
		build_fail(b, "step %zu (%s): %s", b->cur + 1, s->text, e.msg);
	recipe_state_free(&st);
}

static void on_mkdir_done(struct build *b, int code, const char *error, const char *out)
{
	if (code != 0) {
		build_fail(b, "step %zu (%s): making the directory: %s", b->cur + 1, b->rc.steps[b->cur].text,
			   error ? error : out[0] ? out : "failed");
		return;
	}
	build_step_state(b, b->cur, BSTEP_DONE);
	b->cur++;
	advance(b);
}

/* WORKDIR makes its directory (root's, as Docker's); the next layer keeps it. */
static void workdir_step(struct build *b)
{
	struct recipe_state st;
	space_err e = { 0 };

	if (state_here(b, b->cur + 1, &st) < 0)
		return;
	const char *argv[] = { "mkdir", st.workdir, "-", "-p", NULL };
	if (build_exec(b, SESS_KIND_FILE, argv, "root", NULL, NULL, NULL, false, on_mkdir_done, &e) < 0)
		build_fail(b, "step %zu (%s): %s", b->cur + 1, b->rc.steps[b->cur].text, e.msg);
	recipe_state_free(&st);
}

/* ---- copy: the owner's ids (named ones looked up in the guest), the files, the layer ---- */

static void copy_send(struct build *b);

static bool parse_id(const char *s, size_t n, long *out)
{
	long v = 0;

	if (!n || n > 10)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (s[i] - '0');
	}
	if (v > 0x7fffffffL)
		return false;
	*out = v;
	return true;
}

/* "uid:gid" both numbers (a lone number: gid = uid, as Docker's --chown): 1; else 0. */
static int chown_numeric(const char *chown, long *uid, long *gid)
{
	const char *colon = strchr(chown, ':');
	size_t ulen = colon ? (size_t)(colon - chown) : strlen(chown);

	if (!parse_id(chown, ulen, uid))
		return 0;
	if (!colon) {
		*gid = *uid;
		return 1;
	}
	return parse_id(colon + 1, strlen(colon + 1), gid) ? 1 : 0;
}

static void on_ids(struct build *b, int code, const char *error, const char *out)
{
	const char *colon = strchr(out, ':'), *nl = colon ? strchr(colon, '\n') : NULL;

	/* The guest's answer is untrusted: two numbers or nothing. */
	if (code != 0 || !colon || !nl || !parse_id(out, (size_t)(colon - out), &b->copy_uid) ||
	    !parse_id(colon + 1, (size_t)(nl - colon - 1), &b->copy_gid)) {
		build_fail(b, "step %zu (%s): --chown=%s names no user or group in the image%s%s", b->cur + 1,
			   b->rc.steps[b->cur].text, b->rc.steps[b->cur].chown, error ? ": " : "", error ? error : "");
		return;
	}
	copy_send(b);
}

/* Looks the names up in the image's /etc/passwd and /etc/group with the shell alone. */
static const char ids_script[] =
	"u=$1 g=$2; uid= gid=\n"
	"case $u in *[!0-9]*) while IFS=: read -r n x i gi r; do [ \"$n\" = \"$u\" ] && { uid=$i; [ -n \"$g\" ] || gid=$gi; }; done </etc/passwd;; *) uid=$u;; esac\n"
	"[ -n \"$g\" ] || [ -n \"$gid\" ] || gid=$uid\n"
	"case $g in '') ;; *[!0-9]*) while IFS=: read -r n x i r; do [ \"$n\" = \"$g\" ] && gid=$i; done </etc/group;; *) gid=$g;; esac\n"
	"[ -n \"$uid\" ] && [ -n \"$gid\" ] && echo \"$uid:$gid\"\n";

static void copy_step(struct build *b, const struct recipe_step *s)
{
	char user[72], *group;
	space_err e = { 0 };

	b->copy_uid = b->copy_gid = -1;
	if (!s->chown[0] || chown_numeric(s->chown, &b->copy_uid, &b->copy_gid)) {
		copy_send(b);
		return;
	}
	snprintf(user, sizeof(user), "%s", s->chown);
	group = strchr(user, ':');
	if (group)
		*group++ = '\0';
	const char *argv[] = { "/bin/sh", "-c", ids_script, "sh", user, group ? group : "", NULL };
	if (build_exec(b, SESS_KIND_PROCESS, argv, "root", NULL, "/", NULL, false, on_ids, &e) < 0)
		build_fail(b, "step %zu (%s): %s", b->cur + 1, s->text, e.msg);
}

static void on_tar_in(struct build *b, int code, const char *error, const char *out)
{
	unlink(b->copy_tar);
	if (code != 0) {
		build_fail(b, "step %zu (%s): placing the files: %s", b->cur + 1, b->rc.steps[b->cur].text,
			   error ? error : out[0] ? out : "failed");
		return;
	}
	take_layer(b);
}

static void on_copy_dir(struct build *b, int code, const char *error, const char *out)
{
	const char *argv[3] = { "tar-in", NULL, NULL };
	char dir[1024];
	space_err e = { 0 };

	if (code != 0) {
		unlink(b->copy_tar);
		build_fail(b, "step %zu (%s): making the destination: %s", b->cur + 1, b->rc.steps[b->cur].text,
			   error ? error : out[0] ? out : "failed");
		return;
	}
	snprintf(dir, sizeof(dir), "%s", b->out_dir);
	argv[1] = dir;
	if (build_exec(b, SESS_KIND_FILE, argv, "root", NULL, NULL, b->copy_tar, false, on_tar_in, &e) < 0) {
		unlink(b->copy_tar);
		build_fail(b, "step %zu (%s): %s", b->cur + 1, b->rc.steps[b->cur].text, e.msg);
	}
}

static void copy_send(struct build *b)
{
	const struct recipe_step *s = &b->rc.steps[b->cur];
	char ctx[PATH_MAX], dest[RECIPE_PATH_MAX];
	struct context_pick pick = { 0 };
	struct recipe_state st;
	space_err e = { 0 };

	if (state_here(b, b->cur, &st) < 0)
		return;
	if (recipe_resolve_dest(s->dest, st.workdir, dest, &e) < 0) {
		recipe_state_free(&st);
		build_fail(b, "step %zu (%s): %s", b->cur + 1, s->text, e.msg);
		return;
	}
	recipe_state_free(&st);
	contexts_dir(b->d, ctx);
	snprintf(b->copy_tar, sizeof(b->copy_tar), "%s/copy-%zu.tar", b->dir, b->cur);
	if (context_pick(ctx, b->rc.context, s->src, dest, b->copy_uid, b->copy_gid, b->copy_tar, &pick, &e) < 0) {
		unlink(b->copy_tar);
		build_fail(b, "step %zu (%s): %s", b->cur + 1, s->text, e.msg);
		return;
	}
	snprintf(b->out_dir, sizeof(b->out_dir), "%s", pick.dir);
	const char *argv[] = { "mkdir", b->out_dir, "-", "-p", NULL };
	if (build_exec(b, SESS_KIND_FILE, argv, "root", NULL, NULL, NULL, false, on_copy_dir, &e) < 0) {
		unlink(b->copy_tar);
		build_fail(b, "step %zu (%s): %s", b->cur + 1, s->text, e.msg);
	}
}

static void advance(struct build *b)
{
	while (b->cur < b->rc.nsteps) {
		const struct recipe_step *s = &b->rc.steps[b->cur];

		if (b->steps[b->cur].state == BSTEP_DONE) {
			b->cur++;
			continue;
		}
		/* env and user write nothing: after cached steps they are cached too. */
		if ((s->kind == STEP_ENV || s->kind == STEP_USER) && b->cur > 0 && b->steps[b->cur - 1].cached) {
			b->steps[b->cur].cached = true;
			build_step_state(b, b->cur, BSTEP_DONE);
			b->cur++;
			continue;
		}
		build_step_state(b, b->cur, BSTEP_RUNNING);
		switch (s->kind) {
		case STEP_RUN:
			run_step(b, s);
			return;
		case STEP_COPY:
			copy_step(b, s);
			return;
		case STEP_WORKDIR:
			workdir_step(b);
			return;
		default: /* env, user: what later commands run with */
			build_step_state(b, b->cur, BSTEP_DONE);
			b->cur++;
		}
	}
	if (strcmp(b->layer_key, b->final_key) != 0) {
		take_layer(b);
		return;
	}
	end_vm(b, "its template build's steps are done");
	build_result_start(b, b->layer_id);
}

static void on_up(struct spaced *d, const char *sb_id, const char *error, void *arg)
{
	struct build *b = arg;

	(void)d;
	(void)sb_id;
	if (error) {
		build_fail(b, "starting the builder: %s", error);
		return;
	}
	advance(b);
}

/* ---- start, find, render ---- */

int build_register(struct build *b, space_err *err)
{
	if (build_log_open(b, true, err) < 0 || op_begin(b->d, OPK_BUILD, "", NULL, &b->op, err) < 0)
		return -1;
	b->next = b->d->builds;
	b->d->builds = b;
	b->state = BUILD_RUNNING;
	op_running(b->d, &b->op);
	return 0;
}

int build_start(struct build_plan *p, json_t **out, char op_id[ID_LEN], space_err *err)
{
	struct spaced *d = p->d;
	json_t *network = NULL;
	struct build *b;

	if (p->rc.network) {
		struct egress_policy *pol = NULL;

		if (egress_policy_parse(p->rc.network, false, &pol, err) < 0)
			return err_wrap(err, "network");
		network = egress_policy_json(pol, false);
		egress_policy_free(pol);
	} else {
		network = json_object(); /* deny all */
	}
	if (!(b = build_alloc(p, err))) {
		json_decref(network);
		return -1;
	}
	b->request = json_incref(p->body);
	if (build_register(b, err) < 0) {
		json_decref(network);
		build_free(b);
		return -1;
	}
	for (size_t i = 0; i < b->rc.nsteps && b->steps[i].cached; i++)
		step_event(b, i);
	if (p->made.digest[0]) {
		build_save(b);
		build_result_reuse(b, &p->made);
	} else if (p->cached_upto == (long)b->rc.nsteps && b->rc.nsteps) {
		build_save(b);
		build_result_start(b, b->layer_id);
	} else if (build_vm_start(d, &p->req, &p->pre, network, on_up, on_layer, b, b->sb_id, err) < 0) {
		build_fail(b, "starting the builder: %s", err->msg);
	} else {
		build_save(b);
	}
	json_decref(network);
	snprintf(op_id, ID_LEN, "%s", b->op.id);
	*out = build_json(b);
	return 0;
}

struct build *build_find(struct spaced *d, const char *id)
{
	for (struct build *b = d->builds; b; b = b->next)
		if (strcmp(b->id, id) == 0)
			return b;
	return NULL;
}

json_t *build_json(const struct build *b)
{
	char created[32], finished[32];
	json_t *steps = json_array();

	fmt_time(created, b->created_ms);
	fmt_time(finished, b->finished_ms);
	for (size_t i = 0; steps && i < b->rc.nsteps; i++) {
		const struct bstep *s = &b->steps[i];

		json_array_append_new(steps, json_pack("{s:I,s:s,s:s,s:s,s:b,s:I}", "index", (json_int_t)i, "kind",
						       step_kind_name(b->rc.steps[i].kind), "text", b->rc.steps[i].text,
						       "state", bstep_state_name(s->state), "cached", s->cached,
						       "duration_ms", (json_int_t)s->duration_ms));
	}
	return json_pack("{s:s,s:s,s:O,s:s,s:s?,s:s?,s:s,s:s?,s:o,s:s,s:s?}", "id", b->id, "name", b->rc.name, "tags",
			 b->rc.tags, "state", build_state_name(b->state), "error", b->error[0] ? b->error : NULL,
			 "digest", b->digest[0] ? b->digest : NULL, "from", b->base.digest, "operation",
			 b->op.id[0] ? b->op.id : NULL, "steps", steps, "created_at", created, "finished_at",
			 b->finished_ms ? finished : NULL);
}

json_t *builds_json(struct spaced *d)
{
	json_t *a = json_array();

	for (struct build *b = d->builds; a && b; b = b->next)
		json_array_append_new(a, build_json(b));
	return a;
}
