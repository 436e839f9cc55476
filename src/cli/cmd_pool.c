/* cmd_pool.c -- `spacectl pool`: how many VMs of a template to keep booted and waiting */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>

#include "cleanup.h"
#include "cli.h"

static int show(const struct ctl *c, const json_t *tpl)
{
	const json_t *pool = json_object_get(tpl, "pool");

	(void)c;
	printf("%s: pool size %lld, %lld ready\n", ctl_jstr(tpl, "name", "?"),
	       ctl_jint(pool, "size", 0), ctl_jint(pool, "ready", 0));
	return CTL_EXIT_OK;
}

static int run(struct ctl *c, int argc, char **argv)
{
	const struct ctl_verb *v = &ctl_verb_pool;
	_cleanup_free_ char *path = NULL;
	json_t *body = NULL, *tpl = NULL;
	space_err e = { 0 };
	int rc = ctl_parse_opts(c, v, argc, argv, NULL);
	long size;

	if (rc >= 0)
		return rc;
	if (argc - optind < 2)
		return ctl_usage_error(v, "want a template and a size");
	if (argc - optind > 2)
		return ctl_usage_error(v, "unexpected argument '%s'", argv[optind + 2]);
	/* The daemon says how large a pool may be: one limit, kept there. */
	if (ctl_parse_long(argv[optind + 1], 0, INT_MAX, &size) < 0)
		return ctl_usage_error(v, "not a size: '%s'", argv[optind + 1]);
	path = ctl_path("/v1/templates", argv[optind], "/pool");
	body = json_pack("{s:i}", "size", (int)size);
	if (!path || !body) {
		json_decref(body);
		return CTL_EXIT_FAIL;
	}
	if (ctl_call(c, "PUT", path, body, &tpl, &e) < 0) {
		err_wrap(&e, "%s", argv[optind]);
		rc = ctl_fail(c, &e, CTL_EXIT_FAIL);
	} else {
		rc = c->json ? ctl_print_json(tpl) : show(c, tpl);
	}
	json_decref(body);
	json_decref(tpl);
	return rc;
}

const struct ctl_verb ctl_verb_pool = {
	.name = "pool",
	.usage = "[--json] TEMPLATE SIZE",
	.summary = "keep SIZE VMs of a template booted, so creates start at once",
	.help = "Creates of the template at its own size take a pooled VM (START pool in `ls`)\n"
		"and the pool is refilled behind them; 0 empties it.  Prints the pool's size\n"
		"and how many VMs are ready now (they boot in the background).\n"
		"\n"
		"Options:\n"
		"  --json   print the template's JSON (with \"pool\" and \"ready_snapshot\")\n",
	.run = run,
};
