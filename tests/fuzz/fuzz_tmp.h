/* fuzz_tmp.h -- a temporary state directory for a harness, made once per process and removed at
 * exit (libFuzzer and the replay driver both leave through exit()). */
#ifndef SPACE_FUZZ_TMP_H
#define SPACE_FUZZ_TMP_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fuzz_tmp_path[64];

static int fuzz_tmp_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void fuzz_tmp_cleanup(void)
{
	if (fuzz_tmp_path[0])
		nftw(fuzz_tmp_path, fuzz_tmp_rm, 16, FTW_DEPTH | FTW_PHYS);
}

/* "/tmp/space-fuzz-<name>-XXXXXX", created; NULL on failure. */
static inline const char *fuzz_tmpdir(const char *name)
{
	snprintf(fuzz_tmp_path, sizeof(fuzz_tmp_path), "/tmp/space-fuzz-%s-XXXXXX", name);
	if (!mkdtemp(fuzz_tmp_path))
		return NULL;
	atexit(fuzz_tmp_cleanup);
	return fuzz_tmp_path;
}

#endif
