/* limits.c -- the fd limit spaced runs under, and the client caps sized from it */
#include <stdio.h>
#include <sys/resource.h>

#include "daemon.h"
#include "log.h"

/* fds kept for everything that is not a client: the store, listeners,
 * logs, and per running VM its QMP and agent sockets, console, pidfd,
 * disks and spools (about 8). */
#define FD_RESERVE_BASE 64
#define FD_PER_SANDBOX 8
#define CONNS_MIN 16
#define CONNS_MAX 16384

static unsigned raise_nofile(void)
{
	struct rlimit rl;
	rlim_t want;
	FILE *f;
	unsigned long nr_open = 0;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 1024;
	want = rl.rlim_max;
	/* An unlimited hard limit still stops at the kernel's nr_open. */
	f = fopen("/proc/sys/fs/nr_open", "re");
	if (f) {
		if (fscanf(f, "%lu", &nr_open) != 1)
			nr_open = 0;
		fclose(f);
	}
	if (nr_open && (want == RLIM_INFINITY || want > nr_open))
		want = nr_open;
	if (want > rl.rlim_cur) {
		struct rlimit nl = { .rlim_cur = want, .rlim_max = rl.rlim_max };
		if (setrlimit(RLIMIT_NOFILE, &nl) == 0)
			rl.rlim_cur = want;
		else
			log_warn("raising the fd limit from %llu to %llu: %m", (unsigned long long)rl.rlim_cur,
				 (unsigned long long)want);
	}
	return rl.rlim_cur > (1u << 30) ? (1u << 30) : (unsigned)rl.rlim_cur;
}

unsigned limits_init(struct config *cfg)
{
	unsigned nofile = raise_nofile();
	unsigned reserve = FD_RESERVE_BASE + FD_PER_SANDBOX * (unsigned)cfg->max_sandboxes;
	unsigned conns = nofile > reserve ? (nofile - reserve) / 2 : 0;

	if (conns < CONNS_MIN)
		conns = CONNS_MIN;
	if (conns > CONNS_MAX)
		conns = CONNS_MAX;
	if (!cfg->max_conns)
		cfg->max_conns = (int)conns;
	if (!cfg->max_conns_per_client)
		cfg->max_conns_per_client = cfg->max_conns / 2 > 8 ? cfg->max_conns / 2 : cfg->max_conns;
	if (!cfg->max_streams)
		cfg->max_streams = cfg->max_conns / 2 > 1 ? cfg->max_conns / 2 : 1;
	log_info("fd limit %u: up to %d connections (%d per client address), %d streams (%d per sandbox), "
		 "%d s per request",
		 nofile, cfg->max_conns, cfg->max_conns_per_client, cfg->max_streams, cfg->max_streams_per_sandbox,
		 cfg->request_timeout_s);
	if ((unsigned)cfg->max_conns + reserve > nofile)
		log_warn("fd limit %u is low for %d connections and %d sandboxes; raise `ulimit -n`", nofile,
			 cfg->max_conns, cfg->max_sandboxes);
	return nofile;
}
