/* spool.h -- one session's output on disk, addressable by byte offset */
#ifndef SPACE_SPOOL_H
#define SPACE_SPOOL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

/*
 * A spool file is a sequence of records: u32 length (LE), u32 stream (1
 * stdout, 2 stderr), then `length` bytes. Offsets used by callers count
 * payload bytes only (stdout and stderr together, in arrival order). A sparse
 * in-memory index (one entry per ~1 MiB of file) keeps lookups cheap without
 * growing with the number of records. A torn last record (daemon killed mid
 * write) is truncated away on open.
 */
struct spool;

int spool_open(struct spool **out, const char *path, space_err *err);
void spool_close(struct spool *sp);
uint64_t spool_length(const struct spool *sp);
int spool_append(struct spool *sp, int stream, const void *data, size_t len, space_err *err);
/* Bytes from offset `off` up to the end of the record holding it, at most max.
 * Returns 0 when off == length, -1 with EINVAL when off > length. */
ssize_t spool_read(struct spool *sp, uint64_t off, int *stream, void *buf, size_t max, space_err *err);

#endif
