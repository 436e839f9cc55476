/* log.c -- timestamped log lines on stderr */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

static enum log_level min_level = LOG_INFO;
static const char *log_prefix = "space";

void log_set_level(enum log_level lvl)
{
	min_level = lvl;
}

bool log_enabled(enum log_level lvl)
{
	return lvl >= min_level;
}

void log_set_prefix(const char *prefix)
{
	log_prefix = prefix;
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
	static const char *names[] = { "debug", "info", "warn", "error" };
	struct timespec ts;
	struct tm tm;
	char when[32];
	va_list ap;

	if (lvl < min_level)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	fprintf(stderr, "%s.%03ldZ %s %s: ", when, ts.tv_nsec / 1000000,
		log_prefix, names[lvl]);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

bool log_limit_take(struct log_limit *l, int64_t now_ms, unsigned per_s, unsigned burst,
		    uint64_t *suppressed)
{
	uint64_t cap = (uint64_t)burst * 1000;

	*suppressed = 0;
	if (!l->started || now_ms < l->last_ms) {
		/* First use, or the clock went back (it is monotonic: only a caller's mistake). */
		l->started = true;
		l->milli = cap;
		l->last_ms = now_ms;
	} else {
		uint64_t dt = (uint64_t)(now_ms - l->last_ms);

		/* per_s tokens a second = per_s milli-tokens a millisecond; dt is clamped so the
		 * product cannot overflow after a long quiet spell. */
		l->milli += (dt > cap ? cap : dt) * per_s;
		if (l->milli > cap)
			l->milli = cap;
		l->last_ms = now_ms;
	}
	if (l->milli < 1000) {
		l->suppressed++;
		return false;
	}
	l->milli -= 1000;
	*suppressed = l->suppressed;
	l->suppressed = 0;
	return true;
}
