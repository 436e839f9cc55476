/* records.c -- RAM section records: the MEM_SIZE block list, and PAGE / ZERO records, which go
 * to the image for the image block and to the state stream, byte for byte, for any other */
#include <errno.h>
#include <stdlib.h>

#include "parser.h"

static const uint8_t zero_page[MEMCVT_PAGE];

/* MEM_SIZE: the RAM block list */

int on_ms_name(struct memcvt *c, const uint8_t *p, space_err *e)
{
	struct block *b = &c->blocks[c->nblocks];
	size_t n = c->need;

	if (cvt_check_name(c, e, p, n, "a RAM block name") < 0)
		return -1;
	for (int i = 0; i < c->nblocks; i++)
		if (name_is(p, n, c->blocks[i].name))
			return cvt_bad(c, e, c->item_off, "block %s listed twice",
				       c->blocks[i].name);
	memcpy(b->name, p, n);
	b->name[n] = '\0';
	expect(c, ST_MS_VALS, 16);
	return cvt_emit(c, p, n, e);
}

static int image_block(struct memcvt *c, uint64_t bytes, space_err *e)
{
	if (bytes == 0 || bytes % MEMCVT_PAGE || bytes > MEMCVT_MAX_BLOCK_BYTES)
		return cvt_bad(c, e, c->item_off,
			       "block %s: length %llu is not a multiple of %u in 1..%llu",
			       c->image_name, ULL(bytes), MEMCVT_PAGE, ULL(MEMCVT_MAX_BLOCK_BYTES));
	c->npages = bytes / MEMCVT_PAGE;
	c->seen = calloc((c->npages + 63) / 64, sizeof(uint64_t));
	if (!c->seen) {
		c->failed = true;
		return err_sys(e, ENOMEM, "block %s: page bitmap", c->image_name);
	}
	c->image = c->nblocks;
	c->stats.block_bytes = bytes;
	if (c->sink.image_size(c->sink.opaque, bytes, e) < 0) {
		c->failed = true;
		return err_wrap(e, "sizing the image");
	}
	return 0;
}

int on_ms_vals(struct memcvt *c, const uint8_t *p, space_err *e)
{
	struct block *b = &c->blocks[c->nblocks];

	/* The second word is the block's guest address, sent because x-ignore-shared is on. */
	b->bytes = be64(p);
	if (b->bytes > c->blocks_left)
		return cvt_bad(c, e, c->item_off,
			       "block %s: length %llu exceeds the %llu bytes left of the total",
			       b->name, ULL(b->bytes), ULL(c->blocks_left));
	c->blocks_left -= b->bytes;
	if (strcmp(b->name, c->image_name) == 0 && image_block(c, b->bytes, e) < 0)
		return -1;
	c->nblocks++;
	if (c->blocks_left == 0 && c->image < 0)
		return cvt_bad(c, e, c->item_off, "block %s is not among the %d RAM blocks",
			       c->image_name, c->nblocks);
	if (c->blocks_left && c->nblocks == MEMCVT_MAX_BLOCKS)
		return cvt_bad(c, e, c->item_off, "more than %d RAM blocks", MEMCVT_MAX_BLOCKS);
	expect(c, c->blocks_left ? ST_MS_LEN : ST_REC, c->blocks_left ? 1 : 8);
	return cvt_emit(c, p, 16, e);
}

static void rec_payload(struct memcvt *c)
{
	c->nheld = 0;
	c->page_have = 0;
	if (c->rec_flags & F_PAGE)
		expect(c, ST_PAGE, MEMCVT_PAGE);
	else
		expect(c, ST_FILL, 1);
}

/* The destination resolves CONTINUE against the last block named in the stream it reads, so a
 * kept record may continue only the block that the last kept, named record named.  QEMU names
 * the block again after any record of another block, so dropping the image block's records
 * keeps this true; checking it refuses a stream whose rewrite would load pages elsewhere. */
static int rec_keep(struct memcvt *c, int b, space_err *e)
{
	if (!(c->rec_flags & F_CONTINUE))
		c->last_kept = b;
	else if (c->last_kept != b)
		return cvt_bad(c, e, c->rec_off,
			       "a record continuing block %s would continue %s in the state stream",
			       c->blocks[b].name,
			       c->last_kept < 0 ? "no block" : c->blocks[c->last_kept].name);
	c->stats.other_pages++;
	if (cvt_emit(c, c->held, c->nheld, e) < 0)
		return -1;
	rec_payload(c);
	return 0;
}

static void rec_image(struct memcvt *c)
{
	uint64_t pg = c->rec_addr / MEMCVT_PAGE;
	uint64_t bit = 1ull << (pg % 64);

	c->was_seen = c->seen[pg / 64] & bit;
	c->seen[pg / 64] |= bit;
	c->nseen += !c->was_seen;
	if (c->rec_flags & F_PAGE)
		c->stats.pages++;
	else
		c->stats.zero_pages++;
	rec_payload(c);
}

