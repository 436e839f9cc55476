/* cmd_snapshot_rm.c -- `spacectl snapshot-rm`: delete named snapshots */
#include <getopt.h>

#include "cleanup.h"
#include "cli.h"

static int rm_one(struct ctl *c, const char *ref)
{
	_cleanup_free_ char *path = ctl_path("/v1/snapshots", ref, "");
	space_err e = { 0 };

	if (!path)
		return CTL_EXIT_FAIL;
	if (ctl_call(c, "DELETE", path, NULL, NULL, &e) < 0) {
		err_wrap(&e, "%s", ref);
		return ctl_fail(c, &e, CTL_EXIT_FAIL);
	}
	return CTL_EXIT_OK;
}

static int run(struct ctl *c, int argc, char **argv)
{
	const struct ctl_verb *v = &ctl_verb_snapshot_rm;
	int i, rc = ctl_parse_opts(c, v, argc, argv, NULL);

	if (rc >= 0)
		return rc;
	if (optind == argc)
		return ctl_usage_error(v, "missing snapshot name or id");
	/* Go on after a failure: the others should still be deleted. */
	rc = CTL_EXIT_OK;
	for (i = optind; i < argc; i++)
		if (rm_one(c, argv[i]) != CTL_EXIT_OK)
			rc = CTL_EXIT_FAIL;
	return rc;
}

const struct ctl_verb ctl_verb_snapshot_rm = {
	.name = "snapshot-rm",
	.usage = "NAME|ID...",
	.summary = "delete named snapshots; prints nothing",
	.help = "Sandboxes created from a snapshot run on after it is deleted.  Only named\n"
		"snapshots can be deleted: the daemon manages the ready ones itself.\n",
	.run = run,
};
