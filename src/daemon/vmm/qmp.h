/* qmp.h -- asynchronous QMP client (QEMU Machine Protocol) on a libevent bufferevent */
#ifndef SPACE_QMP_H
#define SPACE_QMP_H

#include <event2/event.h>
#include <jansson.h>
#include <stdbool.h>

#include "err.h"
#include "vm.h" /* qmp_reply_cb */

struct qmp;

/* An asynchronous event ({"event": ..., "data": ...}); data is borrowed. */
typedef void (*qmp_event_cb)(const char *event, json_t *data, void *arg);
/* The connection is gone (EOF, I/O or protocol error); called once. */
typedef void (*qmp_closed_cb)(const char *why, void *arg);

/* Blocking, bounded: on a freshly connected socket, reads the greeting,
 * sends qmp_capabilities and waits for its reply, consuming exactly those
 * lines. Because QEMU dispatches commands from its main loop only, success
 * means QEMU finished initialising. Fails early with ECHILD when watch_fd
 * (a pidfd, or -1) becomes readable, i.e. QEMU died. */
int qmp_handshake(int fd, int watch_fd, int64_t deadline_ms, char *version, size_t vlen,
		  space_err *err);

/* Takes ownership of a connected socket. With `negotiated` qmp_handshake()
 * was done; otherwise the greeting is awaited and qmp_capabilities sent
 * here, and commands queued before its reply are written after it. `name`
 * prefixes log lines. */
struct qmp *qmp_new(struct event_base *base, int fd, bool negotiated, const char *name,
		    space_err *err);
void qmp_set_handlers(struct qmp *q, qmp_event_cb on_event, qmp_closed_cb on_closed, void *arg);

/* Queues a command. args may be NULL (reference stolen, also on failure).
 * cb (may be NULL) gets, from the loop: on success reply = the "return"
 * value and error = NULL; on a QMP error reply = the "error" object and
 * error = "<class>: <desc>"; when the connection closes first reply = NULL
 * and error = why. reply is borrowed for the duration of the call. */
int qmp_send(struct qmp *q, const char *command, json_t *args, qmp_reply_cb cb, void *arg,
	     space_err *err);

/* The same with a descriptor passed along (SCM_RIGHTS), as "getfd" and
 * "add-fd" want; fd is owned by the call from now on (closed once sent, or
 * on failure). */
int qmp_send_fd(struct qmp *q, const char *command, json_t *args, int fd, qmp_reply_cb cb,
		void *arg, space_err *err);

/* Fails every pending command with `why` (their callbacks run now), then
 * stops; on_closed is not called. Safe from inside a callback. */
void qmp_close(struct qmp *q, const char *why);
/* Frees; pending commands are dropped without their callbacks. Safe from
 * inside a qmp callback (the free is deferred until it returns). */
void qmp_free(struct qmp *q);
bool qmp_is_open(const struct qmp *q);

/* Leaf classification of one received QMP line (pure; unit-tested). */
enum qmp_msg {
	QMP_MSG_GREETING,
	QMP_MSG_RETURN,
	QMP_MSG_ERROR,
	QMP_MSG_EVENT,
	QMP_MSG_BAD_JSON,
	QMP_MSG_UNKNOWN,
};
enum qmp_msg qmp_classify(json_t *msg);
const char *qmp_msg_name(enum qmp_msg m);

#endif
