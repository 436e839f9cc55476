/* relay.c -- moving bytes once a connection is allowed: the plain two-way relay with bounded
 * buffers (reading stops while the other side has GW_BUF_HIGH queued, or while the gateway
 * as a whole holds max_buffer), half-close, the idle timeout, and the choice between the HTTP
 * relay (http.c) and opaque bytes for connections whose first bytes decide it. */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/x509.h>
#include <string.h>
#include <sys/socket.h>

#include "gw.h"
#include "log.h"
#include "sniff.h"

const char *gw_proto_name(enum gw_proto p)
{
	switch (p) {
	case GW_TCP:
		return "tcp";
	case GW_TLS:
		return "tls";
	case GW_HTTP:
		return "http";
	case GW_HTTPS:
		return "https";
	}
	return "tcp";
}

static size_t out_len(struct bufferevent *b)
{
	return b ? evbuffer_get_length(bufferevent_get_output(b)) : 0;
}

static bool out_empty(struct bufferevent *b)
{
	return out_len(b) == 0;
}

static bool in_empty(struct bufferevent *b)
{
	return !b || evbuffer_get_length(bufferevent_get_input(b)) == 0;
}

static bool is_ssl(struct bufferevent *b)
{
	return bufferevent_openssl_get_ssl(b) != NULL;
}

/* ---- the gateway's buffer budget ---- */

static void acct_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	struct gw *g = arg;

	(void)buf;
	g->buffered += info->n_added;
	g->buffered -= info->n_deleted;
	if (!g->buffer_full && g->buffered > g->max_buffer) {
		g->buffer_full = true;
	} else if (g->buffer_full && g->buffered < g->max_buffer / 4 * 3) {
		g->buffer_full = false;
		event_active(g->resume, EV_TIMEOUT, 0); /* not from here: this may run inside a free */
	}
}

static int acct_slot(struct gw_conn *c, struct bufferevent *b)
{
	return b == c->down ? 0 : 2;
}

void gw_relay_account(struct gw_conn *c, struct bufferevent *b)
{
	int i = acct_slot(c, b);

	if (c->acct[i])
		return;
	c->acct[i] = evbuffer_add_cb(bufferevent_get_input(b), acct_cb, c->g);
	c->acct[i + 1] = evbuffer_add_cb(bufferevent_get_output(b), acct_cb, c->g);
	c->g->buffered += evbuffer_get_length(bufferevent_get_input(b)) +
			  evbuffer_get_length(bufferevent_get_output(b));
}

void gw_relay_unaccount(struct gw_conn *c, struct bufferevent *b)
{
	int i = acct_slot(c, b);
	struct evbuffer *bufs[2] = { bufferevent_get_input(b), bufferevent_get_output(b) };

	for (int k = 0; k < 2; k++) {
		if (!c->acct[i + k])
			continue;
		evbuffer_remove_cb_entry(bufs[k], c->acct[i + k]);
		c->acct[i + k] = NULL;
		c->g->buffered -= evbuffer_get_length(bufs[k]);
	}
	if (c->g->buffer_full && c->g->buffered < c->g->max_buffer / 4 * 3) {
		c->g->buffer_full = false;
		event_active(c->g->resume, EV_TIMEOUT, 0);
	}
}

void gw_relay_drop_up(struct gw_conn *c)
{
	if (!c->up)
		return;
	gw_relay_unaccount(c, c->up);
	bufferevent_free(c->up);
	c->up = NULL;
}

/* May `from` read, with `to` holding what it queued? */
static bool may_read(struct gw_conn *c, struct bufferevent *to)
{
	return !c->g->buffer_full && (!to || out_len(to) < GW_BUF_HIGH);
}

static void resume_side(struct gw_conn *c, bool down)
{
	if (down && c->down_paused && !c->down_eof && !c->closing && may_read(c, c->up)) {
		c->down_paused = false;
		bufferevent_enable(c->down, EV_READ);
	} else if (!down && c->up_paused && !c->up_eof && c->up && may_read(c, c->down)) {
		c->up_paused = false;
		bufferevent_enable(c->up, EV_READ);
	}
}

/* The budget is free again: every side that stopped for it (or for its peer) reads again if
 * its peer has room. */
static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gw *g = arg;

	(void)fd, (void)what;
	for (struct gw_conn *c = g->conns; c && !g->buffer_full; c = c->next) {
		resume_side(c, true);
		resume_side(c, false);
	}
}

int gw_relay_init(struct gw *g, space_err *err)
{
	g->resume = event_new(g->base, -1, 0, resume_cb, g);
	return g->resume ? 0 : err_set(err, ENOMEM, "resume event");
}

void gw_relay_fini(struct gw *g)
{
	if (g->resume)
		event_free(g->resume);
	g->resume = NULL;
}

