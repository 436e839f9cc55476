/* metrics.c -- the Prometheus text format writer and the process's counters and histograms */
#include "metrics.h"

#include <event2/buffer.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the writer ---- */

/* "%.17g" of a double, a sign and an exponent fit. */
#define VALUE_LEN 40

static void add(struct mx_out *o, const char *s, size_t n)
{
	if (!o->failed && n && evbuffer_add(o->buf, s, n) < 0)
		o->failed = true;
}

static void adds(struct mx_out *o, const char *s)
{
	add(o, s, strlen(s));
}

/* Escapes backslash and newline, and the double quote when quoted (label values). */
static void escaped(struct mx_out *o, const char *s, bool quoted)
{
	const char *run = s;

	for (; *s; s++) {
		const char *rep = *s == '\\' ? "\\\\" : *s == '\n' ? "\\n" : *s == '"' && quoted ? "\\\"" : NULL;

		if (!rep)
			continue;
		add(o, run, (size_t)(s - run));
		adds(o, rep);
		run = s + 1;
	}
	add(o, run, (size_t)(s - run));
}

void mx_escape_label(struct mx_out *o, const char *value)
{
	escaped(o, value, true);
}

void mx_family(struct mx_out *o, const char *name, const char *type, const char *help)
{
	adds(o, "# HELP ");
	adds(o, name);
	adds(o, " ");
	escaped(o, help, false);
	adds(o, "\n# TYPE ");
	adds(o, name);
	adds(o, " ");
	adds(o, type);
	adds(o, "\n");
}

static void format_value(double v, char s[VALUE_LEN])
{
	if (isnan(v))
		snprintf(s, VALUE_LEN, "NaN");
	else if (isinf(v))
		snprintf(s, VALUE_LEN, "%sInf", v > 0 ? "+" : "-");
	/* Below 2^53 every integer is exact (and no libm call is needed to tell one). */
	else if (v > -9007199254740992.0 && v < 9007199254740992.0 && v == (double)(int64_t)v)
		snprintf(s, VALUE_LEN, "%.0f", v);
	else {
		/* The shortest of these that reads back as v. */
		for (int prec = 1; prec <= 17; prec++) {
			snprintf(s, VALUE_LEN, "%.*g", prec, v);
			if (strtod(s, NULL) == v)
				break;
		}
	}
}

void mx_value(struct mx_out *o, double v)
{
	char s[VALUE_LEN];

	format_value(v, s);
	adds(o, s);
}

/* {k="v",...} with one more label (extra_key="extra_val") at the end when extra_key is set. */
static void labels_out(struct mx_out *o, const char *const *labels, const char *extra_key, const char *extra_val)
{
	bool any = false;

	for (size_t i = 0; labels && labels[i] && labels[i + 1]; i += 2) {
		adds(o, any ? "," : "{");
		adds(o, labels[i]);
		adds(o, "=\"");
		mx_escape_label(o, labels[i + 1]);
		adds(o, "\"");
		any = true;
	}
	if (extra_key) {
		adds(o, any ? "," : "{");
		adds(o, extra_key);
		adds(o, "=\"");
		mx_escape_label(o, extra_val);
		adds(o, "\"");
		any = true;
	}
	if (any)
		adds(o, "}");
}

static void sample_with(struct mx_out *o, const char *name, const char *suffix, const char *const *labels,
			const char *extra_key, const char *extra_val, double value)
{
	adds(o, name);
	adds(o, suffix);
	labels_out(o, labels, extra_key, extra_val);
	adds(o, " ");
	mx_value(o, value);
	adds(o, "\n");
}

void mx_sample(struct mx_out *o, const char *name, const char *const *labels, double value)
{
	sample_with(o, name, "", labels, NULL, NULL, value);
}

void mx_hist_observe(struct mx_hist *h, double v)
{
	size_t i = 0;

	while (i < h->n && v > h->le[i])
		i++;
	h->bucket[i]++;
	h->sum += v;
	h->count++;
}

void mx_histogram(struct mx_out *o, const char *name, const char *const *labels, const struct mx_hist *h)
{
	uint64_t cum = 0;

	for (size_t i = 0; i < h->n && i < MX_MAX_BUCKETS; i++) {
		char le[VALUE_LEN];

		cum += h->bucket[i];
		format_value(h->le[i], le);
		sample_with(o, name, "_bucket", labels, "le", le, (double)cum);
	}
	sample_with(o, name, "_bucket", labels, "le", "+Inf", (double)h->count);
	sample_with(o, name, "_sum", labels, NULL, NULL, h->sum);
	sample_with(o, name, "_count", labels, NULL, NULL, (double)h->count);
}

