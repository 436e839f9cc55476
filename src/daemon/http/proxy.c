/* proxy.c -- relays a request and everything after it to another spaced (proxy.h) */
#include "proxy.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/http_struct.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include "daemon.h"
#include "log.h"
#include "tls.h"

struct proxy {
	struct http_hold hold; /* first: proxy_gone gets it */
	struct evhttp_connection *evcon;
	struct bufferevent *cbev; /* the client's (evhttp's) */
	struct bufferevent *ubev; /* the node's */
	char upstream[96];
	bool heard;     /* the node has sent a byte */
	bool tls;       /* https:// (verified against --cluster-ca) */
	bool draining;  /* the node is gone: close once the client has what it sent */
	bool finishing;
};

int http_proxy_hostport(const char *url, char *hostport, size_t len, space_err *err)
{
	const char *p;
	size_t n;

	if (strncmp(url, "http://", 7) == 0)
		p = url + 7;
	else if (strncmp(url, "https://", 8) == 0)
		p = url + 8;
	else
		return err_set(err, EINVAL, "proxy: '%.100s' is not an http:// or https:// URL", url);
	n = strcspn(p, "/");
	if (n == 0 || n >= len || (p[n] == '/' && p[n + 1]))
		return err_set(err, EINVAL, "proxy: '%.100s' is not http://IP:PORT", url);
	memcpy(hostport, p, n);
	hostport[n] = '\0';
	return 0;
}

bool http_proxy_drops_header(const char *name)
{
	static const char *const drop[] = { "Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization",
					    "TE", "Trailer", "Transfer-Encoding", "Upgrade", "Host",
					    "Content-Length", "X-Forwarded-For", HTTP_PEER_HEADER };

	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
		if (strcasecmp(name, drop[i]) == 0)
			return true;
	return false;
}

/* Frees the client's connection; proxy_gone runs inside and frees p. Only from our callbacks. */
static void finish(struct proxy *p)
{
	if (p->finishing)
		return;
	p->finishing = true;
	evhttp_connection_free(p->evcon);
}

static void proxy_gone(struct http_hold *h)
{
	struct proxy *p = (struct proxy *)h;

	if (p->ubev)
		bufferevent_free(p->ubev);
	free(p);
}

static void reply_502(struct proxy *p, const char *why)
{
	struct evbuffer *out = bufferevent_get_output(p->cbev);
	char body[400];
	int n = snprintf(body, sizeof(body),
			 "{\"error\":{\"code\":\"unavailable\",\"message\":\"the node owning this sandbox (%s) "
			 "cannot be reached: %s\"}}",
			 p->upstream, why);

	if (n < 0 || (size_t)n >= sizeof(body))
		n = (int)strlen(body);
	evbuffer_add_printf(out,
			    "HTTP/1.1 502 Bad Gateway\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
			    "Connection: close\r\n\r\n%s",
			    n, body);
}

/* Why the TLS connection to the node failed, from its verification result or the errors
 * libevent kept for it; false when it was not TLS's doing. */
static bool tls_failure(struct bufferevent *bev, char *out, size_t len)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	unsigned long e, last = 0;
	long v = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;

	while ((e = bufferevent_get_openssl_error(bev)))
		last = e;
	if (v != X509_V_OK) {
		snprintf(out, len, "TLS: certificate verification failed: %s", X509_verify_cert_error_string(v));
		return true;
	}
	if (!last)
		return false;
	snprintf(out, len, "TLS: ");
	ERR_error_string_n(last, out + strlen(out), len - strlen(out));
	return true;
}

/* The node is done (or gone): the client gets what is queued, then the connection closes. */
static void upstream_done(struct proxy *p, const char *why)
{
	char tls[200];

	if (!p->heard && p->tls && tls_failure(p->ubev, tls, sizeof(tls)))
		why = tls; /* what the handshake said: an unknown CA, a certificate for another name */
	if (!p->heard)
		reply_502(p, why);
	bufferevent_free(p->ubev);
	p->ubev = NULL;
	p->draining = true;
	bufferevent_disable(p->cbev, EV_READ);
	if (evbuffer_get_length(bufferevent_get_output(p->cbev)) == 0)
		finish(p);
	else
		bufferevent_setwatermark(p->cbev, EV_WRITE, 0, 0);
}

static void up_read(struct bufferevent *bev, void *arg)
{
	struct proxy *p = arg;

	p->heard = true;
	evbuffer_add_buffer(bufferevent_get_output(p->cbev), bufferevent_get_input(bev));
	if (evbuffer_get_length(bufferevent_get_output(p->cbev)) > PROXY_QUEUE_HIGH)
		bufferevent_disable(bev, EV_READ);
}

