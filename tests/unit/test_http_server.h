/* test_http_server.h -- a real listener in the test process for test_ws.c and test_http_stream.c:
 * the daemon's own http_listen() and conn.c on 127.0.0.1:0, with the test's routes, and a client
 * in a second thread speaking raw bytes on blocking sockets (the event loop stays in the main
 * thread; the client thread touches nothing of libevent's but a pipe that ends the loop).
 * Checks made in the client thread use CHECK (the main thread makes none meanwhile). */
#ifndef SPACE_TEST_HTTP_SERVER_H
#define SPACE_TEST_HTTP_SERVER_H

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <event2/http.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include "daemon/daemon.h"
#include "daemon/http/http.h"
#include "harness.h"

struct test_server {
	struct spaced d;
	struct http_plane plane;
	struct evhttp *http;
	uint16_t port;
	int done_pipe[2];
	struct event *done_ev, *watchdog;
	void (*client)(struct test_server *ts);
	bool timed_out;
};

static void ts_port_cb(struct evhttp_bound_socket *b, void *arg)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);

	if (getsockname(evhttp_bound_socket_get_fd(b), (struct sockaddr *)&sin, &len) == 0)
		*(uint16_t *)arg = ntohs(sin.sin_port);
}

/* Starts a listener for plane (routes etc. filled by the caller; name, d and max_body are set). */
static int ts_start(struct test_server *ts, const struct http_limits *lim)
{
	space_err err = { 0 };

	signal(SIGPIPE, SIG_IGN);
	ts->d.base = event_base_new();
	ts->d.conns = http_conns_new(ts->d.base, lim);
	ts->plane.d = &ts->d;
	if (!ts->plane.name)
		ts->plane.name = "test";
	if (!ts->plane.max_body)
		ts->plane.max_body = 1u << 20;
	ts->http = http_listen(ts->d.base, "127.0.0.1:0", &ts->plane, &err);
	if (!ts->http) {
		printf("# http_listen: %s\n", err.msg);
		return -1;
	}
	evhttp_foreach_bound_socket(ts->http, ts_port_cb, &ts->port);
	return ts->port ? 0 : -1;
}

static void ts_stop(struct test_server *ts)
{
	evhttp_free(ts->http);
	http_conns_free(ts->d.conns);
	/* Runs what evhttp_free left to finalize (bufferevents). */
	event_base_loop(ts->d.base, EVLOOP_NONBLOCK);
	event_base_free(ts->d.base);
}

static void ts_done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct test_server *ts = arg;
	char c;

	(void)what;
	(void)!read(fd, &c, 1);
	event_base_loopbreak(ts->d.base);
}

static void ts_watchdog_cb(evutil_socket_t fd, short what, void *arg)
{
	struct test_server *ts = arg;

	(void)fd;
	(void)what;
	ts->timed_out = true;
	printf("# watchdog: the client took too long\n");
	event_base_loopbreak(ts->d.base);
}

static void *ts_thread(void *arg)
{
	struct test_server *ts = arg;

	ts->client(ts);
	(void)!write(ts->done_pipe[1], "x", 1);
	return NULL;
}

/* Runs client(ts) in a thread while the loop serves; returns once it has finished. */
static void ts_run_client(struct test_server *ts, void (*client)(struct test_server *ts), int timeout_s)
{
	struct timeval tv = { .tv_sec = timeout_s };
	pthread_t th;

	ts->client = client;
	if (pipe(ts->done_pipe) < 0)
		abort();
	ts->done_ev = event_new(ts->d.base, ts->done_pipe[0], EV_READ, ts_done_cb, ts);
	ts->watchdog = evtimer_new(ts->d.base, ts_watchdog_cb, ts);
	event_add(ts->done_ev, NULL);
	evtimer_add(ts->watchdog, &tv);
	pthread_create(&th, NULL, ts_thread, ts);
	event_base_dispatch(ts->d.base);
	if (ts->timed_out) { /* the client is stuck in a read: its sockets time out (SO_RCVTIMEO) */
		event_del(ts->watchdog);
		event_base_dispatch(ts->d.base);
	}
	pthread_join(th, NULL);
	event_free(ts->done_ev);
	event_free(ts->watchdog);
	close(ts->done_pipe[0]);
	close(ts->done_pipe[1]);
}

static void ts_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
}

/* Runs the loop until cond(arg) or timeout_ms; returns cond's last answer. */
static bool ts_spin_until(struct test_server *ts, bool (*cond)(struct test_server *ts), int timeout_ms)
{
	struct event *tick = event_new(ts->d.base, -1, EV_PERSIST, ts_tick_cb, NULL);
	struct timeval tv = { .tv_usec = 10000 };

	event_add(tick, &tv);
	for (int i = 0; i < timeout_ms / 10 && !cond(ts); i++)
		event_base_loop(ts->d.base, EVLOOP_ONCE);
	event_free(tick);
	return cond(ts);
}

static bool ts_no_conns(struct test_server *ts)
{
	return http_conns_count(ts->d.conns) == 0;
}

