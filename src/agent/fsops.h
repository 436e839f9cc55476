/* fsops.h -- the file operations of file and watch channels (docs/design/channels.md).
 * The code lives in src/agent/fs/. */
#ifndef SPACE_AGENT_FSOPS_H
#define SPACE_AGENT_FSOPS_H

/* Run one file operation: argv[0] is the operation ("read", "write", "list", "stat", "mkdir",
 * "remove", "rename", "tar-out", "tar-in", "watch"), the rest its arguments.  Runs in the
 * channel's child, as the requested user, with fds 0, 1, 2 = stdin, stdout and stderr pipes
 * and no other fd open; returns the exit code: 0, or the errno of the failure (one JSON line
 * on stderr, see channels.md).  A plain function on descriptors and paths: unit tests call it
 * directly. */
int fsop_main(int argc, char *const argv[]);

#endif
