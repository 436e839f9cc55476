/* ingress.c -- sockets opened from inside a sandbox's network namespace toward its guest (a
 * port's traffic, docs/design/ports.md). The guest's address is reached over the TAP only from
 * that namespace; its ruleset accepts the guest's packets only as replies to connections opened
 * there (ct direction reply), so ingress never opens a way out. */
#include "net.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cleanup.h"
#include "egress/rules.h"
#include "log.h"

/* The daemon's own netns, opened before the first setns (so it names the host's). */
static int host_ns = -1;

int net_ingress_init(space_err *err)
{
	if (host_ns >= 0)
		return 0;
	host_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (host_ns < 0)
		return err_sys(err, errno, "open /proc/self/ns/net");
	return 0;
}

int net_ingress_socket(const struct spaced *d, const char *sb_id, space_err *err)
{
	char path[PATH_MAX];
	_cleanup_close_ int ns = -1;
	int fd, e;

	if (host_ns < 0 && net_ingress_init(err) < 0)
		return -1;
	net_ns_path(d, sb_id, path);
	ns = open(path, O_RDONLY | O_CLOEXEC);
	if (ns < 0)
		return err_sys(err, errno, "the sandbox's network namespace %s", path);
	/* Only this thread moves, and only for the socket() call: a socket stays in the netns it
	 * was made in. */
	if (setns(ns, CLONE_NEWNET) < 0)
		return err_sys(err, errno, "setns %s", path);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	e = errno;
	if (setns(host_ns, CLONE_NEWNET) < 0) {
		/* Every later socket of the loop would be made in the sandbox's netns. */
		log_error("setns back to the host's network namespace: %s; exiting", strerror(errno));
		abort();
	}
	if (fd < 0)
		return err_sys(err, e, "socket in %s", path);
	return fd;
}

void net_ingress_addr(uint16_t port, struct sockaddr_in *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons(port);
	sa->sin_addr.s_addr = htonl(EGRESS_GUEST_ADDR);
}
