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
