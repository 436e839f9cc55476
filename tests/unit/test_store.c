/* test_store.c -- the SQLite store: round trips, tags moving, filters, reopen, errors */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/store/store.h"
#include "daemon/store/store_sql.h" /* internals: PRAGMAs and corrupting rows on purpose */
#include "harness.h"

static char dir[256], db_path[300];

static const char *hexdigest(char c)
{
	static char buf[4][80];
	static int n;
	char *d = buf[n++ % 4];

	strcpy(d, "sha256:");
	memset(d + 7, c, 64);
	d[71] = '\0';
	return d;
}

static void tpl(struct template_rec *t, char c, const char *name, const char *tag1,
		const char *tag2)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->digest, sizeof(t->digest), "%s", hexdigest(c));
	snprintf(t->name, sizeof(t->name), "%s", name);
	snprintf(t->dir, sizeof(t->dir), "/var/lib/space/templates/%s-%c", name, c);
	snprintf(t->default_user, sizeof(t->default_user), "user");
	t->vcpus = 1;
	t->memory_mib = 512;
	t->env = json_pack("{s:s}", "PATH", "/usr/bin:/bin");
	t->tags = json_array();
	if (tag1)
		json_array_append_new(t->tags, json_string(tag1));
	if (tag2)
		json_array_append_new(t->tags, json_string(tag2));
	t->created_ms = 1000 + c;
	t->image_bytes = 123456789012LL;
}

/* The tags of a record joined with ',' for easy comparison. */
static const char *tags_of(const struct template_rec *t)
{
	static char buf[256];
	size_t i;
	json_t *v;

	buf[0] = '\0';
	json_array_foreach (t->tags, i, v) {
		if (i)
			strcat(buf, ",");
		strcat(buf, json_string_value(v));
	}
	return buf;
}

static bool resolves_to(struct store *st, const char *ref, char c)
{
	struct template_rec t;
	space_err err = { 0 };
	bool ok;

	if (store_template_resolve(st, ref, &t, &err) < 0) {
		NOTE("resolve %s: %s", ref, err.msg);
		return false;
	}
	ok = !strcmp(t.digest, hexdigest(c));
	template_rec_clear(&t);
	return ok;
}

static int resolve_code(struct store *st, const char *ref)
{
	struct template_rec t;
	space_err err = { 0 };

	if (store_template_resolve(st, ref, &t, &err) == 0) {
		template_rec_clear(&t);
		return 0;
	}
	return err.code;
}

struct listing {
	char seen[512];
	int n, stop_after;
};

static int list_tpl(const struct template_rec *t, void *arg)
{
	struct listing *l = arg;

	strcat(l->seen, t->name);
	strcat(l->seen, "=");
	strcat(l->seen, tags_of(t));
	strcat(l->seen, ";");
	return ++l->n == l->stop_after;
}

