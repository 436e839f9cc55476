/* webhook_deliver.c -- one webhook's deliveries: the next event after its cursor, its URL
 * resolved and checked, one signed POST, the answer logged, the cursor moved or the attempt
 * made again later (webhook.h) */
#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/util.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "http/tls.h"
#include "log.h"
#include "store/store.h"
#include "webhook_int.h"

#define CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define BACKLOG_BATCH 200

/* ---- resolving ---- */

struct resolve {
	wh_resolved_fn cb;
	void *arg;
	bool allow_loopback;
	int port;
	struct evdns_getaddrinfo_request **pending;
};

static void resolved(int result, struct evutil_addrinfo *res, void *arg)
{
	struct resolve *r = arg;
	space_err err = { 0 };
	const struct sockaddr *pick = NULL;

	/* Cancelled: its webhook is being freed; nothing of it is touched. */
	if (result == EVUTIL_EAI_CANCEL) {
		free(r);
		if (res)
			evutil_freeaddrinfo(res);
		return;
	}
	if (r->pending)
		*r->pending = NULL;
	if (result != 0 || !res)
		err_set(&err, EHOSTUNREACH, "url: the host does not resolve (%s)", evutil_gai_strerror(result));
	/* Every address the name has must be allowed: a name with one public and one private
	 * address would otherwise reach the private one on some delivery. */
	for (struct evutil_addrinfo *a = res; a && !err.code; a = a->ai_next) {
		if (wh_addr_check(a->ai_addr, r->allow_loopback, &err) < 0)
			break;
		if (!pick)
			pick = a->ai_addr;
	}
	if (!err.code && pick) {
		struct sockaddr_storage ss;

		memcpy(&ss, pick, pick->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
		((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)r->port);
		r->cb(r->arg, (struct sockaddr *)&ss, NULL);
	} else {
		r->cb(r->arg, NULL, &err);
	}
	if (res)
		evutil_freeaddrinfo(res);
	free(r);
}

int wh_resolve(struct spaced *d, const struct wh_url *u, wh_resolved_fn cb, void *arg,
	       struct evdns_getaddrinfo_request **pending)
{
	struct webhooks *hs = d->webhooks;
	struct resolve *r = calloc(1, sizeof(*r));
	struct evutil_addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct evdns_getaddrinfo_request *q;

	if (!r)
		return -1;
	*r = (struct resolve){ .cb = cb, .arg = arg, .allow_loopback = d->cfg.webhooks_allow_loopback,
			       .port = u->port, .pending = pending };
	if (u->host_is_ip) {
		hints.ai_flags = EVUTIL_AI_NUMERICHOST;
		struct evutil_addrinfo *res = NULL;
		int rc = evutil_getaddrinfo(u->host, NULL, &hints, &res);

		r->pending = NULL;
		resolved(rc, res, r);
		return 0;
	}
	if (!hs->dns && !(hs->dns = evdns_base_new(d->base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
								  EVDNS_BASE_DISABLE_WHEN_INACTIVE))) {
		free(r);
		return -1;
	}
	q = evdns_getaddrinfo(hs->dns, u->host, NULL, &hints, resolved, r);
	if (pending && q)
		*pending = q;
	return 0;
}

/* ---- the event in hand ---- */

static void take(struct webhook *w, const struct sb_event *e)
{
	w->cur = *e;
	if (w->cur.data)
		json_incref(w->cur.data);
	w->have_cur = true;
	w->attempts = 0;
	w->next_ms = 0;
}

static void drop_cur(struct webhook *w)
{
	event_clear(&w->cur);
	w->have_cur = false;
	w->attempts = 0;
}

static void backlog_free(struct webhook *w)
{
	for (size_t i = 0; i < w->nbacklog; i++)
		event_clear(&w->backlog[i]);
	free(w->backlog);
	w->backlog = NULL;
	w->nbacklog = w->ibacklog = 0;
}

static int first_match(const struct sb_event *e, void *arg)
{
	take(arg, e);
	return 1;
}

/* ---- events older than memory, read from the store ---- */

struct backlog_read {
	struct spaced *d;
	char id[ID_LEN];
	int64_t after;
	struct sb_event *v;
	size_t n;
	int64_t last_seq;
};

static int backlog_row(const struct event_row *row, void *arg)
{
	struct backlog_read *b = arg;
	json_t *j = json_loads(row->body, 0, NULL);
	space_err err = { 0 };

	b->last_seq = row->seq;
	if (j && event_from_json(j, &b->v[b->n], &err) == 0) {
		b->v[b->n].seq = row->seq;
		b->n++;
	}
	json_decref(j);
	return 0;
}

static void backlog_run(struct store *conn, void *arg)
{
	struct backlog_read *b = arg;
	space_err err = { 0 };

	if (!(b->v = calloc(BACKLOG_BATCH, sizeof(*b->v))))
		return;
	if (store_events_each(conn, b->after, NULL, BACKLOG_BATCH, backlog_row, b, &err) < 0)
		log_warn("webhook %s: older events: %s", b->id, err.msg);
}

static void backlog_done(void *arg, bool ran)
{
	struct backlog_read *b = arg;
	struct webhook *w = ran ? webhook_find(b->d, b->id) : NULL;

	if (w && w->reading) {
		w->reading = false;
		backlog_free(w);
		w->backlog = b->v;
		w->nbacklog = b->n;
		b->v = NULL;
		/* Nothing older is stored: from here, memory has it. */
		if (b->last_seq == 0 || b->n == 0)
			w->cursor = events_mem_oldest(b->d) - 1 > w->cursor ? events_mem_oldest(b->d) - 1 : w->cursor;
		wh_pump(w);
	}
	if (b->v) {
		for (size_t i = 0; i < b->n; i++)
			event_clear(&b->v[i]);
		free(b->v);
	}
	free(b);
}

static void read_backlog(struct webhook *w)
{
	struct backlog_read *b = calloc(1, sizeof(*b));
	space_err err = { 0 };

	if (!b)
		return;
	b->d = w->d;
	snprintf(b->id, sizeof(b->id), "%s", w->id);
	b->after = w->cursor;
	w->reading = true;
	if (store_async(w->d->store, backlog_run, backlog_done, b, &err) < 0) {
		w->reading = false;
		free(b);
	}
}

/* The next event this webhook wants, in w->cur: false when there is none yet. */
static bool next_event(struct webhook *w)
{
	int64_t oldest = events_mem_oldest(w->d);

	while (w->ibacklog < w->nbacklog) {
		struct sb_event *e = &w->backlog[w->ibacklog++];

		if (e->seq <= w->cursor)
			continue;
		if (w->mask & (1u << e->type)) {
			take(w, e);
			return true;
		}
		w->cursor = e->seq;
	}
	backlog_free(w);
	if (w->cursor < oldest - 1) {
		read_backlog(w);
		return false;
	}
	if (events_mem_each(w->d, w->cursor, NULL, w->mask, 1, first_match, w) > 0)
		return true;
	/* Nothing it wants up to the newest: it is done with all of them (stored by the next
	 * tick: events it does not want cost no write each). */
	w->cursor = events_last_seq(w->d);
	return false;
}

/* ---- one attempt ---- */

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	wh_pump(arg);
}

