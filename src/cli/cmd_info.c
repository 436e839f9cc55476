/* cmd_info.c -- `spacectl info`: the daemon's version, accelerator, capacity */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"

static void line(const char *key, const char *fmt_value)
{
	printf("%-17s %s\n", key, fmt_value);
}

static int run(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	json_t *info, *cap;
	space_err e = { 0 };
	char buf[256];
	int opt;

	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'j':
			c->json = true;
			break;
		case 'h':
			ctl_print_help(&ctl_verb_info, stdout);
			return CTL_EXIT_OK;
		default:
			return ctl_usage_error(&ctl_verb_info, NULL);
		}
	}
	if (optind != argc)
		return ctl_usage_error(&ctl_verb_info, "unexpected argument '%s'", argv[optind]);

	if (ctl_call(c, "GET", "/v1/info", NULL, &info, &e) < 0)
		return ctl_fail(c, &e, CTL_EXIT_FAIL);
	if (c->json) {
		int rc = ctl_print_json(info);

		json_decref(info);
		return rc;
	}
	cap = json_object_get(info, "capacity");
	line("version:", ctl_jstr(info, "version", "?"));
	line("accelerator:", ctl_jstr(info, "accelerator", "?"));
	if (*ctl_jstr(info, "accelerator_reason", ""))
		line("accelerator note:", ctl_jstr(info, "accelerator_reason", ""));
	line("data plane:", ctl_jstr(info, "data_plane_url", "?"));
	snprintf(buf, sizeof(buf), "%lld running of %lld max",
		 ctl_jint(cap, "sandboxes_running", 0), ctl_jint(cap, "max_sandboxes", 0));
	line("sandboxes:", buf);
	snprintf(buf, sizeof(buf), "%lld", ctl_jint(cap, "host_vcpus", 0));
	line("host vcpus:", buf);
	snprintf(buf, sizeof(buf), "%lld MiB", ctl_jint(cap, "host_memory_mib", 0));
	line("host memory:", buf);
	snprintf(buf, sizeof(buf), "%llds", ctl_jint(info, "uptime_s", 0));
	line("uptime:", buf);
	json_decref(info);
	return CTL_EXIT_OK;
}

const struct ctl_verb ctl_verb_info = {
	.name = "info",
	.usage = "[--json]",
	.summary = "show the daemon's version, accelerator and capacity",
	.help = "Options:\n"
		"  --json   print the raw JSON answer of GET /v1/info\n",
	.run = run,
};