static void test_templates(struct store *st)
{
	struct template_rec t, got;
	struct listing l = { 0 };
	space_err err = { 0 };
	json_t *orig_env;

	tpl(&t, 'a', "base", "base:latest", "base:v1");
	CHECK(store_template_put(st, &t, &err) == 0, "put template a (base:latest, base:v1) %s",
	      err.msg);
	orig_env = json_incref(t.env);
	template_rec_clear(&t);
	CHECK(resolves_to(st, "base", 'a'), "'base' resolves to a");
	CHECK(resolves_to(st, "base:latest", 'a'), "'base:latest' resolves to a");
	CHECK(resolves_to(st, "base:v1", 'a'), "'base:v1' resolves to a");
	CHECK(resolves_to(st,
			  "base@sha256:"
			  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
			  'a'),
	      "'base@sha256:...' resolves to a");
	CHECK(resolves_to(st, hexdigest('a'), 'a'), "'sha256:...' resolves to a");

	CHECK(store_template_get(st, hexdigest('a'), &got, &err) == 0, "get template a");
	CHECK(!strcmp(got.name, "base") && got.vcpus == 1 && got.memory_mib == 512 &&
		      got.image_bytes == 123456789012LL && got.created_ms == 1000 + 'a' &&
		      !strcmp(got.default_user, "user") &&
		      !strcmp(got.dir, "/var/lib/space/templates/base-a") &&
		      json_equal(got.env, orig_env),
	      "template a round trips every field");
	CHECK(!strcmp(tags_of(&got), "base:latest,base:v1"), "template a holds its two tags: %s",
	      tags_of(&got));
	template_rec_clear(&got);
	json_decref(orig_env);

	/* a newer build of base claims base:latest */
	tpl(&t, 'b', "base", "base:latest", NULL);
	CHECK(store_template_put(st, &t, &err) == 0, "put template b (base:latest)");
	template_rec_clear(&t);
	CHECK(resolves_to(st, "base", 'b'), "'base' now resolves to b");
	CHECK(resolves_to(st, "base:v1", 'a'), "'base:v1' still resolves to a");
	store_template_get(st, hexdigest('a'), &got, &err);
	CHECK(!strcmp(tags_of(&got), "base:v1"), "a lost base:latest: %s", tags_of(&got));
	template_rec_clear(&got);

	/* c loses its only tag to d: it stays gettable but is no longer listed */
	tpl(&t, 'c', "old", "old:latest", NULL);
	store_template_put(st, &t, &err);
	template_rec_clear(&t);
	tpl(&t, 'd', "old", "old:latest", NULL);
	t.env = (json_decref(t.env), NULL);
	CHECK(store_template_put(st, &t, &err) == 0, "put template d with a NULL env");
	template_rec_clear(&t);
	CHECK(store_template_get(st, hexdigest('c'), &got, &err) == 0 &&
		      json_array_size(got.tags) == 0,
	      "untagged template c is still gettable, with no tags");
	template_rec_clear(&got);
	CHECK(store_template_get(st, hexdigest('d'), &got, &err) == 0 && json_is_object(got.env) &&
		      json_object_size(got.env) == 0,
	      "a NULL env reads back as {}");
	template_rec_clear(&got);

	/* re-putting a digest upserts it and keeps its tags */
	tpl(&t, 'a', "base", NULL, NULL);
	t.vcpus = 2;
	CHECK(store_template_put(st, &t, &err) == 0, "re-put template a with no tags");
	template_rec_clear(&t);
	store_template_get(st, hexdigest('a'), &got, &err);
	CHECK(got.vcpus == 2 && !strcmp(tags_of(&got), "base:v1"),
	      "re-put updates fields and keeps tags");
	template_rec_clear(&got);

	CHECK(store_template_each(st, list_tpl, &l, &err) == 0, "list templates");
	CHECK(!strcmp(l.seen, "base=base:v1;base=base:latest;old=old:latest;"),
	      "only tagged templates are listed, with their tags: %s", l.seen);
	memset(&l, 0, sizeof(l));
	l.stop_after = 1;
	CHECK(store_template_each(st, list_tpl, &l, &err) == 0 && l.n == 1,
	      "a nonzero callback return stops the listing and returns 0");

	CHECK(resolve_code(st, "nosuch") == ENOENT, "unknown name: ENOENT");
	CHECK(resolve_code(st, "base:v9") == ENOENT, "unknown tag: ENOENT");
	CHECK(resolve_code(st, hexdigest('e')) == ENOENT, "unknown digest: ENOENT");
	CHECK(resolve_code(st,
			   "old@sha256:"
			   "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa") ==
		      ENOENT,
	      "a digest under another name: ENOENT");
	{
		static const char *const bad[] = {
			"",
			"base:",
			":v1",
			"sha256:abc",
			"sha256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
			"base@sha256:xyz",
			"base@",
			"@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
			"ba se",
			"a:b:c",
			"../etc",
			"-x",
			"base;drop",
			"b\xc3\xa4se",
		};
		int wrong = 0;
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			if (resolve_code(st, bad[i]) != EINVAL) {
				NOTE("'%s' was not EINVAL", bad[i]);
				wrong++;
			}
		CHECK(wrong == 0, "malformed references are EINVAL");
	}
	err_clear(&err);
	store_template_resolve(st, "nosuch:v2", &got, &err);
	CHECK(!strcmp(err.msg, "store: resolve template nosuch:v2: not found"),
	      "not-found message carries context: %s", err.msg);

	tpl(&t, 'x', "base", "base:ok", "bad tag");
	CHECK(store_template_put(st, &t, &err) < 0 && err.code == EINVAL,
	      "put with a malformed tag is EINVAL");
	CHECK(resolve_code(st, "base:ok") == ENOENT, "... and nothing of it was stored");
	snprintf(t.digest, sizeof(t.digest), "sha256:1234");
	CHECK(store_template_put(st, &t, &err) < 0 && err.code == EINVAL,
	      "put with a malformed digest is EINVAL");
	template_rec_clear(&t);
}

static void sandbox(struct sandbox_rec *s, const char *id, enum sb_state state, int64_t created)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->id, sizeof(s->id), "%s", id);
	s->state = state;
	snprintf(s->template_ref, sizeof(s->template_ref), "base");
	snprintf(s->template_digest, sizeof(s->template_digest), "%s", hexdigest('b'));
	s->vcpus = 2;
	s->memory_mib = 1024;
	s->env = json_pack("{s:s}", "K", "V");
	s->metadata = json_pack("{s:s, s:s}", "owner", "alice", "quote", "it's \"x\"");
	s->timeout_s = 900;
	s->created_ms = created;
	s->updated_ms = created + 5;
	s->expires_ms = created + 900000;
	s->pid = 4242;
	s->pid_start = 1ULL << 40;
	s->next_chan = 0xfffffff0u;
	snprintf(s->disk, sizeof(s->disk), "/var/lib/space/disks/dk-%s.qcow2", id + 3);
	snprintf(s->parent_id, sizeof(s->parent_id), "sb-00000000000000ee");
	snprintf(s->snapshot_id, sizeof(s->snapshot_id), "sn-0000000000000001");
	snprintf(s->source_snapshot, sizeof(s->source_snapshot), "sn-0000000000000002");
	s->start_kind = START_FORK;
	s->on_timeout = ON_TIMEOUT_SUSPEND;
	s->role = ROLE_POOL;
	s->prev_state = SB_PAUSED;
	s->jail_uid = 2000000042u;
}

