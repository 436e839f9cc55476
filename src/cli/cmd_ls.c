/* cmd_ls.c -- `spacectl ls`: list sandboxes, filtered by state and metadata */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "cli.h"

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

static int run(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "state", required_argument, NULL, 's' },
		{ "meta", required_argument, NULL, 'M' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const struct ctl_verb *v = &ctl_verb_ls;
	_cleanup_free_ char *query = strdup(""), *path = NULL;
	int opt, rc;

	if (!query)
		return CTL_EXIT_FAIL;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
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
	if (optind != argc)
		return ctl_usage_error(v, "unexpected argument '%s'", argv[optind]);
	if (asprintf(&path, "/v1/sandboxes%s", query) < 0)
		return CTL_EXIT_FAIL;
	return ctl_get_show(c, path, show);
}

const struct ctl_verb ctl_verb_ls = {
	.name = "ls",
	.usage = "[--state S[,S...]] [--meta K=V]... [--json]",
	.summary = "list sandboxes",
	.help = "Prints ID STATE TEMPLATE CREATED START PARENT; by default every sandbox not\n"
		"deleted.  START says how it started: boot (a cold boot), clone (from a\n"
		"snapshot), pool (a VM kept ready) or fork (from PARENT).\n"
		"\n"
		"Options:\n"
		"  --state S     only these states (comma-separated, e.g. running,creating;\n"
		"                `deleted` lists deleted ones)\n"
		"  --meta K=V    only sandboxes whose metadata K is V (repeatable: all must match)\n"
		"  --json        print the raw JSON answer\n",
	.run = run,
};
