/* cmd_secret.c -- `spacectl secret set|rm|ls`: secrets the egress gateways inject (the value
 * is read from stdin, so it never shows in ps or a shell's history) */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cleanup.h"
#include "cli.h"

#define SECRET_MAX 8192

static int set(struct ctl *c, const char *name, json_t *hosts)
{
	char buf[SECRET_MAX + 2];
	size_t n = fread(buf, 1, sizeof(buf) - 1, stdin);
	_cleanup_free_ char *path = ctl_path("/v1/secrets", name, "");
	space_err e = { 0 };
	json_t *out = NULL;
	int rc;

	/* One trailing newline (echo, a here-string) is not part of the value. */
	if (n && buf[n - 1] == '\n')
		n--;
	buf[n] = '\0';
	json_t *body = json_pack("{s:s%,s:O}", "value", buf, n, "hosts", hosts);
	explicit_bzero(buf, sizeof(buf));
	if (!path || !body) {
		json_decref(body);
		return CTL_EXIT_FAIL;
	}
	if (ctl_call(c, "PUT", path, body, &out, &e) < 0) {
		err_wrap(&e, "%s", name);
		rc = ctl_fail(c, &e, CTL_EXIT_FAIL);
	} else {
		rc = c->json ? ctl_print_json(out) : (printf("%s\n", ctl_jstr(out, "name", name)), CTL_EXIT_OK);
	}
	json_t *v = json_object_get(body, "value");
	explicit_bzero((char *)json_string_value(v), json_string_length(v));
	json_decref(body);
	json_decref(out);
	return rc;
}

static int sub_run(struct ctl *c, const struct ctl_verb *v, int argc, char **argv, json_t *hosts);

static int run(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "host", required_argument, NULL, 'H' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const struct ctl_verb *v = &ctl_verb_secret;
	json_t *hosts = json_array();
	int opt, rc = hosts ? -1 : CTL_EXIT_FAIL;

	while (rc < 0 && (opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (opt == 'H')
			rc = json_array_append_new(hosts, json_string(optarg)) < 0 ? CTL_EXIT_FAIL : -1;
		else
			rc = ctl_common_opt(c, v, opt);
	}
	if (rc >= 0) {
		json_decref(hosts);
		return rc;
	}
	rc = sub_run(c, v, argc, argv, hosts);
	json_decref(hosts);
	return rc;
}

static int sub_run(struct ctl *c, const struct ctl_verb *v, int argc, char **argv, json_t *hosts)
{
	space_err e = { 0 };
	json_t *out = NULL;
	int rc;
	int nargs = argc - optind;
	const char *sub = nargs > 0 ? argv[optind] : "";
	if (strcmp(sub, "ls") == 0 && nargs == 1) {
		if (ctl_call(c, "GET", "/v1/secrets", NULL, &out, &e) < 0)
			return ctl_fail(c, &e, CTL_EXIT_FAIL);
		if (c->json) {
			rc = ctl_print_json(out);
		} else {
			json_t *s;
			size_t i;
			json_array_foreach(json_object_get(out, "secrets"), i, s) {
				json_t *h;
				size_t k;

				printf("%s\t%s\t", ctl_jstr(s, "name", "?"), ctl_jstr(s, "updated_at", ""));
				json_array_foreach(json_object_get(s, "hosts"), k, h)
					printf("%s%s", k ? "," : "", json_string_value(h) ? json_string_value(h) : "?");
				printf("\n");
			}
			rc = CTL_EXIT_OK;
		}
		json_decref(out);
		return rc;
	}
	if (nargs != 2 || (strcmp(sub, "set") && strcmp(sub, "rm")))
		return ctl_usage_error(v, "want set NAME --host H..., rm NAME or ls");
	if (strcmp(sub, "set") == 0 && !json_array_size(hosts))
		return ctl_usage_error(v, "set needs --host: the hosts the secret may be sent to");
	if (strcmp(sub, "set") == 0)
		return set(c, argv[optind + 1], hosts);
	_cleanup_free_ char *path = ctl_path("/v1/secrets", argv[optind + 1], "");
	if (!path)
		return CTL_EXIT_FAIL;
	if (ctl_call(c, "DELETE", path, NULL, NULL, &e) < 0) {
		err_wrap(&e, "%s", argv[optind + 1]);
		return ctl_fail(c, &e, CTL_EXIT_FAIL);
	}
	return CTL_EXIT_OK;
}

const struct ctl_verb ctl_verb_secret = {
	.name = "secret",
	.usage = "[--json] set NAME --host H [--host H]... | rm NAME | ls",
	.summary = "secrets egress gateways inject (set reads the value from stdin)",
	.help = "  set NAME --host H...  store stdin (one trailing newline dropped) as secret NAME, to be\n"
		"             sent only to the hosts H (names or *.suffix); a policy injecting it\n"
		"             anywhere else is refused\n"
		"  rm NAME    delete it\n"
		"  ls         names, when each was last set, and their hosts; values are never shown\n",
	.run = run,
};
