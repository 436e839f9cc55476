/* parser.h -- the converter's state, shared by its parts: stream.c (driver, output, API),
 * sections.c (header, configuration, section framing) and records.c (RAM records) */
#ifndef SPACE_MEMCVT_PARSER_H
#define SPACE_MEMCVT_PARSER_H

#include <endian.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "err.h"
#include "stream.h"

/* migration/savevm.c */
#define VM_MAGIC 0x5145564du
#define VM_VERSION 3
#define VM_SECTION_START 0x01
#define VM_SECTION_PART 0x02
#define VM_SECTION_END 0x03
#define VM_SUBSECTION 0x05
#define VM_CONFIGURATION 0x07
#define VM_SECTION_FOOTER 0x7e
/* migration/ram.c: the low bits of a record's address word */
#define RAM_VERSION 4
#define F_ZERO 0x02
#define F_MEM_SIZE 0x04
#define F_PAGE 0x08
#define F_EOS 0x10
#define F_CONTINUE 0x20
#define F_KNOWN (F_ZERO | F_MEM_SIZE | F_PAGE | F_EOS | F_CONTINUE)
#define F_MASK ((uint64_t)MEMCVT_PAGE - 1)
#define NAME_MAX_LEN 255
#define MAX_CAPS 64
#define ULL(x) ((unsigned long long)(x))

/* Each state names the item the parser waits for; all but ST_PAGE and ST_TAIL are read whole
 * (gathered in acc when a chunk ends inside one) and handed to one handler. */
enum state {
	ST_MAGIC,       /* 8: magic, version */
	ST_CONF_TYPE,   /* 1: QEMU_VM_CONFIGURATION */
	ST_CONF_LEN,    /* 4: machine name length */
	ST_CONF_NAME,
	ST_SUB_PEEK,    /* 1: a configuration subsection, or the first section */
	ST_SUB_LEN,
	ST_SUB_NAME,
	ST_SUB_VERSION, /* 4 */
	ST_PAGE_BITS,   /* 4 */
	ST_CAPS_COUNT,  /* 4 */
	ST_CAP_LEN,
	ST_CAP_NAME,
	ST_UUID,        /* 16 */
	ST_SEC_TYPE,    /* 1 */
	ST_SEC_ID,      /* 4: a PART or END section's id */
	ST_START_ID,    /* 4 */
	ST_START_LEN,
	ST_START_NAME,
	ST_START_VER,   /* 8: instance id, version */
	ST_REC,         /* 8: a RAM record's address | flags */
	ST_REC_LEN,
	ST_REC_NAME,
	ST_FILL,        /* 1: a ZERO record's fill byte */
	ST_PAGE,        /* 4096, streamed */
	ST_MS_LEN,      /* MEM_SIZE's block list */
	ST_MS_NAME,
	ST_MS_VALS,     /* 16: used length, guest address */
	ST_FOOTER,      /* 5 */
	ST_TAIL,        /* device state: copied to the end */
};

struct block {
	char name[NAME_MAX_LEN + 1];
	uint64_t bytes;
};

struct memcvt {
	struct memcvt_sink sink;
	char image_name[NAME_MAX_LEN + 1];
	bool failed;

	enum state state;
	size_t need;          /* bytes of the item the state waits for */
	size_t have;          /* of them gathered in acc */
	uint8_t acc[NAME_MAX_LEN + 1];
	uint64_t pos;         /* input bytes consumed */
	uint64_t item_off;    /* where the current item began */

	enum state sub_next;  /* the configuration subsection's fields */
	size_t sub_need;
	uint32_t caps_left;
	bool ignore_shared;

	bool ram_started, ram_ended;
	uint8_t sec_type;
	uint32_t ram_id;

	bool have_blocks;     /* MEM_SIZE seen */
	uint64_t blocks_left; /* bytes of the MEM_SIZE total not yet named */
	struct block blocks[MEMCVT_MAX_BLOCKS];
	int nblocks;
	int image;            /* index of the image block, -1 until named */

