/* build_result.c -- a build's last layer made a template: its disk chain flattened into a raw
 * rootfs.ext4 (qemu-img convert, sparse), grown to disk_mib if asked, hashed (a job off the
 * loop), the base's kernel linked beside it, template.json written as build.sh writes it
 * (created_at last, so the digest leaves it out: the same layer gives the same digest), then
 * imported on the store's thread exactly like `make`'s templates; its tags move to it. */
#include <errno.h>
#include <fcntl.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "build_int.h"
#include "cleanup.h"
#include "log.h"
#include "store/store.h"
#include "vmm/proc_async.h"
#include "vmm/vm_argv.h"

#define FLATTEN_TIMEOUT_MS (20 * 60 * 1000)

/* $1 the layer's disk, $2 the stage, $3 disk_mib ("" : as it is). */
static const char flatten_script[] =
	"set -e; PATH=/usr/sbin:/sbin:$PATH; q=$4\n"
	"\"$q\" convert -q -O raw -S 4k \"$1\" \"$2/rootfs.ext4.tmp\"\n"
	"if [ -n \"$3\" ]; then\n"
	"  e2fsck -fy \"$2/rootfs.ext4.tmp\" >/dev/null 2>&1 || [ $? -le 1 ]\n"
	"  truncate -s \"$3M\" \"$2/rootfs.ext4.tmp\"; resize2fs -f \"$2/rootfs.ext4.tmp\" >/dev/null 2>&1\n"
	"fi\n"
	"mv \"$2/rootfs.ext4.tmp\" \"$2/rootfs.ext4\"\n"
	"cd \"$2\"; sha256sum vmlinuz rootfs.ext4 > hashes.tmp; mv hashes.tmp hashes\n";

struct result_read {
	struct build *b;
	char snap_id[ID_LEN];
	struct snapshot_rec snap;
	int rc;
	space_err err;
	char stage[PATH_MAX];
	char state_dir[PATH_MAX];
	char digest[80];
	char drop_snap[ID_LEN];      /* a promote's snapshot, deleted once imported */
	char drop_dir[PATH_MAX];
};

static void stage_path(const struct build *b, char out[PATH_MAX])
{
	snprintf(out, PATH_MAX, "%s/stage", b->dir);
}

static void stage_clean(const struct build *b)
{
	static const char *const names[] = { "vmlinuz", "rootfs.ext4", "rootfs.ext4.tmp", "template.json",
					     "digest", "hashes", "hashes.tmp" };
	char stage[PATH_MAX], path[PATH_MAX + 32];

	stage_path(b, stage);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", stage, names[i]);
		unlink(path);
	}
	rmdir(stage);
}

/* ---- import: on the store's thread ---- */

static void import_read(struct store *conn, void *arg)
{
	struct result_read *q = arg;

	space_err e = { 0 };

	q->rc = template_import_dir(conn, q->state_dir, q->stage, q->digest, &q->err);
	if (q->rc == 0 && q->drop_snap[0] && snapshot_delete_on(conn, q->drop_snap, q->drop_dir, &e) < 0) {
		log_warn("deleting the snapshot %s a template was made from: %s", q->drop_snap, e.msg);
		q->drop_dir[0] = '\0';
	}
}

static void import_done(void *arg, bool ran)
{
	struct result_read *q = arg;
	struct build *b = q->b;

	b->result_reading = false;
	if (!ran) { /* the daemon is stopping: the build fails at the next start */
		free(q);
		return;
	}
	if (q->rc == 0 && q->drop_dir[0])
		snapshot_forget_image(q->drop_dir);
	stage_clean(b);
	if (q->rc < 0)
		build_fail(b, "importing the result: %s", q->err.msg);
	else
		build_succeeded(b, q->digest);
	free(q);
}

/* ---- template.json and the digest ---- */

