/* msg.c -- host messages in, channel frames out: the agent side of agent-protocol.md.
 * Every frame from the host is checked for its channel, exact length and field ranges; a bad
 * one is logged (console and A_LOG, rate-limited) and dropped, never trusted. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "agent.h"

static const char *type_name(uint16_t t)
{
	switch (t) {
	case H_HELLO: return "H_HELLO";
	case H_EXEC: return "H_EXEC";
	case H_STDIN: return "H_STDIN";
	case H_STDIN_CLOSE: return "H_STDIN_CLOSE";
	case H_SIGNAL: return "H_SIGNAL";
	case H_ACK: return "H_ACK";
	case H_RELEASE: return "H_RELEASE";
	case H_SETTIME: return "H_SETTIME";
	case H_SHUTDOWN: return "H_SHUTDOWN";
	case H_PING: return "H_PING";
	case H_IDENTITY: return "H_IDENTITY";
	case H_OPEN: return "H_OPEN";
	case H_RESIZE: return "H_RESIZE";
	default: return "unknown";
	}
}

void agent_handle_badframe(void *ctx, enum proto_rc rc)
{
	struct agent *a = ctx;

	agent_log(a, true, "framing lost (%s): discarding input until an H_HELLO header",
		  proto_strerror(rc));
	agent_send_error(a, 0, EPROTO, "framing lost: %s; send H_HELLO or reconnect",
			 proto_strerror(rc));
}

static void send_hello(struct agent *a)
{
	struct proto_wr w;
	struct agent_proc *p;
	uint32_t n = 0;

	for (p = a->procs; p; p = p->next)
		n++;
	proto_wr_init(&w);
	proto_wr_u32(&w, PROTO_VERSION);
	proto_wr_u32(&w, n);
	for (p = a->procs; p; p = p->next) {
		proto_wr_u32(&w, p->id);
		proto_wr_u32(&w, p->state == P_DONE ? PROTO_CHAN_EXITED : PROTO_CHAN_RUNNING);
		/* stdin received so far: where the host resumes stdin after it restarted */
		proto_wr_u64(&w, p->in.received);
	}
	if (!w.bad)
		agent_ctl_send(a, A_HELLO, 0, w.buf, w.len, false);
	proto_wr_free(&w);
}

static void on_hello(struct agent *a, struct proto_rd *r)
{
	uint32_t version = proto_rd_u32(r);
	uint64_t ns = proto_rd_u64(r);

	/* Later versions may append fields to H_HELLO: trailing bytes are allowed here only. */
	if (r->bad) {
		agent_log(a, true, "H_HELLO: %s", proto_strerror(PROTO_E_TRUNCATED));
		return;
	}
	if (version != PROTO_VERSION) {
		a->port.hello = false;
		agent_send_error(a, 0, EPROTONOSUPPORT,
				 "protocol version %u not supported (agent speaks %u)", version,
				 PROTO_VERSION);
		return;
	}
	if (ns && agent_set_clock(a, ns) < 0)
		agent_log(a, false, "set clock: %s", strerror(errno));
	a->port.hello = true;
	/* A_HELLO goes out before any channel frame (control frames are sent first), then every
	 * channel resends from its last acked offset: the host may have lost unacked bytes. */
	send_hello(a);
	agent_proc_rewind_all(a);
	/* No console line: the first one after a restore costs a clone ~10 ms under TCG, and the
	 * A_HELLO tells the host as much. */
}

static bool want_len(struct agent *a, const struct proto_hdr *h, size_t n)
{
	if (h->len == n)
		return true;
	agent_log(a, true, "%s chan %u: payload of %u bytes, expected %zu: dropped",
		  type_name(h->type), h->chan, h->len, n);
	return false;
}

/* Frames addressed to a process channel; p is NULL when the channel does not exist. */
static void on_chan_frame(struct agent *a, const struct proto_hdr *h, const uint8_t *payload,
			  struct agent_proc *p)
{
	struct proto_rd r;

