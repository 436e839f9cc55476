/* cmd_templates.c -- `spacectl templates`: the templates sandboxes boot from */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* "sha256:0123456789abcdef..." -> "0123456789ab", like docker's short ids. */
static void short_digest(const char *d, char *out, size_t n)
{
	const char *colon = strchr(d, ':');

	snprintf(out, n, "%.12s", colon ? colon + 1 : d);
}

static int print_table(const json_t *list)
{
	static const char *const header[] = { "NAME", "TAGS", "DIGEST", "VCPUS", "MEMORY" };
	struct ctl_table t;
	const json_t *tpl;
	size_t i;
	int rc = CTL_EXIT_OK;

	if (ctl_table_init(&t, 5, header) < 0)
		return CTL_EXIT_FAIL;
	json_array_foreach(list, i, tpl) {
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
			const char *row[] = { ctl_jstr(tpl, "name", "-"), used ? tags : "-",
					      digest, vcpus, mem };

			if (ctl_table_add(&t, row) < 0) {
				rc = CTL_EXIT_FAIL;
				break;
			}
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
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	space_err e = { 0 };
	json_t *resp;
	int opt, rc;

	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'j':
			c->json = true;
			break;
		case 'h':
			ctl_print_help(&ctl_verb_templates, stdout);
			return CTL_EXIT_OK;
		default:
			return ctl_usage_error(&ctl_verb_templates, NULL);
		}
	}
	if (optind != argc)
		return ctl_usage_error(&ctl_verb_templates, "unexpected argument '%s'",
				       argv[optind]);

	if (ctl_call(c, "GET", "/v1/templates", NULL, &resp, &e) < 0)
		return ctl_fail(c, &e, CTL_EXIT_FAIL);
	if (c->json)
		rc = ctl_print_json(resp);
	else if (!json_is_array(json_object_get(resp, "templates")))
		rc = ctl_fail(c, &(space_err){ .code = EBADMSG,
					      .msg = "the answer has no \"templates\" list" },
			      CTL_EXIT_FAIL);
	else
		rc = print_table(json_object_get(resp, "templates"));
	json_decref(resp);
	return rc;
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