static int list_sb(const struct sandbox_rec *s, void *arg)
{
	struct listing *l = arg;

	strcat(l->seen, s->id + 3);
	strcat(l->seen, ";");
	l->n++;
	return 0;
}

/* Writes to the store from inside the callback, as reconcile does. */
static int fail_each(const struct sandbox_rec *s, void *arg)
{
	struct store *st = arg;
	struct sandbox_rec copy = *s;
	space_err err;

	copy.state = SB_FAILED;
	copy.created_ms += 1000000; /* would move it to the end of an index scan */
	return store_sandbox_put(st, &copy, &err);
}

static const char *list_states(struct store *st, unsigned mask)
{
	static struct listing l;
	static space_err err;

	memset(&l, 0, sizeof(l));
	if (store_sandbox_each(st, mask, list_sb, &l, &err) < 0)
		return err.msg;
	return l.seen;
}

#define SB1 "sb-0000000000000001"
#define SB2 "sb-0000000000000002"
#define SB3 "sb-0000000000000003"
#define SB4 "sb-0000000000000004"

static void test_sandboxes(struct store *st)
{
	struct sandbox_rec s, got;
	space_err err = { 0 };
	int rc;

	/* created out of id order, so ordering is by creation */
	sandbox(&s, SB3, SB_RUNNING, 100);
	CHECK(store_sandbox_put(st, &s, &err) == 0, "put sandbox 3 running %s", err.msg);
	sandbox_rec_clear(&s);
	sandbox(&s, SB1, SB_CREATING, 200);
	store_sandbox_put(st, &s, &err);
	sandbox_rec_clear(&s);
	sandbox(&s, SB2, SB_DELETED, 300);
	store_sandbox_put(st, &s, &err);
	sandbox_rec_clear(&s);
	sandbox(&s, SB4, SB_FAILED, 400);
	snprintf(s.error, sizeof(s.error), "qemu exited with status 1");
	store_sandbox_put(st, &s, &err);

	CHECK(store_sandbox_get(st, SB4, &got, &err) == 0, "get sandbox 4");
	CHECK(!strcmp(got.id, SB4) && got.state == SB_FAILED && !strcmp(got.template_ref, "base") &&
		      !strcmp(got.template_digest, hexdigest('b')) && got.vcpus == 2 &&
		      got.memory_mib == 1024 && json_equal(got.env, s.env) &&
		      json_equal(got.metadata, s.metadata) && got.timeout_s == 900 &&
		      got.created_ms == 400 && got.updated_ms == 405 && got.expires_ms == 900400 &&
		      got.pid == 4242 && got.pid_start == 1ULL << 40 &&
		      got.next_chan == 0xfffffff0u &&
		      !strcmp(got.error, "qemu exited with status 1") && !strcmp(got.disk, s.disk) &&
		      !strcmp(got.parent_id, s.parent_id) && !strcmp(got.snapshot_id, s.snapshot_id) &&
		      !strcmp(got.source_snapshot, s.source_snapshot) && got.start_kind == START_FORK &&
		      got.on_timeout == ON_TIMEOUT_SUSPEND && got.role == ROLE_POOL &&
		      got.prev_state == SB_PAUSED && got.jail_uid == 2000000042u,
	      "sandbox round trips every field");
	sandbox_rec_clear(&got);
	sandbox_rec_clear(&s);

	CHECK(!strcmp(list_states(st, 0), "0000000000000003;0000000000000001;0000000000000004;"),
	      "mask 0: all but deleted, by creation: %s", list_states(st, 0));
	CHECK(!strcmp(list_states(st, 1u << SB_RUNNING), "0000000000000003;"), "mask running");
	CHECK(!strcmp(list_states(st, 1u << SB_DELETED), "0000000000000002;"), "mask deleted");
	CHECK(!strcmp(list_states(st, (1u << SB_FAILED) | (1u << SB_CREATING)),
		      "0000000000000001;0000000000000004;"),
	      "mask creating|failed");
	CHECK(!strcmp(list_states(st, 1u << SB_PAUSED), ""), "mask paused: none");

	/* update in place: state change, env dropped */
	sandbox(&s, SB1, SB_RUNNING, 200);
	json_decref(s.env);
	s.env = NULL;
	CHECK(store_sandbox_put(st, &s, &err) == 0, "put again updates sandbox 1");
	sandbox_rec_clear(&s);
	store_sandbox_get(st, SB1, &got, &err);
	CHECK(got.state == SB_RUNNING && json_is_object(got.env) && json_object_size(got.env) == 0,
	      "update seen; NULL env reads back as {}");
	sandbox_rec_clear(&got);
	CHECK(!strcmp(list_states(st, 1u << SB_RUNNING), "0000000000000003;0000000000000001;"),
	      "mask running after the update");

	rc = store_sandbox_get(st, "sb-00000000000000ff", &got, &err);
	CHECK(rc < 0 && err.code == ENOENT, "unknown sandbox: ENOENT");
	CHECK(!strcmp(err.msg, "store: get sandbox sb-00000000000000ff: not found"), "message: %s",
	      err.msg);
	CHECK(got.env == NULL && got.metadata == NULL, "a failed get leaves no json to free");
}