static void hex32(const unsigned char md[32], char out[65])
{
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* What makes the template: its config (tags apart) over the last layer's key and the disk
 * size. A template already made with this key is the result again (build_plan_read). */
static void result_key(const json_t *cfg, const char *final_key, int disk_mib, char hex[65])
{
	json_t *c = json_deep_copy(cfg);
	char *text;
	unsigned char md[32];

	json_object_del(c, "tags");
	text = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(c);
	char *all = NULL;
	if (asprintf(&all, "space-result-v1\n%s\n%s\n%d", text ? text : "", final_key, disk_mib) < 0)
		all = NULL;
	SHA256((const unsigned char *)(all ? all : ""), all ? strlen(all) : 0, md);
	hex32(md, hex);
	free(all);
	free(text);
}

/* The template's defaults: the last env, workdir and user in force, over the base's. */
json_t *build_template_config(const struct recipe *rc, const struct template_rec *base, const char *final_key,
			      space_err *err)
{
	struct recipe_state st;
	json_t *cfg;
	bool user_step = false, wd_step = false;

	const json_t *bcfg = base->config;
	const char *bwd = json_string_value(json_object_get(bcfg, "workdir"));
	const json_t *start = rc->start ? rc->start : json_object_get(bcfg, "start");
	const json_t *labels = rc->labels ? rc->labels : json_object_get(bcfg, "labels");
	const json_t *expose = rc->expose ? rc->expose : json_object_get(bcfg, "expose");

	/* What the base set and the steps did not change is inherited, as Docker's images do. */
	if (recipe_state_at(rc, rc->nsteps, base->env, bwd ? bwd : "/", base->default_user, &st, err) < 0)
		return NULL;
	for (size_t i = 0; i < rc->nsteps; i++) {
		user_step |= rc->steps[i].kind == STEP_USER;
		wd_step |= rc->steps[i].kind == STEP_WORKDIR;
	}
	cfg = json_pack("{s:s,s:O,s:i,s:i,s:s,s:O}", "name", rc->name, "tags", rc->tags, "vcpus",
			rc->vcpus ? rc->vcpus : base->vcpus, "memory_mib",
			rc->memory_mib ? rc->memory_mib : base->memory_mib, "default_user",
			user_step ? st.user : base->default_user[0] ? base->default_user : "root", "env", st.env);
	if (cfg && (wd_step || bwd))
		json_object_set_new(cfg, "workdir", json_string(st.workdir));
	if (cfg && start)
		json_object_set(cfg, "start", (json_t *)start);
	if (cfg && expose)
		json_object_set(cfg, "expose", (json_t *)expose);
	if (cfg && labels)
		json_object_set(cfg, "labels", (json_t *)labels);
	if (cfg) {
		json_object_set_new(cfg, "from", json_string(base->digest));
		char key[65];

		result_key(cfg, final_key, rc->disk_mib, key);
		json_object_set_new(cfg, "build_key", json_string(key));
		json_object_set_new(cfg, "kernel", json_string("vmlinuz"));
		json_object_set_new(cfg, "image", json_string("rootfs.ext4"));
	}
	recipe_state_free(&st);
	if (!cfg)
		err_set(err, ENOMEM, "out of memory");
	return cfg;
}

static int write_file(const char *path, const char *text, size_t len, space_err *err)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0)
		return err_sys(err, errno, "creating %s", path);
	if (write(fd, text, len) != (ssize_t)len || fsync(fd) < 0) {
		int e = errno ? errno : EIO;

		close(fd);
		return err_sys(err, e, "writing %s", path);
	}
	return close(fd) < 0 ? err_sys(err, errno, "writing %s", path) : 0;
}

