/* proto.c -- framing and bounded encoding for the host<->agent channel */
#include "proto.h"

#include <stdlib.h>
#include <string.h>

const char *proto_strerror(enum proto_rc rc)
{
	switch (rc) {
	case PROTO_OK:
		return "ok";
	case PROTO_NEED_MORE:
		return "incomplete frame";
	case PROTO_E_TOO_BIG:
		return "frame larger than the protocol allows";
	case PROTO_E_TRUNCATED:
		return "payload shorter than its fields";
	case PROTO_E_NOT_TERMINATED:
		return "string not NUL-terminated";
	case PROTO_E_TOO_MANY:
		return "too many arguments or variables";
	case PROTO_E_BAD_VALUE:
		return "field value out of range";
	case PROTO_E_TRAILING:
		return "payload longer than its fields";
	}
	return "unknown protocol error";
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = v & 0xff;
	p[1] = (v >> 8) & 0xff;
	p[2] = (v >> 16) & 0xff;
	p[3] = (v >> 24) & 0xff;
}

enum proto_rc proto_parse_hdr(const uint8_t *buf, size_t n, struct proto_hdr *hdr)
{
	if (n < PROTO_HDR_SIZE)
		return PROTO_NEED_MORE;
	hdr->len = get_le32(buf);
	hdr->type = (uint16_t)(buf[4] | buf[5] << 8);
	hdr->flags = (uint16_t)(buf[6] | buf[7] << 8);
	hdr->chan = get_le32(buf + 8);
	if (hdr->len > PROTO_MAX_PAYLOAD)
		return PROTO_E_TOO_BIG;
	return PROTO_OK;
}

void proto_put_hdr(uint8_t out[PROTO_HDR_SIZE], uint32_t len, uint16_t type, uint32_t chan)
{
	put_le32(out, len);
	out[4] = type & 0xff;
	out[5] = type >> 8;
	out[6] = 0;
	out[7] = 0;
	put_le32(out + 8, chan);
}

void proto_rd_init(struct proto_rd *r, const void *p, size_t n)
{
	r->p = p;
	r->n = n;
	r->bad = false;
}

static const uint8_t *rd_take(struct proto_rd *r, size_t n)
{
	const uint8_t *p;

	if (r->bad || r->n < n) {
		r->bad = true;
		return NULL;
	}
	p = r->p;
	r->p += n;
	r->n -= n;
	return p;
}

uint8_t proto_rd_u8(struct proto_rd *r)
{
	const uint8_t *p = rd_take(r, 1);
	return p ? p[0] : 0;
}

uint32_t proto_rd_u32(struct proto_rd *r)
{
	const uint8_t *p = rd_take(r, 4);
	return p ? get_le32(p) : 0;
}

uint64_t proto_rd_u64(struct proto_rd *r)
{
	const uint8_t *p = rd_take(r, 8);
	return p ? (uint64_t)get_le32(p) | (uint64_t)get_le32(p + 4) << 32 : 0;
}

const char *proto_rd_str(struct proto_rd *r)
{
	const uint8_t *nul;
	const char *s;

	if (r->bad)
		return NULL;
	nul = memchr(r->p, '\0', r->n);
	if (!nul) {
		r->bad = true;
		return NULL;
	}
	s = (const char *)r->p;
	rd_take(r, (size_t)(nul - r->p) + 1);
	return s;
}

const uint8_t *proto_rd_bytes(struct proto_rd *r, size_t n)
{
	return rd_take(r, n);
}

const uint8_t *proto_rd_rest(struct proto_rd *r, size_t *len)
{
	const uint8_t *p = r->p;

	*len = r->bad ? 0 : r->n;
	r->p += *len;
	r->n -= *len;
	return p;
}

void proto_wr_init(struct proto_wr *w)
{
	memset(w, 0, sizeof(*w));
}

void proto_wr_free(struct proto_wr *w)
{
	free(w->buf);
	memset(w, 0, sizeof(*w));
}

void proto_wr_bytes(struct proto_wr *w, const void *p, size_t n)
{
	if (w->bad)
		return;
	if (w->len + n > PROTO_MAX_PAYLOAD) {
		w->bad = true;
		return;
	}
	if (w->len + n > w->cap) {
		size_t cap = w->cap ? w->cap : 256;
		uint8_t *nb;

		while (cap < w->len + n)
			cap *= 2;
		nb = realloc(w->buf, cap);
		if (!nb) {
			w->bad = true;
			return;
		}
		w->buf = nb;
		w->cap = cap;
	}
	if (n)
		memcpy(w->buf + w->len, p, n);
	w->len += n;
}

void proto_wr_u8(struct proto_wr *w, uint8_t v)
{
	proto_wr_bytes(w, &v, 1);
}

void proto_wr_u32(struct proto_wr *w, uint32_t v)
{
	uint8_t b[4];

	put_le32(b, v);
	proto_wr_bytes(w, b, 4);
}

