/* webhook.h -- webhooks: where lifecycle events are POSTed as they happen, signed, in order,
 * at least once (docs/design/events.md, "Webhooks").
 *
 * A webhook has a URL, the event types it wants, a secret and a format (SPACE's own, or
 * a front end's such as E2B's: webhook_formats.c). It keeps a cursor: the last event it is done
 * with. The deliverer sends the next matching event after the cursor and moves it on a 2xx;
 * anything else is tried again with backoff (1 s, 2 s, 4 s ... 60 s), up to WH_MAX_ATTEMPTS,
 * then it is recorded as given up and the next one goes. One delivery at a time per webhook,
 * so every sandbox's events arrive in order. Each attempt is a row of its delivery log. A URL
 * must resolve to public addresses only (each delivery resolves it again and connects to the
 * address it checked); --webhooks-allow-loopback lets loopback through too. */
#ifndef SPACE_WEBHOOK_H
#define SPACE_WEBHOOK_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "err.h"
#include "events.h"

#define WH_URL_MAX 2048
#define WH_SECRET_MAX 256
#define WH_NAME_MAX 128
#define WH_MAX_ATTEMPTS 10
#define WH_MAX 100 /* webhooks per daemon */
#define WH_TIMEOUT_S 10

/* ---- pure (webhook_url.c, webhook_sign.c; unit-tested) ---- */
struct wh_url {
	bool tls;
	bool host_is_ip;
	char host[256];
	int port;
	char path[WH_URL_MAX]; /* from the first '/' (or "/"), with the query */
};
int wh_url_parse(const char *url, struct wh_url *out, space_err *err);
enum { WH_ADDR_PUBLIC, WH_ADDR_LOOPBACK, WH_ADDR_REFUSED };
/* Which kind an address is; *why (may be NULL) names its range. */
int wh_addr_class(const struct sockaddr *sa, const char **why);
/* 0 when a delivery may go there; -1 (EACCES, naming the range) when not. */
int wh_addr_check(const struct sockaddr *sa, bool allow_loopback, space_err *err);
/* SPACE's: hex HMAC-SHA256 with the secret over "<ts>.<body>". E2B's: unpadded base64 of
 * SHA-256 over the secret followed by the body. */
int wh_sign_space(const char *secret, int64_t ts, const char *body, size_t len, char out[65]);
int wh_sign_e2b(const char *secret, const char *body, size_t len, char out[48]);
/* The wait before attempt n+1 after attempt n failed (n >= 1). */
int64_t wh_backoff_ms(int attempt);

/* ---- formats (webhook_formats.c: the table; each front end its own entry) ---- */
struct webhook;
struct evkeyvalq;
struct webhook_format {
	const char *name; /* "space", "e2b" */
	/* The body for one event (NULL: out of memory). */
	json_t *(*render)(const struct sb_event *e, const struct webhook *w);
	/* Headers that sign body and name the delivery. -1 if it cannot be signed. */
	int (*sign)(const struct webhook *w, const struct sb_event *e, const char *body, size_t len,
		    struct evkeyvalq *hdrs);
};
const struct webhook_format *webhook_format_find(const char *name);
/* A front end's format (main.c adds each before events_init). */
void webhook_format_add(const struct webhook_format *f);
extern const struct webhook_format space_webhook_format;

/* ---- the daemon's webhooks (webhook.c, webhook_deliver.c) ---- */
struct spaced;
struct webhook_req {
	const char *url;
	unsigned mask;
	const char *secret;
	const char *name;   /* "" or NULL: none */
	const char *format; /* NULL: "space" */
	bool enabled;
};
/* What the front ends read of one. */
struct webhook_view {
	const char *id, *url, *name, *format;
	unsigned mask;
	bool enabled;
	int64_t created_ms, cursor;
	int pending_attempts; /* tries of the event in hand, 0 = none */
	const char *last_error; /* "" = none */
};
const char *webhook_secret(const struct webhook *w);
const char *webhook_id(const struct webhook *w);
void webhook_view(const struct webhook *w, struct webhook_view *out);

int webhooks_init(struct spaced *d, space_err *err);
void webhooks_free(struct spaced *d);
void webhooks_kick(struct spaced *d);
void webhooks_tick(struct spaced *d);

/* Creating checks the URL (a name is resolved and every address it has checked) before it
 * answers: done(arg, w, err) is called once, on the loop, maybe before webhook_create returns;
 * w NULL with err set (EINVAL: bad input, EACCES: a refused address, ENOSPC: too many). The
 * new webhook's cursor is the newest event: it gets what happens from now on. */
typedef void (*webhook_created_fn)(void *arg, const struct webhook *w, const space_err *err);
void webhook_create(struct spaced *d, const struct webhook_req *req, webhook_created_fn done, void *arg);
/* Changes what req sets (url: checked again, synchronously for IP literals only: a name is
 * checked at each delivery). */
int webhook_update(struct spaced *d, const char *id, const struct webhook_req *req, space_err *err);
int webhook_delete(struct spaced *d, const char *id, space_err *err);
struct webhook *webhook_find(struct spaced *d, const char *id);
/* In creation order; fn returns nonzero to stop. */
void webhooks_each(struct spaced *d, int (*fn)(const struct webhook *w, void *arg), void *arg);

#endif
