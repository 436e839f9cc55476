/* session.c -- command sessions at run time: start, stdin, signals, output spool and pacing, agent events */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cleanup.h"
#include "flow.h"
#include "log.h"
#include "proto.h"
#include "runtime.h"
#include "store/store.h"

void session_persist(struct session *s)
{
	space_err err = { 0 };

	if (s->ephemeral)
		return;
	/* kept on failure, as sandbox_persist does: the tick writes it again */
	if (store_session_put(s->d->store, &s->rec, &err) == 0) {
		s->unsaved = false;
		return;
	}
	s->unsaved = err.code != ESTALE;
	log_error("session %s: %s%s", s->rec.id, err.msg,
		  s->unsaved ? " (kept; written again on the next tick)" : "");
}

static void notify_watches(struct session *s)
{
	struct session_watch *w, *next;

	for (w = s->watches; w; w = next) {
		next = w->next;
		w->fn(w);
	}
}

/* ---- output bounds (docs/design/guest-bounds.md) ---- */

static uint64_t mib(int n)
{
	return n > 0 ? (uint64_t)n << 20 : 0;
}

/* A spool nobody reads of a session that is not running (not started yet, or ended) holds no
 * descriptor and no buffer; the next read or append reopens it. */
static void maybe_park(struct session *s)
{
	if (s->rec.state != SESS_RUNNING && !s->watches)
		spool_park(s->spool);
}

/* Is the state directory's filesystem below the free-space watermark? Checked at most once a
 * second (the answer is shared by every session: the daemon is single-threaded). */
static bool disk_low(struct spaced *d)
{
	static int64_t checked_ms;
	static bool low;
	struct statvfs v;
	int64_t now = now_ms();

	if (d->cfg.output_min_free_mib <= 0)
		return false;
	if (now - checked_ms < 1000 && now >= checked_ms)
		return low;
	checked_ms = now;
	if (statvfs(d->cfg.state_dir, &v) < 0) {
		log_warn("statvfs %s: %m; not pausing output for it", d->cfg.state_dir);
		low = false;
	} else {
		bool was = low;

		low = (uint64_t)v.f_bavail * v.f_frsize < mib(d->cfg.output_min_free_mib);
		if (low != was)
			log_warn("%s: %llu MiB free, watermark %d MiB: command output %s", d->cfg.state_dir,
				 (unsigned long long)((uint64_t)v.f_bavail * v.f_frsize >> 20),
				 d->cfg.output_min_free_mib, low ? "paused" : "resumed");
	}
	return low;
}


/* Sessions whose acknowledgements wait for disk space: sessions_tick retries them. */
static bool any_paused;

/* The session with the most output kept in sb, the oldest of equals (NULL if none keeps any). */
static struct session *largest_kept(struct sandbox *sb)
{
	struct session *s, *big = NULL;

	/* (by creation: the list is newest first only until sessions are let go of and made
	 * again) */
	for (s = sb->sessions; s; s = s->next) {
		uint64_t k = spool_kept(s->spool), kb = big ? spool_kept(big->spool) : 0;

		if (k && (!big || k > kb || (k == kb && s->rec.created_ms < big->rec.created_ms)))
			big = s;
	}
	return big;
}

static void enforce_sandbox_budget(struct sandbox *sb);

/* What is over budget is kept by sessions whose objects were let go: their records are read on
 * the store's thread, they are made again on the loop, and the budget is enforced again. */
struct budget_read {
	struct spaced *d;
	char sb_id[ID_LEN];
	struct session_rec *v;
	size_t n, cap;
	bool failed;
	space_err err;
};

static int budget_keep(const struct session_rec *r, void *arg)
{
	struct budget_read *q = arg;
	struct session_rec *c;

	if (q->n == q->cap) {
		size_t cap = q->cap ? q->cap * 2 : 16;
		struct session_rec *v = realloc(q->v, cap * sizeof(*v));

		if (!v)
			return err_set(&q->err, ENOMEM, "out of memory"), q->failed = true, 1;
		q->v = v;
		q->cap = cap;
	}
	c = &q->v[q->n++];
	*c = *r;
	c->argv = json_deep_copy(r->argv);
	c->env = json_deep_copy(r->env);
	return 0;
}

