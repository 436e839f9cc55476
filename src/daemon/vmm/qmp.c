/* qmp.c -- asynchronous QMP client: greeting, capabilities, id-matched command replies */
#include "qmp.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "proc.h"

/* QEMU's replies are small (query-* a few KiB); a line longer than this is a
 * broken peer, not a reply worth buffering. */
#define QMP_MAX_LINE (8u << 20)
#define QMP_CAPS_ID "space-caps"

struct qmp_req {
	struct qmp_req *next;
	json_int_t id;
	char *line;   /* serialised command, NULL once written */
	int fd;       /* sent along with the line (SCM_RIGHTS), -1 if none; ours until sent */
	qmp_reply_cb cb;
	void *arg;
};

enum qmp_state { Q_GREETING, Q_CAPS, Q_READY, Q_CLOSED };

struct qmp {
	struct bufferevent *bev;
	int fd; /* closed by us, at once: libevent defers a bufferevent's own close */
	enum qmp_state state;
	struct qmp_req *head, *tail; /* in send order: written ones first */
	json_int_t next_id;
	qmp_event_cb on_event;
	qmp_closed_cb on_closed;
	void *arg;
	/* Callbacks may call qmp_free(): while depth > 0 the free is only
	 * recorded and done by the outermost caller (Redis ae's deferred
	 * deletion). */
	int depth;
	bool free_pending;
	struct event *retry; /* a descriptor could not be sent yet (EAGAIN) */
	char name[64];
};

enum qmp_msg qmp_classify(json_t *msg)
{
	if (!json_is_object(msg))
		return QMP_MSG_BAD_JSON;
	if (json_object_get(msg, "QMP"))
		return QMP_MSG_GREETING;
	if (json_object_get(msg, "return"))
		return QMP_MSG_RETURN;
	if (json_is_object(json_object_get(msg, "error")))
		return QMP_MSG_ERROR;
	if (json_is_string(json_object_get(msg, "event")))
		return QMP_MSG_EVENT;
	return QMP_MSG_UNKNOWN;
}

const char *qmp_msg_name(enum qmp_msg m)
{
	switch (m) {
	case QMP_MSG_GREETING:
		return "greeting";
	case QMP_MSG_RETURN:
		return "return";
	case QMP_MSG_ERROR:
		return "error";
	case QMP_MSG_EVENT:
		return "event";
	case QMP_MSG_BAD_JSON:
		return "bad json";
	case QMP_MSG_UNKNOWN:
		return "unknown message";
	}
	return "?";
}

static void greeting_version(json_t *msg, char *version, size_t vlen)
{
	json_t *q = json_object_get(json_object_get(json_object_get(msg, "QMP"), "version"), "qemu");

	if (version && vlen)
		snprintf(version, vlen, "%d.%d.%d",
			 (int)json_integer_value(json_object_get(q, "major")),
			 (int)json_integer_value(json_object_get(q, "minor")),
			 (int)json_integer_value(json_object_get(q, "micro")));
}

/* Blocking, bounded read of exactly one line (peek, then consume up to the
 * newline: what follows belongs to the asynchronous client). */
static int sync_read_line(int fd, int watch_fd, int64_t deadline_ms, char *buf, size_t size,
			  space_err *err)
{
	for (;;) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = watch_fd, .events = POLLIN } };
		int left = (int)(deadline_ms - mono_ms());
		if (left <= 0)
			return err_set(err, ETIMEDOUT, "QMP did not answer in time");
		int r = poll(p, watch_fd >= 0 ? 2 : 1, left);
		if (r < 0 && errno != EINTR)
			return err_sys(err, errno, "poll");
		if (r <= 0)
			continue;
		if (watch_fd >= 0 && p[1].revents)
			return err_set(err, ECHILD, "QEMU exited during start-up");
		ssize_t n = recv(fd, buf, size - 1, MSG_PEEK);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return err_sys(err, errno, "reading QMP");
		if (n == 0)
			return err_set(err, ECONNRESET, "QEMU closed the QMP socket");
		char *nl = memchr(buf, '\n', (size_t)n);
		if (!nl) {
			if ((size_t)n == size - 1)
				return err_set(err, EPROTO, "QMP line too long");
			/* Partial line: poll is level-triggered, so pause briefly
			 * rather than spin on the same bytes. */
			usleep(1000);
			continue;
		}
		size_t len = (size_t)(nl - buf) + 1;
		if (recv(fd, buf, len, 0) != (ssize_t)len)
			return err_sys(err, errno ? errno : EIO, "reading QMP");
		buf[len] = '\0';
		return 0;
	}
}

