/* harness.h -- a minimal TAP harness for the C unit tests (run by tests/unit/run.sh).
 *   CHECK(cond, fmt, ...)   one test point: `ok N - msg` or `not ok N - msg`
 *   EXPECT(cond), EXPECT_EQ(a, b)   soft assertions inside a RUN(fn): print `# file:line: ...`
 *   RUN(fn)                 run a test function; it becomes one test point of its own if it
 *                           used EXPECT* or emitted no CHECK
 *   NOTE(fmt, ...)          a `# ...` diagnostic line
 *   SKIP_ALL(reason)        skip the whole binary (exit 77)
 *   return DONE();          print the plan; exit status 1 if anything failed */
#ifndef SPACE_TEST_HARNESS_H
#define SPACE_TEST_HARNESS_H
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int h_num, h_failed, h_cur, h_expects;

static inline __attribute__((format(printf, 2, 3))) void h_point(int ok, const char *fmt, ...)
{
	va_list ap;

	h_num++;
	h_failed += !ok;
	printf("%sok %d - ", ok ? "" : "not ", h_num);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

#define CHECK(c, ...) do { int h_ok = !!(c); if (!h_ok) { \
	printf("# %s:%d: failed: %s\n", __FILE__, __LINE__, #c); } h_point(h_ok, __VA_ARGS__); } while (0)
#define NOTE(...) do { printf("# "); printf(__VA_ARGS__); putchar('\n'); } while (0)
#define EXPECT(c) do { h_expects++; if (!(c)) { h_cur = 1; \
	printf("# %s:%d: expected %s\n", __FILE__, __LINE__, #c); } } while (0)
#define EXPECT_EQ(a, b) do { long long h_a = (long long)(a), h_b = (long long)(b); h_expects++; \
	if (h_a != h_b) { h_cur = 1; printf("# %s:%d: %s == %lld, expected %s == %lld\n", \
	__FILE__, __LINE__, #a, h_a, #b, h_b); } } while (0)
#define RUN(fn) do { int h_before = h_num; h_cur = 0; h_expects = 0; printf("# %s\n", #fn); \
	fn(); if (h_expects || h_cur || h_num == h_before) h_point(!h_cur, "%s", #fn); } while (0)
#define SKIP_ALL(why) do { printf("1..0 # SKIP %s\n", why); exit(77); } while (0)
#define DONE() harness_done()
static inline int harness_done(void) { printf("1..%d\n", h_num); return h_failed ? 1 : 0; }
#endif
