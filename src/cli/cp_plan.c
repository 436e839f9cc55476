/* cp_plan.c -- `spacectl cp`'s decisions without I/O (see cp.h) */
#include "cp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cp_parse_remote(const char *arg, char **id, char **path, space_err *e)
{
	const char *colon = strchr(arg, ':'), *slash = strchr(arg, '/');

	*id = *path = NULL;
	if (!colon || (slash && slash < colon))
		return 0;
	if (colon == arg)
		return err_set(e, EINVAL, "'%s': no sandbox id before ':' (a local name with "
			       "a colon is written ./%s)", arg, arg);
	if (colon[1] != '/')
		return err_set(e, EINVAL, "'%s': the path in a sandbox must be absolute "
			       "(ID:/PATH)", arg);
	*id = strndup(arg, (size_t)(colon - arg));
	*path = strdup(colon + 1);
	if (!*id || !*path) {
		free(*id);
		free(*path);
		*id = *path = NULL;
		return err_set(e, ENOMEM, "out of memory");
	}
	return 1;
}

/* Length of path without its trailing slashes ("/" keeps its one). */
static size_t trimmed_len(const char *path)
{
	size_t n = strlen(path);

	while (n > 1 && path[n - 1] == '/')
		n--;
	return n;
}

char *cp_base(const char *path)
{
	size_t n = trimmed_len(path), i;

	if (n == 0)
		return strdup(".");
	if (n == 1 && path[0] == '/')
		return strdup("/");
	for (i = n; i > 0 && path[i - 1] != '/'; i--)
		;
	return strndup(path + i, n - i);
}

char *cp_dir(const char *path)
{
	size_t n = trimmed_len(path), i;

	if (n == 1 && path[0] == '/')
		return strdup("/");
	for (i = n; i > 0 && path[i - 1] != '/'; i--)
		;
	if (i == 0)
		return strdup(".");
	/* Drop the slashes before the last component. */
	while (i > 1 && path[i - 1] == '/')
		i--;
	if (i == 1 && path[0] == '/')
		return strdup("/");
	return strndup(path, i);
}

char *cp_join(const char *dir, const char *name)
{
	size_t n = strlen(dir);
	char *r;

	if (asprintf(&r, "%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", name) < 0)
		return NULL;
	return r;
}

char *cp_clean(const char *path)
{
	char *r = strdup(path);
	size_t n;

	if (!r)
		return NULL;
	n = strlen(r);
	for (;;) {
		if (n > 1 && r[n - 1] == '/') {
			n--;
		} else if (n >= 2 && r[n - 1] == '.' && r[n - 2] == '/') {
			n -= 2;
			if (n == 0)
				n = 1; /* "/." is "/" */
		} else {
			break;
		}
		r[n] = '\0';
	}
	return r;
}

bool cp_trailing_slash(const char *path)
{
	size_t n = strlen(path);

	return n > 1 && path[n - 1] == '/';
}

bool cp_names_contents(const char *path)
{
	char *b = cp_base(path);
	bool r = b && strcmp(b, ".") == 0;

	free(b);
	return r;
}

enum cp_kind cp_kind_of_type(const char *type)
{
	if (!type)
		return CP_OTHER;
	if (strcmp(type, "file") == 0)
		return CP_FILE;
	if (strcmp(type, "dir") == 0)
		return CP_DIR;
	if (strcmp(type, "symlink") == 0)
		return CP_SYMLINK;
	return CP_OTHER;
}

void cp_plan_free(struct cp_plan *p)
{
	free(p->dir);
	free(p->name);
	p->dir = p->name = NULL;
}

/* A name a copy may take: not ".", "..", "/" or empty. */
static bool usable_name(const char *name)
{
	return *name && strcmp(name, ".") != 0 && strcmp(name, "..") != 0 && !strchr(name, '/');
}

static int set_plan(struct cp_plan *p, char *dir, char *name, space_err *e)
{
	p->dir = dir;
	p->name = name;
	if (!dir) {
		free(name);
		p->name = NULL;
		return err_set(e, ENOMEM, "out of memory");
	}
	return 0;
}

int cp_plan_make(const char *src, enum cp_kind src_kind, const char *dst, enum cp_kind dst_kind,
		 struct cp_plan *p, space_err *e)
{
	bool contents = cp_names_contents(src);
	char *sbase, *dbase;
	int rc;

	p->dir = p->name = NULL;
	if (src_kind == CP_MISSING)
		return err_set(e, ENOENT, "%s: no such file or directory", src);
	if (src_kind == CP_OTHER)
		return err_set(e, EINVAL, "%s: not a regular file, directory or symbolic link", src);
	if (src_kind != CP_DIR && (contents || cp_trailing_slash(src)))
		return err_set(e, ENOTDIR, "%s: not a directory", src);
	if (dst_kind == CP_SYMLINK || dst_kind == CP_OTHER) {
		if (src_kind == CP_DIR)
			return err_set(e, ENOTDIR, "cannot copy a directory onto %s: not a directory",
				       dst);
		if (dst_kind == CP_OTHER)
			return err_set(e, EINVAL, "%s: not a regular file or directory: not "
				       "overwritten", dst);
		dst_kind = CP_FILE; /* a dangling link: replaced */
	}

	sbase = cp_base(src);
	if (!sbase)
		return err_set(e, ENOMEM, "out of memory");
	/* The root has no name of its own: it can only go as its contents. */
	if (strcmp(sbase, "/") == 0)
		contents = true;

	if (dst_kind == CP_DIR) {
		if (src_kind == CP_DIR && contents) {
			free(sbase);
			return set_plan(p, strdup(dst), NULL, e);
		}
		if (!usable_name(sbase)) {
			rc = err_set(e, EINVAL, "%s: name the directory itself, not '%s'", src, sbase);
			free(sbase);
			return rc;
		}
		return set_plan(p, strdup(dst), sbase, e);
	}
	free(sbase);

	if (dst_kind == CP_FILE) {
		if (src_kind == CP_DIR)
			return err_set(e, ENOTDIR, "cannot copy a directory onto the file %s", dst);
		if (cp_trailing_slash(dst))
			return err_set(e, ENOTDIR, "%s: not a directory", dst);
	} else if (src_kind != CP_DIR && cp_trailing_slash(dst)) {
		/* CP_MISSING: "DST/" promises a directory that is not there. */
		return err_set(e, ENOENT, "%s: no such directory (the destination directory must "
			       "exist)", dst);
	}
	/* DST itself is the new (or replaced) name. */
	dbase = cp_base(dst);
	if (!dbase)
		return err_set(e, ENOMEM, "out of memory");
	if (!usable_name(dbase)) {
		rc = err_set(e, ENOENT, "%s: no such directory", dst);
		free(dbase);
		return rc;
	}
	return set_plan(p, cp_dir(dst), dbase, e);
}