static void test_each_writes(struct store *st)
{
	space_err err = { 0 };

	CHECK(store_sandbox_each(st, 1u << SB_RUNNING, fail_each, st, &err) == 0,
	      "callbacks may write to the store mid-listing %s", err.msg);
	CHECK(!strcmp(list_states(st, 1u << SB_RUNNING), ""), "... every running one was visited");
	CHECK(!strcmp(list_states(st, 1u << SB_FAILED),
		      "0000000000000004;0000000000000003;0000000000000001;"),
	      "... exactly once: %s", list_states(st, 1u << SB_FAILED));
}

static void op(struct op_rec *o, const char *id, enum op_state state, int64_t created)
{
	memset(o, 0, sizeof(*o));
	snprintf(o->id, sizeof(o->id), "%s", id);
	o->kind = OPK_CREATE;
	snprintf(o->sandbox_id, sizeof(o->sandbox_id), SB1);
	o->state = state;
	o->created_ms = created;
	o->updated_ms = created + 1;
}

static int list_op(const struct op_rec *o, void *arg)
{
	struct listing *l = arg;

	strcat(l->seen, o->id + 3);
	strcat(l->seen, ";");
	return 0;
}

static void test_ops(struct store *st)
{
	struct listing l = { 0 };
	space_err err = { 0 };
	struct op_rec o, got;

	op(&o, "op-000000000000000b", OP_RUNNING, 20);
	CHECK(store_op_put(st, &o, &err) == 0, "put op b running %s", err.msg);
	op(&o, "op-000000000000000a", OP_PENDING, 10);
	store_op_put(st, &o, &err);
	op(&o, "op-000000000000000c", OP_SUCCEEDED, 30);
	store_op_put(st, &o, &err);
	op(&o, "op-000000000000000d", OP_FAILED, 5);
	o.kind = OPK_DELETE;
	snprintf(o.error, sizeof(o.error), "removing overlay: Permission denied");
	/* no sandbox row needed: operations carry no foreign key */
	snprintf(o.sandbox_id, sizeof(o.sandbox_id), "sb-00000000000000aa");
	store_op_put(st, &o, &err);

	CHECK(store_op_get(st, "op-000000000000000d", &got, &err) == 0 &&
		      !memcmp(&got, &o, sizeof(o)),
	      "operation round trips every field");
	op_rec_clear(&got);
	op(&o, "op-000000000000000e", OP_SUCCEEDED, 40);
	o.kind = OPK_FORK;
	o.result = json_pack("{s:[s,s]}", "children", "sb-0000000000000011", "sb-0000000000000012");
	CHECK(store_op_put(st, &o, &err) == 0 && store_op_get(st, o.id, &got, &err) == 0 &&
		      got.kind == OPK_FORK && json_equal(got.result, o.result),
	      "an operation's kind and result round trip");
	op_rec_clear(&got);
	op_rec_clear(&o);
	CHECK(store_op_each_open(st, list_op, &l, &err) == 0 &&
		      !strcmp(l.seen, "000000000000000a;000000000000000b;"),
	      "open operations, oldest first: %s", l.seen);
	op(&o, "op-000000000000000a", OP_SUCCEEDED, 10);
	store_op_put(st, &o, &err);
	memset(&l, 0, sizeof(l));
	store_op_each_open(st, list_op, &l, &err);
	CHECK(!strcmp(l.seen, "000000000000000b;"), "a done operation leaves the open list");
	CHECK(store_op_get(st, "op-00000000000000ff", &got, &err) < 0 && err.code == ENOENT,
	      "unknown operation: ENOENT");
}

static void session(struct session_rec *s, const char *id, const char *sb, int64_t created)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->id, sizeof(s->id), "%s", id);
	snprintf(s->sandbox_id, sizeof(s->sandbox_id), "%s", sb);
	s->chan = 7;
	s->argv = json_pack("[s,s,s]", "sh", "-c", "echo hi");
	s->env = json_pack("{s:s}", "LANG", "C.UTF-8");
	snprintf(s->cwd, sizeof(s->cwd), "/tmp");
	snprintf(s->user, sizeof(s->user), "root");
	s->stdin_open = true;
	s->state = SESS_EXITED;
	s->pid = 99;
	s->exit_code = 3;
	s->exit_signal = 9;
	memset(s->token_hash, 'e', 64);
	s->token_expires_ms = 123456;
	s->created_ms = created;
	s->started_ms = created + 1;
	s->ended_ms = created + 2;
}

static int list_sess(const struct session_rec *s, void *arg)
{
	struct listing *l = arg;

	strcat(l->seen, s->id + 3);
	strcat(l->seen, ";");
	return 0;
}

