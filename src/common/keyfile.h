/* keyfile.h -- reading a secret (the API key) from a file only its owner can read */
#ifndef SPACE_KEYFILE_H
#define SPACE_KEYFILE_H

#include <stddef.h>
#include <sys/stat.h>

#include "err.h"

/* Whether a file with this stat may hold a secret: a regular file owned by
 * `uid` or by root, with no permission bits for group or others. 0, or -1
 * with EACCES/EINVAL and a message naming path and the reason (pure). */
int keyfile_check(const char *path, const struct stat *st, uid_t uid, space_err *err);
/* Reads the secret: one word of printable ASCII on the first line (a
 * trailing newline is fine). out gets it NUL-terminated. */
int keyfile_read(const char *path, char *out, size_t outlen, space_err *err);

#endif