static int ts_freed_cb(const struct event_base *base, const struct event *ev, void *arg)
{
	(void)base;
#if defined(__SANITIZE_ADDRESS__)
	if (__asan_address_is_poisoned(ev)) {
		struct timeval tv = { 0 }, now;

		gettimeofday(&now, NULL);
		if (event_pending(ev, EV_TIMEOUT, &tv))
			printf("# a freed event is in the loop: %p, a timer due in %ld s\n", (const void *)ev,
			       (long)(tv.tv_sec - now.tv_sec));
		else
			printf("# a freed event is in the loop: %p (fd %d)\n", (const void *)ev, (int)event_get_fd(ev));
		(*(int *)arg)++;
	}
#else
	(void)ev;
	(void)arg;
#endif
	return 0;
}

/* Events the loop still holds (added or active) in memory that has been freed: a bufferevent freed
 * with its timeout in the timer heap leaves one, and the loop runs it on freed memory when it is
 * due. Needs ASan (the unit tests' build); 0 without it. */
static int ts_freed_events(struct test_server *ts)
{
	int n = 0;

	event_base_foreach_event(ts->d.base, ts_freed_cb, &n);
	return n;
}

/* Runs the loop for ms of wall-clock time: past the timers a connection left behind (with
 * http_timeout_s shortened, past every HTTP timeout). */
static void ts_run_for(struct test_server *ts, int ms)
{
	struct event *tick = event_new(ts->d.base, -1, EV_PERSIST, ts_tick_cb, NULL);
	struct timeval tv = { .tv_usec = 10000 };
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	event_add(tick, &tv);
	do {
		event_base_loop(ts->d.base, EVLOOP_ONCE);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
	event_free(tick);
}

/* ---- the client's side (blocking sockets, in the client thread) ---- */

static int cl_connect(uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct timeval tv = { .tv_sec = 20 };
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static int cl_send(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int cl_sends(int fd, const char *s)
{
	return cl_send(fd, s, strlen(s));
}

/* Exactly len bytes; -1 on EOF, error or timeout. */
static int cl_recv(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = recv(fd, p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Whether the server closes: recv sees EOF (or a reset) within the socket's timeout. */
static bool cl_eof(int fd)
{
	char c;
	ssize_t n;

	do
		n = recv(fd, &c, 1, 0);
	while (n < 0 && errno == EINTR);
	return n == 0 || (n < 0 && errno == ECONNRESET);
}

/* A response head, up to and including its empty line; NUL-terminated. */
static int cl_head(int fd, char *out, size_t cap)
{
	size_t n = 0;

	while (n + 1 < cap) {
		if (cl_recv(fd, out + n, 1) < 0)
			return -1;
		n++;
		if (n >= 4 && memcmp(out + n - 4, "\r\n\r\n", 4) == 0) {
			out[n] = '\0';
			return 0;
		}
	}
	return -1;
}

static const char *cl_header(const char *head, const char *name, char *val, size_t cap)
{
	size_t nl = strlen(name);

	for (const char *p = strstr(head, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
		const char *l = p + 2;
		if (strncasecmp(l, name, nl) == 0 && l[nl] == ':') {
			const char *v = l + nl + 1, *e = strstr(v, "\r\n");
			while (*v == ' ')
				v++;
			size_t n = (size_t)(e - v) < cap - 1 ? (size_t)(e - v) : cap - 1;
			memcpy(val, v, n);
			val[n] = '\0';
			return val;
		}
	}
	return NULL;
}

/* One whole response: status, head (optional) and body (malloc'd, NUL-terminated; Content-Length
 * or chunked). -1 on a broken response. */
static int cl_response(int fd, int *status, char *head, size_t headcap, char **body, size_t *blen)
{
	char h[8192], v[64];
	char *b = NULL;
	size_t n = 0, cap = 0;

	if (cl_head(fd, h, sizeof(h)) < 0 || sscanf(h, "HTTP/1.%*d %d", status) != 1)
		return -1;
	if (head)
		snprintf(head, headcap, "%s", h);
	if (cl_header(h, "Content-Length", v, sizeof(v))) {
		n = strtoull(v, NULL, 10);
		b = malloc(n + 1);
		if (!b || cl_recv(fd, b, n) < 0) {
			free(b);
			return -1;
		}
	} else if (cl_header(h, "Transfer-Encoding", v, sizeof(v))) {
		for (;;) {
			char line[64];
			size_t i = 0, sz;
			while (i < sizeof(line) - 1 && cl_recv(fd, line + i, 1) == 0 && line[i] != '\n')
				i++;
			line[i] = '\0';
			sz = strtoull(line, NULL, 16);
			if (sz == 0) {
				(void)cl_recv(fd, line, 2);
				break;
			}
			if (n + sz + 1 > cap) { /* doubling: a realloc per chunk would copy O(n^2) */
				char *nb;
				cap = cap ? cap : 65536;
				while (cap < n + sz + 1)
					cap *= 2;
				nb = realloc(b, cap);
				if (!nb) {
					free(b);
					return -1;
				}
				b = nb;
			}
			if (cl_recv(fd, b + n, sz) < 0 || cl_recv(fd, line, 2) < 0) {
				free(b);
				return -1;
			}
			n += sz;
		}
	}
	if (!b)
		b = malloc(1);
	b[n] = '\0';
	if (body)
		*body = b;
	else
		free(b);
	if (blen)
		*blen = n;
	return 0;
}

#endif
