/* test_qmp.c -- QMP client against a fake QEMU on a socketpair: handshake, ids, errors, close */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/vmm/proc.h"
#include "daemon/vmm/qmp.h"
#include "harness.h"

static struct event_base *base;

struct got {
	int calls;
	char reply[256];
	char error[256];
	bool was_null;
};

static void on_reply(json_t *reply, const char *error, void *arg)
{
	struct got *g = arg;
	char *s = reply ? json_dumps(reply, JSON_COMPACT) : NULL;

	g->calls++;
	g->was_null = reply == NULL;
	snprintf(g->reply, sizeof(g->reply), "%s", s ? s : "");
	snprintf(g->error, sizeof(g->error), "%s", error ? error : "");
	free(s);
}

static int closed_calls, events;
static char last_event[64];

static void on_closed(const char *why, void *arg)
{
	(void)why;
	(void)arg;
	closed_calls++;
}

static void on_event(const char *ev, json_t *data, void *arg)
{
	(void)data;
	(void)arg;
	events++;
	snprintf(last_event, sizeof(last_event), "%s", ev);
}

static void pump(void)
{
	for (int i = 0; i < 20; i++) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		usleep(1000);
	}
}

static void put(int fd, const char *s)
{
	size_t n = strlen(s);
	if (write(fd, s, n) != (ssize_t)n)
		abort();
}

/* Everything the client wrote so far (non-blocking read). */
static void drain(int fd, char *buf, size_t len)
{
	ssize_t n = recv(fd, buf, len - 1, MSG_DONTWAIT);
	buf[n > 0 ? n : 0] = '\0';
}

/* The id of the command `cmd` in the client's output, or -1. */
static long id_of(const char *out, const char *cmd)
{
	char needle[96];
	snprintf(needle, sizeof(needle), "\"execute\":\"%s\"", cmd);
	const char *p = strstr(out, needle);
	if (!p)
		return -1;
	const char *line_end = strchr(p, '\n');
	const char *line_start = p;
	while (line_start > out && line_start[-1] != '\n')
		line_start--;
	char line[512];
	snprintf(line, sizeof(line), "%.*s", (int)(line_end - line_start), line_start);
	json_t *j = json_loads(line, 0, NULL);
	long id = json_is_integer(json_object_get(j, "id")) ? (long)json_integer_value(json_object_get(j, "id")) : -1;
	json_decref(j);
	return id;
}

static void test_handshake_and_replies(void)
{
	int sv[2];
	char out[4096], line[256];
	space_err err = { 0 };
	char version[32] = "";

	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	/* QEMU greets, may emit an event, answers capabilities; the event
	 * after that belongs to the async client. */
	put(sv[1], "{\"QMP\": {\"version\": {\"qemu\": {\"micro\": 22, \"minor\": 2, \"major\": 7}}, \"capabilities\": []}}\r\n");
	put(sv[1], "{\"event\": \"EARLY\", \"timestamp\": {}}\r\n");
	put(sv[1], "{\"return\": {}, \"id\": \"space-caps\"}\r\n");
	put(sv[1], "{\"event\": \"LATER\", \"data\": {}, \"timestamp\": {}}\r\n");
	CHECK(qmp_handshake(sv[0], -1, mono_ms() + 1000, version, sizeof(version), &err) == 0,
	      "handshake succeeds (%s)", err.msg);
	CHECK(strcmp(version, "7.2.22") == 0, "greeting version parsed: %s", version);
	drain(sv[1], out, sizeof(out));
	CHECK(strstr(out, "\"qmp_capabilities\"") != NULL, "handshake sent qmp_capabilities");

	struct qmp *q = qmp_new(base, sv[0], true, "t", &err);
	CHECK(q != NULL, "qmp_new");
	qmp_set_handlers(q, on_event, on_closed, NULL);
	struct got a = { 0 }, b = { 0 }, c = { 0 };
	CHECK(qmp_send(q, "query-status", NULL, on_reply, &a, &err) == 0, "send query-status");
	CHECK(qmp_send(q, "bogus", json_pack("{s:i}", "x", 1), on_reply, &b, &err) == 0, "send bogus with args");
	CHECK(qmp_send(q, "third", NULL, on_reply, &c, &err) == 0, "send third");
	pump();
	CHECK(events == 1 && strcmp(last_event, "LATER") == 0, "event after the handshake reaches the client");
	drain(sv[1], out, sizeof(out));
	long ia = id_of(out, "query-status"), ib = id_of(out, "bogus");
	CHECK(ia > 0 && ib > 0 && ia != ib, "commands carry distinct ids (%ld, %ld)", ia, ib);
	CHECK(strstr(out, "\"arguments\":{\"x\":1}") != NULL, "arguments are sent");
	/* Answer out of order: ids decide. */
	snprintf(line, sizeof(line), "{\"error\": {\"class\": \"CommandNotFound\", \"desc\": \"no bogus\"}, \"id\": %ld}\r\n", ib);
	put(sv[1], line);
	snprintf(line, sizeof(line), "{\"return\": {\"running\": true}, \"id\": %ld}\r\n", ia);
	put(sv[1], line);
	pump();
	CHECK(a.calls == 1 && strcmp(a.reply, "{\"running\":true}") == 0 && !a.error[0],
	      "query-status got its return value");
	CHECK(b.calls == 1 && strcmp(b.error, "CommandNotFound: no bogus") == 0 && strstr(b.reply, "no bogus"),
	      "bogus got the error (%s)", b.error);
	CHECK(c.calls == 0, "third still pending");
	close(sv[1]);
	pump();
	CHECK(c.calls == 1 && c.was_null && c.error[0], "pending command failed on close (%s)", c.error);
	CHECK(closed_calls == 1, "on_closed once");
	CHECK(!qmp_is_open(q), "closed");
	CHECK(qmp_send(q, "late", NULL, on_reply, &c, &err) < 0 && err.code == ENOTCONN, "send after close fails");
	qmp_free(q);
}

