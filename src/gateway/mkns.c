/* mkns.c -- `space-gw --make-netns PATH`: makes a sandbox's network namespace and leaves it
 * mounted at PATH (an empty file the daemon made): lo up, the persistent TAP tap0 with the
 * gateway's fixed MAC and 169.254.0.22/30, up, and the ruleset loaded with nft; with --ca-cert,
 * --ca-key (and --ca-name) the sandbox's CA too, if it has none yet. Runs as root,
 * spawned by the daemon; a failure is reported on EGRESS_MKNS_FD (egress/mkns.h) and nothing
 * is left behind (the mount is the last step; the rest goes with this process's netns). */
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <netinet/in.h>
#include <sched.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "egress/ca.h"
#include "egress/mkns.h"
#include "egress/rules.h"
#include "gw.h"

#define NFT_BINARY "/usr/sbin/nft"

static __attribute__((noreturn)) void fail(int fd, int e, const char *step)
{
	struct egress_mkns_fail f = { .err = e };
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

static int write_new(const char *path, const char *text)
{
	char tmp[PATH_MAX + 8];
	size_t len = strlen(text);

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len || rename(tmp, path) < 0) {
		int e = errno;
		unlink(tmp);
		errno = e;
		return -1;
	}
	return 0;
}

/* The sandbox's CA (egress/ca.h), unless it has one: made here rather than on the
 * daemon's loop (a key and a signature per create). */
static void make_ca(const struct gw_mkns *m, int errfd)
{
	char *cert = NULL, *key = NULL;
	space_err err = { 0 };

	if (!m->ca_cert || access(m->ca_cert, F_OK) == 0)
		return;
	if (egress_ca_generate(m->ca_name ? m->ca_name : "SPACE sandbox egress CA", &cert, &key, &err) < 0)
		fail(errfd, err.code ? err.code : EIO, "generating the sandbox's CA");
	int rc = write_new(m->ca_key, key);
	int e = errno;
	explicit_bzero(key, strlen(key));
	free(key);
	if (rc == 0) {
		rc = write_new(m->ca_cert, cert);
		e = errno;
	}
	free(cert);
	if (rc < 0)
		fail(errfd, e, "writing the sandbox's CA");
}

void gw_make_netns(const struct gw_mkns *m)
{
	const char *target = m->path;
	struct ifreq ifr = { 0 };
	int errfd = EGRESS_MKNS_FD;

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
	make_ca(m, errfd);
	/* Last: from here the netns lives on without us. */
	if (mount("/proc/self/ns/net", target, NULL, MS_BIND, NULL) < 0)
		fail(errfd, errno, "bind-mount the netns");
	_exit(0);
}

