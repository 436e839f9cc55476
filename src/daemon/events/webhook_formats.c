/* webhook_formats.c -- the shapes a webhook's deliveries can take: SPACE's own (below) and
 * each front end's that has one (E2B's: e2b/e2b_events.c), added by main.c before the stored
 * webhooks are read. */
#include <event2/keyvalq_struct.h>
#include <event2/http.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "webhook.h"

#define FORMATS_MAX 8

static const struct webhook_format *formats[FORMATS_MAX] = { &space_webhook_format };
static size_t nformats = 1;

void webhook_format_add(const struct webhook_format *f)
{
	if (nformats < FORMATS_MAX && !webhook_format_find(f->name))
		formats[nformats++] = f;
}

const struct webhook_format *webhook_format_find(const char *name)
{
	for (size_t i = 0; name && i < nformats; i++)
		if (strcmp(formats[i]->name, name) == 0)
			return formats[i];
	return NULL;
}

/* ---- SPACE's: the event as GET /v1/events shows it, plus the webhook's id ---- */

static json_t *space_render(const struct sb_event *e, const struct webhook *w)
{
	json_t *j = event_json(e);

	if (j)
		json_object_set_new(j, "webhook_id", json_string(webhook_id(w)));
	return j;
}

/* X-Space-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>; a receiver
 * recomputes it and refuses an old t (replays). */
static int space_sign(const struct webhook *w, const struct sb_event *e, const char *body, size_t len,
		      struct evkeyvalq *h)
{
	int64_t ts = (int64_t)time(NULL);
	char mac[65], v[128], id[80], t[24];

	if (wh_sign_space(webhook_secret(w), ts, body, len, mac) < 0)
		return -1;
	snprintf(v, sizeof(v), "t=%lld,v1=%s", (long long)ts, mac);
	snprintf(id, sizeof(id), "%s-%lld", webhook_id(w), (long long)e->seq);
	snprintf(t, sizeof(t), "%lld", (long long)ts);
	evhttp_add_header(h, "X-Space-Event", ev_type_name(e->type));
	evhttp_add_header(h, "X-Space-Webhook-Id", webhook_id(w));
	evhttp_add_header(h, "X-Space-Delivery", id);
	evhttp_add_header(h, "X-Space-Timestamp", t);
	evhttp_add_header(h, "X-Space-Signature", v);
	return 0;
}

const struct webhook_format space_webhook_format = {
	.name = "space",
	.render = space_render,
	.sign = space_sign,
};