static void later(struct webhook *w, int64_t ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	if (!w->timer && !(w->timer = evtimer_new(w->d->base, on_timer, w)))
		return;
	evtimer_add(w->timer, &tv);
}

static void attempt_end(struct webhook *w, int status, const char *error)
{
	bool ok = status >= 200 && status < 300;
	int64_t now = now_ms();
	char t[32];
	json_t *row;

	w->busy = false;
	w->attempts++;
	fmt_time(t, now);
	snprintf(w->last_error, sizeof(w->last_error), "%s", ok ? "" : error ? error : "");
	row = json_pack("{s:s,s:I,s:s,s:s,s:i,s:b,s:s,s:I,s:s}", "event_id", "", "seq", (json_int_t)w->cur.seq,
			"type", ev_type_name(w->cur.type), "sandbox_id", w->cur.sandbox_id, "attempt", w->attempts,
			"ok", ok, "time", t, "duration_ms", (json_int_t)(now - w->started_ms), "url", w->url);
	if (row) {
		char seq[24];

		snprintf(seq, sizeof(seq), "%lld", (long long)w->cur.seq);
		json_object_set_new(row, "event_id", json_string(seq));
		json_object_set_new(row, "status", status > 0 ? json_integer(status) : json_null());
		json_object_set_new(row, "error", ok ? json_null() : json_string(error ? error : "not a 2xx answer"));
	}
	if (!ok && w->attempts >= WH_MAX_ATTEMPTS && row)
		json_object_set_new(row, "gave_up", json_true());
	wh_log(w, row);
	if (ok || w->attempts >= WH_MAX_ATTEMPTS) {
		if (!ok)
			log_warn("webhook %s: event %lld given up after %d attempts: %s", w->id, (long long)w->cur.seq,
				 w->attempts, w->last_error);
		w->cursor = w->cur.seq;
		drop_cur(w);
		wh_save_cursor(w);
		later(w, 0);
		return;
	}
	w->next_ms = now + wh_backoff_ms(w->attempts);
	later(w, wh_backoff_ms(w->attempts));
}

