/* cli.c -- what spacectl's verbs share: usage errors, argument parsing
 * helpers, showing an answer, table output */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"

int ctl_usage_error(const struct ctl_verb *v, const char *fmt, ...)
{
	va_list ap;

	if (fmt) {
		fprintf(stderr, "spacectl: %s: ", v->name);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc('\n', stderr);
	}
	fprintf(stderr, "usage: spacectl %s %s\n", v->name, v->usage);
	fprintf(stderr, "Try 'spacectl help %s' for more information.\n", v->name);
	return CTL_EXIT_USAGE;
}

void ctl_print_help(const struct ctl_verb *v, FILE *out)
{
	fprintf(out, "usage: spacectl %s %s\n\n%s\n", v->name, v->usage, v->summary);
	if (v->help && *v->help)
		fprintf(out, "\n%s", v->help);
}

int ctl_fail(const struct ctl *c, const space_err *e, int status)
{
	fflush(stdout);
	fprintf(stderr, "spacectl: %s: %s\n", c->verb, e->msg);
	return status;
}

int ctl_kv_add(json_t *obj, const char *arg)
{
	const char *eq = strchr(arg, '=');
	_cleanup_free_ char *key = NULL;

	if (!eq || eq == arg)
		return -1;
	key = strndup(arg, (size_t)(eq - arg));
	if (!key)
		return -1;
	return json_object_set_new(obj, key, json_string(eq + 1));
}

int ctl_parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	if (!s || !*s)
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int ctl_common_opt(struct ctl *c, const struct ctl_verb *v, int opt)
{
	switch (opt) {
	case 'j':
		c->json = true;
		return -1;
	case 'h':
		ctl_print_help(v, stdout);
		return CTL_EXIT_OK;
	default:
		return ctl_usage_error(v, NULL);
	}
}

int ctl_parse_opts(struct ctl *c, const struct ctl_verb *v, int argc, char **argv, bool *wait)
{
	/* --wait first: verbs without it get the table from its second entry. */
	static const struct option opts[] = {
		{ "wait", no_argument, NULL, 'w' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int opt, rc;

	if (wait)
		*wait = false;
	while ((opt = getopt_long(argc, argv, "h", wait ? opts : opts + 1, NULL)) != -1) {
		if (opt == 'w')
			*wait = true;
		else if ((rc = ctl_common_opt(c, v, opt)) >= 0)
			return rc;
	}
	return -1;
}

int ctl_parse_json_only(struct ctl *c, const struct ctl_verb *v, int argc, char **argv)
{
	int rc = ctl_parse_opts(c, v, argc, argv, NULL);

	if (rc >= 0)
		return rc;
	if (optind != argc)
		return ctl_usage_error(v, "unexpected argument '%s'", argv[optind]);
	return -1;
}

bool ctl_on_timeout_ok(const char *s)
{
	return strcmp(s, "delete") == 0 || strcmp(s, "suspend") == 0 || strcmp(s, "suspend_idle") == 0;
}

void ctl_fmt_bytes(long long n, char *out, size_t len)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)n;
	size_t u = 0;

	if (n < 0) {
		snprintf(out, len, "-");
		return;
	}
	if (n < 1024) {
		snprintf(out, len, "%lld B", n);
		return;
	}
	v /= 1024;
	/* 1023.5 would print as "1024 KiB": that is "1.0 MiB". */
	while (v >= 1023.5 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		u++;
	}
	/* Rounded where it is printed, so 99.96 shows as "100", not "100.0". */
	if (v < 99.95)
		snprintf(out, len, "%.1f %s", v, units[u]);
	else
		snprintf(out, len, "%.0f %s", v, units[u]);
}

