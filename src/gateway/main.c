/* main.c -- space-gw: arguments, the sockets opened inside the sandbox's netns, the upstream
 * TLS and DNS set-up, the privilege drop, and the event loop (egress.md "space-gw"). */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cleanup.h"
#include "confine.h"
#include "egress/rules.h"
#include "gw.h"
#include "log.h"

#define GW_NOFILE_MIN 4096

/* The niceness of a starting gateway (and of --make-netns). */
#define GW_START_NICE 10

/* cgroup.procs files a gateway joins (one per cgroup v1 hierarchy, or the v2 leaf). */
#define GW_CGROUP_FILES_MAX 4

struct args {
	const char *sandbox, *netns, *audit_dir, *dns_upstream, *upstream_ca, *refuse;
	struct gw_mkns mkns;
	int control_fd;
	long uid, gid;
	int max_conns;
	long max_buffer;
	bool print_ruleset;
	const char *cgroup_procs[GW_CGROUP_FILES_MAX]; /* joined first: --cgroup-procs FILE */
	int ncgroup;
};

static void usage(void)
{
	fprintf(stderr, "usage: space-gw --sandbox ID --netns PATH --control-fd N --audit-dir DIR\n"
			"                [--dns-upstream ADDR:PORT] [--upstream-ca FILE] [--uid UID --gid GID]\n"
			"                [--max-conns N] [--max-buffer BYTES] [--refuse CIDR[,CIDR...]]\n"
			"                [--cgroup-procs FILE]...\n"
			"       space-gw --print-ruleset\n"
			"       space-gw --make-netns PATH [--ca-cert FILE --ca-key FILE [--ca-name CN]]\n"
			"                (a failure is reported on fd 3)\n");
}

static bool parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return false;
	*out = v;
	return true;
}

static int parse_args(int argc, char **argv, struct args *a)
{
	static const struct option opts[] = {
		{ "sandbox", 1, 0, 's' }, { "netns", 1, 0, 'n' }, { "control-fd", 1, 0, 'c' },
		{ "audit-dir", 1, 0, 'a' }, { "dns-upstream", 1, 0, 'd' }, { "upstream-ca", 1, 0, 'C' },
		{ "uid", 1, 0, 'u' }, { "gid", 1, 0, 'g' }, { "max-conns", 1, 0, 'm' },
		{ "max-buffer", 1, 0, 'B' }, { "refuse", 1, 0, 'r' },
		{ "print-ruleset", 0, 0, 'p' }, { "make-netns", 1, 0, 'M' },
		{ "ca-cert", 1, 0, 'K' }, { "ca-key", 1, 0, 'k' }, { "ca-name", 1, 0, 'N' },
		{ "cgroup-procs", 1, 0, 'G' }, { 0, 0, 0, 0 },
	};
	long v;
	int o;

	*a = (struct args){ .control_fd = -1, .uid = -1, .gid = -1, .max_conns = GW_MAX_CONNS_DEFAULT,
			    .max_buffer = GW_MAX_BUFFER_DEFAULT };
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 's': a->sandbox = optarg; break;
		case 'n': a->netns = optarg; break;
		case 'a': a->audit_dir = optarg; break;
		case 'd': a->dns_upstream = optarg; break;
		case 'C': a->upstream_ca = optarg; break;
		case 'p': a->print_ruleset = true; break;
		case 'M': a->mkns.path = optarg; break;
		case 'K': a->mkns.ca_cert = optarg; break;
		case 'k': a->mkns.ca_key = optarg; break;
		case 'N': a->mkns.ca_name = optarg; break;
		case 'c': if (!parse_long(optarg, 0, 65535, &v)) return -1; a->control_fd = (int)v; break;
		case 'u': if (!parse_long(optarg, 0, 0x7fffffff, &a->uid)) return -1; break;
		case 'g': if (!parse_long(optarg, 0, 0x7fffffff, &a->gid)) return -1; break;
		case 'm': if (!parse_long(optarg, 1, 1 << 20, &v)) return -1; a->max_conns = (int)v; break;
		case 'B': if (!parse_long(optarg, 1 << 20, 1L << 40, &a->max_buffer)) return -1; break;
		case 'r': a->refuse = optarg; break;
		case 'G':
			if (a->ncgroup >= GW_CGROUP_FILES_MAX)
				return -1;
			a->cgroup_procs[a->ncgroup++] = optarg;
			break;
		default: return -1;
		}
	}
	if (!a->mkns.ca_cert != !a->mkns.ca_key)
		return -1;
	if (optind != argc || (!a->print_ruleset && !a->mkns.path &&
				(!a->sandbox || !a->netns || a->control_fd < 0 || !a->audit_dir)) ||
	    ((a->uid < 0) != (a->gid < 0)))
		return -1;
	return 0;
}