static void budget_read_run(struct store *conn, void *arg)
{
	struct budget_read *q = arg;

	if (store_session_each(conn, q->sb_id, budget_keep, q, &q->err) < 0)
		q->failed = true;
}

static void budget_read_done(void *arg, bool ran)
{
	struct budget_read *q = arg;
	struct sandbox *sb = ran ? sandbox_find(q->d, q->sb_id) : NULL;

	if (sb && q->failed)
		log_error("sandbox %s: output budget: %s", sb->rec.id, q->err.msg);
	for (size_t i = 0; i < q->n; i++) {
		if (sb && !session_loaded(q->d, q->v[i].id))
			session_find_stored(q->d, &q->v[i]);
		session_rec_clear(&q->v[i]);
	}
	if (sb)
		enforce_sandbox_budget(sb);
	free(q->v);
	free(q);
}

static void budget_reload(struct sandbox *sb)
{
	struct budget_read *q = calloc(1, sizeof(*q));
	space_err err = { 0 };

	if (!q) {
		log_error("sandbox %s: output budget: out of memory", sb->rec.id);
		return;
	}
	q->d = sb->d;
	snprintf(q->sb_id, sizeof(q->sb_id), "%s", sb->rec.id);
	if (store_async(sb->d->store, budget_read_run, budget_read_done, q, &err) < 0) {
		log_error("sandbox %s: output budget: %s", sb->rec.id, err.msg);
		free(q);
	}
}

/* The sandbox keeps more output than its budget (its sessions in memory and those let go of
 * alike): drop the oldest segment of whichever session keeps most, until it fits. Offsets do
 * not change; readers of dropped bytes are told. */
static void enforce_sandbox_budget(struct sandbox *sb)
{
	uint64_t budget = mib(sb->d->cfg.sandbox_output_max_mib);
	space_err err = { 0 };

	while (budget && sb->out_kept + sb->out_evicted > budget) {
		struct session *big;
		int64_t n;

		if (sb->out_evicted) {
			/* Sessions let go of keep some of it: they are made again (their records
			 * read off the loop's thread) so that the largest of all gives it back;
			 * then this runs again (budget_read_done). */
			sb->out_evicted = 0;
			budget_reload(sb);
			return;
		}
		big = largest_kept(sb);
		n = big ? spool_drop_oldest(big->spool, &err) : 0;
		if (n <= 0) {
			if (n < 0)
				log_error("sandbox %s: output budget: %s", sb->rec.id, err.msg);
			return;
		}
		sb->out_kept -= (uint64_t)n < sb->out_kept ? (uint64_t)n : sb->out_kept;
		if (agent_log_ok(sb->agent))
			log_info("sandbox %s: output budget of %d MiB: dropped %lld bytes of session %s",
				 sb->rec.id, sb->d->cfg.sandbox_output_max_mib, (long long)n, big->rec.id);
		maybe_park(big);
		notify_watches(big);
	}
}

/* ---- runtime objects ---- */

static void session_destroy(struct session *s);

struct session *session_alloc(struct sandbox *sb, const struct session_rec *rec, space_err *err)
{
	struct session *s = calloc(1, sizeof(*s));
	char path[PATH_MAX], dir[PATH_MAX];

	if (!s) {
		err_set(err, ENOMEM, "out of memory");
		return NULL;
	}
	s->d = sb->d;
	s->sb = sb;
	s->rec = *rec;
	s->rec.argv = json_incref(rec->argv);
	s->rec.env = json_incref(rec->env);
	s->stdin_q = evbuffer_new();
	s->stdin_unacked = evbuffer_new();
	path_session_spool(sb->d, sb->rec.id, rec->id, path);
	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	if (!s->stdin_q || !s->stdin_unacked || (mkdir(dir, 0700) < 0 && errno != EEXIST) ||
	    spool_open(&s->spool, path, err) < 0) {
		if (!err->code)
			err_sys(err, errno, "creating %s", dir);
		if (s->stdin_q)
			evbuffer_free(s->stdin_q);
		if (s->stdin_unacked)
			evbuffer_free(s->stdin_unacked);
		session_rec_clear(&s->rec);
		free(s);
		return NULL;
	}
	/* After a restart the agent may have been acknowledged up to what the spool holds (and no
	 * further: we never acknowledge bytes we do not hold), so its window starts there. */
	s->acked = spool_length(s->spool);
	spool_set_cap(s->spool, mib(sb->d->cfg.session_output_max_mib));
	sb->out_kept += spool_kept(s->spool);
	maybe_park(s);
	s->next = sb->sessions;
	sb->sessions = s;
	return s;
}

