/* cmd_timeout.c -- `spacectl timeout`: when a sandbox expires, and what then */
#include <getopt.h>
#include <stdio.h>

#include "cleanup.h"
#include "cli.h"

static void show(const json_t *sb)
{
	const char *id = ctl_jstr(sb, "id", "?"), *at = ctl_jstr(sb, "expires_at", NULL);

	if (at)
		printf("%s: expires at %s, then %s\n", id, at, ctl_jstr(sb, "on_timeout", "?"));
	else
		printf("%s: never expires\n", id);
}

static int set_timeout(struct ctl *c, const char *id, json_t *body)
{
	_cleanup_free_ char *path = ctl_sandbox_path(id, "/timeout");
	json_t *sb = NULL;
	space_err e = { 0 };
	int rc;

	if (!path)
		return CTL_EXIT_FAIL;
	if (ctl_call(c, "POST", path, body, &sb, &e) < 0) {
		err_wrap(&e, "%s", id);
		return ctl_fail(c, &e, CTL_EXIT_FAIL);
	}
	if (c->json) {
		rc = ctl_print_json(sb);
	} else {
		show(sb);
		rc = CTL_EXIT_OK;
	}
	json_decref(sb);
	return rc;
}

static int run(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "on-timeout", required_argument, NULL, 'o' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const struct ctl_verb *v = &ctl_verb_timeout;
	const char *on_timeout = NULL;
	json_t *body;
	int opt, st;
	long secs;

	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (opt == 'o')
			on_timeout = optarg;
		else if ((st = ctl_common_opt(c, v, opt)) >= 0)
			return st;
	}
	if (on_timeout && !ctl_on_timeout_ok(on_timeout))
		return ctl_usage_error(v, "--on-timeout: want suspend, suspend_idle or delete, not '%s'", on_timeout);
	if (argc - optind < 2)
		return ctl_usage_error(v, "want a sandbox id and seconds");
	if (argc - optind > 2)
		return ctl_usage_error(v, "unexpected argument '%s'", argv[optind + 2]);
	if (ctl_parse_long(argv[optind + 1], 0, CTL_SECONDS_MAX, &secs) < 0)
		return ctl_usage_error(v, "not seconds: '%s'", argv[optind + 1]);
	body = json_pack("{s:I}", "timeout_s", (json_int_t)secs);
	if (!body || (on_timeout && json_object_set_new(body, "on_timeout", json_string(on_timeout)) < 0)) {
		json_decref(body);
		return CTL_EXIT_FAIL;
	}
	st = set_timeout(c, argv[optind], body);
	json_decref(body);
	return st;
}

const struct ctl_verb ctl_verb_timeout = {
	.name = "timeout",
	.usage = "[--on-timeout suspend|suspend_idle|delete] [--json] ID SECONDS",
	.summary = "set when a sandbox expires, counted from now (0: never)",
	.help = "Prints when it expires and what happens then.  A suspended sandbox that is\n"
		"woken gets its timeout counted again from then.\n"
		"\n"
		"Options:\n"
		"  --on-timeout A   delete (the default when created) or suspend it when it\n"
		"                   expires; suspend_idle: suspend it once it has been idle SECONDS\n"
		"                   (no session running, no port traffic; a request wakes it);\n"
		"                   without it, what the sandbox had stays\n"
		"  --json           print the sandbox's JSON\n",
	.run = run,
};