/* The node's queue went down: read the client again. */
static void up_write(struct bufferevent *bev, void *arg)
{
	struct proxy *p = arg;

	(void)bev;
	if (!p->draining)
		bufferevent_enable(p->cbev, EV_READ);
}

static void up_event(struct bufferevent *bev, short what, void *arg)
{
	struct proxy *p = arg;

	if (what & BEV_EVENT_CONNECTED)
		return;
	if (what & BEV_EVENT_EOF) {
		/* Bytes that came with the EOF. */
		up_read(bev, p);
		upstream_done(p, "connection closed");
		return;
	}
	if (what & (BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)) {
		int e = EVUTIL_SOCKET_ERROR();

		upstream_done(p, what & BEV_EVENT_TIMEOUT ? "timed out" : evutil_socket_error_to_string(e));
	}
}

static void client_read(struct bufferevent *bev, void *arg)
{
	struct proxy *p = arg;

	if (!p->ubev) {
		evbuffer_drain(bufferevent_get_input(bev), evbuffer_get_length(bufferevent_get_input(bev)));
		return;
	}
	evbuffer_add_buffer(bufferevent_get_output(p->ubev), bufferevent_get_input(bev));
	if (evbuffer_get_length(bufferevent_get_output(p->ubev)) > PROXY_QUEUE_HIGH)
		bufferevent_disable(bev, EV_READ);
}

/* The client's queue went down: read the node again, or close once all is sent. */
static void client_write(struct bufferevent *bev, void *arg)
{
	struct proxy *p = arg;

	if (p->draining) {
		if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
			finish(p);
		return;
	}
	if (p->ubev)
		bufferevent_enable(p->ubev, EV_READ);
}

static void client_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
		finish(arg);
}

static bool is_upgrade(struct evhttp_request *req)
{
	const char *u = evhttp_find_header(evhttp_request_get_input_headers(req), "Upgrade");

	return u && strcasecmp(u, "websocket") == 0;
}

/* The request line, headers (hop-by-hop ones dropped) and body, as the node gets them. */
static int write_request(struct http_req *r, struct evbuffer *out, const char *hostport)
{
	struct evhttp_request *req = r->req;
	struct evbuffer *body = evhttp_request_get_input_buffer(req);
	struct evkeyvalq *in = evhttp_request_get_input_headers(req);
	struct evkeyval *h;
	char *peer = NULL;
	ev_uint16_t port = 0;
	size_t len = evbuffer_get_length(body);

	evhttp_connection_get_peer(evhttp_request_get_connection(req), &peer, &port);
	if (evbuffer_add_printf(out, "%s %s HTTP/1.1\r\nHost: %s\r\n", http_method_name(r->method),
				evhttp_request_get_uri(req), hostport) < 0)
		return -1;
	TAILQ_FOREACH(h, in, next) {
		if (!http_proxy_drops_header(h->key) &&
		    evbuffer_add_printf(out, "%s: %s\r\n", h->key, h->value) < 0)
			return -1;
	}
	if (evbuffer_add_printf(out, "X-Forwarded-For: %s\r\n", peer ? peer : "unknown") < 0)
		return -1;
	/* the node serves its api processes only (http_plane.peer_key) */
	if (r->d->cfg.cluster_key[0] &&
	    evbuffer_add_printf(out, "%s: %s\r\n", HTTP_PEER_HEADER, r->d->cfg.cluster_key) < 0)
		return -1;
	if (is_upgrade(req)) {
		if (evbuffer_add_printf(out, "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n") < 0)
			return -1;
	} else if (evbuffer_add_printf(out, "Content-Length: %zu\r\nConnection: close\r\n\r\n", len) < 0) {
		return -1;
	}
	return evbuffer_add_buffer(out, body);
}

/* The name a node's certificate must carry: --cluster-tls-name, else its address. */
static const char *tls_name(const struct spaced *d, const char *hostport)
{
	static char host[64];
	const char *colon = strrchr(hostport, ':');
	size_t n = colon ? (size_t)(colon - hostport) : strlen(hostport);

	if (d->cfg.cluster_tls_name[0])
		return d->cfg.cluster_tls_name;
	if (*hostport == '[' && n >= 2) { /* [v6]:port */
		hostport++;
		n -= 2;
	}
	snprintf(host, sizeof(host), "%.*s", (int)n, hostport);
	return host;
}

/* The relay to upstream_url with its connection to the node made (not yet connecting): NULL
 * with err set when the URL is not one we can reach or memory is short. */
