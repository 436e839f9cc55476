/* progress.c -- a transfer's progress on stderr (see progress.h) */
#include "progress.h"

#include <stdio.h>
#include <time.h>

#include "cli.h"

#define REDRAW_S 0.1

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void progress_format(char *out, size_t len, unsigned long long done, long long total,
		     double secs)
{
	char d[32], t[32], r[32], rate[48] = "";
	int n;

	ctl_fmt_bytes((long long)done, d, sizeof(d));
	if (secs >= 0.2) {
		ctl_fmt_bytes((long long)((double)done / secs), r, sizeof(r));
		snprintf(rate, sizeof(rate), "  %s/s", r);
	}
	if (total >= 0) {
		int pct = total ? (int)((double)done * 100.0 / (double)total) : 100;

		if (pct > 100)
			pct = 100;
		ctl_fmt_bytes(total, t, sizeof(t));
		n = snprintf(out, len, "%s / %s  %d%%%s", d, t, pct, rate);
	} else {
		n = snprintf(out, len, "%s%s", d, rate);
	}
	(void)n;
}

void progress_start(struct progress *p, bool on, long long total)
{
	p->on = on;
	p->drawn = false;
	p->total = total;
	p->done = 0;
	p->t0 = now_s();
	p->last = 0;
}

void progress_set(struct progress *p, unsigned long long done)
{
	char line[128];
	double t;

	p->done = done;
	if (!p->on)
		return;
	t = now_s();
	if (t - p->last < REDRAW_S)
		return;
	p->last = t;
	progress_format(line, sizeof(line), done, p->total, t - p->t0);
	fprintf(stderr, "\r%s\033[K", line);
	fflush(stderr);
	p->drawn = true;
}

void progress_clear(struct progress *p)
{
	if (p->on && p->drawn) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
		p->drawn = false;
		p->last = 0;
	}
}
