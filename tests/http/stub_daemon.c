/* stub_daemon.c -- the real HTTP layer (data plane + operations long-poll) over a fake session and
 * fake operations, so SSE streaming, pacing, resume, disconnects and long-polls can be exercised
 * without VMs. Built and driven by tests/http/run.sh; not part of spaced.
 *
 * Fake session ss-00000000000000aa (token "tok"): on first attach it produces STUB_BYTES bytes
 * (default 64 MiB) of a known pattern, alternating stdout/stderr every 1 MiB, in 32 KiB records,
 * pausing while the slowest watcher lags more than 8 MiB, then exits with code 3. Session
 * ss-00000000000000bb never produces anything and never ends (for disconnect tests).
 * Operation op-00000000000000aa finishes 2 s after the first wait on it. The store has no
 * writer thread here: store_async runs the read and its done() at once, as the real store does
 * without write-behind (store.c), so the real api_read (read_async.c) serves the long-polls.
 * GET /stats on the control listener reports watches, waiters, connections and streams alive (to
 * check cleanup) and the connection cap in force. Caps come from STUB_MAX_CONNS,
 * STUB_MAX_PER_CLIENT, STUB_REQUEST_TIMEOUT, STUB_MAX_STREAMS, STUB_MAX_STREAMS_PER_SANDBOX, else
 * from the fd limit as in spaced (limits.c). */
#include <event2/event.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/dataplane/dataplane.h"
#include "daemon/api/api.h"
#include "daemon/api/files.h"
#include "daemon/front/req.h"
#include "daemon/daemon.h"
#include "daemon/e2b/e2b.h"
#include "daemon/sandbox/sandbox.h"
#include "daemon/front/render.h"
#include "daemon/sandbox/spool.h"
#include "daemon/store/store.h"
#include "log.h"

#define LAG_MAX (8u << 20)
#define REC (32u << 10)

struct session {
	struct spaced *d;
	struct session_rec rec;
	struct spool *sp;
	struct session_watch *watches;
	uint64_t target, produced;
	bool started, done;
	struct event *gen;
};

static struct session s_a, s_b;
static int waiters_alive, waiters_cancelled, watches_alive;

static uint8_t pat(uint64_t i)
{
	return (uint8_t)(i * 131 + (i >> 8) * 7 + 1);
}

static void notify(struct session *s)
{
	struct session_watch *w, *next;

	for (w = s->watches; w; w = next) {
		next = w->next;
		w->fn(w);
	}
}

static uint64_t slowest(struct session *s)
{
	uint64_t m = UINT64_MAX;

	for (struct session_watch *w = s->watches; w; w = w->next)
		if (w->pos < m)
			m = w->pos;
	return m;
}

static void gen_cb(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;
	static uint8_t buf[REC];
	struct timeval tv = { 0, 1000 };
	space_err err = { 0 };
	int n = 0;

	(void)fd;
	(void)what;
	while (s->produced < s->target && n++ < 64) {
		uint64_t m = slowest(s);
		size_t len = s->target - s->produced < REC ? (size_t)(s->target - s->produced) : REC;
		if (m != UINT64_MAX && s->produced > m + LAG_MAX)
			break; /* paced: wait for session_watch_progress */
		for (size_t i = 0; i < len; i++)
			buf[i] = pat(s->produced + i);
		if (spool_append(s->sp, (int)((s->produced >> 20) & 1) + 1, buf, len, &err) < 0) {
			log_error("%s", err.msg);
			exit(1);
		}
		s->produced += len;
	}
	if (s->produced >= s->target && !s->done) {
		s->done = true;
		s->rec.state = SESS_EXITED;
		s->rec.exit_code = 3;
		s->rec.ended_ms = now_ms();
	}
	notify(s);
	if (!s->done)
		evtimer_add(s->gen, &tv);
}

struct session *session_loaded(struct spaced *d, const char *id)
{
	(void)d;
	if (!strcmp(id, s_a.rec.id))
		return &s_a;
	if (!strcmp(id, s_b.rec.id))
		return &s_b;
	return NULL;
}

/* Every session of the stub is in memory: one the data plane does not know is read from the
 * "store" (api_step_read in api/read_async.c, the real path) and is not there either. */
int store_session_get(struct store *st, const char *id, struct session_rec *out, space_err *err)
{
	(void)st;
	(void)out;
	return err_set(err, ENOENT, "no session '%.64s'", id);
}

struct session *session_find_stored(struct spaced *d, const struct session_rec *rec)
{
	(void)d;
	(void)rec;
	return NULL;
}

