/* cmd_info.c -- `spacectl info`: the daemon's version, accelerator, capacity */
#include <stdio.h>

#include "cli.h"

static void line(const char *key, const char *fmt_value)
{
	printf("%-17s %s\n", key, fmt_value);
}

static int show(const struct ctl *c, const json_t *info)
{
	const json_t *cap = json_object_get(info, "capacity");
	char buf[256];

	(void)c;
	line("version:", ctl_jstr(info, "version", "?"));
	line("accelerator:", ctl_jstr(info, "accelerator", "?"));
	if (*ctl_jstr(info, "accelerator_reason", ""))
		line("accelerator note:", ctl_jstr(info, "accelerator_reason", ""));
	line("data plane:", ctl_jstr(info, "data_plane_url", "?"));
	snprintf(buf, sizeof(buf), "%lld running of %lld max",
		 ctl_jint(cap, "sandboxes_running", 0), ctl_jint(cap, "max_sandboxes", 0));
	line("sandboxes:", buf);
	snprintf(buf, sizeof(buf), "%lld MiB used of %lld MiB budget",
		 ctl_jint(cap, "memory_used_mib", 0), ctl_jint(cap, "memory_budget_mib", 0));
	line("memory:", buf);
	snprintf(buf, sizeof(buf), "%lld used of %lld budget", ctl_jint(cap, "vcpus_used", 0),
		 ctl_jint(cap, "vcpu_budget", 0));
	line("vcpus:", buf);
	snprintf(buf, sizeof(buf), "%lld MiB free", ctl_jint(cap, "tmpfs_free_mib", 0));
	line("snapshot tmpfs:", buf);
	snprintf(buf, sizeof(buf), "%lld", ctl_jint(cap, "host_vcpus", 0));
	line("host vcpus:", buf);
	snprintf(buf, sizeof(buf), "%lld MiB", ctl_jint(cap, "host_memory_mib", 0));
	line("host memory:", buf);
	snprintf(buf, sizeof(buf), "%llds", ctl_jint(info, "uptime_s", 0));
	line("uptime:", buf);
	return CTL_EXIT_OK;
}

static int run(struct ctl *c, int argc, char **argv)
{
	int rc = ctl_parse_json_only(c, &ctl_verb_info, argc, argv);

	return rc >= 0 ? rc : ctl_get_show(c, "/v1/info", show);
}

const struct ctl_verb ctl_verb_info = {
	.name = "info",
	.usage = "[--json]",
	.summary = "show the daemon's version, accelerator, capacity and what is used of it",
	.help = "Options:\n"
		"  --json   print the raw JSON answer of GET /v1/info\n",
	.run = run,
};
