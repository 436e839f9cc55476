/* init.c -- PID-1 duties: filesystems, console, hostname, loopback, clock.
 * Only run when the agent is PID 1 in the guest; a host test run skips all of it. */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "cleanup.h"

static void do_mount(struct agent *a, const char *src, const char *target, const char *fstype,
		     unsigned long flags, const char *data)
{
	if (mkdir(target, 0755) < 0 && errno != EEXIST)
		agent_log(a, false, "mkdir %s: %s", target, strerror(errno));
	if (mount(src, target, fstype, flags, data) == 0)
		return;
	/* Already mounted (the kernel mounts devtmpfs itself with CONFIG_DEVTMPFS_MOUNT). */
	if (errno == EBUSY)
		return;
	agent_log(a, false, "mount %s on %s: %s", fstype, target, strerror(errno));
}

/* The kernel opens /dev/console as fds 0-2 for init when it can; make sure 0-2 are open
 * either way, so pipe fds never land there and log lines go to the console. */
static void setup_console(void)
{
	int fd = open("/dev/console", O_RDWR | O_NOCTTY);
	int i;

	if (fd < 0)
		fd = open("/dev/null", O_RDWR);
	if (fd < 0)
		return;
	for (i = 0; i < 3; i++)
		if (fcntl(i, F_GETFD) < 0)
			dup2(fd, i);
	if (fd > 2)
		close(fd);
}

bool agent_cmdline_get(const char *cmdline, const char *key, char *out, size_t outlen)
{
	size_t kl = strlen(key);
	const char *p = cmdline;

	while (p && *p) {
		size_t tl;

		p += strspn(p, " \t\n");
		tl = strcspn(p, " \t\n");
		if (tl > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
			size_t vl = tl - kl - 1;

			if (vl >= outlen)
				return false;
			memcpy(out, p + kl + 1, vl);
			out[vl] = '\0';
			return true;
		}
		p += tl;
	}
	return false;
}

static int read_cmdline(char *buf, size_t len)
{
	_cleanup_close_ int fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	buf[0] = '\0';
	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

bool agent_valid_hostname(const char *h)
{
	size_t i, n = strlen(h);

	if (n == 0 || n > 63 || h[0] == '-' || h[0] == '.')
		return false;
	for (i = 0; i < n; i++) {
		char c = h[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '.'))
			return false;
	}
	return true;
}

static void loopback_up(struct agent *a)
{
	_cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0) {
		agent_log(a, false, "lo: socket: %s", strerror(errno));
		return;
	}
	if (agent_net_link_up(fd, "lo") < 0)
		agent_log(a, false, "lo up: %s", strerror(errno));
}

static void probe_ok(struct agent *a)
{
	static const char line[] = "SPACE-PROBE-OK\n";
	int fd = open("/dev/console", O_WRONLY | O_NOCTTY | O_CLOEXEC);

	if (fd < 0 || write(fd, line, sizeof(line) - 1) < 0)
		agent_log(a, false, "probe: write /dev/console: %s", strerror(errno));
	if (fd >= 0)
		close(fd);
	agent_poweroff(a, PROTO_SHUTDOWN_NOW);
}

void agent_init_system(struct agent *a)
{
	char cmdline[4096], host[128];

	/* /proc first: the command line decides the rest. */
	do_mount(a, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	do_mount(a, "devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
	setup_console();
	if (read_cmdline(cmdline, sizeof(cmdline)) < 0)
		agent_log(a, false, "read /proc/cmdline: %s", strerror(errno));
	if (agent_cmdline_get(cmdline, "space.probe", host, sizeof(host)) && strcmp(host, "1") == 0)
		probe_ok(a);

	do_mount(a, "sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	do_mount(a, "devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		 "newinstance,ptmxmode=0666,mode=0620");
	{
		struct stat st;

		if (lstat("/dev/ptmx", &st) < 0 && errno == ENOENT &&
		    symlink("pts/ptmx", "/dev/ptmx") < 0)
			agent_log(a, false, "symlink /dev/ptmx: %s", strerror(errno));
	}
	do_mount(a, "tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
	do_mount(a, "tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
	do_mount(a, "tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
	do_mount(a, "cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		 NULL);

	if (!agent_cmdline_get(cmdline, "space.hostname", host, sizeof(host)) ||
	    !agent_valid_hostname(host)) {
		if (strstr(cmdline, "space.hostname="))
			agent_log(a, false, "space.hostname: invalid, using \"sandbox\"");
		strcpy(host, "sandbox");
	}
	if (sethostname(host, strlen(host)) < 0)
		agent_log(a, false, "sethostname %s: %s", host, strerror(errno));
	loopback_up(a);
	agent_log(a, false, "system ready (hostname %s)", host);
}

int agent_set_clock(struct agent *a, uint64_t realtime_ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(realtime_ns / 1000000000ull),
		.tv_nsec = (long)(realtime_ns % 1000000000ull),
	};

	/* Never on a host test run: it would move the host's clock. */
	if (!a->set_clock)
		return 0;
	return clock_settime(CLOCK_REALTIME, &ts);
}
