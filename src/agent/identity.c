/* identity.c -- H_IDENTITY: clock, entropy and hostname of a cloned, restored or forked guest */
#include <errno.h>
#include <fcntl.h>
#include <linux/random.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "agent.h"
#include "cleanup.h"

enum proto_rc agent_identity_parse(const uint8_t *p, size_t n, struct proto_identity *id)
{
	struct proto_rd r;

	memset(id, 0, sizeof(*id));
	proto_rd_init(&r, p, n);
	id->realtime_ns = proto_rd_u64(&r);
	id->entropy_len = proto_rd_u32(&r);
	if (r.bad)
		return PROTO_E_TRUNCATED;
	if (id->entropy_len > PROTO_IDENTITY_MAX_ENTROPY)
		return PROTO_E_BAD_VALUE;
	id->entropy = proto_rd_bytes(&r, id->entropy_len);
	if (r.bad)
		return PROTO_E_TRUNCATED;
	id->hostname = proto_rd_str(&r);
	if (r.bad)
		return PROTO_E_NOT_TERMINATED;
	id->net_len = proto_rd_u32(&r);
	id->net = proto_rd_bytes(&r, id->net_len);
	if (r.bad)
		return PROTO_E_TRUNCATED;
	if (r.n != 0)
		return PROTO_E_TRAILING;
	if (id->hostname[0] && !agent_valid_hostname(id->hostname))
		return PROTO_E_BAD_VALUE;
	return PROTO_OK;
}

/* Mix the host's bytes into the input pool, credited in full (the host's randomness is what
 * makes this clone differ from its siblings), then reseed the CRNG at once: otherwise every
 * clone keeps drawing from the snapshot's CRNG state until the next scheduled reseed (up to a
 * minute away), and two clones would read the same /dev/urandom bytes. */
static int add_entropy(const uint8_t *bytes, uint32_t len)
{
	_cleanup_free_ struct rand_pool_info *info = malloc(sizeof(*info) + len);
	_cleanup_close_ int fd = -1;

	if (!info)
		return -1;
	info->entropy_count = (int)(8 * len);
	info->buf_size = (int)len;
	memcpy(info->buf, bytes, len);
	fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		fd = open("/dev/random", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || ioctl(fd, RNDADDENTROPY, info) < 0 || ioctl(fd, RNDRESEEDCRNG) < 0)
		return -1;
	return 0;
}

struct identity_result {
	uint32_t applied; /* PROTO_IDENTITY_* */
	int error;        /* errno of the first step that failed */
};

static void step(struct agent *a, struct identity_result *res, uint32_t bit, int rc,
		 const char *what)
{
	int e = errno;

	if (rc == 0) {
		res->applied |= bit;
		return;
	}
	agent_log(a, true, "H_IDENTITY: %s: %s", what, strerror(e));
	if (!res->error)
		res->error = e;
}

static void send_result(struct agent *a, const struct identity_result *res)
{
	struct proto_wr w;

	proto_wr_init(&w);
	proto_wr_u32(&w, res->applied);
	proto_wr_u32(&w, (uint32_t)res->error);
	if (!w.bad)
		agent_ctl_send(a, A_IDENTITY, 0, w.buf, w.len, false);
	proto_wr_free(&w);
}

/* The net payload is one step: a malformed one fails it (EINVAL) without touching anything. */
static void identity_net(struct agent *a, struct identity_result *res, const uint8_t *p, uint32_t n)
{
	struct proto_net net;
	enum proto_rc rc = proto_net_parse(p, n, &net);

	if (rc != PROTO_OK) {
		agent_log(a, true, "H_IDENTITY: net payload (%u bytes): %s", n, proto_strerror(rc));
		if (!res->error)
			res->error = EINVAL;
		return;
	}
	step(a, res, PROTO_IDENTITY_NET, agent_net_apply(a, &net), "network");
}

/* The steps are independent: one failing does not stop the next (a clone whose clock could not
 * be set still needs its own entropy).  Entropy, hostname and network only as PID 1, the clock only
 * where a->set_clock: a host test run must not feed, rename or re-time the host machine. */
void agent_identity_handle(struct agent *a, const uint8_t *payload, size_t len)
{
	struct identity_result res = { 0, 0 };
	struct proto_identity id;
	enum proto_rc rc = agent_identity_parse(payload, len, &id);

	if (rc != PROTO_OK) {
		agent_log(a, true, "H_IDENTITY (%zu bytes): %s: dropped", len, proto_strerror(rc));
		return;
	}
	if (id.net_len && a->pid1)
		identity_net(a, &res, id.net, id.net_len);
	else if (id.net_len)
		agent_log(a, true, "H_IDENTITY: %u bytes of network configuration ignored (not PID 1)",
			  id.net_len);
	if (id.realtime_ns && a->set_clock)
		step(a, &res, PROTO_IDENTITY_CLOCK, agent_set_clock(a, id.realtime_ns), "set clock");
	if (id.entropy_len && a->pid1)
		step(a, &res, PROTO_IDENTITY_ENTROPY, add_entropy(id.entropy, id.entropy_len),
		     "add entropy");
	if (id.hostname[0] && a->pid1)
		step(a, &res, PROTO_IDENTITY_HOSTNAME,
		     sethostname(id.hostname, strlen(id.hostname)), "sethostname");
	/* Failures were logged step by step; success needs no console line (see on_hello). */
	send_result(a, &res);
}