static int session_load_one(const struct session_rec *rec, void *arg)
{
	struct sandbox *sb = arg;
	space_err err = { 0 };

	if (!session_alloc(sb, rec, &err))
		log_error("sandbox %s: loading session %s: %s", sb->rec.id, rec->id, err.msg);
	return 0;
}

int sessions_load(struct sandbox *sb, space_err *err)
{
	return store_session_each(sb->d->store, sb->rec.id, session_load_one, sb, err);
}

void sessions_free(struct sandbox *sb)
{
	struct session *s, *next;

	for (s = sb->sessions; s; s = next) {
		next = s->next;
		/* Readers still attached learn the session is gone and end their streams. */
		while (s->watches) {
			struct session_watch *w = s->watches;

			s->watches = w->next;
			w->s = NULL;
			w->fn(w);
		}
		session_destroy(s);
	}
	sb->sessions = NULL;
}

struct session *session_by_chan(struct sandbox *sb, uint32_t chan)
{
	struct session *s;

	for (s = sb->sessions; s; s = s->next)
		if (s->rec.chan == chan)
			return s;
	return NULL;
}

struct session *session_loaded(struct spaced *d, const char *ss_id)
{
	struct sandbox *sb;
	struct session *s;

	for (sb = d->sandboxes; sb; sb = sb->next)
		for (s = sb->sessions; s; s = s->next)
			if (strcmp(s->rec.id, ss_id) == 0)
				return s;
	return NULL;
}

static struct sandbox *sandbox_loaded(struct spaced *d, const char *sb_id)
{
	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next)
		if (strcmp(sb->rec.id, sb_id) == 0)
			return sb;
	return NULL;
}

/* An ended session's object was let go (sessions_evict): made again from its stored record
 * and spool, on the first request that names it. */
static struct session *session_revive(struct spaced *d, const struct session_rec *rec)
{
	struct sandbox *sb = sandbox_loaded(d, rec->sandbox_id);
	space_err err = { 0 };
	struct session *s = NULL;

	if (sb && sb->rec.state != SB_DELETING && sb->rec.state != SB_DELETED) {
		s = session_alloc(sb, rec, &err);
		if (!s)
			log_error("session %s: reloading: %s", rec->id, err.msg);
		else
			sb->out_evicted -= spool_kept(s->spool) < sb->out_evicted ? spool_kept(s->spool)
										   : sb->out_evicted;
	}
	return s;
}

struct session *session_find_stored(struct spaced *d, const struct session_rec *rec)
{
	struct session *s = session_loaded(d, rec->id);

	return s ? s : session_revive(d, rec);
}

static void session_destroy(struct session *s)
{
	if (s->spool)
		spool_close(s->spool);
	evbuffer_free(s->stdin_q);
	evbuffer_free(s->stdin_unacked);
	session_rec_clear(&s->rec);
	free(s);
}

/* An ended session nobody reads, that the agent has forgotten, needs no object: only its
 * stored record and spool file, which session_find reloads on demand. Without this every
 * command ever run in a sandbox would hold daemon memory until the sandbox is deleted. */
static bool evictable(const struct session *s, int64_t now)
{
	if (s->ephemeral)
		return session_done(s) && !s->watches && (s->released || !agent_ready(s->sb->agent));
	/* not while its end is still to be written: the object is the only record of it */
	return session_done(s) && !s->watches && s->released && !s->out_paused && !s->unsaved &&
	       now - s->rec.ended_ms >= SESSION_EVICT_AFTER_MS;
}