static void test_sessions(struct store *st)
{
	struct session_rec s, got;
	struct listing l = { 0 };
	space_err err = { 0 };

	session(&s, "ss-0000000000000002", SB1, 50);
	CHECK(store_session_put(st, &s, &err) == 0, "put session 2 %s", err.msg);
	session_rec_clear(&s);
	session(&s, "ss-0000000000000003", SB3, 40);
	store_session_put(st, &s, &err);
	session_rec_clear(&s);
	session(&s, "ss-0000000000000001", SB1, 60);
	s.stdin_open = false;
	s.state = SESS_RUNNING;
	store_session_put(st, &s, &err);

	CHECK(store_session_get(st, "ss-0000000000000001", &got, &err) == 0, "get session 1");
	CHECK(!strcmp(got.sandbox_id, SB1) && got.chan == 7 && json_equal(got.argv, s.argv) &&
		      json_equal(got.env, s.env) && !strcmp(got.cwd, "/tmp") &&
		      !strcmp(got.user, "root") && !got.stdin_open && got.state == SESS_RUNNING &&
		      got.pid == 99 && got.exit_code == 3 && got.exit_signal == 9 &&
		      !strcmp(got.token_hash, s.token_hash) && got.token_expires_ms == 123456 &&
		      got.created_ms == 60 && got.started_ms == 61 && got.ended_ms == 62,
	      "session round trips every field");
	session_rec_clear(&got);
	session_rec_clear(&s);

	CHECK(store_session_each(st, SB1, list_sess, &l, &err) == 0 &&
		      !strcmp(l.seen, "0000000000000002;0000000000000001;"),
	      "sessions of sandbox 1 by creation: %s", l.seen);
	memset(&l, 0, sizeof(l));
	store_session_each(st, NULL, list_sess, &l, &err);
	CHECK(!strcmp(l.seen, "0000000000000003;0000000000000002;0000000000000001;"),
	      "all sessions by creation: %s", l.seen);
	memset(&l, 0, sizeof(l));
	store_session_each(st, "sb-00000000000000ff", list_sess, &l, &err);
	CHECK(l.seen[0] == '\0', "no sessions for an unknown sandbox");

	session(&s, "ss-0000000000000009", "sb-00000000000000ff", 70);
	CHECK(store_session_put(st, &s, &err) < 0 && err.code == EIO &&
		      strstr(err.msg, "store: put session ss-0000000000000009: FOREIGN KEY"),
	      "a session of an unknown sandbox is refused: %s", err.msg);
	session_rec_clear(&s);
	CHECK(store_session_get(st, "ss-00000000000000ff", &got, &err) < 0 && err.code == ENOENT,
	      "unknown session: ENOENT");
}

static void test_kv(struct store *st)
{
	space_err err = { 0 };
	char buf[64], small[4];

	CHECK(store_kv_set(st, "accel", "tcg", &err) == 0, "kv set");
	CHECK(store_kv_set(st, "accel", "kvm", &err) == 0, "kv set again");
	CHECK(store_kv_get(st, "accel", buf, sizeof(buf), &err) == 0 && !strcmp(buf, "kvm"),
	      "kv get sees the latest value");
	CHECK(store_kv_get(st, "accel", small, 3, &err) < 0 && err.code == E2BIG,
	      "kv get into a buffer too small: E2BIG");
	CHECK(store_kv_get(st, "accel", small, 4, &err) == 0 && !strcmp(small, "kvm"),
	      "kv get into an exact buffer");
	CHECK(store_kv_get(st, "nope", buf, sizeof(buf), &err) < 0 && err.code == ENOENT,
	      "kv unknown key: ENOENT");
}

static int pragma_int(struct store *st, const char *sql)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;

	if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK ||
	    sqlite3_step(s) != SQLITE_ROW)
		return -1;
	return sqlite3_column_int(s, 0);
}

static bool pragma_is(struct store *st, const char *sql, const char *want)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;

	return sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) == SQLITE_OK &&
	       sqlite3_step(s) == SQLITE_ROW &&
	       !strcmp((const char *)sqlite3_column_text(s, 0), want);
}

static int count_secret(const struct secret_rec *r, void *arg)
{
	(void)r;
	(*(int *)arg)++;
	return 0;
}

/* Secrets: created vs replaced, values only on request, ENOENT for unknown names; a
 * sandbox's network policy round-trips. */
static void test_secrets(struct store *st)
{
	struct secret_rec r, got;
	struct sandbox_rec s, sg;
	space_err err = { 0 };
	bool created = false;
	char *value = NULL;
	int n = 0;

	CHECK(store_secret_put(st, "tok", "v1", &r, &created, &err) == 0 && created, "a new secret: %s", err.msg);
	CHECK(store_secret_put(st, "tok", "v2", &r, &created, &err) == 0 && !created &&
		      r.updated_ms >= r.created_ms,
	      "replacing it");
	CHECK(store_secret_get(st, "tok", &got, &value, &err) == 0 && value && !strcmp(value, "v2") &&
		      !strcmp(got.name, "tok"),
	      "its value on request");
	free(value);
	CHECK(store_secret_get(st, "tok", &got, NULL, &err) == 0, "metadata alone");
	store_secret_put(st, "a.b-c_d", "x", &r, &created, &err);
	CHECK(store_secret_each(st, count_secret, &n, &err) == 0 && n == 2, "two listed");
	CHECK(store_secret_delete(st, "tok", &err) == 0, "deleted");
	CHECK(store_secret_delete(st, "tok", &err) < 0 && err.code == ENOENT, "ENOENT the second time");
	CHECK(store_secret_get(st, "tok", &got, NULL, &err) < 0 && err.code == ENOENT, "gone");

	CHECK(store_sandbox_get(st, SB1, &s, &err) == 0, "get sandbox 1");
	json_decref(s.network);
	s.network = json_pack("{s:[s],s:[],s:[]}", "allow", "pypi.org", "deny", "inject");
	CHECK(store_sandbox_put(st, &s, &err) == 0 && store_sandbox_get(st, SB1, &sg, &err) == 0 &&
		      json_equal(sg.network, s.network),
	      "a sandbox's network round-trips");
	sandbox_rec_clear(&s);
	sandbox_rec_clear(&sg);
}

