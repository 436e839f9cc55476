/* test_daemon_agent.c -- the host end of the agent channel (src/daemon/agent.c) against a
 * HOSTILE agent played by this test.
 *
 * A minimal spaced (event_base, a temp state dir, a real SQLite store) with one sandbox in
 * state running and one running session on channel 7. We listen on a unix socket where
 * QEMU's chardev would be, agent_new() connects, and we: read its H_HELLO; send garbage
 * before A_HELLO (skipped); a valid A_HELLO (the connection becomes ready); valid frames
 * (output reaches the session's spool and is acknowledged with H_ACK, A_STARTED sets the pid,
 * frames for unknown channels are ignored); then one malformed frame per connection
 * (oversized length, bad stream, out-of-range exit, truncated payloads, unknown type, flags
 * set, a second HELLO of another version, a peer that hangs up mid-frame). Each must make the
 * daemon drop the connection (EOF on our side) without crashing (ASan/UBSan build) and
 * reconnect (we accept again and see a new H_HELLO). Finally a valid A_EXIT finishes the
 * session and the daemon answers H_RELEASE.
 *
 * The bounds a hostile guest meets (docs/design/guest-bounds.md): with no reader the output
 * window stops at the lag bound plus PROTO_OUT_WINDOW and neither a repeated A_HELLO (dropped)
 * nor reconnecting resets it; A_STARTED is persisted once; a guest that floods frames and
 * never reads its port is no longer read once 1 MiB is queued toward it. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "daemon/daemon.h"
#include "daemon/sandbox/runtime.h"
#include "daemon/sandbox/spool.h"
#include "daemon/store/store.h"
#include "harness.h"
#include "log.h"
#include "proto.h"

#define CHAN 7

static struct spaced d;
static struct sandbox sb;
static struct session *sess;
static int lfd = -1;
static char tmpdir[64], sock_path[128];

/* ---- helpers: time, the loop, frames ---- */

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs the daemon's loop for a short step. */
static void step(void)
{
	event_base_loop(d.base, EVLOOP_NONBLOCK);
	usleep(2000);
}

