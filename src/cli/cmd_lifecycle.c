/* cmd_lifecycle.c -- `spacectl pause|resume|suspend|restore|stop|start|wake`: one
 * lifecycle operation per sandbox; the verb's name is the action's route */
#include <string.h>

#include "cleanup.h"
#include "cli.h"

#define USAGE "[--wait] [--json] ID..."
#define OPTIONS                                                                        \
	"\nPrints one operation id per sandbox (before waiting); a sandbox in the wrong\n" \
	"state is refused (409) with the state it is in and any operation in flight.\n"   \
	"\n"                                                                               \
	"Options:\n"                                                                       \
	"  --wait   wait until each operation finished; exit 1 if one failed\n"           \
	"  --json   print each {\"sandbox\":..,\"operation\":..} answer\n"

static const struct ctl_verb *const actions[] = {
	&ctl_verb_pause, &ctl_verb_resume, &ctl_verb_suspend, &ctl_verb_restore,
	&ctl_verb_stop,  &ctl_verb_start,  &ctl_verb_wake,
};

/* Every verb here shares this; main() names the one that runs in c->verb. */
static int run(struct ctl *c, int argc, char **argv)
{
	_cleanup_free_ char *suffix = NULL;
	size_t i;

	for (i = 0; i < sizeof(actions) / sizeof(actions[0]); i++)
		if (strcmp(actions[i]->name, c->verb) == 0)
			break;
	if (i == sizeof(actions) / sizeof(actions[0]) || asprintf(&suffix, "/%s", c->verb) < 0)
		return CTL_EXIT_FAIL;
	return ctl_op_each(c, actions[i], argc, argv, "POST", suffix);
}

const struct ctl_verb ctl_verb_pause = {
	.name = "pause",
	.usage = USAGE,
	.summary = "pause running sandboxes: their vCPUs stop, their memory stays",
	.help = "running -> paused.  `resume` undoes it; commands and their output wait.\n" OPTIONS,
	.run = run,
};

const struct ctl_verb ctl_verb_resume = {
	.name = "resume",
	.usage = USAGE,
	.summary = "resume paused sandboxes",
	.help = "paused -> running.\n" OPTIONS,
	.run = run,
};

const struct ctl_verb ctl_verb_suspend = {
	.name = "suspend",
	.usage = USAGE,
	.summary = "save sandboxes' memory to disk and release their VMs",
	.help = "running or paused -> suspended.  A suspended sandbox costs disk only\n"
		"(`ls --json` shows suspended_bytes); `restore` brings it back as it was.\n" OPTIONS,
	.run = run,
};

const struct ctl_verb ctl_verb_restore = {
	.name = "restore",
	.usage = USAGE,
	.summary = "bring suspended sandboxes back, processes and all",
	.help = "suspended -> running.  Refused with 429 when the node has no room for it.\n" OPTIONS,
	.run = run,
};

const struct ctl_verb ctl_verb_stop = {
	.name = "stop",
	.usage = USAGE,
	.summary = "power sandboxes off, keeping their disks",
	.help = "running, paused or suspended -> stopped.  Memory and processes are lost;\n"
		"`start` boots the disk again.\n" OPTIONS,
	.run = run,
};

const struct ctl_verb ctl_verb_start = {
	.name = "start",
	.usage = USAGE,
	.summary = "boot stopped sandboxes from their disks",
	.help = "stopped -> running.\n" OPTIONS,
	.run = run,
};

const struct ctl_verb ctl_verb_wake = {
	.name = "wake",
	.usage = USAGE,
	.summary = "make sandboxes run, whatever they sleep in (resume, restore or start)",
	.help = "paused, suspended or stopped -> running.  A sandbox already running needs\n"
		"nothing: no operation id is printed for it, and it is no error.\n" OPTIONS,
	.run = run,
};
