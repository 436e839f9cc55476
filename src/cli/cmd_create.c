/* cmd_create.c -- `spacectl create`: start a sandbox from a template or a named snapshot */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"

#define DEFAULT_TEMPLATE "base"

/* What the options ask for, before it becomes the request. */
struct create_args {
	json_t *body, *env, *meta;
	json_t *network;        /* {"allow": [...], "deny": [...]} from --allow / --deny */
	const char *template, *snapshot;
	bool wait;
};

static int print_id(const json_t *resp, space_err *e)
{
	const char *id = ctl_jstr(json_object_get(resp, "sandbox"), "id", NULL);

	if (!id)
		return err_set(e, EBADMSG, "the answer lacks the sandbox id");
	/* The id first, even with --wait: a script can then fetch the logs of
	 * a sandbox that failed to start. */
	printf("%s\n", id);
	return 0;
}

/* One option into a.  Returns -1 to go on, else the exit status. */
static int option(struct ctl *c, const struct ctl_verb *v, int opt, struct create_args *a)
{
	const char *key;
	json_t *val;
	long n;

	switch (opt) {
	case 't':
		a->template = optarg;
		return -1;
	case 's':
		a->snapshot = optarg;
		return -1;
	case 'w':
		a->wait = true;
		return -1;
	case 'A':
	case 'D':
		/* The daemon checks each entry and names a bad one. */
		return json_array_append_new(json_object_get(a->network, opt == 'A' ? "allow" : "deny"),
					     json_string(optarg)) < 0 ? CTL_EXIT_FAIL : -1;
	case 'e':
	case 'M':
		if (ctl_kv_add(opt == 'e' ? a->env : a->meta, optarg) < 0)
			return ctl_usage_error(v, "--%s: expected K=V (UTF-8), got '%s'",
					       opt == 'e' ? "env" : "meta", optarg);
		return -1;
	case 'c':
		if (ctl_parse_long(optarg, 1, 1024, &n) < 0)
			return ctl_usage_error(v, "--vcpus: not a count: '%s'", optarg);
		key = "vcpus";
		val = json_integer(n);
		break;
	case 'm':
		if (ctl_parse_long(optarg, 1, 1L << 30, &n) < 0)
			return ctl_usage_error(v, "--memory: not a size in MiB: '%s'", optarg);
		key = "memory_mib";
		val = json_integer(n);
		break;
	case 'T':
		if (ctl_parse_long(optarg, 0, CTL_SECONDS_MAX, &n) < 0)
			return ctl_usage_error(v, "--timeout: not seconds: '%s'", optarg);
		key = "timeout_s";
		val = json_integer(n);
		break;
	case 'o':
		if (!ctl_on_timeout_ok(optarg))
			return ctl_usage_error(v, "--on-timeout: want suspend, suspend_idle or delete, not '%s'", optarg);
		key = "on_timeout";
		val = json_string(optarg);
		break;
	default:
		return ctl_common_opt(c, v, opt);
	}
	return json_object_set_new(a->body, key, val) < 0 ? CTL_EXIT_FAIL : -1;
}

/* The command line into a->body.  Returns -1 to go on, else the exit status. */
static int parse(struct ctl *c, int argc, char **argv, struct create_args *a)
{
	static const struct option opts[] = {
		{ "template", required_argument, NULL, 't' },
		{ "snapshot", required_argument, NULL, 's' },
		{ "vcpus", required_argument, NULL, 'c' },
		{ "memory", required_argument, NULL, 'm' },
		{ "env", required_argument, NULL, 'e' },
		{ "meta", required_argument, NULL, 'M' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "on-timeout", required_argument, NULL, 'o' },
		{ "allow", required_argument, NULL, 'A' },
		{ "deny", required_argument, NULL, 'D' },
		{ "wait", no_argument, NULL, 'w' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const struct ctl_verb *v = &ctl_verb_create;
	int opt, st;

	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1)
		if ((st = option(c, v, opt, a)) >= 0)
			return st;
	if (optind != argc)
		return ctl_usage_error(v, "unexpected argument '%s'", argv[optind]);
	if (a->template && a->snapshot)
		return ctl_usage_error(v, "--template and --snapshot exclude each other");
	if (a->snapshot)
		st = json_object_set_new(a->body, "snapshot", json_string(a->snapshot));
	else
		st = json_object_set_new(a->body, "template",
					 json_string(a->template ? a->template : DEFAULT_TEMPLATE));
	if (st < 0 || (json_object_size(a->env) && json_object_set(a->body, "env", a->env) < 0) ||
	    (json_object_size(a->meta) && json_object_set(a->body, "metadata", a->meta) < 0) ||
	    ((json_array_size(json_object_get(a->network, "allow")) ||
	      json_array_size(json_object_get(a->network, "deny"))) &&
	     json_object_set(a->body, "network", a->network) < 0))
		return CTL_EXIT_FAIL;
	return -1;
}

static int run(struct ctl *c, int argc, char **argv)
{
	struct create_args a = { .body = json_object(), .env = json_object(), .meta = json_object(),
				 .network = json_pack("{s:[],s:[]}", "allow", "deny") };
	struct ctl_op o = { .method = "POST", .path = "/v1/sandboxes", .print = print_id };
	int rc = CTL_EXIT_FAIL;

	if (a.body && a.env && a.meta && a.network && (rc = parse(c, argc, argv, &a)) < 0) {
		o.body = a.body;
		o.wait = a.wait;
		rc = ctl_op_run(c, &o);
	}
	json_decref(a.body);
	json_decref(a.env);
	json_decref(a.meta);
	json_decref(a.network);
	return rc;
}

const struct ctl_verb ctl_verb_create = {
	.name = "create",
	.usage = "[--template T | --snapshot S] [--vcpus N] [--memory MIB] [--env K=V]...\n"
		 "                       [--meta K=V]... [--timeout S] [--on-timeout A] [--allow E]... [--deny E]...\n"
		 "                       [--wait] [--json]",
	.summary = "create a sandbox; prints its id",
	.help = "Options:\n"
		"  --template T     template name, name:tag, name@sha256:.. or sha256:..\n"
		"                   (default " DEFAULT_TEMPLATE ")\n"
		"  --snapshot S     start from the named snapshot S (name or sn-.. id) instead\n"
		"                   of a template: its memory, processes and disk, with its size\n"
		"  --vcpus N        virtual CPUs (default: the template's)\n"
		"  --memory MIB     memory in MiB (default: the template's)\n"
		"  --env K=V        environment of every command run in it (repeatable)\n"
		"  --meta K=V       metadata to find it by with `ls --meta` (repeatable)\n"
		"  --timeout S      expire after S seconds (0: never)\n"
		"  --on-timeout A   what expiry does: delete (default) or suspend; suspend_idle: suspend\n"
		"                   once idle SECONDS (no session running, no port traffic)\n"
		"  --allow E        egress it may reach: a name, *.suffix or CIDR, optionally :port\n"
		"                   (repeatable; none: the template's policy, else nothing)\n"
		"  --deny E         egress it may never reach, over any --allow (repeatable)\n"
		"  --wait           wait until it is running; exit 1 if it failed to start\n"
		"  --json           print {\"sandbox\":..,\"operation\":..} instead of the id\n",
	.run = run,
};
