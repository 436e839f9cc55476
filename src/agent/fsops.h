/* fsops.h -- the guest's file operations (kinds 3 and 4: docs/design/channels.md, "File
 * operations"), run by the agent in a forked child after it switched to the requested user */
#ifndef SPACE_AGENT_FSOPS_H
#define SPACE_AGENT_FSOPS_H

/* Runs one file operation (argv[0] is its name: read, write, list, stat, mkdir, remove,
 * rename, tar-out, tar-in, watch) with fds 0/1/2 = stdin, stdout, stderr; returns the exit
 * code (0, or the errno of the failure, whose JSON line is on stderr).  The caller exits with
 * it: the operation may have changed signal dispositions (SIGPIPE is ignored, `write` and
 * `watch` handle SIGTERM) and is not meant to return into anything but exit. */
int fsop_main(int argc, char *const argv[]);

#endif
