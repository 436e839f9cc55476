/* cmd_expose.c -- `spacectl expose`: a URL that opens one port of a sandbox (a token's, or the
 * port made public) */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cleanup.h"
#include "cli.h"

static int call(struct ctl *c, const char *method, const char *path, json_t *body, const char *what, json_t **out)
{
	space_err e = { 0 };

	if (ctl_call(c, method, path, body, out, &e) < 0) {
		err_wrap(&e, "%s", what);
		return ctl_fail(c, &e, CTL_EXIT_FAIL);
	}
	return 0;
}

static int run(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "public", no_argument, NULL, 'p' },
		{ "private", no_argument, NULL, 'P' },
		{ "ttl", required_argument, NULL, 't' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const struct ctl_verb *v = &ctl_verb_expose;
	int opt, st, mode = 0; /* 0: a token, 1: public, -1: private again */
	long ttl = 0, port;
	json_t *body, *out = NULL;
	char sub[48];

	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (opt == 'p')
			mode = 1;
		else if (opt == 'P')
			mode = -1;
		else if (opt == 't') {
			if (ctl_parse_long(optarg, 1, 86400, &ttl) < 0)
				return ctl_usage_error(v, "--ttl: want seconds from 1 to 86400, not '%s'", optarg);
		} else if ((st = ctl_common_opt(c, v, opt)) >= 0) {
			return st;
		}
	}
	if (argc - optind != 2)
		return ctl_usage_error(v, "want a sandbox id and a port");
	if (ctl_parse_long(argv[optind + 1], 1, 65535, &port) < 0)
		return ctl_usage_error(v, "not a port (1..65535): '%s'", argv[optind + 1]);
	if (mode && ttl)
		return ctl_usage_error(v, "--ttl is for a token, not with --public or --private");
	if (mode)
		snprintf(sub, sizeof(sub), "/ports/%ld", port);
	else
		snprintf(sub, sizeof(sub), "/ports/%ld/tokens", port);
	_cleanup_free_ char *path = ctl_sandbox_path(argv[optind], sub);
	body = mode ? json_pack("{s:b}", "public", mode > 0) : ttl ? json_pack("{s:I}", "ttl_s", (json_int_t)ttl)
							     : json_object();
	if (!path || !body) {
		json_decref(body);
		return CTL_EXIT_FAIL;
	}
	st = call(c, mode ? "PUT" : "POST", path, body, argv[optind], &out);
	json_decref(body);
	if (st)
		return st;
	if (c->json)
		st = ctl_print_json(out);
	else if (mode)
		printf("%s%s\n", ctl_jstr(out, "url", "?"), mode > 0 ? "" : " (private: tokens open it)");
	else
		printf("%s\n", ctl_jstr(out, "browser_url", "?")); /* opens it once in a browser (a cookie from then on) */
	json_decref(out);
	return st ? st : CTL_EXIT_OK;
}

const struct ctl_verb ctl_verb_expose = {
	.name = "expose",
	.usage = "[--json] [--ttl SECONDS | --public | --private] ID PORT",
	.summary = "print a URL that opens a sandbox's port (a token's; or make it public)",
	.help = "Without options: a token for the port (the daemon's data-plane TTL, or --ttl) and the URL\n"
		"that opens it once in a browser (?space_token=, then an HttpOnly cookie for that port);\n"
		"scripts send the token as X-Space-Token (--json shows it). --public opens the port to\n"
		"anyone who has the URL, with no token; --private closes it again.\n",
	.run = run,
};