static struct proxy *proxy_new(struct spaced *d, const char *upstream_url, struct sockaddr_storage *sa, int *salen,
			       space_err *err)
{
	char hostport[96];
	struct proxy *p;

	*salen = sizeof(*sa);
	if (http_proxy_hostport(upstream_url, hostport, sizeof(hostport), err) < 0)
		return NULL;
	if (evutil_parse_sockaddr_port(hostport, (struct sockaddr *)sa, salen) < 0) {
		err_set(err, EINVAL, "proxy: '%.100s' is not IP:PORT", hostport);
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		err_set(err, ENOMEM, "out of memory");
		return NULL;
	}
	snprintf(p->upstream, sizeof(p->upstream), "%s", hostport);
	p->tls = strncmp(upstream_url, "https://", 8) == 0;
	if (p->tls) {
		SSL *ssl = d->tls_client ? http_tls_client(d->tls_client, tls_name(d, hostport)) : NULL;

		if (!d->tls_client) {
			free(p);
			err_set(err, EINVAL, "proxy: %s is https:// and this process has no --cluster-ca to verify it",
				hostport);
			return NULL;
		}
		p->ubev = ssl ? bufferevent_openssl_socket_new(d->base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
								BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS)
			      : NULL;
	} else {
		p->ubev = bufferevent_socket_new(d->base, -1, BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	}
	if (!p->ubev) {
		free(p);
		err_set(err, ENOMEM, "out of memory");
		return NULL;
	}
	return p;
}

/* From here the client's connection is the relay's; the request is never answered through
 * evhttp, which frees it with the connection. */
static void proxy_go(struct proxy *p, struct spaced *d, struct evhttp_request *req, struct sockaddr_storage *sa,
		     int salen)
{
	p->evcon = evhttp_request_get_connection(req);
	p->cbev = evhttp_connection_get_bufferevent(p->evcon);
	http_hold_begin(&p->hold, req, proxy_gone, d->conns);
	bufferevent_setcb(p->cbev, client_read, client_write, client_event, p);
	bufferevent_setwatermark(p->cbev, EV_READ, 0, 0);
	bufferevent_setwatermark(p->cbev, EV_WRITE, PROXY_QUEUE_HIGH / 2, 0);
	bufferevent_set_timeouts(p->cbev, NULL, NULL);
	bufferevent_setcb(p->ubev, up_read, up_write, up_event, p);
	bufferevent_setwatermark(p->ubev, EV_WRITE, PROXY_QUEUE_HIGH / 2, 0);
	bufferevent_enable(p->ubev, EV_READ | EV_WRITE);
	bufferevent_enable(p->cbev, EV_READ | EV_WRITE);
	if (bufferevent_socket_connect(p->ubev, (struct sockaddr *)sa, salen) < 0) {
		/* Its error event follows (deferred), and the client gets the 502 from there. */
		log_warn("proxy: connecting to %s failed at once", p->upstream);
	}
	/* Bytes the client sent right behind its request (WebSocket frames). */
	if (evbuffer_get_length(bufferevent_get_input(p->cbev)))
		client_read(p->cbev, p);
}

int http_proxy(struct http_req *r, const char *upstream_url, space_err *err)
{
	struct sockaddr_storage sa;
	int salen;
	struct proxy *p = proxy_new(r->d, upstream_url, &sa, &salen, err);

	if (!p)
		return -1;
	if (write_request(r, bufferevent_get_output(p->ubev), p->upstream) < 0) {
		bufferevent_free(p->ubev);
		free(p);
		return err_set(err, ENOMEM, "out of memory");
	}
	proxy_go(p, r->d, r->req, &sa, salen);
	return 0;
}

int http_proxy_taken(struct spaced *d, struct evhttp_request *req, const char *upstream_url, space_err *err)
{
	struct sockaddr_storage sa;
	int salen;
	struct proxy *p = proxy_new(d, upstream_url, &sa, &salen, err);
	struct bufferevent *cbev;
	struct evbuffer_ptr eol;
	size_t eol_len = 0;

	if (!p)
		return -1;
	cbev = http_take_over(d->conns, req);
	if (cbev)
		eol = evbuffer_search_eol(bufferevent_get_input(cbev), NULL, &eol_len, EVBUFFER_EOL_LF);
	if (!cbev || eol.pos < 0) {
		bufferevent_free(p->ubev);
		free(p);
		return err_set(err, EIO, "the connection could not be taken over");
	}
	/* the request line as it came, our credential for the node, then every byte the client
	 * sends, untouched (the node rewrites each request for its guest) */
	evbuffer_remove_buffer(bufferevent_get_input(cbev), bufferevent_get_output(p->ubev), (size_t)eol.pos + eol_len);
	if (d->cfg.cluster_key[0])
		evbuffer_add_printf(bufferevent_get_output(p->ubev), "%s: %s\r\n", HTTP_PEER_HEADER, d->cfg.cluster_key);
	proxy_go(p, d, req, &sa, salen);
	return 0;
}
