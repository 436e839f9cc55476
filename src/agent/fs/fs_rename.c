/* fs_rename.c -- `rename FROM TO [-n]`: rename(2), or renameat2 RENAME_NOREPLACE with -n
 * (EEXIST when TO exists; a filesystem without RENAME_NOREPLACE answers EINVAL). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>

#include "fs.h"

int fs_op_rename(struct fs_out *o, const struct fs_args *a, struct fs_fail *f)
{
	const char *from = a->pos[0], *to = a->pos[1];
	struct jbuf b;
	int rc;

	if (fs_check_path(f, from) < 0 || fs_check_path(f, to) < 0)
		return -1;
	if (a->n)
		rc = renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
	else
		rc = rename(from, to);
	if (rc < 0)
		return fs_failsys(f, errno, errno == EEXIST ? to : from, "rename %s to %s", from,
				  to);
	jb_init(&b);
	jb_begin(&b);
	jb_kcstr(&b, "from", from);
	jb_kcstr(&b, "to", to);
	jb_end(&b);
	rc = fs_header(o, &b, f, to);
	jb_free(&b);
	return rc;
}
