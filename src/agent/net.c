/* net.c -- the guest side of the H_IDENTITY net payload: eth0, the default route, DNS, IPv6
 * off, and the sandbox's CA in the trust store (docs/design/egress.md). Applied on every
 * H_IDENTITY (start, restore, fork, clone), so every step must be repeatable. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "cleanup.h"

#define NET_IF "eth0"
#define BLOCK_BEGIN "# space-egress-ca begin"
#define BLOCK_END "# space-egress-ca end"
#define BUNDLE_MAX (64u << 20)

/* ---- pure parts (unit-tested) ---- */

/* The line [p, eol) is exactly `marker`. */
static bool line_is(const char *p, const char *eol, const char *marker)
{
	size_t n = strlen(marker);

	return (size_t)(eol - p) == n && memcmp(p, marker, n) == 0;
}

char *agent_net_bundle_replace(const char *bundle, const char *ca_pem)
{
	size_t blen = bundle ? strlen(bundle) : 0, clen = ca_pem ? strlen(ca_pem) : 0;
	char *out = malloc(blen + clen + sizeof(BLOCK_BEGIN) + sizeof(BLOCK_END) + 4), *o = out;
	const char *p = bundle ? bundle : "";
	bool in_block = false;

	if (!out)
		return NULL;
	while (*p) {
		const char *eol = strchrnul(p, '\n');
		size_t ll = (size_t)(eol - p) + (*eol == '\n');

		/* A begin without its end is ours too (cut short): dropped to the end. */
		if (!in_block && line_is(p, eol, BLOCK_BEGIN)) {
			in_block = true;
		} else if (in_block) {
			in_block = !line_is(p, eol, BLOCK_END);
		} else {
			memcpy(o, p, ll);
			o += ll;
		}
		p += ll;
	}
	if (o > out && o[-1] != '\n')
		*o++ = '\n';
	if (clen) {
		o = stpcpy(o, BLOCK_BEGIN "\n");
		o = stpcpy(o, ca_pem);
		if (ca_pem[clen - 1] != '\n')
			*o++ = '\n';
		o = stpcpy(o, BLOCK_END "\n");
	}
	*o = '\0';
	return out;
}

static int write_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			errno = n < 0 ? errno : EIO;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int agent_net_write_atomic(const char *path, const char *data, size_t len, mode_t mode)
{
	char tmp[PATH_MAX];
	_cleanup_close_ int fd = -1;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.space-tmp", path) >= sizeof(tmp)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return -1;
	if (write_all(fd, data, len) < 0 || fchmod(fd, mode) < 0 || rename(tmp, path) < 0) {
		int e = errno;

		unlink(tmp);
		errno = e;
		return -1;
	}
	return 0;
}

/* Overwrites an existing regular file with data from its first differing byte on (old: its
 * current content, or NULL: all of it), then cuts it to len: no new inode, no rename, no
 * directory change. -1 with errno (ENOENT: there is none). */
static int write_in_place(const char *path, const char *old, const char *data, size_t len)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	size_t from = 0;

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0)
		return -1;
	if (!S_ISREG(st.st_mode)) {
		errno = EINVAL;
		return -1;
	}
	while (old && from < len && old[from] == data[from])
		from++;
	for (size_t off = from; off < len;) {
		ssize_t n = pwrite(fd, data + off, len - off, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		off += (size_t)n;
	}
	if ((off_t)len != st.st_size && ftruncate(fd, (off_t)len) < 0)
		return -1;
	return 0;
}

/* mkdir -p for the parents of path (0755). */
static int mkdir_parents(const char *path)
{
	char buf[PATH_MAX];

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (char *s = buf + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -1;
		*s = '/';
	}
	return 0;
}