static void test_reopen(void)
{
	struct store *st = NULL;
	struct template_rec t;
	struct sandbox_rec s;
	struct session_rec ss;
	struct op_rec o;
	space_err err = { 0 };
	char buf[16];

	CHECK(store_open(&st, db_path, &err) == 0, "reopen the file %s", err.msg);
	if (!st)
		return;
	CHECK(pragma_is(st, "PRAGMA journal_mode", "wal"), "journal mode is WAL");
	CHECK(pragma_int(st, "PRAGMA foreign_keys") == 1, "foreign keys are on");
	CHECK(pragma_int(st, "PRAGMA synchronous") == 1, "synchronous is NORMAL");
	CHECK(pragma_int(st, "PRAGMA user_version") == 6, "schema version 6");
	CHECK(resolves_to(st, "base", 'b') && resolves_to(st, "base:v1", 'a') &&
		      resolves_to(st, "old", 'd'),
	      "templates and tags survive");
	CHECK(store_template_get(st, hexdigest('c'), &t, &err) == 0, "untagged template survives");
	template_rec_clear(&t);
	CHECK(!strcmp(list_states(st, 0), "0000000000000004;0000000000000003;0000000000000001;"),
	      "sandboxes survive: %s", list_states(st, 0));
	CHECK(store_sandbox_get(st, SB2, &s, &err) == 0 && s.state == SB_DELETED,
	      "the deleted sandbox is still answered");
	sandbox_rec_clear(&s);
	CHECK(store_op_get(st, "op-000000000000000b", &o, &err) == 0 && o.state == OP_RUNNING,
	      "operations survive");
	CHECK(store_session_get(st, "ss-0000000000000002", &ss, &err) == 0 &&
		      json_array_size(ss.argv) == 3,
	      "sessions survive");
	session_rec_clear(&ss);
	CHECK(store_kv_get(st, "accel", buf, sizeof(buf), &err) == 0 && !strcmp(buf, "kvm"),
	      "kv survives");

	/* a row the daemon did not write: errors, not crashes */
	sqlite3_exec(st->db, "UPDATE sandboxes SET env = '{\"K\":' WHERE id = '" SB1 "'", 0, 0, 0);
	CHECK(store_sandbox_get(st, SB1, &s, &err) < 0 && err.code == EIO &&
		      strstr(err.msg, "column env holds bad JSON"),
	      "bad JSON in a row: EIO (%s)", err.msg);
	CHECK(store_sandbox_each(st, 0, list_sb, &(struct listing){ 0 }, &err) < 0 &&
		      err.code == EIO,
	      "... also while listing");
	sqlite3_exec(st->db,
		     "UPDATE sandboxes SET env = NULL, state = 'frozen' WHERE id = '" SB1 "'", 0, 0,
		     0);
	CHECK(store_sandbox_get(st, SB1, &s, &err) < 0 && err.code == EIO &&
		      strstr(err.msg, "unknown state 'frozen'"),
	      "unknown state in a row: EIO (%s)", err.msg);

	/* a schema from the future is refused, not clobbered */
	sqlite3_exec(st->db, "PRAGMA user_version = 99", 0, 0, 0);
	store_close(st);
	st = NULL;
	CHECK(store_open(&st, db_path, &err) < 0 && strstr(err.msg, "newer"),
	      "a newer schema is refused: %s", err.msg);
	store_close(st);
}

static void snapshot(struct snapshot_rec *s, const char *id, enum snap_kind kind, const char *name,
		     int64_t created)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->id, sizeof(s->id), "%s", id);
	s->kind = kind;
	s->state = SNAPS_READY;
	snprintf(s->name, sizeof(s->name), "%s", name);
	snprintf(s->sandbox_id, sizeof(s->sandbox_id), SB1);
	snprintf(s->template_ref, sizeof(s->template_ref), "base");
	snprintf(s->template_digest, sizeof(s->template_digest), "%s", hexdigest('b'));
	s->vcpus = 1;
	s->memory_mib = 256;
	s->env = json_pack("{s:s}", "A", "1");
	s->next_chan = 7;
	snprintf(s->dir, sizeof(s->dir), "/var/lib/space/snapshots/%s", id);
	snprintf(s->disk, sizeof(s->disk), "/var/lib/space/disks/dk-00.qcow2");
	s->bytes = 123456789;
	s->created_ms = created;
}

static int list_snap(const struct snapshot_rec *s, void *arg)
{
	struct listing *l = arg;

	strcat(l->seen, s->id + 3);
	strcat(l->seen, ";");
	return 0;
}

