/* fuzz_http.c -- libFuzzer target: raw bytes from a client on either HTTP listener of a real
 * spaced, with no VMs: the daemon's own listener set-up (http_listen via api_start and
 * dataplane_start, so libevent's evhttp parser with our limits), dispatch, routing, path and
 * query decoding, auth (API key; session tokens), body limits and every handler of both route
 * tables, over a real SQLite store in a temporary state directory made once per process.
 *
 * The store holds no template, so nothing can start a VM: a request that would need one fails
 * in its handler as it would on a host without templates.  For the data plane to get past its
 * token check, a sandbox the control plane cannot see (a pool VM's record, no VM behind it)
 * holds two sessions, made afresh for every input: SESS_A (token TOKEN_A, running, stdin
 * open, some output in its spool, agent not connected) and SESS_B (TOKEN_B, exited with
 * code 3).  Two operations are in the store: OP_ID_RUNNING (never finishes: a wait on it is a
 * long-poll the client's hang-up ends) and OP_ID_DONE (succeeded).  The first input byte picks the
 * listener (even: control plane, odd: data plane); the rest is sent on a fresh loopback TCP
 * connection (evhttp in libevent 2.1 accepts only inet sockets); once the daemon has been
 * quiet for a while the client hangs up its sending side and the loop runs until the daemon
 * has closed the connection.  A daemon that keeps the connection MAX_TURNS loop turns is a
 * finding.  FUZZ_SHOW=1 copies the daemon's replies to stderr. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/http.h>
#include <openssl/sha.h>

#include "daemon/daemon.h"
#include "daemon/listeners.h"
#include "daemon/sandbox/runtime.h"
#include "daemon/sandbox/sandbox.h"
#include "daemon/sandbox/spool.h"
#include "daemon/store/store.h"
#include "fuzz_tmp.h"
#include "fuzz_event.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_TURNS 200000
#define IDLE_TURNS 32
#define API_KEY "sk-fuzz"
#define SANDBOX "sb-00000000000000f0"
#define OP_ID_RUNNING "op-00000000000000aa"
#define OP_ID_DONE "op-00000000000000bb"
#define SESS_A "ss-00000000000000aa"
#define SESS_B "ss-00000000000000bb"
#define TOKEN_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define TOKEN_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static struct spaced d;
static struct sandbox sb;
static uint16_t ports[2]; /* control plane, data plane */
static char tmpdir[64];

static void fail(const char *what, const char *msg)
{
	fprintf(stderr, "fuzz_http: %s: %s\n", what, msg);
	abort();
}

/* A loopback port free now (the kernel's choice), for a listener to bind next. */
static uint16_t free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
		fail("free port", strerror(errno));
	close(fd);
	return ntohs(sa.sin_port);
}

/* The sandbox behind the sessions: runtime only, a pool VM's role, so that the control plane
 * answers 404 for it and never acts on a VM that is not there. */
static void add_sandbox(void)
{
	char path[PATH_MAX];

	sb.d = &d;
	snprintf(sb.rec.id, sizeof(sb.rec.id), SANDBOX);
	sb.rec.state = SB_RUNNING;
	sb.rec.role = ROLE_POOL;
	snprintf(sb.rec.template_ref, sizeof(sb.rec.template_ref), "minimal");
	sb.rec.vcpus = 1;
	sb.rec.memory_mib = 256;
	sb.rec.created_ms = sb.rec.updated_ms = now_ms();
	sb.rec.next_chan = 10;
	sb.identity_done = true;
	d.sandboxes = &sb;
	snprintf(path, sizeof(path), "%s/sandboxes", tmpdir);
	mkdir(path, 0700);
	path_run_dir(&d, sb.rec.id, path);
	mkdir(path, 0700);
}

static void add_session(const char *id, const char *token, uint32_t chan, bool running)
{
	static const char out[] = "hello from the session\n";
	unsigned char md[SHA256_DIGEST_LENGTH];
	struct session_rec rec = { 0 };
	space_err err = { 0 };
	char spool[PATH_MAX];
	struct session *s;

	snprintf(rec.id, sizeof(rec.id), "%s", id);
	snprintf(rec.sandbox_id, sizeof(rec.sandbox_id), "%s", sb.rec.id);
	rec.chan = chan;
	rec.argv = json_pack("[s]", "cat");
	rec.env = json_object();
	rec.stdin_open = running;
	rec.state = running ? SESS_RUNNING : SESS_EXITED;
	rec.exit_code = running ? 0 : 3;
	rec.created_ms = rec.started_ms = now_ms();
	rec.ended_ms = running ? 0 : now_ms();
	SHA256((const unsigned char *)token, strlen(token), md);
	for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
		snprintf(rec.token_hash + 2 * i, 3, "%02x", md[i]);
	rec.token_expires_ms = now_ms() + 86400000;
	path_session_spool(&d, sb.rec.id, rec.id, spool);
	unlink(spool);
	s = session_alloc(&sb, &rec, &err);
	session_rec_clear(&rec);
	if (!s)
		fail("session", err.msg);
	if (spool_append(s->spool, PROTO_STDOUT, out, sizeof(out) - 1, &err) < 0 ||
	    spool_append(s->spool, PROTO_STDERR, "warning\n", 8, &err) < 0)
		fail("spool", err.msg);
}

