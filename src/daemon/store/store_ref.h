/* store_ref.h -- template names, tags, digests and references as every store back end
 * checks them (store_template_put, store_template_resolve): one parser for SQLite and PostgreSQL */
#ifndef SPACE_STORE_REF_H
#define SPACE_STORE_REF_H

#include <stdbool.h>
#include <stddef.h>

#define STORE_NAME_MAX 63 /* template_rec.name holds 64 */
#define STORE_TAG_MAX 127

/* "sha256:<64 lowercase hex>" */
bool store_ref_is_digest(const char *s);
/* A name or a tag part: 1..max of [A-Za-z0-9._-], not starting with '.' or '-'. */
bool store_ref_is_word(const char *s, size_t len, size_t max);
/* "name:tag" */
bool store_ref_is_tag(const char *s);

/* A parsed reference: "sha256:..." (digest only), "name@sha256:..." (name and digest), or
 * "name[:tag]" (tag, ":latest" added). */
struct store_ref {
	char name[STORE_NAME_MAX + 1]; /* "" unless name@digest */
	char digest[80];              /* "" for a tag */
	char tag[STORE_NAME_MAX + STORE_TAG_MAX + 2];
};
/* 0, or -1 when ref is malformed. */
int store_ref_parse(const char *ref, struct store_ref *out);

#endif
