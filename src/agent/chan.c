/* chan.c -- the agent's end of the host channel: finding the port, framing, the output queue.
 *
 * The host side is QEMU's chardev socket behind a virtio-serial port.  While no host process
 * is connected the guest port reports POLLHUP, read() returns 0 and write() would block, so a
 * disconnected port is taken out of epoll and looked at again every AGENT_RETRY_MS: watching
 * it would busy-loop.  Whatever was buffered for a lost connection (a partial frame included)
 * is discarded; the host starts every connection with H_HELLO and the agent then resends
 * everything unacked (see agent-protocol.md, "Reconnecting").
 *
 * Outgoing bytes are bounded: control frames live in a queue capped at AGENT_CTLQ_MAX (the
 * port stops being read while it is over), and channel frames (A_STARTED, A_DATA,
 * A_STDIN_ACK, A_EXIT) are generated from per-channel state only when there is room in wbuf,
 * so the output held is the channels' windows and nothing more. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent.h"
#include "cleanup.h"
#include "log.h"

#define MAX_FRAME (PROTO_HDR_SIZE + PROTO_MAX_PAYLOAD)

/* An H_HELLO header (len 12, type 1, flags 0, chan 0): what a desynchronised reader looks for. */
static const uint8_t hello_hdr[PROTO_HDR_SIZE] = { 12, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0 };

unsigned agent_deframe(uint8_t *buf, size_t *len, bool *desync, agent_frame_fn fn,
		       agent_badframe_fn bad, void *ctx)
{
	size_t pos = 0, n = *len;
	unsigned frames = 0;

	for (;;) {
		struct proto_hdr h;
		enum proto_rc rc;

		if (*desync) {
			const uint8_t *hit = memmem(buf + pos, n - pos, hello_hdr, sizeof(hello_hdr));

			if (!hit) {
				/* Keep a tail that may be the start of the pattern. */
				if (n - pos >= sizeof(hello_hdr))
					pos = n - (sizeof(hello_hdr) - 1);
				break;
			}
			pos = (size_t)(hit - buf);
			*desync = false;
		}
		rc = proto_parse_hdr(buf + pos, n - pos, &h);
		if (rc == PROTO_NEED_MORE)
			break;
		if (rc != PROTO_OK) {
			/* A length we cannot trust: frame boundaries are lost. */
			bad(ctx, rc);
			*desync = true;
			pos++;
			continue;
		}
		if (n - pos < PROTO_HDR_SIZE + (size_t)h.len)
			break;
		fn(ctx, &h, buf + pos + PROTO_HDR_SIZE);
		pos += PROTO_HDR_SIZE + h.len;
		frames++;
	}
	memmove(buf, buf + pos, n - pos);
	*len = n - pos;
	return frames;
}

/* ---- control queue ---- */

int agent_ctl_send(struct agent *a, uint16_t type, uint32_t chan, const void *payload,
		   size_t len, bool drop_if_full)
{
	struct agent_port *pt = &a->port;
	struct agent_ctl *c;

	if (!pt->up || len > PROTO_MAX_PAYLOAD)
		return -1;
	if (drop_if_full && pt->ctl_bytes + len > AGENT_CTLQ_MAX)
		return -1;
	c = malloc(sizeof(*c) + PROTO_HDR_SIZE + len);
	if (!c)
		return -1;
	c->next = NULL;
	c->len = PROTO_HDR_SIZE + len;
	proto_put_hdr(c->data, (uint32_t)len, type, chan);
	if (len)
		memcpy(c->data + PROTO_HDR_SIZE, payload, len);
	if (pt->ctl_tail)
		pt->ctl_tail->next = c;
	else
		pt->ctl_head = c;
	pt->ctl_tail = c;
	pt->ctl_bytes += c->len;
	return 0;
}

void agent_send_error(struct agent *a, uint32_t chan, int err, const char *fmt, ...)
{
	uint8_t buf[4 + 1024];
	va_list ap;
	int n;

	buf[0] = (uint8_t)err;
	buf[1] = (uint8_t)(err >> 8);
	buf[2] = (uint8_t)(err >> 16);
	buf[3] = (uint8_t)(err >> 24);
	va_start(ap, fmt);
	n = vsnprintf((char *)buf + 4, sizeof(buf) - 4, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(buf) - 4)
		n = sizeof(buf) - 5;
	log_debug("-> A_ERROR chan %u: %s", chan, (char *)buf + 4);
	agent_ctl_send(a, A_ERROR, chan, buf, 4 + (size_t)n + 1, false);
}

