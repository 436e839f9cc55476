/* sections.c -- the stream's framing: header, configuration (capabilities) and section
 * headers and footers, all copied to the state stream; the first other byte starts the tail */
#include "parser.h"

int on_magic(struct memcvt *c, const uint8_t *p, space_err *e)
{
	if (be32(p) != VM_MAGIC)
		return cvt_bad(c, e, c->item_off, "not a QEMU migration stream (magic 0x%08x)",
			       be32(p));
	if (be32(p + 4) != VM_VERSION)
		return cvt_bad(c, e, c->item_off, "stream version %u; only %u is understood",
			       be32(p + 4), VM_VERSION);
	expect(c, ST_CONF_TYPE, 1);
	return cvt_emit(c, p, 8, e);
}

int on_conf_type(struct memcvt *c, const uint8_t *p, space_err *e)
{
	if (p[0] != VM_CONFIGURATION)
		return cvt_bad(c, e, c->item_off, "no configuration section (byte 0x%02x)", p[0]);
	expect(c, ST_CONF_LEN, 4);
	return cvt_emit(c, p, 1, e);
}

int on_conf_len(struct memcvt *c, const uint8_t *p, space_err *e)
{
	uint32_t n = be32(p);

	if (n == 0 || n > NAME_MAX_LEN)
		return cvt_bad(c, e, c->item_off, "machine name of %u bytes", n);
	expect(c, ST_CONF_NAME, n);
	return cvt_emit(c, p, 4, e);
}

int on_conf_name(struct memcvt *c, const uint8_t *p, space_err *e)
{
	size_t n = c->need;

	if (cvt_check_name(c, e, p, n, "the machine name") < 0)
		return -1;
	expect(c, ST_SUB_PEEK, 1);
	return cvt_emit(c, p, n, e);
}

static const struct {
	const char *name;
	enum state next;
	size_t need;
} subsections[] = {
	{ "configuration/target-page-bits", ST_PAGE_BITS, 4 },
	{ "configuration/capabilities", ST_CAPS_COUNT, 4 },
	{ "configuration/uuid", ST_UUID, 16 },
};

int on_sub_name(struct memcvt *c, const uint8_t *p, space_err *e)
{
	size_t n = c->need;

	if (cvt_check_name(c, e, p, n, "a subsection name") < 0)
		return -1;
	for (size_t i = 0; i < sizeof(subsections) / sizeof(subsections[0]); i++) {
		if (name_is(p, n, subsections[i].name)) {
			c->sub_next = subsections[i].next;
			c->sub_need = subsections[i].need;
			expect(c, ST_SUB_VERSION, 4);
			return cvt_emit(c, p, n, e);
		}
	}
	return cvt_bad(c, e, c->item_off, "unknown configuration subsection \"%.*s\"", (int)n,
		       p);
}

int on_sub_version(struct memcvt *c, const uint8_t *p, space_err *e)
{
	expect(c, c->sub_next, c->sub_need);
	return cvt_emit(c, p, 4, e);
}

int on_page_bits(struct memcvt *c, const uint8_t *p, space_err *e)
{
	if (be32(p) != 12)
		return cvt_bad(c, e, c->item_off,
			       "target page bits %u; only 12 (4 KiB pages) is supported", be32(p));
	expect(c, ST_SUB_PEEK, 1);
	return cvt_emit(c, p, 4, e);
}

int on_caps_count(struct memcvt *c, const uint8_t *p, space_err *e)
{
	c->caps_left = be32(p);
	if (c->caps_left > MAX_CAPS)
		return cvt_bad(c, e, c->item_off, "%u capabilities (at most %d)", c->caps_left,
			       MAX_CAPS);
	expect(c, c->caps_left ? ST_CAP_LEN : ST_SUB_PEEK, 1);
	return cvt_emit(c, p, 4, e);
}

int on_cap_name(struct memcvt *c, const uint8_t *p, space_err *e)
{
	size_t n = c->need;

	if (cvt_check_name(c, e, p, n, "a capability name") < 0)
		return -1;
	if (name_is(p, n, "x-ignore-shared"))
		c->ignore_shared = true;
	if (cvt_emit(c, p, n, e) < 0)
		return -1;
	expect(c, --c->caps_left ? ST_CAP_LEN : ST_SUB_PEEK, 1);
	return 0;
}

