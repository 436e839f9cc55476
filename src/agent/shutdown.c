/* shutdown.c -- H_SHUTDOWN: end the VM as PID 1, or the agent itself on a host test run */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

/* After SIGKILL: how long to wait for the killed to be gone (they may hold files open for
 * writing, which would make the read-only remount fail). */
#define KILL_WAIT_MS 1000

/* As PID 1: no process left but the agent.  Every orphan is re-parented to PID 1, so no child
 * means nobody.  On a host run: every channel's process has been reaped (processes that are
 * not the agent's are none of its business). */
static bool all_gone(struct agent *a)
{
	struct agent_proc *p;
	siginfo_t si;

	if (a->pid1)
		return waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 && errno == ECHILD;
	for (p = a->procs; p; p = p->next)
		if (!p->reaped && p->pid > 0)
			return false;
	return true;
}

/* Reap until all_gone() or deadline_ms (monotonic); true when all are gone.  Blocking is fine:
 * once shutdown starts nothing else is served again.  SIGCHLD is blocked (loop.c, and again
 * here in case shutdown comes before the loop was set up), so one that arrives between the
 * reap and the wait stays pending and ends the wait at once. */
static bool wait_gone(struct agent *a, int64_t deadline_ms)
{
	sigset_t chld;

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	for (;;) {
		int64_t left;
		struct timespec ts;

		agent_proc_reap(a);
		if (all_gone(a))
			return true;
		left = deadline_ms - agent_now_ms();
		if (left <= 0)
			return false;
		ts.tv_sec = (time_t)(left / 1000);
		ts.tv_nsec = (long)(left % 1000) * 1000000;
		sigtimedwait(&chld, NULL, &ts);
	}
}

static void signal_all(struct agent *a, int signo)
{
	if (a->pid1)
		kill(-1, signo); /* everyone but PID 1 itself */
	else
		agent_proc_signal_all(a, signo);
}

/* SIGTERM, up to AGENT_SHUTDOWN_GRACE_MS for everyone to exit, then SIGKILL what is left. */
static void terminate_all(struct agent *a)
{
	agent_log(a, false, "shutdown: SIGTERM to %s, %d ms to exit",
		  a->pid1 ? "all processes" : "the channels' processes", AGENT_SHUTDOWN_GRACE_MS);
	signal_all(a, SIGTERM);
	if (wait_gone(a, agent_now_ms() + AGENT_SHUTDOWN_GRACE_MS))
		return;
	agent_log(a, false, "shutdown: processes left after %d ms: SIGKILL",
		  AGENT_SHUTDOWN_GRACE_MS);
	signal_all(a, SIGKILL);
	if (!wait_gone(a, agent_now_ms() + KILL_WAIT_MS))
		agent_log(a, false, "shutdown: processes still there %d ms after SIGKILL",
			  KILL_WAIT_MS);
}

static void exit_host_run(struct agent *a) __attribute__((noreturn));
static void exit_host_run(struct agent *a)
{
	struct agent_proc *p;

	agent_proc_signal_all(a, SIGKILL);
	/* SIGKILLed: reap them so nothing outlives the agent, even as a zombie. */
	for (p = a->procs; p; p = p->next)
		if (!p->reaped && p->pid > 0)
			waitpid(p->pid, NULL, 0);
	agent_log(a, false, "shutdown: exiting (not PID 1)");
	exit(0);
}

void agent_poweroff(struct agent *a, uint32_t mode)
{
	bool clean = mode == PROTO_SHUTDOWN_CLEAN;

	if (clean)
		terminate_all(a);
	if (!a->pid1)
		exit_host_run(a);
	if (!clean) {
		agent_log(a, false, "shutdown: killing all processes, powering off");
		kill(-1, SIGKILL);
	}
	sync();
	/* Read-only before the reset: the filesystem is left clean (no journal replay, nothing
	 * half-written) for whoever uses the disk next.  A failure is no reason to stay up. */
	if (clean && mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY, NULL) < 0)
		agent_log(a, false, "shutdown: remount / read-only: %s", strerror(errno));
	/* The VM runs with -no-reboot and `reboot=t`: a reset ends QEMU, whereas a power off
	 * with acpi=off only halts the CPU.  Power off is the fallback. */
	reboot(RB_AUTOBOOT);
	reboot(RB_POWER_OFF);
	agent_log(a, false, "reboot: %s", strerror(errno));
	for (;;)
		pause();
}
