/* netns.c -- a sandbox's named network namespace: lo, the persistent TAP the VM's virtio-net
 * sits on, the link address and the nftables ruleset (docs/design/egress.md), made the way
 * `ip netns add` makes one: a netns file bind-mounted onto /run/netns/<name> */
#include "net.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "egress/rules.h"
#include "log.h"
#include "vmm/proc.h"

#define NETNS_DIR "/run/netns"
#define NFT_BINARY "/usr/sbin/nft"
#ifndef NSFS_MAGIC
#define NSFS_MAGIC 0x6e736673
#endif
/* The child's whole job (nft included) is tens of ms; this bounds a wedged one. */
#define NETNS_TIMEOUT_MS 10000

void net_ns_path(const struct spaced *d, const char *sb_id, char out[PATH_MAX])
{
	snprintf(out, PATH_MAX, NETNS_DIR "/space-%s-%s", d->state_tag, sb_id);
}

/* Is path a netns mount (and not a plain file left by a host reboot or a crash)? */
static bool is_netns(const char *path)
{
	struct statfs sf;

	return statfs(path, &sf) == 0 && sf.f_type == NSFS_MAGIC;
}

/* ---- the child: everything happens inside the new netns ---- */

struct ns_fail {
	int err;
	char step[160];
};

static __attribute__((noreturn)) void fail(int fd, int e, const char *step)
{
	struct ns_fail f = { .err = e };
	ssize_t r;

	snprintf(f.step, sizeof(f.step), "%s", step);
	do
		r = write(fd, &f, sizeof(f));
	while (r < 0 && errno == EINTR);
	_exit(1);
}

static int if_flags_up(int s, const char *name)
{
	struct ifreq ifr = { 0 };

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		return -1;
	ifr.ifr_flags |= IFF_UP;
	return ioctl(s, SIOCSIFFLAGS, &ifr);
}

static int if_set_addr(int s, const char *name, unsigned long req, uint32_t addr)
{
	struct ifreq ifr = { 0 };
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(addr) };

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	memcpy(&ifr.ifr_addr, &sin, sizeof(sin));
	return ioctl(s, req, &ifr);
}

static int if_set_mac(int s, const char *name)
{
	static const unsigned char mac[6] = EGRESS_GW_MAC;
	struct ifreq ifr = { 0 };

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
	memcpy(ifr.ifr_hwaddr.sa_data, mac, sizeof(mac));
	return ioctl(s, SIOCSIFHWADDR, &ifr);
}

/* nft -f - with the ruleset on its stdin, from inside the netns (a netns is inherited). */
static void load_ruleset(int errfd)
{
	const char *rules = egress_ruleset();
	int in[2], out[2];
	char msg[120] = "", step[160];
	int status;

	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
		fail(errfd, errno, "pipe for nft");
	pid_t pid = fork();
	if (pid < 0)
		fail(errfd, errno, "fork nft");
	if (pid == 0) {
		char *const argv[] = { "nft", "-f", "-", NULL };
		char *const env[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };

		if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0 || dup2(out[1], 2) < 0)
			_exit(126);
		execve(NFT_BINARY, argv, env);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	size_t len = strlen(rules), off = 0;
	while (off < len) {
		ssize_t n = write(in[1], rules + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	close(in[1]);
	ssize_t n = read(out[0], msg, sizeof(msg) - 1);
	msg[n > 0 ? n : 0] = '\0';
	for (char *p = msg; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && off == len)
		return;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
		fail(errfd, ENOENT, "exec " NFT_BINARY " (is nftables installed?)");
	snprintf(step, sizeof(step), "loading the ruleset with nft (status 0x%x): %s", status, msg);
	fail(errfd, EIO, step);
}

static __attribute__((noreturn)) void child(const char *target, int errfd)
{
	struct ifreq ifr = { 0 };

	proc_child_started();
	if (unshare(CLONE_NEWNET) < 0)
		fail(errfd, errno, "unshare(CLONE_NEWNET)");
	_cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		fail(errfd, errno, "socket");
	if (if_flags_up(s, "lo") < 0)
		fail(errfd, errno, "bring up lo");
	/* Persistent: it outlives this child and every QEMU that attaches to it, and goes
	 * with the netns. */
	int tun = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (tun < 0)
		fail(errfd, errno, "open /dev/net/tun");
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), EGRESS_TAP_NAME);
	if (ioctl(tun, TUNSETIFF, &ifr) < 0)
		fail(errfd, errno, "create the TAP " EGRESS_TAP_NAME);
	if (ioctl(tun, TUNSETPERSIST, 1) < 0)
		fail(errfd, errno, "make the TAP persistent");
	close(tun);
	if (if_set_mac(s, EGRESS_TAP_NAME) < 0)
		fail(errfd, errno, "set the TAP's MAC address");
	if (if_set_addr(s, EGRESS_TAP_NAME, SIOCSIFADDR, EGRESS_GW_ADDR) < 0 ||
	    if_set_addr(s, EGRESS_TAP_NAME, SIOCSIFNETMASK, ~0u << (32 - EGRESS_PREFIX_LEN)) < 0)
		fail(errfd, errno, "set the TAP's address");
	if (if_flags_up(s, EGRESS_TAP_NAME) < 0)
		fail(errfd, errno, "bring up the TAP");
	load_ruleset(errfd);
	/* Last: from here the netns lives on without us. */
	if (mount("/proc/self/ns/net", target, NULL, MS_BIND, NULL) < 0)
		fail(errfd, errno, "bind-mount the netns");
	_exit(0);
}

