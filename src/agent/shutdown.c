/* shutdown.c -- H_SHUTDOWN: end the VM as PID 1, or the agent itself on a host test run. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/reboot.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"

void agent_poweroff(struct agent *a)
{
	if (!a->pid1) {
		struct agent_proc *p;

		agent_proc_kill_all(a);
		/* SIGKILLed: reap them so nothing outlives the agent, even as a zombie. */
		for (p = a->procs; p; p = p->next)
			if (!p->reaped && p->pid > 0)
				waitpid(p->pid, NULL, 0);
		agent_log(a, false, "shutdown: exiting (not PID 1)");
		exit(0);
	}
	agent_log(a, false, "shutdown: killing all processes, powering off");
	kill(-1, SIGKILL);
	sync();
	/* The VM runs with -no-reboot and `reboot=t`: a reset ends QEMU, whereas a power off
	 * with acpi=off only halts the CPU.  Power off is the fallback. */
	reboot(RB_AUTOBOOT);
	reboot(RB_POWER_OFF);
	agent_log(a, false, "reboot: %s", strerror(errno));
	for (;;)
		pause();
}