/* An ephemeral session has nothing to reload from: its output goes with it. */
static void session_unlink_spool(struct session *s)
{
	char path[PATH_MAX], old[PATH_MAX + 8];

	path_session_spool(s->d, s->sb->rec.id, s->rec.id, path);
	snprintf(old, sizeof(old), "%s.old", path);
	if (unlink(path) < 0 && errno != ENOENT)
		log_warn("session %s: removing %s: %m", s->rec.id, path);
	if (unlink(old) < 0 && errno != ENOENT)
		log_warn("session %s: removing %s: %m", s->rec.id, old);
}

static void sessions_evict(struct sandbox *sb, int64_t now)
{
	struct session **pp = &sb->sessions, *s;

	while ((s = *pp)) {
		if (!evictable(s, now)) {
			pp = &s->next;
			continue;
		}
		uint64_t kept = spool_kept(s->spool);

		*pp = s->next;
		sb->out_kept -= kept < sb->out_kept ? kept : sb->out_kept;
		if (s->ephemeral) {
			session_unlink_spool(s);
		} else {
			sb->out_evicted += kept;
		}
		session_destroy(s);
	}
}


void session_each_live(struct spaced *d, const char *sb_id, int (*fn)(struct session *s, void *arg), void *arg)
{
	struct sandbox *sb = sandbox_loaded(d, sb_id);

	for (struct session *s = sb ? sb->sessions : NULL, *next; s; s = next) {
		next = s->next;
		if (!s->ephemeral && !session_done(s) && fn(s, arg))
			return;
	}
}

const struct session_rec *session_rec(const struct session *s)
{
	return &s->rec;
}

/* ---- flow control ---- */

static int send_ack(struct session *s, uint64_t off)
{
	uint8_t buf[8];

	for (int i = 0; i < 8; i++)
		buf[i] = (uint8_t)(off >> (8 * i));
	return agent_send(s->sb->agent, H_ACK, s->rec.chan, buf, 8);
}

/* Acknowledge output to the agent as far as pacing allows: a process may run
 * at most SESSION_MAX_LAG bytes ahead of its slowest attached reader (or of
 * the furthest any reader got, while none is attached). s->acked only grows:
 * it is the window's base on every connection (flow.h). */
static void maybe_ack(struct session *s)
{
	uint64_t floor = s->delivered, ack;
	struct session_watch *w;

	s->ack_due = false;
	if (s->watches) {
		floor = UINT64_MAX;
		for (w = s->watches; w; w = w->next)
			if (w->pos < floor)
				floor = w->pos;
	} else if (s->free_running) {
		floor = spool_length(s->spool);
	}
	ack = flow_ack_target(spool_length(s->spool), floor, SESSION_MAX_LAG);
	if (ack <= s->acked || !agent_ready(s->sb->agent) || s->released)
		return;
	/* Not acknowledged, the agent's window fills and the process blocks on its pipe. */
	if (disk_low(s->d)) {
		s->out_paused = any_paused = true;
		return;
	}
	if (send_ack(s, ack) == 0)
		s->acked = ack;
}

void session_set_deadline(struct session *s, int64_t at_ms)
{
	s->kill_at_ms = at_ms;
}

/* Processes past their client's deadline are killed (session_cancel only signals or marks). */
static void sessions_deadlines(struct sandbox *sb, int64_t now)
{
	for (struct session *s = sb->sessions; s; s = s->next)
		if (s->kill_at_ms && now >= s->kill_at_ms) {
			s->kill_at_ms = 0;
			session_cancel(s);
		}
}

void sessions_tick(struct spaced *d)
{
	struct sandbox *sb;
	struct session *s;
	int64_t now = now_ms();

	for (sb = d->sandboxes; sb; sb = sb->next) {
		sessions_deadlines(sb, now);
		sessions_evict(sb, now);
	}
	if (!any_paused || disk_low(d))
		return;
	any_paused = false;
	for (sb = d->sandboxes; sb; sb = sb->next)
		for (s = sb->sessions; s; s = s->next)
			if (s->out_paused) {
				s->out_paused = false;
				maybe_ack(s);
			}
}

