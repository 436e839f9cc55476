/* lsfmt.h -- `spacectl ls ID:PATH`'s output from the API's entries (pure;
 * tests/unit/test_cli_ls.c) */
#ifndef SPACE_CLI_LSFMT_H
#define SPACE_CLI_LSFMT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

/* The name an entry is shown under: its path below base ("sub/f" for
 * /base/sub/f), else its name. */
const char *ls_rel_name(const json_t *entry, const char *base);

/* "-rwxr-xr-x": the entry's "permissions", else made from type and mode. */
void ls_permissions(const json_t *entry, char out[11]);

/* Print the entries: one name a line, or with long_fmt an `ls -l`-like
 * table: permissions, owner, group, size, mtime (local time, YYYY-MM-DD
 * HH:MM), name and, for a link, " -> target".  Control characters in names
 * show as '?'.  Returns 0, or -1 when entries is not an array. */
int ls_print(FILE *out, const json_t *entries, const char *base, bool long_fmt);

#endif
