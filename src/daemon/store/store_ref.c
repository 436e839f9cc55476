/* store_ref.c -- template names, tags, digests and references (store_ref.h) */
#include "store_ref.h"

#include <stdio.h>
#include <string.h>

static bool is_hex64(const char *s)
{
	for (int i = 0; i < 64; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false; /* also stops at a NUL before 64 chars */
	return s[64] == '\0';
}

bool store_ref_is_digest(const char *s)
{
	return strncmp(s, "sha256:", 7) == 0 && is_hex64(s + 7);
}

static bool ref_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '-';
}

bool store_ref_is_word(const char *s, size_t len, size_t max)
{
	if (len == 0 || len > max || s[0] == '.' || s[0] == '-')
		return false;
	for (size_t i = 0; i < len; i++)
		if (!ref_char(s[i]))
			return false;
	return true;
}

bool store_ref_is_tag(const char *s)
{
	const char *colon = strchr(s, ':');

	return colon && store_ref_is_word(s, (size_t)(colon - s), STORE_NAME_MAX) &&
	       store_ref_is_word(colon + 1, strlen(colon + 1), STORE_TAG_MAX);
}

int store_ref_parse(const char *ref, struct store_ref *out)
{
	const char *at;

	memset(out, 0, sizeof(*out));
	/* "sha256:" is never a name:tag: the digest form wins */
	if (strncmp(ref, "sha256:", 7) == 0) {
		if (!store_ref_is_digest(ref))
			return -1;
		snprintf(out->digest, sizeof(out->digest), "%s", ref);
		return 0;
	}
	if ((at = strchr(ref, '@'))) {
		size_t namelen = (size_t)(at - ref);

		if (!store_ref_is_word(ref, namelen, STORE_NAME_MAX) || !store_ref_is_digest(at + 1))
			return -1;
		snprintf(out->name, sizeof(out->name), "%.*s", (int)namelen, ref);
		snprintf(out->digest, sizeof(out->digest), "%s", at + 1);
		return 0;
	}
	if (strchr(ref, ':')) {
		if (!store_ref_is_tag(ref))
			return -1;
		snprintf(out->tag, sizeof(out->tag), "%s", ref);
		return 0;
	}
	if (!store_ref_is_word(ref, strlen(ref), STORE_NAME_MAX))
		return -1;
	snprintf(out->tag, sizeof(out->tag), "%s:latest", ref);
	return 0;
}
