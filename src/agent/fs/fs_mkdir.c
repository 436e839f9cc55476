/* fs_mkdir.c -- `mkdir PATH [MODE] [-p]`.  The default mode 0755 is subject to the umask, as
 * mkdir(1)'s; an explicit MODE is set exactly (fchmod after creation, as `mkdir -m`), on the
 * last component only (parents made by -p get 0755). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fs.h"

int fs_op_mkdir(struct fs_out *o, const struct fs_args *a, struct fs_fail *f)
{
	const char *path = a->pos[0];
	bool explicit_mode = false, created = false;
	mode_t mode = 0755;
	struct jbuf b;
	int rc;

	if (fs_check_path(f, path) < 0)
		return -1;
	if (a->npos > 1 && strcmp(a->pos[1], "-") != 0) {
		if (fs_parse_mode(a->pos[1], &mode) < 0)
			return fs_fail(f, EINVAL, path, "mkdir: bad mode %.16s (octal, e.g. 0755)",
				       a->pos[1]);
		explicit_mode = true;
	}
	if (a->p) {
		if (fs_mkdir_p(f, path, mode, &created) < 0)
			return -1;
	} else {
		if (mkdir(path, mode) < 0)
			return fs_failsys(f, errno, path, "mkdir %s", path);
		created = true;
	}
	if (created && explicit_mode) {
		_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		if (fd < 0 || fchmod(fd, mode) < 0)
			return fs_failsys(f, errno, path, "mkdir %s: chmod", path);
	}
	jb_init(&b);
	jb_begin(&b);
	jb_kcstr(&b, "path", path);
	jb_kbool(&b, "created", created);
	jb_end(&b);
	rc = fs_header(o, &b, f, path);
	jb_free(&b);
	return rc;
}
