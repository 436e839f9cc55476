/* sse.h -- incremental parser for server-sent events (text/event-stream) */
#ifndef SPACE_CLI_SSE_H
#define SPACE_CLI_SSE_H

#include <stdbool.h>
#include <stddef.h>

/* One dispatched event.  The strings live in the parser and are valid only
 * for the duration of the callback.  `data` is NUL-terminated as well as
 * counted (a chunk may contain NULs only if the server sends them). */
struct sse_event {
	const char *type; /* "message" when the stream named none */
	const char *data;
	size_t data_len;
	const char *id; /* the last event id seen so far, "" if none */
};

/* Return 0 to continue, anything else to stop: sse_parser_feed() then
 * returns SSE_STOP and the rest of that chunk is not parsed. */
typedef int (*sse_event_cb)(const struct sse_event *ev, void *arg);

enum sse_status {
	SSE_OK = 0,
	SSE_STOP,     /* the callback asked to stop */
	SSE_ETOOLONG, /* a line, or an event's data, exceeded the limit */
	SSE_ENOMEM,
};

struct sse_parser {
	sse_event_cb cb;
	void *arg;
	size_t max; /* bound on one line and on one event's data */

	char *line; /* the incomplete line carried between chunks */
	size_t line_len, line_cap;
	char *data; /* data lines of the event being built, '\n'-joined */
	size_t data_len, data_cap;
	char *event; /* event type of the event being built, NULL if none */
	char *id;    /* last event id (persists across events, per the spec) */
	bool after_cr;   /* the previous chunk ended in CR: skip a leading LF */
	bool bom_done;   /* the optional UTF-8 BOM at stream start is handled */
	enum sse_status error; /* a previous error is sticky */
	long retry_ms;   /* last valid `retry:` value, -1 if none */
};

/* A bound of 16 MiB suits streams whose events carry base64 chunks. */
#define SSE_DEFAULT_MAX (16u * 1024 * 1024)

void sse_parser_init(struct sse_parser *p, size_t max, sse_event_cb cb, void *arg);
/* Parse n more bytes.  Returns SSE_OK, SSE_STOP or an error (sticky). */
enum sse_status sse_parser_feed(struct sse_parser *p, const char *buf, size_t n);
/* The stream ended: the spec discards an event not terminated by a blank
 * line, so this only drops partial state.  Keeps the last event id, as a
 * reconnect needs it. */
void sse_parser_reset(struct sse_parser *p);
void sse_parser_free(struct sse_parser *p);
/* The last event id seen, "" if none. */
const char *sse_parser_last_id(const struct sse_parser *p);
const char *sse_parser_strerror(enum sse_status st);

#endif