/* ---- sockets inside the sandbox's netns ---- */

static int bound_socket(int type, uint32_t addr, uint16_t port, space_err *err)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port),
				   .sin_addr.s_addr = htonl(addr) };
	_cleanup_close_ int fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;

	if (fd < 0)
		return err_sys(err, errno, "socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		return err_sys(err, errno, "bind port %u", port);
	if (type == SOCK_STREAM && listen(fd, 1024) < 0)
		return err_sys(err, errno, "listen");
	return steal_fd(&fd);
}

/* setns into the sandbox's netns, make both sockets, setns back: a socket stays in the netns
 * it was made in, and everything else (upstream connections, DNS) uses the host's. */
static int netns_sockets(const char *path, int *udp, int *tcp, space_err *err)
{
	_cleanup_close_ int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int ns = open(path, O_RDONLY | O_CLOEXEC);
	int rc = 0;

	if (self < 0 || ns < 0)
		return err_sys(err, errno, "netns %s", self < 0 ? "/proc/self/ns/net" : path);
	if (setns(ns, CLONE_NEWNET) < 0)
		return err_sys(err, errno, "setns %s", path);
	*udp = bound_socket(SOCK_DGRAM, EGRESS_GW_ADDR, EGRESS_DNS_PORT, err);
	*tcp = *udp < 0 ? -1 : bound_socket(SOCK_STREAM, INADDR_ANY, EGRESS_PROXY_PORT, err);
	if (*udp < 0 || *tcp < 0)
		rc = -1;
	if (setns(self, CLONE_NEWNET) < 0) {
		/* never carry on in the sandbox's netns: upstream traffic would leave from it */
		log_error("setns back to the host netns: %s", strerror(errno));
		_exit(1);
	}
	if (rc < 0 && *udp >= 0)
		close(*udp);
	return rc;
}

/* ---- process set-up ---- */