int ctl_print_lines(FILE *out, const json_t *obj, const char *key, space_err *e)
{
	const json_t *arr = json_object_get(obj, key), *item;
	size_t i;

	if (!json_is_array(arr))
		return err_set(e, EBADMSG, "the answer has no \"%s\" list", key);
	json_array_foreach(arr, i, item)
		if (!json_is_string(item))
			return err_set(e, EBADMSG, "the answer's \"%s\" list holds a non-string", key);
	json_array_foreach(arr, i, item)
		fprintf(out, "%s\n", json_string_value(item));
	return 0;
}

int ctl_get_show(const struct ctl *c, const char *path,
		 int (*show)(const struct ctl *c, const json_t *resp))
{
	space_err e = { 0 };
	json_t *resp = NULL;
	int rc;

	if (ctl_call(c, "GET", path, NULL, &resp, &e) < 0)
		return ctl_fail(c, &e, CTL_EXIT_FAIL);
	rc = c->json ? ctl_print_json(resp) : show(c, resp);
	json_decref(resp);
	return rc;
}

int ctl_table_init(struct ctl_table *t, size_t ncols, const char *const *header)
{
	memset(t, 0, sizeof(*t));
	t->ncols = ncols;
	return ctl_table_add(t, header);
}

int ctl_table_add(struct ctl_table *t, const char *const *row)
{
	size_t i;

	if (t->nrows == t->cap) {
		size_t ncap = t->cap ? t->cap * 2 : 16;
		char **nc = realloc(t->cells, ncap * t->ncols * sizeof(*nc));

		if (!nc)
			return -1;
		t->cells = nc;
		t->cap = ncap;
	}
	for (i = 0; i < t->ncols; i++) {
		char *s = strdup(row[i] ? row[i] : "-");
		char *p;

		if (!s) {
			while (i--)
				free(t->cells[t->nrows * t->ncols + i]);
			return -1;
		}
		/* One row per line, whatever the server put in a name. */
		for (p = s; *p; p++)
			if ((unsigned char)*p < 0x20)
				*p = ' ';
		t->cells[t->nrows * t->ncols + i] = s;
	}
	t->nrows++;
	return 0;
}

void ctl_table_print(const struct ctl_table *t, FILE *out)
{
	size_t r, i, *w = calloc(t->ncols, sizeof(*w));

	if (!w)
		return;
	for (r = 0; r < t->nrows; r++)
		for (i = 0; i < t->ncols; i++) {
			size_t l = strlen(t->cells[r * t->ncols + i]);

			if (l > w[i])
				w[i] = l;
		}
	for (r = 0; r < t->nrows; r++) {
		for (i = 0; i < t->ncols; i++) {
			const char *s = t->cells[r * t->ncols + i];

			if (i + 1 < t->ncols)
				fprintf(out, "%-*s  ", (int)(w[i] < INT_MAX ? w[i] : 0), s);
			else
				fprintf(out, "%s\n", s);
		}
	}
	free(w);
}

void ctl_table_free(struct ctl_table *t)
{
	size_t i;

	for (i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	memset(t, 0, sizeof(*t));
}

int ctl_print_list(const struct ctl *c, const json_t *resp, const char *key, size_t ncols,
		   const char *const *header, int (*add_row)(struct ctl_table *t, const json_t *item))
{
	const json_t *list = json_object_get(resp, key), *item;
	struct ctl_table t;
	space_err e = { 0 };
	size_t i;
	int rc = CTL_EXIT_OK;

	if (!json_is_array(list)) {
		err_set(&e, EBADMSG, "the answer has no \"%s\" list", key);
		return ctl_fail(c, &e, CTL_EXIT_FAIL);
	}
	if (ctl_table_init(&t, ncols, header) < 0)
		return CTL_EXIT_FAIL;
	json_array_foreach(list, i, item) {
		if (add_row(&t, item) < 0) {
			rc = CTL_EXIT_FAIL;
			break;
		}
	}
	if (rc == CTL_EXIT_OK)
		ctl_table_print(&t, stdout);
	ctl_table_free(&t);
	return rc;
}
