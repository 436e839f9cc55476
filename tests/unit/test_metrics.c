/* test_metrics.c -- the Prometheus text writer: escaping, values, histograms (cumulative buckets,
 * +Inf, _sum, _count), and the registry's series (every one written, counts where they belong) */
#include <event2/buffer.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/metrics/metrics.h"
#include "harness.h"

/* What the writer produced, NUL-terminated (the caller frees it); drains the buffer. */
static char *take(struct mx_out *o)
{
	size_t n = evbuffer_get_length(o->buf);
	char *s = malloc(n + 1);

	evbuffer_remove(o->buf, s, n);
	s[n] = '\0';
	return s;
}

static struct mx_out out_new(void)
{
	return (struct mx_out){ .buf = evbuffer_new() };
}

static void test_label_escaping(void)
{
	struct mx_out o = out_new();
	const char *l[] = { "path", "a\\b\"c\nd", "plain", "x", NULL };
	char *s;

	mx_sample(&o, "space_x", l, 3);
	s = take(&o);
	EXPECT(strcmp(s, "space_x{path=\"a\\\\b\\\"c\\nd\",plain=\"x\"} 3\n") == 0);
	if (strcmp(s, "space_x{path=\"a\\\\b\\\"c\\nd\",plain=\"x\"} 3\n") != 0)
		NOTE("got: %s", s);
	free(s);
	EXPECT(!o.failed);
	evbuffer_free(o.buf);
}

static void test_help_escaping(void)
{
	struct mx_out o = out_new();
	char *s;

	/* In HELP, backslash and newline are escaped, a double quote is not. */
	mx_family(&o, "space_y", "counter", "one \"two\"\nthree \\ four");
	s = take(&o);
	EXPECT(strcmp(s, "# HELP space_y one \"two\"\\nthree \\\\ four\n# TYPE space_y counter\n") == 0);
	free(s);
	evbuffer_free(o.buf);
}

static void test_no_labels_and_values(void)
{
	struct mx_out o = out_new();
	char *s;

	mx_sample(&o, "a", NULL, 0);
	mx_sample(&o, "b", NULL, 12345678901234.0);
	mx_sample(&o, "c", NULL, 0.1);
	mx_sample(&o, "d", NULL, INFINITY);
	mx_sample(&o, "e", NULL, -INFINITY);
	mx_sample(&o, "f", NULL, NAN);
	mx_sample(&o, "g", NULL, 1e300);
	mx_sample(&o, "h", NULL, -2.5);
	s = take(&o);
	EXPECT(strcmp(s, "a 0\nb 12345678901234\nc 0.1\nd +Inf\ne -Inf\nf NaN\ng 1e+300\nh -2.5\n") == 0);
	if (strcmp(s, "a 0\nb 12345678901234\nc 0.1\nd +Inf\ne -Inf\nf NaN\ng 1e+300\nh -2.5\n") != 0)
		NOTE("got: %s", s);
	free(s);
	evbuffer_free(o.buf);
}

static void test_histogram(void)
{
	static const double le[] = { 0.5, 1, 2.5 };
	struct mx_hist h = { .le = le, .n = 3 };
	struct mx_out o = out_new();
	const char *l[] = { "kind", "create", NULL };
	const char *want =
		"space_d_seconds_bucket{kind=\"create\",le=\"0.5\"} 2\n"
		"space_d_seconds_bucket{kind=\"create\",le=\"1\"} 3\n"
		"space_d_seconds_bucket{kind=\"create\",le=\"2.5\"} 3\n"
		"space_d_seconds_bucket{kind=\"create\",le=\"+Inf\"} 5\n"
		"space_d_seconds_sum{kind=\"create\"} 14.75\n"
		"space_d_seconds_count{kind=\"create\"} 5\n";
	char *s;

	/* An observation equal to a bound falls in that bound's bucket (le: less or equal). */
	mx_hist_observe(&h, 0.25);
	mx_hist_observe(&h, 0.5);
	mx_hist_observe(&h, 1);
	mx_hist_observe(&h, 3);
	mx_hist_observe(&h, 10);
	mx_histogram(&o, "space_d_seconds", l, &h);
	s = take(&o);
	EXPECT(strcmp(s, want) == 0);
	if (strcmp(s, want) != 0)
		NOTE("got:\n%s", s);
	free(s);
	EXPECT_EQ(h.count, 5);
	evbuffer_free(o.buf);
}

static void test_empty_histogram_without_labels(void)
{
	static const double le[] = { 1 };
	struct mx_hist h = { .le = le, .n = 1 };
	struct mx_out o = out_new();
	char *s;

	mx_histogram(&o, "h", NULL, &h);
	s = take(&o);
	EXPECT(strcmp(s, "h_bucket{le=\"1\"} 0\nh_bucket{le=\"+Inf\"} 0\nh_sum 0\nh_count 0\n") == 0);
	free(s);
	evbuffer_free(o.buf);
}

