/* worker.c -- the cluster's database work off the event loop (worker.h) */
#include "worker.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "front/req.h"
#include "log.h"

/* The thread wakes this often for lease renewal and expiry. Claims are pushed (worker_poke: an
 * intent's NOTIFY, or room that opened); without a push it claims every --backstop-ms. */
#define LOOK_EVERY_MS 1000
#define EXPIRE_EVERY_MS 1000

struct cluster_worker {
	struct spaced *d;
	struct store *st;              /* the thread's own connection */
	bool net;                      /* the node gives VMs a network device (which ready
					* snapshots its creates clone) */
	void (*ready)(struct spaced *d);
	pthread_t thr;
	bool running;
	int pipe[2];                   /* thread -> loop: claims are queued */
	struct event *wake;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* under mu */
	bool stop;
	bool poked;                    /* look now (worker_poke) */
	bool node;                     /* self holds a node's record */
	struct node_rec self;
	int claims, room_mib;
	struct claimed *q;
	size_t qn, qcap;
};

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void claimed_clear(struct claimed *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		sandbox_rec_clear(&c[i].rec);
		json_decref(c[i].intent);
		if (c[i].req_ok)
			create_req_free(&c[i].req);
		create_reads_clear(&c[i].pre);
	}
}

void claimed_free(struct claimed *c, size_t n)
{
	claimed_clear(c, n);
	free(c);
}

/* ---- the thread ---- */

struct take {
	struct claimed *v;
	size_t n, cap;
	bool oom;
};

/* The record and intent are lent: the loop gets copies of its own. */
static int collect(const struct sandbox_rec *rec, const json_t *intent, void *arg)
{
	struct take *t = arg;
	struct claimed *c;

	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 4;
		struct claimed *v = realloc(t->v, cap * sizeof(*v));

		if (!v) {
			t->oom = true;
			return 1;
		}
		t->v = v;
		t->cap = cap;
	}
	c = &t->v[t->n++];
	memset(c, 0, sizeof(*c));
	c->rec = *rec;
	c->rec.env = json_deep_copy(rec->env);
	c->rec.metadata = json_deep_copy(rec->metadata);
	c->rec.network = json_deep_copy(rec->network);
	c->intent = json_deep_copy(intent);
	return 0;
}

static void renew(struct cluster_worker *w, struct node_rec *self)
{
	struct node_rec was;
	space_err err = { 0 };
	int64_t now = now_ms();
	bool lost = false;

	if (store_node_get(w->st, self->id, &was, &err) == 0)
		lost = was.state == NODE_LOST;
	self->renewed_ms = now;
	self->lease_expires_ms = now + (int64_t)w->d->cfg.lease_s * 1000;
	err_clear(&err);
	if (store_node_put(w->st, self, &err) < 0) {
		log_warn("node %s: renewing the lease: %s", self->id, err.msg);
		return;
	}
	if (lost)
		log_error("node %s: this node's lease had expired (was it cut off from the store?): its "
			  "sandboxes were marked lost and are no longer this node's to change",
			  self->id);
}

/* A restore intent names no operation: it is the sandbox's open restore (the claim moved it
 * to this node with the sandbox). */
struct open_restore {
	const char *sb_id;
	char *op_id;
};

static int find_restore(const struct op_rec *op, void *arg)
{
	struct open_restore *f = arg;

	if (op->kind != OPK_RESTORE || strcmp(op->sandbox_id, f->sb_id) != 0)
		return 0;
	snprintf(f->op_id, ID_LEN, "%s", op->id);
	return 1;
}

/* What the loop needs to act on a claim, read here (after the claim's transaction). */
static void claim_read(struct cluster_worker *w, struct claimed *c)
{
	const char *op = json_string_value(json_object_get(c->intent, "op"));
	json_t *body = json_object_get(c->intent, "request");
	space_err err = { 0 };

	c->kind = json_string_value(json_object_get(c->intent, "kind"));
	if (c->kind && strcmp(c->kind, "create") != 0 && strcmp(c->kind, "restore") != 0)
		c->kind = NULL;
	if (op && id_valid(op, "op-"))
		snprintf(c->op_id, sizeof(c->op_id), "%s", op);
	if (c->kind && !op && strcmp(c->kind, "restore") == 0) {
		struct open_restore f = { c->rec.id, c->op_id };

		if (store_op_each_open(w->st, find_restore, &f, &err) < 0)
			log_warn("sandbox %s: finding its restore operation: %s", c->rec.id, err.msg);
	}
	if (!c->kind || strcmp(c->kind, "create") != 0)
		return;
	err_clear(&err);
	if (!json_is_object(body) || req_create(body, &c->req, &err) < 0) {
		c->pre_rc = -1;
		snprintf(c->why, sizeof(c->why), "%s", err.msg[0] ? err.msg : "its intent holds no create request");
		return;
	}
	c->req_ok = true;
	if ((c->pre_rc = create_read(w->st, w->net, &c->req, &c->pre, &err)) < 0)
		snprintf(c->why, sizeof(c->why), "%s", err.msg);
}

