/* tar.h -- POSIX tar streams for `spacectl cp`, with nothing held whole in
 * memory: a writer that makes an archive of a local tree as an upload pulls
 * it, a reader that takes an archive in whatever pieces a download pushes,
 * and an extractor that writes what it reads under one directory and never
 * outside it.  Tests: tests/unit/test_cli_tar.c. */
#ifndef SPACE_CLI_TAR_H
#define SPACE_CLI_TAR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "err.h"

#define TAR_BLOCK 512

/* Entry types (the typeflag byte). */
#define TAR_FILE '0'
#define TAR_HARDLINK '1'
#define TAR_SYMLINK '2'
#define TAR_DIR '5'

/* Warnings (a skipped entry): the message, without "spacectl: cp: ". */
typedef void (*tar_warn_fn)(const char *msg, void *arg);

/* ---- writer ---------------------------------------------------------- */

struct tar_writer;

/*
 * An archive of the local path src (a symbolic link is archived as one, not
 * followed), its top entry named top ("proj" -> "proj/", "proj/a.txt", ...),
 * or, with top NULL, src's entries alone ("a.txt", "sub/", ...; src must be
 * a directory).  Regular files, directories and symbolic links; anything else
 * is skipped with a warning.  Entries in name order; ustar, with pax records
 * for long names, long link targets and sizes of 8 GiB and over; owner 0
 * (root): as with docker, what is copied in belongs to whoever extracts it.
 * NULL with e set when src cannot be read.
 */
struct tar_writer *tarw_new(const char *src, const char *top, tar_warn_fn warn, void *warn_arg,
			    space_err *e);
/* The next at most n bytes of the archive: their count, 0 once it is all
 * out, -1 with e set (a file that cannot be read, or shrank while read). */
ssize_t tarw_read(struct tar_writer *w, char *buf, size_t n, space_err *e);
/* Bytes of regular files' contents handed out so far (for progress). */
unsigned long long tarw_file_bytes(const struct tar_writer *w);
void tarw_free(struct tar_writer *w);

/* The sizes of the regular files under src added up (for progress); -1
 * when the walk fails. */
long long tar_tree_bytes(const char *src);

/* ---- reader ---------------------------------------------------------- */

struct tar_entry {
	char type;            /* TAR_FILE, TAR_DIR, TAR_SYMLINK, TAR_HARDLINK or another */
	const char *name;     /* as the archive has it (pax path, GNU long name, ustar prefix/name) */
	const char *linkname; /* "" if none */
	unsigned long long size; /* the data that follows (0 for all but files) */
	unsigned mode;        /* & 07777 */
	long long mtime;
	long mtime_nsec;
};

/* Each returns 0, or -1 with e set to stop. */
struct tar_reader_ops {
	int (*begin)(void *arg, const struct tar_entry *en, space_err *e);
	int (*data)(void *arg, const char *p, size_t n, space_err *e);
	int (*end)(void *arg, space_err *e);
};

struct tar_reader {
	const struct tar_reader_ops *ops;
	void *arg;
	int state;
	unsigned char block[TAR_BLOCK];
	size_t have;
	unsigned long long left; /* data (or extended header) bytes still to come */
	size_t pad;
	int zero_blocks;
	char ext_type;
	char *ext; /* an extended header's data being collected */
	size_t ext_len;
	/* What extended headers say about the next entry. */
	char *x_path, *x_linkpath;
	bool x_size_set, x_mtime_set;
	unsigned long long x_size;
	long long x_mtime;
	long x_mtime_nsec;
	unsigned long long entries;
	bool failed;
	space_err err; /* the sticky error */
};

void tarr_init(struct tar_reader *r, const struct tar_reader_ops *ops, void *arg);
/* Parse n more bytes.  0, or -1 with e set (sticky: later calls fail the same). */
int tarr_feed(struct tar_reader *r, const char *p, size_t n, space_err *e);
/* The stream ended: -1 with e set unless the archive was complete. */
int tarr_finish(struct tar_reader *r, space_err *e);
void tarr_free(struct tar_reader *r);

/* ---- extractor ------------------------------------------------------- */

struct tar_extract;

/*
 * Extract into the directory dirfd (borrowed).  Every entry must lie under
 * one top component (the first entry's); it is renamed to `top`, or with top
 * NULL left out, its entries going into dirfd itself.  Refused, stopping the
 * extraction: absolute names, ".." components, entries outside the top, and
 * any path through a symbolic link or non-directory (every component is
 * opened with O_NOFOLLOW below dirfd).  Files are written to a temporary
 * name and renamed over what was there; modes are kept without setuid and
 * setgid; mtimes are kept; owners are not (the files are the caller's).
 * Directories get their modes and mtimes at tarx_finish().  Hard links and
 * other types are skipped with a warning.
 */
struct tar_extract *tarx_new(int dirfd, const char *top, tar_warn_fn warn, void *warn_arg,
			     space_err *e);
extern const struct tar_reader_ops tarx_ops; /* arg: the struct tar_extract */
/* After the archive: directory modes and times.  0 or -1 (e set). */
int tarx_finish(struct tar_extract *x, space_err *e);
unsigned long long tarx_file_bytes(const struct tar_extract *x);
unsigned long long tarx_entries(const struct tar_extract *x);
/* Removes a file left half-written. */
void tarx_free(struct tar_extract *x);

/* ---- one file written whole or not at all ---------------------------- */

/*
 * A file named `name` in directory dirfd (borrowed), written under a
 * temporary name beside it (".<name>.spacectl-XXXXXX", mode 0600) and renamed
 * over `name` by afile_commit(), with `mode` (& 01777) and `mtime` (when
 * mtime_set).  Never follows a symbolic link at `name` (it is replaced); a
 * directory there is not replaced.  While a file is open, SIGINT, SIGTERM and
 * SIGHUP remove it before spacectl dies of them (afile_arm_signals()).
 */
struct afile {
	int dirfd;
	int fd;
	char *name;
	char tmp[256];
	unsigned mode;
	bool mtime_set;
	long long mtime;
	long mtime_nsec;
};

int afile_open(struct afile *f, int dirfd, const char *name, unsigned mode, space_err *e);
int afile_write(struct afile *f, const void *p, size_t n, space_err *e);
int afile_commit(struct afile *f, space_err *e);
/* Remove the temporary file (no-op after commit or when none is open). */
void afile_abort(struct afile *f);
/* Install the signal handlers that remove the open temporary file. */
void afile_arm_signals(void);

#endif
