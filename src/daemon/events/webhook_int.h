/* webhook_int.h -- what webhook.c (the registry) and webhook_deliver.c (the deliverer)
 * share; nothing outside src/daemon/events includes it */
#ifndef SPACE_WEBHOOK_INT_H
#define SPACE_WEBHOOK_INT_H

#include <event2/event.h>

#include "model/model.h"
#include "webhook.h"

struct evhttp_connection;
struct evdns_getaddrinfo_request;
struct evdns_base;

struct webhook {
	struct spaced *d;
	char id[ID_LEN];
	char url[WH_URL_MAX];
	struct wh_url u;
	char name[WH_NAME_MAX];
	char secret[WH_SECRET_MAX];
	const struct webhook_format *fmt;
	unsigned mask;
	bool enabled;
	int64_t created_ms;
	int64_t cursor;       /* the last event it is done with */
	int64_t saved_cursor; /* ... as last written to the store */
	/* The delivery in hand. */
	bool have_cur, busy, reading;
	struct sb_event cur;
	int attempts;
	int64_t next_ms, started_ms;
	char last_error[256];
	struct event *timer;
	struct evhttp_connection *conn;
	struct evdns_getaddrinfo_request *dns;
	/* Events read from the store when the cursor is older than memory. */
	struct sb_event *backlog;
	size_t nbacklog, ibacklog;
	struct webhook *next;
};

struct webhooks {
	struct webhook *list; /* creation order */
	int n;
	struct evdns_base *dns;
	struct ssl_ctx_st *tls;
};

/* webhook.c: store writes on the store's thread. */
void wh_save(struct webhook *w);
void wh_save_cursor(struct webhook *w);
void wh_log(struct webhook *w, json_t *attempt);
/* webhook_deliver.c */
void wh_pump(struct webhook *w);
void wh_stop(struct webhook *w);
void wh_deliver_free(struct webhooks *hs);
/* Resolves w's host (no lookup for an IP literal) and checks every address: cb gets the one
 * to connect to, or err. */
typedef void (*wh_resolved_fn)(void *arg, const struct sockaddr *sa, const space_err *err);
int wh_resolve(struct spaced *d, const struct wh_url *u, wh_resolved_fn cb, void *arg,
	       struct evdns_getaddrinfo_request **pending);

#endif
