/* port_handler.c -- a request addressed to a sandbox's port: who sent it (a port token, the
 * browser's cookie, ?space_token= once, E2B's traffic token), whether the core lets it pass,
 * the connection to the guest from the sandbox's netns, then the relay (ports_front.h) */
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster/cluster.h"
#include "daemon.h"
#include "http/proxy.h"
#include "log.h"
#include "net/net.h"
#include "ports_front.h"
#include "sandbox/ports.h"
#include "store/store.h"

struct port_req {
	struct http_hold hold; /* first: req_gone gets it */
	struct spaced *d;
	struct evhttp_request *req;
	char sb_id[ID_LEN];
	uint16_t port;
	char host[256];
	char token[80];        /* the credential offered (copied: the request's headers are evhttp's) */
	char traffic[80];
	bool from_query;       /* ?space_token=: answered with the cookie and a redirect */
	bool tls;
	struct port_check check;
	struct bufferevent *ubev;
	struct port_conn *conn; /* the connection to the guest being opened */
	bool reading;          /* a store job has it */
	bool gone;             /* the client left meanwhile */
};

static void req_free(struct port_req *pr)
{
	if (pr->ubev)
		bufferevent_free(pr->ubev);
	port_conn_cancel(pr->conn);
	explicit_bzero(pr->token, sizeof(pr->token));
	explicit_bzero(pr->traffic, sizeof(pr->traffic));
	free(pr);
}

static void req_gone(struct http_hold *h)
{
	struct port_req *pr = (struct port_req *)h;

	pr->gone = true;
	if (!pr->reading)
		req_free(pr);
}

/* Answers and frees (the reply closes the connection: the filter read none of its body). */
static void answer(struct port_req *pr, int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void answer(struct port_req *pr, int status, const char *code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	http_hold_end(&pr->hold);
	if (status == 503)
		evhttp_add_header(evhttp_request_get_output_headers(pr->req), "Retry-After", "1");
	http_reply_error(pr->req, status, code, "%s", msg);
	req_free(pr);
}

static void answer_err(struct port_req *pr, const space_err *e)
{
	switch (e->code) {
	case ENOENT:
		answer(pr, 404, "not_found", "%s", e->msg);
		break;
	case EACCES:
		answer(pr, 401, "unauthorized", "%s", e->msg);
		break;
	case EINVAL:
		answer(pr, 400, "bad_request", "%s", e->msg);
		break;
	default:
		answer(pr, 503, "unavailable", "%s", e->msg);
		break;
	}
}

/* The request target less ?space_token= (where the redirect sends the browser). */
static void clean_target(const char *uri, char *out, size_t len)
{
	const char *q = strchr(uri, '?');
	size_t used, n = q ? (size_t)(q - uri) : strlen(uri);
	bool first = true;

	snprintf(out, len, "%.*s", (int)n, uri);
	for (const char *p = q ? q + 1 : NULL; p && *p;) {
		const char *amp = strchr(p, '&');
		size_t pl = amp ? (size_t)(amp - p) : strlen(p);

		if (pl && !(pl >= strlen(PORT_TOKEN_QUERY) && strncmp(p, PORT_TOKEN_QUERY, strlen(PORT_TOKEN_QUERY)) == 0 &&
			    (pl == strlen(PORT_TOKEN_QUERY) || p[strlen(PORT_TOKEN_QUERY)] == '='))) {
			used = strlen(out);
			snprintf(out + used, len - used, "%c%.*s", first ? '?' : '&', (int)pl, p);
			first = false;
		}
		p = amp ? amp + 1 : NULL;
	}
	if (!out[0] || out[0] != '/')
		snprintf(out, len, "/");
}

static void redirect(struct port_req *pr)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(pr->req);
	char cookie[160], target[4096];

	clean_target(evhttp_request_get_uri(pr->req), target, sizeof(target));
	snprintf(cookie, sizeof(cookie), "%s=%s; Path=/; HttpOnly; SameSite=Lax%s", PORT_COOKIE, pr->token,
		 pr->tls ? "; Secure" : "");
	evhttp_add_header(h, "Set-Cookie", cookie);
	evhttp_add_header(h, "Location", target);
	evhttp_add_header(h, "Cache-Control", "no-store");
	evhttp_add_header(h, "Referrer-Policy", "no-referrer");
	http_hold_end(&pr->hold);
	http_reply_empty(pr->req, 302);
	req_free(pr);
}

static void connected(struct bufferevent *ubev, int status, const char *why, void *arg)
{
	struct port_req *pr = arg;
	struct bufferevent *cbev;
	struct port_cred cred = { .token = pr->token[0] ? pr->token : NULL, .traffic = pr->traffic[0] ? pr->traffic : NULL };
	char *peer = NULL;
	ev_uint16_t pport = 0;

	pr->conn = NULL;
	if (!ubev) {
		answer(pr, status, status == 404 ? "not_found" : "unavailable", "%s", why);
		return;
	}
	pr->ubev = ubev;
	evhttp_connection_get_peer(evhttp_request_get_connection(pr->req), &peer, &pport);
	if (!(cbev = http_take_over(pr->d->conns, pr->req))) {
		answer(pr, 500, "internal", "the connection could not be taken over");
		return;
	}
	http_hold_end(&pr->hold);
	if (port_relay_start(pr->d, pr->req, cbev, pr->ubev, pr->sb_id, pr->port, &cred, pr->host, peer ? peer : "unknown", pr->tls) < 0) {
		/* the filter is raw now: nothing can be answered on it */
		log_warn("ports: out of memory relaying to %s", pr->host);
		evhttp_connection_free(evhttp_request_get_connection(pr->req));
	} else {
		pr->ubev = NULL; /* the relay's */
	}
	req_free(pr);
}

