/* tokens.c -- data-plane tokens scoped to one sandbox (docs/design/channels.md). A session
 * token opens one session (session_create.c); a files token opens the files routes of one
 * sandbox and nothing else; an envd token opens that sandbox's E2B envd and code-interpreter
 * routes (docs/design/e2b.md). Kept in the store as hashes, so they survive a daemon restart. */
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "runtime.h"
#include "spec.h"
#include "store/store.h"

int token_issue_files(struct spaced *d, const char *sb_id, int ttl_s, char token[65], int64_t *expires_ms,
		      space_err *err)
{
	if (ttl_s > SPEC_TOKEN_TTL_MAX)
		return err_set(err, EINVAL, "ttl_s must be at most %d", SPEC_TOKEN_TTL_MAX);
	return token_issue(d, sb_id, TOKEN_SCOPE_FILES, ttl_s > 0 ? ttl_s : d->cfg.token_ttl_s, token,
			   expires_ms, err);
}

/* ---- what this process issued, in memory ----
 * A token is checked on every data-plane request that carries one (E2B's envd, the files
 * routes): those this process issued are answered from memory, so the loop makes no round
 * trip to the database for them; others (issued before a restart, or by another process) are
 * read from the store once and then kept too. Entries go when they expire, and with their
 * sandbox (token_forget_sandbox). Bounded: past TOKEN_MEM_MAX, new ones are not kept (the
 * store answers them). */
#define TOKEN_MEM_BUCKETS 1024
#define TOKEN_MEM_MAX 65536

struct token_mem {
	char hash[65];
	char owner[ID_LEN];
	char scope[16];
	int64_t expires_ms;
	struct token_mem *next;
};

struct token_mem_table {
	struct token_mem *b[TOKEN_MEM_BUCKETS];
	size_t n;
};

static struct token_mem **bucket(struct token_mem_table *t, const char *hash)
{
	unsigned v = 0;

	for (int i = 0; i < 8; i++)
		v = v * 16 + (unsigned)(hash[i] <= '9' ? hash[i] - '0' : (hash[i] | 0x20) - 'a' + 10);
	return &t->b[v % TOKEN_MEM_BUCKETS];
}

/* Expired entries of one bucket go as it is walked. */
static struct token_mem *mem_find(struct token_mem_table *t, const char *hash, int64_t now)
{
	struct token_mem **pp = bucket(t, hash), *e;

	while ((e = *pp)) {
		if (now >= e->expires_ms) {
			*pp = e->next;
			free(e);
			t->n--;
			continue;
		}
		if (strcmp(e->hash, hash) == 0)
			return e;
		pp = &e->next;
	}
	return NULL;
}

static void mem_put(struct spaced *d, const char *hash, const char *owner, const char *scope, int64_t expires_ms)
{
	struct token_mem_table *t = d->tokens;
	struct token_mem *e, **b;

	if (!t && !(t = d->tokens = calloc(1, sizeof(*t))))
		return;
	if (mem_find(t, hash, now_ms()) || t->n >= TOKEN_MEM_MAX || !(e = calloc(1, sizeof(*e))))
		return;
	snprintf(e->hash, sizeof(e->hash), "%s", hash);
	snprintf(e->owner, sizeof(e->owner), "%s", owner);
	snprintf(e->scope, sizeof(e->scope), "%s", scope);
	e->expires_ms = expires_ms;
	b = bucket(t, hash);
	e->next = *b;
	*b = e;
	t->n++;
}

void token_forget_sandbox(struct spaced *d, const char *sb_id)
{
	struct token_mem_table *t = d->tokens;

	for (size_t i = 0; t && i < TOKEN_MEM_BUCKETS; i++) {
		struct token_mem **pp = &t->b[i], *e;

		while ((e = *pp)) {
			if (strcmp(e->owner, sb_id) == 0) {
				*pp = e->next;
				free(e);
				t->n--;
			} else {
				pp = &e->next;
			}
		}
	}
}

int token_forget_where(struct spaced *d, const char *sb_id, const char *scope, const char *hash_prefix)
{
	struct token_mem_table *t = d->tokens;
	size_t plen = hash_prefix ? strlen(hash_prefix) : 0;
	int n = 0;

	for (size_t i = 0; t && i < TOKEN_MEM_BUCKETS; i++) {
		struct token_mem **pp = &t->b[i], *e;

		while ((e = *pp)) {
			if (strcmp(e->owner, sb_id) == 0 && strcmp(e->scope, scope) == 0 &&
			    (!plen || strncmp(e->hash, hash_prefix, plen) == 0)) {
				*pp = e->next;
				free(e);
				t->n--;
				n++;
			} else {
				pp = &e->next;
			}
		}
	}
	return n;
}

void tokens_free(struct spaced *d)
{
	struct token_mem_table *t = d->tokens;

	for (size_t i = 0; t && i < TOKEN_MEM_BUCKETS; i++)
		while (t->b[i]) {
			struct token_mem *e = t->b[i];

			t->b[i] = e->next;
			free(e);
		}
	free(t);
	d->tokens = NULL;
}