static void on_response(struct evhttp_request *req, void *arg)
{
	struct webhook *w = arg;
	int code = req ? evhttp_request_get_response_code(req) : 0;
	char why[64];

	/* evhttp frees the connection itself now (evhttp_connection_free_on_completion). */
	w->conn = NULL;
	if (!w->busy)
		return;
	if (code >= 200 && code < 300) {
		attempt_end(w, code, NULL);
	} else if (code > 0) {
		snprintf(why, sizeof(why), "answered %d", code);
		attempt_end(w, code, why);
	} else {
		attempt_end(w, 0, w->last_error[0] ? w->last_error : "no answer (refused, reset or timed out)");
	}
}

static void on_error(enum evhttp_request_error e, void *arg)
{
	struct webhook *w = arg;
	static const char *const why[] = {
		[EVREQ_HTTP_TIMEOUT] = "timed out",
		[EVREQ_HTTP_EOF] = "the connection closed before an answer",
		[EVREQ_HTTP_INVALID_HEADER] = "an answer that is not HTTP",
		[EVREQ_HTTP_BUFFER_ERROR] = "could not connect (refused or unreachable)",
		[EVREQ_HTTP_REQUEST_CANCEL] = "cancelled",
		[EVREQ_HTTP_DATA_TOO_LONG] = "an answer over 64 KiB",
	};

	snprintf(w->last_error, sizeof(w->last_error), "%s",
		 (unsigned)e < sizeof(why) / sizeof(why[0]) && why[e] ? why[e] : "failed");
}

static struct bufferevent *open_bev(struct webhook *w)
{
	struct webhooks *hs = w->d->webhooks;
	space_err err = { 0 };
	SSL *ssl;