static void connect_guest(struct port_req *pr)
{
	if (!(pr->conn = port_conn_start(pr->d, pr->sb_id, pr->port, connected, pr)))
		answer(pr, 503, "unavailable", "out of memory");
}

static void allowed(struct port_req *pr)
{
	if (pr->from_query)
		redirect(pr);
	else
		connect_guest(pr);
}

static void check_read(struct store *conn, void *arg)
{
	port_check_read(conn, &((struct port_req *)arg)->check);
}

static void checked(void *arg, bool ran)
{
	struct port_req *pr = arg;
	space_err err = { 0 };

	pr->reading = false;
	if (pr->gone) {
		req_free(pr);
		return;
	}
	if (!ran) {
		answer(pr, 503, "unavailable", "the daemon is stopping");
		return;
	}
	if (port_check_verdict(pr->d, &pr->check, &err) < 0)
		answer_err(pr, &err);
	else
		allowed(pr);
}

/* ---- an api process: the request and its connection go to the sandbox's node ---- */

struct node_hop {
	struct port_req *pr;
	char url[256];
	int rc;
	space_err err;
};

static void hop_lookup(struct store *conn, void *arg)
{
	struct node_hop *h = arg;

	h->rc = cluster_sandbox_url_on(conn, h->pr->sb_id, true, h->url, sizeof(h->url), &h->err);
}

static void hop_done(void *arg, bool ran)
{
	struct node_hop *h = arg;
	struct port_req *pr = h->pr;

	pr->reading = false;
	if (pr->gone) {
		req_free(pr);
	} else if (!ran) {
		answer(pr, 503, "unavailable", "this api process is stopping");
	} else if (h->rc < 0) {
		answer_err(pr, &h->err);
	} else {
		http_hold_end(&pr->hold);
		/* the node checks the credential and wakes the sandbox, as for a client of its own */
		if (http_proxy_taken(pr->d, pr->req, h->url, &h->err) < 0) {
			http_reply_error(pr->req, 502, "unavailable", "the node of sandbox %s: %s", pr->sb_id, h->err.msg);
		}
		req_free(pr);
	}
	free(h);
}

static void relay_to_node(struct port_req *pr)
{
	struct node_hop *h = calloc(1, sizeof(*h));
	space_err err = { 0 };

	if (!h) {
		answer(pr, 503, "unavailable", "out of memory");
		return;
	}
	h->pr = pr;
	pr->reading = true;
	if (store_async(pr->d->store, hop_lookup, hop_done, h, &err) < 0) {
		pr->reading = false;
		free(h);
		answer(pr, 503, "unavailable", "%s", err.msg);
	}
}

/* The credential a request offers, in order: X-Space-Token, ?space_token=, the cookie. */
static void credentials(struct port_req *pr, struct http_req *r)
{
	struct evkeyvalq *in = evhttp_request_get_input_headers(r->req);
	const char *v;

	if ((v = evhttp_find_header(in, PORT_TOKEN_HEADER)) && strlen(v) < sizeof(pr->token)) {
		snprintf(pr->token, sizeof(pr->token), "%s", v);
	} else if ((v = http_query(r, PORT_TOKEN_QUERY)) && strlen(v) < sizeof(pr->token)) {
		snprintf(pr->token, sizeof(pr->token), "%s", v);
		pr->from_query = true;
	} else if ((v = evhttp_find_header(in, "Cookie"))) {
		port_cookie_get(v, PORT_COOKIE, pr->token, sizeof(pr->token));
	}
	if ((v = evhttp_find_header(in, PORT_E2B_TRAFFIC_HEADER)) && strlen(v) < sizeof(pr->traffic))
		snprintf(pr->traffic, sizeof(pr->traffic), "%s", v);
}

void port_handle(struct http_req *r)
{
	const char *host = evhttp_find_header(evhttp_request_get_input_headers(r->req), "Host");
	struct port_req *pr = calloc(1, sizeof(*pr));
	struct port_cred cred = { 0 };
	space_err err = { 0 };
	int rc;

	if (!pr) {
		http_reply_error(r->req, 503, "unavailable", "out of memory");
		return;
	}
	pr->d = r->d;
	pr->req = r->req;
	pr->tls = r->plane->tls != NULL;
	http_hold_begin(&pr->hold, r->req, req_gone, r->d->conns);
	if (!host || strlen(host) >= sizeof(pr->host) ||
	    port_host_parse(host, strlen(host), r->d->cfg.ports_domain, &pr->port, pr->sb_id, &err) < 0) {
		if (!err.code)
			err_set(&err, EINVAL, "a Host header too long");
		answer_err(pr, &err);
		return;
	}
	snprintf(pr->host, sizeof(pr->host), "%s", host);
	if (r->d->cfg.role == DROLE_API) {
		relay_to_node(pr);
		return;
	}
	credentials(pr, r);
	cred.token = pr->token[0] ? pr->token : NULL;
	cred.traffic = pr->traffic[0] ? pr->traffic : NULL;
	if (pr->from_query && !cred.token) {
		answer(pr, 400, "bad_request", "?%s= is empty", PORT_TOKEN_QUERY);
		return;
	}
	rc = port_check_begin(r->d, pr->sb_id, pr->port, &cred, &pr->check, &err);
	if (rc < 0) {
		answer_err(pr, &err);
	} else if (rc == 0) {
		allowed(pr);
	} else {
		pr->reading = true;
		if (store_async(r->d->store, check_read, checked, pr, &err) < 0) {
			pr->reading = false;
			answer(pr, 503, "unavailable", "%s", err.msg);
		}
	}
}
