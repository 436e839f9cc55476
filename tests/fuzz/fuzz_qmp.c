/* fuzz_qmp.c -- libFuzzer target: what QEMU (or something posing as it) says on the QMP socket,
 * through the daemon's QMP client (src/daemon/vmm/qmp.c): the blocking start-up handshake,
 * then the asynchronous client -- line splitting, classification, greeting and capabilities
 * negotiation, replies matched to commands by id, events, errors -- over a socketpair.
 *
 * The first input byte picks the mode:
 *   bit 0  the asynchronous client starts negotiated (as after qmp_handshake)
 *   bit 1  qmp_handshake reads the start of the stream first, the client takes the rest
 *          (a newline is appended so a partial last line ends at once: see fuzzing.md)
 *   bit 2  the first reply callback frees the client (allowed from inside a callback)
 *   bit 3  the first event callback closes the client
 * Three commands are queued (one passing a descriptor, as getfd does).  Checked beyond the
 * sanitizers: every command's callback runs at most once, and exactly once when the
 * connection ended before the client was freed. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "fuzz_event.h"
#include "log.h"
#include "vmm/proc.h"
#include "vmm/qmp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NCMD 3
#define MAX_TURNS 100000

#define MUST(c) do { if (!(c)) { fprintf(stderr, "fuzz_qmp: %s:%d: %s\n", __FILE__, __LINE__, #c); abort(); } } while (0)

static struct event_base *base;

struct run {
	struct qmp *q;
	unsigned mode;
	int calls[NCMD];
	bool closed, freed;
};

static struct run *cur;

static void on_reply(json_t *reply, const char *error, void *arg)
{
	int i = (int)(intptr_t)arg;

	MUST(i >= 0 && i < NCMD);
	MUST(reply || error); /* a success has a value, a failure a reason */
	cur->calls[i]++;
	if ((cur->mode & 4) && !cur->freed) {
		cur->freed = true;
		qmp_free(cur->q);
	}
}

static void on_event(const char *event, json_t *ev_data, void *arg)
{
	(void)event;
	(void)ev_data;
	(void)arg;
	if ((cur->mode & 8) && !cur->freed)
		qmp_close(cur->q, "the test closes on the first event");
}

static void on_closed(const char *why, void *arg)
{
	(void)arg;
	MUST(why && *why);
	MUST(!cur->closed);
	cur->closed = true;
}

static void queue_commands(struct run *r)
{
	space_err err = { 0 };
	int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	qmp_send(r->q, "query-status", NULL, on_reply, (void *)0, &err);
	qmp_send(r->q, "stop", json_pack("{s:b}", "force", 1), on_reply, (void *)1, &err);
	if (null_fd >= 0)
		qmp_send_fd(r->q, "getfd", json_pack("{s:s}", "fdname", "mem"), null_fd, on_reply, (void *)2,
			    &err);
	else
		r->calls[2] = 1;
}

/* Puts the input into the socket (all of it: inputs are far below a socket buffer) and
 * hangs up, so a reader wanting more sees EOF instead of waiting. */
static void feed(int peer, const uint8_t *data, size_t size, bool newline)
{
	size_t sent = 0;

	while (sent < size) {
		ssize_t w = send(peer, data + sent, size - sent, MSG_NOSIGNAL);

		if (w <= 0)
			break;
		sent += (size_t)w;
	}
	if (newline)
		send(peer, "\n", 1, MSG_NOSIGNAL);
	shutdown(peer, SHUT_WR);
}

/* The blocking handshake reads the lines it wants; the rest stays for the client. */
static void handshake(int fd)
{
	char version[64];
	space_err err = { 0 };
	int rc = qmp_handshake(fd, -1, mono_ms() + 5000, version, sizeof(version), &err);

	MUST(rc == 0 || (rc == -1 && err.code && err.msg[0]));
	MUST(err.code != ETIMEDOUT); /* the stream ends: it must never need the deadline */
}

static void drain(int fd)
{
	static uint8_t sink[1 << 16];

	while (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0)
		;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct run r = { 0 };
	space_err err = { 0 };
	int sv[2], turns;

	if (size < 1)
		return 0;
	if (!base) {
		log_set_level(LOG_ERROR);
	fuzz_event_strict();
		base = event_base_new();
		if (!base)
			abort();
	}
	r.mode = data[0];
	cur = &r;
	/* Blocking: qmp_handshake reads a blocking socket, the client makes it non-blocking. */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	feed(sv[1], data + 1, size - 1, r.mode & 2);
	if (r.mode & 2)
		handshake(sv[0]);
	evutil_make_socket_nonblocking(sv[0]);
	r.q = qmp_new(base, sv[0], r.mode & 1, "fuzz", &err);
	MUST(r.q != NULL);
	qmp_set_handlers(r.q, on_event, on_closed, NULL);
	queue_commands(&r);
	for (turns = 0; turns < MAX_TURNS && !r.freed && !r.closed && qmp_is_open(r.q); turns++) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		drain(sv[1]);
	}
	MUST(turns < MAX_TURNS); /* EOF always ends the client */
	for (int i = 0; i < NCMD; i++) {
		MUST(r.calls[i] <= 1);
		MUST(r.freed || r.calls[i] == 1);
	}
	if (!r.freed)
		qmp_free(r.q);
	close(sv[1]);
	cur = NULL;
	return 0;
}
