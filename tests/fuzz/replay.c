/* replay.c -- runs a fuzz harness's LLVMFuzzerTestOneInput over files, without libFuzzer.
 *
 * Built with gcc + ASan/UBSan by `make unit` (one build/unit/test_fuzz_<target> per
 * harness), so the checked-in corpus and every crash reproducer are replayed by the normal
 * test suite, no clang needed.  With no arguments it replays tests/fuzz/corpus/<target> and
 * tests/fuzz/regressions/<target> (relative to the repository root, where the suite runs);
 * otherwise each argument is a file or a directory of files.  Prints TAP: one point per
 * directory (a crash aborts the binary, which the runner counts as a failure). */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cleanup.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int points, failed;

static int read_file(const char *path, uint8_t **out, size_t *len)
{
	_cleanup_fclose_ FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t cap = 0, n = 0;

	if (!f)
		return -1;
	for (;;) {
		if (n == cap) {
			uint8_t *nb = realloc(buf, cap ? cap * 2 : 4096);
			if (!nb) {
				free(buf);
				return -1;
			}
			buf = nb;
			cap = cap ? cap * 2 : 4096;
		}
		size_t r = fread(buf + n, 1, cap - n, f);
		n += r;
		if (r == 0)
			break;
	}
	if (ferror(f)) {
		free(buf);
		return -1;
	}
	*out = buf;
	*len = n;
	return 0;
}

/* One input, copied into a buffer of exactly its size (so ASan sees reads past the end). */
static int run_one(const char *path)
{
	uint8_t *buf = NULL, *exact;
	size_t len = 0;

	if (read_file(path, &buf, &len) < 0) {
		printf("# %s: %s\n", path, strerror(errno));
		return -1;
	}
	exact = malloc(len ? len : 1);
	if (!exact) {
		free(buf);
		return -1;
	}
	memcpy(exact, buf, len);
	free(buf);
	fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
	LLVMFuzzerTestOneInput(exact, len);
	free(exact);
	return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

/* Every regular file of dir; a missing directory replays nothing. */
static void run_dir(const char *dir, int must_exist)
{
	struct dirent **ents = NULL;
	int n = scandir(dir, &ents, NULL, by_name), done = 0, bad = 0;

	if (n < 0) {
		points++;
		if (must_exist) {
			failed++;
			printf("not ok %d - %s: %s\n", points, dir, strerror(errno));
		} else {
			printf("ok %d - %s: absent, nothing to replay\n", points, dir);
		}
		return;
	}
	for (int i = 0; i < n; i++) {
		char path[4096];
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s", dir, ents[i]->d_name);
		if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
			if (run_one(path) < 0)
				bad++;
			else
				done++;
		}
		free(ents[i]);
	}
	free(ents);
	points++;
	failed += bad != 0 || (must_exist && done == 0);
	printf("%sok %d - %s: %d inputs replayed%s\n", bad || (must_exist && !done) ? "not " : "", points, dir,
	       done, bad ? " (some unreadable)" : "");
}

int main(int argc, char **argv)
{
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	if (argc < 2) {
		run_dir("tests/fuzz/corpus/" FUZZ_TARGET, 1);
		run_dir("tests/fuzz/regressions/" FUZZ_TARGET, 0);
	}
	for (int i = 1; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
			run_dir(argv[i], 1);
		} else {
			int bad = run_one(argv[i]) < 0;

			points++;
			failed += bad;
			printf("%sok %d - %s\n", bad ? "not " : "", points, argv[i]);
		}
	}
	printf("1..%d\n", points);
	return failed ? 1 : 0;
}
