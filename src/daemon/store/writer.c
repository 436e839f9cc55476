/* writer.c -- write-behind for one store: the thread, its queue and the overlay (writer.h) */
#include "writer.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "store_backend.h"

#define BUCKETS 1024
#define RETRY_FIRST_MS 100
#define RETRY_MAX_MS 2000

/* A row with a write not yet committed, or a job. */
struct pend {
	enum pend_kind kind;
	char id[ID_LEN];
	union pend_rec r;
	uint64_t seq;                  /* the writer's count of puts when this version came */
	enum { P_OUT, P_QUEUED, P_LATER } where; /* P_OUT: in flight, or a job's done list */
	int failures;
	int64_t retry_at;              /* P_LATER: when (monotonic ms) */
	void (*fn)(struct store *conn, void *arg);
	void (*done)(void *arg, bool ran);
	void *arg;
	struct pend *hnext;            /* the overlay's hash chain (rows only) */
	struct pend *qnext;            /* the queue, the later list or the done list */
};

struct store_writer {
	struct store *conn;
	pthread_t thr;
	bool running;
	pthread_mutex_t mu;
	pthread_cond_t more, idle;
	int wake[2];                   /* thread -> caller: jobs are done */
	/* under mu */
	struct pend *hash[BUCKETS];
	struct pend *qhead, **qtail;
	struct pend *later;            /* rows whose write failed, to try again */
	struct pend *done, **dtail;
	bool busy, stop;
	int64_t drain_until;
	uint64_t seq;
	struct store_write_stats stats;
};

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *const kind_names[] = { "sandbox", "operation", "session", "job" };

/* ---- records ---- */

static void rec_copy(enum pend_kind kind, union pend_rec *dst, const void *src)
{
	switch (kind) {
	case PEND_SANDBOX: {
		const struct sandbox_rec *s = src;

		dst->sb = *s;
		dst->sb.env = json_deep_copy(s->env);
		dst->sb.metadata = json_deep_copy(s->metadata);
		dst->sb.network = json_deep_copy(s->network);
		break;
	}
	case PEND_OP: {
		const struct op_rec *o = src;

		dst->op = *o;
		dst->op.result = json_deep_copy(o->result);
		break;
	}
	case PEND_SESSION: {
		const struct session_rec *s = src;

		dst->ss = *s;
		dst->ss.argv = json_deep_copy(s->argv);
		dst->ss.env = json_deep_copy(s->env);
		break;
	}
	default:
		break;
	}
}

void pend_rec_clear(enum pend_kind kind, union pend_rec *r)
{
	if (kind == PEND_SANDBOX)
		sandbox_rec_clear(&r->sb);
	else if (kind == PEND_OP)
		op_rec_clear(&r->op);
	else if (kind == PEND_SESSION)
		session_rec_clear(&r->ss);
}

static const char *rec_id(enum pend_kind kind, const void *rec)
{
	if (kind == PEND_SANDBOX)
		return ((const struct sandbox_rec *)rec)->id;
	if (kind == PEND_OP)
		return ((const struct op_rec *)rec)->id;
	return ((const struct session_rec *)rec)->id;
}

static int rec_write(struct store *conn, enum pend_kind kind, const union pend_rec *r, space_err *err)
{
	if (kind == PEND_SANDBOX)
		return conn->ops->sandbox_put(conn, &r->sb, err);
	if (kind == PEND_OP)
		return conn->ops->op_put(conn, &r->op, err);
	return conn->ops->session_put(conn, &r->ss, err);
}

/* ---- the overlay (under mu) ---- */

static unsigned bucket(enum pend_kind kind, const char *id)
{
	uint32_t h = 2166136261u ^ (uint32_t)kind;

	for (; *id; id++)
		h = (h ^ (unsigned char)*id) * 16777619u;
	return h % BUCKETS;
}

static struct pend **find(struct store_writer *w, enum pend_kind kind, const char *id)
{
	struct pend **pp = &w->hash[bucket(kind, id)];

