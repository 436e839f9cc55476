/* cmd_ports.c -- `spacectl ports`: what listens in a sandbox and what is exposed, one port a line */
#include <stdio.h>
#include <stdlib.h>

#include "cleanup.h"
#include "cli.h"

static const char *yes_no(const json_t *v)
{
	return json_is_null(v) || !v ? "?" : json_is_true(v) ? "yes" : "no";
}

static void show(const json_t *out)
{
	const json_t *e;
	size_t i;

	printf("%-6s %-10s %-16s %-7s %-6s %s\n", "PORT", "LISTENING", "ADDRESS", "PUBLIC", "TOKENS", "URL");
	json_array_foreach(json_object_get(out, "ports"), i, e) {
		printf("%-6lld %-10s %-16s %-7s %-6lld %s\n", (long long)json_integer_value(json_object_get(e, "port")),
		       yes_no(json_object_get(e, "listening")), ctl_jstr(e, "address", "-"),
		       yes_no(json_object_get(e, "public")), (long long)json_integer_value(json_object_get(e, "tokens")),
		       ctl_jstr(e, "url", ""));
	}
}

static int run(struct ctl *c, int argc, char **argv)
{
	const struct ctl_verb *v = &ctl_verb_ports;
	space_err e = { 0 };
	json_t *out = NULL;
	int rc = ctl_parse_opts(c, v, argc, argv, NULL);

	if (rc >= 0)
		return rc;
	if (argc - optind != 1)
		return ctl_usage_error(v, "want one sandbox id");
	_cleanup_free_ char *path = ctl_sandbox_path(argv[optind], "/ports");
	if (!path)
		return CTL_EXIT_FAIL;
	if (ctl_call(c, "GET", path, NULL, &out, &e) < 0) {
		err_wrap(&e, "%s", argv[optind]);
		return ctl_fail(c, &e, CTL_EXIT_FAIL);
	}
	if (c->json) {
		rc = ctl_print_json(out);
	} else {
		show(out);
		rc = CTL_EXIT_OK;
	}
	json_decref(out);
	return rc;
}

const struct ctl_verb ctl_verb_ports = {
	.name = "ports",
	.usage = "[--json] ID",
	.summary = "list the ports a sandbox listens on and those exposed, with their URLs",
	.help = "LISTENING is read from the guest's /proc/net/tcp (? when it does not run); a port bound\n"
		"to 127.0.0.1 alone listens but cannot be reached from outside. PUBLIC ports open to\n"
		"anyone; others to a token (spacectl expose).\n",
	.run = run,
};
