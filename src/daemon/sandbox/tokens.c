/* tokens.c -- data-plane tokens scoped to a sandbox's files (docs/design/channels.md). A session
 * token opens one session (session_create.c); a files token opens the files routes of one
 * sandbox and nothing else. Kept in the store as hashes, so they survive a daemon restart. */
#include <openssl/crypto.h>
#include <string.h>

#include "runtime.h"
#include "spec.h"
#include "store/store.h"

#define SCOPE_FILES "files"

int token_issue_files(struct spaced *d, const char *sb_id, int ttl_s, char token[65], int64_t *expires_ms,
		      space_err *err)
{
	struct sandbox *sb = sandbox_find(d, sb_id);
	char hash[65];

	if (!sb || !sandbox_visible(&sb->rec))
		return err_set(err, ENOENT, "no sandbox '%.64s'", sb_id);
	if (ttl_s > SPEC_TOKEN_TTL_MAX)
		return err_set(err, EINVAL, "ttl_s must be at most %d", SPEC_TOKEN_TTL_MAX);
	if (ttl_s <= 0)
		ttl_s = d->cfg.token_ttl_s;
	if (token_generate(token, hash, err) < 0)
		return -1;
	*expires_ms = now_ms() + (int64_t)ttl_s * 1000;
	/* Expired tokens go as new ones come: the table stays as small as what is live. */
	if (store_tokens_prune(d->store, NULL, now_ms(), err) < 0 ||
	    store_token_put(d->store, hash, sb->rec.id, SCOPE_FILES, *expires_ms, err) < 0) {
		OPENSSL_cleanse(token, 65);
		return -1;
	}
	return 0;
}

int token_check_files(struct spaced *d, const char *sb_id, const char *token, space_err *err)
{
	char hash[65], owner[ID_LEN] = "", scope[16] = "";
	int64_t expires = 0;
	space_err e2 = { 0 };

	if (!token || strlen(token) != 64)
		return err_set(err, EACCES, "invalid token");
	token_sha256_hex(token, hash);
	if (store_token_get(d->store, hash, owner, scope, sizeof(scope), &expires, &e2) < 0) {
		if (e2.code != ENOENT)
			return err_set(err, EAGAIN, "%s", e2.msg);
		return err_set(err, EACCES, "invalid token");
	}
	if (strcmp(owner, sb_id) != 0 || strcmp(scope, SCOPE_FILES) != 0)
		return err_set(err, EACCES, "this token does not open sandbox %.64s's files", sb_id);
	if (now_ms() >= expires)
		return err_set(err, EACCES, "token expired; get a new one from the control plane");
	return 0;
}