int qmp_handshake(int fd, int watch_fd, int64_t deadline_ms, char *version, size_t vlen,
		  space_err *err)
{
	static const char caps[] = "{\"execute\":\"qmp_capabilities\",\"id\":\"" QMP_CAPS_ID "\"}\n";
	char buf[8192];

	if (sync_read_line(fd, watch_fd, deadline_ms, buf, sizeof(buf), err) < 0)
		return -1;
	json_t *msg = json_loads(buf, 0, NULL);
	enum qmp_msg kind = qmp_classify(msg);
	if (kind == QMP_MSG_GREETING)
		greeting_version(msg, version, vlen);
	json_decref(msg);
	if (kind != QMP_MSG_GREETING)
		return err_set(err, EPROTO, "expected a QMP greeting, got %s", qmp_msg_name(kind));

	/* QEMU may greet before its machine is built; commands are only
	 * dispatched by its main loop, so this reply means "fully up". */
	if (send(fd, caps, sizeof(caps) - 1, MSG_NOSIGNAL) != (ssize_t)sizeof(caps) - 1)
		return err_sys(err, errno ? errno : EIO, "sending qmp_capabilities");
	for (;;) {
		if (sync_read_line(fd, watch_fd, deadline_ms, buf, sizeof(buf), err) < 0)
			return -1;
		msg = json_loads(buf, 0, NULL);
		kind = qmp_classify(msg);
		json_decref(msg);
		if (kind == QMP_MSG_RETURN)
			return 0;
		if (kind == QMP_MSG_ERROR)
			return err_set(err, EPROTO, "qmp_capabilities refused");
		if (kind == QMP_MSG_BAD_JSON)
			return err_set(err, EPROTO, "unparsable QMP reply");
		/* events: skip */
	}
}

/* ---- lifetime ---- */

static void qmp_really_free(struct qmp *q)
{
	struct qmp_req *r = q->head;

	while (r) {
		struct qmp_req *next = r->next;
		if (r->fd >= 0)
			close(r->fd);
		free(r->line);
		free(r);
		r = next;
	}
	if (q->retry)
		event_free(q->retry);
	if (q->bev) {
		bufferevent_disable(q->bev, EV_READ | EV_WRITE); /* before the close: see shut() */
		bufferevent_free(q->bev);
	}
	if (q->fd >= 0)
		close(q->fd);
	free(q);
}

static void q_enter(struct qmp *q)
{
	q->depth++;
}

/* Returns false when q was freed (or is being freed) and must not be used. */
static bool q_leave(struct qmp *q)
{
	if (--q->depth == 0 && q->free_pending) {
		qmp_really_free(q);
		return false;
	}
	return !q->free_pending;
}

void qmp_free(struct qmp *q)
{
	if (!q)
		return;
	if (q->depth > 0) {
		q->free_pending = true;
		q->on_event = NULL;
		q->on_closed = NULL;
		return;
	}
	qmp_really_free(q);
}

bool qmp_is_open(const struct qmp *q)
{
	return q && q->state != Q_CLOSED && !q->free_pending;
}

void qmp_set_handlers(struct qmp *q, qmp_event_cb on_event, qmp_closed_cb on_closed, void *arg)
{
	q->on_event = on_event;
	q->on_closed = on_closed;
	q->arg = arg;
}

/* Fails every pending request. Callers hold a depth reference. */
static void fail_all(struct qmp *q, const char *why)
{
	struct qmp_req *r = q->head;

	q->head = q->tail = NULL;
	while (r) {
		struct qmp_req *next = r->next;
		if (r->cb && !q->free_pending)
			r->cb(NULL, why, r->arg);
		if (r->fd >= 0)
			close(r->fd);
		free(r->line);
		free(r);
		r = next;
	}
}

static void shut(struct qmp *q)
{
	q->state = Q_CLOSED;
	if (q->bev) {
		/* Inside its own callback the free is deferred, and with it the
		 * removal of the fd from epoll: stop watching the fd now, while it
		 * is still open (closed first, its number could be reused by then). */
		bufferevent_disable(q->bev, EV_READ | EV_WRITE);
		bufferevent_free(q->bev); /* safe inside its own callback */
		q->bev = NULL;
	}
	/* Close now, not when libevent finalises the bufferevent: QEMU serves
	 * one QMP client at a time and must see this one go (re-adoption). */
	if (q->fd >= 0) {
		close(q->fd);
		q->fd = -1;
	}
}

void qmp_close(struct qmp *q, const char *why)
{
	if (!q || q->state == Q_CLOSED)
		return;
	shut(q);
	q_enter(q);
	fail_all(q, why);
	q_leave(q);
}

/* Connection lost: fail what is pending, then tell the owner. */
static void lost(struct qmp *q, const char *why)
{
	if (q->state == Q_CLOSED)
		return;
	log_debug("%s: qmp connection closed: %s", q->name, why);
	shut(q);
	fail_all(q, why);
	if (q->on_closed && !q->free_pending)
		q->on_closed(why, q->arg);
}

