/* test_store.c -- the store's contract (store.h), run against a fresh SQLite file per case and,
 * when SPACE_TEST_STORE_PG names a PostgreSQL URL, the same cases against that database; then
 * what only SQLite has: its file, its PRAGMAs, migrations from old files, reopening */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/store/store.h"
#include "daemon/store/store_sql.h" /* internals: PRAGMAs and corrupting rows on purpose */
#include "harness.h"
#include "store_pg_reset.h"

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
	/* (the database's own words follow the context: SQLite "FOREIGN KEY constraint failed",
	 * PostgreSQL "... violates foreign key constraint ...") */
	CHECK(store_session_put(st, &s, &err) < 0 && err.code == EIO &&
		      strstr(err.msg, "store: put session ss-0000000000000009: ") &&
		      strcasestr(err.msg, "foreign key"),
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

	if (sqlite3_prepare_v2(sq_db(st), sql, -1, &s, NULL) != SQLITE_OK ||
	    sqlite3_step(s) != SQLITE_ROW)
		return -1;
	return sqlite3_column_int(s, 0);
}

static bool pragma_is(struct store *st, const char *sql, const char *want)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;

	return sqlite3_prepare_v2(sq_db(st), sql, -1, &s, NULL) == SQLITE_OK &&
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

	CHECK(store_secret_put(st, "tok", "v1", "[\"a.example\"]", &r, &created, &err) == 0 && created &&
		      !strcmp(r.hosts, "[\"a.example\"]"),
	      "a new secret: %s", err.msg);
	CHECK(store_secret_put(st, "tok", "v2", "[\"*.b.example\"]", &r, &created, &err) == 0 && !created &&
		      r.updated_ms >= r.created_ms && !strcmp(r.hosts, "[\"*.b.example\"]"),
	      "replacing it (value and hosts)");
	CHECK(store_secret_get(st, "tok", &got, &value, &err) == 0 && value && !strcmp(value, "v2") &&
		      !strcmp(got.name, "tok") && !strcmp(got.hosts, "[\"*.b.example\"]"),
	      "its value on request, and its hosts");
	free(value);
	CHECK(store_secret_get(st, "tok", &got, NULL, &err) == 0, "metadata alone");
	store_secret_put(st, "a.b-c_d", "x", "[]", &r, &created, &err);
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
	CHECK(pragma_int(st, "PRAGMA user_version") == 10, "schema version 10");
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
	sqlite3_exec(sq_db(st), "UPDATE sandboxes SET env = '{\"K\":' WHERE id = '" SB1 "'", 0, 0, 0);
	CHECK(store_sandbox_get(st, SB1, &s, &err) < 0 && err.code == EIO &&
		      strstr(err.msg, "column env holds bad JSON"),
	      "bad JSON in a row: EIO (%s)", err.msg);
	CHECK(store_sandbox_each(st, 0, list_sb, &(struct listing){ 0 }, &err) < 0 &&
		      err.code == EIO,
	      "... also while listing");
	sqlite3_exec(sq_db(st),
		     "UPDATE sandboxes SET env = NULL, state = 'frozen' WHERE id = '" SB1 "'", 0, 0,
		     0);
	CHECK(store_sandbox_get(st, SB1, &s, &err) < 0 && err.code == EIO &&
		      strstr(err.msg, "unknown state 'frozen'"),
	      "unknown state in a row: EIO (%s)", err.msg);

	/* a schema from the future is refused, not clobbered */
	sqlite3_exec(sq_db(st), "PRAGMA user_version = 99", 0, 0, 0);
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
	CHECK(pragma_int(st, "PRAGMA user_version") == 10, "now at version 10");
	CHECK(pragma_int(st, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN"
			     " ('sandboxes_node', 'sandboxes_intent', 'operations_node', 'snapshots_node',"
			     " 'nodes_lease')") == 5 &&
		      pragma_int(st, "SELECT count(*) FROM sqlite_master WHERE name = 'nodes'") == 1,
	      "v7's nodes table and indexes are there");
	CHECK(store_sandbox_get(st, "sb-0000000000000009", &s, &err) == 0 && s.state == SB_RUNNING &&
		      s.pid == 42 && s.next_chan == 5 && !s.disk[0] && s.start_kind == START_BOOT &&
		      s.on_timeout == ON_TIMEOUT_DELETE && s.role == ROLE_USER && s.jail_uid == 0 &&
		      !s.node_id[0] && s.generation == 0,
	      "a v1 sandbox reads back with the new fields' defaults (%s)", err.msg);
	CHECK(store_sandbox_put(st, &s, &err) == 0 && store_sandbox_put_if(st, &s, 1, NULL, &err) == 0,
	      "its first write makes generation 1, a put_if at 1 goes through %s", err.msg);
	sandbox_rec_clear(&s);
	CHECK(store_op_get(st, "op-0000000000000009", &o, &err) == 0 && o.kind == OPK_CREATE && !o.result,
	      "a v1 operation reads back, without a result");
	store_close(st);
	unlink(path);
}

