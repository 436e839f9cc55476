/* progress.h -- a transfer's progress on stderr: bytes done of the total and
 * the rate, redrawn at most 10 times a second, cleared at the end */
#ifndef SPACE_CLI_PROGRESS_H
#define SPACE_CLI_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>

struct progress {
	bool on;
	bool drawn;
	long long total; /* < 0: unknown */
	unsigned long long done;
	double t0, last;
};

/* Shown when on (callers pass: stderr is a terminal and not --quiet). */
void progress_start(struct progress *p, bool on, long long total);
void progress_set(struct progress *p, unsigned long long done);
/* Clear the line (before a message, and at the end). */
void progress_clear(struct progress *p);

/* "12.3 MiB / 20.0 MiB  61%  5.1 MiB/s" ("12.3 MiB  5.1 MiB/s" without a
 * total); the rate is left out before 0.2 s have passed. */
void progress_format(char *out, size_t len, unsigned long long done, long long total,
		     double secs);

#endif