	proto_rd_init(&r, payload, h->len);
	if (h->type == H_EXEC || h->type == H_OPEN) {
		uint32_t kind = PROTO_KIND_PROC;
		const uint8_t *body = payload;
		size_t len = h->len;
		enum proto_rc rc;

		if (p) {
			/* The channel lives on: report on the control channel, not on it. */
			agent_send_error(a, 0, EEXIST, "%s chan %u: channel in use",
					 type_name(h->type), h->chan);
			return;
		}
		if (a->nprocs >= AGENT_MAX_CHANS) {
			agent_send_error(a, h->chan, EMFILE, "exec: too many channels (max %u)",
					 AGENT_MAX_CHANS);
			return;
		}
		/* H_EXEC is H_OPEN of kind process. */
		if (h->type == H_OPEN) {
			rc = agent_open_parse(payload, h->len, &kind, &body, &len);
			if (rc != PROTO_OK) {
				agent_send_error(a, h->chan, EINVAL, "open: bad H_OPEN: %s",
						 proto_strerror(rc));
				return;
			}
		}
		agent_chan_open(a, h->chan, kind, body, len);
		return;
	}
	if (!p) {
		agent_log(a, true, "%s for unknown chan %u: dropped", type_name(h->type), h->chan);
		return;
	}
	switch (h->type) {
	case H_STDIN: {
		uint64_t off = proto_rd_u64(&r);
		size_t n;
		const uint8_t *d = proto_rd_rest(&r, &n);

		if (r.bad) {
			agent_log(a, true, "H_STDIN chan %u: truncated: dropped", h->chan);
			return;
		}
		agent_proc_stdin(a, p, off, d, n);
		return;
	}
	case H_STDIN_CLOSE:
		if (want_len(a, h, 0))
			agent_proc_stdin_close(a, p);
		return;
	case H_SIGNAL: {
		uint32_t sig;

		if (!want_len(a, h, 4))
			return;
		sig = proto_rd_u32(&r);
		if (sig < 1 || sig > 64) {
			agent_log(a, true, "H_SIGNAL chan %u: bad signal %u", h->chan, sig);
			return;
		}
		if (agent_proc_signal(a, p, (int)sig) < 0)
			agent_log(a, true, "H_SIGNAL %u chan %u: %s", sig, h->chan, strerror(errno));
		return;
	}
	case H_ACK:
		if (want_len(a, h, 8))
			agent_proc_ack(a, p, proto_rd_u64(&r));
		return;
	case H_RESIZE: {
		uint16_t rows = 0, cols = 0;
		enum proto_rc rc = agent_resize_parse(payload, h->len, &rows, &cols);

		if (rc != PROTO_OK) {
			agent_log(a, true, "H_RESIZE chan %u: %s (rows and cols are 1..%u): dropped",
				  h->chan, proto_strerror(rc), PROTO_PTY_MAX_DIM);
			return;
		}
		if (!p->pty) {
			agent_log(a, true, "H_RESIZE chan %u: not a pty: dropped", h->chan);
			return;
		}
		if (agent_proc_resize(a, p, rows, cols) < 0)
			agent_log(a, true, "H_RESIZE chan %u: %s: dropped", h->chan, strerror(errno));
		return;
	}
	case H_RELEASE:
		if (!want_len(a, h, 0))
			return;
		if (p->state != P_DONE) {
			agent_log(a, true, "H_RELEASE chan %u: still running: ignored", h->chan);
			return;
		}
		agent_proc_release(a, p);
		return;
	default:
		agent_log(a, true, "type %u (%s) on chan %u: dropped", h->type, type_name(h->type),
			  h->chan);
	}
}

