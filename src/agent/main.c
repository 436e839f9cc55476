/* main.c -- space-agent entry: PID 1 in the guest, or a plain process for host tests.
 *   space-agent                     as init: mounts, hostname, then serve the virtio port
 *   space-agent --channel PATH      serve a unix socket (connect to PATH) or a char device
 *   space-agent -v                  debug logging */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "agent.h"
#include "log.h"

static void usage(void)
{
	fprintf(stderr, "usage: space-agent [--channel PATH] [-v]\n");
}

/* Hundreds of channels need ~4 fds each; children get the original limit back. */
static void raise_nofile(struct agent *a)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	a->nofile = rl;
	if (a->pid1 && rl.rlim_max < 8 * AGENT_MAX_CHANS)
		rl.rlim_max = 8 * AGENT_MAX_CHANS;
	rl.rlim_cur = rl.rlim_max < 8 * AGENT_MAX_CHANS ? rl.rlim_max : 8 * AGENT_MAX_CHANS;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
		rl = a->nofile;
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* Host tests: let orphans of our commands come back to us to be reaped, as they would to
 * PID 1, and keep fds 0-2 open so that pipe fds never take those numbers (spawn.c). */
static void host_mode_setup(void)
{
	int fd;

	prctl(PR_SET_CHILD_SUBREAPER, 1);
	while ((fd = open("/dev/null", O_RDWR)) >= 0 && fd <= 2)
		;
	if (fd > 2)
		close(fd);
}

int main(int argc, char **argv)
{
	const char *channel = NULL;
	struct agent *a;
	int i;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--channel") == 0 && i + 1 < argc) {
			channel = argv[++i];
		} else if (strcmp(argv[i], "-v") == 0) {
			log_set_level(LOG_DEBUG);
		} else {
			usage();
			return 2;
		}
	}
	log_set_prefix("space-agent");
	/* Large (frame buffers): on the heap, never on PID 1's stack. */
	a = calloc(1, sizeof(*a));
	if (!a) {
		fprintf(stderr, "space-agent: out of memory\n");
		return 1;
	}
	a->pid1 = getpid() == 1;
	a->set_clock = a->pid1;
	a->epfd = -1;
	if (a->pid1)
		agent_init_system(a);
	else
		host_mode_setup();
	raise_nofile(a);
	if (agent_loop_init(a) < 0) {
		perror("space-agent: event loop");
		if (a->pid1)
			agent_poweroff(a, PROTO_SHUTDOWN_NOW);
		return 1;
	}
	agent_port_init(a, channel);
	agent_log(a, false, "started (pid %d, protocol v%d, channel %s)", (int)getpid(),
		  PROTO_VERSION, channel ? channel : "virtio port " PROTO_PORT_NAME);
	if (agent_run(a) < 0 && a->pid1)
		agent_poweroff(a, PROTO_SHUTDOWN_NOW);
	return 0;
}
