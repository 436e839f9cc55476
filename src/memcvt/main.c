/* main.c -- space-memcvt: split the QEMU migration stream on fd 0 into a RAM image (fd 3) and
 * the state stream that remains (fd 4); see docs/design/snapshots-memcvt.md */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#ifdef __SANITIZE_ADDRESS__
/* The sanitized build (the e2e suite's) runs in a VM's jail: an empty environment, so these are
 * its options, and a seccomp filter that denies ptrace, which LeakSanitizer's check at exit
 * needs (it would fail with "LeakSanitizer has encountered a fatal error" and exit 1). Memory
 * errors are still reported, on stderr, which the daemon keeps in the VM's log. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "detect_leaks=0:abort_on_error=1";
}
#endif

#include "cleanup.h"
#include "err.h"
#include "stream.h"

#define IN_FD 0
#define IMAGE_FD 3
#define STATE_FD 4
/* Large reads let one feed hold ~250 consecutive pages, so they leave as one 1 MiB write. */
#define READ_BUF (1u << 20)

static const char usage[] =
	"usage: space-memcvt [--block NAME] <STREAM 3>IMAGE 4>STATE\n"
	"Reads a QEMU migration stream (x-ignore-shared on) from fd 0, writes the RAM block NAME\n"
	"(default \"mem\") as a sparse image to fd 3 (an empty regular file) and the rest of the\n"
	"stream to fd 4; prints a JSON summary on stdout.\n";

static int write_all(int fd, const void *buf, size_t len, space_err *e)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return err_sys(e, errno, "write");
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int sink_state(void *opaque, const void *buf, size_t len, space_err *e)
{
	(void)opaque;
	return write_all(STATE_FD, buf, len, e);
}

static int sink_size(void *opaque, uint64_t len, space_err *e)
{
	(void)opaque;
	if (ftruncate(IMAGE_FD, (off_t)len) < 0)
		return err_sys(e, errno, "ftruncate image to %llu bytes", (unsigned long long)len);
	return 0;
}

/* pwritev may write less than asked (a full disk): go on from where it stopped. */
static int sink_image(void *opaque, const struct iovec *iov, int n, uint64_t off, space_err *e)
{
	struct iovec left[MEMCVT_RUN_PAGES];
	struct iovec *v = left;

	(void)opaque;
	if (n > MEMCVT_RUN_PAGES)
		return err_set(e, EINVAL, "image write of %d pages", n);
	memcpy(left, iov, (size_t)n * sizeof(*iov));
	while (n > 0) {
		ssize_t w = pwritev(IMAGE_FD, v, n, (off_t)off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return err_sys(e, w < 0 ? errno : EIO, "pwritev image at %llu",
				       (unsigned long long)off);
		off += (uint64_t)w;
		for (; n > 0 && (size_t)w >= v->iov_len; v++, n--)
			w -= (ssize_t)v->iov_len;
		if (n > 0) {
			v->iov_base = (char *)v->iov_base + w;
			v->iov_len -= (size_t)w;
		}
	}
	return 0;
}

/* The caller opens the files (safely, in its own directories); we only check that the image
 * is the empty regular file the sparse writes assume. */
static int check_fds(space_err *e)
{
	struct stat st;

	if (fstat(IN_FD, &st) < 0)
		return err_sys(e, errno, "fd %d (stream)", IN_FD);
	if (fstat(STATE_FD, &st) < 0)
		return err_sys(e, errno, "fd %d (state)", STATE_FD);
	if (fstat(IMAGE_FD, &st) < 0)
		return err_sys(e, errno, "fd %d (image)", IMAGE_FD);
	if (!S_ISREG(st.st_mode) || st.st_size != 0)
		return err_set(e, EINVAL, "fd %d (image) is not an empty regular file", IMAGE_FD);
	/* Linux appends a pwrite on an O_APPEND fd at the end, whatever its offset. */
	if (fcntl(IMAGE_FD, F_GETFL) & O_APPEND)
		return err_set(e, EINVAL, "fd %d (image) is open with O_APPEND", IMAGE_FD);
	return 0;
}

/* Fills buf from a pipe or socket whose reads may be short; fewer than cap bytes only at EOF. */
static ssize_t read_full(int fd, uint8_t *buf, size_t cap, space_err *e)
{
	size_t have = 0;

	while (have < cap) {
		ssize_t n = read(fd, buf + have, cap - have);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return err_sys(e, errno, "reading the stream");
		if (n == 0)
			break;
		have += (size_t)n;
	}
	return (ssize_t)have;
}

static int convert(const char *block, struct memcvt_stats *st, space_err *e)
{
	const struct memcvt_sink sink = { NULL, sink_state, sink_size, sink_image };
	_cleanup_memcvt_ struct memcvt *c = NULL;
	_cleanup_free_ uint8_t *buf = malloc(READ_BUF);
	unsigned long long total = 0;
	ssize_t n;

	if (!buf)
		return err_sys(e, ENOMEM, "read buffer");
	c = memcvt_new(block, &sink, e);
	if (!c)
		return -1;
	/* A bigger pipe means fewer wake-ups; the caller's pipe may refuse it, which is fine. */
	(void)fcntl(IN_FD, F_SETPIPE_SZ, READ_BUF);
	while ((n = read_full(IN_FD, buf, READ_BUF, e)) > 0) {
		if (memcvt_feed(c, buf, (size_t)n, e) < 0)
			return -1;
		total += (unsigned long long)n;
	}
	if (n < 0)
		return err_wrap(e, "after %llu bytes", total);
	return memcvt_finish(c, st, e);
}

static int print_summary(const char *block, const struct memcvt_stats *st)
{
	printf("{\"block\":\"%s\",\"block_bytes\":%llu,\"pages\":%llu,\"zero_pages\":%llu,"
	       "\"other_pages\":%llu,\"state_bytes\":%llu,\"input_bytes\":%llu}\n",
	       block, (unsigned long long)st->block_bytes, (unsigned long long)st->pages,
	       (unsigned long long)st->zero_pages, (unsigned long long)st->other_pages,
	       (unsigned long long)st->state_bytes, (unsigned long long)st->input_bytes);
	return fflush(stdout) == 0 && !ferror(stdout) ? 0 : -1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "block", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *block = "mem";
	struct memcvt_stats st;
	space_err e = { 0 };
	int opt;

	opterr = 0; /* every failure line starts "space-memcvt: " */
	while ((opt = getopt_long(argc, argv, ":b:h", opts, NULL)) != -1) {
		if (opt == 'h') {
			fputs(usage, stdout);
			return 0;
		}
		if (opt != 'b') {
			fprintf(stderr, "space-memcvt: %s \"%s\"\n%s",
				opt == ':' ? "missing value for" : "unknown option", argv[optind - 1],
				usage);
			return 1;
		}
		block = optarg;
	}
	if (optind != argc) {
		fprintf(stderr, "space-memcvt: unexpected argument \"%s\"\n%s", argv[optind],
			usage);
		return 1;
	}
	/* A state reader that goes away must be an error we report, not a silent SIGPIPE death. */
	signal(SIGPIPE, SIG_IGN);
	if (check_fds(&e) < 0 || convert(block, &st, &e) < 0) {
		fprintf(stderr, "space-memcvt: %s\n", e.msg);
		return 1;
	}
	if (print_summary(block, &st) < 0) {
		fprintf(stderr, "space-memcvt: writing the summary: %s\n", strerror(errno));
		return 1;
	}
	return 0;
}
