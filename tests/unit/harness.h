/* harness.h -- a minimal TAP harness for the C unit tests (shared by every component).
 * Two styles, one numbering:
 *   CHECK(cond, fmt...)   one `ok N - ...` / `not ok N - ...` line per check; returns cond.
 *   RUN(fn) + EXPECT*()   one line per test function; EXPECT* note failures and go on.
 * main() ends with `return DONE();` (or `return harness_done();`): 1 on any failure.
 * SKIP_ALL(reason) exits 77, which tests/unit/run.sh counts as skipped. */
#ifndef SPACE_TEST_HARNESS_H
#define SPACE_TEST_HARNESS_H
#include <stdio.h>
#include <stdlib.h>

static int h_num, h_failed, h_cur;

#define CHECK(cond, ...)                                                                   \
	({                                                                                 \
		int _ok = !!(cond);                                                        \
		printf("%sok %d - ", _ok ? "" : "not ", ++h_num);                          \
		printf(__VA_ARGS__);                                                       \
		printf("\n");                                                              \
		if (!_ok) {                                                                \
			h_failed++;                                                        \
			printf("#   failed at %s:%d: %s\n", __FILE__, __LINE__, #cond);      \
		}                                                                          \
		fflush(stdout);                                                            \
		_ok;                                                                       \
	})

#define NOTE(...)                                                                          \
	do {                                                                               \
		printf("# ");                                                              \
		printf(__VA_ARGS__);                                                       \
		printf("\n");                                                              \
	} while (0)

#define EXPECT(c) do { if (!(c)) { h_cur = 1; \
	printf("# %s:%d: expected %s\n", __FILE__, __LINE__, #c); } } while (0)
#define EXPECT_EQ(a, b) do { long long h_a = (long long)(a), h_b = (long long)(b); \
	if (h_a != h_b) { h_cur = 1; printf("# %s:%d: %s == %lld, expected %s == %lld\n", \
	__FILE__, __LINE__, #a, h_a, #b, h_b); } } while (0)
#define RUN(fn) do { h_cur = 0; fn(); h_num++; h_failed += h_cur; \
	printf("%sok %d - %s\n", h_cur ? "not " : "", h_num, #fn); fflush(stdout); } while (0)
#define SKIP_ALL(why) do { printf("1..0 # SKIP %s\n", why); exit(77); } while (0)

static inline int harness_done(void)
{
	printf("1..%d\n", h_num);
	if (h_failed)
		printf("# %d of %d failed\n", h_failed, h_num);
	return h_failed ? 1 : 0;
}
#define DONE() harness_done()

#endif
