/* cmd_logs.c -- `spacectl logs`: a sandbox's guest console, raw */
#include <getopt.h>
#include <stdio.h>
#include <unistd.h>

#include "cleanup.h"
#include "cli.h"

static int run(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const struct ctl_verb *v = &ctl_verb_logs;
	_cleanup_free_ char *path = NULL;
	space_err e = { 0 };
	int opt;

	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'h':
			ctl_print_help(v, stdout);
			return CTL_EXIT_OK;
		default:
			return ctl_usage_error(v, NULL);
		}
	}
	if (argc - optind != 1)
		return ctl_usage_error(v, argc == optind ? "missing sandbox id" : "one sandbox id only");
	path = ctl_sandbox_path(argv[optind], "/logs");
	if (!path)
		return CTL_EXIT_FAIL;
	fflush(stdout);
	if (ctl_get_raw(c, path, STDOUT_FILENO, &e) < 0)
		return ctl_fail(c, &e, CTL_EXIT_FAIL);
	return CTL_EXIT_OK;
}

const struct ctl_verb ctl_verb_logs = {
	.name = "logs",
	.usage = "ID",
	.summary = "print a sandbox's guest console output (the last 1 MiB)",
	.help = "",
	.run = run,
};
