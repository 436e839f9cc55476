/* cmd_rm.c -- `spacectl rm`: delete sandboxes */
#include <getopt.h>
#include <stdio.h>

#include "cleanup.h"
#include "cli.h"

/* Delete one sandbox; prints its operation id (or JSON).  Exit status. */
static int rm_one(struct ctl *c, const char *id, bool wait)
{
	_cleanup_free_ char *path = ctl_sandbox_path(id, "");
	json_t *resp = NULL, *op = NULL;
	space_err e = { 0 };
	const char *op_id;
	int rc = CTL_EXIT_OK;

	if (!path)
		return CTL_EXIT_FAIL;
	if (ctl_call(c, "DELETE", path, NULL, &resp, &e) < 0) {
		err_wrap(&e, "%s", id);
		return ctl_fail(c, &e, CTL_EXIT_FAIL);
	}
	op_id = ctl_jstr(json_object_get(resp, "operation"), "id", NULL);
	if (!op_id) {
		err_set(&e, EBADMSG, "%s: the answer has no operation id", id);
		rc = ctl_fail(c, &e, CTL_EXIT_FAIL);
		goto out;
	}
	if (!c->json) {
		/* Before waiting, so a script sees it even if the wait fails. */
		printf("%s\n", op_id);
		fflush(stdout);
	}
	if (wait) {
		if (ctl_wait_operation(c, op_id, &op, &e) < 0) {
			err_wrap(&e, "%s", id);
			rc = ctl_fail(c, &e, CTL_EXIT_FAIL);
			goto out;
		}
		json_object_set(resp, "operation", op);
	}
	if (c->json)
		rc = ctl_print_json(resp);
out:
	json_decref(resp);
	json_decref(op);
	return rc;
}

static int run(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "wait", no_argument, NULL, 'w' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const struct ctl_verb *v = &ctl_verb_rm;
	bool wait = false;
	int opt, i, st, rc = CTL_EXIT_OK;

	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'w':
			wait = true;
			break;
		default:
			if ((st = ctl_common_opt(c, v, opt)) >= 0)
				return st;
		}
	}
	if (optind == argc)
		return ctl_usage_error(v, "missing sandbox id");
	/* Go on after a failure: the others should still be deleted. */
	for (i = optind; i < argc; i++)
		if (rm_one(c, argv[i], wait) != CTL_EXIT_OK)
			rc = CTL_EXIT_FAIL;
	return rc;
}

const struct ctl_verb ctl_verb_rm = {
	.name = "rm",
	.usage = "[--wait] [--json] ID...",
	.summary = "delete sandboxes; prints one operation id per sandbox",
	.help = "Options:\n"
		"  --wait   wait until each deletion finished; exit 1 if one failed\n"
		"  --json   print each {\"sandbox\":..,\"operation\":..} answer\n",
	.run = run,
};
