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

static int print_table(const json_t *list)
{
	static const char *const header[] = { "ID", "STATE", "TEMPLATE", "CREATED" };
	struct ctl_table t;
	const json_t *sb;
	size_t i;
	int rc = CTL_EXIT_OK;

	if (ctl_table_init(&t, 4, header) < 0)
		return CTL_EXIT_FAIL;
	json_array_foreach(list, i, sb) {
		const char *row[] = { ctl_jstr(sb, "id", "-"), ctl_jstr(sb, "state", "-"),
				      ctl_jstr(sb, "template", "-"),
				      ctl_jstr(sb, "created_at", "-") };

		if (ctl_table_add(&t, row) < 0) {
			rc = CTL_EXIT_FAIL;
			break;
		}
	}
	if (rc == CTL_EXIT_OK)
		ctl_table_print(&t, stdout);
	ctl_table_free(&t);
	return rc;
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
	space_err e = { 0 };
	json_t *resp = NULL;
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
		case 'j':
			c->json = true;
			break;
		case 'h':
			ctl_print_help(v, stdout);
			return CTL_EXIT_OK;
		default:
			return ctl_usage_error(v, NULL);
		}
	}
	if (optind != argc)
		return ctl_usage_error(v, "unexpected argument '%s'", argv[optind]);
	if (asprintf(&path, "/v1/sandboxes%s", query) < 0)
		return CTL_EXIT_FAIL;

	if (ctl_call(c, "GET", path, NULL, &resp, &e) < 0)
		return ctl_fail(c, &e, CTL_EXIT_FAIL);
	if (c->json) {
		rc = ctl_print_json(resp);
	} else if (!json_is_array(json_object_get(resp, "sandboxes"))) {
		err_set(&e, EBADMSG, "the answer has no \"sandboxes\" list");
		rc = ctl_fail(c, &e, CTL_EXIT_FAIL);
	} else {
		rc = print_table(json_object_get(resp, "sandboxes"));
	}
	json_decref(resp);
	return rc;
}

const struct ctl_verb ctl_verb_ls = {
	.name = "ls",
	.usage = "[--state S[,S...]] [--meta K=V]... [--json]",
	.summary = "list sandboxes",
	.help = "Prints ID STATE TEMPLATE CREATED; by default every sandbox not deleted.\n"
		"\n"
		"Options:\n"
		"  --state S     only these states (comma-separated, e.g. running,creating;\n"
		"                `deleted` lists deleted ones)\n"
		"  --meta K=V    only sandboxes whose metadata K is V (repeatable: all must match)\n"
		"  --json        print the raw JSON answer\n",
	.run = run,
};