void sessions_flush_acks(struct sandbox *sb)
{
	struct session *s;

	for (s = sb->sessions; s; s = s->next)
		if (s->ack_due)
			maybe_ack(s);
}

static void pump_stdin(struct session *s)
{
	struct agent *a = s->sb->agent;
	uint8_t frame[8 + PROTO_MAX_CHUNK];

	if (!agent_ready(a) || !s->exec_sent || s->rec.state != SESS_RUNNING)
		return;
	while (evbuffer_get_length(s->stdin_q) && s->stdin_sent - s->stdin_acked < PROTO_IN_WINDOW) {
		size_t room = PROTO_IN_WINDOW - (size_t)(s->stdin_sent - s->stdin_acked);
		size_t n = evbuffer_get_length(s->stdin_q);

		if (n > room)
			n = room;
		if (n > PROTO_MAX_CHUNK)
			n = PROTO_MAX_CHUNK;
		for (int i = 0; i < 8; i++)
			frame[i] = (uint8_t)(s->stdin_sent >> (8 * i));
		evbuffer_copyout(s->stdin_q, frame + 8, n);
		if (agent_send(a, H_STDIN, s->rec.chan, frame, 8 + n) < 0 ||
		    evbuffer_remove_buffer(s->stdin_q, s->stdin_unacked, n) != (int)n)
			return;
		s->stdin_sent += n;
	}
	if (!evbuffer_get_length(s->stdin_q) && s->stdin_close_req && !s->stdin_close_sent) {
		if (agent_send(a, H_STDIN_CLOSE, s->rec.chan, NULL, 0) == 0)
			s->stdin_close_sent = true;
	}
}

static void send_exec(struct session *s)
{
	struct proto_wr w;

	proto_wr_init(&w);
	uint16_t type;

	if (session_open_encode(s, &w, &type) < 0 || agent_send(s->sb->agent, type, s->rec.chan, w.buf, w.len) < 0) {
		proto_wr_free(&w);
		session_on_error(s, EIO, "could not send the command to the agent");
		return;
	}
	proto_wr_free(&w);
	s->exec_sent = true;
	s->exec_here = true;
	s->start_wanted = false;
	s->rec.state = SESS_RUNNING;
	s->rec.started_ms = now_ms();
	session_persist(s);
	pump_stdin(s);
}

int session_start(struct session *s, space_err *err)
{
	if (s->rec.state != SESS_CREATED)
		return 0;
	if (s->sb->rec.state != SB_RUNNING)
		return err_set(err, EBUSY, "sandbox %s is %s", s->sb->rec.id, sb_state_name(s->sb->rec.state));
	if (!agent_ready(s->sb->agent)) {
		s->start_wanted = true; /* sent when the agent answers again */
		return 0;
	}
	send_exec(s);
	return 0;
}

int session_stdin(struct session *s, const void *data, size_t len, int close_after, space_err *err)
{
	if (!s->rec.stdin_open)
		return err_set(err, EBUSY, "session %s was created without stdin", s->rec.id);
	if (s->rec.state == SESS_EXITED || s->rec.state == SESS_FAILED)
		return err_set(err, EBUSY, "session %s has finished", s->rec.id);
	if (s->stdin_close_req)
		return err_set(err, EBUSY, "stdin of session %s is closed", s->rec.id);
	if (evbuffer_get_length(s->stdin_q) + evbuffer_get_length(s->stdin_unacked) + len >
	    SESSION_MAX_STDIN_QUEUE)
		return err_set(err, EAGAIN, "stdin queue of session %s is full; retry when the process has read it",
			       s->rec.id);
	if (len && evbuffer_add(s->stdin_q, data, len) < 0)
		return err_set(err, ENOMEM, "out of memory");
	if (close_after)
		s->stdin_close_req = true;
	pump_stdin(s);
	return 0;
}

