/* proc_async.h -- a helper program run to completion, its end heard from the loop */
#ifndef SPACE_PROC_ASYNC_H
#define SPACE_PROC_ASYNC_H

#include "err.h"

struct event_base;
struct proc_job;

/* err NULL: it exited 0. Otherwise why not (its exit status, a failed exec, ETIMEDOUT). */
typedef void (*proc_job_cb)(const space_err *err, void *arg);

/* Starts argv (stdio to /dev/null) and returns at once; done(err, arg) runs once from the
 * loop when it has ended (after timeout_ms it is killed: ETIMEDOUT). *out is the job until
 * then, for proc_job_cancel (which kills and reaps it; done is not called). */
int proc_job_start(struct event_base *base, char *const *argv, int timeout_ms, proc_job_cb done, void *arg,
		   struct proc_job **out, space_err *err);
void proc_job_cancel(struct proc_job *j);

#endif