static void test_handshake_failures(void)
{
	int sv[2], p[2];
	space_err err = { 0 };

	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	int64_t t0 = mono_ms();
	CHECK(qmp_handshake(sv[0], -1, mono_ms() + 100, NULL, 0, &err) < 0 && err.code == ETIMEDOUT,
	      "silent peer: times out");
	CHECK(mono_ms() - t0 < 1000, "timeout is bounded");
	close(sv[1]);
	CHECK(qmp_handshake(sv[0], -1, mono_ms() + 100, NULL, 0, &err) < 0 && err.code == ECONNRESET,
	      "closed peer: ECONNRESET");
	close(sv[0]);

	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	if (pipe(p) < 0)
		abort();
	put(p[1], "x"); /* the watched fd (a pidfd in real use) is readable: QEMU died */
	CHECK(qmp_handshake(sv[0], p[0], mono_ms() + 1000, NULL, 0, &err) < 0 && err.code == ECHILD,
	      "watched fd readable: ECHILD");
	close(p[0]);
	close(p[1]);
	put(sv[1], "{\"return\": {}}\n");
	CHECK(qmp_handshake(sv[0], -1, mono_ms() + 1000, NULL, 0, &err) < 0 && err.code == EPROTO,
	      "no greeting: EPROTO");
	close(sv[0]);
	close(sv[1]);
}

static void test_queued_until_caps(void)
{
	int sv[2];
	char out[4096];
	space_err err = { 0 };
	struct got a = { 0 };

	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	struct qmp *q = qmp_new(base, sv[0], false, "t2", &err);
	CHECK(qmp_send(q, "early", NULL, on_reply, &a, &err) == 0, "send before greeting");
	pump();
	drain(sv[1], out, sizeof(out));
	CHECK(out[0] == '\0', "nothing written before the greeting");
	put(sv[1], "{\"QMP\": {\"version\": {}, \"capabilities\": []}}\r\n");
	pump();
	drain(sv[1], out, sizeof(out));
	CHECK(strstr(out, "qmp_capabilities") && !strstr(out, "early"), "capabilities first, command held");
	put(sv[1], "{\"return\": {}, \"id\": \"space-caps\"}\r\n");
	pump();
	drain(sv[1], out, sizeof(out));
	CHECK(strstr(out, "\"early\"") != NULL, "held command written after the capabilities reply");
	/* A reply without id (QEMU could not parse our input) goes to the oldest. */
	put(sv[1], "{\"error\": {\"class\": \"GenericError\", \"desc\": \"JSON parse error\"}}\r\n");
	pump();
	CHECK(a.calls == 1 && strstr(a.error, "JSON parse error"), "id-less reply answers the oldest command");
	qmp_free(q);
	close(sv[1]);
}

/* A callback that frees the client while it is dispatching. */
static struct qmp *victim;
static int freeing_calls;
static void free_in_cb(json_t *reply, const char *error, void *arg)
{
	(void)reply;
	(void)error;
	(void)arg;
	freeing_calls++;
	qmp_free(victim);
}

static void test_free_inside_callback(void)
{
	int sv[2];
	char out[4096], line[512];
	space_err err = { 0 };

	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	victim = qmp_new(base, sv[0], true, "t3", &err);
	qmp_send(victim, "one", NULL, free_in_cb, NULL, &err);
	qmp_send(victim, "two", NULL, free_in_cb, NULL, &err);
	pump();
	drain(sv[1], out, sizeof(out));
	long i1 = id_of(out, "one"), i2 = id_of(out, "two");
	snprintf(line, sizeof(line), "{\"return\": {}, \"id\": %ld}\r\n{\"return\": {}, \"id\": %ld}\r\n", i1, i2);
	put(sv[1], line);
	pump();
	CHECK(freeing_calls == 1, "after qmp_free in a callback no further callback runs (ASan: no UAF)");
	close(sv[1]);

	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	victim = qmp_new(base, sv[0], true, "t4", &err);
	freeing_calls = 0;
	qmp_send(victim, "one", NULL, free_in_cb, NULL, &err);
	qmp_send(victim, "two", NULL, free_in_cb, NULL, &err);
	pump();
	put(sv[1], "this is not json\r\n");
	pump();
	CHECK(freeing_calls == 1, "protocol error fails pending; free in that callback stops the rest");
	close(sv[1]);
}

static void test_close_explicit(void)
{
	int sv[2];
	space_err err = { 0 };
	struct got a = { 0 };

	closed_calls = 0;
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	struct qmp *q = qmp_new(base, sv[0], true, "t5", &err);
	qmp_set_handlers(q, NULL, on_closed, NULL);
	qmp_send(q, "x", NULL, on_reply, &a, &err);
	qmp_close(q, "QEMU exited");
	CHECK(a.calls == 1 && strcmp(a.error, "QEMU exited") == 0, "qmp_close fails pending with the reason");
	CHECK(closed_calls == 0, "qmp_close does not call on_closed");
	qmp_free(q);
	close(sv[1]);
}

int main(void)
{
	base = event_base_new();
	RUN(test_handshake_and_replies);
	RUN(test_handshake_failures);
	RUN(test_queued_until_caps);
	RUN(test_free_inside_callback);
	RUN(test_close_explicit);
	event_base_free(base);
	return DONE();
}