void proto_wr_u64(struct proto_wr *w, uint64_t v)
{
	proto_wr_u32(w, (uint32_t)v);
	proto_wr_u32(w, (uint32_t)(v >> 32));
}

void proto_wr_str(struct proto_wr *w, const char *s)
{
	proto_wr_bytes(w, s ? s : "", strlen(s ? s : "") + 1);
}

int proto_exec_encode(struct proto_wr *w, const struct proto_exec *x)
{
	uint32_t i;

	if (x->argc < 1 || x->argc > PROTO_EXEC_MAX_ARGS || x->envc > PROTO_EXEC_MAX_ARGS)
		return -1;
	proto_wr_u32(w, x->flags);
	proto_wr_u32(w, x->uid);
	proto_wr_u32(w, x->gid);
	proto_wr_u32(w, x->argc);
	proto_wr_u32(w, x->envc);
	proto_wr_str(w, x->user);
	proto_wr_str(w, x->cwd);
	for (i = 0; i < x->argc; i++)
		proto_wr_str(w, x->argv[i]);
	for (i = 0; i < x->envc; i++)
		proto_wr_str(w, x->envp[i]);
	return w->bad ? -1 : 0;
}

enum proto_rc proto_exec_decode(const uint8_t *p, size_t n, struct proto_exec *x)
{
	struct proto_rd r;
	uint32_t i;

	proto_rd_init(&r, p, n);
	x->flags = proto_rd_u32(&r);
	x->uid = proto_rd_u32(&r);
	x->gid = proto_rd_u32(&r);
	x->argc = proto_rd_u32(&r);
	x->envc = proto_rd_u32(&r);
	if (r.bad)
		return PROTO_E_TRUNCATED;
	if (x->argc < 1)
		return PROTO_E_BAD_VALUE;
	if (x->argc > PROTO_EXEC_MAX_ARGS || x->envc > PROTO_EXEC_MAX_ARGS)
		return PROTO_E_TOO_MANY;
	x->user = proto_rd_str(&r);
	x->cwd = proto_rd_str(&r);
	for (i = 0; i < x->argc && !r.bad; i++)
		x->argv[i] = proto_rd_str(&r);
	x->argv[x->argc] = NULL;
	for (i = 0; i < x->envc && !r.bad; i++)
		x->envp[i] = proto_rd_str(&r);
	x->envp[x->envc] = NULL;
	if (r.bad)
		return PROTO_E_NOT_TERMINATED;
	return PROTO_OK;
}

int proto_identity_encode(struct proto_wr *w, const struct proto_identity *id)
{
	if (id->entropy_len > PROTO_IDENTITY_MAX_ENTROPY || (id->entropy_len && !id->entropy) ||
	    (id->net_len && !id->net))
		return -1;
	proto_wr_u64(w, id->realtime_ns);
	proto_wr_u32(w, id->entropy_len);
	proto_wr_bytes(w, id->entropy, id->entropy_len);
	proto_wr_str(w, id->hostname);
	proto_wr_u32(w, id->net_len);
	proto_wr_bytes(w, id->net, id->net_len);
	return w->bad ? -1 : 0;
}

int proto_net_encode(struct proto_wr *w, const struct proto_net *n)
{
	const char *ca = n->ca_pem ? n->ca_pem : "";

	if (strlen(ca) > PROTO_NET_MAX_CA)
		return -1;
	proto_wr_u32(w, PROTO_NET_VERSION);
	proto_wr_u32(w, n->addr);
	proto_wr_u32(w, n->prefix_len);
	proto_wr_u32(w, n->gateway);
	proto_wr_u32(w, n->dns);
	proto_wr_str(w, ca);
	return w->bad ? -1 : 0;
}

enum proto_rc proto_net_parse(const uint8_t *p, size_t n, struct proto_net *out)
{
	struct proto_rd r;
	uint32_t version;

	proto_rd_init(&r, p, n);
	version = proto_rd_u32(&r);
	if (r.bad)
		return PROTO_E_TRUNCATED;
	if (version != PROTO_NET_VERSION) /* a newer layout: nothing after this is ours to read */
		return PROTO_E_BAD_VALUE;
	out->addr = proto_rd_u32(&r);
	out->prefix_len = proto_rd_u32(&r);
	out->gateway = proto_rd_u32(&r);
	out->dns = proto_rd_u32(&r);
	if (r.bad)
		return PROTO_E_TRUNCATED;
	if (out->prefix_len < 1 || out->prefix_len > 32)
		return PROTO_E_BAD_VALUE;
	if (r.n == 0)
		return PROTO_E_TRUNCATED;
	out->ca_pem = proto_rd_str(&r);
	if (!out->ca_pem)
		return PROTO_E_NOT_TERMINATED;
	if (strlen(out->ca_pem) > PROTO_NET_MAX_CA)
		return PROTO_E_BAD_VALUE;
	if (r.n)
		return PROTO_E_TRAILING;
	return PROTO_OK;
}