/* template.json: two-space indent, created_at the last line; its hash the bytes before it. */
static int write_template_json(struct build *b, const char *stage, char hex[65], space_err *err)
{
	_cleanup_free_ char *body = NULL, *text = NULL;
	json_t *cfg = build_template_config(&b->rc, &b->base, b->final_key, err);
	char created[32], path[PATH_MAX + 16];
	unsigned char md[32];
	size_t len;
	int n;

	if (!cfg)
		return -1;
	body = json_dumps(cfg, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(cfg);
	if (!body || (len = strlen(body)) < 2 || strcmp(body + len - 2, "\n}") != 0)
		return err_set(err, ENOMEM, "out of memory");
	body[len - 2] = '\0';
	fmt_time(created, now_ms());
	created[19] = 'Z'; /* build.sh's: seconds */
	created[20] = '\0';
	n = asprintf(&text, "%s,\n  \"created_at\": \"%s\"\n}\n", body, created);
	if (n < 0)
		return err_set(err, ENOMEM, "out of memory");
	SHA256((const unsigned char *)text, strlen(body) + 2, md);
	hex32(md, hex);
	snprintf(path, sizeof(path), "%s/template.json", stage);
	return write_file(path, text, (size_t)n, err);
}

/* hashes: "hex  vmlinuz\nhex  rootfs.ext4\n", as sha256sum wrote it. */
static int read_hashes(const char *stage, char kernel[65], char rootfs[65], space_err *err)
{
	char path[PATH_MAX + 16], buf[256] = { 0 };
	_cleanup_fclose_ FILE *f = NULL;
	size_t n;

	snprintf(path, sizeof(path), "%s/hashes", stage);
	if (!(f = fopen(path, "re")))
		return err_sys(err, errno, "opening %s", path);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	if (n != 2 * 64 + strlen("  vmlinuz\n  rootfs.ext4\n") || strncmp(buf + 64, "  vmlinuz\n", 10) != 0 ||
	    strncmp(buf + 138, "  rootfs.ext4\n", 14) != 0 || strspn(buf, "0123456789abcdef") != 64 ||
	    strspn(buf + 74, "0123456789abcdef") != 64)
		return err_set(err, EIO, "%s: not what sha256sum writes", path);
	memcpy(kernel, buf, 64);
	kernel[64] = '\0';
	memcpy(rootfs, buf + 74, 64);
	rootfs[64] = '\0';
	return 0;
}

static int finish_stage(struct build *b, const char *stage, space_err *err)
{
	char kernel[65], rootfs[65], json[65], inputs[512], digest[80], path[PATH_MAX + 16], hex[65];
	unsigned char md[32];
	int len;

	if (read_hashes(stage, kernel, rootfs, err) < 0 || write_template_json(b, stage, json, err) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/rootfs.ext4", stage);
	if (template_remember_hash(path, rootfs, err) < 0)
		return -1;
	len = snprintf(inputs, sizeof(inputs), "%s  vmlinuz\n%s  rootfs.ext4\n%s  template.json\n", kernel, rootfs,
		       json);
	SHA256((const unsigned char *)inputs, (size_t)len, md);
	hex32(md, hex);
	len = snprintf(digest, sizeof(digest), "sha256:%s\n", hex);
	snprintf(path, sizeof(path), "%s/digest", stage);
	return write_file(path, digest, (size_t)len, err);
}

static void flatten_done(const space_err *jerr, void *arg)
{
	struct build *b = arg;
	struct result_read *q;
	space_err err = { 0 };

	b->job = NULL;
	if (jerr) {
		stage_clean(b);
		build_fail(b, "flattening the result's disk: %s", jerr->msg);
		return;
	}
	if (!(q = calloc(1, sizeof(*q)))) {
		stage_clean(b);
		build_fail(b, "out of memory");
		return;
	}
	q->b = b;
	stage_path(b, q->stage);
	snprintf(q->state_dir, sizeof(q->state_dir), "%s", b->d->cfg.state_dir);
	snprintf(q->drop_snap, sizeof(q->drop_snap), "%s", b->promote_snap);
	if (finish_stage(b, q->stage, &err) < 0) {
		free(q);
		stage_clean(b);
		build_fail(b, "the result: %s", err.msg);
		return;
	}
	b->result_reading = true;
	if (store_async(b->d->store, import_read, import_done, q, &err) < 0) {
		b->result_reading = false;
		free(q);
		stage_clean(b);
		build_fail(b, "importing the result: %s", err.msg);
	}
}

/* ---- the layer's disk: read on the store's thread, then flattened by a job ---- */

static int link_kernel(struct build *b, const char *stage, space_err *err)
{
	char from[PATH_MAX + 16], to[PATH_MAX + 16];

	snprintf(from, sizeof(from), "%s/vmlinuz", b->base.dir);
	snprintf(to, sizeof(to), "%s/vmlinuz", stage);
	if (link(from, to) == 0)
		return 0;
	return err_sys(err, errno, "linking %s", from);
}

static void flatten(struct build *b, const struct snapshot_rec *snap)
{
	char stage[PATH_MAX], mib[16] = "";
	space_err err = { 0 };

	stage_clean(b);
	stage_path(b, stage);
	if (mkdir(stage, 0755) < 0) {
		build_fail(b, "creating %s: %s", stage, strerror(errno));
		return;
	}
	if (link_kernel(b, stage, &err) < 0) {
		stage_clean(b);
		build_fail(b, "the result: %s", err.msg);
		return;
	}
	if (b->rc.disk_mib)
		snprintf(mib, sizeof(mib), "%d", b->rc.disk_mib);
	char *argv[] = { "/bin/sh", "-c", (char *)flatten_script, "sh", (char *)snap->disk, stage, mib,
			 (char *)vm_qemu_img_binary(), NULL };
	if (proc_job_start(b->d->base, argv, FLATTEN_TIMEOUT_MS, flatten_done, b, &b->job, &err) < 0) {
		stage_clean(b);
		build_fail(b, "flattening the result's disk: %s", err.msg);
	}
}

static void snap_read(struct store *conn, void *arg)
{
	struct result_read *q = arg;

	q->rc = store_snapshot_get(conn, q->snap_id, &q->snap, &q->err);
}

static void snap_done(void *arg, bool ran)
{
	struct result_read *q = arg;
	struct build *b = q->b;

	b->result_reading = false;
	if (!ran) {
		free(q);
		return;
	}
	if (q->rc < 0)
		build_fail(b, "the result's layer %s: %s", q->snap_id, q->err.msg);
	else if (!q->snap.disk[0])
		build_fail(b, "the result's layer %s has no disk", q->snap_id);
	else
		flatten(b, &q->snap);
	snapshot_rec_clear(&q->snap);
	free(q);
}

void build_result_start(struct build *b, const char *snap_id)
{
	struct result_read *q = calloc(1, sizeof(*q));
	space_err err = { 0 };

	if (!q) {
		build_fail(b, "out of memory");
		return;
	}
	q->b = b;
	snprintf(q->snap_id, sizeof(q->snap_id), "%s", snap_id);
	b->result_reading = true;
	if (store_async(b->d->store, snap_read, snap_done, q, &err) < 0) {
		b->result_reading = false;
		free(q);
		build_fail(b, "reading the result's layer: %s", err.msg);
	}
}

/* ---- a template made before: only its tags move ---- */

struct reuse_job {
	struct build *b;
	struct template_rec t;
	int rc;
	space_err err;
};

static void reuse_put(struct store *conn, void *arg)
{
	struct reuse_job *q = arg;

	q->rc = store_template_put(conn, &q->t, &q->err);
}

static void reuse_done(void *arg, bool ran)
{
	struct reuse_job *q = arg;
	struct build *b = q->b;

	b->result_reading = false;
	if (ran && q->rc < 0)
		build_fail(b, "moving the tags to %s: %s", q->t.digest, q->err.msg);
	else if (ran)
		build_succeeded(b, q->t.digest);
	template_rec_clear(&q->t);
	free(q);
}

void build_result_reuse(struct build *b, const struct template_rec *made)
{
	struct reuse_job *q = calloc(1, sizeof(*q));
	space_err err = { 0 };

	if (!q) {
		build_fail(b, "out of memory");
		return;
	}
	q->b = b;
	template_rec_copy(&q->t, made);
	json_decref(q->t.tags);
	q->t.tags = json_incref(b->rc.tags);
	b->result_reading = true;
	if (store_async(b->d->store, reuse_put, reuse_done, q, &err) < 0) {
		b->result_reading = false;
		template_rec_clear(&q->t);
		free(q);
		build_fail(b, "moving the tags: %s", err.msg);
	}
}

void build_result_cancel(struct build *b)
{
	if (b->job) {
		proc_job_cancel(b->job);
		b->job = NULL;
		stage_clean(b);
	}
}
