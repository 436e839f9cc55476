/* test_memcvt.c -- the migration stream converter (src/memcvt): image and state bytes of synthetic
 * QEMU 7.2 streams fed in chunks of any size, and each stream it must refuse */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "memcvt/stream.h"

#define PG 4096
#define MEM_PAGES 16
#define BIOS_PAGES 2
#define RAM_ID 3
#define F_ZERO 0x02
#define F_MEM_SIZE 0x04
#define F_PAGE 0x08
#define F_EOS 0x10
#define F_CONT 0x20

struct buf {
	uint8_t *p;
	size_t n, cap;
};

static void buf_add(struct buf *b, const void *p, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2;
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			abort();
	}
	memcpy(b->p + b->n, p, n);
	b->n += n;
}

/* A stream being built: `in` is what QEMU sends; `want` is the state expected once the image
 * block's records are dropped, and mem[] / bios[] the blocks' expected contents. */
struct gen {
	struct buf in, want;
	const char *image_block;
	bool keep; /* the bytes being written also belong in `want` */
	uint8_t mem[MEM_PAGES * PG];
	uint8_t bios[BIOS_PAGES * PG];
	size_t tail_off; /* where the device state begins */
};

static void gen_init(struct gen *g, const char *image_block)
{
	memset(g, 0, sizeof(*g));
	g->image_block = image_block;
	g->keep = true;
}

static void gen_free(struct gen *g)
{
	free(g->in.p);
	free(g->want.p);
}

static void put(struct gen *g, const void *p, size_t n)
{
	buf_add(&g->in, p, n);
	if (g->keep)
		buf_add(&g->want, p, n);
}

static void put8(struct gen *g, uint8_t v)
{
	put(g, &v, 1);
}

static void put32(struct gen *g, uint32_t v)
{
	uint8_t b[4] = { v >> 24, v >> 16, v >> 8, v };

	put(g, b, 4);
}

static void put64(struct gen *g, uint64_t v)
{
	put32(g, (uint32_t)(v >> 32));
	put32(g, (uint32_t)v);
}

static void putname(struct gen *g, const char *s)
{
	put8(g, (uint8_t)strlen(s));
	put(g, s, strlen(s));
}

static void header(struct gen *g, uint32_t magic)
{
	put32(g, magic);
	put32(g, 3);
}

/* The configuration section; cap: a capability besides "validate-uuid" (NULL: none);
 * extra: one more subsection name (NULL: none). */
static void config(struct gen *g, const char *cap, const char *extra)
{
	static const uint8_t uuid[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };

	put8(g, 0x07);
	put32(g, 7);
	put(g, "microvm", 7);
	put8(g, 0x05);
	putname(g, "configuration/target-page-bits");
	put32(g, 1);
	put32(g, 12);
	put8(g, 0x05);
	putname(g, "configuration/capabilities");
	put32(g, 1);
	put32(g, cap ? 2 : 1);
	putname(g, "validate-uuid");
	if (cap)
		putname(g, cap);
	put8(g, 0x05);
	putname(g, "configuration/uuid");
	put32(g, 1);
	put(g, uuid, sizeof(uuid));
	if (extra) {
		put8(g, 0x05);
		putname(g, extra);
		put32(g, 1);
	}
}

static void section(struct gen *g, uint8_t type, uint32_t id, const char *name)
{
	put8(g, type);
	put32(g, id);
	if (type == 0x01) {
		putname(g, name);
		put32(g, 0);
		put32(g, 4);
	}
}

static void mem_size(struct gen *g)
{
	put64(g, (uint64_t)(MEM_PAGES + BIOS_PAGES) * PG | F_MEM_SIZE);
	putname(g, "mem");
	put64(g, (uint64_t)MEM_PAGES * PG);
	put64(g, 0);
	putname(g, "pc.bios");
	put64(g, (uint64_t)BIOS_PAGES * PG);
	put64(g, 0xfffc0000);
}

static void eos(struct gen *g, uint32_t id)
{
	put64(g, F_EOS);
	put8(g, 0x7e);
	put32(g, id);
}

