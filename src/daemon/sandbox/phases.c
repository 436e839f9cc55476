/* phases.c -- a sandbox start's steps on the monotonic clock, for the log line that ends each
 * start and for GET /v1/sandboxes/{id} (start_phases): where the next regression lives */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "phases.h"

static const char *const names[PH_COUNT] = {
	[PH_BEGIN] = "begin",	    [PH_NETNS] = "netns", [PH_GATEWAY] = "gateway", [PH_QEMU] = "qemu",
	[PH_READY] = "restore",	    [PH_HELLO] = "agent", [PH_IDENTITY] = "identity",
	[PH_POLICY] = "policy",	    [PH_UP] = "running",  [PH_FIRST] = "first_output",
};

const char *start_phase_name(enum start_phase p)
{
	return p < PH_COUNT ? names[p] : "?";
}

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void phases_begin(struct start_phases *ph)
{
	memset(ph, 0, sizeof(*ph));
	ph->at_us[PH_BEGIN] = now_us();
}

void phases_mark(struct start_phases *ph, enum start_phase p)
{
	if (p < PH_COUNT && ph->at_us[PH_BEGIN] && !ph->at_us[p])
		ph->at_us[p] = now_us();
}

double phases_ms(const struct start_phases *ph, enum start_phase p)
{
	if (p >= PH_COUNT || !ph->at_us[PH_BEGIN] || !ph->at_us[p])
		return -1;
	return (double)(ph->at_us[p] - ph->at_us[PH_BEGIN]) / 1000.0;
}

void phases_text(const struct start_phases *ph, char *out, size_t cap)
{
	size_t n = 0;

	if (cap)
		out[0] = '\0';
	for (int p = PH_NETNS; p < PH_COUNT && n < cap; p++) {
		if (!ph->at_us[p])
			continue;
		int w = snprintf(out + n, cap - n, "%s%s +%.1f", n ? ", " : "", names[p], phases_ms(ph, p));
		if (w < 0)
			break;
		n += (size_t)w;
	}
}