static void test_snapshots(struct store *st)
{
	struct snapshot_rec s, got;
	struct listing l = { 0 };
	space_err err = { 0 };

	snapshot(&s, "sn-0000000000000002", SNAP_NAMED, "golden", 20);
	CHECK(store_snapshot_put(st, &s, &err) == 0, "put a named snapshot %s", err.msg);
	CHECK(store_snapshot_get(st, s.id, &got, &err) == 0 && got.kind == SNAP_NAMED &&
		      got.state == SNAPS_READY && !strcmp(got.name, "golden") &&
		      !strcmp(got.sandbox_id, SB1) && !strcmp(got.template_ref, "base") &&
		      !strcmp(got.template_digest, hexdigest('b')) && got.vcpus == 1 &&
		      got.memory_mib == 256 && json_equal(got.env, s.env) && got.next_chan == 7 &&
		      !strcmp(got.dir, s.dir) && !strcmp(got.disk, s.disk) && got.bytes == 123456789 &&
		      got.created_ms == 20,
	      "snapshot round trips every field");
	snapshot_rec_clear(&got);
	CHECK(store_snapshot_get_by_name(st, "golden", &got, &err) == 0 && !strcmp(got.id, s.id),
	      "found by name");
	snapshot_rec_clear(&got);
	snapshot_rec_clear(&s);
	snapshot(&s, "sn-0000000000000003", SNAP_NAMED, "golden", 30);
	CHECK(store_snapshot_put(st, &s, &err) < 0 && err.code == EEXIST,
	      "a second named snapshot of the same name: EEXIST (%s)", err.msg);
	snapshot_rec_clear(&s);
	snapshot(&s, "sn-0000000000000001", SNAP_READY, "", 10);
	CHECK(store_snapshot_put(st, &s, &err) == 0, "unnamed snapshots do not collide on ''");
	snapshot_rec_clear(&s);
	snapshot(&s, "sn-0000000000000004", SNAP_FORK, "", 40);
	store_snapshot_put(st, &s, &err);
	snapshot_rec_clear(&s);
	CHECK(store_snapshot_get_by_name(st, "", &got, &err) < 0 && err.code == ENOENT,
	      "names only find named snapshots");
	CHECK(store_snapshot_each(st, 0, list_snap, &l, &err) == 0 &&
		      !strcmp(l.seen, "0000000000000001;0000000000000002;0000000000000004;"),
	      "all snapshots by creation: %s", l.seen);
	memset(&l, 0, sizeof(l));
	store_snapshot_each(st, (1u << SNAP_READY) | (1u << SNAP_FORK), list_snap, &l, &err);
	CHECK(!strcmp(l.seen, "0000000000000001;0000000000000004;"), "filtered by kind: %s", l.seen);
	CHECK(store_snapshot_delete(st, "sn-0000000000000004", &err) == 0 &&
		      store_snapshot_get(st, "sn-0000000000000004", &got, &err) < 0 && err.code == ENOENT,
	      "delete removes the row");
	CHECK(store_snapshot_delete(st, "sn-0000000000000004", &err) < 0 && err.code == ENOENT,
	      "deleting twice: ENOENT");
}

/* A database the first schema made is migrated, its rows kept. */
static void test_migrate_v1(void)
{
	char path[400];
	sqlite3 *db;
	struct store *st = NULL;
	struct sandbox_rec s;
	struct op_rec o;
	space_err err = { 0 };

	snprintf(path, sizeof(path), "%s/v1.db", dir);
	CHECK(sqlite3_open(path, &db) == SQLITE_OK, "a v1 database");
	sqlite3_exec(db,
		     "CREATE TABLE sandboxes (id TEXT PRIMARY KEY, state TEXT NOT NULL, template_ref TEXT NOT NULL,"
		     " template_digest TEXT NOT NULL, vcpus INTEGER NOT NULL, memory_mib INTEGER NOT NULL, env TEXT,"
		     " metadata TEXT, timeout_s INTEGER NOT NULL, created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL,"
		     " expires_ms INTEGER NOT NULL, pid INTEGER NOT NULL, pid_start INTEGER NOT NULL,"
		     " next_chan INTEGER NOT NULL, error TEXT NOT NULL);"
		     "CREATE TABLE operations (id TEXT PRIMARY KEY, kind TEXT NOT NULL, sandbox_id TEXT NOT NULL,"
		     " state TEXT NOT NULL, error TEXT NOT NULL, created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL);"
		     "CREATE TABLE templates (digest TEXT PRIMARY KEY, name TEXT NOT NULL, dir TEXT NOT NULL,"
		     " vcpus INTEGER NOT NULL, memory_mib INTEGER NOT NULL, default_user TEXT NOT NULL, env TEXT,"
		     " created_ms INTEGER NOT NULL, image_bytes INTEGER NOT NULL);"
		     "CREATE TABLE template_tags (tag TEXT PRIMARY KEY, digest TEXT NOT NULL);"
		     "CREATE TABLE sessions (id TEXT PRIMARY KEY, sandbox_id TEXT NOT NULL);"
		     "CREATE TABLE kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
		     "INSERT INTO sandboxes VALUES ('sb-0000000000000009', 'running', 'base', 'sha256:x', 1, 128,"
		     " NULL, NULL, 0, 1, 2, 0, 42, 43, 5, '');"
		     "INSERT INTO operations VALUES ('op-0000000000000009', 'create', 'sb-0000000000000009',"
		     " 'succeeded', '', 1, 2);"
		     "PRAGMA user_version = 1;",
		     0, 0, 0);
	sqlite3_close(db);
	CHECK(store_open(&st, path, &err) == 0, "opens and migrates %s", err.msg);
	if (!st)
		return;
	CHECK(pragma_int(st, "PRAGMA user_version") == 6, "now at version 6");
	CHECK(store_sandbox_get(st, "sb-0000000000000009", &s, &err) == 0 && s.state == SB_RUNNING &&
		      s.pid == 42 && s.next_chan == 5 && !s.disk[0] && s.start_kind == START_BOOT &&
		      s.on_timeout == ON_TIMEOUT_DELETE && s.role == ROLE_USER && s.jail_uid == 0,
	      "a v1 sandbox reads back with the new fields' defaults (%s)", err.msg);
	sandbox_rec_clear(&s);
	CHECK(store_op_get(st, "op-0000000000000009", &o, &err) == 0 && o.kind == OPK_CREATE && !o.result,
	      "a v1 operation reads back, without a result");
	store_close(st);
	unlink(path);
}

