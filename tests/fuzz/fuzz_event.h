/* fuzz_event.h -- libevent's own warnings are findings: they report misuse that the sanitizers
 * do not see, such as an fd closed while libevent still watches it (epoll_ctl then fails with
 * EBADF, or, once the number is reused, acts on another descriptor). */
#ifndef SPACE_FUZZ_EVENT_H
#define SPACE_FUZZ_EVENT_H

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>

static void fuzz_event_log(int severity, const char *msg)
{
	if (severity < EVENT_LOG_WARN)
		return;
	fprintf(stderr, "libevent warning (a finding): %s\n", msg);
	abort();
}

/* Makes every libevent warning or error abort the process. */
static inline void fuzz_event_strict(void)
{
	event_set_log_callback(fuzz_event_log);
}

#endif
