/* log.h -- timestamped log lines on stderr */
#ifndef SPACE_LOG_H
#define SPACE_LOG_H

#include <stdbool.h>
#include <stdint.h>

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

void log_set_level(enum log_level lvl);
void log_set_prefix(const char *prefix);
/* Whether a line at lvl would be written (to skip building costly ones). */
bool log_enabled(enum log_level lvl);
void log_msg(enum log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

/* A token bucket for log lines a peer can cause (a guest, a client): at most `burst` lines at
 * once, then `per_s` a second. Zero-initialise; the first call finds the bucket full. */
struct log_limit {
	int64_t last_ms;      /* when tokens were last refilled (monotonic ms) */
	uint64_t milli;       /* tokens x 1000 */
	uint64_t suppressed;  /* lines refused since the last one allowed */
	bool started;
};

/* true: write the line. *suppressed gets how many were refused before it (then reset), so the
 * caller can say so once; false: drop the line (counted). */
bool log_limit_take(struct log_limit *l, int64_t now_ms, unsigned per_s, unsigned burst,
		    uint64_t *suppressed);

#endif
