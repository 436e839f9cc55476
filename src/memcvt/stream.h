/* stream.h -- split a QEMU 7.2 migration stream into a RAM block image and the state that remains
 *
 * The grammar accepted, and why the converter exists, are in docs/design/snapshots-memcvt.md.
 * The converter is a push parser: feed it the stream in chunks of any size (a pipe's short
 * reads, or one byte at a time in the tests); it writes through a sink of three callbacks and
 * never blocks or allocates per record.  Memory: the struct (about 290 KiB, mostly the state
 * buffer) plus a bitmap of one bit per page of the image block (8 KiB for 256 MiB), allocated
 * once from the stream's MEM_SIZE record.
 */
#ifndef SPACE_MEMCVT_STREAM_H
#define SPACE_MEMCVT_STREAM_H

#include <stdint.h>
#include <sys/uio.h>

#include "err.h"

#define MEMCVT_PAGE 4096u
/* Bounds on what a stream may declare: QEMU's own limits are lower (an idstr is < 256
 * bytes, a microvm has a handful of blocks). */
#define MEMCVT_MAX_BLOCKS 64
#define MEMCVT_MAX_BLOCK_BYTES (1ull << 40)
/* Consecutive image pages are written with one pwritev of at most this many pages (1 MiB). */
#define MEMCVT_RUN_PAGES 256
/* Bytes of the state stream gathered before one state_write. */
#define MEMCVT_STATE_BUF (256u * 1024)

/*
 * Where the output goes.  Each callback returns 0, or -1 with `e` set (the converter prefixes
 * the input byte offset).  Calls come in stream order; the converter never reads back.
 */
struct memcvt_sink {
	void *opaque;
	/* Append bytes to the state stream. */
	int (*state_write)(void *opaque, const void *buf, size_t len, space_err *e);
	/* The image block's length, once, before any image_write. */
	int (*image_size)(void *opaque, uint64_t len, space_err *e);
	/* Write whole pages at byte `off` of the image.  The iov bases point into the chunk
	 * being fed or into the converter, so they are valid only during the call. */
	int (*image_write)(void *opaque, const struct iovec *iov, int iovcnt, uint64_t off,
			   space_err *e);
};

/* What a successful conversion did (the JSON summary of space-memcvt). */
struct memcvt_stats {
	uint64_t block_bytes;  /* length of the image block */
	uint64_t pages;        /* PAGE records of the image block */
	uint64_t zero_pages;   /* ZERO records of the image block */
	uint64_t other_pages;  /* PAGE and ZERO records of other blocks, kept in the state */
	uint64_t state_bytes;  /* bytes written to the state stream */
	uint64_t input_bytes;  /* bytes fed */
};

struct memcvt;

/* `block`: the RAM block to move to the image (1..255 bytes).  The sink is copied.
 * Returns NULL with e set (EINVAL: bad block name, ENOMEM). */
struct memcvt *memcvt_new(const char *block, const struct memcvt_sink *sink, space_err *e);
void memcvt_free(struct memcvt *c);

/* Consume the next `len` bytes of the stream.  -1 with e set ("at byte N: ...", code EBADMSG
 * for a stream the converter does not accept, the sink's code for an output error); after a
 * failure every later call fails too. */
int memcvt_feed(struct memcvt *c, const void *buf, size_t len, space_err *e);

/* End of input: flushes the state stream and fills `st`.  Fails (EBADMSG) when the stream
 * ended before its device state began, i.e. it was truncated. */
int memcvt_finish(struct memcvt *c, struct memcvt_stats *st, space_err *e);

static inline void cleanup_memcvtp(struct memcvt **c)
{
	memcvt_free(*c);
}
#define _cleanup_memcvt_ __attribute__((cleanup(cleanup_memcvtp)))

#endif
