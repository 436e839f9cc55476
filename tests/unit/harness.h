/* harness.h -- a TAP-producing unit test harness: CHECK lines, a plan, exit 0/1/77 */
#ifndef SPACE_TEST_HARNESS_H
#define SPACE_TEST_HARNESS_H

#include <stdio.h>
#include <stdlib.h>

static int t_count, t_failed;

/* Prints "ok N - name" or "not ok N - name" (with where it failed); returns cond. */
#define CHECK(cond, ...)                                                                   \
	({                                                                                 \
		int _ok = !!(cond);                                                        \
		printf("%sok %d - ", _ok ? "" : "not ", ++t_count);                        \
		printf(__VA_ARGS__);                                                       \
		printf("\n");                                                              \
		if (!_ok) {                                                                \
			t_failed++;                                                        \
			printf("#   failed at %s:%d: %s\n", __FILE__, __LINE__, #cond);      \
		}                                                                          \
		fflush(stdout);                                                            \
		_ok;                                                                       \
	})

/* A diagnostic line ("# ..."), ignored by TAP readers. */
#define NOTE(...)                                                                          \
	do {                                                                               \
		printf("# ");                                                              \
		printf(__VA_ARGS__);                                                       \
		printf("\n");                                                              \
	} while (0)

/* Whole program skipped (TAP "1..0 # SKIP"), exit 77 as automake and meson expect. */
#define SKIP_ALL(...)                                                                      \
	do {                                                                               \
		printf("1..0 # SKIP ");                                                    \
		printf(__VA_ARGS__);                                                       \
		printf("\n");                                                              \
		exit(77);                                                                  \
	} while (0)

/* Prints the plan and the exit status: return DONE(); from main. */
#define DONE()                                                                             \
	({                                                                                 \
		printf("1..%d\n", t_count);                                                \
		if (t_failed)                                                              \
			printf("# %d of %d failed\n", t_failed, t_count);                  \
		t_failed ? 1 : 0;                                                          \
	})

#endif