int session_check_token(struct session *s, const char *token, space_err *err)
{
	char want[16];

	snprintf(want, sizeof(want), "tok%s", s == &s_a ? "" : "b");
	return http_secret_equal(token, want) ? 0 : err_set(err, EACCES, "invalid token");
}

const struct session_rec *session_rec(const struct session *s)
{
	return &s->rec;
}

int session_start(struct session *s, space_err *err)
{
	(void)err;
	if (!s->started && s == &s_a) {
		struct timeval tv = { 0, 0 };
		s->started = true;
		s->rec.state = SESS_RUNNING;
		s->rec.pid = 42;
		evtimer_add(s->gen, &tv);
	}
	return 0;
}

int session_stdin(struct session *s, const void *data, size_t len, int close_after, space_err *err)
{
	(void)s;
	(void)data;
	log_info("stdin %zu bytes close=%d", len, close_after);
	(void)err;
	return 0;
}

int session_signal(struct session *s, int signo, space_err *err)
{
	(void)s;
	(void)err;
	log_info("signal %d", signo);
	return 0;
}

uint64_t session_output_length(const struct session *s)
{
	return spool_length(s->sp);
}

uint64_t session_output_start(const struct session *s)
{
	return spool_start(s->sp);
}

ssize_t session_output_read(struct session *s, uint64_t off, int *stream, void *buf, size_t max, space_err *err)
{
	return spool_read(s->sp, off, stream, buf, max, err);
}

int session_done(const struct session *s)
{
	return s->done;
}

/* What the data plane's other routes need (dp_ws.c is the real one; files and resize are the
 * e2e suite's to test): fake sessions are no terminals and no sandbox exists. */
size_t session_stdin_room(const struct session *s)
{
	(void)s;
	return 1u << 20;
}

void session_set_stdin_room_cb(struct session *s, void (*fn)(struct session *s, void *arg), void *arg)
{
	(void)s;
	(void)fn;
	(void)arg;
}

int session_resize(struct session *s, uint16_t rows, uint16_t cols, space_err *err)
{
	(void)s;
	(void)rows;
	(void)cols;
	return err_set(err, EBUSY, "not a terminal (stub)");
}

int req_pty_size(json_t *v, uint16_t *rows, uint16_t *cols, space_err *err)
{
	json_int_t r = json_integer_value(json_object_get(v, "rows")), c = json_integer_value(json_object_get(v, "cols"));

	if (r < 1 || r > 1000 || c < 1 || c > 1000)
		return err_set(err, EINVAL, "rows and cols must be 1..1000");
	*rows = (uint16_t)r;
	*cols = (uint16_t)c;
	return 0;
}

struct sandbox *sandbox_find(struct spaced *d, const char *id)
{
	(void)d;
	(void)id;
	return NULL;
}

static void no_files(struct http_req *r)
{
	http_reply_error(r->req, 501, "internal", "no files in the stub");
}

void api_files_read(struct http_req *r) { no_files(r); }
void api_files_write(struct http_req *r) { no_files(r); }
void api_files_remove(struct http_req *r) { no_files(r); }
void api_files_stat(struct http_req *r) { no_files(r); }
void api_files_list(struct http_req *r) { no_files(r); }
void api_files_mkdir(struct http_req *r) { no_files(r); }
void api_files_rename(struct http_req *r) { no_files(r); }
void api_files_tar_get(struct http_req *r) { no_files(r); }
void api_files_tar_put(struct http_req *r) { no_files(r); }
void api_files_watch(struct http_req *r) { no_files(r); }

/* E2B's envd and code interpreter: the real envd_auth (e2b/envd_auth.c) runs in front of these;
 * no sandbox is ever found here, so only its refusals (400 without E2b-Sandbox-Id, 502 for an
 * unknown sandbox, in Connect's shape on Connect routes) and the token-less GET /health reach
 * a client. The handlers themselves answer 501, like the placeholders they stand for. */
bool sandbox_visible(const struct sandbox_rec *rec)
{
	(void)rec;
	return false;
}

const struct sandbox_rec *sandbox_record(const struct sandbox *sb)
{
	(void)sb;
	return NULL;
}

/* No sandbox is found here, so no token is ever checked; these only link. */
int token_check(struct spaced *d, const char *sb_id, const char *scope, const char *token,
		struct token_row *row, space_err *err)
{
	(void)d;
	(void)sb_id;
	(void)scope;
	(void)token;
	(void)row;
	return err_set(err, EACCES, "invalid token");
}