static void le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* Writes all of buf to fd (blocking socket), stepping the loop so the daemon keeps reading. */
static bool send_all(int fd, const void *buf, size_t n)
{
	const uint8_t *p = buf;
	int64_t end = mono_ms() + 5000;

	while (n) {
		ssize_t w = send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (w > 0) {
			p += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return false;
		if (mono_ms() > end)
			return false;
		step();
	}
	return true;
}

/* A frame with an arbitrary header (len as claimed, flags as given) and payload bytes. */
static bool send_raw(int fd, uint32_t len, uint16_t type, uint16_t flags, uint32_t chan,
		     const void *payload, size_t n)
{
	uint8_t hdr[PROTO_HDR_SIZE];

	le32(hdr, len);
	hdr[4] = (uint8_t)type;
	hdr[5] = (uint8_t)(type >> 8);
	hdr[6] = (uint8_t)flags;
	hdr[7] = (uint8_t)(flags >> 8);
	le32(hdr + 8, chan);
	return send_all(fd, hdr, sizeof(hdr)) && (!n || send_all(fd, payload, n));
}

static bool send_frame(int fd, uint16_t type, uint32_t chan, const void *payload, size_t n)
{
	return send_raw(fd, (uint32_t)n, type, 0, chan, payload, n);
}

static bool send_hello(int fd, uint32_t version, uint32_t nchan, uint32_t chan, uint32_t state)
{
	uint8_t p[8 + 16];

	le32(p, version);
	le32(p + 4, nchan);
	le32(p + 8, chan);
	le32(p + 12, state);
	le64(p + 16, 0);
	return send_frame(fd, A_HELLO, 0, p, 8 + 16 * (size_t)nchan);
}

static bool send_data(int fd, uint32_t chan, uint8_t stream, uint64_t off, const char *s)
{
	uint8_t p[16 + 256];
	size_t n = strlen(s);

	memset(p, 0, 16);
	p[0] = stream;
	le64(p + 8, off);
	memcpy(p + 16, s, n);
	return send_frame(fd, A_DATA, chan, p, 16 + n);
}

static bool send_exit(int fd, uint32_t chan, uint64_t fin, int32_t code, int32_t sig)
{
	uint8_t p[16];

	le64(p, fin);
	le32(p + 8, (uint32_t)code);
	le32(p + 12, (uint32_t)sig);
	return send_frame(fd, A_EXIT, chan, p, sizeof(p));
}

/* What the daemon sent us, in frames. */
struct inbox {
	uint8_t buf[1 << 18];
	size_t n;
	bool eof;
};

/* Reads what is there (non-blocking) into in; notes EOF or a reset. */
static void drain(int fd, struct inbox *in)
{
	for (;;) {
		ssize_t r;

		if (in->n == sizeof(in->buf))
			in->n = 0; /* more than a test needs: forget it */
		r = recv(fd, in->buf + in->n, sizeof(in->buf) - in->n, MSG_DONTWAIT);
		if (r > 0) {
			in->n += (size_t)r;
			continue;
		}
		if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			in->eof = true;
		return;
	}
}

/* Pops the next whole frame of the inbox into h/payload (payload up to 64 bytes kept). */
static bool pop_frame(struct inbox *in, struct proto_hdr *h, uint8_t *payload, size_t cap)
{
	if (in->n < PROTO_HDR_SIZE || proto_parse_hdr(in->buf, in->n, h) != PROTO_OK ||
	    in->n < PROTO_HDR_SIZE + (size_t)h->len)
		return false;
	memcpy(payload, in->buf + PROTO_HDR_SIZE, h->len < cap ? h->len : cap);
	memmove(in->buf, in->buf + PROTO_HDR_SIZE + h->len, in->n - PROTO_HDR_SIZE - h->len);
	in->n -= PROTO_HDR_SIZE + h->len;
	return true;
}

/* Steps the loop until a frame of `type` arrives (others are discarded) or ms pass. */
static bool wait_frame(int fd, struct inbox *in, uint16_t type, struct proto_hdr *h, uint8_t *payload,
		       size_t cap, int ms)
{
	int64_t end = mono_ms() + ms;

	while (mono_ms() < end) {
		step();
		drain(fd, in);
		while (pop_frame(in, h, payload, cap))
			if (h->type == type)
				return true;
		if (in->eof)
			return false;
	}
	return false;
}

/* Steps the loop until our end sees EOF (the daemon dropped us) or ms pass. */
static bool wait_eof(int fd, struct inbox *in, int ms)
{
	int64_t end = mono_ms() + ms;

	while (mono_ms() < end) {
		step();
		drain(fd, in);
		in->n = 0;
		if (in->eof)
			return true;
	}
	return false;
}

/* Steps the loop for ms; true if the connection is still open afterwards. */
static bool stays_open(int fd, struct inbox *in, int ms)
{
	int64_t end = mono_ms() + ms;

	while (mono_ms() < end) {
		step();
		drain(fd, in);
		if (in->eof)
			return false;
	}
	return true;
}

/* Accepts the daemon's (re)connection within ms; -1 if it did not come. */
static int accept_agent(int ms)
{
	int64_t end = mono_ms() + ms;

	while (mono_ms() < end) {
		int fd = accept(lfd, NULL, NULL);

		if (fd >= 0)
			return fd;
		step();
	}
	return -1;
}

/* Accepts a connection and checks its H_HELLO (version 1, a plausible clock). */
static int connect_and_hello(struct inbox *in, const char *what)
{
	struct proto_hdr h;
	uint8_t p[64];
	int fd = accept_agent(5000);
	bool ok;

	memset(in, 0, sizeof(*in));
	if (!CHECK(fd >= 0, "%s: the daemon connects to the agent socket", what))
		return -1;
	ok = wait_frame(fd, in, H_HELLO, &h, p, sizeof(p), 3000);
	CHECK(ok && h.chan == 0 && h.len >= 12 && get32(p) == PROTO_VERSION &&
		      get64(p + 4) > 1500000000ull * 1000000000ull,
	      "%s: the daemon says H_HELLO first (version 1, its clock)", what);
	return fd;
}

/* A connection made ready: garbage is not needed again, just a HELLO that knows CHAN. */
static int ready_conn(struct inbox *in, const char *what)
{
	int fd = connect_and_hello(in, what);

	if (fd < 0)
		return -1;
	send_hello(fd, PROTO_VERSION, 1, CHAN, PROTO_CHAN_RUNNING);
	for (int i = 0; i < 200 && !agent_ready(sb.agent); i++)
		step();
	CHECK(agent_ready(sb.agent), "%s: A_HELLO makes the channel ready", what);
	return fd;
}

/* One hostile frame on a fresh ready connection: the daemon must hang up. */
typedef bool (*hostile_fn)(int fd);

static void expect_drop(const char *what, hostile_fn fn)
{
	struct inbox in;
	int fd = ready_conn(&in, what);

	if (fd < 0)
		return;
	fn(fd);
	CHECK(wait_eof(fd, &in, 3000), "%s: the daemon drops the connection", what);
	CHECK(!agent_ready(sb.agent), "%s: the channel is no longer ready", what);
	close(fd);
}

static bool h_oversized(int fd)
{
	uint8_t junk[64] = { 0 };

	return send_raw(fd, PROTO_MAX_PAYLOAD + 1, A_DATA, 0, CHAN, junk, sizeof(junk));
}

static bool h_huge_len(int fd)
{
	return send_raw(fd, 0xffffffffu, A_LOG, 0, 0, "x", 1);
}

static bool h_bad_stream(int fd)
{
	return send_data(fd, CHAN, 3, 5, "zz");
}

static bool h_stream_zero(int fd)
{
	return send_data(fd, CHAN, 0, 5, "zz");
}

static bool h_exit_code_big(int fd)
{
	return send_exit(fd, CHAN, 5, 256, 0);
}

static bool h_exit_code_neg(int fd)
{
	return send_exit(fd, CHAN, 5, -2, 0);
}

static bool h_exit_sig_neg(int fd)
{
	return send_exit(fd, CHAN, 5, -1, -9);
}

static bool h_exit_sig_big(int fd)
{
	return send_exit(fd, CHAN, 5, -1, 129);
}

static bool h_trunc_started(int fd)
{
	return send_frame(fd, A_STARTED, CHAN, "\x01\x02", 2);
}

static bool h_trunc_exit(int fd)
{
	uint8_t p[15] = { 0 };

	return send_frame(fd, A_EXIT, CHAN, p, sizeof(p));
}

static bool h_trunc_data(int fd)
{
	uint8_t p[10] = { 1 };

	return send_frame(fd, A_DATA, CHAN, p, sizeof(p));
}

static bool h_trunc_stdin_ack(int fd)
{
	return send_frame(fd, A_STDIN_ACK, CHAN, "\0\0\0\0", 4);
}

static bool h_trunc_error(int fd)
{
	return send_frame(fd, A_ERROR, CHAN, "\0\0", 2);
}

static bool h_unknown_type_chan(int fd)
{
	return send_frame(fd, 999, CHAN, "abcd", 4);
}

static bool h_unknown_type_ctl(int fd)
{
	return send_frame(fd, 4242, 0, "abcd", 4);
}

static bool h_host_type(int fd)
{
	/* An H_* type coming from the agent is not a message it may send. */
	return send_frame(fd, H_EXEC, 0, "abcd", 4);
}

static bool h_flags(int fd)
{
	uint8_t p[4] = { 42, 0, 0, 0 };

	return send_raw(fd, 4, A_STARTED, 0x8000, CHAN, p, sizeof(p));
}

static bool h_hello_version(int fd)
{
	return send_hello(fd, 2, 0, 0, 0);
}

static bool h_hello_count(int fd)
{
	uint8_t p[8 + 16] = { 0 };

	le32(p, PROTO_VERSION);
	le32(p + 4, 5); /* claims 5 channels, carries 1 */
	return send_frame(fd, A_HELLO, 0, p, sizeof(p));
}

/* ---- set-up ---- */

static bool setup(void)
{
	struct template_rec t;
	struct session_rec rec;
	space_err err = { 0 };
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	char path[PATH_MAX];

	strcpy(tmpdir, "/tmp/space-ut-agent-XXXXXX");
	if (!CHECK(mkdtemp(tmpdir) != NULL, "temp dir"))
		return false;
	d.base = event_base_new();
	snprintf(d.cfg.state_dir, sizeof(d.cfg.state_dir), "%s", tmpdir);
	snprintf(path, sizeof(path), "%s/state.db", tmpdir);
	if (!CHECK(d.base && store_open(&d.store, path, &err) == 0, "event base and store %s", err.msg))
		return false;

	memset(&t, 0, sizeof(t));
	snprintf(t.digest, sizeof(t.digest), "sha256:%064d", 0);
	snprintf(t.name, sizeof(t.name), "minimal");
	snprintf(t.dir, sizeof(t.dir), "%s", tmpdir);
	snprintf(t.default_user, sizeof(t.default_user), "root");
	t.vcpus = 1;
	t.memory_mib = 256;
	t.created_ms = now_ms();
	t.image_bytes = 1;
	if (!CHECK(store_template_put(d.store, &t, &err) == 0, "template row %s", err.msg))
		return false;

	sb.d = &d;
	id_new(sb.rec.id, "sb-");
	sb.rec.state = SB_RUNNING;
	snprintf(sb.rec.template_ref, sizeof(sb.rec.template_ref), "minimal");
	snprintf(sb.rec.template_digest, sizeof(sb.rec.template_digest), "%s", t.digest);
	sb.rec.vcpus = 1;
	sb.rec.memory_mib = 256;
	sb.rec.created_ms = sb.rec.updated_ms = now_ms();
	sb.rec.next_chan = CHAN + 1;
	if (!CHECK(store_sandbox_put(d.store, &sb.rec, &err) == 0, "sandbox row %s", err.msg))
		return false;
	d.sandboxes = &sb;

	snprintf(path, sizeof(path), "%s/sandboxes", tmpdir);
	mkdir(path, 0700);
	path_run_dir(&d, sb.rec.id, path);
	mkdir(path, 0700);
	memset(&rec, 0, sizeof(rec));
	id_new(rec.id, "ss-");
	snprintf(rec.sandbox_id, sizeof(rec.sandbox_id), "%s", sb.rec.id);
	rec.chan = CHAN;
	rec.argv = json_pack("[s]", "sleep");
	rec.env = json_object();
	rec.state = SESS_RUNNING;
	rec.created_ms = rec.started_ms = now_ms();
	if (!CHECK(store_session_put(d.store, &rec, &err) == 0, "session row %s", err.msg))
		return false;
	sess = session_alloc(&sb, &rec, &err);
	session_rec_clear(&rec);
	if (!CHECK(sess != NULL, "session on channel %d %s", CHAN, err.msg))
		return false;

	snprintf(sock_path, sizeof(sock_path), "%s/agent.sock", tmpdir);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", sock_path);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	return CHECK(lfd >= 0 && bind(lfd, (struct sockaddr *)&sun, sizeof(sun)) == 0 && listen(lfd, 4) == 0,
		     "listening on %s", sock_path);
}

