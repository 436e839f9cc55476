/* spool.h -- one session's output on disk, addressable by byte offset, with a cap on what is kept */
#ifndef SPACE_SPOOL_H
#define SPACE_SPOOL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

/*
 * A spool is one or two segment files: `path` (the current one, appended to) and `path.old`
 * (the one before). A segment is a sequence of records: u32 length (LE), u32 stream (1 stdout,
 * 2 stderr), then `length` bytes; its first record may be a base record (stream 3, length 8,
 * a u64 LE) giving the output offset of its first payload byte (none: 0, as in files written
 * before segments existed). Offsets used by callers count payload bytes since the session
 * began (stdout and stderr together, in arrival order) and never change meaning.
 *
 * With a cap (spool_set_cap), the current segment holds at most cap/2 payload bytes: an append
 * that would pass that renames it to path.old (replacing, and so dropping, the older one) and
 * starts a new segment. What is kept is then at most `cap` bytes, [spool_start, spool_length);
 * a read below spool_start fails with ERANGE. docs/design/guest-bounds.md.
 *
 * A sparse in-memory index (one entry per ~1 MiB of file) keeps lookups cheap. A torn last
 * record (daemon killed mid write) is truncated away on open. spool_park closes the files and
 * frees the read buffer of a spool nobody uses (an ended session); the next read or append
 * reopens them.
 */
struct spool;

int spool_open(struct spool **out, const char *path, space_err *err);
void spool_close(struct spool *sp);
/* Keep at most max_kept payload bytes (0: keep everything). Takes effect at the next append. */
void spool_set_cap(struct spool *sp, uint64_t max_kept);
/* Output offset after the last byte: bytes since the session began. */
uint64_t spool_length(const struct spool *sp);
/* Offset of the first byte still kept (0 until something was dropped). */
uint64_t spool_start(const struct spool *sp);
/* Payload bytes kept: spool_length - spool_start. */
uint64_t spool_kept(const struct spool *sp);
int spool_append(struct spool *sp, int stream, const void *data, size_t len, space_err *err);
/* Bytes from offset `off` up to the end of the record holding it, at most max.
 * Returns 0 when off == length, -1 with EINVAL when off > length, ERANGE when off was dropped. */
ssize_t spool_read(struct spool *sp, uint64_t off, int *stream, void *buf, size_t max, space_err *err);
/* Drops the oldest kept segment (the current one too when it is the only one, so the spool is
 * then empty from spool_length on). Returns the payload bytes dropped, -1 on error. */
int64_t spool_drop_oldest(struct spool *sp, space_err *err);
/* Closes the files and frees buffers until the next read or append. */
void spool_park(struct spool *sp);

#endif