struct token_job *token_job_new(const char *sb_id, const char *scope, const struct token_row *row)
{
	(void)sb_id;
	(void)scope;
	(void)row;
	return NULL;
}

void token_job_read(struct store *conn, void *arg)
{
	(void)conn;
	(void)arg;
}

int token_job_verdict(struct spaced *d, const struct token_job *j, space_err *err)
{
	(void)d;
	(void)j;
	return err_set(err, EACCES, "invalid token");
}

static void no_e2b(struct http_req *r)
{
	e2b_reply_error(r->req, 501, "no E2B handlers in the stub");
}

void envd_process_start(struct http_req *r) { no_e2b(r); }
void envd_process_connect(struct http_req *r) { no_e2b(r); }
void envd_process_list(struct http_req *r) { no_e2b(r); }
void envd_process_send_input(struct http_req *r) { no_e2b(r); }
void envd_process_stream_input(struct http_req *r) { no_e2b(r); }
void envd_process_send_signal(struct http_req *r) { no_e2b(r); }
void envd_process_close_stdin(struct http_req *r) { no_e2b(r); }
void envd_process_update(struct http_req *r) { no_e2b(r); }
void envd_fs_stat(struct http_req *r) { no_e2b(r); }
void envd_fs_make_dir(struct http_req *r) { no_e2b(r); }
void envd_fs_move(struct http_req *r) { no_e2b(r); }
void envd_fs_list_dir(struct http_req *r) { no_e2b(r); }
void envd_fs_remove(struct http_req *r) { no_e2b(r); }
void envd_fs_watch_dir(struct http_req *r) { no_e2b(r); }
void envd_fs_create_watcher(struct http_req *r) { no_e2b(r); }
void envd_fs_get_watcher_events(struct http_req *r) { no_e2b(r); }
void envd_fs_remove_watcher(struct http_req *r) { no_e2b(r); }
void envd_health(struct http_req *r) { no_e2b(r); }
void envd_files_get(struct http_req *r) { no_e2b(r); }
void envd_files_post(struct http_req *r) { no_e2b(r); }
void interp_execute(struct http_req *r) { no_e2b(r); }
void interp_contexts_list(struct http_req *r) { no_e2b(r); }
void interp_contexts_create(struct http_req *r) { no_e2b(r); }
void interp_contexts_delete(struct http_req *r) { no_e2b(r); }
void interp_contexts_restart(struct http_req *r) { no_e2b(r); }
void interp_contexts_interrupt(struct http_req *r) { no_e2b(r); }
/* E2B's control routes (e2b_routes.c lists them; the stub serves none). */
void e2b_create(struct http_req *r) { no_e2b(r); }
void e2b_list(struct http_req *r) { no_e2b(r); }
void e2b_connect(struct http_req *r) { no_e2b(r); }
void e2b_get(struct http_req *r) { no_e2b(r); }
void e2b_kill(struct http_req *r) { no_e2b(r); }
void e2b_resume(struct http_req *r) { no_e2b(r); }
void e2b_pause(struct http_req *r) { no_e2b(r); }
void e2b_timeout(struct http_req *r) { no_e2b(r); }
void e2b_refresh(struct http_req *r) { no_e2b(r); }
void e2b_metrics(struct http_req *r) { no_e2b(r); }
void e2b_network(struct http_req *r) { no_e2b(r); }
void e2b_fork(struct http_req *r) { no_e2b(r); }
void e2b_snapshot(struct http_req *r) { no_e2b(r); }
void e2b_snapshots_list(struct http_req *r) { no_e2b(r); }
void e2b_templates_list(struct http_req *r) { no_e2b(r); }
void e2b_events_list(struct http_req *r) { no_e2b(r); }
void e2b_events_sandbox(struct http_req *r) { no_e2b(r); }
void e2b_webhooks_create(struct http_req *r) { no_e2b(r); }
void e2b_webhooks_list(struct http_req *r) { no_e2b(r); }
void e2b_webhooks_get(struct http_req *r) { no_e2b(r); }
void e2b_webhooks_update(struct http_req *r) { no_e2b(r); }
void e2b_webhooks_delete(struct http_req *r) { no_e2b(r); }
/* The stub is a single daemon (--role all): an api process's relaying table never exists here. */
struct http_route *cluster_routes(const struct http_route *routes, size_t n, bool data)
{
	(void)routes;
	(void)n;
	(void)data;
	return NULL;
}