static void teardown(void)
{
	char cmd[128];

	agent_free(sb.agent);
	sb.agent = NULL;
	sessions_free(&sb);
	sandbox_rec_clear(&sb.rec);
	if (lfd >= 0)
		close(lfd);
	store_close(d.store);
	event_base_free(d.base);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		NOTE("could not remove %s", tmpdir);
}

/* ---- the test ---- */

static void test_first_connection(void)
{
	struct inbox in;
	struct proto_hdr h;
	uint8_t p[64];
	uint8_t garbage[300];
	int fd;
	bool ok;

	sb.agent = agent_new(&sb, sock_path);
	if (!CHECK(sb.agent != NULL, "agent_new"))
		return;
	fd = connect_and_hello(&in, "first connection");
	if (fd < 0)
		return;

	/* Garbage before the HELLO: random bytes, then things that look almost like frames: an
	 * oversized header, an A_DATA, an A_HELLO header with a bad length, a whole A_EXIT. All
	 * must be skipped, and none of it may act on the session. */
	srand(7);
	for (size_t i = 0; i < sizeof(garbage); i++)
		garbage[i] = (uint8_t)rand();
	send_all(fd, garbage, sizeof(garbage));
	send_raw(fd, 0x7fffffff, A_DATA, 0, CHAN, NULL, 0);
	send_data(fd, CHAN, PROTO_STDOUT, 0, "NOT-OUTPUT");
	send_raw(fd, 13, A_HELLO, 0, 0, "\x01\0\0\0\0\0\0\0\0\0\0\0\0", 13);
	send_exit(fd, CHAN, 0, 9, 0);
	send_all(fd, "\x01\x02\x03", 3);
	CHECK(stays_open(fd, &in, 300), "garbage before A_HELLO does not drop the connection");
	CHECK(!agent_ready(sb.agent), "garbage before A_HELLO does not make the channel ready");
	CHECK(spool_length(sess->spool) == 0 && sess->rec.state == SESS_RUNNING,
	      "frames before A_HELLO do not reach the session (output %llu, state %d)",
	      (unsigned long long)spool_length(sess->spool), (int)sess->rec.state);

	send_hello(fd, PROTO_VERSION, 1, CHAN, PROTO_CHAN_RUNNING);
	for (int i = 0; i < 200 && !agent_ready(sb.agent); i++)
		step();
	CHECK(agent_ready(sb.agent), "a valid A_HELLO after the garbage makes the channel ready");
	CHECK(sess->rec.state == SESS_RUNNING, "the session the agent knows stays running");

	/* Valid traffic is honoured. */
	send_frame(fd, A_STARTED, CHAN, "\x2a\0\0\0", 4);
	send_data(fd, CHAN, PROTO_STDOUT, 0, "hello");
	send_data(fd, CHAN, PROTO_STDOUT, 0, "hel"); /* a resend: dropped by offset */
	ok = wait_frame(fd, &in, H_ACK, &h, p, sizeof(p), 3000);
	CHECK(ok && h.chan == CHAN && h.len == 8 && get64(p) == 5,
	      "output is acknowledged: H_ACK(chan %u, offset %llu)", ok ? h.chan : 0,
	      ok ? (unsigned long long)get64(p) : 0ull);
	CHECK(spool_length(sess->spool) == 5, "the output reached the spool (%llu bytes)",
	      (unsigned long long)spool_length(sess->spool));
	CHECK(sess->rec.pid == 42, "A_STARTED sets the pid (%d)", sess->rec.pid);

	/* Frames the daemon must ignore without dropping: unknown channel, a log line with
	 * control bytes and no NUL, a pong, output beyond what it has. */
	send_data(fd, 999, 3, 0, "for nobody");
	send_exit(fd, 999, 0, 5000, 0);
	send_frame(fd, A_LOG, 0, "\x1b[31mred\xff\n", 10);
	send_frame(fd, A_PONG, 0, "\0\0\0\0\0\0\0\0", 8);
	send_data(fd, CHAN, PROTO_STDERR, 100, "gap");
	CHECK(stays_open(fd, &in, 300), "frames for unknown channels, logs and pongs keep the connection");
	CHECK(spool_length(sess->spool) == 5 && sess->rec.state == SESS_RUNNING,
	      "none of them changed the session (output %llu)",
	      (unsigned long long)spool_length(sess->spool));

	/* The first violation on this connection: A_DATA with stream 3. */
	h_bad_stream(fd);
	CHECK(wait_eof(fd, &in, 3000), "A_DATA with stream 3: the daemon drops the connection");
	CHECK(!agent_ready(sb.agent), "the channel is no longer ready");
	CHECK(sess->rec.state == SESS_RUNNING && spool_length(sess->spool) == 5,
	      "the session survives the drop (state %d)", (int)sess->rec.state);
	close(fd);
}