/* ---- the relay ---- */

/* Closes what is finished: a queued final answer once sent; a side's write half once the
 * other side ended and everything was passed on (TLS has no half-close: the connection
 * ends). Guest bytes still held unparsed (an upgrade waiting for its answer) are not passed
 * on yet. True if the connection was freed. */
bool gw_relay_settle(struct gw_conn *c)
{
	if (c->closing) {
		if (!out_empty(c->down))
			return false;
		gw_conn_free(c);
		return true;
	}
	if (c->down_eof && !c->up_shut && out_empty(c->up) && in_empty(c->down)) {
		if (!c->up || c->upstream_tls || is_ssl(c->down)) {
			gw_conn_free(c);
			return true;
		}
		shutdown(bufferevent_getfd(c->up), SHUT_WR);
		c->up_shut = true;
	}
	if (c->up_eof && !c->down_shut && out_empty(c->down)) {
		if (is_ssl(c->down)) {
			gw_conn_free(c);
			return true;
		}
		shutdown(bufferevent_getfd(c->down), SHUT_WR);
		c->down_shut = true;
	}
	if (c->down_eof && c->up_eof && out_empty(c->down) && out_empty(c->up)) {
		gw_conn_free(c);
		return true;
	}
	return false;
}

/* Moves what `from` read to `to`, and stops reading `from` while `to` has too much queued. */
void gw_relay_pump(struct gw_conn *c, struct bufferevent *from, struct bufferevent *to)
{
	struct evbuffer *in = bufferevent_get_input(from);
	size_t n = evbuffer_get_length(in);

	if (from == c->down)
		c->bytes_out += n;
	else
		c->bytes_in += n;
	evbuffer_add_buffer(bufferevent_get_output(to), in);
	gw_relay_backpressure(c, from, to);
}

void gw_relay_backpressure(struct gw_conn *c, struct bufferevent *from, struct bufferevent *to)
{
	if (may_read(c, to))
		return;
	bufferevent_disable(from, EV_READ);
	if (from == c->down)
		c->down_paused = true;
	else
		c->up_paused = true;
}

static void classifying_timeout(struct gw_conn *c, bool on)
{
	struct timeval t = { .tv_sec = on ? GW_SNIFF_SECONDS : GW_IDLE_SECONDS };

	bufferevent_set_timeouts(c->down, &t, NULL);
}

/* The first bytes of a classifying connection: which relay. final: the guest ended, or sent
 * for GW_SNIFF_SECONDS bytes that decide nothing; they then go to the HTTP relay (under a
 * CIDR rule they are opaque at once). Silence decides nothing: a guest that waits out any window
 * and then speaks HTTP is still parsed. False if c was freed or nothing is decided yet (the
 * bytes stay queued). */
static bool classify(struct gw_conn *c, struct bufferevent *b, bool final)
{
	uint8_t buf[GW_SNIFF_METHOD_MAX + 64];
	ev_ssize_t n = 0;
	int h = -1;

	if (b == c->down) {
		n = evbuffer_copyout(bufferevent_get_input(b), buf, sizeof(buf));
		h = gw_sniff_http(buf, n > 0 ? (size_t)n : 0);
		if (h == 0 && n > 0 && gw_cidr_allows(c))
			h = -1;
		if (h == 0 && !final && n < (ev_ssize_t)sizeof(buf))
			return false;
		/* a TLS handshake after the silence that made this connection opaque would
		 * carry a server name no check has seen */
		if (!c->upstream_tls && n > 0 && buf[0] == 0x16) {
			gw_conn_refuse(c, "TLS after 5 s of silence");
			return false;
		}
	}
	c->classifying = false;
	classifying_timeout(c, false);
	if (h == -1 || (h == 0 && (b != c->down || n <= 0))) {
		if (c->upstream_tls)
			c->proto = GW_TLS; /* upstream first, or not HTTP: opaque, re-encrypted */
		return true;
	}
	c->proto = c->upstream_tls ? GW_HTTPS : GW_HTTP;
	if (gw_http_new(c) < 0) {
		gw_conn_refuse(c, "out of memory");
		return false;
	}
	return true;
}

/* The upstream's side of an HTTP relay: framed, then passed on. */
static void read_up_http(struct gw_conn *c)
{
	switch (gw_http_upstream(c)) {
	case GW_HTTP_UP_BAD:
		log_warn("%s: the upstream's answer is not HTTP/1 framing: closing", c->name);
		gw_conn_free(c);
		return;
	case GW_HTTP_UP_SWITCH:
		gw_relay_pump(c, c->up, c->down);
		gw_http_switch(c);
		return;
	case GW_HTTP_UP_RESUME:
		gw_relay_pump(c, c->up, c->down);
		if (!gw_http_resume(c))
			gw_relay_settle(c);
		return;
	case GW_HTTP_UP_PASS:
		gw_relay_pump(c, c->up, c->down);
		return;
	}
}

