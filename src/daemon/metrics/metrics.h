/* metrics.h -- Prometheus metrics: the counters and histograms code paths feed, and the writer of
 * the text exposition format 0.0.4 that GET /metrics answers with (docs/design/metrics.md) */
#ifndef SPACE_METRICS_H
#define SPACE_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

struct evbuffer;

/* ---- the exposition writer (pure; tests/unit/test_metrics.c) ----
 * Every call appends to out->buf; a failed append sets out->failed, which sticks, so a caller
 * checks once at the end. Names are the caller's constants ([a-zA-Z_:][a-zA-Z0-9_:]*); label
 * values are escaped here (\\, \", \n), HELP text too (\\, \n). */
struct mx_out {
	struct evbuffer *buf;
	bool failed;
};

/* A family's "# HELP" and "# TYPE" lines; type is "counter", "gauge" or "histogram". */
void mx_family(struct mx_out *o, const char *name, const char *type, const char *help);
/* One sample: name{k="v",...} value. labels: NULL, or {key, value, ..., NULL}. */
void mx_sample(struct mx_out *o, const char *name, const char *const *labels, double value);
/* A label value as it goes between the quotes. */
void mx_escape_label(struct mx_out *o, const char *value);
/* A value: integers as integers, others in the fewest digits that read back the same, +Inf,
 * -Inf, NaN. */
void mx_value(struct mx_out *o, double v);

/* A histogram over fixed upper bounds (ascending; +Inf implied). Buckets are counted apart
 * and written cumulative. */
#define MX_MAX_BUCKETS 16
struct mx_hist {
	const double *le;
	size_t n;                          /* bounds in le, at most MX_MAX_BUCKETS */
	uint64_t bucket[MX_MAX_BUCKETS + 1]; /* observations in (le[i-1], le[i]]; the last: > le[n-1] */
	double sum;
	uint64_t count;
};
void mx_hist_observe(struct mx_hist *h, double v);
/* name_bucket{labels...,le="..."} for every bound and +Inf, then name_sum and name_count. */
void mx_histogram(struct mx_out *o, const char *name, const char *const *labels, const struct mx_hist *h);

/* ---- what the daemon counts ----
 * A registry of the process (one daemon per process; fed from places that do not carry the
 * daemon's context, such as a stream's writer). The event loop's thread alone touches it. */
enum mx_transport { MX_TR_SSE, MX_TR_WEBSOCKET, MX_TR_E2B, MX_TR__COUNT };

/* An operation reached succeeded or failed, seconds after it was created. */
void metrics_op_finished(enum op_kind kind, bool ok, double seconds);
/* A command session was created. */
void metrics_session_started(void);
/* n bytes of a session's output went to a client (stream: 1 stdout, 2 stderr). */
void metrics_output_sent(enum mx_transport t, int stream, uint64_t n);
/* A request of listener `plane` ("api", "data") was answered with status. */
void metrics_http_answered(const char *plane, int status);
/* The families of the counters above, every series written (zeros included). */
void metrics_write_counters(struct mx_out *o);

#endif