static void test_violations(void)
{
	static const struct {
		const char *what;
		hostile_fn fn;
	} cases[] = {
		{ "length over PROTO_MAX_PAYLOAD", h_oversized },
		{ "length 0xffffffff", h_huge_len },
		{ "A_DATA with stream 0", h_stream_zero },
		{ "A_EXIT with code 256", h_exit_code_big },
		{ "A_EXIT with code -2", h_exit_code_neg },
		{ "A_EXIT with signal -9", h_exit_sig_neg },
		{ "A_EXIT with signal 129", h_exit_sig_big },
		{ "A_STARTED with 2 bytes", h_trunc_started },
		{ "A_EXIT with 15 bytes", h_trunc_exit },
		{ "A_DATA with 10 bytes", h_trunc_data },
		{ "A_STDIN_ACK with 4 bytes", h_trunc_stdin_ack },
		{ "A_ERROR with 2 bytes", h_trunc_error },
		{ "unknown type 999 on a live channel", h_unknown_type_chan },
		{ "unknown type 4242 on channel 0", h_unknown_type_ctl },
		{ "a host message type from the agent", h_host_type },
		{ "flags set", h_flags },
		{ "A_HELLO of version 2", h_hello_version },
		{ "A_HELLO whose count disagrees with its length", h_hello_count },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		expect_drop(cases[i].what, cases[i].fn);
	CHECK(sess->rec.state == SESS_RUNNING && sess->rec.pid == 42 && spool_length(sess->spool) == 5,
	      "no malformed frame acted on the session (state %d, pid %d, output %llu)",
	      (int)sess->rec.state, sess->rec.pid, (unsigned long long)spool_length(sess->spool));
}

static void test_hangup_mid_frame(void)
{
	struct inbox in;
	int fd = ready_conn(&in, "hang-up mid-frame");
	uint8_t p[16] = { PROTO_STDOUT };

	if (fd < 0)
		return;
	/* Announce 100 bytes of A_DATA, send 20, hang up. */
	le64(p + 8, 5);
	send_raw(fd, 100, A_DATA, 0, CHAN, p, sizeof(p));
	send_all(fd, "half", 4);
	for (int i = 0; i < 20; i++)
		step();
	close(fd);
	for (int i = 0; i < 200 && agent_ready(sb.agent); i++)
		step();
	CHECK(!agent_ready(sb.agent), "a peer hanging up mid-frame: the channel is no longer ready");
	CHECK(spool_length(sess->spool) == 5, "the half frame did not reach the spool");
}

static void test_flood_of_garbage(void)
{
	struct inbox in;
	int fd = connect_and_hello(&in, "flood before HELLO");
	static uint8_t junk[256 * 1024];
	size_t i;

	if (fd < 0)
		return;
	/* 256 KiB of bytes that never form an A_HELLO header: skipped, nothing buffered whole. */
	for (i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)(i * 131 + 17);
	for (i = 0; i + 4 <= sizeof(junk); i += 64)
		memcpy(junk + i, "\x65\0\0\0", 4); /* looks like type 101 in the wrong place */
	CHECK(send_all(fd, junk, sizeof(junk)), "the daemon reads 256 KiB of garbage before A_HELLO");
	CHECK(stays_open(fd, &in, 200) && !agent_ready(sb.agent), "... and keeps waiting for A_HELLO");
	send_hello(fd, PROTO_VERSION, 1, CHAN, PROTO_CHAN_RUNNING);
	for (int k = 0; k < 500 && !agent_ready(sb.agent); k++)
		step();
	CHECK(agent_ready(sb.agent), "an A_HELLO after the flood is found");
	close(fd);
	for (int k = 0; k < 200 && agent_ready(sb.agent); k++)
		step();
}

/* 50 A_DATA frames in one write: the daemon reads them in one pass and answers one H_ACK. */
static void test_acks_coalesced(void)
{
	static uint8_t buf[50 * (PROTO_HDR_SIZE + 16 + 10)];
	struct inbox in;
	struct proto_hdr h;
	uint8_t p[64];
	uint64_t len = spool_length(sess->spool), last = 0;
	int fd = ready_conn(&in, "coalesced ACKs"), acks = 0;
	size_t n = 0;
	int64_t end;

	if (fd < 0)
		return;
	for (int i = 0; i < 50; i++) {
		le32(buf + n, 16 + 10);
		buf[n + 4] = (uint8_t)A_DATA;
		buf[n + 5] = (uint8_t)(A_DATA >> 8);
		buf[n + 6] = buf[n + 7] = 0;
		le32(buf + n + 8, CHAN);
		memset(buf + n + 12, 0, 16);
		buf[n + 12] = PROTO_STDOUT;
		le64(buf + n + 20, len + 10 * (uint64_t)i);
		memset(buf + n + 28, 'a' + i % 26, 10);
		n += PROTO_HDR_SIZE + 16 + 10;
	}
	CHECK(send_all(fd, buf, n), "50 frames sent in one write");
	end = mono_ms() + 500;
	while (mono_ms() < end) {
		step();
		drain(fd, &in);
		while (pop_frame(&in, &h, p, sizeof(p)))
			if (h.type == H_ACK && h.chan == CHAN) {
				acks++;
				last = get64(p);
			}
	}
	CHECK(spool_length(sess->spool) == len + 500 && last == len + 500,
	      "all 500 bytes stored and acknowledged (ack %llu)", (unsigned long long)last);
	/* The first may be the ACK repeated after A_HELLO. */
	CHECK(acks >= 1 && acks <= 2, "one H_ACK per read pass: %d for 50 frames", acks);
	close(fd);
	for (int k = 0; k < 200 && agent_ready(sb.agent); k++)
		step();
}

/* Below the free-disk watermark output is stored (within the window) but not acknowledged, so
 * the agent's window fills and the process blocks; the tick after there is room again
 * acknowledges it. The watermark is the real statvfs of the state dir against a limit no disk
 * meets (1 PiB free), then none. */
static void test_disk_watermark_pauses_output(void)
{
	struct inbox in;
	struct proto_hdr h;
	uint8_t p[64];
	uint64_t len = spool_length(sess->spool);
	int fd = ready_conn(&in, "free-disk watermark"), acks = 0;
	int64_t end;
	bool ok;

	if (fd < 0)
		return;
	for (int k = 0; k < 20; k++)
		step();
	drain(fd, &in);
	in.n = 0;
	d.cfg.output_min_free_mib = 1 << 30;
	send_data(fd, CHAN, PROTO_STDOUT, len, "paused");
	end = mono_ms() + 300;
	while (mono_ms() < end) {
		step();
		drain(fd, &in);
		while (pop_frame(&in, &h, p, sizeof(p)))
			acks += h.type == H_ACK;
	}
	CHECK(spool_length(sess->spool) == len + 6 && acks == 0 && sess->out_paused,
	      "below the watermark output is kept but not acknowledged (%d ACKs, paused %d)", acks,
	      (int)sess->out_paused);
	d.cfg.output_min_free_mib = 0;
	sessions_tick(&d);
	ok = wait_frame(fd, &in, H_ACK, &h, p, sizeof(p), 2000);
	CHECK(ok && get64(p) == len + 6 && !sess->out_paused, "with room again the tick acknowledges it (%llu)",
	      ok ? (unsigned long long)get64(p) : 0ull);
	close(fd);
	for (int k = 0; k < 200 && agent_ready(sb.agent); k++)
		step();
}

/* A_DATA of n pattern bytes at off. */
static bool send_bulk(int fd, uint64_t off, size_t n)
{
	static uint8_t p[16 + 60000];

	if (n > 60000)
		return false;
	memset(p, 0, 16);
	p[0] = PROTO_STDOUT;
	le64(p + 8, off);
	for (size_t i = 0; i < n; i++)
		p[16 + i] = (uint8_t)('a' + (off + i) % 26);
	return send_frame(fd, A_DATA, CHAN, p, 16 + n);
}

/* Steps the loop until the spool holds `want` bytes (or ms pass), draining what we get. */
static bool wait_spool(int fd, struct inbox *in, uint64_t want, int ms)
{
	int64_t end = mono_ms() + ms;

	while (mono_ms() < end && spool_length(sess->spool) < want) {
		step();
		drain(fd, in);
		in->n = 0;
	}
	return spool_length(sess->spool) == want;
}

/* No reader attached: the daemon acknowledges SESSION_MAX_LAG bytes and no more, the agent may
 * run PROTO_OUT_WINDOW past that, and neither a repeated A_HELLO (a violation) nor a fresh
 * connection gives it more room. ACKs come once per read pass, not per frame. */
static void test_window_survives_reconnect(void)
{
	struct inbox in;
	struct proto_hdr h;
	uint8_t p[64];
	uint64_t off = spool_length(sess->spool), acked, lim;
	int fd = ready_conn(&in, "window"), acks = 0, frames = 0;
	bool ok;

	if (fd < 0)
		return;
	acked = sess->delivered + SESSION_MAX_LAG;
	lim = acked + PROTO_OUT_WINDOW;
	while (off < lim) {
		size_t n = lim - off < 60000 ? (size_t)(lim - off) : 60000;

		if (!send_bulk(fd, off, n))
			break;
		off += n;
		frames++;
		drain(fd, &in);
		while (pop_frame(&in, &h, p, sizeof(p)))
			acks += h.type == H_ACK;
	}
	CHECK(wait_spool(fd, &in, lim, 10000), "output up to ACK + window is taken (%llu of %llu)",
	      (unsigned long long)spool_length(sess->spool), (unsigned long long)lim);
	CHECK(sess->acked == acked, "with no reader the daemon acknowledges %llu (lag bound), not %llu",
	      (unsigned long long)acked, (unsigned long long)sess->acked);
	CHECK(acks < frames, "ACKs are coalesced: %d for %d A_DATA frames", acks, frames);
	send_bulk(fd, lim, 100);
	CHECK(stays_open(fd, &in, 200) && spool_length(sess->spool) == lim,
	      "output past the window is not taken (%llu)", (unsigned long long)spool_length(sess->spool));

	send_hello(fd, PROTO_VERSION, 1, CHAN, PROTO_CHAN_RUNNING);
	CHECK(wait_eof(fd, &in, 3000), "a second A_HELLO on a ready connection drops it");
	close(fd);

	for (int round = 0; round < 3; round++) {
		fd = ready_conn(&in, "window after reconnect");
		if (fd < 0)
			return;
		ok = wait_frame(fd, &in, H_ACK, &h, p, sizeof(p), 3000);
		CHECK(ok && h.chan == CHAN && get64(p) == acked,
		      "after a reconnect the daemon repeats its ACK (%llu), it does not reset it",
		      ok ? (unsigned long long)get64(p) : 0ull);
		send_bulk(fd, lim, 100);
		CHECK(stays_open(fd, &in, 200) && spool_length(sess->spool) == lim,
		      "reconnect %d: still no room past ACK + window (%llu)", round,
		      (unsigned long long)spool_length(sess->spool));
		close(fd);
		for (int k = 0; k < 200 && agent_ready(sb.agent); k++)
			step();
	}
}

/* A_STARTED is persisted once; later ones (a guest repeating it) change nothing. */
static void test_started_once(void)
{
	struct inbox in;
	int fd = ready_conn(&in, "repeated A_STARTED");

	if (fd < 0)
		return;
	for (int i = 0; i < 200; i++)
		send_frame(fd, A_STARTED, CHAN, "\x07\0\0\0", 4);
	CHECK(stays_open(fd, &in, 300) && sess->rec.pid == 42,
	      "200 A_STARTED with another pid: the pid stays 42 (%d)", sess->rec.pid);
	close(fd);
	for (int k = 0; k < 200 && agent_ready(sb.agent); k++)
		step();
}

/* A guest that floods tiny frames and never reads its port: past AGENT_OUTQ_HIGH queued
 * toward it the daemon stops reading it, so what it queues stays bounded. */
static void test_unread_port(void)
{
	struct inbox in;
	int fd = ready_conn(&in, "a guest that never reads");
	static uint8_t burst[16 * 1024 * 24];
	size_t sent = 0, n;
	int sndbuf = 4096;

	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sndbuf, sizeof(sndbuf));
	/* A_DATA frames of 0 bytes for an unknown channel, each a new channel: every one would
	 * earn an H_ACK of 20 bytes. */
	for (n = 0; n + 28 <= sizeof(burst); n += 28) {
		uint32_t chan = 100000 + (uint32_t)(n / 28);

		le32(burst + n, 16);
		burst[n + 4] = (uint8_t)A_DATA;
		burst[n + 5] = (uint8_t)(A_DATA >> 8);
		burst[n + 6] = burst[n + 7] = 0;
		le32(burst + n + 8, chan);
		memset(burst + n + 12, 0, 16);
		burst[n + 12] = PROTO_STDOUT;
	}
	/* Frames stay whole: each send continues where the last one stopped. */
	for (int round = 0; round < 200; round++) {
		size_t at = sent % n;
		ssize_t w = send(fd, burst + at, n - at, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (w > 0)
			sent += (size_t)w;
		for (int k = 0; k < 3; k++)
			step();
	}
	NOTE("sent %zu bytes of frames, %zu queued toward us", sent, agent_queued(sb.agent));
	CHECK(agent_queued(sb.agent) < 2u * 1024 * 1024,
	      "the queue toward a guest that does not read stays bounded (%zu bytes)", agent_queued(sb.agent));
	CHECK(agent_ready(sb.agent) && sent < (size_t)100 * n,
	      "the daemon stopped reading us, without dropping us (took %zu bytes)", sent);
	/* Reading again drains the queue and the daemon reads us again. */
	in.n = 0;
	for (int k = 0; k < 2000 && agent_queued(sb.agent) > 0; k++) {
		step();
		drain(fd, &in);
		in.n = 0;
	}
	CHECK(agent_queued(sb.agent) == 0 && agent_ready(sb.agent),
	      "once we read, the queue drains (%zu) and the channel stays up", agent_queued(sb.agent));
	close(fd);
	for (int k = 0; k < 200 && agent_ready(sb.agent); k++)
		step();
}

static bool send_hello_n(int fd, const uint32_t *chans, const uint64_t *stdin_offs, uint32_t n)
{
	uint8_t p[8 + 16 * 4];

	le32(p, PROTO_VERSION);
	le32(p + 4, n);
	for (uint32_t i = 0; i < n && i < 4; i++) {
		le32(p + 8 + 16 * i, chans[i]);
		le32(p + 12 + 16 * i, PROTO_CHAN_RUNNING);
		le64(p + 16 + 16 * i, stdin_offs[i]);
	}
	return send_frame(fd, A_HELLO, 0, p, 8 + 16 * (size_t)n);
}

/* Collects the H_STDIN bytes of chan (checking offsets follow on from *next) until `want` more
 * arrived or ms pass; true if they match data. */
static bool recv_stdin(int fd, struct inbox *in, uint32_t chan, const uint8_t *data, uint64_t *next,
		       uint64_t want, int ms)
{
	static uint8_t p[PROTO_MAX_PAYLOAD];
	struct proto_hdr h;
	uint64_t end = *next + want;

	while (*next < end) {
		if (!wait_frame(fd, in, H_STDIN, &h, p, sizeof(p), ms))
			return false;
		if (h.chan != chan)
			continue;
		if (h.len < 8 || get64(p) != *next || memcmp(p + 8, data + *next, h.len - 8) != 0) {
			NOTE("H_STDIN at %llu (%u bytes), expected offset %llu", (unsigned long long)get64(p),
			     h.len - 8, (unsigned long long)*next);
			return false;
		}
		*next += h.len - 8;
	}
	return *next == end;
}

/* Stdin the daemon sent but the agent did not acknowledge is kept, and after a reconnect it is
 * sent again from where the agent says it got to: nothing lost, nothing twice. */
static void test_stdin_resent_after_reconnect(void)
{
	static uint8_t data[100000];
	struct session_rec rec;
	struct session *s2;
	space_err err = { 0 };
	struct inbox in;
	uint32_t chans[2] = { CHAN, CHAN + 1 };
	uint64_t offs[2] = { 0, 0 }, next = 0;
	uint8_t ack[8];
	int fd;

	memset(&rec, 0, sizeof(rec));
	id_new(rec.id, "ss-");
	snprintf(rec.sandbox_id, sizeof(rec.sandbox_id), "%s", sb.rec.id);
	rec.chan = CHAN + 1;
	rec.argv = json_pack("[s]", "cat");
	rec.env = json_object();
	rec.state = SESS_RUNNING;
	rec.stdin_open = true;
	rec.created_ms = rec.started_ms = now_ms();
	s2 = session_alloc(&sb, &rec, &err);
	session_rec_clear(&rec);
	if (!CHECK(s2 != NULL, "a session with stdin on channel %d %s", CHAN + 1, err.msg))
		return;
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + i / 251);

	fd = connect_and_hello(&in, "stdin");
	if (fd < 0)
		return;
	send_hello_n(fd, chans, offs, 2);
	for (int i = 0; i < 200 && !agent_ready(sb.agent); i++)
		step();
	CHECK(session_stdin(s2, data, sizeof(data), 0, &err) == 0, "100000 bytes of stdin queued %s", err.msg);
	CHECK(recv_stdin(fd, &in, CHAN + 1, data, &next, sizeof(data), 3000), "they are sent in order (%llu)",
	      (unsigned long long)next);
	/* The agent acknowledges 10000, got 30000 before the connection broke. */
	le64(ack, 10000);
	send_frame(fd, A_STDIN_ACK, CHAN + 1, ack, 8);
	for (int i = 0; i < 50; i++)
		step();
	close(fd);
	for (int i = 0; i < 200 && agent_ready(sb.agent); i++)
		step();
	CHECK(s2->stdin_acked == 10000 && s2->stdin_sent == sizeof(data),
	      "acked %llu, sent %llu", (unsigned long long)s2->stdin_acked, (unsigned long long)s2->stdin_sent);

	fd = connect_and_hello(&in, "stdin after reconnect");
	if (fd < 0)
		return;
	offs[1] = 30000;
	send_hello_n(fd, chans, offs, 2);
	next = 30000;
	CHECK(recv_stdin(fd, &in, CHAN + 1, data, &next, sizeof(data) - 30000, 3000),
	      "after the reconnect stdin resumes at 30000 with the same bytes (got to %llu)",
	      (unsigned long long)next);
	CHECK(stays_open(fd, &in, 200) && s2->stdin_sent == sizeof(data), "and nothing more (sent %llu)",
	      (unsigned long long)s2->stdin_sent);
	close(fd);
	for (int i = 0; i < 200 && agent_ready(sb.agent); i++)
		step();
}