/* The data plane's table as listeners.c assembles it (its other parts are not linked here). */
static int stub_data_tables(struct front_tables *t)
{
	static struct http_route all[64], streams[4];
	size_t n = 0;

	memset(t, 0, sizeof(*t));
	for (size_t i = 0; i < dp_nroutes; i++)
		all[n++] = dp_routes[i];
	for (size_t i = 0; i < api_files_dp_nroutes; i++)
		all[n++] = api_files_dp_routes[i];
	for (size_t i = 0; i < envd_nroutes; i++)
		all[n++] = envd_routes[i];
	streams[0] = files_stream_routes[0];
	streams[1] = files_stream_routes[1];
	streams[2] = envd_stream_routes[0];
	t->routes = all;
	t->nroutes = n;
	t->stream_routes = streams;
	t->nstream_routes = 3;
	t->prefixes = envd_prefixes;
	t->nprefixes = envd_nprefixes;
	return 0;
}

const struct http_route files_stream_routes[FILES_NSTREAM_ROUTES] = {
	{ .method = EVHTTP_REQ_PUT, .pattern = "/v1/sandboxes/{}/files", .fn = api_files_write },
	{ .method = EVHTTP_REQ_PUT, .pattern = "/v1/sandboxes/{}/files/tar", .fn = api_files_tar_put },
};

void session_watch_add(struct session *s, struct session_watch *w)
{
	w->s = s;
	w->next = s->watches;
	s->watches = w;
	watches_alive++;
}

void session_watch_del(struct session_watch *w)
{
	if (!w->s)
		return;
	for (struct session_watch **pp = &w->s->watches; *pp; pp = &(*pp)->next) {
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	}
	w->s = NULL;
	watches_alive--;
}

void session_watch_progress(struct session_watch *w)
{
	struct session *s = w->s;
	struct timeval tv = { 0, 0 };

	if (s && !s->done && s->started && !evtimer_pending(s->gen, NULL))
		evtimer_add(s->gen, &tv);
}

/* ---- operations ---- */

/* store_async as store.c has it without write-behind (the header says why). */
int store_async(struct store *st, void (*fn)(struct store *conn, void *arg), void (*done)(void *arg, bool ran),
		void *arg, space_err *err)
{
	(void)err;
	fn(st, arg);
	done(arg, true);
	return 0;
}

struct op_waiter {
	struct spaced *d;
	struct event *ev;
	op_wait_cb cb;
	void *arg;
	int timeout_s;
};

static struct op_rec op_a;
static int64_t op_done_at;

int store_op_get(struct store *st, const char *id, struct op_rec *out, space_err *err)
{
	(void)st;
	if (strcmp(id, op_a.id))
		return err_set(err, ENOENT, "no operation");
	if (op_done_at && now_ms() >= op_done_at)
		op_a.state = OP_SUCCEEDED;
	*out = op_a;
	return 0;
}

static void waiter_fire(evutil_socket_t fd, short what, void *arg)
{
	struct op_waiter *w = arg;
	struct op_rec op;

	(void)fd;
	(void)what;
	store_op_get(NULL, op_a.id, &op, NULL);
	w->cb(w->d, &op, w->arg);
	event_free(w->ev);
	free(w);
	waiters_alive--;
}

int op_wait(struct spaced *d, const char *id, int timeout_s, op_wait_cb cb, void *arg, struct op_waiter **out,
	    space_err *err)
{
	struct op_waiter *w;
	struct timeval tv = { timeout_s < 2 ? timeout_s : 2, 0 };

	if (strcmp(id, op_a.id))
		return err_set(err, ENOENT, "no operation");
	if (!op_done_at)
		op_done_at = now_ms() + 2000;
	w = calloc(1, sizeof(*w));
	w->d = d;
	w->cb = cb;
	w->arg = arg;
	w->ev = evtimer_new(d->base, waiter_fire, w);
	evtimer_add(w->ev, &tv);
	*out = w;
	waiters_alive++;
	return 0;
}

void op_wait_cancel(struct op_waiter *w)
{
	event_free(w->ev);
	free(w);
	waiters_alive--;
	waiters_cancelled++;
}

static void stats(struct http_req *r)
{
	http_reply_json(r->req, 200,
			json_pack("{s:i,s:i,s:i,s:I,s:i,s:i,s:i}", "watches", watches_alive, "waiters", waiters_alive,
				  "cancelled", waiters_cancelled, "produced", (json_int_t)s_a.produced, "conns",
				  (int)http_conns_count(r->d->conns), "streams", (int)r->d->nstreams, "max_conns",
				  r->d->cfg.max_conns));
}

