/* store_names.c -- what every back end accepts as a template digest, name and tag (store.h:
 * store_template_put), so that both refuse the same input */
#include <string.h>

#include "store_backend.h"

static bool is_hex64(const char *s)
{
	for (int i = 0; i < 64; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false; /* also stops at a NUL before 64 chars */
	return s[64] == '\0';
}

bool store_is_digest(const char *s)
{
	return strncmp(s, "sha256:", 7) == 0 && is_hex64(s + 7);
}

static bool ref_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '-';
}

/* A name or a tag: 1..max of [A-Za-z0-9._-], not starting with '.' or '-'. */
bool store_is_word(const char *s, size_t len, size_t max)
{
	if (len == 0 || len > max || s[0] == '.' || s[0] == '-')
		return false;
	for (size_t i = 0; i < len; i++)
		if (!ref_char(s[i]))
			return false;
	return true;
}

/* "name:tag" */
bool store_is_tag(const char *s)
{
	const char *colon = strchr(s, ':');

	return colon && store_is_word(s, (size_t)(colon - s), STORE_NAME_MAX) &&
	       store_is_word(colon + 1, strlen(colon + 1), STORE_TAG_MAX);
}

