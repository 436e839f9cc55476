/* relay.c -- moving bytes once a connection is allowed: the plain two-way relay with bounded
 * buffers (reading stops while the other side has GW_BUF_HIGH queued), half-close and the
 * idle timeout. The HTTP request relay is http.c. */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/x509.h>
#include <string.h>
#include <sys/socket.h>

#include "gw.h"

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

static bool out_empty(struct bufferevent *b)
{
	return !b || evbuffer_get_length(bufferevent_get_output(b)) == 0;
}

static bool is_ssl(struct bufferevent *b)
{
	return bufferevent_openssl_get_ssl(b) != NULL;
}

/* Closes what is finished: a queued final answer once sent; a side's write half once the
 * other side ended and everything was passed on (TLS has no half-close: the connection
 * ends). True if the connection was freed. */
bool gw_relay_settle(struct gw_conn *c)
{
	if (c->closing) {
		if (!out_empty(c->down))
			return false;
		gw_conn_free(c);
		return true;
	}
	if (c->down_eof && !c->up_shut && out_empty(c->up)) {
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
	if (!to || evbuffer_get_length(bufferevent_get_output(to)) < GW_BUF_HIGH)
		return;
	bufferevent_disable(from, EV_READ);
	if (from == c->down)
		c->down_paused = true;
	else
		c->up_paused = true;
}

static void read_cb(struct bufferevent *b, void *arg)
{
	struct gw_conn *c = arg;

	c->last = time(NULL);
	if (c->closing) {
		evbuffer_drain(bufferevent_get_input(b), evbuffer_get_length(bufferevent_get_input(b)));
		return;
	}
	if (b == c->down && c->http && !gw_http_raw(c->http)) {
		gw_http_feed(c);
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

	if (b == c->down && c->up_paused && !c->up_eof && c->up) {
		c->up_paused = false;
		bufferevent_enable(c->up, EV_READ);
	} else if (b == c->up && c->down_paused && !c->down_eof && !c->closing) {
		c->down_paused = false;
		bufferevent_enable(c->down, EV_READ);
	}
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
	if (!paused)
		bufferevent_enable(b, EV_READ); /* the other direction was busy */
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
		c->down_eof = true;
		if (c->http && !gw_http_raw(c->http) && !c->closing && evbuffer_get_length(bufferevent_get_input(b)))
			gw_http_feed(c);
		else if (c->up && !c->closing)
			gw_relay_pump(c, c->down, c->up);
	} else {
		c->up_eof = true;
		if (c->down)
			gw_relay_pump(c, c->up, c->down);
	}
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
}