	/* The record being read: its header (word and name) is held until its block is known,
	 * then written to the state stream or dropped. */
	uint64_t rec_off, rec_addr;
	unsigned rec_flags;
	uint8_t held[8 + 1 + NAME_MAX_LEN];
	size_t nheld;
	int last_block;       /* what a CONTINUE means in the stream read */
	int last_kept;        /* ... and in the state stream written */
	bool to_image;
	bool was_seen;        /* the image page had a record before this one */
	size_t page_have;

	/* One bit per image page that had a record: a ZERO record for a page already written
	 * must write zeros, and every page must be covered before the device state. */
	uint64_t *seen;
	uint64_t npages, nseen;

	/* Consecutive image pages, written with one image_write; the bases point into the chunk
	 * being fed, so the run is flushed before memcvt_feed returns. */
	struct iovec run[MEMCVT_RUN_PAGES];
	int nrun;
	uint64_t run_off;
	uint8_t page[MEMCVT_PAGE]; /* a page split across chunks, or a filled page */

	struct memcvt_stats stats;
	size_t nout;
	uint8_t out[MEMCVT_STATE_BUF];
};

/* stream.c: shared helpers.  A failing helper returns -1 with e set and marks c failed. */
int cvt_bad(struct memcvt *c, space_err *e, uint64_t off, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
int cvt_check_name(struct memcvt *c, space_err *e, const uint8_t *p, size_t n, const char *what);
int cvt_name_len(struct memcvt *c, space_err *e, const uint8_t *p, enum state next,
		 const char *what, bool pass);
int cvt_emit(struct memcvt *c, const void *p, size_t n, space_err *e);
int cvt_run_add(struct memcvt *c, const uint8_t *data, uint64_t off, space_err *e);
int cvt_run_flush(struct memcvt *c, space_err *e);

/* sections.c: one handler per state; p holds the c->need bytes of the item.  A handler that
 * uses the length copies it first: expect() sets c->need for the next item. */
int on_magic(struct memcvt *c, const uint8_t *p, space_err *e);
int on_conf_type(struct memcvt *c, const uint8_t *p, space_err *e);
int on_conf_len(struct memcvt *c, const uint8_t *p, space_err *e);
int on_conf_name(struct memcvt *c, const uint8_t *p, space_err *e);
int on_sub_peek(struct memcvt *c, const uint8_t *p, space_err *e);
int on_sub_name(struct memcvt *c, const uint8_t *p, space_err *e);
int on_sub_version(struct memcvt *c, const uint8_t *p, space_err *e);
int on_page_bits(struct memcvt *c, const uint8_t *p, space_err *e);
int on_caps_count(struct memcvt *c, const uint8_t *p, space_err *e);
int on_cap_name(struct memcvt *c, const uint8_t *p, space_err *e);
int on_uuid(struct memcvt *c, const uint8_t *p, space_err *e);
int on_sec_type(struct memcvt *c, const uint8_t *p, space_err *e);
int on_sec_id(struct memcvt *c, const uint8_t *p, space_err *e);
int on_start_id(struct memcvt *c, const uint8_t *p, space_err *e);
int on_start_name(struct memcvt *c, const uint8_t *p, space_err *e);
int on_start_ver(struct memcvt *c, const uint8_t *p, space_err *e);
int on_footer(struct memcvt *c, const uint8_t *p, space_err *e);

/* records.c */
int on_ms_name(struct memcvt *c, const uint8_t *p, space_err *e);
int on_ms_vals(struct memcvt *c, const uint8_t *p, space_err *e);
int on_rec(struct memcvt *c, const uint8_t *p, space_err *e);
int on_rec_name(struct memcvt *c, const uint8_t *p, space_err *e);
int on_fill(struct memcvt *c, const uint8_t *p, space_err *e);
/* Up to len bytes of a page's payload; returns how many it took, or -1. */
ssize_t page_bytes(struct memcvt *c, const uint8_t *p, size_t len, space_err *e);

static inline uint32_t be32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return be32toh(v);
}

static inline uint64_t be64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return be64toh(v);
}

static inline void expect(struct memcvt *c, enum state st, size_t need)
{
	c->state = st;
	c->need = need;
}

static inline bool name_is(const uint8_t *p, size_t n, const char *s)
{
	return n == strlen(s) && memcmp(p, s, n) == 0;
}

#endif
