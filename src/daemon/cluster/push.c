/* push.c -- what other processes of a cluster wrote, heard as it commits (cluster.h): a node
 * hears that an intent waits and claims at once; an api process hears that an operation is
 * done and answers the long-polls waiting for it. PostgreSQL LISTEN on a connection of this
 * process's own (store.h, "Notifications"), read on the loop without blocking. A connection
 * lost is opened again a second later, and then every waiter looks once (what was sent in
 * between is not resent). */
#include "cluster.h"

#include <errno.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "sandbox/sandbox.h"
#include "store/store.h"
#include "worker.h"

#define REOPEN_MS 1000

struct cluster_push {
	struct spaced *d;
	struct store_listener *l;
	struct event *readable, *reopen;
	bool warned; /* a failure to listen was logged (once until it works again) */
};

static void heard(const char *channel, const char *payload, void *arg)
{
	struct spaced *d = arg;

	(void)payload;
	if (!strcmp(channel, STORE_CHANNEL_INTENT) && d->cfg.role == DROLE_NODE)
		worker_poke(d->worker);
	else if (!strcmp(channel, STORE_CHANNEL_OP) && d->cfg.role == DROLE_API)
		ops_poll(d); /* reads what its waiters wait for (one read at a time) */
}

static void drop(struct cluster_push *p)
{
	if (p->readable)
		event_free(p->readable);
	p->readable = NULL;
	store_listener_close(p->l);
	p->l = NULL;
}

static void later(struct cluster_push *p)
{
	struct timeval tv = { REOPEN_MS / 1000, (REOPEN_MS % 1000) * 1000 };

	evtimer_add(p->reopen, &tv);
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct cluster_push *p = arg;
	space_err err = { 0 };

	(void)fd;
	(void)what;
	if (store_listener_drain(p->l, heard, p->d, &err) == 0)
		return;
	log_warn("cluster: %s (listening again in %d s)", err.msg, REOPEN_MS / 1000);
	drop(p);
	later(p);
}

static int open_listener(struct cluster_push *p, space_err *err)
{
	const char *ch = p->d->cfg.role == DROLE_NODE ? STORE_CHANNEL_INTENT : STORE_CHANNEL_OP;

	if (store_listener_open(p->d->cfg.store_url, &ch, 1, &p->l, err) < 0)
		return -1;
	p->readable = event_new(p->d->base, store_listener_fd(p->l), EV_READ | EV_PERSIST, on_readable, p);
	if (!p->readable || event_add(p->readable, NULL) < 0) {
		drop(p);
		return err_set(err, ENOMEM, "out of memory");
	}
	return 0;
}

static void on_reopen(evutil_socket_t fd, short what, void *arg)
{
	struct cluster_push *p = arg;
	space_err err = { 0 };

	(void)fd;
	(void)what;
	if (open_listener(p, &err) < 0) {
		if (!p->warned)
			log_warn("cluster: %s (trying every %d s; until then claims and results wait for "
				 "the next look)", err.msg, REOPEN_MS / 1000);
		p->warned = true;
		later(p);
		return;
	}
	if (p->warned)
		log_info("cluster: listening for %s again", p->d->cfg.role == DROLE_NODE ? "intents" : "results");
	p->warned = false;
	/* What was sent while nobody listened: look once. */
	if (p->d->cfg.role == DROLE_NODE)
		worker_poke(p->d->worker);
	else
		ops_poll(p->d);
}

int cluster_push_start(struct spaced *d, space_err *err)
{
	struct cluster_push *p;

	if (d->cfg.role == DROLE_ALL || d->push)
		return 0;
	if (!(p = calloc(1, sizeof(*p))))
		return err_set(err, ENOMEM, "out of memory");
	p->d = d;
	p->reopen = evtimer_new(d->base, on_reopen, p);
	if (!p->reopen) {
		free(p);
		return err_set(err, ENOMEM, "out of memory");
	}
	d->push = p;
	if (open_listener(p, err) < 0) {
		if (err->code == ENOTSUP) {
			cluster_push_stop(d);
			return 0; /* not PostgreSQL: nobody else writes */
		}
		log_warn("cluster: %s (trying every %d s)", err->msg, REOPEN_MS / 1000);
		err_clear(err);
		p->warned = true;
		later(p);
	}
	return 0;
}

void cluster_push_stop(struct spaced *d)
{
	struct cluster_push *p = d->push;

	if (!p)
		return;
	drop(p);
	event_free(p->reopen);
	free(p);
	d->push = NULL;
}
