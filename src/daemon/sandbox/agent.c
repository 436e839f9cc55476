/* agent.c -- host end of the framed virtio-serial channel to a sandbox's space-agent.
 *
 * QEMU listens on a unix socket for the port; we connect, say H_HELLO, and
 * the agent answers A_HELLO with its live channels. Everything the agent
 * sends is hostile input: frames are size-checked before they are buffered
 * whole, every field is read through a bounded reader, and a protocol
 * violation drops the connection (reconnect after a pause) rather than
 * trusting what follows.
 *
 * A guest is also bounded in what it makes us do (docs/design/guest-bounds.md): A_HELLO only
 * opens a connection; at most AGENT_FRAMES_PER_PASS frames are handled per callback before
 * other sandboxes get the loop; acknowledgements are sent once per pass; past
 * AGENT_OUTQ_HIGH bytes queued toward a guest that does not read, we stop reading it until
 * the queue drains below AGENT_OUTQ_LOW; and log lines it causes go through a token bucket. */
#include <event2/bufferevent.h>
#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include "log.h"
#include "proto.h"
#include "runtime.h"

/* Frames handled per read callback; the rest wait for the next loop turn. */
#define AGENT_FRAMES_PER_PASS 128
/* Bytes queued toward the guest at which we stop reading it, and at which we read again. */
#define AGENT_OUTQ_HIGH (1u << 20)
#define AGENT_OUTQ_LOW (256u << 10)
/* Input buffered from the guest at most: two whole frames. */
#define AGENT_INQ_HIGH (2 * (PROTO_HDR_SIZE + PROTO_MAX_PAYLOAD))
/* A reconnection without an A_HELLO this long is dropped and made again: an agent whose input
 * framing was lost (bytes of the old connection still in the port when the new H_HELLO came)
 * discards up to the next H_HELLO header, which only a new connection sends. One H_HELLO per
 * connection: a second would earn a second A_HELLO, a violation. Not while the first
 * connection waits for a booting guest: nothing old is in its port, and a slow boot would only
 * pile up H_HELLOs. */
#define AGENT_HELLO_TIMEOUT_S 10
/* Log lines a guest may cause: a burst, then a rate. */
#define AGENT_LOG_BURST 20
#define AGENT_LOG_PER_S 5

struct agent {
	struct sandbox *sb;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct bufferevent *bev;
	struct event *retry;
	struct event *more;        /* continues a read pass cut short by the frame budget */
	struct event *hello_wait;  /* AGENT_HELLO_TIMEOUT_S after connecting */
	bool ready;                /* A_HELLO received on this connection */
	bool was_ready;            /* ... on some connection to this VM */
	bool read_paused;          /* the queue toward the guest is over AGENT_OUTQ_HIGH */
	int failures;              /* consecutive failed connects / protocol errors */
	struct log_limit loglim;   /* lines the guest causes */
	/* One coalesced H_ACK for output of a channel no session owns (orphan_frame). */
	bool orphan_due;
	uint32_t orphan_chan;
	uint64_t orphan_off;
	/* A frame's handler may free the agent (a builder whose snapshot cannot be taken deletes
	 * its sandbox from inside the warm-up's answer): while a read pass runs, agent_free only
	 * closes the connection, and the pass frees the rest when it unwinds. */
	int reading;
	bool freed;
};

static void agent_connect(struct agent *a);

static void agent_schedule_retry(struct agent *a, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(a->retry, &tv);
}

static void agent_drop(struct agent *a, const char *why, int retry_ms)
{
	bool was_ready = a->ready;

	if (a->bev) {
		bufferevent_free(a->bev);
		a->bev = NULL;
	}
	event_del(a->more);
	event_del(a->hello_wait);
	a->ready = false;
	a->read_paused = false;
	a->orphan_due = false;
	if (was_ready)
		sandbox_agent_lost(a->sb, why);
	agent_schedule_retry(a, retry_ms);
}

void agent_resync(struct agent *a, const char *why)
{
	if (a && a->bev)
		agent_drop(a, why, 1000);
}

static void retry_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	agent_connect(arg);
}

