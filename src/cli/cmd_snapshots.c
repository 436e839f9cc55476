/* cmd_snapshots.c -- `spacectl snapshots`: the named snapshots, and the ready ones creates clone */
#include <stdio.h>

#include "cli.h"

static int add_row(struct ctl_table *t, const json_t *snap)
{
	char size[32];

	ctl_fmt_bytes(ctl_jint(snap, "bytes", -1), size, sizeof(size));
	{
		const char *row[] = { ctl_jstr(snap, "id", "-"),      ctl_jstr(snap, "name", "-"),
				      ctl_jstr(snap, "kind", "-"),    ctl_jstr(snap, "state", "-"),
				      ctl_jstr(snap, "template", "-"), size,
				      ctl_jstr(snap, "created_at", "-") };

		return ctl_table_add(t, row);
	}
}

static int show(const struct ctl *c, const json_t *resp)
{
	static const char *const header[] = { "ID",       "NAME", "KIND",   "STATE",
					      "TEMPLATE", "SIZE", "CREATED" };

	return ctl_print_list(c, resp, "snapshots", 7, header, add_row);
}

static int run(struct ctl *c, int argc, char **argv)
{
	int rc = ctl_parse_json_only(c, &ctl_verb_snapshots, argc, argv);

	return rc >= 0 ? rc : ctl_get_show(c, "/v1/snapshots", show);
}

const struct ctl_verb ctl_verb_snapshots = {
	.name = "snapshots",
	.usage = "[--json]",
	.summary = "list snapshots",
	.help = "Prints ID NAME KIND STATE TEMPLATE SIZE CREATED.  KIND is named (taken with\n"
		"`snapshot`) or ready (kept by the daemon for each template, so that creates\n"
		"start as clones; it has no name).  SIZE is the disk the snapshot takes.\n"
		"\n"
		"Options:\n"
		"  --json   print the raw JSON answer of GET /v1/snapshots\n",
	.run = run,
};