static void ctl_clear(struct agent_port *pt)
{
	while (pt->ctl_head) {
		struct agent_ctl *c = pt->ctl_head;

		pt->ctl_head = c->next;
		free(c);
	}
	pt->ctl_tail = NULL;
	pt->ctl_bytes = 0;
}

/* ---- connection state ---- */

static void port_update_interest(struct agent *a)
{
	struct agent_port *pt = &a->port;
	uint32_t ev = 0;

	if (pt->up && pt->w.fd >= 0) {
		if (pt->ctl_bytes <= AGENT_CTLQ_MAX)
			ev |= EPOLLIN;
		if (pt->woff < pt->wlen)
			ev |= EPOLLOUT;
	}
	agent_watch_set(a, &pt->w, ev);
}

static void port_down(struct agent *a, const char *why)
{
	struct agent_port *pt = &a->port;

	if (pt->up)
		agent_log(a, false, "host channel down: %s", why);
	pt->up = false;
	pt->hello = false;
	pt->desync = false;
	pt->inlen = 0;
	pt->wlen = pt->woff = 0;
	ctl_clear(pt);
	if (pt->kind == PORT_SOCK)
		agent_watch_close(a, &pt->w);
	else
		agent_watch_set(a, &pt->w, 0);
	pt->retry_at_ms = agent_now_ms() + AGENT_RETRY_MS;
}

static void port_up(struct agent *a)
{
	struct agent_port *pt = &a->port;

	pt->up = true;
	pt->hello = false;
	pt->desync = false;
	pt->inlen = 0;
	pt->wlen = pt->woff = 0;
	pt->missing_logged = false;
	agent_log(a, false, "host channel up (%s), waiting for H_HELLO", pt->path);
	port_update_interest(a);
}

/* Find /dev/vportNpM whose /sys/class/virtio-ports/vportNpM/name is PROTO_PORT_NAME. */
static int find_virtio_port(char *out, size_t outlen)
{
	_cleanup_closedir_ DIR *d = opendir("/sys/class/virtio-ports");
	struct dirent *de;

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		char path[512], name[64];
		_cleanup_close_ int fd = -1;
		ssize_t n;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/class/virtio-ports/%s/name", de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, name, sizeof(name) - 1);
		if (n <= 0)
			continue;
		name[n] = '\0';
		name[strcspn(name, "\n")] = '\0';
		if (strcmp(name, PROTO_PORT_NAME) == 0) {
			snprintf(out, outlen, "/dev/%s", de->d_name);
			return 0;
		}
	}
	return -1;
}

static int sock_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_close_ int fd = -1;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	/* A unix-socket connect does not block on the network; make it non-blocking after. */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -1;
	if (fcntl(fd, F_SETFL, O_NONBLOCK) < 0)
		return -1;
	return steal_fd(&fd);
}

void agent_port_init(struct agent *a, const char *path)
{
	struct agent_port *pt = &a->port;
	struct stat st;

	memset(&pt->w, 0, sizeof(pt->w));
	pt->w.kind = W_PORT;
	pt->w.fd = -1;
	pt->kind = PORT_NONE;
	if (path) {
		snprintf(pt->path, sizeof(pt->path), "%s", path);
		/* A path that is not there yet is taken as a socket to wait for. */
		pt->kind = (stat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) ? PORT_DEV : PORT_SOCK;
	} else {
		pt->path[0] = '\0';
		pt->kind = PORT_DEV;
	}
	pt->retry_at_ms = 0;
}