static uint8_t pat(uint64_t page, size_t i)
{
	return (uint8_t)(page * 37 + i * 7 + (i >> 8) + 1);
}

/* A PAGE record (fill < 0) or a ZERO record with that fill byte; name NULL: CONTINUE. */
static void rec(struct gen *g, const char *block, const char *name, uint64_t page, int fill)
{
	uint8_t data[PG];
	uint8_t *img = strcmp(block, "mem") == 0 ? g->mem : g->bios;

	for (size_t i = 0; i < PG; i++)
		data[i] = fill < 0 ? pat(page, i) : (uint8_t)fill;
	g->keep = strcmp(block, g->image_block) != 0;
	put64(g, page * PG | (fill < 0 ? F_PAGE : F_ZERO) | (name ? 0 : F_CONT));
	if (name)
		putname(g, name);
	if (fill < 0)
		put(g, data, PG);
	else
		put8(g, (uint8_t)fill);
	g->keep = true;
	memcpy(img + page * PG, data, PG);
}

/* Everything QEMU sends up to the first RAM record. */
static void prologue(struct gen *g)
{
	header(g, 0x5145564d);
	config(g, "x-ignore-shared", NULL);
	section(g, 0x01, RAM_ID, "ram");
	mem_size(g);
	eos(g, RAM_ID);
}

/* Device sections and EOF: opaque to the converter. */
static void tail(struct gen *g)
{
	static const char json[] = "{\"page_size\": 4096}";

	g->tail_off = g->in.n;
	section(g, 0x04, 4, NULL);
	putname(g, "timer");
	put32(g, 0);
	put32(g, 2);
	put64(g, 0x0123456789abcdef);
	put8(g, 0x7e);
	put32(g, 4);
	put8(g, 0x00);
	put8(g, 0x06);
	put32(g, sizeof(json) - 1);
	put(g, json, sizeof(json) - 1);
}

/* The stream the tests convert: every kind of record, CONTINUE across and after the other
 * block's records, pages out of order, a zero page re-sent over a written one, a START, a PART
 * and an END section, then device state. skip: a mem page to leave out (-1: none). */
static void good_stream(struct gen *g, int skip)
{
	static const int part_fill[] = { -1, -1, 0, -1 };
	static const struct { int page, fill; } end[] = { { 10, -1 }, { 11, -1 }, { 12, -1 },
		{ 13, 0 }, { 15, -1 }, { 14, -1 }, { 3, 0 } };
	size_t i;

	prologue(g);
	section(g, 0x02, RAM_ID, NULL);
	for (i = 0; i < 4; i++)
		rec(g, "mem", i ? NULL : "mem", i, part_fill[i]);
	rec(g, "pc.bios", "pc.bios", 0, -1);
	rec(g, "pc.bios", NULL, 1, 0);
	rec(g, "mem", "mem", 4, -1);
	for (i = 5; i < 10; i++)
		if ((int)i != skip)
			rec(g, "mem", NULL, i, i == 7 ? 0 : i == 8 ? 0x5a : -1);
	eos(g, RAM_ID);
	section(g, 0x03, RAM_ID, NULL);
	for (i = 0; i < sizeof(end) / sizeof(end[0]); i++)
		rec(g, "mem", i ? NULL : "mem", (uint64_t)end[i].page, end[i].fill);
	rec(g, "pc.bios", "pc.bios", 1, -1);
	eos(g, RAM_ID);
	tail(g);
}

/* ---- an in-memory sink */

struct sink {
	struct buf state;
	uint8_t *image;
	uint64_t size;
	int sized, writes, max_iov;
	int page_writes[MEM_PAGES];
	bool fail_image, fail_state;
};

static int s_state(void *o, const void *p, size_t n, space_err *e)
{
	struct sink *s = o;

	if (s->fail_state)
		return err_set(e, ENOSPC, "state disk full");
	buf_add(&s->state, p, n);
	return 0;
}

static int s_size(void *o, uint64_t len, space_err *e)
{
	struct sink *s = o;

	(void)e;
	s->sized++;
	s->size = len;
	s->image = calloc(1, len);
	return s->image ? 0 : -1;
}