	if (!w->u.tls)
		return bufferevent_socket_new(w->d->base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (!hs->tls && !(hs->tls = http_tls_client_ctx(CA_BUNDLE, &err))) {
		snprintf(w->last_error, sizeof(w->last_error), "%s", err.msg);
		return NULL;
	}
	if (!(ssl = http_tls_client(hs->tls, w->u.host)))
		return NULL;
	return bufferevent_openssl_socket_new(w->d->base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
					      BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
}

static int add_headers(struct webhook *w, struct evhttp_request *req, const char *body, size_t len)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	char host[300];

	if ((w->u.tls && w->u.port == 443) || (!w->u.tls && w->u.port == 80))
		snprintf(host, sizeof(host), strchr(w->u.host, ':') ? "[%s]" : "%s", w->u.host);
	else
		snprintf(host, sizeof(host), strchr(w->u.host, ':') ? "[%s]:%d" : "%s:%d", w->u.host, w->u.port);
	evhttp_add_header(h, "Host", host);
	evhttp_add_header(h, "Content-Type", "application/json");
	evhttp_add_header(h, "User-Agent", "SPACE-webhooks/" SPACE_VERSION);
	evhttp_add_header(h, "Connection", "close");
	return w->fmt->sign(w, &w->cur, body, len, h);
}

static void send_to(void *arg, const struct sockaddr *sa, const space_err *rerr)
{
	struct webhook *w = arg;
	char ip[INET6_ADDRSTRLEN] = "", *body = NULL;
	json_t *j = NULL;
	struct bufferevent *bev = NULL;
	struct evhttp_request *req = NULL;
	int port;

	w->dns = NULL;
	if (!w->busy)
		return;
	if (rerr) {
		attempt_end(w, 0, rerr->msg);
		return;
	}
	port = ntohs(((const struct sockaddr_in *)sa)->sin_port);
	evutil_inet_ntop(sa->sa_family,
			 sa->sa_family == AF_INET6 ? (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr
						   : (const void *)&((const struct sockaddr_in *)sa)->sin_addr,
			 ip, sizeof(ip));
	w->last_error[0] = '\0';
	if (!(j = w->fmt->render(&w->cur, w)) || !(body = json_dumps(j, JSON_COMPACT)) || !(bev = open_bev(w)) ||
	    !(w->conn = evhttp_connection_base_bufferevent_new(w->d->base, NULL, bev, ip, (unsigned short)port))) {
		if (bev && !w->conn)
			bufferevent_free(bev);
		json_decref(j);
		free(body);
		attempt_end(w, 0, w->last_error[0] ? w->last_error : "out of memory");
		return;
	}
	json_decref(j);
	evhttp_connection_set_timeout(w->conn, WH_TIMEOUT_S);
	evhttp_connection_set_retries(w->conn, 0);
	evhttp_connection_set_max_body_size(w->conn, 64 * 1024);
	if (!(req = evhttp_request_new(on_response, w)) || add_headers(w, req, body, strlen(body)) < 0) {
		if (req)
			evhttp_request_free(req);
		evhttp_connection_free(w->conn);
		w->conn = NULL;
		free(body);
		attempt_end(w, 0, "the delivery could not be signed");
		return;
	}
	evhttp_request_set_error_cb(req, on_error);
	evbuffer_add(evhttp_request_get_output_buffer(req), body, strlen(body));
	free(body);
	evhttp_connection_free_on_completion(w->conn);
	if (evhttp_make_request(w->conn, req, EVHTTP_REQ_POST, w->u.path) < 0) {
		/* (evhttp freed req and, on completion, the connection) */
		w->conn = NULL;
		attempt_end(w, 0, "could not connect");
	}
}

void wh_pump(struct webhook *w)
{
	int64_t now = now_ms();

	if (!w->enabled || w->busy || w->reading)
		return;
	if (!w->have_cur && !next_event(w))
		return;
	if (w->next_ms > now) {
		later(w, w->next_ms - now);
		return;
	}
	w->busy = true;
	w->started_ms = now;
	if (wh_resolve(w->d, &w->u, send_to, w, &w->dns) < 0)
		attempt_end(w, 0, "out of memory");
}

void wh_stop(struct webhook *w)
{
	w->busy = false;
	if (w->dns) {
		evdns_getaddrinfo_cancel(w->dns);
		w->dns = NULL;
	}
	if (w->conn) {
		evhttp_connection_free(w->conn);
		w->conn = NULL;
	}
	if (w->timer) {
		event_free(w->timer);
		w->timer = NULL;
	}
	drop_cur(w);
	backlog_free(w);
}

void wh_deliver_free(struct webhooks *hs)
{
	if (hs->dns)
		evdns_base_free(hs->dns, 1);
	if (hs->tls)
		SSL_CTX_free(hs->tls);
}
