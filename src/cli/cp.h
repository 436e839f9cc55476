/* cp.h -- what `spacectl cp` and `spacectl ls ID:PATH` decide before any I/O:
 * which argument names a sandbox, path pieces, and docker cp's rules for
 * where a copy lands (pure; tests/unit/test_cli_cp.c) */
#ifndef SPACE_CLI_CP_H
#define SPACE_CLI_CP_H

#include <stdbool.h>

#include "err.h"

/* What a path names, symbolic links not followed. */
enum cp_kind { CP_MISSING = 0, CP_FILE, CP_DIR, CP_SYMLINK, CP_OTHER };

/*
 * "ID:PATH" names PATH in sandbox ID: the argument has a ':' and no '/'
 * before it (so a local name with a colon is written ./a:b, as for docker).
 * Returns 1 with *id and *path (to free()); 0 for a local path ("-" is one);
 * -1 (e set) when the sandbox part is empty or PATH is not absolute.
 */
int cp_parse_remote(const char *arg, char **id, char **path, space_err *e);

/* The last component, trailing slashes ignored: "a/b/" -> "b", "/" -> "/",
 * "" -> ".".  To free(); NULL when out of memory. */
char *cp_base(const char *path);
/* The directory holding it: "a/b/" -> "a", "b" -> ".", "/b" -> "/". */
char *cp_dir(const char *path);
/* dir + "/" + name without doubling the slash. */
char *cp_join(const char *dir, const char *name);
/* path without trailing "/" and "/." components ("/a/b/./" -> "/a/b",
 * "/." -> "/"): what to ask a sandbox for when the copy is of contents. */
char *cp_clean(const char *path);
/* It ends in '/' (and is not "/" alone). */
bool cp_trailing_slash(const char *path);
/* Its last component is "." ("dir/.", "."): docker's "the contents of". */
bool cp_names_contents(const char *path);

/* The kind an API Entry's "type" names. */
enum cp_kind cp_kind_of_type(const char *type);

/*
 * Where a copy lands: the source's top goes into the existing directory
 * `dir` under `name`, or, when name is NULL, the source directory's entries
 * go into dir itself.  `dir` is in the destination's terms (a path on the
 * side DST is on).
 */
struct cp_plan {
	char *dir;
	char *name;
};

/*
 * docker cp's rules.  src_kind is what SRC is (not following a symbolic
 * link: a link is copied as a link); dst_kind what DST is, links followed
 * (a dangling link is CP_FILE: it is replaced).
 *   file or link -> existing dir (or DST ending in '/'): DST/basename(SRC);
 *                -> missing DST: DST itself (a DST ending in '/' must exist);
 *                -> existing file: replaced.
 *   dir          -> existing dir: DST/basename(SRC), or with SRC ending in
 *                   "/." its contents into DST;
 *                -> missing DST: created with SRC's contents;
 *                -> existing file: refused.
 * Returns 0, or -1 with e set (code ENOENT, ENOTDIR, EISDIR or EINVAL).
 */
int cp_plan_make(const char *src, enum cp_kind src_kind, const char *dst, enum cp_kind dst_kind,
		 struct cp_plan *p, space_err *e);
void cp_plan_free(struct cp_plan *p);

#endif