	for (; *pp; pp = &(*pp)->hnext)
		if ((*pp)->kind == kind && strcmp((*pp)->id, id) == 0)
			break;
	return pp;
}

static void drop(struct store_writer *w, struct pend *p)
{
	struct pend **pp = find(w, p->kind, p->id);

	if (*pp == p)
		*pp = p->hnext;
	pend_rec_clear(p->kind, &p->r);
	free(p);
	w->stats.pending--;
}

static void enqueue(struct store_writer *w, struct pend *p)
{
	p->where = P_QUEUED;
	p->qnext = NULL;
	*w->qtail = p;
	w->qtail = &p->qnext;
	pthread_cond_signal(&w->more);
}

static struct pend *dequeue(struct store_writer *w)
{
	struct pend *p = w->qhead;

	if (p && !(w->qhead = p->qnext))
		w->qtail = &w->qhead;
	if (p)
		p->where = P_OUT;
	return p;
}

/* ---- the thread ---- */

/* Rows whose time to try again has come (all of them while draining) go back to the queue. */
static int64_t promote_due(struct store_writer *w, int64_t now)
{
	struct pend **pp = &w->later, *p;
	int64_t next = 0;

	while ((p = *pp)) {
		if (w->stop || p->retry_at <= now) {
			*pp = p->qnext;
			enqueue(w, p);
			continue;
		}
		if (!next || p->retry_at < next)
			next = p->retry_at;
		pp = &p->qnext;
	}
	return next;
}

/* Only the database's own answer about the row is final: the fence (ESTALE), a record it
 * refuses (EINVAL) or a conflict (EEXIST). The rest (unreachable, locked, disk full, I/O)
 * may pass: the row is tried again, newest version first, every RETRY_MAX_MS at most. */
static bool final(int code)
{
	return code == ESTALE || code == EINVAL || code == EEXIST;
}

static void settle(struct store_writer *w, struct pend *p, uint64_t seq, int rc, space_err *err)
{
	bool newer = p->seq != seq;

	if (rc == 0) {
		w->stats.written++;
		if (p->failures)
			log_info("store: %s %s written after %d failed tries", kind_names[p->kind], p->id,
				 p->failures);
		p->failures = 0;
		if (!newer)
			drop(w, p);
		return;
	}
	if (final(err->code) || (w->stop && mono_ms() >= w->drain_until)) {
		w->stats.dropped++;
		log_error("store: %s %s: %s (%s)", kind_names[p->kind], p->id, err->msg,
			  w->stop && !final(err->code) ? "exiting: not written" : "not written");
		if (!newer)
			drop(w, p);
		return;
	}
	if (!p->failures++)
		log_error("store: %s %s: %s (kept; tried again until the store takes it)", kind_names[p->kind],
			  p->id, err->msg);
	w->stats.retried++;
	if (newer)
		return; /* the newer version is queued already */
	p->retry_at = mono_ms() + (w->stop ? RETRY_FIRST_MS
				     : (p->failures >= 5 ? RETRY_MAX_MS : RETRY_FIRST_MS << (p->failures - 1)));
	p->where = P_LATER;
	p->qnext = w->later;
	w->later = p;
}

static void run_job(struct store_writer *w, struct pend *p)
{
	char byte = 1;

	pthread_mutex_unlock(&w->mu);
	p->fn(w->conn, p->arg);
	pthread_mutex_lock(&w->mu);
	p->qnext = NULL;
	*w->dtail = p;
	w->dtail = &p->qnext;
	if (write(w->wake[1], &byte, 1) < 0 && errno != EAGAIN)
		log_warn("store: waking the caller: %s", strerror(errno));
}

static void run_row(struct store_writer *w, struct pend *p)
{
	union pend_rec copy;
	uint64_t seq = p->seq;
	space_err err = { 0 };
	int rc;

	rec_copy(p->kind, &copy, &p->r);
	pthread_mutex_unlock(&w->mu);
	rc = rec_write(w->conn, p->kind, &copy, &err);
	pend_rec_clear(p->kind, &copy);
	pthread_mutex_lock(&w->mu);
	settle(w, p, seq, rc, &err);
}