/* ---- the daemon's side ---- */

int net_ns_ensure(struct spaced *d, const char *sb_id, space_err *err)
{
	char path[PATH_MAX];
	struct ns_fail f;
	int pipefd[2], status;

	net_ns_path(d, sb_id, path);
	if (is_netns(path))
		return 0;
	if (mkdir(NETNS_DIR, 0755) < 0 && errno != EEXIST)
		return err_sys(err, errno, "creating " NETNS_DIR);
	/* A plain file here is what a crashed attempt or a host reboot left: start over. */
	if (unlink(path) < 0 && errno != ENOENT)
		return err_sys(err, errno, "removing a stale %s", path);
	int fd = open(path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
	if (fd < 0)
		return err_sys(err, errno, "creating %s", path);
	close(fd);
	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		unlink(path);
		return err_sys(err, errno, "pipe");
	}
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(pipefd[0]);
		close(pipefd[1]);
		unlink(path);
		return err_sys(err, e, "fork");
	}
	if (pid == 0) {
		close(pipefd[0]);
		child(path, pipefd[1]);
	}
	close(pipefd[1]);
	_cleanup_close_ int rfd = pipefd[0];
	_cleanup_close_ int pidfd = proc_pidfd_open(pid);
	if (proc_wait_child(pid, pidfd, NETNS_TIMEOUT_MS, &status) < 0) {
		proc_kill_reap(pid, pidfd);
		umount2(path, MNT_DETACH);
		unlink(path);
		return err_set(err, ETIMEDOUT, "making the netns of %s took over %d ms", sb_id, NETNS_TIMEOUT_MS);
	}
	ssize_t r = read(rfd, &f, sizeof(f));
	if (r == (ssize_t)sizeof(f) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		/* Nothing was mounted (that is the last step): the netns, its TAP and
		 * ruleset went with the child. */
		umount2(path, MNT_DETACH);
		unlink(path);
		if (r != (ssize_t)sizeof(f))
			return err_set(err, EIO, "making the netns of %s: the child ended (0x%x)", sb_id, status);
		f.step[sizeof(f.step) - 1] = '\0';
		return err_sys(err, f.err, "making the netns of %s: %s", sb_id, f.step);
	}
	log_info("sandbox %s: network namespace %s made", sb_id, path);
	return 0;
}

static int remove_path(const char *path, space_err *err)
{
	if (umount2(path, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
		return err_sys(err, errno, "unmounting %s", path);
	if (unlink(path) < 0 && errno != ENOENT)
		return err_sys(err, errno, "removing %s", path);
	return 0;
}

int net_ns_remove(struct spaced *d, const char *sb_id, space_err *err)
{
	char path[PATH_MAX];

	net_ns_path(d, sb_id, path);
	return remove_path(path, err);
}

int net_ns_sweep(struct spaced *d, bool (*keep)(const char *sb_id, void *arg), void *arg)
{
	char prefix[64], path[PATH_MAX];
	_cleanup_closedir_ DIR *dir = opendir(NETNS_DIR);
	struct dirent *e;
	int n = 0;
	space_err err = { 0 };

	if (!dir)
		return 0;
	snprintf(prefix, sizeof(prefix), "space-%s-", d->state_tag);
	while ((e = readdir(dir))) {
		const char *id = e->d_name + strlen(prefix);

		if (strncmp(e->d_name, prefix, strlen(prefix)) != 0 || keep(id, arg))
			continue;
		snprintf(path, sizeof(path), NETNS_DIR "/%s", e->d_name);
		if (remove_path(path, &err) < 0)
			log_warn("%s", err.msg);
		else
			n++;
	}
	return n;
}
