/* cmd_rm.c -- `spacectl rm`: delete sandboxes */
#include "cli.h"

static int run(struct ctl *c, int argc, char **argv)
{
	return ctl_op_each(c, &ctl_verb_rm, argc, argv, "DELETE", "");
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
