/* harness.h -- a minimal TAP harness for the C unit tests (run by tests/unit/run.sh).
 *   CHECK(cond, fmt, ...)   one test point: `ok N - msg` or `not ok N - msg`; yields cond
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

static int h_num, h_failed, h_cur __attribute__((unused)), h_expects __attribute__((unused));

static inline __attribute__((format(printf, 5, 6))) int h_check(int ok, const char *file, int line,
								  const char *expr, const char *fmt, ...)
{
	va_list ap;

	if (!ok && expr)
		printf("# %s:%d: failed: %s\n", file, line, expr);
	h_num++;
	h_failed += !ok;
	printf("%sok %d - ", ok ? "" : "not ", h_num);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	return ok;
}

/* An expression: `if (!CHECK(fd >= 0, "open")) return DONE();` */
#define CHECK(c, ...) h_check(!!(c), __FILE__, __LINE__, #c, __VA_ARGS__)
#define NOTE(...) do { printf("# "); printf(__VA_ARGS__); putchar('\n'); } while (0)
#define EXPECT(c) do { h_expects++; if (!(c)) { h_cur = 1; \
	printf("# %s:%d: expected %s\n", __FILE__, __LINE__, #c); } } while (0)
#define EXPECT_EQ(a, b) do { long long h_a = (long long)(a), h_b = (long long)(b); h_expects++; \
	if (h_a != h_b) { h_cur = 1; printf("# %s:%d: %s == %lld, expected %s == %lld\n", \
	__FILE__, __LINE__, #a, h_a, #b, h_b); } } while (0)
#define RUN(fn) do { int h_before = h_num; h_cur = 0; h_expects = 0; printf("# %s\n", #fn); \
	fn(); if (h_expects || h_cur || h_num == h_before) \
		h_check(!h_cur, __FILE__, __LINE__, NULL, "%s", #fn); } while (0)
#define SKIP_ALL(why) do { printf("1..0 # SKIP %s\n", why); exit(77); } while (0)
#define DONE() harness_done()
static inline int harness_done(void) { printf("1..%d\n", h_num); return h_failed ? 1 : 0; }
#endif
