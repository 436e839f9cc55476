/* cmd_templates.c -- `spacectl templates`: the templates sandboxes boot from */
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* "sha256:0123456789abcdef..." -> "0123456789ab", like docker's short ids. */
static void short_digest(const char *d, char *out, size_t n)
{
	const char *colon = strchr(d, ':');

	snprintf(out, n, "%.12s", colon ? colon + 1 : d);
}

static int add_row(struct ctl_table *t, const json_t *tpl)
{
	char tags[1024] = "", digest[16], vcpus[24], mem[32];
	const json_t *tag;
	size_t j, used = 0;

	json_array_foreach(json_object_get(tpl, "tags"), j, tag) {
		const char *s = json_string_value(tag);
		int w;

		if (!s)
			continue;
		w = snprintf(tags + used, sizeof(tags) - used, "%s%s", used ? "," : "", s);
		if (w < 0 || (size_t)w >= sizeof(tags) - used)
			break; /* truncated: enough for a table */
		used += (size_t)w;
	}
	short_digest(ctl_jstr(tpl, "digest", "-"), digest, sizeof(digest));
	snprintf(vcpus, sizeof(vcpus), "%lld", ctl_jint(tpl, "vcpus", 0));
	snprintf(mem, sizeof(mem), "%lld MiB", ctl_jint(tpl, "memory_mib", 0));
	{
		const char *row[] = { ctl_jstr(tpl, "name", "-"), used ? tags : "-", digest, vcpus,
				      mem };

		return ctl_table_add(t, row);
	}
}

static int show(const struct ctl *c, const json_t *resp)
{
	static const char *const header[] = { "NAME", "TAGS", "DIGEST", "VCPUS", "MEMORY" };

	return ctl_print_list(c, resp, "templates", 5, header, add_row);
}

static int run(struct ctl *c, int argc, char **argv)
{
	int rc = ctl_parse_json_only(c, &ctl_verb_templates, argc, argv);

	return rc >= 0 ? rc : ctl_get_show(c, "/v1/templates", show);
}

const struct ctl_verb ctl_verb_templates = {
	.name = "templates",
	.usage = "[--json]",
	.summary = "list the templates sandboxes can be created from",
	.help = "Prints NAME TAGS DIGEST VCPUS MEMORY (the digest shortened to 12 hex digits).\n"
		"\n"
		"Options:\n"
		"  --json   print the raw JSON answer of GET /v1/templates\n",
	.run = run,
};
