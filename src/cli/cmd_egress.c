/* cmd_egress.c -- `spacectl egress`: what a sandbox's gateway decided, one JSON line each */
#include <stdio.h>
#include <stdlib.h>

#include "cleanup.h"
#include "cli.h"

static int run(struct ctl *c, int argc, char **argv)
{
	const struct ctl_verb *v = &ctl_verb_egress;
	space_err e = { 0 };
	json_t *out = NULL, *rec;
	size_t i;
	int rc = ctl_parse_opts(c, v, argc, argv, NULL);

	if (rc >= 0)
		return rc;
	if (argc - optind != 1)
		return ctl_usage_error(v, "want one sandbox id");
	_cleanup_free_ char *path = ctl_sandbox_path(argv[optind], "/egress");
	if (!path)
		return CTL_EXIT_FAIL;
	if (ctl_call(c, "GET", path, NULL, &out, &e) < 0) {
		err_wrap(&e, "%s", argv[optind]);
		return ctl_fail(c, &e, CTL_EXIT_FAIL);
	}
	if (c->json) {
		rc = ctl_print_json(out);
	} else {
		json_array_foreach(json_object_get(out, "records"), i, rec) {
			char *line = json_dumps(rec, JSON_COMPACT);
			if (line)
				printf("%s\n", line);
			free(line);
		}
		rc = CTL_EXIT_OK;
	}
	json_decref(out);
	return rc;
}

const struct ctl_verb ctl_verb_egress = {
	.name = "egress",
	.usage = "[--json] ID",
	.summary = "print a sandbox's egress audit (its last 1000 decisions, newest last)",
	.help = "One JSON object per line: time, proto, dst, name, verdict, reason, bytes.\n",
	.run = run,
};
