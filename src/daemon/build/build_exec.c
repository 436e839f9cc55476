/* build_exec.c -- one command in a build's VM (sandbox/icmd.h): a run step's output goes to the
 * build's log as the step's; the end comes back to the step that asked. */
#include "build_int.h"
#include "sandbox/icmd.h"

static void on_output(void *arg, const char *buf, size_t len)
{
	struct build *b = arg;

	if (b->log_output)
		build_log_output(b, b->cur, buf, len);
}

static void on_done(void *arg, int code, const char *error, const char *out)
{
	struct build *b = arg;
	build_exec_cb done = b->done;

	b->cmd = NULL;
	b->done = NULL;
	if (done)
		done(b, code, error, out);
}

int build_exec(struct build *b, enum sess_kind kind, const char *const *argv, const char *user, const json_t *env,
	       const char *cwd, const char *in_path, bool log, build_exec_cb done, space_err *err)
{
	struct icmd_spec spec = {
		.kind = kind, .argv = argv, .user = user, .env = env, .cwd = cwd, .stdin_path = in_path,
		.own_vm = true, .timeout_ms = BUILD_STEP_TIMEOUT_MS, .output = on_output, .done = on_done, .arg = b,
	};

	b->log_output = log;
	b->done = done;
	if (!(b->cmd = icmd_start(b->d, b->sb_id, &spec, err))) {
		b->done = NULL;
		return -1;
	}
	return 0;
}

void build_exec_cancel(struct build *b)
{
	icmd_cancel(b->cmd);
	b->cmd = NULL;
	b->done = NULL;
}