/* The whole file as a string; NULL with errno (ENOENT: there is none). */
static char *read_text(const char *path)
{
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t cap = 0, n = 0;

	if (!f)
		return NULL;
	for (;;) {
		if (cap - n < 4096) {
			char *nb = cap >= BUNDLE_MAX ? NULL : realloc(buf, cap ? cap * 2 : 65536);

			if (!nb) {
				free(buf);
				errno = cap >= BUNDLE_MAX ? EFBIG : ENOMEM;
				return NULL;
			}
			buf = nb;
			cap = cap ? cap * 2 : 65536;
		}
		size_t r = fread(buf + n, 1, cap - n - 1, f);
		n += r;
		if (r == 0)
			break;
	}
	if (ferror(f)) {
		free(buf);
		errno = EIO;
		return NULL;
	}
	buf[n] = '\0';
	return buf;
}

/* A file written whole: in place when asked and it exists, else made anew atomically. */
static int put_file(const char *path, const char *old, const char *text, bool in_place)
{
	if (in_place && write_in_place(path, old, text, strlen(text)) == 0)
		return 0;
	if (mkdir_parents(path) < 0)
		return -1;
	return agent_net_write_atomic(path, text, strlen(text), 0644);
}

int agent_net_install_ca(const char *root, const char *ca_pem, bool in_place)
{
	char file[PATH_MAX], bundle[PATH_MAX];
	_cleanup_free_ char *old = NULL, *text = NULL;

	if (strstr(ca_pem, "# space-egress-ca")) { /* would break the block's markers */
		errno = EINVAL;
		return -1;
	}
	snprintf(file, sizeof(file), "%s%s", root, AGENT_CA_FILE);
	snprintf(bundle, sizeof(bundle), "%s%s", root, AGENT_CA_BUNDLE);
	if (ca_pem[0]) {
		if (put_file(file, NULL, ca_pem, in_place) < 0)
			return -1;
	} else if (unlink(file) < 0 && errno != ENOENT) {
		return -1;
	}
	old = read_text(bundle);
	if (!old && errno != ENOENT)
		return -1;
	if (!old && !ca_pem[0])
		return 0; /* no CA and no bundle: nothing to take out */
	text = agent_net_bundle_replace(old, ca_pem);
	if (!text) {
		errno = ENOMEM;
		return -1;
	}
	return put_file(bundle, old, text, in_place);
}

int agent_net_write_resolv(const char *root, uint32_t dns)
{
	struct in_addr in = { .s_addr = htonl(dns) };
	char path[PATH_MAX], addr[INET_ADDRSTRLEN], text[128];
	int n;

	snprintf(path, sizeof(path), "%s/etc/resolv.conf", root);
	inet_ntop(AF_INET, &in, addr, sizeof(addr));
	n = snprintf(text, sizeof(text), "nameserver %s\noptions timeout:2 attempts:2\n", addr);
	if (mkdir_parents(path) < 0)
		return -1;
	return agent_net_write_atomic(path, text, (size_t)n, 0644);
}

/* ---- the kernel's side (PID 1 only) ---- */

int agent_net_link_up(int fd, const char *ifname)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		return -1;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	return ioctl(fd, SIOCSIFFLAGS, &ifr);
}

static void set_sin(struct sockaddr *sa, uint32_t addr)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(addr) };

	memcpy(sa, &sin, sizeof(sin));
}

/* Address and netmask; the kernel leaves an unchanged address or mask alone (and so keeps
 * the routes through it), which makes a repeated H_IDENTITY harmless. */
static int set_addr(int fd, uint32_t addr, uint32_t prefix_len)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", NET_IF);
	set_sin(&ifr.ifr_addr, addr);
	if (ioctl(fd, SIOCSIFADDR, &ifr) < 0)
		return -1;
	set_sin(&ifr.ifr_netmask, prefix_len >= 32 ? 0xffffffffu : ~(0xffffffffu >> prefix_len));
	return ioctl(fd, SIOCSIFNETMASK, &ifr);
}

