/* proc_async.c -- a helper program run to completion without the loop waiting for it
 *
 * proc_run waits for its child, which is right for a short step (`qemu-img create`) and wrong
 * for one that copies gigabytes (`qemu-img convert` of a disk): here the child's exit is
 * watched through its pidfd from the loop, a timer bounds it (SIGKILL after), and the caller
 * hears once, from the loop. Cancelling kills and reaps the child without a word. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "log.h"
#include "proc.h"
#include "proc_async.h"

struct proc_job {
	pid_t pid;
	int pidfd;
	int statusfd;
	char name[64];
	struct event *exit_ev;
	struct event *timer;
	int timeout_ms;
	proc_job_cb done;
	void *arg;
};

static void job_free(struct proc_job *j)
{
	if (j->exit_ev)
		event_free(j->exit_ev);
	if (j->timer)
		event_free(j->timer);
	if (j->pidfd >= 0)
		close(j->pidfd);
	if (j->statusfd >= 0)
		close(j->statusfd);
	free(j);
}

static void finish(struct proc_job *j, const space_err *err)
{
	proc_job_cb done = j->done;
	void *arg = j->arg;

	job_free(j);
	done(err, arg);
}

static void on_exit_ev(evutil_socket_t fd, short what, void *arg)
{
	struct proc_job *j = arg;
	space_err err = { 0 };
	char how[64], why[160];
	int status = 0;

	(void)fd;
	(void)what;
	/* The pidfd is readable: the child has exited, waitpid does not block. */
	if (waitpid(j->pid, &status, 0) != j->pid) {
		err_sys(&err, errno, "waiting for %s", j->name);
		finish(j, &err);
		return;
	}
	j->pid = 0;
	proc_spawn_failure(j->statusfd, why, sizeof(why));
	if (why[0]) {
		err_set(&err, EIO, "%s: %s", j->name, why);
	} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		proc_status_text(status, how, sizeof(how));
		err_set(&err, EIO, "%s %s", j->name, how);
	}
	finish(j, err.code ? &err : NULL);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct proc_job *j = arg;
	space_err err = { 0 };

	(void)fd;
	(void)what;
	proc_kill_reap(j->pid, j->pidfd);
	j->pid = 0;
	err_set(&err, ETIMEDOUT, "%s did not finish within %d ms", j->name, j->timeout_ms);
	finish(j, &err);
}

int proc_job_start(struct event_base *base, char *const *argv, int timeout_ms, proc_job_cb done, void *arg,
		   struct proc_job **out, space_err *err)
{
	struct spawn_opts o = { .argv = argv, .stdout_fd = -1, .stderr_fd = -1 };
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	struct proc_job *j = calloc(1, sizeof(*j));
	const char *slash;

	if (!j)
		return err_set(err, ENOMEM, "out of memory");
	j->pidfd = j->statusfd = -1;
	j->timeout_ms = timeout_ms;
	j->done = done;
	j->arg = arg;
	slash = strrchr(argv[0], '/');
	snprintf(j->name, sizeof(j->name), "%s", slash ? slash + 1 : argv[0]);
	if (proc_spawn_async(&o, &j->pid, &j->pidfd, &j->statusfd, err) < 0) {
		free(j);
		return -1;
	}
	j->exit_ev = event_new(base, j->pidfd, EV_READ, on_exit_ev, j);
	j->timer = evtimer_new(base, on_timeout, j);
	if (!j->exit_ev || !j->timer || event_add(j->exit_ev, NULL) < 0 || evtimer_add(j->timer, &tv) < 0) {
		proc_kill_reap(j->pid, j->pidfd);
		job_free(j);
		return err_set(err, ENOMEM, "out of memory");
	}
	*out = j;
	return 0;
}

void proc_job_cancel(struct proc_job *j)
{
	if (!j)
		return;
	proc_kill_reap(j->pid, j->pidfd);
	job_free(j);
}
