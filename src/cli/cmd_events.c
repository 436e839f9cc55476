/* cmd_events.c -- `spacectl events`: lifecycle events, a page or followed (long-polls that
 * resume from the last cursor); `spacectl webhook add|ls|rm|log`: where they are POSTed */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "cli.h"

#define WAIT_S 30
#define SECRET_MAX 256

static void print_event(const json_t *ev)
{
	const char *reason = ctl_jstr(ev, "reason", "");

	printf("%s\t%s\t%s\t%s%s%s\n", ctl_jstr(ev, "id", "?"), ctl_jstr(ev, "time", ""),
	       ctl_jstr(ev, "sandbox_id", "?"), ctl_jstr(ev, "type", "?"), *reason ? "\t" : "", reason);
}

/* One GET /v1/events; prints its events and returns the next cursor in cursor. */
static int page(struct ctl *c, const char *query, char *cursor, size_t n, bool *more, space_err *e)
{
	json_t *out = NULL, *ev;
	char path[1024];
	size_t i;

	snprintf(path, sizeof(path), "/v1/events?after=%s%s", cursor, query);
	if (ctl_call(c, "GET", path, NULL, &out, e) < 0)
		return -1;
	json_array_foreach(json_object_get(out, "events"), i, ev) {
		if (c->json) {
			char *s = json_dumps(ev, JSON_COMPACT);

			if (s)
				printf("%s\n", s);
			free(s);
		} else {
			print_event(ev);
		}
	}
	fflush(stdout);
	snprintf(cursor, n, "%s", ctl_jstr(out, "cursor", cursor));
	*more = json_is_true(json_object_get(out, "has_more"));
	json_decref(out);
	return 0;
}

static int add_query(char *q, size_t n, const char *key, const char *val)
{
	_cleanup_free_ char *esc = ctl_escape(val);
	size_t len = strlen(q);

	if (!esc || (size_t)snprintf(q + len, n - len, "&%s=%s", key, esc) >= n - len)
		return -1;
	return 0;
}

static int events_run(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "sandbox", required_argument, NULL, 's' }, { "types", required_argument, NULL, 't' },
		{ "after", required_argument, NULL, 'a' },   { "follow", no_argument, NULL, 'f' },
		{ "json", no_argument, NULL, 'j' },          { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const struct ctl_verb *v = &ctl_verb_events;
	char query[700] = "", cursor[32] = "0";
	bool follow = false, more = true;
	space_err e = { 0 };
	int opt, rc;

	while ((opt = getopt_long(argc, argv, "fh", opts, NULL)) != -1) {
		if (opt == 's' || opt == 't') {
			if (add_query(query, sizeof(query), opt == 's' ? "sandbox" : "types", optarg) < 0)
				return ctl_usage_error(v, "--%s is too long", opt == 's' ? "sandbox" : "types");
		} else if (opt == 'a') {
			long n;

			if (ctl_parse_long(optarg, 0, (1L << 62), &n) < 0)
				return ctl_usage_error(v, "--after takes a cursor (a number)");
			snprintf(cursor, sizeof(cursor), "%ld", n);
		} else if (opt == 'f') {
			follow = true;
		} else if ((rc = ctl_common_opt(c, v, opt)) >= 0) {
			return rc;
		}
	}
	if (optind != argc)
		return ctl_usage_error(v, "no arguments (use --sandbox, --types, --after)");
	/* What is there, page by page; then, following, each new one as it comes. */
	while (more)
		if (page(c, query, cursor, sizeof(cursor), &more, &e) < 0)
			return ctl_fail(c, &e, CTL_EXIT_FAIL);
	if (!follow)
		return CTL_EXIT_OK;
	if (add_query(query, sizeof(query), "wait", "30") < 0)
		return CTL_EXIT_FAIL;
	for (int fails = 0;;) {
		if (page(c, query, cursor, sizeof(cursor), &more, &e) == 0) {
			fails = 0;
			continue;
		}
		/* A daemon restarting: try again from the same cursor, nothing is lost. */
		if (++fails > 10)
			return ctl_fail(c, &e, CTL_EXIT_FAIL);
		err_clear(&e);
		sleep(1);
	}
}

const struct ctl_verb ctl_verb_events = {
	.name = "events",
	.usage = "[--json] [--sandbox ID] [--types T,T] [--after CURSOR] [--follow]",
	.summary = "lifecycle events: created, running, suspended, deleted ... (-f follows)",
	.help = "  --sandbox ID    one sandbox's\n"
		"  --types T,T     of these types (created, running, paused, resumed, suspended, restored,\n"
		"                  forked, stopped, deleted, failed, timeout_warning, timeout_set, snapshotted)\n"
		"  --after CURSOR  after this event (its id; default: the oldest kept)\n"
		"  -f, --follow    then wait for new ones, resuming from the last cursor after a drop\n"
		"  Each line: id, time, sandbox, type, reason; --json prints each event as a JSON line.\n",
	.run = events_run,
};

/* ---- webhook ---- */

static int read_secret(char *buf, size_t n)
{
	size_t got = fread(buf, 1, n - 1, stdin);

	while (got && (buf[got - 1] == '\n' || buf[got - 1] == '\r'))
		got--;
	buf[got] = '\0';
	return got ? 0 : -1;
}