static void rm_tree(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[600];

	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
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

/* ---- the cluster (schema v7): generations, the node scope and its fence, intents, claims,
 * nodes and leases ---- */

#define N1 "node-1"
#define N2 "node-2"

/* A sandbox of `mib` MiB in `state`, owned by `node` as the record says. */
static int put_sb(struct store *st, const char *id, enum sb_state state, const char *node,
		  int mib, int64_t created)
{
	struct sandbox_rec s;
	space_err err = { 0 };
	int rc;

	sandbox(&s, id, state, created);
	s.memory_mib = mib;
	snprintf(s.node_id, sizeof(s.node_id), "%s", node);
	rc = store_sandbox_put(st, &s, &err);
	if (rc < 0)
		NOTE("put %s: %s", id, err.msg);
	sandbox_rec_clear(&s);
	return rc;
}

static int64_t generation_of(struct store *st, const char *id)
{
	struct sandbox_rec s;
	space_err err = { 0 };
	int64_t g;

	if (store_sandbox_get(st, id, &s, &err) < 0)
		return -1;
	g = s.generation;
	sandbox_rec_clear(&s);
	return g;
}

static const char *node_of(struct store *st, const char *id)
{
	static char buf[64];
	struct sandbox_rec s;
	space_err err = { 0 };

	if (store_sandbox_get(st, id, &s, &err) < 0)
		return "(none)";
	snprintf(buf, sizeof(buf), "%s", s.node_id);
	sandbox_rec_clear(&s);
	return buf;
}

static enum sb_state state_of(struct store *st, const char *id)
{
	struct sandbox_rec s;
	space_err err = { 0 };
	enum sb_state v;

	if (store_sandbox_get(st, id, &s, &err) < 0)
		return SB__COUNT;
	v = s.state;
	sandbox_rec_clear(&s);
	return v;
}

static void put_op(struct store *st, const char *id, const char *sb, enum op_state state,
		   int64_t created)
{
	struct op_rec o;
	space_err err = { 0 };

	op(&o, id, state, created);
	snprintf(o.sandbox_id, sizeof(o.sandbox_id), "%s", sb);
	if (store_op_put(st, &o, &err) < 0)
		NOTE("put op %s: %s", id, err.msg);
}

static const char *open_ops(struct store *st)
{
	static struct listing l;
	static space_err err;

	memset(&l, 0, sizeof(l));
	if (store_op_each_open(st, list_op, &l, &err) < 0)
		return err.msg;
	return l.seen;
}

/* Every write bumps the generation; the record's own generation is ignored. */
static void case_generation(struct store *st)
{
	struct sandbox_rec s, got;
	space_err err = { 0 };

	sandbox(&s, SB1, SB_RUNNING, 100);
	s.generation = 77;
	CHECK(store_sandbox_put(st, &s, &err) == 0 && generation_of(st, SB1) == 1,
	      "a new row starts at generation 1 (%s)", err.msg);
	CHECK(store_sandbox_put(st, &s, &err) == 0 && store_sandbox_put(st, &s, &err) == 0 &&
		      generation_of(st, SB1) == 3,
	      "each put adds one: %lld", (long long)generation_of(st, SB1));
	CHECK(store_sandbox_get(st, SB1, &got, &err) == 0 && got.generation == 3 && !got.node_id[0],
	      "a record read back carries its generation and node");
	sandbox_rec_clear(&got);
	sandbox_rec_clear(&s);
}

/* put_if writes only at the generation the caller read. */
static void case_put_if(struct store *st)
{
	struct sandbox_rec s, got;
	space_err err = { 0 };
	int64_t g = 0;

	put_sb(st, SB1, SB_RUNNING, "", 512, 100);
	CHECK(store_sandbox_get(st, SB1, &s, &err) == 0 && s.generation == 1, "read at 1");
	s.state = SB_PAUSED;
	CHECK(store_sandbox_put_if(st, &s, 1, &g, &err) == 0 && g == 2, "put_if at 1: now %lld (%s)",
	      (long long)g, err.msg);
	s.state = SB_STOPPED;
	err_clear(&err);
	CHECK(store_sandbox_put_if(st, &s, 1, &g, &err) < 0 && err.code == ESTALE,
	      "put_if at the old generation: ESTALE (%s)", err.msg);
	CHECK(store_sandbox_get(st, SB1, &got, &err) == 0 && got.state == SB_PAUSED &&
		      got.generation == 2,
	      "... and nothing was written");
	sandbox_rec_clear(&got);
	CHECK(store_sandbox_put_if(st, &s, 2, NULL, &err) == 0 && state_of(st, SB1) == SB_STOPPED,
	      "put_if at the current generation, without asking for the new one");
	snprintf(s.id, sizeof(s.id), SB2);
	err_clear(&err);
	CHECK(store_sandbox_put_if(st, &s, 0, NULL, &err) < 0 && err.code == ENOENT,
	      "put_if of a row that does not exist: ENOENT (%s)", err.msg);
	sandbox_rec_clear(&s);
}

static int list_sess_ids(const struct session_rec *s, void *arg)
{
	struct listing *l = arg;

	strcat(l->seen, s->id + 3);
	strcat(l->seen, ";");
	return 0;
}

static void put_session(struct store *st, const char *id, const char *sb, int64_t created)
{
	struct session_rec r;
	space_err err = { 0 };

	session(&r, id, sb, created);
	if (store_session_put(st, &r, &err) < 0)
		NOTE("put session %s: %s", id, err.msg);
	session_rec_clear(&r);
}

static void put_snap(struct store *st, const char *id, int64_t created)
{
	struct snapshot_rec r;
	space_err err = { 0 };

	snapshot(&r, id, SNAP_READY, "", created);
	if (store_snapshot_put(st, &r, &err) < 0)
		NOTE("put snapshot %s: %s", id, err.msg);
	snapshot_rec_clear(&r);
}

/* A scoped store stamps its node on what it writes and lists its node's rows only; gets by id
 * and an unscoped store see everything. */
static void case_scope(struct store *st)
{
	struct listing l = { 0 };
	space_err err = { 0 };
	struct sandbox_rec got;

	CHECK(put_sb(st, SB1, SB_RUNNING, N2, 512, 100) == 0 && !strcmp(node_of(st, SB1), N2),
	      "without a scope a put keeps the record's node");
	put_session(st, "ss-0000000000000001", SB1, 1);
	put_op(st, "op-0000000000000001", SB1, OP_RUNNING, 1);
	put_snap(st, "sn-0000000000000001", 1);

	store_set_node(st, N1);
	CHECK(put_sb(st, SB2, SB_RUNNING, N2, 512, 200) == 0 && !strcmp(node_of(st, SB2), N1),
	      "with a scope a new row is stamped with it, whatever the record says");
	put_session(st, "ss-0000000000000002", SB2, 2);
	put_op(st, "op-0000000000000002", SB2, OP_PENDING, 2);
	put_snap(st, "sn-0000000000000002", 2);
	CHECK(!strcmp(list_states(st, 0), "0000000000000002;"), "sandbox_each: its node's only: %s",
	      list_states(st, 0));
	CHECK(!strcmp(open_ops(st), "0000000000000002;"), "op_each_open: its node's only: %s",
	      open_ops(st));
	CHECK(store_session_each(st, NULL, list_sess_ids, &l, &err) == 0 &&
		      !strcmp(l.seen, "0000000000000002;"),
	      "session_each(NULL): the sessions of its node's sandboxes: %s", l.seen);
	memset(&l, 0, sizeof(l));
	CHECK(store_session_each(st, SB1, list_sess_ids, &l, &err) == 0 &&
		      !strcmp(l.seen, "0000000000000001;"),
	      "session_each(id) is not filtered: %s", l.seen);
	memset(&l, 0, sizeof(l));
	CHECK(store_snapshot_each(st, 0, list_snap, &l, &err) == 0 && !strcmp(l.seen, "0000000000000002;"),
	      "snapshot_each: its node's only: %s", l.seen);
	CHECK(store_sandbox_get(st, SB1, &got, &err) == 0 && !strcmp(got.node_id, N2),
	      "a get by id sees another node's row");
	sandbox_rec_clear(&got);

	store_set_node(st, "");
	CHECK(!strcmp(list_states(st, 0), "0000000000000001;0000000000000002;"),
	      "unscoped again: every row");
	/* an unscoped op put keeps the node the row has */
	put_op(st, "op-0000000000000002", SB2, OP_RUNNING, 2);
	store_set_node(st, N1);
	CHECK(!strcmp(open_ops(st), "0000000000000002;"), "an unscoped op put kept its node");
	store_set_node(st, "");
	memset(&l, 0, sizeof(l));
	CHECK(store_snapshot_each(st, 0, list_snap, &l, &err) == 0 &&
		      !strcmp(l.seen, "0000000000000001;0000000000000002;"),
	      "unscoped snapshot_each: all: %s", l.seen);
}

/* The fence: a scoped put updates only its own rows that are not lost. */
static void case_fence(struct store *st)
{
	struct sandbox_rec s;
	space_err err = { 0 };

	put_sb(st, SB1, SB_RUNNING, N2, 512, 100);
	put_sb(st, SB2, SB_LOST, N1, 512, 200);
	put_sb(st, SB3, SB_RUNNING, N1, 512, 300);
	store_set_node(st, N1);
	sandbox(&s, SB1, SB_STOPPED, 100);
	CHECK(store_sandbox_put(st, &s, &err) < 0 && err.code == ESTALE,
	      "another node's row: ESTALE (%s)", err.msg);
	CHECK(state_of(st, SB1) == SB_RUNNING && !strcmp(node_of(st, SB1), N2) &&
		      generation_of(st, SB1) == 1,
	      "... and it is untouched");
	CHECK(store_sandbox_put_if(st, &s, 1, NULL, &err) < 0 && err.code == ESTALE,
	      "put_if at the right generation is fenced too (%s)", err.msg);
	snprintf(s.id, sizeof(s.id), SB2);
	CHECK(store_sandbox_put(st, &s, &err) < 0 && err.code == ESTALE && state_of(st, SB2) == SB_LOST,
	      "its own row once lost: ESTALE");
	snprintf(s.id, sizeof(s.id), SB3);
	CHECK(store_sandbox_put(st, &s, &err) == 0 && state_of(st, SB3) == SB_STOPPED &&
		      generation_of(st, SB3) == 2,
	      "its own live row: written (%s)", err.msg);
	snprintf(s.id, sizeof(s.id), SB4);
	CHECK(store_sandbox_put(st, &s, &err) == 0 && !strcmp(node_of(st, SB4), N1),
	      "a new row: inserted, stamped (%s)", err.msg);
	store_set_node(st, "");
	snprintf(s.id, sizeof(s.id), SB1);
	CHECK(store_sandbox_put(st, &s, &err) == 0 && state_of(st, SB1) == SB_STOPPED,
	      "an unscoped store is not fenced (%s)", err.msg);
	sandbox_rec_clear(&s);
}

static json_t *create_intent(void)
{
	return json_pack("{s:s, s:{s:s}}", "kind", "create", "request", "template", "base");
}

static int put_intent(struct store *st, const char *id, const char *op_id, int mib, int64_t created,
		      space_err *err)
{
	struct sandbox_rec s;
	struct op_rec o;
	json_t *intent = create_intent();
	int rc;

	sandbox(&s, id, SB_CREATING, created);
	s.memory_mib = mib;
	snprintf(s.node_id, sizeof(s.node_id), "someone"); /* intents have no node, whatever */
	op(&o, op_id, OP_PENDING, created);
	snprintf(o.sandbox_id, sizeof(o.sandbox_id), "%s", id);
	rc = store_intent_put(st, &s, &o, intent, err);
	json_decref(intent);
	sandbox_rec_clear(&s);
	return rc;
}

/* A create written as intent: its row (no node) and its pending op, together or not at all. */
static void case_intent(struct store *st)
{
	struct sandbox_rec s;
	struct op_rec o, got;
	space_err err = { 0 };
	json_t *intent = create_intent();

	CHECK(put_intent(st, SB1, "op-0000000000000001", 512, 100, &err) == 0, "intent put %s",
	      err.msg);
	CHECK(state_of(st, SB1) == SB_CREATING && !strcmp(node_of(st, SB1), "") &&
		      generation_of(st, SB1) == 1,
	      "its row: creating, no node, generation 1");
	CHECK(store_op_get(st, "op-0000000000000001", &got, &err) == 0 && got.state == OP_PENDING &&
		      !strcmp(got.sandbox_id, SB1),
	      "its operation, pending");
	op_rec_clear(&got);
	CHECK(put_intent(st, SB1, "op-0000000000000002", 512, 100, &err) < 0 && err.code == EEXIST,
	      "the same sandbox again: EEXIST (%s)", err.msg);
	CHECK(store_op_get(st, "op-0000000000000002", &got, &err) < 0 && err.code == ENOENT,
	      "... and its operation was not written either");
	sandbox(&s, SB2, SB_RUNNING, 200);
	op(&o, "op-0000000000000003", OP_PENDING, 200);
	CHECK(store_intent_put(st, &s, &o, intent, &err) < 0 && err.code == EINVAL &&
		      state_of(st, SB2) == SB__COUNT,
	      "a sandbox not creating: EINVAL, nothing written");
	sandbox_rec_clear(&s);
	json_decref(intent);
}

struct claimed {
	char seen[512];
	int n, stop_after;
	bool bad;
};

static int on_claim(const struct sandbox_rec *s, const json_t *intent, void *arg)
{
	struct claimed *c = arg;
	const char *kind = json_string_value(json_object_get(intent, "kind"));

	strcat(c->seen, s->id + 16);
	strcat(c->seen, kind ? kind : "?");
	strcat(c->seen, "@");
	strcat(c->seen, s->node_id);
	strcat(c->seen, ";");
	if (s->generation != 2)
		c->bad = true;
	return ++c->n == c->stop_after;
}

/* Claims: oldest first, each one's memory counted against the room, at most max; the rows
 * and their open operations move to the node; what was claimed is not claimed again. */
static void case_claim(struct store *st)
{
	struct claimed c = { 0 };
	space_err err = { 0 };

	put_intent(st, "sb-0000000000000001", "op-0000000000000001", 512, 100, &err);
	put_intent(st, "sb-0000000000000002", "op-0000000000000002", 1024, 200, &err);
	put_intent(st, "sb-0000000000000003", "op-0000000000000003", 256, 300, &err);
	put_intent(st, "sb-0000000000000004", "op-0000000000000004", 2048, 400, &err);
	put_sb(st, "sb-0000000000000005", SB_RUNNING, "", 64, 50); /* no intent: never claimed */

	CHECK(store_claim(st, N1, 10, 1000, on_claim, &c, &err) == 0, "claim %s", err.msg);
	CHECK(!strcmp(c.seen, "001create@node-1;003create@node-1;") && !c.bad,
	      "room 1000: 512 then 256 fit (1024 and 2048 skipped), oldest first: %s", c.seen);
	CHECK(!strcmp(node_of(st, "sb-0000000000000001"), N1) &&
		      !strcmp(node_of(st, "sb-0000000000000002"), ""),
	      "the rows now name the node");
	store_set_node(st, N1);
	CHECK(!strcmp(open_ops(st), "0000000000000001;0000000000000003;"),
	      "their open operations moved with them: %s", open_ops(st));
	store_set_node(st, "");

	memset(&c, 0, sizeof(c));
	CHECK(store_claim(st, N2, 1, 100000, on_claim, &c, &err) == 0 &&
		      !strcmp(c.seen, "002create@node-2;"),
	      "max 1: the oldest left: %s", c.seen);
	memset(&c, 0, sizeof(c));
	c.stop_after = 1;
	CHECK(store_claim(st, N2, 10, 100000, on_claim, &c, &err) == 0 &&
		      !strcmp(c.seen, "004create@node-2;"),
	      "what is claimed is not claimed again: %s", c.seen);
	memset(&c, 0, sizeof(c));
	CHECK(store_claim(st, N1, 10, 100000, on_claim, &c, &err) == 0 && c.n == 0,
	      "nothing left to claim");
	CHECK(store_claim(st, "", 10, 100000, on_claim, &c, &err) < 0 && err.code == EINVAL,
	      "a claim needs a node: EINVAL");
}

/* A callback that stops early does not undo the claim: every row taken stays taken. */
static void case_claim_stop(struct store *st)
{
	struct claimed c = { .stop_after = 1 };
	space_err err = { 0 };

	put_intent(st, "sb-0000000000000001", "op-0000000000000001", 100, 100, &err);
	put_intent(st, "sb-0000000000000002", "op-0000000000000002", 100, 200, &err);
	CHECK(store_claim(st, N1, 10, 1000, on_claim, &c, &err) == 0 && c.n == 1,
	      "the callback stopped after one");
	CHECK(!strcmp(node_of(st, "sb-0000000000000002"), N1), "both were claimed all the same");
}

/* A suspended sandbox no node owns may be restored by any node. */
static void case_intent_restore(struct store *st)
{
	struct claimed c = { 0 };
	struct op_rec o, got;
	space_err err = { 0 };

	put_sb(st, SB1, SB_SUSPENDED, "", 512, 100);
	put_sb(st, SB2, SB_RUNNING, "", 512, 200);
	put_sb(st, SB3, SB_SUSPENDED, N2, 512, 300);
	op(&o, "op-0000000000000001", OP_PENDING, 10);
	o.kind = OPK_RESTORE;
	CHECK(store_intent_restore(st, SB1, &o, &err) == 0, "restore intent %s", err.msg);
	CHECK(store_op_get(st, "op-0000000000000001", &got, &err) == 0 && got.state == OP_PENDING &&
		      got.kind == OPK_RESTORE,
	      "its operation is pending");
	op_rec_clear(&got);
	op(&o, "op-0000000000000002", OP_PENDING, 20);
	CHECK(store_intent_restore(st, SB2, &o, &err) < 0 && err.code == EINVAL,
	      "a running sandbox: EINVAL (%s)", err.msg);
	CHECK(store_intent_restore(st, SB3, &o, &err) < 0 && err.code == EINVAL,
	      "a suspended one a node owns: EINVAL (%s)", err.msg);
	CHECK(store_intent_restore(st, "sb-00000000000000ff", &o, &err) < 0 && err.code == ENOENT,
	      "an unknown one: ENOENT (%s)", err.msg);
	CHECK(store_op_get(st, "op-0000000000000002", &got, &err) < 0 && err.code == ENOENT,
	      "refused intents leave no operation");
	CHECK(store_claim(st, N1, 10, 4096, on_claim, &c, &err) == 0 && !strcmp(c.seen, "001restore@node-1;") &&
		      state_of(st, SB1) == SB_SUSPENDED,
	      "a node claims it, still suspended, with kind restore: %s", c.seen);
}

static int list_node(const struct node_rec *n, void *arg)
{
	struct listing *l = arg;

	strcat(l->seen, n->id);
	strcat(l->seen, "=");
	strcat(l->seen, node_state_name(n->state));
	strcat(l->seen, ";");
	return 0;
}

static void node(struct node_rec *n, const char *id, int64_t lease_expires)
{
	memset(n, 0, sizeof(*n));
	snprintf(n->id, sizeof(n->id), "%s", id);
	snprintf(n->api_url, sizeof(n->api_url), "http://10.0.0.1:7070");
	snprintf(n->data_url, sizeof(n->data_url), "http://10.0.0.1:7071");
	n->memory_mib = 65536;
	n->vcpus = 32;
	n->used_memory_mib = 2048;
	n->used_vcpus = 4;
	n->sandboxes = 3;
	n->started_ms = 1000;
	n->renewed_ms = lease_expires - 15000;
	n->lease_expires_ms = lease_expires;
}

static void case_nodes(struct store *st)
{
	struct node_rec n, got;
	struct listing l = { 0 };
	space_err err = { 0 };

	CHECK(!strcmp(node_state_name(NODE_UP), "up") && !strcmp(node_state_name(NODE_LOST), "lost") &&
		      node_state_parse("lost") == NODE_LOST && node_state_parse("gone") < 0,
	      "node states by name");
	node(&n, N2, 50000);
	CHECK(store_node_put(st, &n, &err) == 0, "register %s", err.msg);
	CHECK(store_node_get(st, N2, &got, &err) == 0 && got.state == NODE_UP &&
		      !strcmp(got.api_url, n.api_url) && !strcmp(got.data_url, n.data_url) &&
		      got.memory_mib == 65536 && got.vcpus == 32 && got.used_memory_mib == 2048 &&
		      got.used_vcpus == 4 && got.sandboxes == 3 && got.started_ms == 1000 &&
		      got.renewed_ms == 35000 && got.lease_expires_ms == 50000,
	      "a node round trips every field");
	node(&n, N1, 40000);
	store_node_put(st, &n, &err);
	n.lease_expires_ms = 90000;
	n.used_memory_mib = 4096;
	CHECK(store_node_put(st, &n, &err) == 0 && store_node_get(st, N1, &got, &err) == 0 &&
		      got.lease_expires_ms == 90000 && got.used_memory_mib == 4096,
	      "a renewal updates it");
	CHECK(store_node_each(st, list_node, &l, &err) == 0 && !strcmp(l.seen, "node-1=up;node-2=up;"),
	      "every node, by id: %s", l.seen);
	CHECK(store_node_get(st, "node-9", &got, &err) < 0 && err.code == ENOENT, "unknown: ENOENT");
	memset(&n, 0, sizeof(n));
	CHECK(store_node_put(st, &n, &err) < 0 && err.code == EINVAL, "no id: EINVAL");
}

/* A lease that ended: the node and its live sandboxes are lost, their open operations fail,
 * suspended ones are let go; other nodes and final states are untouched. */
static void case_expire(struct store *st)
{
	struct node_rec n;
	struct sandbox_rec s;
	struct op_rec o;
	struct listing l = { 0 };
	space_err err = { 0 };
	int nodes = -1, sbs = -1;

	node(&n, N1, 40000);
	store_node_put(st, &n, &err);
	node(&n, N2, 90000);
	store_node_put(st, &n, &err);
	put_sb(st, SB1, SB_RUNNING, N1, 512, 100);
	put_sb(st, SB2, SB_SUSPENDED, N1, 512, 200);
	put_sb(st, SB3, SB_DELETED, N1, 512, 300);
	put_sb(st, SB4, SB_RUNNING, N2, 512, 400);
	put_sb(st, "sb-0000000000000005", SB_FAILED, N1, 512, 500);
	put_sb(st, "sb-0000000000000006", SB_PAUSED, N1, 512, 600);
	store_set_node(st, N1);
	put_op(st, "op-0000000000000001", SB1, OP_RUNNING, 1);
	put_op(st, "op-0000000000000002", SB1, OP_SUCCEEDED, 2);
	store_set_node(st, N2);
	put_op(st, "op-0000000000000003", SB4, OP_PENDING, 3);
	store_set_node(st, "");

	CHECK(store_nodes_expire(st, 50000, &nodes, &sbs, &err) == 0 && nodes == 1 && sbs == 3,
	      "one node expired, three of its sandboxes changed: %d, %d (%s)", nodes, sbs, err.msg);
	CHECK(store_sandbox_get(st, SB1, &s, &err) == 0 && s.state == SB_LOST &&
		      !strcmp(s.error, "node node-1 lost: lease expired at 40000") && s.generation == 2 &&
		      s.prev_state == SB_RUNNING,
	      "a running one is lost with the reason: %s", s.error);
	sandbox_rec_clear(&s);
	CHECK(state_of(st, "sb-0000000000000006") == SB_LOST, "so is a paused one");
	CHECK(state_of(st, SB2) == SB_SUSPENDED && !strcmp(node_of(st, SB2), ""),
	      "a suspended one keeps its state and loses its node");
	CHECK(state_of(st, SB3) == SB_DELETED && state_of(st, "sb-0000000000000005") == SB_FAILED,
	      "deleted and failed ones stay as they are");
	CHECK(state_of(st, SB4) == SB_RUNNING && !strcmp(node_of(st, SB4), N2),
	      "another node's sandbox is untouched");
	CHECK(store_op_get(st, "op-0000000000000001", &o, &err) == 0 && o.state == OP_FAILED &&
		      !strcmp(o.error, "node node-1 lost: lease expired at 40000") && o.updated_ms == 50000,
	      "its open operation failed with the reason");
	CHECK(store_op_get(st, "op-0000000000000002", &o, &err) == 0 && o.state == OP_SUCCEEDED,
	      "a finished one stays finished");
	CHECK(store_op_get(st, "op-0000000000000003", &o, &err) == 0 && o.state == OP_PENDING,
	      "another node's operation is untouched");
	CHECK(store_node_each(st, list_node, &l, &err) == 0 && !strcmp(l.seen, "node-1=lost;node-2=up;"),
	      "the node is lost: %s", l.seen);
	CHECK(store_nodes_expire(st, 50000, &nodes, &sbs, &err) == 0 && nodes == 0 && sbs == 0,
	      "a second run finds nothing (safe to repeat)");
	CHECK(store_nodes_expire(st, 50000, NULL, NULL, &err) == 0, "counts may be NULL");

	/* the node that did not know: its writes bounce off the fence */
	store_set_node(st, N1);
	sandbox(&s, SB1, SB_RUNNING, 100);
	CHECK(store_sandbox_put(st, &s, &err) < 0 && err.code == ESTALE && state_of(st, SB1) == SB_LOST,
	      "the lost node's put: ESTALE");
	sandbox_rec_clear(&s);
	store_set_node(st, "");
	node(&n, N1, 200000);
	CHECK(store_node_put(st, &n, &err) == 0 && store_node_get(st, N1, &n, &err) == 0 &&
		      n.state == NODE_UP,
	      "it may register again (state up)");
}

static void case_ping(struct store *st)
{
	space_err err = { 0 };

	CHECK(store_ping(st, &err) == 0, "ping %s", err.msg);
	CHECK(!strcmp(store_backend(st), "sqlite") || !strcmp(store_backend(st), "postgres"),
	      "backend %s", store_backend(st));
}

/* A name's history, newest first, and tags dropped one by one or by name; a template's config
 * round trips. */
static void test_template_tags(struct store *st)
{
	struct template_rec t, got;
	struct listing l = { 0 };
	space_err err = { 0 };
	int n = -1;

	tpl(&t, '1', "hist", "hist:v1", "hist:latest");
	t.config = json_pack("{s:s,s:{s:s}}", "workdir", "/opt/app", "start", "cmd", "serve");
	CHECK(store_template_put(st, &t, &err) == 0, "put hist v1 with a config %s", err.msg);
	template_rec_clear(&t);
	tpl(&t, '2', "hist", "hist:v2", "hist:latest");
	t.created_ms += 100;
	store_template_put(st, &t, &err);
	template_rec_clear(&t);
	CHECK(store_template_get(st, hexdigest('1'), &got, &err) == 0 &&
		      !strcmp(json_string_value(json_object_get(got.config, "workdir")) ?: "", "/opt/app") &&
		      !strcmp(json_string_value(json_object_get(json_object_get(got.config, "start"), "cmd")) ?: "",
			      "serve"),
	      "a template's config round trips");
	template_rec_clear(&got);
	CHECK(store_template_get(st, hexdigest('2'), &got, &err) == 0 && (!got.config || json_object_size(got.config) == 0),
	      "no config reads back as none");
	template_rec_clear(&got);
	CHECK(store_template_named(st, "hist", list_tpl, &l, &err) == 0 &&
		      !strcmp(l.seen, "hist=hist:latest,hist:v2;hist=hist:v1;"),
	      "a name's history, newest first, with the tags each holds: %s", l.seen);
	CHECK(store_template_untag(st, "hist:v1", &n, &err) == 0 && n == 1, "untag hist:v1: %d", n);
	CHECK(resolve_code(st, "hist:v1") == ENOENT && resolves_to(st, "hist", '2'), "hist:v1 is gone, hist stays");
	CHECK(store_template_untag(st, "hist:v1", &n, &err) == 0 && n == 0, "untagging it again removes nothing");
	tpl(&t, '3', "histx", "histx:latest", NULL);
	store_template_put(st, &t, &err);
	template_rec_clear(&t);
	CHECK(store_template_untag(st, "hist", &n, &err) == 0 && n == 2, "untag every tag of hist: %d", n);
	CHECK(resolves_to(st, "histx", '3'), "a name it is the prefix of keeps its tags");
	CHECK(store_template_get(st, hexdigest('2'), &got, &err) == 0 && json_array_size(got.tags) == 0,
	      "the template stays by digest, with no tags");
	template_rec_clear(&got);
	CHECK(store_template_untag(st, "bad name", &n, &err) < 0 && err.code == EINVAL, "a bad name: EINVAL");
	store_template_untag(st, "histx", &n, &err);
}

/* Lifecycle events, webhooks and their deliveries (schema v10 / PostgreSQL's v5). */
static int count_event(const struct event_row *e, void *arg)
{
	char *out = arg;
	size_t n = strlen(out);

	snprintf(out + n, 256 - n, "%lld:%s;", (long long)e->seq, e->sandbox_id);
	return 0;
}

static int count_hook(const char *id, int64_t cursor, const char *body, void *arg)
{
	char *out = arg;
	size_t n = strlen(out);

	snprintf(out + n, 256 - n, "%s@%lld=%s;", id, (long long)cursor, body);
	return 0;
}

static int count_delivery(int64_t time_ms, const char *body, void *arg)
{
	char *out = arg;
	size_t n = strlen(out);

	snprintf(out + n, 256 - n, "%lld:%s;", (long long)time_ms, body);
	return 0;
}

static void test_events_rows(struct store *st)
{
	char out[256] = "";
	int64_t max = -1;
	space_err err = { 0 };

	CHECK(store_events_max(st, &max, &err) == 0 && max == 0, "no events: the last cursor is 0 %s", err.msg);
	for (int i = 1; i <= 4; i++) {
		struct event_row e = { .seq = i, .time_ms = 1000 * i, .body = "{}" };

		snprintf(e.sandbox_id, sizeof(e.sandbox_id), "sb-000000000000000%d", i % 2 + 1);
		CHECK(store_event_put(st, &e, &err) == 0, "event %d stored %s", i, err.msg);
	}
	CHECK(store_events_max(st, &max, &err) == 0 && max == 4, "the last cursor is 4");
	CHECK(store_events_each(st, 1, NULL, 2, count_event, out, &err) == 0 &&
		      !strcmp(out, "2:sb-0000000000000001;3:sb-0000000000000002;"),
	      "after 1, two of them, in order: %s", out);
	out[0] = '\0';
	CHECK(store_events_each(st, 0, "sb-0000000000000002", 0, count_event, out, &err) == 0 &&
		      !strcmp(out, "1:sb-0000000000000002;3:sb-0000000000000002;"),
	      "one sandbox's: %s", out);
	CHECK(store_events_prune(st, 2500, &err) == 0, "prune %s", err.msg);
	out[0] = '\0';
	CHECK(store_events_each(st, 0, NULL, 0, count_event, out, &err) == 0 &&
		      !strcmp(out, "3:sb-0000000000000002;4:sb-0000000000000001;"),
	      "older ones pruned: %s", out);

	CHECK(store_webhook_put(st, "wh-1", 4, "{\"a\":1}", &err) == 0 &&
		      store_webhook_put(st, "wh-2", 0, "{}", &err) == 0 && store_webhook_cursor(st, "wh-2", 3, &err) == 0 &&
		      store_webhook_cursor(st, "wh-1", 2, &err) == 0,
	      "webhooks stored %s", err.msg);
	out[0] = '\0';
	CHECK(store_webhooks_each(st, count_hook, out, &err) == 0 && !strcmp(out, "wh-1@4={\"a\":1};wh-2@3={};"),
	      "webhooks read back, a cursor never moves back: %s", out);
	CHECK(store_delivery_put(st, "wh-1", 3000, "{\"n\":1}", &err) == 0 &&
		      store_delivery_put(st, "wh-1", 3001, "{\"n\":2}", &err) == 0 &&
		      store_delivery_put(st, "wh-2", 3002, "{}", &err) == 0,
	      "deliveries stored %s", err.msg);
	out[0] = '\0';
	CHECK(store_deliveries_each(st, "wh-1", 0, count_delivery, out, &err) == 0 &&
		      !strcmp(out, "3001:{\"n\":2};3000:{\"n\":1};"),
	      "a webhook's deliveries, newest first: %s", out);
	CHECK(store_webhook_delete(st, "wh-1", &err) == 0, "delete %s", err.msg);
	CHECK(store_webhook_delete(st, "wh-1", &err) < 0 && err.code == ENOENT, "deleted twice: ENOENT");
	err_clear(&err);
	out[0] = '\0';
	CHECK(store_deliveries_each(st, "wh-1", 0, count_delivery, out, &err) == 0 && !out[0],
	      "its deliveries went with it: %s", out);
	CHECK(store_events_prune(st, 5000, &err) == 0, "prune %s", err.msg);
	out[0] = '\0';
	CHECK(store_deliveries_each(st, "wh-2", 0, count_delivery, out, &err) == 0 && !out[0],
	      "old deliveries pruned with old events: %s", out);
}

/* The records case: the round trips of every kind of row, on one store. */
static void case_records(struct store *st)
{
	test_templates(st);
	test_template_tags(st);
	test_sandboxes(st);
	test_ops(st);
	test_sessions(st);
	test_each_writes(st);
	test_kv(st);
	test_secrets(st);
	test_snapshots(st);
	test_tokens_and_kinds(st);
	test_events_rows(st);
}

struct store_case {
	const char *name;
	void (*fn)(struct store *st);
};

static const struct store_case cases[] = {
	{ "records", case_records },
	{ "ping", case_ping },
	{ "generation", case_generation },
	{ "put_if", case_put_if },
	{ "scope", case_scope },
	{ "fence", case_fence },
	{ "intent", case_intent },
	{ "claim", case_claim },
	{ "claim_stop", case_claim_stop },
	{ "intent_restore", case_intent_restore },
	{ "nodes", case_nodes },
	{ "expire", case_expire },
};

static const char *pg_url; /* SPACE_TEST_STORE_PG, or NULL: SQLite */
static const char *case_name;

/* Every case starts from an empty store: a new SQLite file named after it, or the
 * PostgreSQL database emptied. */
static struct store *fresh_store(void)
{
	struct store *st = NULL;
	space_err err = { 0 };
	char path[400];

	if (pg_url) {
		if (store_test_pg_reset(pg_url) < 0 || store_open_url(&st, pg_url, &err) < 0) {
			CHECK(0, "%s: open a fresh PostgreSQL store: %s", case_name, err.msg);
			return NULL;
		}
		return st;
	}
	snprintf(path, sizeof(path), "%s/%s.db", dir, case_name);
	if (store_open(&st, path, &err) < 0) {
		CHECK(0, "%s: open a fresh SQLite store: %s", case_name, err.msg);
		return NULL;
	}
	return st;
}

static void run_cases(const char *backend)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct store *st;

		case_name = cases[i].name;
		NOTE("%s: %s", backend, case_name);
		if (!(st = fresh_store()))
			continue;
		cases[i].fn(st);
		store_close(st);
	}
}