int agent_send(struct agent *a, uint16_t type, uint32_t chan, const void *payload, size_t len)
{
	uint8_t hdr[PROTO_HDR_SIZE];
	struct evbuffer *out;

	if (!a || !a->bev || len > PROTO_MAX_PAYLOAD)
		return -1;
	out = bufferevent_get_output(a->bev);
	proto_put_hdr(hdr, (uint32_t)len, type, chan);
	if (evbuffer_add(out, hdr, sizeof(hdr)) < 0 || (len && evbuffer_add(out, payload, len) < 0))
		return -1;
	return 0;
}

size_t agent_queued(const struct agent *a)
{
	return a && a->bev ? evbuffer_get_length(bufferevent_get_output(a->bev)) : 0;
}

bool agent_ready(const struct agent *a)
{
	return a && a->ready;
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool agent_log_ok(struct agent *a)
{
	uint64_t dropped = 0;

	if (!a)
		return true;
	if (!log_limit_take(&a->loglim, mono_ms(), AGENT_LOG_PER_S, AGENT_LOG_BURST, &dropped))
		return false;
	if (dropped)
		log_warn("sandbox %s: %llu log lines caused by its guest were suppressed", a->sb->rec.id,
			 (unsigned long long)dropped);
	return true;
}

static void send_hello(struct agent *a)
{
	struct proto_wr w;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	proto_wr_init(&w);
	proto_wr_u32(&w, PROTO_VERSION);
	proto_wr_u64(&w, (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec);
	if (!w.bad)
		agent_send(a, H_HELLO, 0, w.buf, w.len);
	proto_wr_free(&w);
}

/* Keep a guest's log line printable and short before it reaches our log. */
static void log_guest_line(struct agent *a, const uint8_t *p, size_t n)
{
	char line[512];
	size_t i, j = 0;

	for (i = 0; i < n && j < sizeof(line) - 1; i++) {
		if (p[i] == '\0')
			break;
		line[j++] = (p[i] >= 0x20 && p[i] < 0x7f) ? (char)p[i] : '?';
	}
	line[j] = '\0';
	if (!agent_log_ok(a))
		return;
	log_info("sandbox %s: agent: %s", a->sb->rec.id, line);
}

static int handle_hello(struct agent *a, struct proto_rd *r)
{
	uint32_t version = proto_rd_u32(r), n = proto_rd_u32(r), i;
	uint32_t *chans, *states;
	uint64_t *offs;

	/* Only the first frame of a connection: a repeated A_HELLO would make the daemon resume
	 * every session again (a cheap way to load the loop) and is no agent's behaviour. */
	if (a->ready || r->bad || n > 65536 || (size_t)n * 16 != r->n)
		return -1;
	if (version != PROTO_VERSION) {
		log_warn("sandbox %s: agent speaks protocol %u, we speak %u", a->sb->rec.id, version,
			 PROTO_VERSION);
		return -1;
	}
	chans = calloc(n + 1, sizeof(*chans));
	states = calloc(n + 1, sizeof(*states));
	offs = calloc(n + 1, sizeof(*offs));
	if (!chans || !states || !offs) {
		free(chans);
		free(states);
		free(offs);
		return -1;
	}
	for (i = 0; i < n; i++) {
		chans[i] = proto_rd_u32(r);
		states[i] = proto_rd_u32(r);
		offs[i] = proto_rd_u64(r);
	}
	if (!r->bad) {
		event_del(a->hello_wait);
		a->ready = a->was_ready = true;
		a->failures = 0;
		sessions_agent_hello(a->sb, chans, states, offs, n);
		sandbox_agent_ready(a->sb);
	}
	free(chans);
	free(states);
	free(offs);
	return r->bad ? -1 : 0;
}

static void orphan_flush(struct agent *a)
{
	uint8_t buf[8];

	if (!a->orphan_due)
		return;
	a->orphan_due = false;
	for (int i = 0; i < 8; i++)
		buf[i] = (uint8_t)(a->orphan_off >> (8 * i));
	agent_send(a, H_ACK, a->orphan_chan, buf, 8);
}

/* A frame of a channel no session owns: a process a fork child or a clone
 * inherited from its parent's memory (it runs on in the guest, detached).
 * Its output is acknowledged (once per pass and channel) and dropped, so it
 * never blocks on a full window, and its exit released. Returns -1 on a
 * malformed frame. */
/* The first output of the first command after a start ends the start's record. */
static void first_output(struct sandbox *sb)
{
	struct start_phases *ph = &sb->phases;

	if (!ph->at_us[PH_UP] || ph->at_us[PH_FIRST])
		return;
	phases_mark(ph, PH_FIRST);
	log_info("sandbox %s: first output %.1f ms after its start began", sb->rec.id, phases_ms(ph, PH_FIRST));
}

static int orphan_frame(struct agent *a, const struct proto_hdr *h, struct proto_rd *r)
{
	uint64_t off;
	size_t n;

	if (h->type == A_DATA) {
		for (int i = 0; i < 8; i++)
			proto_rd_u8(r);
		off = proto_rd_u64(r);
		proto_rd_rest(r, &n);
		if (r->bad)
			return -1;
		if (a->orphan_due && a->orphan_chan != h->chan)
			orphan_flush(a);
		a->orphan_due = true;
		a->orphan_chan = h->chan;
		a->orphan_off = off + n;
	} else if (h->type == A_EXIT) {
		agent_send(a, H_RELEASE, h->chan, NULL, 0);
		sandbox_warm_exit(a->sb, h->chan);
	} else if (h->type == A_STARTED && (h->chan & PROTO_CHAN_DAEMON)) {
		/* A file operation or watch whose owner is gone (a restart, a fork, a clone): the
		 * agent says so once per connection; nobody will ever read it. */
		agent_send(a, H_SIGNAL, h->chan, (uint8_t[]){ 9, 0, 0, 0 }, 4);
	}
	return 0;
}

/* One whole frame from the agent. Returns -1 on a protocol violation. */
static int dispatch(struct agent *a, const struct proto_hdr *h, const uint8_t *p)
{
	struct proto_rd r;
	struct session *s = NULL;

	proto_rd_init(&r, p, h->len);
	log_debug("sandbox %s: agent frame type %u chan %u len %u", a->sb->rec.id, h->type, h->chan, h->len);
	/* Checked before the channel lookup: a frame for an unknown channel is
	 * ignored, but flags or a type the agent cannot send are violations. */
	if (h->flags != 0 || h->type < A_HELLO || h->type > A_IDENTITY)
		return -1;
	if (h->type == A_HELLO)
		return handle_hello(a, &r);
	if (!a->ready)
		return -1; /* nothing but HELLO before HELLO */
	if (h->type == A_LOG) {
		log_guest_line(a, p, h->len);
		return 0;
	}
	if (h->type == A_PONG) {
		uint64_t cookie = proto_rd_u64(&r);

		if (r.bad || h->chan != 0)
			return -1;
		sandbox_pong(a->sb, cookie);
		return 0;
	}
	if (h->type == A_IDENTITY) {
		uint32_t applied = proto_rd_u32(&r);
		int32_t e = (int32_t)proto_rd_u32(&r);

		if (r.bad || r.n != 0 || h->chan != 0)
			return -1;
		/* Only as the answer to our H_IDENTITY: unasked, it would only make us log. */
		if (!a->sb->identity_sent)
			return 0;
		sandbox_identity_applied(a->sb, applied, e > 0 && e < 4096 ? e : (e ? EIO : 0));
		return 0;
	}
	s = session_by_chan(a->sb, h->chan);
	if (!s)
		return orphan_frame(a, h, &r);
	switch (h->type) {
	case A_STARTED: {
		uint32_t pid = proto_rd_u32(&r);
		if (r.bad)
			return -1;
		session_on_started(s, pid);
		return 0;
	}
	case A_DATA: {
		uint8_t stream = proto_rd_u8(&r);
		size_t n;
		const uint8_t *data;
		uint64_t off;

		for (int i = 0; i < 7; i++)
			proto_rd_u8(&r);
		off = proto_rd_u64(&r);
		if (r.bad || (stream != PROTO_STDOUT && stream != PROTO_STDERR))
			return -1;
		data = proto_rd_rest(&r, &n);
		first_output(a->sb);
		session_on_data(s, stream, off, data, n);
		return 0;
	}
	case A_EXIT: {
		uint64_t fin = proto_rd_u64(&r);
		int32_t code = (int32_t)proto_rd_u32(&r), sig = (int32_t)proto_rd_u32(&r);
		if (r.bad || sig < 0 || sig > 128 || code < -1 || code > 255)
			return -1;
		session_on_exit(s, fin, code, sig);
		return 0;
	}
	case A_ERROR: {
		int32_t e = (int32_t)proto_rd_u32(&r);
		size_t n;
		const uint8_t *m = proto_rd_rest(&r, &n);
		char msg[256];
		size_t i, j = 0;

		if (r.bad)
			return -1;
		for (i = 0; i < n && j < sizeof(msg) - 1 && m[i]; i++)
			msg[j++] = (m[i] >= 0x20 && m[i] < 0x7f) ? (char)m[i] : '?';
		msg[j] = '\0';
		session_on_error(s, e, msg);
		return 0;
	}
	case A_STDIN_ACK: {
		uint64_t off = proto_rd_u64(&r);
		if (r.bad)
			return -1;
		session_on_stdin_ack(s, off);
		return 0;
	}
	default:
		return -1;
	}
}

/* Handles whole frames from the input, at most AGENT_FRAMES_PER_PASS. Returns 1 when whole
 * frames may remain, 0 when the input needs more bytes, -1 when the connection was dropped. */
static int read_frames(struct agent *a, struct evbuffer *in)
{
	for (int done = 0; done < AGENT_FRAMES_PER_PASS;) {
		struct proto_hdr h;
		uint8_t *p;
		size_t avail = evbuffer_get_length(in);
		enum proto_rc rc;

		if (avail < PROTO_HDR_SIZE)
			return 0;
		p = evbuffer_pullup(in, PROTO_HDR_SIZE);
		rc = proto_parse_hdr(p, avail, &h);
		/* A new connection may begin mid-frame (bytes the agent wrote to the
		 * port before we attached): until the agent's A_HELLO, skip byte by
		 * byte to the first header that is one. */
		if (!a->ready && (rc != PROTO_OK || h.type != A_HELLO || h.chan != 0 || h.flags != 0 ||
				  h.len < 8 || (h.len - 8) % 16 != 0)) {
			evbuffer_drain(in, 1);
			continue;
		}
		if (rc != PROTO_OK) {
			log_warn("sandbox %s: agent channel: %s; reconnecting", a->sb->rec.id,
				 proto_strerror(rc));
			agent_drop(a, "protocol error", 1000);
			return -1;
		}
		if (avail < PROTO_HDR_SIZE + (size_t)h.len)
			return 0;
		p = evbuffer_pullup(in, (ssize_t)(PROTO_HDR_SIZE + h.len));
		if (dispatch(a, &h, p + PROTO_HDR_SIZE) < 0) {
			log_warn("sandbox %s: agent channel: malformed frame type %u on channel %u; reconnecting",
				 a->sb->rec.id, h.type, h.chan);
			agent_drop(a, "protocol error", 1000);
			return -1;
		}
		/* dispatch may have dropped us (e.g. sandbox gone) */
		if (!a->bev)
			return -1;
		evbuffer_drain(in, PROTO_HDR_SIZE + h.len);
		done++;
	}
	return 1;
}

/* A zero timeout, not event_active: timers run after the next poll for I/O, so the rest of this
 * guest's frames wait until every other ready connection had its turn. */
static void continue_later(struct agent *a)
{
	struct timeval zero = { 0, 0 };

	evtimer_add(a->more, &zero);
}

/* One pass over what the guest sent: frames, then the acknowledgements they earned (one per
 * session), then back-pressure: a guest that does not read its port while it makes us answer
 * is not read either, until the queue toward it drains (write_cb). */
static void agent_destroy(struct agent *a);

static void read_pass(struct bufferevent *bev, struct agent *a)
{
	int more;

	if (a->read_paused)
		return;
	more = read_frames(a, bufferevent_get_input(bev));
	if (more < 0 || !a->bev)
		return;
	orphan_flush(a);
	sessions_flush_acks(a->sb);
	if (!a->bev)
		return;
	if (agent_queued(a) > AGENT_OUTQ_HIGH) {
		a->read_paused = true;
		bufferevent_disable(a->bev, EV_READ);
		bufferevent_setwatermark(a->bev, EV_WRITE, AGENT_OUTQ_LOW, 0);
		if (agent_log_ok(a))
			log_warn("sandbox %s: agent channel: %zu bytes queued toward a guest that does not read; "
				 "not reading it until they drain", a->sb->rec.id, agent_queued(a));
		return;
	}
	if (more)
		continue_later(a);
}

static void read_cb(struct bufferevent *bev, void *arg)
{
	struct agent *a = arg;

	a->reading++;
	read_pass(bev, a);
	if (--a->reading == 0 && a->freed)
		agent_destroy(a);
}

static void hello_wait_cb(evutil_socket_t fd, short what, void *arg)
{
	struct agent *a = arg;

	(void)fd;
	(void)what;
	if (a->ready || !a->bev)
		return;
	log_debug("sandbox %s: no A_HELLO %d s after connecting; connecting again", a->sb->rec.id,
		  AGENT_HELLO_TIMEOUT_S);
	agent_drop(a, "no A_HELLO", 100);
}

static void more_cb(evutil_socket_t fd, short what, void *arg)
{
	struct agent *a = arg;

	(void)fd;
	(void)what;
	if (a->bev)
		read_cb(a->bev, a);
}

/* The queue toward the guest drained below AGENT_OUTQ_LOW: read it again. */
static void write_cb(struct bufferevent *bev, void *arg)
{
	struct agent *a = arg;

	if (!a->read_paused || agent_queued(a) > AGENT_OUTQ_LOW)
		return;
	a->read_paused = false;
	bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
	bufferevent_enable(bev, EV_READ);
	continue_later(a);
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct agent *a = arg;

	(void)bev;
	if (what & BEV_EVENT_CONNECTED) {
		struct timeval tv = { AGENT_HELLO_TIMEOUT_S, 0 };

		send_hello(a);
		if (a->was_ready)
			evtimer_add(a->hello_wait, &tv);
		/* It may end the bring-up, and with it this agent: freed once this returns. */
		a->reading++;
		sandbox_agent_connected(a->sb);
		if (--a->reading == 0 && a->freed)
			agent_destroy(a);
		return;
	}
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		a->failures++;
		/* Before QEMU's socket exists connects are refused: poll quickly
		 * while booting, slowly once a live connection broke. */
		agent_drop(a, (what & BEV_EVENT_EOF) ? "agent channel closed" : "agent channel error",
			   a->failures < 100 ? 30 : 500);
	}
}

static void agent_connect(struct agent *a)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };

	if (a->bev)
		return;
	a->bev = bufferevent_socket_new(a->sb->d->base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (!a->bev) {
		agent_schedule_retry(a, 500);
		return;
	}
	bufferevent_setcb(a->bev, read_cb, write_cb, event_cb, a);
	bufferevent_setwatermark(a->bev, EV_READ, 0, AGENT_INQ_HIGH);
	bufferevent_enable(a->bev, EV_READ | EV_WRITE);
	memcpy(sun.sun_path, a->path, sizeof(sun.sun_path));
	if (bufferevent_socket_connect(a->bev, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		bufferevent_free(a->bev);
		a->bev = NULL;
		a->failures++;
		agent_schedule_retry(a, a->failures < 100 ? 30 : 500);
	}
}

static struct agent *agent_make(struct sandbox *sb, const char *sock_path, bool was_ready)
{
	struct agent *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->sb = sb;
	a->was_ready = was_ready;
	if (strlen(sock_path) >= sizeof(a->path)) {
		free(a);
		return NULL;
	}
	strcpy(a->path, sock_path);
	a->retry = evtimer_new(sb->d->base, retry_cb, a);
	a->more = event_new(sb->d->base, -1, 0, more_cb, a);
	a->hello_wait = evtimer_new(sb->d->base, hello_wait_cb, a);
	if (!a->retry || !a->more || !a->hello_wait) {
		if (a->retry)
			event_free(a->retry);
		if (a->more)
			event_free(a->more);
		if (a->hello_wait)
			event_free(a->hello_wait);
		free(a);
		return NULL;
	}
	agent_connect(a);
	return a;
}

struct agent *agent_new(struct sandbox *sb, const char *sock_path)
{
	return agent_make(sb, sock_path, false);
}

struct agent *agent_adopt(struct sandbox *sb, const char *sock_path)
{
	return agent_make(sb, sock_path, true);
}

void agent_free(struct agent *a)
{
	if (!a)
		return;
	if (a->reading) {
		if (a->bev)
			bufferevent_free(a->bev);
		a->bev = NULL;
		a->freed = true;
		return;
	}
	agent_destroy(a);
}

static void agent_destroy(struct agent *a)
{
	if (a->bev)
		bufferevent_free(a->bev);
	event_free(a->retry);
	event_free(a->more);
	event_free(a->hello_wait);
	free(a);
}
