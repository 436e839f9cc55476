/* test_proc_async.c -- a helper run to completion while the loop goes on (vmm/proc_async.c):
 * its end is heard once, from the loop, with its exit status; a timeout kills it; a cancel
 * kills and reaps it without a word; the loop runs its timers meanwhile. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "daemon/vmm/proc_async.h"
#include "harness.h"

struct heard {
	int calls;
	int code;
	char msg[256];
	struct event_base *base;
};

static void on_done(const space_err *err, void *arg)
{
	struct heard *h = arg;

	h->calls++;
	h->code = err ? err->code : 0;
	snprintf(h->msg, sizeof(h->msg), "%s", err ? err->msg : "");
	event_base_loopbreak(h->base);
}

static int ticks;

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	ticks++;
}

/* Runs argv under a loop that also ticks every 10 ms; returns what done heard. */
static struct heard run(char *const *argv, int timeout_ms)
{
	struct heard h = { 0 };
	struct event_base *base = event_base_new();
	struct event *tick = event_new(base, -1, EV_PERSIST, on_tick, NULL);
	struct timeval ten = { 0, 10000 }, cap = { 10, 0 };
	struct proc_job *job = NULL;
	space_err err = { 0 };

	h.base = base;
	event_add(tick, &ten);
	if (proc_job_start(base, argv, timeout_ms, on_done, &h, &job, &err) < 0) {
		h.code = -1;
		snprintf(h.msg, sizeof(h.msg), "start: %s", err.msg);
	} else {
		event_base_loopexit(base, &cap);
		event_base_dispatch(base);
	}
	event_free(tick);
	event_base_free(base);
	return h;
}

static void test_exit_zero(void)
{
	char *argv[] = { "true", NULL };
	struct heard h = run(argv, 5000);

	EXPECT_EQ(h.calls, 1);
	EXPECT_EQ(h.code, 0);
}

static void test_exit_status(void)
{
	char *argv[] = { "sh", "-c", "exit 3", NULL };
	struct heard h = run(argv, 5000);

	EXPECT_EQ(h.calls, 1);
	EXPECT_EQ(h.code, EIO);
	EXPECT(strstr(h.msg, "sh") != NULL);
	EXPECT(strstr(h.msg, "3") != NULL);
}

static void test_missing_program(void)
{
	char *argv[] = { "/nonexistent/space-no-such-program", NULL };
	struct heard h = run(argv, 5000);

	/* Either refused at start or heard as an exec failure: never success. */
	EXPECT(h.code != 0);
}

static void test_loop_runs_meanwhile(void)
{
	char *argv[] = { "sleep", "0.5", NULL };
	struct heard h;

	ticks = 0;
	h = run(argv, 5000);
	EXPECT_EQ(h.calls, 1);
	EXPECT_EQ(h.code, 0);
	/* 500 ms of 10 ms ticks while it ran: the loop never waited for it. */
	EXPECT(ticks >= 20);
}

static void test_timeout_kills(void)
{
	char *argv[] = { "sleep", "30", NULL };
	struct timespec a, b;
	struct heard h;

	clock_gettime(CLOCK_MONOTONIC, &a);
	h = run(argv, 300);
	clock_gettime(CLOCK_MONOTONIC, &b);
	EXPECT_EQ(h.calls, 1);
	EXPECT_EQ(h.code, ETIMEDOUT);
	EXPECT((b.tv_sec - a.tv_sec) < 5);
}

static void test_cancel_kills_without_a_word(void)
{
	struct heard h = { 0 };
	struct event_base *base = event_base_new();
	struct proc_job *job = NULL;
	space_err err = { 0 };
	char *argv[] = { "sleep", "30", NULL };
	struct timeval t = { 0, 300000 };

	h.base = base;
	EXPECT(proc_job_start(base, argv, 60000, on_done, &h, &job, &err) == 0);
	proc_job_cancel(job);
	event_base_loopexit(base, &t);
	event_base_dispatch(base);
	EXPECT_EQ(h.calls, 0);
	/* It was reaped: no child of ours is left. */
	EXPECT(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD);
	event_base_free(base);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	RUN(test_exit_zero);
	RUN(test_exit_status);
	RUN(test_missing_program);
	RUN(test_loop_runs_meanwhile);
	RUN(test_timeout_kills);
	RUN(test_cancel_kills_without_a_word);
	return DONE();
}