static void add_op(const char *id, enum op_state state)
{
	struct op_rec op = { 0 };
	space_err err = { 0 };

	snprintf(op.id, sizeof(op.id), "%s", id);
	op.kind = OPK_CREATE;
	snprintf(op.sandbox_id, sizeof(op.sandbox_id), "sb-00000000000000aa");
	op.state = state;
	op.created_ms = op.updated_ms = now_ms();
	if (store_op_put(d.store, &op, &err) < 0)
		fail("operation row", err.msg);
}

static void fresh_sessions(void)
{
	sessions_free(&sb);
	add_session(SESS_B, TOKEN_B, 8, false);
	add_session(SESS_A, TOKEN_A, 7, true);
}

static void setup_once(void)
{
	char db[PATH_MAX], listen[32], data_listen[32], templates[128];
	space_err err = { 0 };

	log_set_level(LOG_ERROR);
	signal(SIGPIPE, SIG_IGN);
	if (!fuzz_tmpdir("http"))
		fail("mkdtemp", strerror(errno));
	snprintf(tmpdir, sizeof(tmpdir), "%s", fuzz_tmp_path);
	ports[0] = free_port();
	ports[1] = free_port();
	snprintf(listen, sizeof(listen), "127.0.0.1:%u", ports[0]);
	snprintf(data_listen, sizeof(data_listen), "127.0.0.1:%u", ports[1]);
	snprintf(templates, sizeof(templates), "%s/templates", tmpdir);
	{
		char *argv[] = { "spaced", "--listen", listen, "--data-listen", data_listen, "--state-dir",
				 tmpdir, "--api-key", API_KEY, "--templates-dir", templates, "--accel", "tcg",
				 NULL };
		config_load(&d.cfg, 13, argv);
	}
	/* Small body limits, so the fuzzer reaches the 413 paths with small inputs. */
	d.cfg.max_body_bytes = 2048;
	d.cfg.max_stdin_bytes = 2048;
	d.cfg.pools[0] = '\0';
	d.started_ms = now_ms();
	memcpy(d.state_tag, "0123456789abcdef", 17);
	d.accel = ACCEL_TCG;
	fuzz_event_strict();
	d.base = event_base_new();
	snprintf(db, sizeof(db), "%s/space.db", tmpdir);
	if (!d.base || store_open(&d.store, db, &err) < 0)
		fail("event base and store", err.msg);
	capacity_init(&d);
	if (listeners_start(&d, &err) < 0)
		fail("listeners", err.msg);
	add_sandbox();
	add_op(OP_ID_RUNNING, OP_RUNNING);
	add_op(OP_ID_DONE, OP_SUCCEEDED);
}

static int connect_to(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		fail("socket", strerror(errno));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS)
		fail("connect", strerror(errno));
	return fd;
}

/* Reads the daemon's replies; -1 once it closed the connection, else the bytes read. */
static ssize_t read_replies(int fd)
{
	static uint8_t sink[1 << 16];
	static int show = -1;
	ssize_t total = 0;

	if (show < 0)
		show = getenv("FUZZ_SHOW") && !strcmp(getenv("FUZZ_SHOW"), "1");
	for (;;) {
		ssize_t r = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);

		if (r > 0) {
			if (show)
				fwrite(sink, 1, (size_t)r, stderr);
			total += r;
			continue;
		}
		if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			return -1;
		return total;
	}
}

static void send_some(int fd, const uint8_t *data, size_t size, size_t *sent)
{
	while (*sent < size) {
		ssize_t w = send(fd, data + *sent, size - *sent, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (w <= 0)
			return;
		*sent += (size_t)w;
	}
}

/* Everything is sent, then the client waits while replies come (pipelined requests are
 * answered one after the other); after IDLE_TURNS quiet turns it hangs up its side, which
 * ends a keep-alive connection and any held request (long-poll, stream). */
static void converse(int fd, const uint8_t *data, size_t size)
{
	size_t sent = 0;
	int turns, idle = 0;
	bool hung_up = false;

	for (turns = 0; turns < MAX_TURNS; turns++) {
		ssize_t got;

		send_some(fd, data, size, &sent);
		event_base_loop(d.base, EVLOOP_NONBLOCK);
		got = read_replies(fd);
		if (got < 0)
			return;
		idle = got ? 0 : idle + 1;
		if (sent == size && idle >= IDLE_TURNS && !hung_up) {
			shutdown(fd, SHUT_WR);
			hung_up = true;
		}
	}
	fail("hang", "the daemon kept a connection whose client had gone");
}

/* The client is gone: no request of its may still be held (a stream watching a session, a
 * long-poll waiting on an operation). */
static void left_nothing_behind(void)
{
	for (struct session *s = sb.sessions; s; s = s->next)
		if (s->watches)
			fail("leak", "a session is still watched after its client left");
	if (d.op_waiters)
		fail("leak", "an operation is still waited on after its client left");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd;

	if (size < 1)
		return 0;
	if (!d.base)
		setup_once();
	fresh_sessions();
	fd = connect_to(ports[data[0] & 1]);
	converse(fd, data + 1, size - 1);
	close(fd);
	/* Let the daemon see the close of a connection it still holds. */
	for (int i = 0; i < 4; i++)
		event_base_loop(d.base, EVLOOP_NONBLOCK);
	left_nothing_behind();
	return 0;
}