int session_signal(struct session *s, int signo, space_err *err)
{
	uint8_t buf[4];

	if (s->rec.state != SESS_RUNNING)
		return err_set(err, EBUSY, "session %s is %s, not running", s->rec.id, sess_state_name(s->rec.state));
	if (!agent_ready(s->sb->agent))
		return err_set(err, EAGAIN, "sandbox %s: agent not connected; retry", s->sb->rec.id);
	for (int i = 0; i < 4; i++)
		buf[i] = (uint8_t)((uint32_t)signo >> (8 * i));
	if (agent_send(s->sb->agent, H_SIGNAL, s->rec.chan, buf, 4) < 0)
		return err_set(err, EIO, "sending signal to the agent failed");
	return 0;
}

void session_cancel(struct session *s)
{
	space_err e = { 0 };

	if (session_done(s))
		return;
	if (s->rec.state == SESS_CREATED) {
		session_on_error(s, ECANCELED, "cancelled before it started");
		return;
	}
	if (session_signal(s, 9, &e) < 0)
		s->kill_wanted = true;
}

size_t session_stdin_room(const struct session *s)
{
	size_t held = evbuffer_get_length(s->stdin_q) + evbuffer_get_length(s->stdin_unacked);

	if (!s->rec.stdin_open || s->stdin_close_req || session_done(s))
		return 0;
	/* Bounded to a window or two in flight: a body streams at the agent's pace. */
	return held < 2 * PROTO_IN_WINDOW ? 2 * PROTO_IN_WINDOW - held : 0;
}

void session_set_stdin_room_cb(struct session *s, void (*fn)(struct session *s, void *arg), void *arg)
{
	s->on_stdin_room = fn;
	s->stdin_room_arg = arg;
}

int session_resize(struct session *s, uint16_t rows, uint16_t cols, space_err *err)
{
	uint8_t buf[4] = { rows & 0xff, rows >> 8, cols & 0xff, cols >> 8 };

	if (s->rec.kind != SESS_KIND_PTY)
		return err_set(err, EBUSY, "session %s is not a terminal (created without \"pty\")", s->rec.id);
	if (session_done(s))
		return err_set(err, EBUSY, "session %s has finished", s->rec.id);
	if (rows < 1 || cols < 1 || rows > PROTO_PTY_MAX_DIM || cols > PROTO_PTY_MAX_DIM)
		return err_set(err, EINVAL, "rows and cols must be 1..%d", PROTO_PTY_MAX_DIM);
	s->rec.pty_rows = rows;
	s->rec.pty_cols = cols;
	session_persist(s);
	/* Not started yet, or the agent is away: the size goes with the open, or is re-sent below
	 * after the next hello. */
	if (s->rec.state != SESS_RUNNING || !agent_ready(s->sb->agent) || !s->exec_sent)
		return 0;
	if (agent_send(s->sb->agent, H_RESIZE, s->rec.chan, buf, sizeof(buf)) < 0)
		return err_set(err, EIO, "sending the size to the agent failed");
	return 0;
}

/* ---- output ---- */

uint64_t session_output_length(const struct session *s)
{
	return s->spool ? spool_length(s->spool) : 0;
}

uint64_t session_output_start(const struct session *s)
{
	return s->spool ? spool_start(s->spool) : 0;
}

ssize_t session_output_read(struct session *s, uint64_t off, int *stream, void *buf, size_t max,
			    space_err *err)
{
	return spool_read(s->spool, off, stream, buf, max, err);
}

int session_done(const struct session *s)
{
	return s->rec.state == SESS_EXITED || s->rec.state == SESS_FAILED;
}

void session_watch_add(struct session *s, struct session_watch *w)
{
	w->s = s;
	w->next = s->watches;
	s->watches = w;
}

void session_watch_del(struct session_watch *w)
{
	struct session_watch **pp;

	if (!w->s)
		return;
	for (pp = &w->s->watches; *pp; pp = &(*pp)->next) {
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	}
	maybe_park(w->s);
	/* The last reader left a free-running session: what it had not taken is let go. */
	if (!w->s->watches && w->s->free_running)
		maybe_ack(w->s);
	w->s = NULL;
}

void session_set_free_running(struct session *s)
{
	s->free_running = true;
}

void session_watch_progress(struct session_watch *w)
{
	struct session *s = w->s;

	if (!s)
		return;
	if (w->pos > s->delivered)
		s->delivered = w->pos;
	maybe_ack(s);
}