static int rec_block(struct memcvt *c, int b, space_err *e)
{
	const struct block *blk = &c->blocks[b];

	if (c->rec_addr > blk->bytes || blk->bytes - c->rec_addr < MEMCVT_PAGE)
		return cvt_bad(c, e, c->rec_off, "page 0x%llx is beyond the %llu bytes of block %s",
			       ULL(c->rec_addr), ULL(blk->bytes), blk->name);
	c->last_block = b;
	c->to_image = b == c->image;
	if (!c->to_image)
		return rec_keep(c, b, e);
	rec_image(c);
	return 0;
}

static int rec_page(struct memcvt *c, const uint8_t *p, space_err *e)
{
	memcpy(c->held, p, 8);
	c->nheld = 8;
	if (!(c->rec_flags & F_CONTINUE)) {
		expect(c, ST_REC_LEN, 1);
		return 0;
	}
	if (c->last_block < 0)
		return cvt_bad(c, e, c->rec_off, "CONTINUE record before any block was named");
	return rec_block(c, c->last_block, e);
}

/* MEM_SIZE: its address bits are the total length of the blocks listed after it. */
static int on_mem_size(struct memcvt *c, const uint8_t *p, space_err *e)
{
	if (c->have_blocks)
		return cvt_bad(c, e, c->rec_off, "a second MEM_SIZE record");
	if (c->rec_addr == 0)
		return cvt_bad(c, e, c->rec_off, "MEM_SIZE record with no RAM");
	c->have_blocks = true;
	c->blocks_left = c->rec_addr;
	expect(c, ST_MS_LEN, 1);
	return cvt_emit(c, p, 8, e);
}

int on_rec(struct memcvt *c, const uint8_t *p, space_err *e)
{
	uint64_t w = be64(p);

	c->rec_off = c->item_off;
	c->rec_flags = w & F_MASK;
	c->rec_addr = w & ~F_MASK;
	if (c->rec_flags & ~F_KNOWN)
		return cvt_bad(c, e, c->rec_off,
			       "unsupported RAM record flags 0x%x (no XBZRLE, compression or RDMA)",
			       c->rec_flags);
	switch (c->rec_flags) {
	case F_ZERO:
	case F_PAGE:
	case F_ZERO | F_CONTINUE:
	case F_PAGE | F_CONTINUE:
		return rec_page(c, p, e);
	case F_EOS:
		if (c->rec_addr)
			return cvt_bad(c, e, c->rec_off, "EOS record with address bits 0x%llx",
				       ULL(c->rec_addr));
		expect(c, ST_FOOTER, 5);
		return cvt_emit(c, p, 8, e);
	case F_MEM_SIZE:
		return on_mem_size(c, p, e);
	default:
		return cvt_bad(c, e, c->rec_off, "RAM record flags 0x%x combine record types",
			       c->rec_flags);
	}
}

int on_rec_name(struct memcvt *c, const uint8_t *p, space_err *e)
{
	size_t n = c->need;

	if (cvt_check_name(c, e, p, n, "a RAM block name") < 0)
		return -1;
	c->held[c->nheld++] = (uint8_t)n;
	memcpy(c->held + c->nheld, p, n);
	c->nheld += n;
	for (int i = 0; i < c->nblocks; i++)
		if (name_is(p, n, c->blocks[i].name))
			return rec_block(c, i, e);
	return cvt_bad(c, e, c->rec_off, "page of unknown RAM block \"%.*s\"", (int)n, p);
}

int on_fill(struct memcvt *c, const uint8_t *p, space_err *e)
{
	expect(c, ST_REC, 8);
	if (!c->to_image)
		return cvt_emit(c, p, 1, e);
	/* The image is sparse: a zero page costs nothing unless an earlier record wrote it. */
	if (p[0] == 0)
		return c->was_seen ? cvt_run_add(c, zero_page, c->rec_addr, e) : 0;
	/* QEMU sends fill 0 only, but loads any fill byte: do the same. */
	if (cvt_run_flush(c, e) < 0)
		return -1;
	memset(c->page, p[0], MEMCVT_PAGE);
	if (cvt_run_add(c, c->page, c->rec_addr, e) < 0)
		return -1;
	return cvt_run_flush(c, e);
}

/* Image page bytes: a page whole in the chunk is written from it; one split across chunks is
 * gathered in c->page, which the pending run may still point at, so flush that first. */
ssize_t page_bytes(struct memcvt *c, const uint8_t *p, size_t len, space_err *e)
{
	size_t n = len < MEMCVT_PAGE - c->page_have ? len : MEMCVT_PAGE - c->page_have;
	int rc = 0;

	if (!c->to_image) {
		rc = cvt_emit(c, p, n, e);
	} else if (c->page_have == 0 && n == MEMCVT_PAGE) {
		rc = cvt_run_add(c, p, c->rec_addr, e);
	} else {
		if (c->page_have == 0)
			rc = cvt_run_flush(c, e);
		memcpy(c->page + c->page_have, p, n);
		if (rc == 0 && c->page_have + n == MEMCVT_PAGE)
			rc = cvt_run_add(c, c->page, c->rec_addr, e);
	}
	if (rc < 0)
		return -1;
	c->page_have += n;
	if (c->page_have == MEMCVT_PAGE)
		expect(c, ST_REC, 8);
	return (ssize_t)n;
}
