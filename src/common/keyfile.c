/* keyfile.c -- reading a secret (the API key) from a file only its owner can read */
#include "keyfile.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"

int keyfile_check(const char *path, const struct stat *st, uid_t uid, space_err *err)
{
	if (!S_ISREG(st->st_mode))
		return err_set(err, EINVAL, "key file %s is not a regular file", path);
	if (st->st_uid != uid && st->st_uid != 0)
		return err_set(err, EACCES, "key file %s belongs to uid %u, not to us (uid %u) or root", path,
			       (unsigned)st->st_uid, (unsigned)uid);
	if (st->st_mode & 077)
		return err_set(err, EACCES,
			       "key file %s has mode %04o: group and others must have no access (chmod 600 %s)",
			       path, (unsigned)(st->st_mode & 07777), path);
	return 0;
}

/* The first line, without trailing blanks; it must be one printable word. */
static int parse_secret(const char *path, char *buf, size_t n, space_err *err)
{
	size_t len = strcspn(buf, "\n");

	if (len < n && buf[len + 1 + strspn(buf + len + 1, " \t\r\n")] != '\0')
		return err_set(err, EINVAL, "key file %s: more than one line", path);
	while (len && (buf[len - 1] == ' ' || buf[len - 1] == '\t' || buf[len - 1] == '\r'))
		len--;
	buf[len] = '\0';
	if (!len)
		return err_set(err, EINVAL, "key file %s is empty", path);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)buf[i] <= 0x20 || (unsigned char)buf[i] >= 0x7f)
			return err_set(err, EINVAL, "key file %s: the key must be one word of printable ASCII",
				       path);
	return 0;
}

int keyfile_read(const char *path, char *out, size_t outlen, space_err *err)
{
	_cleanup_close_ int fd = -1;
	char buf[1024];
	struct stat st;
	ssize_t n;

	/* O_NONBLOCK: a FIFO must not hang the start; it is refused below. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return err_sys(err, errno, "opening key file %s", path);
	if (fstat(fd, &st) < 0)
		return err_sys(err, errno, "key file %s", path);
	if (keyfile_check(path, &st, geteuid(), err) < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n < 0)
		return err_sys(err, errno, "reading key file %s", path);
	if ((size_t)n == sizeof(buf) - 1)
		return err_set(err, EINVAL, "key file %s is too large for a key", path);
	buf[n] = '\0';
	if (memchr(buf, '\0', (size_t)n))
		return err_set(err, EINVAL, "key file %s holds a NUL byte", path);
	if (parse_secret(path, buf, (size_t)n, err) < 0) {
		explicit_bzero(buf, sizeof(buf));
		return -1;
	}
	if (strlen(buf) >= outlen) {
		explicit_bzero(buf, sizeof(buf));
		return err_set(err, EINVAL, "key file %s: key longer than %zu bytes", path, outlen - 1);
	}
	memcpy(out, buf, strlen(buf) + 1);
	explicit_bzero(buf, sizeof(buf));
	return 0;
}
