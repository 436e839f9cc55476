/* cmd_fork.c -- `spacectl fork`: copies of a running sandbox, as it is at one instant */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>

#include "cleanup.h"
#include "cli.h"

static int print_children(const json_t *resp, space_err *e)
{
	return ctl_print_lines(stdout, resp, "children", e);
}

static int run(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "count", required_argument, NULL, 'n' },
		{ "wait", no_argument, NULL, 'w' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const struct ctl_verb *v = &ctl_verb_fork;
	_cleanup_free_ char *path = NULL;
	struct ctl_op o = { .method = "POST", .print = print_children };
	int opt, st;
	long n = 1;

	while ((opt = getopt_long(argc, argv, "hn:", opts, NULL)) != -1) {
		switch (opt) {
		case 'n':
			/* The daemon says how many at most: one limit, kept there. */
			if (ctl_parse_long(optarg, 1, INT_MAX, &n) < 0)
				return ctl_usage_error(v, "-n: not a count: '%s'", optarg);
			break;
		case 'w':
			o.wait = true;
			break;
		default:
			if ((st = ctl_common_opt(c, v, opt)) >= 0)
				return st;
		}
	}
	if (optind == argc)
		return ctl_usage_error(v, "missing sandbox id");
	if (argc - optind > 1)
		return ctl_usage_error(v, "unexpected argument '%s'", argv[optind + 1]);
	o.what = argv[optind];
	o.path = path = ctl_sandbox_path(o.what, "/fork");
	o.body = json_pack("{s:i}", "count", (int)n);
	st = o.body ? ctl_op_run(c, &o) : CTL_EXIT_FAIL;
	json_decref(o.body);
	return st;
}

const struct ctl_verb ctl_verb_fork = {
	.name = "fork",
	.usage = "[-n N] [--wait] [--json] ID",
	.summary = "copy a running or paused sandbox; prints the children's ids",
	.help = "Each child starts as the sandbox is at one instant (disk, memory, processes),\n"
		"then goes its own way with its own id and hostname; the sandbox goes on as it\n"
		"was.  The children's ids are printed one per line before any wait; `ls` shows\n"
		"them with START fork and PARENT the sandbox.\n"
		"\n"
		"Options:\n"
		"  -n, --count N   how many children (default 1; the daemon allows 1 to 16)\n"
		"  --wait          wait until every child runs; exit 1 if the fork failed\n"
		"  --json          print {\"sandbox\":..,\"operation\":..,\"children\":[..]}\n",
	.run = run,
};