static int s_image(void *o, const struct iovec *iov, int n, uint64_t off, space_err *e)
{
	struct sink *s = o;

	if (s->fail_image)
		return err_set(e, EIO, "image disk broken");
	EXPECT(n >= 1 && n <= MEMCVT_RUN_PAGES);
	EXPECT(off % PG == 0);
	s->writes++;
	s->max_iov = n > s->max_iov ? n : s->max_iov;
	for (int i = 0; i < n; i++, off += PG) {
		EXPECT_EQ(iov[i].iov_len, PG);
		EXPECT(off + PG <= s->size);
		if (off + PG > s->size)
			return err_set(e, EINVAL, "write beyond the image");
		memcpy(s->image + off, iov[i].iov_base, PG);
		if (off / PG < MEM_PAGES)
			s->page_writes[off / PG]++;
	}
	return 0;
}

static void sink_free(struct sink *s)
{
	free(s->state.p);
	free(s->image);
}

/* Converts `in` fed `chunk` bytes at a time (0: all at once). */
static int convert(const struct buf *in, size_t chunk, const char *block, struct sink *s,
		   struct memcvt_stats *st, space_err *e)
{
	const struct memcvt_sink sk = { s, s_state, s_size, s_image };
	struct memcvt *c = memcvt_new(block, &sk, e);
	int rc = 0;

	if (!c)
		return -1;
	for (size_t off = 0; rc == 0 && off < in->n;) {
		size_t n = chunk && in->n - off > chunk ? chunk : in->n - off;

		rc = memcvt_feed(c, in->p + off, n, e);
		off += n;
	}
	if (rc == 0)
		rc = memcvt_finish(c, st, e);
	memcvt_free(c);
	return rc;
}

/* ---- conversions that succeed */

static void check_good(size_t chunk)
{
	struct gen *g = malloc(sizeof(*g));
	struct sink s = { 0 };
	struct memcvt_stats st = { 0 };
	space_err e = { 0 };

	gen_init(g, "mem");
	good_stream(g, -1);
	if (!CHECK(convert(&g->in, chunk, "mem", &s, &st, &e) == 0, "chunks of %zu: converts (%s)",
		   chunk, e.msg))
		goto out;
	CHECK(s.state.n == g->want.n && memcmp(s.state.p, g->want.p, g->want.n) == 0,
	      "chunks of %zu: the state is the stream without mem's records (%zu bytes, want %zu)",
	      chunk, s.state.n, g->want.n);
	CHECK(s.sized == 1 && s.size == sizeof(g->mem) && memcmp(s.image, g->mem, sizeof(g->mem)) == 0,
	      "chunks of %zu: the image holds mem's pages", chunk);
	CHECK(st.block_bytes == sizeof(g->mem) && st.pages == 12 && st.zero_pages == 5 &&
		      st.other_pages == 3 && st.state_bytes == g->want.n && st.input_bytes == g->in.n,
	      "chunks of %zu: stats %llu %llu %llu %llu %llu %llu", chunk,
	      (unsigned long long)st.block_bytes, (unsigned long long)st.pages,
	      (unsigned long long)st.zero_pages, (unsigned long long)st.other_pages,
	      (unsigned long long)st.state_bytes, (unsigned long long)st.input_bytes);
	/* Sparse: a first zero page is never written; a zero page sent over a written one is. */
	CHECK(s.page_writes[2] == 0 && s.page_writes[7] == 0 && s.page_writes[13] == 0 &&
		      s.page_writes[3] == 2 && s.page_writes[8] == 1,
	      "chunks of %zu: zero pages are holes unless they overwrite a page", chunk);
	if (chunk == 0)
		CHECK(s.max_iov >= 4 && s.writes < 12,
		      "whole: consecutive pages leave in one write (%d writes, up to %d pages)",
		      s.writes, s.max_iov);
out:
	sink_free(&s);
	gen_free(g);
	free(g);
}

static void good_chunks(void)
{
	static const size_t chunks[] = { 1, 7, 4096, 4104, 0 };

	for (size_t i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++)
		check_good(chunks[i]);
}

