/* fuzz_memcvt.c -- libFuzzer target: the migration-stream converter (src/memcvt), which parses what
 * QEMU writes during a snapshot -- bytes a compromised guest's QEMU could craft.
 *
 * The first input byte chooses how the rest is fed (0: at once, else in chunks of that many
 * bytes, as a pipe's short reads); the image block is "mem", as spaced passes it.  The sink
 * stores nothing (a stream may declare a block of up to MEMCVT_MAX_BLOCK_BYTES) but checks the
 * converter's promises to it (stream.h): one image_size, before any image_write; whole,
 * aligned pages, at most MEMCVT_RUN_PAGES per call, inside the declared block; and on success
 * statistics that match what the sink saw. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memcvt/stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MUST(c) do { if (!(c)) { fprintf(stderr, "fuzz_memcvt: %s:%d: %s\n", __FILE__, __LINE__, #c); abort(); } } while (0)

struct seen {
	uint64_t state_bytes, block_bytes, page_writes;
	int sized;
};

static int s_state(void *o, const void *p, size_t n, space_err *e)
{
	struct seen *s = o;
	volatile uint8_t x = 0;

	(void)e;
	/* Touch every byte: ASan checks the buffer handed to us really holds n bytes. */
	for (size_t i = 0; i < n; i++)
		x ^= ((const uint8_t *)p)[i];
	(void)x;
	s->state_bytes += n;
	return 0;
}

static int s_size(void *o, uint64_t len, space_err *e)
{
	struct seen *s = o;

	(void)e;
	MUST(s->sized == 0 && s->page_writes == 0);
	MUST(len <= MEMCVT_MAX_BLOCK_BYTES);
	s->sized = 1;
	s->block_bytes = len;
	return 0;
}

static int s_image(void *o, const struct iovec *iov, int n, uint64_t off, space_err *e)
{
	struct seen *s = o;
	volatile uint8_t x = 0;

	(void)e;
	MUST(s->sized);
	MUST(n >= 1 && n <= MEMCVT_RUN_PAGES);
	MUST(off % MEMCVT_PAGE == 0);
	MUST(off <= s->block_bytes && (uint64_t)n * MEMCVT_PAGE <= s->block_bytes - off);
	for (int i = 0; i < n; i++) {
		MUST(iov[i].iov_len == MEMCVT_PAGE);
		x ^= ((const uint8_t *)iov[i].iov_base)[0];
		x ^= ((const uint8_t *)iov[i].iov_base)[MEMCVT_PAGE - 1];
	}
	(void)x;
	s->page_writes += (uint64_t)n;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct seen seen = { 0 };
	const struct memcvt_sink sink = { &seen, s_state, s_size, s_image };
	struct memcvt_stats st = { 0 };
	space_err err = { 0 };
	struct memcvt *c;
	size_t chunk, off = 1;
	int rc = 0;

	if (size < 1)
		return 0;
	chunk = data[0] ? data[0] : size;
	c = memcvt_new("mem", &sink, &err);
	MUST(c != NULL);
	while (rc == 0 && off < size) {
		size_t n = size - off < chunk ? size - off : chunk;

		rc = memcvt_feed(c, data + off, n, &err);
		off += n;
	}
	if (rc == 0)
		rc = memcvt_finish(c, &st, &err);
	memcvt_free(c);
	if (rc < 0) {
		MUST(rc == -1 && err.code && err.msg[0]);
		return 0;
	}
	MUST(st.input_bytes == size - 1);
	MUST(st.state_bytes == seen.state_bytes);
	MUST(st.block_bytes == seen.block_bytes);
	/* A page is written for a PAGE record, or a ZERO one over a page written before: never
	 * more page writes than image records. */
	MUST(seen.page_writes <= st.pages + st.zero_pages);
	return 0;
}