static void host_addrs(struct gw *g)
{
	struct ifaddrs *ifa, *i;

	if (getifaddrs(&ifa) < 0) {
		log_warn("getifaddrs: %s", strerror(errno));
		return;
	}
	for (i = ifa; i && g->nhost_addrs < GW_HOST_ADDRS_MAX; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET)
			g->host_addrs[g->nhost_addrs++] =
				ntohl(((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr);
	freeifaddrs(ifa);
}

static int raise_nofile(space_err *err)
{
	struct rlimit r;

	if (getrlimit(RLIMIT_NOFILE, &r) < 0)
		return err_sys(err, errno, "getrlimit");
	if (r.rlim_max < GW_NOFILE_MIN)
		r.rlim_max = GW_NOFILE_MIN * 4;
	r.rlim_cur = r.rlim_max < 65536 ? r.rlim_max : 65536;
	if (setrlimit(RLIMIT_NOFILE, &r) < 0)
		return err_sys(err, errno, "RLIMIT_NOFILE %lu", (unsigned long)r.rlim_cur);
	return 0;
}

static int drop_privileges(const struct args *a, space_err *err)
{
	if (a->uid >= 0) {
		if (setgroups(0, NULL) < 0)
			return err_sys(err, errno, "setgroups");
		if (setresgid((gid_t)a->gid, (gid_t)a->gid, (gid_t)a->gid) < 0)
			return err_sys(err, errno, "setresgid %ld", a->gid);
		if (setresuid((uid_t)a->uid, (uid_t)a->uid, (uid_t)a->uid) < 0)
			return err_sys(err, errno, "setresuid %ld", a->uid);
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return err_sys(err, errno, "PR_SET_NO_NEW_PRIVS");
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return err_sys(err, errno, "PR_SET_DUMPABLE");
	return 0;
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct gw *g = arg;

	(void)what;
	log_info("signal %d: exiting", (int)sig);
	event_base_loopbreak(g->base);
}

static int setup(struct gw *g, const struct args *a, space_err *err)
{
	int tcp = -1;
	space_err e2;

	if (egress_policy_parse(NULL, false, &g->policy, err) < 0 || raise_nofile(err) < 0)
		return -1;
	if (egress_cidrs_parse(a->refuse, &g->refuse, err) < 0)
		return err_wrap(err, "--refuse");
	if (netns_sockets(a->netns, &g->udp_fd, &tcp, err) < 0)
		return err_wrap(err, "sandbox sockets");
	g->base = event_base_new();
	if (!g->base) {
		close(tcp);
		return err_set(err, EIO, "event_base_new");
	}
	if (gw_relay_init(g, err) < 0 || gw_proxy_start(g, tcp, err) < 0) {
		close(tcp);
		return -1;
	}
	g->tls = gw_tls_new(a->upstream_ca, &e2);
	if (!g->tls)
		return err_set(err, e2.code, "upstream TLS: %s", e2.msg);
	host_addrs(g);
	if (gw_audit_open(&g->audit, a->audit_dir, a->sandbox, (uid_t)a->uid, (gid_t)a->gid, err) < 0 ||
	    gw_dns_start(g, a->dns_upstream, err) < 0 || gw_control_start(g, a->control_fd, err) < 0)
		return -1;
	g->sigterm = evsignal_new(g->base, SIGTERM, on_signal, g);
	g->sigint = evsignal_new(g->base, SIGINT, on_signal, g);
	if (!g->sigterm || !g->sigint || event_add(g->sigterm, NULL) < 0 || event_add(g->sigint, NULL) < 0)
		return err_set(err, EIO, "signal events");
	if (geteuid() == 0 && setpriority(PRIO_PROCESS, 0, 0) < 0)
		log_warn("setpriority: %s", strerror(errno));
	if (drop_privileges(a, err) < 0)
		return -1;
	/* Last: from here on only what relaying needs (confine.c), before the first guest byte. */
	return gw_confine_seccomp(err);
}

static void teardown(struct gw *g)
{
	gw_control_stop(g);
	gw_proxy_stop(g);
	gw_relay_fini(g); /* after the connections: freeing them may wake it */
	gw_dns_stop(g);
	if (g->udp_fd >= 0)
		close(g->udp_fd);
	if (g->sigterm)
		event_free(g->sigterm);
	if (g->sigint)
		event_free(g->sigint);
	gw_audit_close(&g->audit);
	gw_tls_free(g->tls);
	egress_policy_free(g->policy);
	if (g->base)
		event_base_free(g->base);
}

int main(int argc, char **argv)
{
	struct gw *g;
	struct args a;
	space_err err = { 0 };
	int rc = 0;

	if (parse_args(argc, argv, &a) < 0) {
		usage();
		return 2;
	}
	if (a.print_ruleset) {
		fputs(egress_ruleset(), stdout);
		return 0;
	}
	/* Into its cgroups before anything else: the daemon spawns it outside them (moving a
	 * process between cgroups costs milliseconds, which its loop should not spend). One it
	 * cannot join, it does not run outside of. */
	for (int i = 0; i < a.ncgroup; i++) {
		int fd = open(a.cgroup_procs[i], O_WRONLY | O_CLOEXEC);

		if (fd < 0 || write(fd, "0\n", 2) != 2) {
			log_error("joining %s: %s", a.cgroup_procs[i], strerror(errno));
			return 1;
		}
		close(fd);
	}
	/* Starting up (a netns, a CA, the sockets, the CA bundle) happens while the daemon
	 * brings the VM up on the same cores: at a lower priority, so that a burst of creates
	 * does not slow the daemon's loop. A gateway then serves at the normal priority
	 * (restored while still root, below). */
	if (setpriority(PRIO_PROCESS, 0, GW_START_NICE) < 0)
		log_warn("setpriority: %s", strerror(errno));
	if (a.mkns.path)
		gw_make_netns(&a.mkns); /* does not return */
	signal(SIGPIPE, SIG_IGN);
	log_set_prefix("space-gw");
	g = calloc(1, sizeof(*g));
	if (!g)
		return 1;
	g->udp_fd = -1;
	g->audit.fd = g->audit.dirfd = -1;
	g->sandbox = a.sandbox;
	g->max_conns = a.max_conns;
	g->max_buffer = (uint64_t)a.max_buffer;
	if (setup(g, &a, &err) < 0) {
		log_error("%s", err.msg);
		rc = 1;
	} else {
		log_info("sandbox %s: serving (uid %d)", a.sandbox, (int)getuid());
		event_base_dispatch(g->base);
	}
	teardown(g);
	free(g);
	return rc;
}
