/* cmd_create.c -- `spacectl create`: start a sandbox from a template */
#include <getopt.h>
#include <stdio.h>

#include "cleanup.h"
#include "cli.h"

#define DEFAULT_TEMPLATE "base"

static int run(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "template", required_argument, NULL, 't' },
		{ "vcpus", required_argument, NULL, 'c' },
		{ "memory", required_argument, NULL, 'm' },
		{ "env", required_argument, NULL, 'e' },
		{ "meta", required_argument, NULL, 'M' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "wait", no_argument, NULL, 'w' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const struct ctl_verb *v = &ctl_verb_create;
	json_t *body = json_object(), *env = json_object(), *meta = json_object();
	json_t *resp = NULL, *op = NULL, *sb = NULL;
	const char *template = DEFAULT_TEMPLATE, *id, *op_id;
	space_err e = { 0 };
	bool wait = false;
	int opt, st, rc = CTL_EXIT_OK;
	long n;

	if (!body || !env || !meta) {
		rc = CTL_EXIT_FAIL;
		goto out;
	}
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 't':
			template = optarg;
			break;
		case 'c':
			if (ctl_parse_long(optarg, 1, 1024, &n) < 0) {
				rc = ctl_usage_error(v, "--vcpus: not a count: '%s'", optarg);
				goto out;
			}
			json_object_set_new(body, "vcpus", json_integer(n));
			break;
		case 'm':
			if (ctl_parse_long(optarg, 1, 1L << 30, &n) < 0) {
				rc = ctl_usage_error(v, "--memory: not a size in MiB: '%s'", optarg);
				goto out;
			}
			json_object_set_new(body, "memory_mib", json_integer(n));
			break;
		case 'T':
			if (ctl_parse_long(optarg, 0, 1L << 30, &n) < 0) {
				rc = ctl_usage_error(v, "--timeout: not seconds: '%s'", optarg);
				goto out;
			}
			json_object_set_new(body, "timeout_s", json_integer(n));
			break;
		case 'e':
		case 'M':
			if (ctl_kv_add(opt == 'e' ? env : meta, optarg) < 0) {
				rc = ctl_usage_error(v, "--%s: expected K=V (UTF-8), got '%s'",
						     opt == 'e' ? "env" : "meta", optarg);
				goto out;
			}
			break;
		case 'w':
			wait = true;
			break;
		default:
			if ((st = ctl_common_opt(c, v, opt)) >= 0) {
				rc = st;
				goto out;
			}
		}
	}
	if (optind != argc) {
		rc = ctl_usage_error(v, "unexpected argument '%s'", argv[optind]);
		goto out;
	}
	json_object_set_new(body, "template", json_string(template));
	if (json_object_size(env))
		json_object_set(body, "env", env);
	if (json_object_size(meta))
		json_object_set(body, "metadata", meta);

	if (ctl_call(c, "POST", "/v1/sandboxes", body, &resp, &e) < 0) {
		rc = ctl_fail(c, &e, CTL_EXIT_FAIL);
		goto out;
	}
	id = ctl_jstr(json_object_get(resp, "sandbox"), "id", NULL);
	op_id = ctl_jstr(json_object_get(resp, "operation"), "id", NULL);
	if (!id || (wait && !op_id)) {
		err_set(&e, EBADMSG, "the answer lacks the sandbox or operation id");
		rc = ctl_fail(c, &e, CTL_EXIT_FAIL);
		goto out;
	}
	if (!c->json) {
		/* The id first, even with --wait: a script can then fetch the
		 * logs of a sandbox that failed to start. */
		printf("%s\n", id);
		fflush(stdout);
	}
	if (wait) {
		_cleanup_free_ char *path = ctl_sandbox_path(id, "");

		if (ctl_wait_operation(c, op_id, &op, &e) < 0) {
			rc = ctl_fail(c, &e, CTL_EXIT_FAIL);
			goto out;
		}
		if (c->json) {
			/* Report the sandbox as it is now, not as it was. */
			if (!path || ctl_call(c, "GET", path, NULL, &sb, &e) < 0) {
				rc = ctl_fail(c, &e, CTL_EXIT_FAIL);
				goto out;
			}
			json_object_set(resp, "sandbox", sb);
			json_object_set(resp, "operation", op);
		}
	}
	if (c->json)
		rc = ctl_print_json(resp);
out:
	json_decref(body);
	json_decref(env);
	json_decref(meta);
	json_decref(resp);
	json_decref(op);
	json_decref(sb);
	return rc;
}

const struct ctl_verb ctl_verb_create = {
	.name = "create",
	.usage = "[--template T] [--vcpus N] [--memory MIB] [--env K=V]... [--meta K=V]...\n"
		 "                       [--timeout S] [--wait] [--json]",
	.summary = "create a sandbox; prints its id",
	.help = "Options:\n"
		"  --template T   template name, name:tag, name@sha256:.. or sha256:..\n"
		"                 (default " DEFAULT_TEMPLATE ")\n"
		"  --vcpus N      virtual CPUs (default: the template's)\n"
		"  --memory MIB   memory in MiB (default: the template's)\n"
		"  --env K=V      environment of every command run in it (repeatable)\n"
		"  --meta K=V     metadata to find it by with `ls --meta` (repeatable)\n"
		"  --timeout S    delete it after S seconds (0: never)\n"
		"  --wait         wait until it is running; exit 1 if it failed to start\n"
		"  --json         print {\"sandbox\":..,\"operation\":..} instead of the id\n",
	.run = run,
};
