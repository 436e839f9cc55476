/* mkseed_memcvt.c -- writes the seed-* inputs of tests/fuzz/corpus/memcvt with the stream generator
 * of tests/unit/test_memcvt.c (first byte: the harness's chunk size). Not part of the build:
 *   gcc -std=gnu11 -D_GNU_SOURCE -Isrc/common -Isrc -Itests/unit -fsanitize=address,undefined \
 *       -o /tmp/mkseed tests/fuzz/mkseed_memcvt.c build/san/libmemcvt.a build/san/libcommon.a
 *   d=tests/fuzz/corpus/memcvt; /tmp/mkseed $d/seed-good-stream $d/seed-no-pages \
 *       $d/seed-zero-records $d/seed-two-pages */
#define main test_main
#include "../unit/test_memcvt.c"
#undef main
static void out(struct gen *g, const char *path, int chunk)
{
	FILE *f = fopen(path, "wb");
	fputc(chunk, f);
	fwrite(g->in.p, 1, g->in.n, f);
	fclose(f);
}
int main(int argc, char **argv)
{
	static struct gen g;

	if (argc != 5) {
		fprintf(stderr, "usage: %s GOOD NO_PAGES ZERO_RECORDS TWO_PAGES\n", argv[0]);
		return 2;
	}
	/* test_memcvt.c's own stream: every record kind, two blocks, START/PART/END, state. */
	gen_init(&g, "mem");
	good_stream(&g, -1);
	out(&g, argv[1], 0);
	gen_free(&g);
	/* The prologue then device state: refused (the RAM section never ended). */
	gen_init(&g, "mem");
	prologue(&g);
	tail(&g);
	out(&g, argv[2], 7);
	gen_free(&g);
	/* Zero records only (one fill byte), in a PART and an END section: a few hundred bytes. */
	gen_init(&g, "mem");
	prologue(&g);
	section(&g, 0x02, RAM_ID, NULL);
	for (int p = 0; p < 8; p++)
		rec(&g, "mem", p ? NULL : "mem", (uint64_t)p, p == 5 ? 0x5a : 0);
	rec(&g, "pc.bios", "pc.bios", 1, 0);
	eos(&g, RAM_ID);
	section(&g, 0x03, RAM_ID, NULL);
	for (int p = 15; p >= 8; p--)
		rec(&g, "mem", p == 15 ? "mem" : NULL, (uint64_t)p, 0);
	eos(&g, RAM_ID);
	tail(&g);
	out(&g, argv[3], 0);
	gen_free(&g);
	/* One PAGE record of each block, zero records for the rest. */
	gen_init(&g, "mem");
	prologue(&g);
	section(&g, 0x02, RAM_ID, NULL);
	rec(&g, "mem", "mem", 5, -1);
	rec(&g, "pc.bios", "pc.bios", 0, -1);
	eos(&g, RAM_ID);
	section(&g, 0x03, RAM_ID, NULL);
	for (int p = 0; p < 16; p++)
		if (p != 5)
			rec(&g, "mem", p ? NULL : "mem", (uint64_t)p, 0);
	eos(&g, RAM_ID);
	tail(&g);
	out(&g, argv[4], 0);
	gen_free(&g);
	return 0;
}