/* A reconnection that never gets an A_HELLO is dropped after 10 s and made again with a fresh
 * H_HELLO (one H_HELLO per connection). */
static void test_reconnect_without_hello(void)
{
	struct inbox in;
	int64_t t0;
	int fd = connect_and_hello(&in, "a reconnection left unanswered");
	bool dropped;

	if (fd < 0)
		return;
	t0 = mono_ms();
	dropped = wait_eof(fd, &in, 13000);
	CHECK(dropped && mono_ms() - t0 >= 9000, "the daemon gives up on it after 10 s (%lld ms)",
	      (long long)(mono_ms() - t0));
	close(fd);
	fd = connect_and_hello(&in, "the next connection");
	if (fd >= 0)
		close(fd);
	for (int k = 0; k < 50; k++)
		step();
}

static void test_exit_and_release(void)
{
	struct inbox in;
	struct proto_hdr h;
	uint8_t p[64];
	int fd = ready_conn(&in, "clean exit");
	uint64_t len = spool_length(sess->spool);
	bool ok;

	if (fd < 0)
		return;
	/* The earlier tests filled the window: no more output fits, the exit does. */
	send_exit(fd, CHAN, len, 3, 0);
	ok = wait_frame(fd, &in, H_RELEASE, &h, p, sizeof(p), 3000);
	CHECK(ok && h.chan == CHAN && h.len == 0, "after A_EXIT the daemon sends H_RELEASE for channel %d", CHAN);
	CHECK(sess->rec.state == SESS_EXITED && sess->rec.exit_code == 3 && sess->rec.exit_signal == 0,
	      "the session exited with code 3 (state %d, code %d, signal %d)", (int)sess->rec.state,
	      sess->rec.exit_code, sess->rec.exit_signal);
	CHECK(spool_length(sess->spool) == len, "all %llu output bytes are held", (unsigned long long)len);
	/* A repeated A_EXIT (as after a reconnect) with other values changes nothing. */
	send_exit(fd, CHAN, len, 0, 0);
	CHECK(stays_open(fd, &in, 200) && sess->rec.exit_code == 3, "a repeated A_EXIT changes nothing");
	close(fd);
}

int main(void)
{
	log_set_level(getenv("TEST_LOG") ? LOG_DEBUG : LOG_ERROR);
	if (!setup()) {
		teardown();
		return DONE();
	}
	RUN(test_first_connection);
	RUN(test_violations);
	RUN(test_hangup_mid_frame);
	RUN(test_flood_of_garbage);
	RUN(test_acks_coalesced);
	RUN(test_disk_watermark_pauses_output);
	RUN(test_window_survives_reconnect);
	RUN(test_started_once);
	RUN(test_unread_port);
	RUN(test_stdin_resent_after_reconnect);
	RUN(test_reconnect_without_hello);
	RUN(test_exit_and_release);
	/* After everything it still reconnects. */
	{
		struct inbox in;
		int fd = connect_and_hello(&in, "last reconnection");

		if (fd >= 0)
			close(fd);
	}
	teardown();
	return DONE();
}