/* ---- SQLite only ---- */

static void test_open_url(void)
{
	struct store *st = NULL;
	space_err err = { 0 };
	char url[400];

	snprintf(url, sizeof(url), "sqlite:%s/url.db", dir);
	CHECK(store_open_url(&st, url, &err) == 0 && !strcmp(store_backend(st), "sqlite"),
	      "sqlite:PATH opens SQLite %s", err.msg);
	store_close(st);
	st = NULL;
	CHECK(store_open_url(&st, "mysql://u:secret@h/db", &err) < 0 && err.code == EINVAL &&
		      !strstr(err.msg, "secret"),
	      "another scheme: EINVAL, without the password: %s", err.msg);
	CHECK(store_open_url(&st, "sqlite:", &err) < 0 && err.code == EINVAL, "sqlite: without a path");
	CHECK(store_open_url(&st, "postgres://127.0.0.1:1/nodb?connect_timeout=1", &err) < 0 && !st,
	      "postgres:// goes to the PostgreSQL back end (here: %s)", err.msg);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	struct store *st = NULL;
	space_err err = { 0 };
	struct stat sb;

	snprintf(dir, sizeof(dir), "%s/test_store.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		SKIP_ALL("no temp dir");
	CHECK(store_open(&st, "/nonexistent/dir/state.db", &err) < 0 &&
		      strstr(err.msg, "/nonexistent/dir/state.db"),
	      "open in a missing directory fails with the path: %s", err.msg);

	run_cases("sqlite");

	/* what the records case left in its file */
	snprintf(db_path, sizeof(db_path), "%s/records.db", dir);
	CHECK(stat(db_path, &sb) == 0 && (sb.st_mode & 0777) == 0600, "the file is private (0600)");
	test_reopen();
	test_migrate_v1();
	test_open_url();
	rm_tree();

	if ((pg_url = getenv("SPACE_TEST_STORE_PG")) && *pg_url)
		run_cases("postgres");
	else
		NOTE("SPACE_TEST_STORE_PG unset: the cases ran against SQLite only");
	return DONE();
}
