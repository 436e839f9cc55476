/* cmd_secret.c -- `spacectl secret set|rm|ls`: secrets the egress gateways inject (the value
 * is read from stdin, so it never shows in ps or a shell's history) */
#include <stdio.h>
#include <string.h>

#include "cleanup.h"
#include "cli.h"

#define SECRET_MAX 8192

static int set(struct ctl *c, const char *name)
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
	json_t *body = json_pack("{s:s%}", "value", buf, n);
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

static int run(struct ctl *c, int argc, char **argv)
{
	const struct ctl_verb *v = &ctl_verb_secret;
	space_err e = { 0 };
	json_t *out = NULL;
	int rc = ctl_parse_opts(c, v, argc, argv, NULL);

	if (rc >= 0)
		return rc;
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
			json_array_foreach(json_object_get(out, "secrets"), i, s)
				printf("%s\t%s\n", ctl_jstr(s, "name", "?"), ctl_jstr(s, "updated_at", ""));
			rc = CTL_EXIT_OK;
		}
		json_decref(out);
		return rc;
	}
	if (nargs != 2 || (strcmp(sub, "set") && strcmp(sub, "rm")))
		return ctl_usage_error(v, "want set NAME, rm NAME or ls");
	if (strcmp(sub, "set") == 0)
		return set(c, argv[optind + 1]);
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
	.usage = "[--json] set NAME | rm NAME | ls",
	.summary = "secrets egress gateways inject (set reads the value from stdin)",
	.help = "  set NAME   store stdin (one trailing newline dropped) as secret NAME\n"
		"  rm NAME    delete it\n"
		"  ls         names and when each was last set; values are never shown\n",
	.run = run,
};
