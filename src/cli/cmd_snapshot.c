/* cmd_snapshot.c -- `spacectl snapshot`: a named snapshot of a sandbox, to create others from */
#include <getopt.h>
#include <stdio.h>

#include "cleanup.h"
#include "cli.h"

/* The answer's snapshot, or (should the daemon have finished already and
 * answered null) the one its operation's result names. */
static const char *snapshot_id(const json_t *resp)
{
	const char *id = ctl_jstr(json_object_get(resp, "snapshot"), "id", NULL);

	if (id)
		return id;
	return ctl_jstr(json_object_get(json_object_get(resp, "operation"), "result"), "snapshot_id",
			NULL);
}

static int print_id(const json_t *resp, space_err *e)
{
	const char *id = snapshot_id(resp);

	if (!id)
		return err_set(e, EBADMSG, "the answer names no snapshot (operation %s)",
			       ctl_jstr(json_object_get(resp, "operation"), "id", "?"));
	printf("%s\n", id);
	return 0;
}

/* The snapshot as it is once taken: ready, with its size. */
static int refresh(const struct ctl *c, json_t *resp, space_err *e)
{
	const char *id = snapshot_id(resp);
	_cleanup_free_ char *path = NULL;
	json_t *snap = NULL;

	if (!id)
		return 0;
	path = ctl_path("/v1/snapshots", id, "");
	if (!path)
		return err_set(e, ENOMEM, "out of memory");
	if (ctl_call(c, "GET", path, NULL, &snap, e) < 0)
		return -1;
	if (json_object_set_new(resp, "snapshot", snap) < 0)
		return err_set(e, ENOMEM, "out of memory");
	return 0;
}

static int run(struct ctl *c, int argc, char **argv)
{
	const struct ctl_verb *v = &ctl_verb_snapshot;
	_cleanup_free_ char *path = NULL;
	struct ctl_op o = { .method = "POST", .print = print_id, .refresh = refresh };
	int st;

	if ((st = ctl_parse_opts(c, v, argc, argv, &o.wait)) >= 0)
		return st;
	if (argc - optind < 2)
		return ctl_usage_error(v, optind == argc ? "missing sandbox id" : "missing snapshot name");
	if (argc - optind > 2)
		return ctl_usage_error(v, "unexpected argument '%s'", argv[optind + 2]);
	o.what = argv[optind];
	o.path = path = ctl_sandbox_path(o.what, "/snapshots");
	o.body = json_pack("{s:s}", "name", argv[optind + 1]);
	st = o.body ? ctl_op_run(c, &o) : CTL_EXIT_FAIL;
	json_decref(o.body);
	return st;
}

const struct ctl_verb ctl_verb_snapshot = {
	.name = "snapshot",
	.usage = "[--wait] [--json] ID NAME",
	.summary = "take a named snapshot of a running or paused sandbox; prints its id",
	.help = "The snapshot holds the sandbox's memory and disk and outlives it: create\n"
		"sandboxes from it with `create --snapshot NAME`, list them with `snapshots`,\n"
		"delete it with `snapshot-rm NAME`.  The sandbox goes on as it was.  NAME is 1 to\n"
		"100 letters, digits, '_', '-' or '.' (not first), and unique.  The id (sn-...)\n"
		"is printed before any wait.\n"
		"\n"
		"Options:\n"
		"  --wait   wait until it is taken; exit 1 if that failed\n"
		"  --json   print {\"sandbox\":..,\"operation\":..,\"snapshot\":..}\n",
	.run = run,
};