/* ---- sending ---- */

static void write_line(struct qmp *q, char *line)
{
	bufferevent_write(q->bev, line, strlen(line));
	bufferevent_write(q->bev, "\n", 1);
}

/* Writes the line of r with its descriptor attached. QEMU takes a passed
 * descriptor from the bytes it arrives with, so the line must go out whole
 * behind everything written before it: only when the output buffer is
 * empty. Returns 1 when sent, 0 to try again later, -1 on error. */
static int send_with_fd(struct qmp *q, struct qmp_req *r)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	size_t len = strlen(r->line);
	struct iovec iov[2] = { { r->line, len }, { (char *)"\n", 1 } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2, .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c;
	ssize_t n;

	if (evbuffer_get_length(bufferevent_get_output(q->bev)) > 0)
		return 0;
	memset(cbuf, 0, sizeof(cbuf));
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &r->fd, sizeof(int));
	do
		n = sendmsg(q->fd, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
	/* The descriptor went with the first byte; the rest of a short write
	 * follows through the buffer. */
	if ((size_t)n < len + 1) {
		if ((size_t)n < len)
			bufferevent_write(q->bev, r->line + n, len - (size_t)n);
		bufferevent_write(q->bev, "\n", 1);
	}
	close(r->fd);
	r->fd = -1;
	return 1;
}

static void on_retry(evutil_socket_t fd, short what, void *arg);

/* Writes, in order, the requests not written yet; stops at one whose
 * descriptor cannot go out now (retried when the output has drained). */
static void flush_unsent(struct qmp *q)
{
	for (struct qmp_req *r = q->head; r; r = r->next) {
		if (!r->line)
			continue;
		if (r->fd >= 0) {
			int rc = send_with_fd(q, r);
			if (rc < 0) {
				lost(q, "QMP connection error while passing a descriptor");
				return;
			}
			if (rc == 0) {
				struct timeval ms = { 0, 1000 };
				if (!q->retry)
					q->retry = evtimer_new(bufferevent_get_base(q->bev), on_retry, q);
				if (q->retry)
					evtimer_add(q->retry, &ms);
				return;
			}
		} else {
			write_line(q, r->line);
		}
		free(r->line);
		r->line = NULL;
	}
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	struct qmp *q = arg;

	(void)fd;
	(void)what;
	if (q->state == Q_READY)
		flush_unsent(q);
}

static void send_caps(struct qmp *q)
{
	char line[] = "{\"execute\":\"qmp_capabilities\",\"id\":\"" QMP_CAPS_ID "\"}";

	q->state = Q_CAPS;
	write_line(q, line);
}

int qmp_send(struct qmp *q, const char *command, json_t *args, qmp_reply_cb cb, void *arg,
	     space_err *err)
{
	return qmp_send_fd(q, command, args, -1, cb, arg, err);
}

int qmp_send_fd(struct qmp *q, const char *command, json_t *args, int fd, qmp_reply_cb cb,
		void *arg, space_err *err)
{
	_cleanup_close_ int pass = fd;

	if (!qmp_is_open(q)) {
		json_decref(args);
		return err_set(err, ENOTCONN, "qmp %s: not connected", command);
	}
	json_t *msg = json_pack("{s:s, s:I}", "execute", command, "id", (json_int_t)q->next_id);
	if (!msg) {
		json_decref(args);
		return err_set(err, ENOMEM, "qmp %s: building command", command);
	}
	if (args)
		json_object_set_new(msg, "arguments", args);
	struct qmp_req *r = calloc(1, sizeof(*r));
	char *line = json_dumps(msg, JSON_COMPACT);
	json_decref(msg);
	if (!r || !line) {
		free(r);
		free(line);
		return err_set(err, ENOMEM, "qmp %s: out of memory", command);
	}
	r->id = q->next_id++;
	r->cb = cb;
	r->arg = arg;
	r->fd = steal_fd(&pass);
	r->line = line; /* written now if the connection is ready, else once qmp_capabilities succeeded */
	if (q->tail)
		q->tail->next = r;
	else
		q->head = r;
	q->tail = r;
	if (q->state == Q_READY)
		flush_unsent(q);
	return 0;
}

/* ---- receiving ---- */

/* The request a reply answers: by id, else (a reply QEMU could not tie to
 * a command, e.g. to unparsable input) the oldest written one. */
static struct qmp_req *take_req(struct qmp *q, json_t *id)
{
	struct qmp_req **pp = &q->head, *prev = NULL;

