/* cmd_ls.c -- `spacectl ls`: list sandboxes, filtered by state and metadata */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "cli.h"
#include "cp.h"
#include "files.h"
#include "lsfmt.h"

/* The deepest listing the API gives (-R). */
#define DEPTH_MAX 64

/* Append "<sep><name>=<escaped value>" to a growing query string. */
static int query_add(char **q, const char *name, const char *value)
{
	_cleanup_free_ char *ev = ctl_escape(value), *en = ctl_escape(name);
	char *nq;

	if (!ev || !en)
		return -1;
	if (asprintf(&nq, "%s%s%s=%s", *q, **q ? "&" : "?", en, ev) < 0)
		return -1;
	free(*q);
	*q = nq;
	return 0;
}

static int add_row(struct ctl_table *t, const json_t *sb)
{
	/* New columns go at the end: scripts cut the first four. */
	const char *row[] = { ctl_jstr(sb, "id", "-"),         ctl_jstr(sb, "state", "-"),
			      ctl_jstr(sb, "template", "-"),   ctl_jstr(sb, "created_at", "-"),
			      ctl_jstr(sb, "start_kind", "-"), ctl_jstr(sb, "parent_id", "-") };

	return ctl_table_add(t, row);
}

static int show(const struct ctl *c, const json_t *resp)
{
	static const char *const header[] = { "ID",      "STATE", "TEMPLATE",
					      "CREATED", "START", "PARENT" };

	return ctl_print_list(c, resp, "sandboxes", 6, header, add_row);
}

/* `ls ID:PATH`: GET /files/list, or for a non-directory its stat alone. */
static int ls_files(struct ctl *c, const char *id, const char *path, const char *user,
		    long depth, bool long_fmt)
{
	struct files f = { .c = c, .id = id, .user = user };
	json_t *resp = NULL, *entry = NULL;
	space_err e = { 0 };
	char extra[32];
	int rc;

	snprintf(extra, sizeof(extra), "&depth=%ld", depth);
	if (files_get_json(&f, "/files/list", path, extra, &resp, &e) < 0) {
		if (e.code != ENOTDIR)
			return ctl_fail(c, &e, CTL_EXIT_FAIL);
		/* A file: shown alone, as ls(1) shows one. */
		if (files_stat(&f, path, &entry, &e) < 0 || !entry)
			return ctl_fail(c, &e, CTL_EXIT_FAIL);
		json_object_set_new(entry, "name", json_string(path));
		resp = json_pack("{s:s,s:[O]}", "path", path, "entries", entry);
		json_decref(entry);
		if (!resp)
			return CTL_EXIT_FAIL;
	}
	if (c->json) {
		rc = ctl_print_json(resp);
	} else if (ls_print(stdout, json_object_get(resp, "entries"), path, long_fmt) < 0) {
		err_set(&e, EBADMSG, "the answer has no \"entries\" list");
		rc = ctl_fail(c, &e, CTL_EXIT_FAIL);
	} else {
		rc = CTL_EXIT_OK;
	}
	json_decref(resp);
	return rc;
}

static int run(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "state", required_argument, NULL, 's' },
		{ "meta", required_argument, NULL, 'M' },
		{ "long", no_argument, NULL, 'l' },
		{ "recursive", no_argument, NULL, 'R' },
		{ "depth", required_argument, NULL, 'D' },
		{ "user", required_argument, NULL, 'u' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const struct ctl_verb *v = &ctl_verb_ls;
	_cleanup_free_ char *query = strdup(""), *path = NULL, *id = NULL, *fpath = NULL;
	bool long_fmt = false, file_opts = false;
	const char *user = NULL;
	space_err e = { 0 };
	long depth = 1;
	int opt, rc;

	if (!query)
		return CTL_EXIT_FAIL;
	while ((opt = getopt_long(argc, argv, "hlR", opts, NULL)) != -1) {
		switch (opt) {
		case 'l':
			long_fmt = file_opts = true;
			break;
		case 'R':
			depth = DEPTH_MAX;
			file_opts = true;
			break;
		case 'D':
			if (ctl_parse_long(optarg, 1, DEPTH_MAX, &depth) < 0)
				return ctl_usage_error(v, "--depth: expected 1 to %d, got '%s'",
						       DEPTH_MAX, optarg);
			file_opts = true;
			break;
		case 'u':
			user = optarg;
			file_opts = true;
			break;
		case 's':
			if (query_add(&query, "state", optarg) < 0)
				return CTL_EXIT_FAIL;
			break;
		case 'M': {
			const char *eq = strchr(optarg, '=');
			_cleanup_free_ char *name = NULL;

			if (!eq || eq == optarg)
				return ctl_usage_error(v, "--meta: expected K=V, got '%s'", optarg);
			if (asprintf(&name, "metadata.%.*s", (int)(eq - optarg), optarg) < 0 ||
			    query_add(&query, name, eq + 1) < 0)
				return CTL_EXIT_FAIL;
			break;
		}
		default:
			if ((rc = ctl_common_opt(c, v, opt)) >= 0)
				return rc;
		}
	}
	if (argc - optind == 1) {
		rc = cp_parse_remote(argv[optind], &id, &fpath, &e);
		if (rc < 0)
			return ctl_usage_error(v, "%s", e.msg);
		if (rc == 0)
			return ctl_usage_error(v, "'%s': expected ID:PATH, a path in a sandbox",
					       argv[optind]);
		if (*query)
			return ctl_usage_error(v, "--state and --meta list sandboxes, not files");
		return ls_files(c, id, fpath, user, depth, long_fmt);
	}
	if (optind != argc)
		return ctl_usage_error(v, "unexpected argument '%s'", argv[optind]);
	if (file_opts)
		return ctl_usage_error(v, "-l, -R, --depth and --user need ID:PATH");
	if (asprintf(&path, "/v1/sandboxes%s", query) < 0)
		return CTL_EXIT_FAIL;
	return ctl_get_show(c, path, show);
}

const struct ctl_verb ctl_verb_ls = {
	.name = "ls",
	.usage = "[--state S[,S...]] [--meta K=V]... [--json]\n"
		 "       spacectl ls [-l] [-R | --depth N] [--user U] [--json] ID:PATH",
	.summary = "list sandboxes, or the files at a path in one",
	.help = "Prints ID STATE TEMPLATE CREATED START PARENT; by default every sandbox not\n"
		"deleted.  START says how it started: boot (a cold boot), clone (from a\n"
		"snapshot), pool (a VM kept ready) or fork (from PARENT).\n"
		"\n"
		"With ID:PATH, lists the directory PATH in sandbox ID instead, one name a line\n"
		"(below PATH when deeper than one level), sorted by name, a directory's\n"
		"entries after it; a file is listed alone.\n"
		"\n"
		"Options:\n"
		"  --state S     only these states (comma-separated, e.g. running,creating;\n"
		"                `deleted` lists deleted ones)\n"
		"  --meta K=V    only sandboxes whose metadata K is V (repeatable: all must match)\n"
		"  -l, --long    (files) permissions, owner, group, size, mtime, name -> target\n"
		"  -R, --recursive  (files) the whole tree (64 levels)\n"
		"  --depth N     (files) N levels (1 to 64; default 1)\n"
		"  --user U      (files) list as this user (default: the template's)\n"
		"  --json        print the raw JSON answer\n",
	.run = run,
};