/* ---- events from the agent ---- */

static void session_release(struct session *s)
{
	if (!s->released && agent_ready(s->sb->agent) &&
	    agent_send(s->sb->agent, H_RELEASE, s->rec.chan, NULL, 0) == 0)
		s->released = true;
}

/* Persisted once: the agent may repeat A_STARTED after a reconnect, and a guest could send it
 * in a loop to make us rewrite the row. */
void session_on_started(struct session *s, uint32_t pid)
{
	if (pid == 0 || pid >= (1u << 22) || s->rec.state != SESS_RUNNING || s->rec.pid == (int)pid)
		return;
	if (s->rec.pid > 0) {
		if (agent_log_ok(s->sb->agent))
			log_warn("session %s: agent reported pid %u after %d; ignoring", s->rec.id, pid,
				 s->rec.pid);
		return;
	}
	s->rec.pid = (int)pid;
	session_persist(s);
	notify_watches(s); /* a reader may wait for the pid (E2B's start event) */
}

void session_on_data(struct session *s, int stream, uint64_t off, const uint8_t *p, size_t n)
{
	uint64_t have = spool_length(s->spool), kept;
	space_err err = { 0 };
	int rc;

	if (s->rec.state != SESS_RUNNING)
		return;
	if (off > have) {
		if (agent_log_ok(s->sb->agent))
			log_warn("session %s: agent skipped output (offset %llu, have %llu); ignoring",
				 s->rec.id, (unsigned long long)off, (unsigned long long)have);
		return;
	}
	if (off + n <= have)
		return; /* a resend of what we hold */
	p += have - off;
	n -= (size_t)(have - off);
	if (!flow_window_ok(s->acked, have + n, PROTO_OUT_WINDOW)) {
		if (agent_log_ok(s->sb->agent))
			log_warn("session %s: agent overran its output window (acked %llu, would hold %llu); "
				 "ignoring", s->rec.id, (unsigned long long)s->acked,
				 (unsigned long long)(have + n));
		return;
	}
	kept = spool_kept(s->spool);
	rc = spool_append(s->spool, stream, p, n, &err);
	/* The cap may have dropped a segment (even when the append then failed): the sandbox's
	 * total follows what is kept. */
	s->sb->out_kept = s->sb->out_kept - kept + spool_kept(s->spool);
	if (rc < 0) {
		/* Not acknowledged: the agent keeps the bytes and the process waits.
		 * Reconnecting makes the agent resend from its last ACK, so the bytes
		 * arrive again once there is room (e.g. the disk was full). */
		log_error("session %s: %s; retrying", s->rec.id, err.msg);
		agent_resync(s->sb->agent, "output could not be stored");
		return;
	}
	enforce_sandbox_budget(s->sb);
	s->ack_due = true; /* sent once per read pass: sessions_flush_acks */
	notify_watches(s);
}

void session_on_exit(struct session *s, uint64_t final_off, int code, int sig)
{
	if (s->rec.state != SESS_RUNNING)
		return;
	if (final_off != spool_length(s->spool))
		log_warn("session %s: exit at offset %llu but %llu bytes held", s->rec.id,
			 (unsigned long long)final_off, (unsigned long long)spool_length(s->spool));
	s->rec.state = SESS_EXITED;
	s->rec.exit_code = sig ? -1 : code;
	s->rec.exit_signal = sig;
	s->rec.ended_ms = now_ms();
	session_persist(s);
	session_release(s);
	notify_watches(s);
	maybe_park(s);
}

void session_on_error(struct session *s, int errnum, const char *msg)
{
	if (session_done(s))
		return;
	s->rec.state = SESS_FAILED;
	(void)errnum;
	snprintf(s->rec.error, sizeof(s->rec.error), "%s", msg);
	s->rec.ended_ms = now_ms();
	session_persist(s);
	session_release(s);
	notify_watches(s);
	maybe_park(s);
}

void session_on_stdin_ack(struct session *s, uint64_t off)
{
	if (off < s->stdin_acked || off > s->stdin_sent)
		return;
	evbuffer_drain(s->stdin_unacked, off - s->stdin_acked);
	s->stdin_acked = off;
	pump_stdin(s);
	if (s->on_stdin_room)
		s->on_stdin_room(s, s->stdin_room_arg);
}