static int hook_add(struct ctl *c, const char *url, const char *types)
{
	char secret[SECRET_MAX + 2];
	json_t *body, *out = NULL, *ev = NULL;
	space_err e = { 0 };
	int rc;

	if (read_secret(secret, sizeof(secret)) < 0)
		return ctl_usage_error(&ctl_verb_webhook, "add reads the secret from stdin (16 or more characters)");
	if (types) {
		ev = json_array();
		for (const char *p = types; ev && *p;) {
			size_t len = strcspn(p, ",");

			json_array_append_new(ev, json_stringn(p, len));
			p += len + (p[len] == ',');
		}
	}
	body = json_pack("{s:s,s:s}", "url", url, "secret", secret);
	explicit_bzero(secret, sizeof(secret));
	if (!body) {
		json_decref(ev);
		return CTL_EXIT_FAIL;
	}
	if (ev)
		json_object_set_new(body, "events", ev);
	if (ctl_call(c, "POST", "/v1/webhooks", body, &out, &e) < 0)
		rc = ctl_fail(c, &e, CTL_EXIT_FAIL);
	else
		rc = c->json ? ctl_print_json(out)
			     : (printf("%s\n", ctl_jstr(json_object_get(out, "webhook"), "id", "?")), CTL_EXIT_OK);
	json_t *s = json_object_get(body, "secret");
	explicit_bzero((char *)json_string_value(s), json_string_length(s));
	json_decref(body);
	json_decref(out);
	return rc;
}

static int hook_ls(struct ctl *c)
{
	json_t *out = NULL, *w;
	space_err e = { 0 };
	size_t i;

	if (ctl_call(c, "GET", "/v1/webhooks", NULL, &out, &e) < 0)
		return ctl_fail(c, &e, CTL_EXIT_FAIL);
	if (c->json) {
		int rc = ctl_print_json(out);

		json_decref(out);
		return rc;
	}
	json_array_foreach(json_object_get(out, "webhooks"), i, w) {
		const json_t *p = json_object_get(w, "pending");

		printf("%s\t%s\t%s\tcursor %s%s%s\n", ctl_jstr(w, "id", "?"), ctl_jstr(w, "url", "?"),
		       json_is_true(json_object_get(w, "enabled")) ? "enabled" : "disabled", ctl_jstr(w, "cursor", "?"),
		       json_is_object(p) ? "\tretrying: " : "", json_is_object(p) ? ctl_jstr(p, "last_error", "") : "");
	}
	json_decref(out);
	return CTL_EXIT_OK;
}

static int hook_log(struct ctl *c, const char *id)
{
	_cleanup_free_ char *path = ctl_path("/v1/webhooks", id, "/deliveries");
	json_t *out = NULL, *d;
	space_err e = { 0 };
	size_t i;

	if (!path)
		return CTL_EXIT_FAIL;
	if (ctl_call(c, "GET", path, NULL, &out, &e) < 0) {
		err_wrap(&e, "%s", id);
		return ctl_fail(c, &e, CTL_EXIT_FAIL);
	}
	if (c->json) {
		int rc = ctl_print_json(out);

		json_decref(out);
		return rc;
	}
	json_array_foreach(json_object_get(out, "deliveries"), i, d) {
		bool ok = json_is_true(json_object_get(d, "ok"));

		printf("%s\tevent %s\t%s\tattempt %lld\t%s %lld\t%lld ms%s%s\n", ctl_jstr(d, "time", ""),
		       ctl_jstr(d, "event_id", "?"), ctl_jstr(d, "type", "?"), ctl_jint(d, "attempt", 0),
		       ok ? "ok" : "failed", ctl_jint(d, "status", 0), ctl_jint(d, "duration_ms", 0), ok ? "" : "\t",
		       ok ? "" : ctl_jstr(d, "error", ""));
	}
	json_decref(out);
	return CTL_EXIT_OK;
}

static int hook_rm(struct ctl *c, const char *id)
{
	_cleanup_free_ char *path = ctl_path("/v1/webhooks", id, "");
	space_err e = { 0 };

	if (!path)
		return CTL_EXIT_FAIL;
	if (ctl_call(c, "DELETE", path, NULL, NULL, &e) < 0) {
		err_wrap(&e, "%s", id);
		return ctl_fail(c, &e, CTL_EXIT_FAIL);
	}
	return CTL_EXIT_OK;
}

static int webhook_run(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "events", required_argument, NULL, 'e' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const struct ctl_verb *v = &ctl_verb_webhook;
	const char *types = NULL, *sub;
	int opt, rc, nargs;

	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (opt == 'e')
			types = optarg;
		else if ((rc = ctl_common_opt(c, v, opt)) >= 0)
			return rc;
	}
	nargs = argc - optind;
	sub = nargs > 0 ? argv[optind] : "";
	if (strcmp(sub, "ls") == 0 && nargs == 1)
		return hook_ls(c);
	if (nargs == 2 && strcmp(sub, "add") == 0)
		return hook_add(c, argv[optind + 1], types);
	if (nargs == 2 && strcmp(sub, "rm") == 0)
		return hook_rm(c, argv[optind + 1]);
	if (nargs == 2 && strcmp(sub, "log") == 0)
		return hook_log(c, argv[optind + 1]);
	return ctl_usage_error(v, "want add URL, ls, log ID or rm ID");
}

const struct ctl_verb ctl_verb_webhook = {
	.name = "webhook",
	.usage = "[--json] add URL [--events T,T] | ls | log ID | rm ID",
	.summary = "webhooks: lifecycle events POSTed to a URL, signed (add reads the secret from stdin)",
	.help = "  add URL     deliver events from now on to URL, signed with the secret read from stdin\n"
		"              (16 or more characters); --events T,T for some types only; prints its id\n"
		"  ls          id, URL, state, cursor and what is being retried\n"
		"  log ID      its delivery attempts, newest first\n"
		"  rm ID       delete it\n",
	.run = webhook_run,
};
