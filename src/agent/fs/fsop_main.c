/* fsop_main.c -- TEMPORARY stand-in for the file operations (src/agent/fs/ is written
 * separately and replaces this file): every operation fails with ENOSYS, reported as
 * channels.md says (exit code = errno, one JSON line on stderr, nothing on stdout). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "../fsops.h"

int fsop_main(int argc, char *const argv[])
{
	static const char line[] =
		"{\"errno\":38,\"error\":\"ENOSYS\",\"message\":\"file operations not implemented\"}\n";

	(void)argc;
	(void)argv;
	if (write(2, line, strlen(line)) < 0)
		return EIO;
	return ENOSYS;
}