/* Called when the port is down and its retry time has come. */
void agent_port_poll_retry(struct agent *a)
{
	struct agent_port *pt = &a->port;

	pt->retry_at_ms = agent_now_ms() + AGENT_RETRY_MS;
	if (pt->kind == PORT_SOCK) {
		int fd = sock_connect(pt->path);

		if (fd < 0) {
			if (!pt->missing_logged)
				agent_log(a, false, "connect %s: %s (retrying)", pt->path,
					  strerror(errno));
			pt->missing_logged = true;
			return;
		}
		pt->w.fd = fd;
		pt->w.events = 0;
		port_up(a);
		return;
	}
	if (pt->w.fd < 0) {
		char dev[sizeof(pt->path)];
		const char *p = pt->path;

		if (!p[0]) {
			if (find_virtio_port(dev, sizeof(dev)) < 0) {
				if (!pt->missing_logged)
					agent_log(a, false, "no virtio port named %s yet (retrying)",
						  PROTO_PORT_NAME);
				pt->missing_logged = true;
				return;
			}
			p = dev;
		}
		pt->w.fd = open(p, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
		if (pt->w.fd < 0) {
			if (!pt->missing_logged)
				agent_log(a, false, "open %s: %s (retrying)", p, strerror(errno));
			pt->missing_logged = true;
			return;
		}
		pt->w.events = 0;
		agent_log(a, false, "opened host channel %s", p);
		if (!pt->path[0])
			snprintf(pt->path, sizeof(pt->path), "%s", p);
	}
	/* The device stays open while the host is away; POLLHUP says whether it is there. */
	{
		struct pollfd pfd = { .fd = pt->w.fd, .events = POLLIN };

		if (poll(&pfd, 1, 0) < 0 || (pfd.revents & (POLLHUP | POLLERR | POLLNVAL)))
			return;
	}
	port_up(a);
}

static void port_read(struct agent *a)
{
	struct agent_port *pt = &a->port;
	int rounds;

	/* A few buffers per wakeup, then let the rest of the loop run; level-triggered epoll
	 * brings us back.  Stop early when the control queue is over its cap (the host is not
	 * reading our replies). */
	for (rounds = 0; rounds < 8 && pt->up && pt->ctl_bytes <= AGENT_CTLQ_MAX; rounds++) {
		ssize_t n = read(pt->w.fd, pt->inbuf + pt->inlen, sizeof(pt->inbuf) - pt->inlen);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0) {
			port_down(a, strerror(errno));
			return;
		}
		if (n == 0) {
			port_down(a, "host disconnected");
			return;
		}
		pt->inlen += (size_t)n;
		agent_deframe(pt->inbuf, &pt->inlen, &pt->desync, agent_handle_frame,
			      agent_handle_badframe, a);
	}
}

void agent_port_event(struct agent *a, uint32_t events)
{
	struct agent_port *pt = &a->port;

	if (!pt->up || pt->w.fd < 0)
		return;
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
		port_read(a);
	if (pt->up && (events & EPOLLOUT))
		agent_port_flush(a);
	if (pt->up)
		port_update_interest(a);
}

/* Move the next frame into wbuf: control frames first (A_HELLO must precede the data it
 * announces), then one frame per channel, round robin. */
static bool fill_one(struct agent *a)
{
	struct agent_port *pt = &a->port;
	struct agent_ctl *c = pt->ctl_head;

	if (c) {
		if (sizeof(pt->wbuf) - pt->wlen < c->len)
			return false;
		memcpy(pt->wbuf + pt->wlen, c->data, c->len);
		pt->wlen += c->len;
		pt->ctl_head = c->next;
		if (!pt->ctl_head)
			pt->ctl_tail = NULL;
		pt->ctl_bytes -= c->len;
		free(c);
		return true;
	}
	if (!pt->hello || sizeof(pt->wbuf) - pt->wlen < MAX_FRAME)
		return false;
	while (a->pend_head) {
		struct agent_proc *p = a->pend_head;
		size_t n = agent_proc_next_frame(a, p, pt->wbuf + pt->wlen,
						 sizeof(pt->wbuf) - pt->wlen);

		/* Off the list head; back on at the tail if it may have more. */
		a->pend_head = p->pnext;
		if (a->pend_head)
			a->pend_head->pprev = NULL;
		else
			a->pend_tail = NULL;
		p->pnext = p->pprev = NULL;
		p->pending = false;
		if (n) {
			agent_proc_mark_pending(a, p);
			pt->wlen += n;
			return true;
		}
	}
	return false;
}

void agent_port_flush(struct agent *a)
{
	struct agent_port *pt = &a->port;

	while (pt->up) {
		/* Refill only once wbuf has drained: the port takes at most 32 KiB per
		 * write, and compacting a partly written buffer after each write
		 * would copy every byte several times (costly under TCG). */
		if (pt->woff == pt->wlen) {
			pt->woff = pt->wlen = 0;
			while (fill_one(a))
				;
		}
		if (pt->woff == pt->wlen)
			break;
		{
			ssize_t n = write(pt->w.fd, pt->wbuf + pt->woff, pt->wlen - pt->woff);

			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && errno == EAGAIN)
				break;
			if (n < 0) {
				port_down(a, strerror(errno));
				return;
			}
			pt->woff += (size_t)n;
		}
	}
	if (pt->up)
		port_update_interest(a);
}
