/* cmd_network.c -- `spacectl network`: replace a sandbox's egress policy */
#include <getopt.h>
#include <stdio.h>

#include "cleanup.h"
#include "cli.h"

static int run(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "allow", required_argument, NULL, 'A' },
		{ "deny", required_argument, NULL, 'D' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const struct ctl_verb *v = &ctl_verb_network;
	json_t *body = json_pack("{s:[],s:[]}", "allow", "deny"), *out = NULL;
	_cleanup_free_ char *path = NULL;
	space_err e = { 0 };
	int opt, rc = -1;

	if (!body)
		return CTL_EXIT_FAIL;
	while (rc < 0 && (opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (opt == 'A' || opt == 'D')
			rc = json_array_append_new(json_object_get(body, opt == 'A' ? "allow" : "deny"),
						   json_string(optarg)) < 0 ? CTL_EXIT_FAIL : -1;
		else
			rc = ctl_common_opt(c, v, opt);
	}
	if (rc < 0 && argc - optind != 1)
		rc = ctl_usage_error(v, "want one sandbox id");
	if (rc < 0 && !(path = ctl_sandbox_path(argv[optind], "/network")))
		rc = CTL_EXIT_FAIL;
	if (rc < 0) {
		if (ctl_call(c, "PUT", path, body, &out, &e) < 0) {
			err_wrap(&e, "%s", argv[optind]);
			rc = ctl_fail(c, &e, CTL_EXIT_FAIL);
		} else {
			rc = ctl_print_json(out);
		}
	}
	json_decref(body);
	json_decref(out);
	return rc;
}

const struct ctl_verb ctl_verb_network = {
	.name = "network",
	.usage = "ID [--allow E]... [--deny E]...",
	.summary = "replace a sandbox's egress policy (no --allow: it reaches nothing)",
	.help = "Entries: a name (pypi.org), a wildcard (*.example.com), an IPv4 CIDR, each\n"
		"optionally :port.  Deny wins.  The running sandbox's gateway applies it before\n"
		"this returns; prints the policy as stored.  Inject rules need the API\n"
		"(PUT /v1/sandboxes/{id}/network): this replaces them with none.\n",
	.run = run,
};