static void wait_more(struct store_writer *w, int64_t next)
{
	struct timespec until;
	int64_t ms = next ? next - mono_ms() : 0;

	if (!next) {
		pthread_cond_wait(&w->more, &w->mu);
		return;
	}
	if (ms <= 0)
		return;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&w->more, &w->mu, &until);
}

static void *run(void *arg)
{
	struct store_writer *w = arg;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		int64_t next = promote_due(w, mono_ms());
		struct pend *p = dequeue(w);

		if (!p) {
			pthread_cond_broadcast(&w->idle);
			if (w->stop && !w->later)
				break;
			wait_more(w, next);
			continue;
		}
		w->busy = true;
		if (p->kind == PEND_JOB)
			run_job(w, p);
		else
			run_row(w, p);
		w->busy = false;
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* ---- the caller's side ---- */

int writer_start(struct store_writer **out, struct store *conn, space_err *err)
{
	struct store_writer *w = calloc(1, sizeof(*w));

	if (!w) {
		store_close(conn);
		return err_set(err, ENOMEM, "out of memory");
	}
	w->conn = conn;
	w->qtail = &w->qhead;
	w->dtail = &w->done;
	w->wake[0] = w->wake[1] = -1;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->more, NULL);
	pthread_cond_init(&w->idle, NULL);
	if (pipe2(w->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
		err_sys(err, errno, "store writer: pipe");
		goto fail;
	}
	if ((errno = pthread_create(&w->thr, NULL, run, w)) != 0) {
		err_sys(err, errno, "store writer: starting its thread");
		goto fail;
	}
	w->running = true;
	*out = w;
	return 0;
fail:
	writer_stop(w, 0);
	return -1;
}

/* After the thread ended: jobs that ran or never ran are told they did not (nobody acts on a
 * read while stopping), rows still held are let go (the thread logged them). */
static void leftovers_free(struct store_writer *w)
{
	struct pend *lists[2] = { w->qhead, w->done }, *p;

	w->qhead = w->done = NULL;
	for (int i = 0; i < 2; i++) {
		while ((p = lists[i])) {
			lists[i] = p->qnext;
			if (p->kind == PEND_JOB) {
				p->done(p->arg, false);
				free(p);
			}
		}
	}
	for (unsigned i = 0; i < BUCKETS; i++)
		while (w->hash[i])
			drop(w, w->hash[i]);
}

void writer_stop(struct store_writer *w, int drain_ms)
{
	if (!w)
		return;
	if (w->running) {
		pthread_mutex_lock(&w->mu);
		w->stop = true;
		w->drain_until = mono_ms() + drain_ms;
		pthread_cond_signal(&w->more);
		pthread_mutex_unlock(&w->mu);
		pthread_join(w->thr, NULL);
	}
	leftovers_free(w);
	if (w->wake[0] >= 0)
		close(w->wake[0]);
	if (w->wake[1] >= 0)
		close(w->wake[1]);
	store_close(w->conn);
	pthread_cond_destroy(&w->idle);
	pthread_cond_destroy(&w->more);
	pthread_mutex_destroy(&w->mu);
	free(w);
}

int writer_put(struct store_writer *w, enum pend_kind kind, const void *rec, space_err *err)
{
	const char *id = rec_id(kind, rec);
	struct pend **pp, *p;

	if (!id[0])
		return err_set(err, EINVAL, "store: put %s: no id", kind_names[kind]);
	pthread_mutex_lock(&w->mu);
	p = *(pp = find(w, kind, id));
	if (!p) {
		if (!(p = calloc(1, sizeof(*p)))) {
			pthread_mutex_unlock(&w->mu);
			return err_set(err, ENOMEM, "store: put %s %s: out of memory", kind_names[kind], id);
		}
		p->kind = kind;
		snprintf(p->id, sizeof(p->id), "%s", id);
		p->where = P_OUT;
		*pp = p;
		w->stats.pending++;
	} else {
		pend_rec_clear(kind, &p->r);
	}
	rec_copy(kind, &p->r, rec);
	p->seq = ++w->seq;
	/* queued: this version replaces the one waiting; later: tried with it when due */
	if (p->where == P_OUT)
		enqueue(w, p);
	pthread_mutex_unlock(&w->mu);
	return 0;
}

bool writer_get(struct store_writer *w, enum pend_kind kind, const char *id, void *out)
{
	struct pend *p;

	pthread_mutex_lock(&w->mu);
	p = *find(w, kind, id);
	if (p)
		rec_copy(kind, out, &p->r);
	pthread_mutex_unlock(&w->mu);
	return p != NULL;
}

union pend_rec *writer_list(struct store_writer *w, enum pend_kind kind, size_t *n)
{
	union pend_rec *v = NULL;
	size_t cap = 0;

	*n = 0;
	pthread_mutex_lock(&w->mu);
	for (unsigned i = 0; i < BUCKETS; i++) {
		for (struct pend *p = w->hash[i]; p; p = p->hnext) {
			if (p->kind != kind)
				continue;
			if (*n == cap) {
				union pend_rec *nv = realloc(v, (cap = cap ? cap * 2 : 8) * sizeof(*v));

				if (!nv)
					break; /* the list is short by what did not fit: the database's rows stand */
				v = nv;
			}
			rec_copy(kind, &v[(*n)++], &p->r);
		}
	}
	pthread_mutex_unlock(&w->mu);
	return v;
}

void writer_list_free(enum pend_kind kind, union pend_rec *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		pend_rec_clear(kind, &v[i]);
	free(v);
}

int writer_job(struct store_writer *w, void (*fn)(struct store *conn, void *arg),
	       void (*done)(void *arg, bool ran), void *arg, space_err *err)
{
	struct pend *p = calloc(1, sizeof(*p));

	if (!p)
		return err_set(err, ENOMEM, "store: queueing a read: out of memory");
	p->kind = PEND_JOB;
	p->fn = fn;
	p->done = done;
	p->arg = arg;
	pthread_mutex_lock(&w->mu);
	enqueue(w, p);
	pthread_mutex_unlock(&w->mu);
	return 0;
}

int writer_fd(const struct store_writer *w)
{
	return w->wake[0];
}

void writer_poll(struct store_writer *w)
{
	struct pend *list, *p;
	char buf[64];

	while (w->wake[0] >= 0 && read(w->wake[0], buf, sizeof(buf)) > 0)
		;
	pthread_mutex_lock(&w->mu);
	list = w->done;
	w->done = NULL;
	w->dtail = &w->done;
	pthread_mutex_unlock(&w->mu);
	while ((p = list)) {
		list = p->qnext;
		p->done(p->arg, true);
		free(p);
	}
}

int writer_flush(struct store_writer *w, int timeout_ms)
{
	int64_t until = mono_ms() + timeout_ms;
	int left;

	pthread_mutex_lock(&w->mu);
	while ((w->qhead || w->busy) && mono_ms() < until) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 20 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&w->idle, &w->mu, &ts);
	}
	left = (int)w->stats.pending;
	pthread_mutex_unlock(&w->mu);
	return left;
}

void writer_stats(struct store_writer *w, struct store_write_stats *out)
{
	pthread_mutex_lock(&w->mu);
	*out = w->stats;
	pthread_mutex_unlock(&w->mu);
}

void writer_set_node(struct store_writer *w, const char *node_id)
{
	writer_flush(w, 30000);
	pthread_mutex_lock(&w->mu);
	/* not busy: the thread touches its connection only after taking mu and marking busy */
	while (w->busy)
		pthread_cond_wait(&w->idle, &w->mu);
	store_set_node(w->conn, node_id);
	pthread_mutex_unlock(&w->mu);
}
