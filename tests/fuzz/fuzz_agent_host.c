/* fuzz_agent_host.c -- libFuzzer target: what a (compromised) guest agent sends the daemon, through
 * the daemon's real host end of the agent channel (src/daemon/sandbox/agent.c: header checks,
 * resynchronisation before A_HELLO, dispatch) into the sessions it drives (session.c: output
 * into the spool, H_ACK, exits, stdin acks) -- no VM.
 *
 * As in tests/unit/test_daemon_agent.c: a minimal spaced (event loop, a real SQLite store in a
 * temporary state directory made once per process) with one running sandbox and three
 * sessions: channel 7 running with 96 KiB of stdin queued and closed after it (two H_STDIN
 * frames, then H_STDIN_CLOSE), channel 8 created and waiting to start (A_HELLO sends its
 * H_EXEC), channel 9 exited (A_HELLO releases it).  For each input the daemon connects to our unix socket where QEMU's
 * chardev would be (agent_new), we accept, send the input and hang up, and the loop runs
 * until the daemon has read everything and dropped the connection.  The session is made
 * afresh (new spool) for every input so each runs against the same state. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>

#include "daemon/daemon.h"
#include "daemon/sandbox/runtime.h"
#include "daemon/store/store.h"
#include "fuzz_tmp.h"
#include "fuzz_event.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHAN 7
/* Loop turns after which an input that has not ended its connection is a hang. */
#define MAX_TURNS 100000

static struct spaced d;
static struct sandbox sb;
static struct session_rec srec[3];
static int lfd = -1;
static char tmpdir[64], sock_path[128];

static void fail(const char *what, const char *msg)
{
	fprintf(stderr, "fuzz_agent_host: %s: %s\n", what, msg);
	abort();
}

static void add_template(const char *digest)
{
	struct template_rec t = { 0 };
	space_err err = { 0 };

	snprintf(t.digest, sizeof(t.digest), "%s", digest);
	snprintf(t.name, sizeof(t.name), "minimal");
	snprintf(t.dir, sizeof(t.dir), "%s", tmpdir);
	snprintf(t.default_user, sizeof(t.default_user), "root");
	t.vcpus = 1;
	t.memory_mib = 256;
	t.created_ms = now_ms();
	t.image_bytes = 1;
	if (store_template_put(d.store, &t, &err) < 0)
		fail("template row", err.msg);
}

static void add_sandbox(void)
{
	space_err err = { 0 };
	char path[PATH_MAX];

	sb.d = &d;
	id_new(sb.rec.id, "sb-");
	sb.rec.state = SB_RUNNING;
	snprintf(sb.rec.template_ref, sizeof(sb.rec.template_ref), "minimal");
	snprintf(sb.rec.template_digest, sizeof(sb.rec.template_digest), "sha256:%064d", 0);
	sb.rec.vcpus = 1;
	sb.rec.memory_mib = 256;
	sb.rec.created_ms = sb.rec.updated_ms = now_ms();
	sb.rec.next_chan = CHAN + 1;
	/* Brought up already: A_HELLO must not start the identity step. */
	sb.identity_done = true;
	if (store_sandbox_put(d.store, &sb.rec, &err) < 0)
		fail("sandbox row", err.msg);
	d.sandboxes = &sb;
	snprintf(path, sizeof(path), "%s/sandboxes", tmpdir);
	mkdir(path, 0700);
	path_run_dir(&d, sb.rec.id, path);
	mkdir(path, 0700);
}

static void setup_once(void)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	space_err err = { 0 };
	char path[PATH_MAX];

	log_set_level(LOG_ERROR);
	if (!fuzz_tmpdir("agent"))
		fail("mkdtemp", strerror(errno));
	snprintf(tmpdir, sizeof(tmpdir), "%s", fuzz_tmp_path);
	fuzz_event_strict();
	d.base = event_base_new();
	snprintf(d.cfg.state_dir, sizeof(d.cfg.state_dir), "%s", tmpdir);
	snprintf(path, sizeof(path), "%s/state.db", tmpdir);
	if (!d.base || store_open(&d.store, path, &err) < 0)
		fail("event base and store", err.msg);
	add_template("sha256:0000000000000000000000000000000000000000000000000000000000000000");
	add_sandbox();

	for (int i = 0; i < 3; i++) {
		struct session_rec *r = &srec[i];

		id_new(r->id, "ss-");
		snprintf(r->sandbox_id, sizeof(r->sandbox_id), "%s", sb.rec.id);
		r->chan = CHAN + (uint32_t)i;
		r->argv = json_pack("[ss]", "cat", "-");
		r->env = json_pack("{ss}", "A", "1");
		r->stdin_open = i == 0;
		r->state = i == 0 ? SESS_RUNNING : i == 1 ? SESS_CREATED : SESS_EXITED;
		r->created_ms = r->started_ms = now_ms();
	}

	snprintf(sock_path, sizeof(sock_path), "%s/agent.sock", tmpdir);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", sock_path);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sun, sizeof(sun)) < 0 || listen(lfd, 4) < 0)
		fail("listening", strerror(errno));
}

/* The sessions as the daemon holds them after a restart: fresh spools, stdin queued. */
static void fresh_sessions(void)
{
	static uint8_t input[96 << 10];
	space_err err = { 0 };
	char spool[PATH_MAX];

	sessions_free(&sb);
	for (int i = 0; i < 3; i++) {
		struct session *s;

		path_session_spool(&d, sb.rec.id, srec[i].id, spool);
		unlink(spool);
		if (store_session_put(d.store, &srec[i], &err) < 0)
			fail("session row", err.msg);
		s = session_alloc(&sb, &srec[i], &err);
		if (!s)
			fail("session", err.msg);
		if (i == 0 && session_stdin(s, input, sizeof(input), 1, &err) < 0)
			fail("stdin", err.msg);
		if (i == 1)
			s->start_wanted = true;
	}
}

/* Writes what the socket takes now; the rest is sent on later turns. */
static void push(int fd, const uint8_t *data, size_t size, size_t *sent)
{
	while (*sent < size) {
		ssize_t w = send(fd, data + *sent, size - *sent, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (w <= 0)
			return;
		*sent += (size_t)w;
	}
}

/* Reads and discards what the daemon sent; true once it closed its end. */
static int closed_by_daemon(int fd)
{
	static uint8_t sink[1 << 16];

	for (;;) {
		ssize_t r = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);

		if (r > 0)
			continue;
		return r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
	}
}

static int accept_daemon(void)
{
	for (int i = 0; i < MAX_TURNS; i++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd >= 0)
			return fd;
		event_base_loop(d.base, EVLOOP_NONBLOCK);
	}
	fail("accept", "the daemon did not connect to the agent socket");
	return -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t sent = 0;
	int fd, turns;

	if (lfd < 0)
		setup_once();
	fresh_sessions();
	sb.agent = agent_new(&sb, sock_path);
	if (!sb.agent)
		fail("agent_new", "NULL");
	fd = accept_daemon();
	for (turns = 0; turns < MAX_TURNS; turns++) {
		push(fd, data, size, &sent);
		if (sent == size)
			shutdown(fd, SHUT_WR);
		event_base_loop(d.base, EVLOOP_NONBLOCK);
		if (closed_by_daemon(fd))
			break;
	}
	if (turns == MAX_TURNS)
		fail("hang", "the daemon neither read the input to its end nor dropped the connection");
	close(fd);
	agent_free(sb.agent);
	sb.agent = NULL;
	return 0;
}