static void rm_tree(void)
{
	static const char *const names[] = { "state.db", "state.db-wal", "state.db-shm" };
	char p[400];

	for (size_t i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		unlink(p);
	}
	rmdir(dir);
}

/* Files tokens (schema v5): only hashes, by sandbox and scope, pruned when expired or when their
 * sandbox goes; a session's kind and terminal size come back as stored. */
static void test_tokens_and_kinds(struct store *st)
{
	char sb[ID_LEN] = "", scope[16] = "";
	int64_t exp = 0, now = now_ms();
	space_err err = { 0 };
	struct session_rec r = { 0 }, back;

	CHECK(store_token_put(st, "aa", "sb-0000000000000001", "files", now + 60000, &err) == 0 &&
		      store_token_put(st, "bb", "sb-0000000000000002", "files", now - 1, &err) == 0 &&
		      store_token_put(st, "cc", "sb-0000000000000001", "files", now + 60000, &err) == 0,
	      "tokens stored %s", err.msg);
	CHECK(store_token_get(st, "aa", sb, scope, sizeof(scope), &exp, &err) == 0 &&
		      !strcmp(sb, "sb-0000000000000001") && !strcmp(scope, "files") && exp == now + 60000,
	      "a token reads back");
	CHECK(store_token_put(st, "aa", "sb-0000000000000003", "files", now, &err) < 0, "a hash is stored once");
	err_clear(&err);
	CHECK(store_tokens_prune(st, NULL, now, &err) == 0 &&
		      store_token_get(st, "bb", sb, scope, sizeof(scope), &exp, &err) < 0 && err.code == ENOENT,
	      "expired tokens are pruned");
	err_clear(&err);
	CHECK(store_tokens_prune(st, "sb-0000000000000001", now, &err) == 0 &&
		      store_token_get(st, "cc", sb, scope, sizeof(scope), &exp, &err) < 0 && err.code == ENOENT,
	      "a sandbox's tokens go with it");
	err_clear(&err);

	snprintf(r.id, sizeof(r.id), "ss-00000000000000aa");
	snprintf(r.sandbox_id, sizeof(r.sandbox_id), "sb-0000000000000001");
	r.argv = json_pack("[s]", "bash");
	r.env = json_object();
	r.kind = SESS_KIND_PTY;
	r.pty_rows = 50;
	r.pty_cols = 132;
	snprintf(r.tag, sizeof(r.tag), "my-tag");
	CHECK(store_session_put(st, &r, &err) == 0 && store_session_get(st, r.id, &back, &err) == 0 &&
		      back.kind == SESS_KIND_PTY && back.pty_rows == 50 && back.pty_cols == 132 &&
		      strcmp(back.tag, "my-tag") == 0,
	      "a PTY session keeps its kind, size and tag %s", err.msg);
	session_rec_clear(&back);
	session_rec_clear(&r);
}

int main(void)
{
	struct store *st = NULL;
	space_err err = { 0 };
	const char *tmp = getenv("TMPDIR");
	struct stat sb;

	snprintf(dir, sizeof(dir), "%s/test_store.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		SKIP_ALL("no temp dir");
	snprintf(db_path, sizeof(db_path), "%s/state.db", dir);

	CHECK(store_open(&st, "/nonexistent/dir/state.db", &err) < 0 &&
		      strstr(err.msg, "/nonexistent/dir/state.db"),
	      "open in a missing directory fails with the path: %s", err.msg);
	err_clear(&err);
	if (!CHECK(store_open(&st, db_path, &err) == 0, "open a new store %s", err.msg))
		return DONE();
	CHECK(stat(db_path, &sb) == 0 && (sb.st_mode & 0777) == 0600, "the file is private (0600)");
	test_templates(st);
	test_sandboxes(st);
	test_ops(st);
	test_sessions(st);
	test_each_writes(st);
	test_kv(st);
	test_secrets(st);
	test_snapshots(st);
	test_tokens_and_kinds(st);
	store_close(st);
	test_reopen();
	test_migrate_v1();
	rm_tree();
	return DONE();
}