void sessions_abort(struct sandbox *sb, const char *why)
{
	struct session *s;

	for (s = sb->sessions; s; s = s->next) {
		if (session_done(s))
			continue;
		s->rec.state = SESS_FAILED;
		snprintf(s->rec.error, sizeof(s->rec.error), "%s", why);
		s->rec.ended_ms = now_ms();
		session_persist(s);
		notify_watches(s);
		maybe_park(s);
	}
}

/* The agent (re)connected and says it received stdin up to `received`. What we sent after
 * that was lost with the old connection: it goes back to the front of the queue, to be sent
 * again (and a requested close after it). */
static void stdin_rewind(struct session *s, uint64_t received)
{
	uint64_t back = flow_stdin_resend(s->stdin_acked, s->stdin_sent, received);
	struct evbuffer *keep;

	if (received > s->stdin_sent && s->stdin_sent == s->stdin_acked &&
	    !evbuffer_get_length(s->stdin_unacked)) {
		/* A restarted daemon: nothing of ours is in flight; go on from the agent's count. */
		s->stdin_sent = s->stdin_acked = received;
	} else if (back) {
		keep = evbuffer_new();
		/* unacked = [acked, sent): keep [acked, received) awaiting its ACK, requeue the rest. */
		if (!keep || evbuffer_remove_buffer(s->stdin_unacked, keep, (size_t)(received - s->stdin_acked)) < 0 ||
		    evbuffer_prepend_buffer(s->stdin_q, s->stdin_unacked) < 0 ||
		    evbuffer_add_buffer(s->stdin_unacked, keep) < 0) {
			log_error("session %s: cannot requeue %llu bytes of stdin: out of memory", s->rec.id,
				  (unsigned long long)back);
		} else {
			s->stdin_sent = received;
			if (agent_log_ok(s->sb->agent))
				log_info("session %s: resending %llu bytes of stdin the agent did not get",
					 s->rec.id, (unsigned long long)back);
		}
		if (keep)
			evbuffer_free(keep);
	}
	/* A close may have been lost too; the agent takes a repeated one as it took the first. */
	if (s->stdin_close_req)
		s->stdin_close_sent = false;
}

void sessions_agent_hello(struct sandbox *sb, const uint32_t *chans, const uint32_t *states,
			  const uint64_t *stdin_offs, uint32_t n)
{
	struct session *s;
	uint32_t i;

	(void)states;
	for (s = sb->sessions; s; s = s->next) {
		bool known = false;

		for (i = 0; i < n; i++) {
			if (chans[i] != s->rec.chan)
				continue;
			known = true;
			stdin_rewind(s, stdin_offs[i]);
		}
		s->released = false;
		if (s->rec.state == SESS_RUNNING) {
			if (!known && flow_start_resend(s->exec_here, s->rec.pid)) {
				log_info("session %s: the agent never got its start (lost with the connection); sending it again",
					 s->rec.id);
				stdin_rewind(s, 0);
				send_exec(s);
				continue;
			}
			if (!known) {
				s->released = true;
				session_on_error(s, ESRCH, "the process was lost: the agent no longer knows it");
				continue;
			}
			/* The agent rewinds to the last ACK it got, which may be short of the last we
			 * sent (lost with the old connection): say it again. We drop what we already
			 * hold of what it resends; its window stays based on s->acked. */
			s->exec_sent = true;
			if (s->acked && send_ack(s, s->acked) < 0)
				log_warn("session %s: could not queue H_ACK", s->rec.id);
			if (s->kill_wanted) {
				space_err e = { 0 };

				if (session_signal(s, 9, &e) == 0)
					s->kill_wanted = false;
			}
			maybe_ack(s);
			pump_stdin(s);
		} else if (s->rec.state == SESS_CREATED) {
			s->exec_sent = false;
			if (s->start_wanted)
				send_exec(s);
		} else if (known) {
			session_release(s);
		} else {
			s->released = true;
		}
	}
}