int on_uuid(struct memcvt *c, const uint8_t *p, space_err *e)
{
	expect(c, ST_SUB_PEEK, 1);
	return cvt_emit(c, p, 16, e);
}

static int start_tail(struct memcvt *c, const uint8_t *p, space_err *e)
{
	if (!c->ram_started)
		return cvt_bad(c, e, c->item_off, "section type 0x%02x before the RAM section",
			       p[0]);
	if (!c->ram_ended)
		return cvt_bad(c, e, c->item_off,
			       "device state (type 0x%02x) before the RAM section ended", p[0]);
	if (c->image < 0)
		return cvt_bad(c, e, c->item_off, "block %s was not in the stream", c->image_name);
	/* A page the stream never sent would read as zeros in the image: refuse it. */
	if (c->nseen != c->npages)
		return cvt_bad(c, e, c->item_off, "block %s: only %llu of its %llu pages were sent",
			       c->image_name, ULL(c->nseen), ULL(c->npages));
	expect(c, ST_TAIL, 0);
	return cvt_emit(c, p, 1, e);
}

int on_sec_type(struct memcvt *c, const uint8_t *p, space_err *e)
{
	c->sec_type = p[0];
	switch (p[0]) {
	case VM_SECTION_START:
		if (c->ram_started)
			return cvt_bad(c, e, c->item_off, "a second START section");
		expect(c, ST_START_ID, 4);
		return cvt_emit(c, p, 1, e);
	case VM_SECTION_PART:
	case VM_SECTION_END:
		if (!c->ram_started)
			return cvt_bad(c, e, c->item_off, "a PART or END section before START");
		if (c->ram_ended)
			return cvt_bad(c, e, c->item_off, "a RAM section after its END section");
		expect(c, ST_SEC_ID, 4);
		return cvt_emit(c, p, 1, e);
	default:
		return start_tail(c, p, e);
	}
}

/* The configuration's subsections end where the first section begins. */
int on_sub_peek(struct memcvt *c, const uint8_t *p, space_err *e)
{
	if (p[0] == VM_SUBSECTION) {
		expect(c, ST_SUB_LEN, 1);
		return cvt_emit(c, p, 1, e);
	}
	if (!c->ignore_shared)
		return cvt_bad(c, e, c->item_off,
			       "the stream was not written with x-ignore-shared on");
	return on_sec_type(c, p, e);
}

int on_sec_id(struct memcvt *c, const uint8_t *p, space_err *e)
{
	if (be32(p) != c->ram_id)
		return cvt_bad(c, e, c->item_off, "section id %u is not the RAM section's (%u)",
			       be32(p), c->ram_id);
	if (c->sec_type == VM_SECTION_END)
		c->ram_ended = true;
	expect(c, ST_REC, 8);
	return cvt_emit(c, p, 4, e);
}

int on_start_id(struct memcvt *c, const uint8_t *p, space_err *e)
{
	c->ram_id = be32(p);
	expect(c, ST_START_LEN, 1);
	return cvt_emit(c, p, 4, e);
}

int on_start_name(struct memcvt *c, const uint8_t *p, space_err *e)
{
	size_t n = c->need;

	if (cvt_check_name(c, e, p, n, "a section name") < 0)
		return -1;
	if (!name_is(p, n, "ram"))
		return cvt_bad(c, e, c->item_off, "the first section is \"%.*s\", not \"ram\"",
			       (int)n, p);
	expect(c, ST_START_VER, 8);
	return cvt_emit(c, p, n, e);
}

int on_start_ver(struct memcvt *c, const uint8_t *p, space_err *e)
{
	if (be32(p + 4) != RAM_VERSION)
		return cvt_bad(c, e, c->item_off, "RAM section version %u; only %u is understood",
			       be32(p + 4), RAM_VERSION);
	c->ram_started = true;
	expect(c, ST_REC, 8);
	return cvt_emit(c, p, 8, e);
}

int on_footer(struct memcvt *c, const uint8_t *p, space_err *e)
{
	if (p[0] != VM_SECTION_FOOTER || be32(p + 1) != c->ram_id)
		return cvt_bad(c, e, c->item_off,
			       "bad section footer (0x%02x, id %u; want 0x%02x, id %u)", p[0],
			       be32(p + 1), VM_SECTION_FOOTER, c->ram_id);
	expect(c, ST_SEC_TYPE, 1);
	return cvt_emit(c, p, 5, e);
}
