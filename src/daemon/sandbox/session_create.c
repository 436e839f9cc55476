/* session_create.c -- command sessions: creation from a typed request, the H_EXEC they become,
 * and data-plane tokens */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "metrics/metrics.h"
#include "proto.h"
#include "runtime.h"
#include "store/store.h"


/* ---- tokens ---- */

void token_sha256_hex(const char *in, char out[65])
{
	unsigned char md[32];
	unsigned int mdlen = 0;
	static const char hex[] = "0123456789abcdef";

	EVP_Digest(in, strlen(in), md, &mdlen, EVP_sha256(), NULL);
	for (unsigned i = 0; i < 32; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[64] = '\0';
}

int token_generate(char token[65], char hash[65], space_err *err)
{
	unsigned char raw[32];
	static const char hex[] = "0123456789abcdef";

	if (RAND_bytes(raw, sizeof(raw)) != 1)
		return err_set(err, EIO, "generating token: no randomness");
	for (unsigned i = 0; i < 32; i++) {
		token[2 * i] = hex[raw[i] >> 4];
		token[2 * i + 1] = hex[raw[i] & 15];
	}
	token[64] = '\0';
	OPENSSL_cleanse(raw, sizeof(raw));
	token_sha256_hex(token, hash);
	return 0;
}

static int issue_token(struct session *s, int ttl_s, char token[65], space_err *err)
{
	if (token_generate(token, s->rec.token_hash, err) < 0)
		return -1;
	if (ttl_s <= 0)
		ttl_s = s->d->cfg.token_ttl_s;
	s->rec.token_expires_ms = now_ms() + (int64_t)ttl_s * 1000;
	return 0;
}

int session_check_token(struct session *s, const char *token, space_err *err)
{
	char h[65];

	if (!token || strlen(token) != 64)
		return err_set(err, EACCES, "invalid session token");
	token_sha256_hex(token, h);
	if (CRYPTO_memcmp(h, s->rec.token_hash, 64) != 0)
		return err_set(err, EACCES, "invalid session token");
	if (now_ms() >= s->rec.token_expires_ms)
		return err_set(err, EACCES, "session token expired; get a new one from the control plane");
	return 0;
}

/* ---- creation ---- */

/* Environment for the process: template defaults, then the sandbox's, then the session's. */
static json_t *merged_env(const struct session *s)
{
	json_t *env = json_object();

	if (!env)
		return NULL;
	if (json_is_object(s->sb->tmpl.env))
		json_object_update(env, s->sb->tmpl.env);
	if (json_is_object(s->sb->rec.env))
		json_object_update(env, s->sb->rec.env);
	if (json_is_object(s->rec.env))
		json_object_update(env, s->rec.env);
	return env;
}

int session_exec_encode(const struct session *s, struct proto_wr *w)
{
	static struct proto_exec x; /* large: keep it off the stack; single-threaded */
	json_t *env = merged_env(s), *v;
	const char *k;
	char **strs = NULL;
	size_t i, n = 0;
	int rc = -1;

	if (!env)
		return -1;
	memset(&x, 0, sizeof(x));
	x.flags = s->rec.stdin_open ? PROTO_EXEC_STDIN : 0;
	x.user = s->rec.user;
	x.cwd = s->rec.cwd;
	x.argc = (uint32_t)json_array_size(s->rec.argv);
	if (x.argc < 1 || x.argc > PROTO_EXEC_MAX_ARGS || json_object_size(env) > PROTO_EXEC_MAX_ARGS)
		goto out;
	for (i = 0; i < x.argc; i++)
		x.argv[i] = json_string_value(json_array_get(s->rec.argv, i));
	strs = calloc(json_object_size(env) + 1, sizeof(char *));
	if (!strs)
		goto out;
	json_object_foreach(env, k, v) {
		if (asprintf(&strs[n], "%s=%s", k, json_string_value(v) ? json_string_value(v) : "") < 0)
			goto out;
		x.envp[n] = strs[n];
		n++;
	}
	x.envc = (uint32_t)n;
	rc = proto_exec_encode(w, &x);
out:
	for (i = 0; strs && i < n; i++)
		free(strs[i]);
	free(strs);
	json_decref(env);
	return rc;
}

static int sandbox_for_session(struct spaced *d, const char *sb_id, struct sandbox **out, space_err *err)
{
	struct sandbox *sb = sandbox_find(d, sb_id);

	if (sb && !sandbox_visible(&sb->rec))
		return err_set(err, ENOENT, "no sandbox '%.64s'", sb_id);
	if (!sb) {
		struct sandbox_rec rec;

		/* (a record the control plane read before the handler: sandbox_get) */
		if (sandbox_get(d, sb_id, &rec, err) < 0)
			return -1;
		sandbox_rec_clear(&rec);
		return err_set(err, EBUSY, "sandbox %s is deleted", sb_id);
	}
	*out = sb;
	return 0;
}

static const char *template_workdir(const struct template_rec *t)
{
	const char *wd = json_string_value(json_object_get(t->config, "workdir"));

	return wd ? wd : "";
}

static int live_sessions(const struct sandbox *sb)
{
	int n = 0;

	for (const struct session *s = sb->sessions; s; s = s->next)
		n += !session_done(s);
	return n;
}

int sessions_live(struct spaced *d)
{
	int all = 0;

	for (const struct sandbox *o = d->sandboxes; o; o = o->next)
		all += live_sessions(o);
	return all;
}

/* Sessions not yet ended (created or running) hold a spool, a channel in the agent and a
 * process: bounded per sandbox and per daemon, answered 429 like other admission limits. */
static int session_admit(struct spaced *d, const struct sandbox *sb, space_err *err)
{
	int here = live_sessions(sb), all;

	if (d->cfg.max_sessions_per_sandbox > 0 && here >= d->cfg.max_sessions_per_sandbox)
		return err_set(err, EDQUOT, "at capacity: sandbox %s has %d sessions not yet ended, at most %d "
			       "(max_sessions_per_sandbox)", sb->rec.id, here, d->cfg.max_sessions_per_sandbox);
	if (d->cfg.max_sessions <= 0)
		return 0;
	all = sessions_live(d);
	if (all >= d->cfg.max_sessions)
		return err_set(err, EDQUOT, "at capacity: %d sessions not yet ended, at most %d (max_sessions)",
			       all, d->cfg.max_sessions);
	return 0;
}

int session_create(struct spaced *d, const char *sb_id, const struct exec_req *req,
		   struct session_rec *out, char token[65], space_err *err)
{
	struct session_rec r = { 0 };
	struct proto_wr w;
	struct sandbox *sb = NULL;
	struct session *s;
	int ttl = req->token_ttl_s, rc;

	if (sandbox_for_session(d, sb_id, &sb, err) < 0)
		return -1;
	if (sb->rec.state != SB_RUNNING)
		return err_set(err, EBUSY, "sandbox %s is %s, not running", sb_id, sb_state_name(sb->rec.state));
	if (session_admit(d, sb, err) < 0)
		return -1;
	r.argv = strlist_to_json(&req->argv);
	r.env = strmap_to_json(&req->env);
	if (!r.argv || !r.env) {
		session_rec_clear(&r);
		return err_set(err, ENOMEM, "out of memory");
	}
	/* No cwd asked for: the template's workdir (a build's WORKDIR), else the user's home. */
	snprintf(r.cwd, sizeof(r.cwd), "%s", req->cwd[0] ? req->cwd : template_workdir(&sb->tmpl));
	snprintf(r.user, sizeof(r.user), "%s", req->user);
	r.stdin_open = req->stdin_open;
	snprintf(r.tag, sizeof(r.tag), "%s", req->tag);
	if (req->pty_rows) {
		r.kind = SESS_KIND_PTY;
		r.pty_rows = req->pty_rows;
		r.pty_cols = req->pty_cols;
	}
	if (!r.user[0])
		snprintf(r.user, sizeof(r.user), "%s", sb->tmpl.default_user[0] ? sb->tmpl.default_user : "root");
	id_new(r.id, "ss-");
	snprintf(r.sandbox_id, sizeof(r.sandbox_id), "%s", sb->rec.id);
	r.chan = sb->rec.next_chan++;
	r.state = SESS_CREATED;
	r.created_ms = now_ms();
	s = session_alloc(sb, &r, err);
	session_rec_clear(&r);
	if (!s)
		return -1;
	/* Refuse now, not at attach, what cannot be sent to the agent in one frame. */
	proto_wr_init(&w);
	rc = session_open_encode(s, &w, NULL);
	proto_wr_free(&w);
	if (rc < 0) {
		sb->sessions = s->next;
		spool_close(s->spool);
		evbuffer_free(s->stdin_q);
		evbuffer_free(s->stdin_unacked);
		session_rec_clear(&s->rec);
		free(s);
		return err_set(err, EINVAL, "argv and environment together exceed %d KiB", PROTO_MAX_PAYLOAD / 1024);
	}
	if (issue_token(s, ttl, token, err) < 0)
		return -1;
	sandbox_persist(sb);
	session_persist(s);
	metrics_session_started();
	*out = s->rec;
	out->argv = json_incref(s->rec.argv);
	out->env = json_incref(s->rec.env);
	return 0;
}

int session_new_token(struct spaced *d, const char *sb_id, const char *ss_id, const struct session_rec *stored,
		      int ttl_s, char token[65], int64_t *expires_ms, space_err *err)
{
	struct sandbox *sb = NULL;
	struct session *s;

	if (sandbox_for_session(d, sb_id, &sb, err) < 0)
		return -1;
	s = stored && strcmp(stored->id, ss_id) == 0 ? session_find_stored(d, stored) : session_loaded(d, ss_id);
	if (!s || s->sb != sb)
		return err_set(err, ENOENT, "session %s not found in sandbox %s", ss_id, sb_id);
	if (ttl_s > SPEC_TOKEN_TTL_MAX)
		return err_set(err, EINVAL, "token_ttl_s must be at most %d", SPEC_TOKEN_TTL_MAX);
	if (issue_token(s, ttl_s, token, err) < 0)
		return -1;
	session_persist(s);
	*expires_ms = s->rec.token_expires_ms;
	return 0;
}


static struct session *open_internal(struct spaced *d, const char *sb_id, enum sess_kind kind,
				     const char *const *argv, const char *user, const json_t *env, const char *cwd,
				     bool with_stdin, bool build, space_err *err);

struct session *session_open_internal(struct spaced *d, const char *sb_id, enum sess_kind kind,
				      const char *const *argv, const char *user, bool with_stdin, space_err *err)
{
	return open_internal(d, sb_id, kind, argv, user, NULL, NULL, with_stdin, false, err);
}

struct session *session_open_internal_in(struct spaced *d, const char *sb_id, enum sess_kind kind,
					 const char *const *argv, const char *user, const json_t *env,
					 const char *cwd, bool with_stdin, space_err *err)
{
	return open_internal(d, sb_id, kind, argv, user, env, cwd, with_stdin, true, err);
}

/* The daemon's own VMs (a build's, a ready snapshot's builder, a warm pool's) are hidden from
 * clients: only the daemon opens sessions in them, through session_open_internal_in. */
static int sandbox_for_internal(struct spaced *d, const char *sb_id, bool build, struct sandbox **out,
				space_err *err)
{
	struct sandbox *sb = sandbox_find(d, sb_id);

	if (!build)
		return sandbox_for_session(d, sb_id, out, err);
	if (!sb || sb->rec.role == ROLE_USER)
		return err_set(err, ENOENT, "no VM of the daemon's own '%.64s'", sb_id);
	*out = sb;
	return 0;
}

static struct session *open_internal(struct spaced *d, const char *sb_id, enum sess_kind kind,
				     const char *const *argv, const char *user, const json_t *env, const char *cwd,
				     bool with_stdin, bool build, space_err *err)
{
	struct session_rec r = { 0 };
	struct sandbox *sb = NULL;
	struct session *s;
	struct proto_wr w;
	int rc;

	if (sandbox_for_internal(d, sb_id, build, &sb, err) < 0)
		return NULL;
	if (sb->rec.state != SB_RUNNING) {
		err_set(err, EBUSY, "sandbox %s is %s, not running", sb_id, sb_state_name(sb->rec.state));
		return NULL;
	}
	if (session_admit(d, sb, err) < 0)
		return NULL;
	r.argv = json_array();
	r.env = env ? json_deep_copy(env) : json_object();
	if (cwd && spec_check_cwd(cwd, err) < 0) {
		session_rec_clear(&r);
		return NULL;
	}
	snprintf(r.cwd, sizeof(r.cwd), "%s", cwd ? cwd : "");
	for (size_t i = 0; r.argv && argv[i]; i++)
		if (json_array_append_new(r.argv, json_string(argv[i])) < 0) {
			json_decref(r.argv);
			r.argv = NULL;
		}
	if (!r.argv || !r.env) {
		session_rec_clear(&r);
		err_set(err, ENOMEM, "out of memory");
		return NULL;
	}
	snprintf(r.user, sizeof(r.user), "%s",
		 user && *user ? user : sb->tmpl.default_user[0] ? sb->tmpl.default_user : "root");
	r.kind = kind;
	r.stdin_open = with_stdin;
	id_new(r.id, "ss-");
	snprintf(r.sandbox_id, sizeof(r.sandbox_id), "%s", sb->rec.id);
	r.chan = (sb->rec.next_chan++ & ~PROTO_CHAN_DAEMON) | PROTO_CHAN_DAEMON;
	r.state = SESS_CREATED;
	r.created_ms = now_ms();
	s = session_alloc(sb, &r, err);
	session_rec_clear(&r);
	if (!s)
		return NULL;
	s->ephemeral = true;
	sandbox_persist(sb); /* next_chan: a channel id is never used twice */
	proto_wr_init(&w);
	rc = session_open_encode(s, &w, NULL);
	proto_wr_free(&w);
	if (rc < 0 || session_start(s, err) < 0) {
		if (!err->code)
			err_set(err, EINVAL, "the operation's arguments exceed %d KiB", PROTO_MAX_PAYLOAD / 1024);
		session_on_error(s, EINVAL, err->msg);
		return NULL;
	}
	return s;
}