/* --block pc.bios: the other block goes to the image, mem's pages stay in the state. */
static void other_block(void)
{
	struct gen *g = malloc(sizeof(*g));
	struct sink s = { 0 };
	struct memcvt_stats st = { 0 };
	space_err e = { 0 };

	gen_init(g, "pc.bios");
	good_stream(g, -1);
	if (CHECK(convert(&g->in, 7, "pc.bios", &s, &st, &e) == 0, "--block pc.bios converts (%s)",
		  e.msg)) {
		CHECK(s.state.n == g->want.n && memcmp(s.state.p, g->want.p, g->want.n) == 0,
		      "--block pc.bios: the state keeps mem's records");
		CHECK(s.size == sizeof(g->bios) && memcmp(s.image, g->bios, sizeof(g->bios)) == 0 &&
			      st.pages == 2 && st.zero_pages == 1 && st.other_pages == 17,
		      "--block pc.bios: the image holds pc.bios");
	}
	sink_free(&s);
	gen_free(g);
	free(g);
}

/* ---- refusals */

/* Converts whole and byte by byte; both must fail with `want` in the message. */
static void refuse(struct gen *g, const char *block, const char *want, const char *what)
{
	static const size_t chunks[] = { 0, 1 };

	for (size_t i = 0; i < 2; i++) {
		struct sink s = { 0 };
		struct memcvt_stats st;
		space_err e = { 0 };
		int rc = convert(&g->in, chunks[i], block, &s, &st, &e);

		CHECK(rc < 0 && strstr(e.msg, want) && e.code, "%s (%s): %s", what,
		      chunks[i] ? "bytewise" : "whole", e.msg);
		sink_free(&s);
	}
	gen_free(g);
}

static void refusals_framing(void)
{
	struct gen g;

	gen_init(&g, "mem");
	header(&g, 0x5145564e);
	refuse(&g, "mem", "not a QEMU migration stream (magic 0x5145564e)", "bad magic");

	gen_init(&g, "mem");
	header(&g, 0x5145564d);
	config(&g, NULL, NULL);
	section(&g, 0x01, RAM_ID, "ram");
	refuse(&g, "mem", "not written with x-ignore-shared", "no x-ignore-shared");

	gen_init(&g, "mem");
	header(&g, 0x5145564d);
	config(&g, "x-ignore-shared", "configuration/colo");
	refuse(&g, "mem", "unknown configuration subsection \"configuration/colo\"",
	       "unknown subsection");

	gen_init(&g, "mem");
	header(&g, 0x5145564d);
	config(&g, "x-ignore-shared", NULL);
	section(&g, 0x01, RAM_ID, "block");
	refuse(&g, "mem", "the first section is \"block\", not \"ram\"", "first section not ram");

	gen_init(&g, "mem");
	header(&g, 0x5145564d);
	config(&g, "x-ignore-shared", NULL);
	section(&g, 0x04, 9, "timer");
	refuse(&g, "mem", "before the RAM section", "device state first");

	gen_init(&g, "mem");
	prologue(&g);
	section(&g, 0x02, RAM_ID + 1, NULL);
	refuse(&g, "mem", "section id 4 is not the RAM section's (3)", "wrong section id");

	gen_init(&g, "mem");
	header(&g, 0x5145564d);
	config(&g, "x-ignore-shared", NULL);
	section(&g, 0x01, RAM_ID, "ram");
	mem_size(&g);
	put64(&g, F_EOS);
	put8(&g, 0x7e);
	put32(&g, RAM_ID + 1);
	refuse(&g, "mem", "bad section footer", "footer of another section");

	gen_init(&g, "mem");
	prologue(&g);
	section(&g, 0x02, RAM_ID, NULL);
	eos(&g, RAM_ID);
	section(&g, 0x04, 9, "timer");
	refuse(&g, "mem", "before the RAM section ended", "device state before END");
}