/* The number on the line that starts with `series ` (-1 when absent). */
static double value_of(const char *text, const char *series)
{
	size_t n = strlen(series);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, series, n) == 0 && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return -1;
}

/* Each line cut at its last space (the value dropped), in place. */
static char *strip_values(char *text)
{
	char *w = text;

	for (char *line = text; *line;) {
		char *nl = strchrnul(line, '\n'), *sp = line;

		for (char *p = line; p < nl; p++)
			if (*p == ' ')
				sp = p;
		if (line[0] == '#')
			sp = nl;
		memmove(w, line, (size_t)(sp - line));
		w += sp - line;
		*w++ = '\n';
		line = *nl ? nl + 1 : nl;
	}
	*w = '\0';
	return text;
}

static void test_registry(void)
{
	struct mx_out o = out_new();
	char *before, *after;

	metrics_write_counters(&o);
	before = take(&o);
	/* Every series is there before anything happened. */
	EXPECT(value_of(before, "space_operations_total{kind=\"snapshot\",result=\"failed\"}") == 0);
	EXPECT(value_of(before, "space_output_bytes_total{transport=\"websocket\",stream=\"stderr\"}") == 0);
	EXPECT(value_of(before, "space_http_requests_total{plane=\"data\",class=\"5xx\"}") == 0);
	EXPECT(value_of(before, "space_operation_duration_seconds_count{kind=\"fork\"}") == 0);
	EXPECT(strstr(before, "# TYPE space_operation_duration_seconds histogram\n") != NULL);

	metrics_op_finished(OPK_CREATE, true, 0.7);
	metrics_op_finished(OPK_CREATE, false, 400);
	metrics_op_finished(OPK_PAUSE, true, 0.01);
	metrics_session_started();
	metrics_output_sent(MX_TR_SSE, 1, 6);
	metrics_output_sent(MX_TR_SSE, 2, 4);
	metrics_output_sent(MX_TR_SSE, 1, 10);
	metrics_http_answered("api", 200);
	metrics_http_answered("api", 401);
	metrics_http_answered("data", 503);
	metrics_http_answered("elsewhere", 200); /* not a plane: not counted */
	metrics_http_answered(NULL, 200);
	metrics_write_counters(&o);
	after = take(&o);
	EXPECT(value_of(after, "space_operations_total{kind=\"create\",result=\"succeeded\"}") == 1);
	EXPECT(value_of(after, "space_operations_total{kind=\"create\",result=\"failed\"}") == 1);
	EXPECT(value_of(after, "space_operations_total{kind=\"pause\",result=\"succeeded\"}") == 1);
	EXPECT(value_of(after, "space_operation_duration_seconds_count{kind=\"create\"}") == 2);
	EXPECT(value_of(after, "space_operation_duration_seconds_sum{kind=\"create\"}") == 400.7);
	EXPECT(value_of(after, "space_operation_duration_seconds_bucket{kind=\"create\",le=\"0.5\"}") == 0);
	EXPECT(value_of(after, "space_operation_duration_seconds_bucket{kind=\"create\",le=\"1\"}") == 1);
	EXPECT(value_of(after, "space_operation_duration_seconds_bucket{kind=\"create\",le=\"300\"}") == 1);
	EXPECT(value_of(after, "space_operation_duration_seconds_bucket{kind=\"create\",le=\"+Inf\"}") == 2);
	EXPECT(value_of(after, "space_operation_duration_seconds_bucket{kind=\"pause\",le=\"0.05\"}") == 1);
	EXPECT(value_of(after, "space_sessions_started_total") == 1);
	EXPECT(value_of(after, "space_output_bytes_total{transport=\"sse\",stream=\"stdout\"}") == 16);
	EXPECT(value_of(after, "space_output_bytes_total{transport=\"sse\",stream=\"stderr\"}") == 4);
	EXPECT(value_of(after, "space_http_requests_total{plane=\"api\",class=\"2xx\"}") == 1);
	EXPECT(value_of(after, "space_http_requests_total{plane=\"api\",class=\"4xx\"}") == 1);
	EXPECT(value_of(after, "space_http_requests_total{plane=\"data\",class=\"5xx\"}") == 1);
	EXPECT(value_of(after, "space_http_requests_total{plane=\"data\",class=\"2xx\"}") == 0);
	/* Same series, same order: only the numbers moved. */
	EXPECT(strcmp(strip_values(before), strip_values(after)) == 0);
	free(before);
	free(after);
	evbuffer_free(o.buf);
}

int main(void)
{
	RUN(test_label_escaping);
	RUN(test_help_escaping);
	RUN(test_no_labels_and_values);
	RUN(test_histogram);
	RUN(test_empty_histogram_without_labels);
	RUN(test_registry);
	return DONE();
}
