/* start_cmd.c -- a template's start command (a build's `start`, E2B's start command): started
 * detached in the guest (its own session, output to /var/tmp/space-start.log), then its `ready`
 * command run every 200 ms until it exits 0, within `timeout_s`. A ready snapshot is taken only
 * then, so every clone starts with the server already running; a VM booted cold (no ready
 * snapshot yet) runs it before it counts as running. */
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "runtime.h"
#include "sandbox/icmd.h"

#define READY_EVERY_MS 200
#define READY_TRY_MS (10 * 1000)  /* one ready check */
#define SETTLE_MS 1000            /* without a ready command: how long the command gets */

struct start_run {
	struct sandbox *sb;
	start_cmd_cb done;
	struct icmd *cmd;
	struct event *timer;
	int64_t deadline_ms;
	int tries;
	char *ready;
	char workdir[1024];
};

/* Runs $2 with /bin/sh in $1 (when set) -- the template's workdir. */
static const char in_workdir[] = "[ -z \"$1\" ] || cd \"$1\" || exit 126; exec /bin/sh -c \"$2\"";
/* Starts $2 in $1, detached from the session (its own session id), and returns at once. */
static const char detached[] =
	"[ -z \"$1\" ] || cd \"$1\" || exit 126; setsid /bin/sh -c \"$2\" </dev/null >>/var/tmp/space-start.log 2>&1 &";

static void run_free(struct start_run *r)
{
	icmd_cancel(r->cmd);
	if (r->timer)
		event_free(r->timer);
	free(r->ready);
	free(r);
}

static void end(struct start_run *r, const char *error)
{
	struct sandbox *sb = r->sb;
	start_cmd_cb done = r->done;

	sb->start = NULL;
	r->cmd = NULL; /* ended (its icmd freed itself) or never started */
	run_free(r);
	done(sb, error);
}

static void try_ready(struct start_run *r);

static void on_ready(void *arg, int code, const char *error, const char *out)
{
	struct start_run *r = arg;
	struct timeval every = { 0, READY_EVERY_MS * 1000 };
	char why[300];

	(void)out;
	r->cmd = NULL;
	if (code == 0) {
		log_info("sandbox %s: start command ready after %d check%s", r->sb->rec.id, r->tries,
			 r->tries == 1 ? "" : "s");
		end(r, NULL);
		return;
	}
	if (now_ms() >= r->deadline_ms) {
		snprintf(why, sizeof(why), "the start command was not ready within its timeout (the last check: %s)",
			 error ? error : "exited non-zero");
		end(r, why);
		return;
	}
	evtimer_add(r->timer, &every);
}

static void try_ready(struct start_run *r)
{
	const char *argv[] = { "/bin/sh", "-c", in_workdir, "sh", r->workdir, r->ready, NULL };
	struct icmd_spec spec = { .kind = SESS_KIND_PROCESS, .argv = argv, .timeout_ms = READY_TRY_MS,
				  .own_vm = r->sb->rec.role != ROLE_USER, .done = on_ready, .arg = r };
	space_err err = { 0 };

	r->tries++;
	if (!(r->cmd = icmd_start(r->sb->d, r->sb->rec.id, &spec, &err))) {
		char why[600];

		snprintf(why, sizeof(why), "checking the start command: %s", err.msg);
		end(r, why);
	}
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct start_run *r = arg;

	(void)fd;
	(void)what;
	if (r->ready)
		try_ready(r);
	else
		end(r, NULL);
}

static void on_started(void *arg, int code, const char *error, const char *out)
{
	struct start_run *r = arg;
	struct timeval settle = { SETTLE_MS / 1000, (SETTLE_MS % 1000) * 1000 };
	char why[600];

	r->cmd = NULL;
	if (code != 0) {
		snprintf(why, sizeof(why), "the start command could not be started: %s%s%.200s",
			 error ? error : "exit code", error ? "" : " non-zero; ", error ? "" : out);
		end(r, why);
		return;
	}
	if (r->ready)
		try_ready(r);
	else
		evtimer_add(r->timer, &settle);
}

bool start_cmd_wanted(const struct sandbox *sb)
{
	return json_is_string(json_object_get(json_object_get(sb->tmpl.config, "start"), "cmd"));
}

int start_cmd_begin(struct sandbox *sb, start_cmd_cb done, space_err *err)
{
	const json_t *start = json_object_get(sb->tmpl.config, "start");
	const char *cmd = json_string_value(json_object_get(start, "cmd"));
	const char *ready = json_string_value(json_object_get(start, "ready"));
	const char *wd = json_string_value(json_object_get(sb->tmpl.config, "workdir"));
	json_int_t timeout = json_integer_value(json_object_get(start, "timeout_s"));
	struct start_run *r;

	if (!cmd)
		return err_set(err, ENOENT, "template %s has no start command", sb->tmpl.name);
	if (!(r = calloc(1, sizeof(*r))) || !(r->timer = evtimer_new(sb->d->base, on_timer, r)) ||
	    (ready && !(r->ready = strdup(ready)))) {
		if (r)
			run_free(r);
		return err_set(err, ENOMEM, "out of memory");
	}
	r->sb = sb;
	r->done = done;
	snprintf(r->workdir, sizeof(r->workdir), "%s", wd ? wd : "");
	r->deadline_ms = now_ms() + (timeout > 0 ? timeout : 60) * 1000;
	const char *argv[] = { "/bin/sh", "-c", detached, "sh", r->workdir, cmd, NULL };
	struct icmd_spec spec = { .kind = SESS_KIND_PROCESS, .argv = argv, .timeout_ms = READY_TRY_MS,
				  .own_vm = sb->rec.role != ROLE_USER, .done = on_started, .arg = r };
	if (!(r->cmd = icmd_start(sb->d, sb->rec.id, &spec, err))) {
		run_free(r);
		return -1;
	}
	sb->start = r;
	log_info("sandbox %s: start command of %s started", sb->rec.id, sb->tmpl.name);
	return 0;
}

void start_cmd_cancel(struct sandbox *sb)
{
	if (!sb->start)
		return;
	run_free(sb->start);
	sb->start = NULL;
}