static void claim(struct cluster_worker *w, const char *node, int claims, int room)
{
	struct take t = { 0 };
	space_err err = { 0 };
	char byte = 1;

	if (store_claim(w->st, node, claims, room, collect, &t, &err) < 0)
		log_warn("node %s: claiming: %s", node, err.msg);
	if (t.oom)
		log_error("node %s: out of memory queueing claims (the reconcile picks them up)", node);
	if (!t.n) {
		free(t.v);
		return;
	}
	for (size_t i = 0; i < t.n; i++)
		claim_read(w, &t.v[i]);
	pthread_mutex_lock(&w->mu);
	for (size_t i = 0; i < t.n; i++) {
		if (w->qn == w->qcap) {
			size_t cap = w->qcap ? w->qcap * 2 : 8;
			struct claimed *v = realloc(w->q, cap * sizeof(*v));

			if (!v) {
				/* Those not queued are this node's rows: the reconcile picks them up. */
				claimed_clear(t.v + i, t.n - i);
				log_error("node %s: out of memory queueing claims (the reconcile picks them up)", node);
				break;
			}
			w->q = v;
			w->qcap = cap;
		}
		w->q[w->qn++] = t.v[i];
	}
	/* Nothing more until the loop has counted these against its room. */
	w->claims = 0;
	pthread_mutex_unlock(&w->mu);
	free(t.v);
	if (write(w->pipe[1], &byte, 1) < 0 && errno != EAGAIN)
		log_warn("cluster worker: waking the loop: %s", strerror(errno));
}

static void *run(void *arg)
{
	struct cluster_worker *w = arg;
	int64_t renewed = 0, expired = 0;

	int64_t looked = 0;

	pthread_mutex_lock(&w->mu);
	while (!w->stop) {
		struct timespec until;
		struct node_rec self;
		bool node, poked;
		int claims, room;
		int64_t now = mono_ms();
		space_err err = { 0 };
		int nodes = 0, sandboxes = 0;

		self = w->self;
		node = w->node;
		claims = w->claims;
		room = w->room_mib;
		poked = w->poked;
		w->poked = false;
		pthread_mutex_unlock(&w->mu);
		/* A third of the lease: two renewals may fail before it lapses. */
		if (node && now - renewed >= (int64_t)w->d->cfg.lease_s * 1000 / 3) {
			renew(w, &self);
			renewed = now;
		}
		if (node && claims > 0 && room > 0 && (poked || now - looked >= w->d->cfg.backstop_ms)) {
			looked = now;
			claim(w, self.id, claims, room);
		}
		if (now - expired >= EXPIRE_EVERY_MS) {
			expired = now;
			if (store_nodes_expire(w->st, now_ms(), &nodes, &sandboxes, &err) < 0)
				log_warn("expiring leases: %s", err.msg);
			else if (nodes)
				log_warn("%d node(s) lost (lease expired): %d sandbox(es) marked lost or freed to "
					 "restore elsewhere", nodes, sandboxes);
		}
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += LOOK_EVERY_MS * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_mutex_lock(&w->mu);
		if (!w->stop && !w->poked)
			pthread_cond_timedwait(&w->cv, &w->mu, &until);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* ---- the loop's side ---- */

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
	struct cluster_worker *w = arg;
	char buf[64];

	(void)what;
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	w->ready(w->d);
}

int worker_start(struct spaced *d, const char *url, void (*ready)(struct spaced *d),
		 struct cluster_worker **out, space_err *err)
{
	struct cluster_worker *w = calloc(1, sizeof(*w));

	if (!w)
		return err_set(err, ENOMEM, "out of memory");
	w->d = d;
	w->ready = ready;
	w->pipe[0] = w->pipe[1] = -1;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	if (store_open_url(&w->st, url, err) < 0)
		goto fail;
	if (d->cfg.role == DROLE_NODE) {
		store_set_node(w->st, d->cfg.node_id);
		store_set_images(w->st, store_images(d->store)); /* its creates read templates */
	}
	w->net = sandbox_net(d);
	if (pipe2(w->pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		err_sys(err, errno, "cluster worker: pipe");
		goto fail;
	}
	w->wake = event_new(d->base, w->pipe[0], EV_READ | EV_PERSIST, on_wake, w);
	if (!w->wake || event_add(w->wake, NULL) < 0) {
		err_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	if ((errno = pthread_create(&w->thr, NULL, run, w)) != 0) {
		err_sys(err, errno, "cluster worker: starting its thread");
		goto fail;
	}
	w->running = true;
	*out = w;
	return 0;
fail:
	worker_stop(w);
	return -1;
}

void worker_publish(struct cluster_worker *w, const struct node_rec *self, int claims, int room_mib)
{
	pthread_mutex_lock(&w->mu);
	/* Room that opened (or grew) may be what an intent waits for: look at once. */
	if (claims > 0 && (w->claims == 0 || room_mib > w->room_mib)) {
		w->poked = true;
		pthread_cond_signal(&w->cv);
	}
	w->node = self != NULL;
	if (self)
		w->self = *self;
	w->claims = claims;
	w->room_mib = room_mib;
	pthread_mutex_unlock(&w->mu);
}

void worker_poke(struct cluster_worker *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->poked = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

struct claimed *worker_take(struct cluster_worker *w, size_t *n)
{
	struct claimed *q;

	pthread_mutex_lock(&w->mu);
	q = w->q;
	*n = w->qn;
	w->q = NULL;
	w->qn = w->qcap = 0;
	pthread_mutex_unlock(&w->mu);
	return q;
}

void worker_stop(struct cluster_worker *w)
{
	if (!w)
		return;
	if (w->running) {
		pthread_mutex_lock(&w->mu);
		w->stop = true;
		pthread_cond_signal(&w->cv);
		pthread_mutex_unlock(&w->mu);
		pthread_join(w->thr, NULL);
	}
	if (w->wake)
		event_free(w->wake);
	if (w->pipe[0] >= 0)
		close(w->pipe[0]);
	if (w->pipe[1] >= 0)
		close(w->pipe[1]);
	if (w->st)
		store_close(w->st);
	claimed_free(w->q, w->qn);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w);
}