static int no_auth(struct http_req *r)
{
	(void)r;
	return 0;
}

static const struct http_route ctl_routes[] = {
	{ .method = EVHTTP_REQ_GET, .pattern = "/v1/operations/{}", .fn = api_operations_get },
	{ .method = EVHTTP_REQ_GET, .pattern = "/stats", .fn = stats },
};

static struct http_plane ctl = {
	.name = "stub-api", .routes = ctl_routes, .nroutes = 2, .auth = no_auth, .auth_first = true,
	.max_body = 1 << 20,
};

static void on_term(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	event_base_loopexit(arg, NULL);
}

int main(int argc, char **argv)
{
	static struct spaced d;
	space_err err = { 0 };
	const char *bytes = getenv("STUB_BYTES");
	struct event *term;
	struct evhttp *ctl_http;

	if (argc < 4) {
		fprintf(stderr, "usage: %s CTL_ADDR DATA_ADDR SPOOL_DIR\n", argv[0]);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	d.base = event_base_new();
	snprintf(d.cfg.data_listen, sizeof(d.cfg.data_listen), "%s", argv[2]);
	d.cfg.max_stdin_bytes = 4 << 20;
	/* Caps as spaced sizes them (limits.c), unless the test sets them. */
	d.cfg.max_conns = getenv("STUB_MAX_CONNS") ? atoi(getenv("STUB_MAX_CONNS")) : 0;
	d.cfg.max_conns_per_client = getenv("STUB_MAX_PER_CLIENT") ? atoi(getenv("STUB_MAX_PER_CLIENT")) : 0;
	d.cfg.request_timeout_s = getenv("STUB_REQUEST_TIMEOUT") ? atoi(getenv("STUB_REQUEST_TIMEOUT")) : 30;
	d.cfg.max_streams = getenv("STUB_MAX_STREAMS") ? atoi(getenv("STUB_MAX_STREAMS")) : 0;
	d.cfg.max_streams_per_sandbox = getenv("STUB_MAX_STREAMS_PER_SANDBOX") ? atoi(getenv("STUB_MAX_STREAMS_PER_SANDBOX")) : 32;
	limits_init(&d.cfg);
	d.conns = http_conns_new(d.base, &(struct http_limits){
		.max_conns = (unsigned)d.cfg.max_conns, .max_conns_per_client = (unsigned)d.cfg.max_conns_per_client,
		.request_timeout_s = d.cfg.request_timeout_s });
	if (!d.conns)
		return 1;
	ctl.d = &d;

	struct session *ss[] = { &s_a, &s_b };
	for (int i = 0; i < 2; i++) {
		char path[512];
		struct session *s = ss[i];
		snprintf(s->rec.id, sizeof(s->rec.id), "ss-00000000000000%s", i ? "bb" : "aa");
		snprintf(s->rec.sandbox_id, sizeof(s->rec.sandbox_id), "sb-00000000000000aa");
		s->rec.state = SESS_CREATED;
		s->rec.created_ms = now_ms();
		s->d = &d;
		s->gen = evtimer_new(d.base, gen_cb, s);
		snprintf(path, sizeof(path), "%s/%s.spool", argv[3], s->rec.id);
		unlink(path);
		if (spool_open(&s->sp, path, &err) < 0) {
			fprintf(stderr, "%s\n", err.msg);
			return 1;
		}
	}
	s_a.target = bytes ? strtoull(bytes, NULL, 10) : (64u << 20);
	snprintf(op_a.id, sizeof(op_a.id), "op-00000000000000aa");
	op_a.kind = OPK_CREATE;
	snprintf(op_a.sandbox_id, sizeof(op_a.sandbox_id), "sb-00000000000000aa");
	op_a.state = OP_RUNNING;
	op_a.created_ms = op_a.updated_ms = now_ms();

	struct front_tables dt;

	ctl_http = http_listen(d.base, argv[1], &ctl, &err);
	if (!ctl_http || stub_data_tables(&dt) < 0 || dataplane_start(&d, &dt, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	term = evsignal_new(d.base, SIGTERM, on_term, d.base);
	event_add(term, NULL);
	event_base_dispatch(d.base);
	evhttp_free(d.data_http);
	evhttp_free(ctl_http);
	http_conns_free(d.conns);
	for (int i = 0; i < 2; i++) {
		spool_close(ss[i]->sp);
		event_free(ss[i]->gen);
	}
	event_free(term);
	event_base_free(d.base);
	return 0;
}
