/* identity.c -- what makes each VM itself after a clone, restore or fork: the wall clock, fresh
 * entropy (two clones of one snapshot must never share random state), its hostname, and the
 * network configuration hook */
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "egress/rules.h"
#include "log.h"
#include "runtime.h"

#define IDENTITY_ENTROPY_BYTES 64

int identity_net_payload(struct proto_wr *net, const char *ca_pem)
{
	struct proto_net n = {
		.addr = EGRESS_GUEST_ADDR,
		.prefix_len = EGRESS_PREFIX_LEN,
		.gateway = EGRESS_GW_ADDR,
		.dns = EGRESS_GW_ADDR, /* the gateway answers DNS on its own address */
		.ca_pem = ca_pem,
	};

	return proto_net_encode(net, &n);
}

/* The guest's network configuration, appended to H_IDENTITY on every start, restore, clone
 * and fork: its link, route and resolver, and this sandbox's CA (a fork child's or clone's
 * own, replacing what its snapshot's guest trusted). A VM without the network device gets
 * none (empty: the agent leaves the network alone). */
static void identity_net(const struct sandbox *sb, struct proto_wr *net)
{
	if (!sb->net_dev)
		return;
	char *ca = egress_ca_cert(sb);
	if (!ca)
		log_warn("sandbox %s: no egress CA to give its guest", sb->rec.id);
	if (identity_net_payload(net, ca ? ca : "") < 0)
		net->bad = true;
	free(ca);
}

int identity_send(struct sandbox *sb, space_err *err)
{
	struct proto_identity id = { 0 };
	unsigned char entropy[IDENTITY_ENTROPY_BYTES];
	struct proto_wr w, net;
	struct timespec ts;
	int rc = 0;

	if (RAND_bytes(entropy, sizeof(entropy)) != 1)
		return err_set(err, EIO, "sandbox %s: no host randomness for the guest", sb->rec.id);
	clock_gettime(CLOCK_REALTIME, &ts);
	proto_wr_init(&net);
	identity_net(sb, &net);
	id.realtime_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	id.entropy = entropy;
	id.entropy_len = sizeof(entropy);
	id.hostname = sb->rec.id;
	id.net = net.buf;
	id.net_len = (uint32_t)net.len;
	proto_wr_init(&w);
	if (net.bad || proto_identity_encode(&w, &id) < 0 || w.bad)
		rc = err_set(err, EIO, "sandbox %s: encoding its identity failed", sb->rec.id);
	else if (agent_send(sb->agent, H_IDENTITY, 0, w.buf, w.len) < 0)
		rc = err_set(err, EIO, "sandbox %s: sending its identity failed", sb->rec.id);
	explicit_bzero(entropy, sizeof(entropy));
	if (w.buf)
		explicit_bzero(w.buf, w.len);
	proto_wr_free(&w);
	proto_wr_free(&net);
	return rc;
}