static void refusals_records(void)
{
	struct gen g;
	size_t off;
	char want[64];

	gen_init(&g, "mem");
	prologue(&g);
	section(&g, 0x02, RAM_ID, NULL);
	put64(&g, F_PAGE | 0x40);
	refuse(&g, "mem", "unsupported RAM record flags 0x48", "XBZRLE flag");

	gen_init(&g, "mem");
	prologue(&g);
	section(&g, 0x02, RAM_ID, NULL);
	put64(&g, 0x100);
	refuse(&g, "mem", "unsupported RAM record flags 0x100", "compressed page flag");

	gen_init(&g, "mem");
	prologue(&g);
	section(&g, 0x02, RAM_ID, NULL);
	put64(&g, F_PAGE | F_ZERO);
	refuse(&g, "mem", "combine record types", "PAGE and ZERO at once");

	gen_init(&g, "mem");
	prologue(&g);
	section(&g, 0x02, RAM_ID, NULL);
	off = g.in.n;
	rec(&g, "mem", "mem", 3, -1);
	put64(&g, (uint64_t)MEM_PAGES * PG | F_PAGE | F_CONT);
	snprintf(want, sizeof(want), "at byte %zu: page 0x10000 is beyond", off + 8 + 4 + PG);
	refuse(&g, "mem", want, "page beyond the block's length");

	gen_init(&g, "mem");
	prologue(&g);
	section(&g, 0x02, RAM_ID, NULL);
	put64(&g, F_ZERO | F_CONT);
	refuse(&g, "mem", "CONTINUE record before any block was named", "CONTINUE first");

	gen_init(&g, "mem");
	prologue(&g);
	section(&g, 0x02, RAM_ID, NULL);
	put64(&g, F_ZERO);
	putname(&g, "pc.ram");
	refuse(&g, "mem", "page of unknown RAM block \"pc.ram\"", "unknown block");

	gen_init(&g, "mem");
	prologue(&g);
	section(&g, 0x02, RAM_ID, NULL);
	put64(&g, F_ZERO);
	putname(&g, "m\x01m");
	refuse(&g, "mem", "non-printable byte 0x01", "control byte in a block name");
}

static void refusals_blocks(void)
{
	struct gen g;

	gen_init(&g, "mem");
	prologue(&g);
	section(&g, 0x02, RAM_ID, NULL);
	mem_size(&g);
	refuse(&g, "mem", "a second MEM_SIZE record", "second MEM_SIZE");

	gen_init(&g, "mem");
	header(&g, 0x5145564d);
	config(&g, "x-ignore-shared", NULL);
	section(&g, 0x01, RAM_ID, "ram");
	put64(&g, (uint64_t)PG | F_MEM_SIZE);
	putname(&g, "mem");
	put64(&g, 2 * PG);
	put64(&g, 0);
	refuse(&g, "mem", "length 8192 exceeds the 4096 bytes left", "block longer than the total");

	gen_init(&g, "mem");
	good_stream(&g, -1);
	refuse(&g, "vga.vram", "block vga.vram is not among the 2 RAM blocks", "--block absent");

	gen_init(&g, "mem");
	good_stream(&g, 6);
	refuse(&g, "mem", "block mem: only 15 of its 16 pages were sent", "a mem page never sent");
}

/* Every cut before the device state is a truncation, reported with the bytes read. */
static void truncated(void)
{
	struct gen *g = malloc(sizeof(*g));
	int bad = 0, cuts = 0;

	gen_init(g, "mem");
	good_stream(g, -1);
	for (size_t cut = 0; cut <= g->tail_off; cut += cut < 200 ? 1 : 97) {
		struct buf part = { g->in.p, cut, cut };
		struct sink s = { 0 };
		struct memcvt_stats st;
		space_err e = { 0 };
		char want[80];

		snprintf(want, sizeof(want), "truncated: the input ended after %zu bytes", cut);
		if (convert(&part, cut < 200 ? 1 : 0, "mem", &s, &st, &e) == 0 || !strstr(e.msg, want)) {
			if (bad++ < 5)
				NOTE("cut at %zu: %s", cut, e.msg);
		}
		cuts++;
		sink_free(&s);
	}
	CHECK(bad == 0, "%d cuts before the device state are all truncations", cuts);
	{
		struct buf part = { g->in.p, g->tail_off, g->tail_off };
		struct sink s = { 0 };
		struct memcvt_stats st;
		space_err e = { 0 };

		convert(&part, 0, "mem", &s, &st, &e);
		CHECK(strstr(e.msg, "between sections, before the device state") != NULL,
		      "the message says where the input ended: %s", e.msg);
		sink_free(&s);
	}
	gen_free(g);
	free(g);
}

