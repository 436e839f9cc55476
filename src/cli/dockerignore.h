/* dockerignore.h -- .dockerignore patterns with Docker's semantics, for the build context
 * of `spacectl template build`.  Pure: no file system.  Tests: tests/unit/test_cli_dockerignore.c.
 *
 * A line starting with '#' is a comment; the rest are trimmed, blank ones skipped.  A pattern
 * is cleaned like a path ("./a//b/" -> "a/b", a leading '/' dropped: patterns are relative to
 * the context root) and matches a whole path or any of its parent directories ("node_modules"
 * excludes everything below it).  '*' matches within one path component, '?' one character
 * but '/', "[a-z]" / "[^a-z]" a class, '\' escapes the next character, "**" any number of
 * components ("**" + "/x" matches "x" at any depth, "a/" + "**" everything under a).  A
 * pattern starting with '!' is an exception: it brings back what an earlier pattern
 * excluded.  The last pattern that matches decides.
 */
#ifndef SPACE_CLI_DOCKERIGNORE_H
#define SPACE_CLI_DOCKERIGNORE_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

struct dockerignore;

struct dockerignore *dockerignore_new(void);
void dockerignore_free(struct dockerignore *di);

/* Add the patterns of a .dockerignore file's text (name is for messages: ".dockerignore:3:
 * bad pattern \"[a\": ...").  0, or -1 with e set (nothing of a bad file is kept). */
int dockerignore_parse(struct dockerignore *di, const char *name, const char *text, size_t len,
		       space_err *e);
/* Add one pattern, as a line of the file after the comment check ("!Dockerfile" adds an
 * exception).  0, or -1 with e set for a bad pattern. */
int dockerignore_add(struct dockerignore *di, const char *pattern, space_err *e);

/* Whether path (relative to the context root, '/'-separated, no "./") is excluded. */
bool dockerignore_excluded(const struct dockerignore *di, const char *path);
/* Whether an exception could bring back something below the excluded directory dir: if not,
 * the walk need not go in. */
bool dockerignore_may_include_under(const struct dockerignore *di, const char *dir);
/* How many patterns were added (exceptions included). */
size_t dockerignore_count(const struct dockerignore *di);

/* Go's filepath.Clean: one '/' between components, "." dropped, "x/.." cancelled, ".." at
 * the root dropped, no trailing '/', "" -> ".".  A new string (NULL: out of memory).
 * Patterns are cleaned so; dockerfile.c cleans COPY and WORKDIR paths with it too. */
char *dockerignore_clean(const char *path);

#endif
