/* netns.c -- a sandbox's named network namespace: lo, the persistent TAP the VM's virtio-net
 * sits on, the link address and the nftables ruleset (docs/design/egress.md), made the way
 * `ip netns add` makes one: a netns file bind-mounted onto /run/netns/<name> */
#include "net.h"

#include <dirent.h>
#include <event2/event.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
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
#include "egress/mkns.h"
#include "egress/rules.h"
#include "log.h"
#include "vmm/proc.h"

#define NETNS_DIR "/run/netns"
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

/* ---- the daemon's side ---- */

/* A netns being made: the child that makes it, watched from the loop. */
struct net_ns_op {
	pid_t pid;
	int pidfd, rfd;
	struct event *ev;
	char path[PATH_MAX];
	char id[64];
	net_ns_cb cb;
	void *arg;
};

static void op_free(struct net_ns_op *op)
{
	if (op->ev)
		event_free(op->ev);
	if (op->pidfd >= 0)
		close(op->pidfd);
	if (op->rfd >= 0)
		close(op->rfd);
	free(op);
}

/* The child's verdict: what it wrote on the pipe (the step that failed) and how it ended.
 * A failure leaves nothing behind (nothing was mounted: that is the child's last step). */
static int ns_result(struct net_ns_op *op, int status, space_err *err)
{
	struct egress_mkns_fail f;
	ssize_t r = read(op->rfd, &f, sizeof(f));

	if (r != (ssize_t)sizeof(f) && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		log_info("sandbox %s: network namespace %s made", op->id, op->path);
		return 0;
	}
	umount2(op->path, MNT_DETACH);
	unlink(op->path);
	if (r != (ssize_t)sizeof(f))
		return err_set(err, EIO, "making the netns of %s: the child ended (0x%x)", op->id, status);
	f.step[sizeof(f.step) - 1] = '\0';
	return err_sys(err, f.err, "making the netns of %s: %s", op->id, f.step);
}

static void on_child(evutil_socket_t fd, short what, void *arg)
{
	struct net_ns_op *op = arg;
	space_err err = { 0 };
	int status = 0;

	(void)fd;
	if (what & EV_TIMEOUT) {
		proc_kill_reap(op->pid, op->pidfd);
		umount2(op->path, MNT_DETACH);
		unlink(op->path);
		err_set(&err, ETIMEDOUT, "making the netns of %s took over %d ms", op->id, NETNS_TIMEOUT_MS);
	} else {
		while (waitpid(op->pid, &status, 0) < 0 && errno == EINTR)
			;
		ns_result(op, status, &err);
	}
	net_ns_cb cb = op->cb;
	void *cb_arg = op->arg;
	op_free(op);
	cb(err.code ? &err : NULL, cb_arg); /* last: it may free what owned op */
}

/* Everything up to the spawn of `space-gw --make-netns` (posix_spawn: no copy of the
 * daemon's page tables on the loop); the helper is running when this returns 0. */
static int ns_spawn(struct net_ns_op *op, const struct net_ns_ca *ca, space_err *err)
{
	posix_spawn_file_actions_t fa;
	int pipefd[2], rc;

	if (mkdir(NETNS_DIR, 0755) < 0 && errno != EEXIST)
		return err_sys(err, errno, "creating " NETNS_DIR);
	/* A plain file here is what a crashed attempt or a host reboot left: start over. */
	if (unlink(op->path) < 0 && errno != ENOENT)
		return err_sys(err, errno, "removing a stale %s", op->path);
	int fd = open(op->path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
	if (fd < 0)
		return err_sys(err, errno, "creating %s", op->path);
	close(fd);
	/* The write end above 3, so that adddup2 onto 3 clears its close-on-exec. */
	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		unlink(op->path);
		return err_sys(err, errno, "pipe");
	}
	int wfd = fcntl(pipefd[1], F_DUPFD_CLOEXEC, 10);
	close(pipefd[1]);
	char *argv[10] = { (char *)gw_binary(), "--make-netns", op->path, NULL };
	if (ca && ca->cert) {
		argv[3] = "--ca-cert";
		argv[4] = (char *)ca->cert;
		argv[5] = "--ca-key";
		argv[6] = (char *)ca->key;
		argv[7] = "--ca-name";
		argv[8] = (char *)ca->name;
		argv[9] = NULL;
	}
	char *const env[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
	rc = wfd < 0 ? errno : posix_spawn_file_actions_init(&fa);
	if (rc == 0) {
		rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
		rc = rc ? rc : posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
		rc = rc ? rc : posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
		rc = rc ? rc : posix_spawn_file_actions_adddup2(&fa, wfd, EGRESS_MKNS_FD);
		/* None of the daemon's other descriptors (see gw.c: spawn_gw). */
		rc = rc ? rc : posix_spawn_file_actions_addclosefrom_np(&fa, EGRESS_MKNS_FD + 1);
		/* Its environment is ours under a test's sanitizer settings, else just a PATH. */
		rc = rc ? rc : posix_spawn(&op->pid, argv[0], &fa, NULL, argv, getenv("ASAN_OPTIONS") ? environ : env);
		posix_spawn_file_actions_destroy(&fa);
	}
	if (wfd >= 0)
		close(wfd);
	if (rc != 0) {
		close(pipefd[0]);
		unlink(op->path);
		return err_sys(err, rc, "spawning %s --make-netns", argv[0]);
	}
	op->rfd = pipefd[0];
	op->pidfd = proc_pidfd_open(op->pid);
	return 0;
}

int net_ns_begin(struct spaced *d, const char *sb_id, const struct net_ns_ca *ca, net_ns_cb cb, void *arg,
		 struct net_ns_op **out, space_err *err)
{
	struct timeval tv = { NETNS_TIMEOUT_MS / 1000, (NETNS_TIMEOUT_MS % 1000) * 1000 };
	struct net_ns_op *op;

	*out = NULL;
	op = calloc(1, sizeof(*op));
	if (!op)
		return err_set(err, ENOMEM, "out of memory");
	op->pidfd = op->rfd = -1;
	op->cb = cb;
	op->arg = arg;
	net_ns_path(d, sb_id, op->path);
	snprintf(op->id, sizeof(op->id), "%s", sb_id);
	if (is_netns(op->path)) {
		free(op);
		return 1;
	}
	if (ns_spawn(op, ca, err) < 0) {
		free(op);
		return -1;
	}
	op->ev = op->pidfd >= 0 ? event_new(d->base, op->pidfd, EV_READ, on_child, op) : NULL;
	/* Bulk work, one per turn of the loop (main.c): a burst of creates whose netns are
	 * ready at once must not hold up the requests that came in meanwhile. */
	if (!op->ev || event_priority_set(op->ev, SPACED_PRIO_BULK) < 0 || event_add(op->ev, &tv) < 0) {
		net_ns_cancel(op);
		return err_set(err, ENOMEM, "watching the netns child: out of memory");
	}
	*out = op;
	return 0;
}

void net_ns_cancel(struct net_ns_op *op)
{
	if (!op)
		return;
	if (op->pid > 0)
		proc_kill_reap(op->pid, op->pidfd);
	umount2(op->path, MNT_DETACH);
	unlink(op->path);
	op_free(op);
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