/* ---- the registry ---- */

/* Operations take from a fraction of a second (pause) to minutes (a cold boot under TCG). */
static const double op_le[] = { 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300 };

static const char *const planes[] = { "api", "data" };
#define NPLANES (sizeof(planes) / sizeof(planes[0]))
static const char *const classes[] = { "1xx", "2xx", "3xx", "4xx", "5xx" };
#define NCLASSES (sizeof(classes) / sizeof(classes[0]))
static const char *const transports[MX_TR__COUNT] = {
	[MX_TR_SSE] = "sse", [MX_TR_WEBSOCKET] = "websocket", [MX_TR_E2B] = "e2b",
};
static const char *const streams[] = { "stdout", "stderr" };

static struct {
	uint64_t ops[OPK__COUNT][2]; /* [kind][ok] */
	struct mx_hist op_seconds[OPK__COUNT];
	bool hist_ready;
	uint64_t sessions_started;
	uint64_t output_bytes[MX_TR__COUNT][2];
	uint64_t http[NPLANES][NCLASSES];
} reg;

static struct mx_hist *op_hist(enum op_kind kind)
{
	if (!reg.hist_ready) {
		for (int k = 0; k < OPK__COUNT; k++) {
			reg.op_seconds[k].le = op_le;
			reg.op_seconds[k].n = sizeof(op_le) / sizeof(op_le[0]);
		}
		reg.hist_ready = true;
	}
	return &reg.op_seconds[kind];
}

void metrics_op_finished(enum op_kind kind, bool ok, double seconds)
{
	if ((unsigned)kind >= OPK__COUNT)
		return;
	reg.ops[kind][ok ? 1 : 0]++;
	mx_hist_observe(op_hist(kind), seconds > 0 ? seconds : 0);
}

void metrics_session_started(void)
{
	reg.sessions_started++;
}

void metrics_output_sent(enum mx_transport t, int stream, uint64_t n)
{
	if ((unsigned)t < MX_TR__COUNT)
		reg.output_bytes[t][stream == 2 ? 1 : 0] += n;
}

void metrics_http_answered(const char *plane, int status)
{
	for (size_t p = 0; plane && p < NPLANES; p++)
		if (strcmp(plane, planes[p]) == 0 && status >= 100 && status < 600)
			reg.http[p][status / 100 - 1]++;
}

static void write_ops(struct mx_out *o)
{
	mx_family(o, "space_operations_total", "counter",
		  "Operations that finished, by kind and result (succeeded, failed).");
	for (int k = 0; k < OPK__COUNT; k++)
		for (int ok = 1; ok >= 0; ok--) {
			const char *l[] = { "kind", op_kind_name((enum op_kind)k), "result",
					    op_state_name(ok ? OP_SUCCEEDED : OP_FAILED), NULL };
			mx_sample(o, "space_operations_total", l, (double)reg.ops[k][ok]);
		}
	mx_family(o, "space_operation_duration_seconds", "histogram",
		  "Time from an operation's creation to its end (succeeded or failed), by kind.");
	for (int k = 0; k < OPK__COUNT; k++) {
		const char *l[] = { "kind", op_kind_name((enum op_kind)k), NULL };
		mx_histogram(o, "space_operation_duration_seconds", l, op_hist((enum op_kind)k));
	}
}

void metrics_write_counters(struct mx_out *o)
{
	write_ops(o);
	mx_family(o, "space_sessions_started_total", "counter", "Command sessions created (API and E2B processes).");
	mx_sample(o, "space_sessions_started_total", NULL, (double)reg.sessions_started);
	mx_family(o, "space_output_bytes_total", "counter",
		  "Bytes of command output sent to clients on the data plane, by transport and stream "
		  "(payload bytes, before the transport's framing and encoding).");
	for (int t = 0; t < MX_TR__COUNT; t++)
		for (int s = 0; s < 2; s++) {
			const char *l[] = { "transport", transports[t], "stream", streams[s], NULL };
			mx_sample(o, "space_output_bytes_total", l, (double)reg.output_bytes[t][s]);
		}
	mx_family(o, "space_http_requests_total", "counter",
		  "HTTP requests answered, by listener (api: control plane, data: data plane) and status class.");
	for (size_t p = 0; p < NPLANES; p++)
		for (size_t c = 0; c < NCLASSES; c++) {
			const char *l[] = { "plane", planes[p], "class", classes[c], NULL };
			mx_sample(o, "space_http_requests_total", l, (double)reg.http[p][c]);
		}
}