void agent_handle_frame(void *ctx, const struct proto_hdr *h, const uint8_t *payload)
{
	struct agent *a = ctx;
	struct proto_rd r;

	proto_rd_init(&r, payload, h->len);
	if (h->flags != 0) {
		agent_log(a, true, "%s chan %u: flags 0x%x set: dropped", type_name(h->type),
			  h->chan, h->flags);
		return;
	}
	if (!a->port.hello && h->type != H_HELLO) {
		agent_log(a, false, "%s before H_HELLO: dropped", type_name(h->type));
		return;
	}
	switch (h->type) {
	case H_HELLO:
	case H_SETTIME:
	case H_SHUTDOWN:
	case H_PING:
	case H_IDENTITY:
		if (h->chan != 0) {
			agent_log(a, true, "%s on chan %u (must be 0): dropped", type_name(h->type),
				  h->chan);
			return;
		}
		break;
	case H_EXEC:
	case H_OPEN:
	case H_RESIZE:
	case H_STDIN:
	case H_STDIN_CLOSE:
	case H_SIGNAL:
	case H_ACK:
	case H_RELEASE:
		if (h->chan == 0) {
			agent_log(a, true, "%s on chan 0: dropped", type_name(h->type));
			return;
		}
		on_chan_frame(a, h, payload, agent_proc_find(a, h->chan));
		return;
	default:
		agent_log(a, true, "unknown frame type %u (chan %u, %u bytes): dropped", h->type,
			  h->chan, h->len);
		return;
	}
	switch (h->type) {
	case H_HELLO:
		on_hello(a, &r);
		return;
	case H_SETTIME:
		if (want_len(a, h, 8) && agent_set_clock(a, proto_rd_u64(&r)) < 0)
			agent_log(a, true, "H_SETTIME: %s", strerror(errno));
		return;
	case H_PING: {
		uint64_t cookie;
		uint8_t out[8];
		int i;

		if (!want_len(a, h, 8))
			return;
		cookie = proto_rd_u64(&r);
		for (i = 0; i < 8; i++)
			out[i] = (uint8_t)(cookie >> (8 * i));
		agent_ctl_send(a, A_PONG, 0, out, 8, false);
		return;
	}
	case H_IDENTITY:
		agent_identity_handle(a, payload, h->len);
		return;
	case H_SHUTDOWN: {
		uint32_t mode;

		if (!want_len(a, h, 4))
			return;
		mode = proto_rd_u32(&r);
		if (mode != PROTO_SHUTDOWN_NOW && mode != PROTO_SHUTDOWN_CLEAN) {
			agent_log(a, true, "H_SHUTDOWN: unknown mode %u: dropped", mode);
			return;
		}
		agent_log(a, false, "H_SHUTDOWN mode %u", mode);
		agent_poweroff(a, mode);
	}
	default:
		return;
	}
}

static void put_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static void put_u64(uint8_t *p, uint64_t v)
{
	put_u32(p, (uint32_t)v);
	put_u32(p + 4, (uint32_t)(v >> 32));
}

size_t agent_proc_next_frame(struct agent *a, struct agent_proc *p, uint8_t *out, size_t cap)
{
	uint8_t *pl = out + PROTO_HDR_SIZE;

	(void)a;
	if (p->state == P_STARTING || p->state == P_FREED || cap < PROTO_HDR_SIZE + 24)
		return 0;
	if (!p->started_sent) {
		put_u32(pl, (uint32_t)p->pid);
		proto_put_hdr(out, 4, A_STARTED, p->id);
		p->started_sent = true;
		return PROTO_HDR_SIZE + 4;
	}
	if (p->out.sent < p->out.tail) {
		size_t max = cap - PROTO_HDR_SIZE - 16, n;
		uint8_t stream = 0;
		uint64_t off = 0;

		if (max > PROTO_MAX_CHUNK)
			max = PROTO_MAX_CHUNK;
		n = agent_obuf_take(&p->out, max, pl + 16, &stream, &off);
		if (n) {
			memset(pl, 0, 8);
			pl[0] = stream;
			put_u64(pl + 8, off);
			proto_put_hdr(out, (uint32_t)(16 + n), A_DATA, p->id);
			return PROTO_HDR_SIZE + 16 + n;
		}
	}
	if (p->in.consumed != p->stdin_ack_sent ||
	    (p->stdin_ack_forced && (p->has_stdin || p->in.received))) {
		put_u64(pl, p->in.consumed);
		proto_put_hdr(out, 8, A_STDIN_ACK, p->id);
		p->stdin_ack_sent = p->in.consumed;
		p->stdin_ack_forced = false;
		return PROTO_HDR_SIZE + 8;
	}
	if (p->state == P_DONE && !p->exit_sent && p->out.sent == p->out.tail) {
		int code = -1, sig = 0;

		if (WIFEXITED(p->status))
			code = WEXITSTATUS(p->status);
		else if (WIFSIGNALED(p->status))
			sig = WTERMSIG(p->status);
		put_u64(pl, p->out.tail);
		put_u32(pl + 8, (uint32_t)code);
		put_u32(pl + 12, (uint32_t)sig);
		proto_put_hdr(out, 16, A_EXIT, p->id);
		p->exit_sent = true;
		return PROTO_HDR_SIZE + 16;
	}
	return 0;
}
