/* op.c -- verbs that start an operation: print the ids they promise, wait for it, report it */
#include <getopt.h>
#include <string.h>

#include "cleanup.h"
#include "cli.h"

/* The answer's sandbox as it is now: an operation waited for has moved it. */
static int refresh_sandbox(const struct ctl *c, json_t *resp, space_err *e)
{
	const char *id = ctl_jstr(json_object_get(resp, "sandbox"), "id", NULL);
	_cleanup_free_ char *path = NULL;
	json_t *sb = NULL;

	if (!id)
		return 0;
	path = ctl_sandbox_path(id, "");
	if (!path)
		return err_set(e, ENOMEM, "out of memory");
	if (ctl_call(c, "GET", path, NULL, &sb, e) < 0)
		return -1;
	if (json_object_set_new(resp, "sandbox", sb) < 0)
		return err_set(e, ENOMEM, "out of memory");
	return 0;
}

/* Print, wait, refresh: everything after the 2xx answer.  0 or -1 with e set. */
static int follow(const struct ctl *c, const struct ctl_op *o, json_t *resp, space_err *e)
{
	const json_t *op = json_object_get(resp, "operation");
	const char *op_id = ctl_jstr(op, "id", NULL);
	json_t *final = NULL;

	if (!op_id && !json_is_null(op))
		return err_set(e, EBADMSG, "the answer has no operation id");
	if (!c->json && o->print) {
		if (o->print(resp, e) < 0)
			return -1;
		fflush(stdout);
	}
	if (!o->wait || !op_id)
		return 0;
	if (ctl_wait_operation(c, op_id, &final, e) < 0)
		return -1;
	/* op_id points into the old operation: nothing uses it from here on. */
	json_object_set_new(resp, "operation", final);
	if (!c->json)
		return 0;
	if (refresh_sandbox(c, resp, e) < 0 || (o->refresh && o->refresh(c, resp, e) < 0))
		return err_wrap(e, "after the operation");
	return 0;
}

int ctl_op_run(const struct ctl *c, const struct ctl_op *o)
{
	json_t *resp = NULL;
	space_err e = { 0 };
	int rc = CTL_EXIT_OK;

	if (!o->path) {
		err_set(&e, ENOMEM, "out of memory");
		rc = CTL_EXIT_FAIL;
	} else if (ctl_call(c, o->method, o->path, o->body, &resp, &e) < 0 ||
		   follow(c, o, resp, &e) < 0) {
		rc = CTL_EXIT_FAIL;
	}
	if (rc != CTL_EXIT_OK) {
		if (o->what)
			err_wrap(&e, "%s", o->what);
		rc = ctl_fail(c, &e, rc);
	} else if (c->json) {
		rc = ctl_print_json(resp);
	}
	json_decref(resp);
	return rc;
}

static int print_op_id(const json_t *resp, space_err *e)
{
	const char *op_id = ctl_jstr(json_object_get(resp, "operation"), "id", NULL);

	(void)e;
	if (op_id)
		printf("%s\n", op_id);
	return 0;
}

int ctl_op_each(struct ctl *c, const struct ctl_verb *v, int argc, char **argv,
		const char *method, const char *suffix)
{
	bool delete = strcmp(method, "DELETE") == 0;
	int i, st, rc = CTL_EXIT_OK;
	bool wait;

	if ((st = ctl_parse_opts(c, v, argc, argv, &wait)) >= 0)
		return st;
	if (optind == argc)
		return ctl_usage_error(v, "missing sandbox id");
	for (i = optind; i < argc; i++) {
		_cleanup_free_ char *path = ctl_sandbox_path(argv[i], suffix);
		json_t *body = delete ? NULL : json_object();
		struct ctl_op o = { .method = method, .path = path, .body = body, .what = argv[i],
				    .wait = wait, .print = print_op_id };

		st = delete || body ? ctl_op_run(c, &o) : CTL_EXIT_FAIL;
		json_decref(body);
		if (st != CTL_EXIT_OK)
			rc = CTL_EXIT_FAIL;
	}
	return rc;
}
