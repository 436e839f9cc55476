/* tar.h -- a small POSIX tar writer and reader (ustar with pax extended headers) for tar-out
 * and tar-in.  The reader parses bytes a client sends, so everything is bounded and checked:
 * header checksums, numeric fields, pax record syntax, meta-data sizes. */
#ifndef SPACE_AGENT_TAR_H
#define SPACE_AGENT_TAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"
#include "fs.h"

#define TAR_BLOCK 512
#define TAR_RECORD 10240	   /* the stream is padded to a multiple of this (20 blocks) */
#define TAR_META_MAX (1 << 20)	   /* largest pax 'x' or GNU 'L'/'K' data we hold */
#define TAR_NAME_MAX 4095	   /* longest entry name or link target accepted */

/* Entry types as the reader reports them (other typeflags are TAR_OTHER and skipped). */
enum tar_type { TAR_FILE = '0', TAR_HARDLINK = '1', TAR_SYMLINK = '2', TAR_DIR = '5', TAR_OTHER = '?' };

struct tar_entry {
	const char *name;     /* NUL-terminated; never contains NUL bytes */
	const char *linkname; /* "" unless symlink / hardlink */
	char type;	      /* enum tar_type */
	uint64_t size;	      /* data bytes that follow (0 for dirs and links) */
	uint32_t mode;	      /* & 07777 */
	uint64_t uid, gid;
	int64_t mtime;
	uint32_t mtime_nsec;
	char uname[33], gname[33];
};

/* ---- tar_write.c */

struct tar_writer {
	struct fs_out *o;
	uint64_t written; /* bytes of tar stream so far */
	struct jbuf pax;  /* scratch for a pax header's records */
};

void tar_writer_init(struct tar_writer *w, struct fs_out *o);
void tar_writer_free(struct tar_writer *w);
/* The header block(s) of e: a pax 'x' header first when the name or link target does not fit
 * the ustar fields, a number does not fit in octal (size >= 8 GiB, ...), or uname/gname are
 * longer than 31 bytes.  Then the caller writes e->size data bytes with tar_write_data and
 * finishes the entry with tar_write_pad. */
int tar_write_header(struct tar_writer *w, const struct tar_entry *e);
int tar_write_data(struct tar_writer *w, const void *p, size_t n);
/* Data for the caller to fill directly in the output buffer (see fs_out_space). */
char *tar_write_space(struct tar_writer *w, size_t *room);
void tar_write_commit(struct tar_writer *w, size_t n);
int tar_write_pad(struct tar_writer *w); /* zeros up to the next 512-byte boundary */
int tar_write_end(struct tar_writer *w); /* two zero blocks, then up to a TAR_RECORD multiple */

/* ---- tar_read.c */

/* Where the reader's bytes come from: >0 bytes, 0 at the end, -1 with errno. */
typedef ssize_t (*tar_read_fn)(void *ctx, void *buf, size_t n);

struct tar_reader {
	tar_read_fn read;
	void *ctx;
	unsigned char *buf;
	size_t cap, pos, len;
	bool eof;
	uint64_t remaining; /* data bytes of the current entry not yet read */
	uint64_t pad;	    /* zero bytes after them */
	uint64_t offset;    /* stream offset of buf[pos] (for messages) */
	bool done;	    /* end of archive (or an error) seen */
	/* meta-data from pax 'x' / GNU 'L' 'K' headers, for the next entry */
	char *x_path, *x_link, *gnu_path, *gnu_link;
	bool x_has_size, x_has_mtime, x_has_uid, x_has_gid;
	uint64_t x_size, x_uid, x_gid;
	int64_t x_mtime;
	uint32_t x_mtime_nsec;
	char x_uname[33], x_gname[33];
	bool x_has_uname, x_has_gname;
	/* the current entry's strings */
	char *name, *linkname;
};

int tar_reader_init(struct tar_reader *r, tar_read_fn fn, void *ctx, size_t bufcap);
void tar_reader_free(struct tar_reader *r);
/* The next entry: 1 (in *e; its data follows), 0 at the end of the archive (a zero block, or
 * the stream ending on a block boundary), -1 on an error (e: EINVAL for a malformed archive,
 * else the read error).  Unread data of the previous entry is skipped. */
int tar_next(struct tar_reader *r, struct tar_entry *e, space_err *err);
/* Up to n bytes of the current entry's data: >0, 0 at its end, -1 (err set). */
ssize_t tar_read_data(struct tar_reader *r, void *buf, size_t n, space_err *err);

/* Check and normalise an entry name for extraction: "./a//b/" -> "a/b".  Refused (-1, EINVAL
 * with a message): an absolute name, a ".." component.  The result may be "" (the target
 * directory itself).  out has room for TAR_NAME_MAX + 1 bytes. */
int tar_name_clean(const char *in, char *out, space_err *err);

#endif