/* ---- issuing and checking ---- */

/* The row is written on the store's thread, in order with the writes queued before it: a
 * reply that hands the token out goes through a barrier (api_reply_stored, E2B's
 * reply_stored) and so leaves once the row is in. (A struct token_row: what a read gets.) */

static void write_token(struct store *conn, void *arg)
{
	struct token_row *w = arg;

	/* Expired tokens go as new ones come: the table stays as small as what is live. */
	if (store_tokens_prune(conn, NULL, now_ms(), &w->err) < 0)
		log_warn("tokens: pruning expired ones: %s", w->err.msg);
	err_clear(&w->err);
	w->rc = store_token_put(conn, w->hash, w->owner, w->scope, w->expires_ms, &w->err);
}

static void token_written(void *arg, bool ran)
{
	struct token_row *w = arg;

	if (ran && w->rc < 0)
		log_warn("token of sandbox %s: %s (it opens its routes on this process only)", w->owner, w->err.msg);
	explicit_bzero(w->hash, sizeof(w->hash));
	free(w);
}

int token_issue(struct spaced *d, const char *sb_id, const char *scope, int64_t ttl_s, char token[65],
		int64_t *expires_ms, space_err *err)
{
	struct sandbox *sb = sandbox_find(d, sb_id);
	struct token_row *w;
	char hash[65];

	if (!sb || !sandbox_visible(&sb->rec))
		return err_set(err, ENOENT, "no sandbox '%.64s'", sb_id);
	if (token_generate(token, hash, err) < 0)
		return -1;
	*expires_ms = now_ms() + (int64_t)ttl_s * 1000;
	w = calloc(1, sizeof(*w));
	if (!w) {
		OPENSSL_cleanse(token, 65);
		return err_set(err, ENOMEM, "out of memory");
	}
	snprintf(w->hash, sizeof(w->hash), "%s", hash);
	snprintf(w->owner, sizeof(w->owner), "%s", sb->rec.id);
	snprintf(w->scope, sizeof(w->scope), "%s", scope);
	w->expires_ms = *expires_ms;
	if (store_async(d->store, write_token, token_written, w, err) < 0) {
		free(w);
		OPENSSL_cleanse(token, 65);
		return -1;
	}
	mem_put(d, hash, sb->rec.id, scope, *expires_ms);
	return 0;
}

static int verdict(const char *sb_id, const char *scope, const char *owner, const char *got, int64_t expires,
		   space_err *err)
{
	if (strcmp(owner, sb_id) != 0 || strcmp(got, scope) != 0)
		return err_set(err, EACCES, "this token does not open sandbox %.64s's %s routes", sb_id, scope);
	if (now_ms() >= expires)
		return err_set(err, EACCES, "token expired; get a new one from the control plane");
	return 0;
}

int token_check(struct spaced *d, const char *sb_id, const char *scope, const char *token,
		struct token_row *row, space_err *err)
{
	char hash[65];
	struct token_mem *e;

	memset(row, 0, sizeof(*row));
	if (!token || strlen(token) != 64)
		return err_set(err, EACCES, "invalid token");
	token_sha256_hex(token, hash);
	if (d->tokens && (e = mem_find(d->tokens, hash, now_ms())))
		return verdict(sb_id, scope, e->owner, e->scope, e->expires_ms, err);
	/* Not seen here yet (issued before a restart, or by another process): read it on the
	 * store's thread (token_read), then token_verdict. */
	snprintf(row->hash, sizeof(row->hash), "%s", hash);
	return 1;
}

void token_read(struct store *conn, struct token_row *row)
{
	row->rc = store_token_get(conn, row->hash, row->owner, row->scope, sizeof(row->scope), &row->expires_ms,
				  &row->err);
}

int token_verdict(struct spaced *d, const char *sb_id, const char *scope, const struct token_row *row,
		  space_err *err)
{
	if (row->rc < 0) {
		if (row->err.code != ENOENT)
			return err_set(err, EAGAIN, "%s", row->err.msg);
		return err_set(err, EACCES, "invalid token");
	}
	if (sandbox_find(d, row->owner))
		mem_put(d, row->hash, row->owner, row->scope, row->expires_ms);
	return verdict(sb_id, scope, row->owner, row->scope, row->expires_ms, err);
}

struct token_job *token_job_new(const char *sb_id, const char *scope, const struct token_row *row)
{
	struct token_job *j = calloc(1, sizeof(*j));

	if (j) {
		snprintf(j->sb_id, sizeof(j->sb_id), "%s", sb_id);
		snprintf(j->scope, sizeof(j->scope), "%s", scope);
		j->row = *row;
	}
	return j;
}

void token_job_read(struct store *conn, void *arg)
{
	token_read(conn, &((struct token_job *)arg)->row);
}

int token_job_verdict(struct spaced *d, const struct token_job *j, space_err *err)
{
	return token_verdict(d, j->sb_id, j->scope, &j->row, err);
}