static int default_route(int fd, uint32_t gateway)
{
	struct rtentry rt;
	char dev[] = NET_IF;

	memset(&rt, 0, sizeof(rt));
	set_sin(&rt.rt_dst, 0);
	set_sin(&rt.rt_genmask, 0);
	set_sin(&rt.rt_gateway, gateway);
	rt.rt_flags = RTF_UP | RTF_GATEWAY;
	rt.rt_dev = dev;
	if (ioctl(fd, SIOCADDRT, &rt) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

/* The gateway drops IPv6; turning it off keeps programs from trying it first and waiting. */
static int ipv6_off(void)
{
	static const char *const paths[] = { "/proc/sys/net/ipv6/conf/all/disable_ipv6",
					     "/proc/sys/net/ipv6/conf/default/disable_ipv6" };

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		_cleanup_close_ int fd = open(paths[i], O_WRONLY | O_CLOEXEC);

		if (fd < 0 && errno == ENOENT)
			continue; /* no IPv6 in this kernel */
		if (fd < 0 || write(fd, "1", 1) != 1)
			return -1;
	}
	return 0;
}

/* Runs one step, logs its failure and keeps the first errno. */
static void net_step(struct agent *a, int *first, int rc, const char *what)
{
	int e = errno;

	if (rc == 0)
		return;
	agent_log(a, true, "H_IDENTITY net: %s: %s", what, strerror(e));
	if (!*first)
		*first = e ? e : EIO;
}

static int links(struct agent *a, const struct proto_net *n, int *first)
{
	_cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0) {
		net_step(a, first, -1, "socket");
		return -1;
	}
	net_step(a, first, agent_net_link_up(fd, "lo"), "lo up");
	net_step(a, first, set_addr(fd, n->addr, n->prefix_len), NET_IF " address");
	net_step(a, first, agent_net_link_up(fd, NET_IF), NET_IF " up");
	net_step(a, first, default_route(fd, n->gateway), "default route");
	return 0;
}

/* Each step independent, as in identity.c: without a trust store (the busybox template has no
 * /etc/ssl) the link and DNS are still set. The CA state the children's environment follows is
 * what the trust store now holds. */
static bool net_same(const struct agent *a, const struct proto_net *n)
{
	return a->net_set && a->net_addr == n->addr && a->net_prefix == n->prefix_len &&
	       a->net_gateway == n->gateway && a->net_dns == n->dns;
}

/* The link, route and resolver as the host asks; a guest restored from one that set them
 * (every sandbox's are the same: its gateway is on its own TAP) keeps them: under TCG, every
 * kernel path a clone runs for the first time costs it milliseconds. */
static void net_links(struct agent *a, const struct proto_net *n, int *first)
{
	int before = *first;

	if (net_same(a, n))
		return;
	links(a, n, first);
	net_step(a, first, ipv6_off(), "disable IPv6");
	net_step(a, first, agent_net_write_resolv("", n->dns), "/etc/resolv.conf");
	a->net_set = *first == before;
	a->net_addr = n->addr;
	a->net_prefix = n->prefix_len;
	a->net_gateway = n->gateway;
	a->net_dns = n->dns;
}

/* The CA as it stands in n, written now: in place while no process the agent started runs (a
 * clone's start: nobody can read a half-written file), atomically (a new file renamed over)
 * otherwise. Under TCG in place saves a clone ~20 ms: ext4's create, rename and directory
 * paths run for the first time in the clone's QEMU. */
static int install_ca(struct agent *a, const char *pem)
{
	int rc = agent_net_install_ca("", pem, a->nprocs == 0);

	if (rc == 0)
		a->net_ca = pem[0] != '\0';
	return rc;
}

int agent_net_apply(struct agent *a, const struct proto_net *n)
{
	int first = 0;

	net_links(a, n, &first);
	/* The CA after the answer (agent_net_finish): writing it is the longest step of a clone's
	 * identity under TCG (~20 ms of cold file-system code), and nothing needs it before the
	 * next frame from the host is read, which it precedes. */
	free(a->ca_pending);
	a->ca_pending = strdup(n->ca_pem);
	if (!a->ca_pending)
		net_step(a, &first, install_ca(a, n->ca_pem), "install CA");
	errno = first;
	return first ? -1 : 0;
}

void agent_net_finish(struct agent *a)
{
	_cleanup_free_ char *pem = a->ca_pending;

	if (!pem)
		return;
	a->ca_pending = NULL;
	if (install_ca(a, pem) < 0)
		agent_log(a, true, "H_IDENTITY: network: install CA: %s", strerror(errno));
}