	for (; *pp; prev = *pp, pp = &(*pp)->next) {
		struct qmp_req *r = *pp;
		if (r->line)
			break; /* not written yet: cannot be answered */
		if (json_is_integer(id) ? json_integer_value(id) == r->id : true) {
			*pp = r->next;
			if (q->tail == r)
				q->tail = prev;
			return r;
		}
	}
	return NULL;
}

static void handle_reply(struct qmp *q, json_t *msg, enum qmp_msg kind)
{
	json_t *id = json_object_get(msg, "id");
	json_t *e = json_object_get(msg, "error");
	char why[512];

	if (kind == QMP_MSG_ERROR)
		snprintf(why, sizeof(why), "%s: %s", json_string_value(json_object_get(e, "class")) ?: "Error",
			 json_string_value(json_object_get(e, "desc")) ?: "(no description)");

	if (json_is_string(id) && strcmp(json_string_value(id), QMP_CAPS_ID) == 0) {
		if (kind == QMP_MSG_ERROR) {
			log_warn("%s: qmp_capabilities failed: %s", q->name, why);
			lost(q, "qmp_capabilities failed");
			return;
		}
		q->state = Q_READY;
		flush_unsent(q);
		return;
	}
	struct qmp_req *r = take_req(q, id);
	if (!r) {
		log_warn("%s: qmp reply to no pending command", q->name);
		return;
	}
	if (r->cb)
		r->cb(kind == QMP_MSG_ERROR ? e : json_object_get(msg, "return"),
		      kind == QMP_MSG_ERROR ? why : NULL, r->arg);
	free(r->line);
	free(r);
}

static void handle_line(struct qmp *q, const char *line)
{
	json_error_t jerr;
	json_t *msg = json_loads(line, 0, &jerr);
	enum qmp_msg kind = qmp_classify(msg);

	switch (kind) {
	case QMP_MSG_GREETING:
		if (q->state == Q_GREETING)
			send_caps(q);
		break;
	case QMP_MSG_RETURN:
	case QMP_MSG_ERROR:
		handle_reply(q, msg, kind);
		break;
	case QMP_MSG_EVENT: {
		const char *ev = json_string_value(json_object_get(msg, "event"));
		log_debug("%s: qmp event %s", q->name, ev);
		if (q->on_event)
			q->on_event(ev, json_object_get(msg, "data"), q->arg);
		break;
	}
	case QMP_MSG_BAD_JSON:
		log_warn("%s: unparsable QMP line: %s", q->name, jerr.text);
		lost(q, "protocol error: unparsable QMP message");
		break;
	case QMP_MSG_UNKNOWN:
		log_debug("%s: ignoring unknown QMP message", q->name);
		break;
	}
	json_decref(msg);
}

static void on_read(struct bufferevent *bev, void *arg)
{
	struct qmp *q = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	q_enter(q);
	while (q->state != Q_CLOSED && !q->free_pending) {
		size_t n;
		char *line = evbuffer_readln(in, &n, EVBUFFER_EOL_CRLF);
		if (!line) {
			if (evbuffer_get_length(in) > QMP_MAX_LINE)
				lost(q, "protocol error: QMP message too long");
			break;
		}
		if (n)
			handle_line(q, line);
		free(line);
	}
	q_leave(q);
}

/* The output drained: a request waiting to pass a descriptor may go now. */
static void on_written(struct bufferevent *bev, void *arg)
{
	struct qmp *q = arg;

	(void)bev;
	if (q->state == Q_READY && q->head)
		flush_unsent(q);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	struct qmp *q = arg;
	char why[128];

	(void)bev;
	if (what & BEV_EVENT_EOF)
		snprintf(why, sizeof(why), "QEMU closed the QMP connection");
	else if (what & BEV_EVENT_ERROR)
		snprintf(why, sizeof(why), "QMP connection error: %s", strerror(errno));
	else
		return;
	q_enter(q);
	lost(q, why);
	q_leave(q);
}

struct qmp *qmp_new(struct event_base *base, int fd, bool negotiated, const char *name,
		    space_err *err)
{
	_cleanup_close_ int sfd = fd;
	struct qmp *q = calloc(1, sizeof(*q));

	if (!q) {
		err_set(err, ENOMEM, "qmp: out of memory");
		return NULL;
	}
	snprintf(q->name, sizeof(q->name), "%s", name);
	q->next_id = 1;
	q->bev = bufferevent_socket_new(base, sfd, 0);
	if (!q->bev) {
		free(q);
		err_set(err, ENOMEM, "qmp: bufferevent_socket_new failed");
		return NULL;
	}
	q->fd = steal_fd(&sfd);
	bufferevent_setcb(q->bev, on_read, on_written, on_event, q);
	bufferevent_enable(q->bev, EV_READ | EV_WRITE);
	if (negotiated)
		q->state = Q_READY;
	else
		q->state = Q_GREETING;
	return q;
}