static void read_cb(struct bufferevent *b, void *arg)
{
	struct gw_conn *c = arg;

	c->last = time(NULL);
	if (c->closing) {
		evbuffer_drain(bufferevent_get_input(b), evbuffer_get_length(bufferevent_get_input(b)));
		return;
	}
	if (c->classifying && !classify(c, b, false))
		return;
	if (b == c->down && c->http && !gw_http_raw(c->http)) {
		gw_http_feed(c);
		return;
	}
	if (b == c->up && c->http && !gw_http_raw(c->http) && c->down) {
		read_up_http(c);
		return;
	}
	if (b == c->down && c->up)
		gw_relay_pump(c, c->down, c->up);
	else if (b == c->up && c->down)
		gw_relay_pump(c, c->up, c->down);
}

/* Output drained below the low mark: resume the side that feeds it, close what is done. */
static void write_cb(struct bufferevent *b, void *arg)
{
	struct gw_conn *c = arg;

	resume_side(c, b != c->down);
	gw_relay_settle(c);
}

static void upstream_failed(struct gw_conn *c)
{
	SSL *ssl = c->upstream_tls ? bufferevent_openssl_get_ssl(c->up) : NULL;
	long vr = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
	char reason[256];

	if (vr != X509_V_OK) {
		snprintf(reason, sizeof(reason), "upstream certificate: %s", X509_verify_cert_error_string(vr));
		gw_conn_refuse(c, reason);
		return;
	}
	gw_conn_free(c);
}

static void timeout(struct gw_conn *c, struct bufferevent *b)
{
	bool paused = b == c->down ? c->down_paused || c->closing : c->up_paused;

	if (time(NULL) - c->last >= GW_IDLE_SECONDS) {
		gw_conn_free(c);
		return;
	}
	if (c->classifying && b == c->down) {
		/* undecided bytes for a whole window decide now (false: c was freed); silence
		 * goes on waiting. A timeout disabled reading: on again either way. */
		if (!in_empty(b) && !classify(c, b, true))
			return;
		bufferevent_enable(b, EV_READ);
		if (!c->classifying)
			read_cb(b, c);
		return;
	}
	if (!paused)
		bufferevent_enable(b, EV_READ); /* the other direction was busy */
}

static void guest_eof(struct gw_conn *c)
{
	struct bufferevent *b = c->down;

	c->down_eof = true;
	if (c->classifying && !classify(c, b, true))
		return;
	if (c->http && !gw_http_raw(c->http) && !c->closing && !in_empty(b)) {
		if (gw_http_feed(c))
			return;
	} else if (c->up && !c->closing) {
		gw_relay_pump(c, c->down, c->up);
	}
	gw_relay_settle(c);
}

static void event_cb(struct bufferevent *b, short what, void *arg)
{
	struct gw_conn *c = arg;

	if (what & BEV_EVENT_CONNECTED)
		return;
	if (what & BEV_EVENT_TIMEOUT) {
		timeout(c, b);
		return;
	}
	if (what & BEV_EVENT_ERROR) {
		if (b == c->up)
			upstream_failed(c);
		else
			gw_conn_free(c);
		return;
	}
	if (!(what & BEV_EVENT_EOF))
		return;
	if (b == c->down) {
		guest_eof(c);
		return;
	}
	c->up_eof = true;
	if (c->classifying)
		c->classifying = false; /* the upstream ended first: nothing to sniff */
	if (c->down)
		gw_relay_pump(c, c->up, c->down);
	gw_relay_settle(c);
}

static void setup(struct gw_conn *c, struct bufferevent *b)
{
	struct timeval idle = { .tv_sec = GW_IDLE_SECONDS };

	bufferevent_setcb(b, read_cb, write_cb, event_cb, c);
	bufferevent_setwatermark(b, EV_READ, 0, GW_BUF_HIGH);
	bufferevent_setwatermark(b, EV_WRITE, GW_BUF_HIGH / 2, 0);
	bufferevent_set_timeouts(b, &idle, NULL);
	if (is_ssl(b))
		bufferevent_openssl_set_allow_dirty_shutdown(b, 1);
	gw_relay_account(c, b);
	bufferevent_enable(b, EV_READ | EV_WRITE);
}

void gw_relay_attach_up(struct gw_conn *c)
{
	setup(c, c->up);
}

void gw_relay_start(struct gw_conn *c)
{
	c->relaying = true;
	setup(c, c->down);
	if (c->up)
		setup(c, c->up);
	if (c->classifying)
		classifying_timeout(c, true);
}
