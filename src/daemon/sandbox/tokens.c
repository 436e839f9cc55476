/* tokens.c -- data-plane tokens scoped to one sandbox (docs/design/channels.md). A session
 * token opens one session (session_create.c); a files token opens the files routes of one
 * sandbox and nothing else; an envd token opens that sandbox's E2B envd and code-interpreter
 * routes (docs/design/e2b.md). Kept in the store as hashes, so they survive a daemon restart. */
#include <openssl/crypto.h>
#include <string.h>

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

int token_check_files(struct spaced *d, const char *sb_id, const char *token, space_err *err)
{
	return token_check(d, sb_id, TOKEN_SCOPE_FILES, token, err);
}

int token_issue(struct spaced *d, const char *sb_id, const char *scope, int64_t ttl_s, char token[65],
		int64_t *expires_ms, space_err *err)
{
	struct sandbox *sb = sandbox_find(d, sb_id);
	char hash[65];

	if (!sb || !sandbox_visible(&sb->rec))
		return err_set(err, ENOENT, "no sandbox '%.64s'", sb_id);
	if (token_generate(token, hash, err) < 0)
		return -1;
	*expires_ms = now_ms() + (int64_t)ttl_s * 1000;
	/* Expired tokens go as new ones come: the table stays as small as what is live. */
	if (store_tokens_prune(d->store, NULL, now_ms(), err) < 0 ||
	    store_token_put(d->store, hash, sb->rec.id, scope, *expires_ms, err) < 0) {
		OPENSSL_cleanse(token, 65);
		return -1;
	}
	return 0;
}

int token_check(struct spaced *d, const char *sb_id, const char *scope, const char *token, space_err *err)
{
	char hash[65], owner[ID_LEN] = "", got[16] = "";
	int64_t expires = 0;
	space_err e2 = { 0 };

	if (!token || strlen(token) != 64)
		return err_set(err, EACCES, "invalid token");
	token_sha256_hex(token, hash);
	if (store_token_get(d->store, hash, owner, got, sizeof(got), &expires, &e2) < 0) {
		if (e2.code != ENOENT)
			return err_set(err, EAGAIN, "%s", e2.msg);
		return err_set(err, EACCES, "invalid token");
	}
	if (strcmp(owner, sb_id) != 0 || strcmp(got, scope) != 0)
		return err_set(err, EACCES, "this token does not open sandbox %.64s's %s routes", sb_id, scope);
	if (now_ms() >= expires)
		return err_set(err, EACCES, "token expired; get a new one from the control plane");
	return 0;
}