/* A sink's failure comes back with the converter's context, and the converter stays failed. */
static void sink_errors(void)
{
	struct gen *g = malloc(sizeof(*g));
	const struct memcvt_sink sk_fn = { NULL, s_state, s_size, s_image };
	struct memcvt_sink sk = sk_fn;
	struct sink s = { 0 };
	struct memcvt_stats st;
	space_err e = { 0 };
	struct memcvt *c;

	gen_init(g, "mem");
	good_stream(g, -1);
	s.fail_image = true;
	sk.opaque = &s;
	c = memcvt_new("mem", &sk, &e);
	CHECK(c && memcvt_feed(c, g->in.p, g->in.n, &e) < 0 && e.code == EIO &&
		      strstr(e.msg, "writing the image: image disk broken"),
	      "an image write error is reported: %s", e.msg);
	CHECK(c && memcvt_feed(c, "x", 1, &e) < 0 && memcvt_finish(c, &st, &e) < 0,
	      "after a failure the converter refuses more input");
	memcvt_free(c);
	sink_free(&s);

	memset(&s, 0, sizeof(s));
	s.fail_state = true;
	c = memcvt_new("mem", &sk, &e);
	CHECK(c && (memcvt_feed(c, g->in.p, g->in.n, &e) < 0 || memcvt_finish(c, &st, &e) < 0) &&
		      e.code == ENOSPC && strstr(e.msg, "writing the state: state disk full"),
	      "a state write error is reported: %s", e.msg);
	memcvt_free(c);
	sink_free(&s);
	gen_free(g);
	free(g);
}

/* Hostile input: bytes of the good stream changed at random (a fixed seed, so a failure
 * repeats) must be refused or converted, never crash (the sanitizers watch), and a stream
 * that converts must account for every byte it wrote. */
static void mutations(void)
{
	struct gen *g = malloc(sizeof(*g));
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	int refused = 0, converted = 0, wrong = 0;

	gen_init(g, "mem");
	good_stream(g, -1);
	for (int round = 0; round < 2000; round++) {
		struct buf m = { malloc(g->in.n), g->in.n, g->in.n };
		struct sink s = { 0 };
		struct memcvt_stats st;
		space_err e = { 0 };

		memcpy(m.p, g->in.p, g->in.n);
		for (int k = 0; k < 1 + round % 3; k++) {
			rng = rng * 6364136223846793005ull + 1442695040888963407ull;
			/* Half the changes land in the first 600 bytes, where the framing is. */
			m.p[(rng >> 33) % (k ? g->tail_off : 600)] ^= (uint8_t)(1u << ((rng >> 20) & 7));
		}
		if (convert(&m, round % 2 ? 4096 : 0, "mem", &s, &st, &e) == 0) {
			converted++;
			wrong += st.state_bytes != s.state.n || st.input_bytes != m.n;
		} else {
			refused++;
		}
		sink_free(&s);
		free(m.p);
	}
	CHECK(wrong == 0, "2000 mutated streams: %d refused, %d converted, all accounted for",
	      refused, converted);
	gen_free(g);
	free(g);
}

static void block_names(void)
{
	const struct memcvt_sink sk = { NULL, s_state, s_size, s_image };
	char longname[300];
	space_err e = { 0 };

	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	CHECK(memcvt_new("", &sk, &e) == NULL && e.code == EINVAL, "an empty block name is refused");
	CHECK(memcvt_new(longname, &sk, &e) == NULL && e.code == EINVAL,
	      "a block name over 255 bytes is refused");
	CHECK(memcvt_new("a\"b", &sk, &e) == NULL && e.code == EINVAL,
	      "a block name that would need JSON escaping is refused");
}

int main(void)
{
	RUN(good_chunks);
	RUN(other_block);
	RUN(refusals_framing);
	RUN(refusals_records);
	RUN(refusals_blocks);
	RUN(truncated);
	RUN(sink_errors);
	RUN(mutations);
	RUN(block_names);
	return DONE();
}
