/* store_pg.c -- the PostgreSQL store: connecting, reconnecting and retrying, the table of
 * back-end functions (docs/design/store.md, "PostgreSQL") */
#include "store_pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cleanup.h"
#include "log.h"

/* Connection settings a URL may override (it comes last: libpq keeps the last value).
 * connect_timeout bounds one attempt; keepalives and tcp_user_timeout notice a server that
 * vanished without closing the socket, so that a statement fails (and is retried) instead
 * of hanging. */
static const char *const conn_keys[] = {
	"connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval",
	"keepalives_count", "tcp_user_timeout", "application_name", "password", "dbname", NULL,
};
/* PGPASSWORD, moved out of the environment at start-up (store_take_env_secrets) so that no
 * child of the daemon inherits it; libpq gets it from here on every connection (a URL's own
 * password wins: it comes after). Written once, before any thread. NULL: none. */
static char *env_password;
#define CONN_DEFAULTS "5", "1", "10", "5", "3", "15000", "spaced", env_password

void store_take_env_secrets(void)
{
	const char *v = getenv("PGPASSWORD");

	if (v && *v && !env_password)
		env_password = strdup(v);
	if (v) {
		explicit_bzero((char *)v, strlen(v));
		unsetenv("PGPASSWORD");
	}
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int64_t ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* libpq's messages span lines ("...\n\tIs the server running...\n"); ours are one line. */
static void trimmed(char *out, size_t outlen, const char *msg)
{
	size_t n = 0;
	bool space = false;

	for (const char *p = msg && *msg ? msg : "no message"; *p && n + 1 < outlen; p++) {
		if (*p == '\n' || *p == '\t' || *p == ' ') {
			space = n > 0;
			continue;
		}
		if (space && n + 2 < outlen)
			out[n++] = ' ';
		space = false;
		out[n++] = *p;
	}
	out[n] = '\0';
}

static void quiet_notices(void *arg, const char *msg)
{
	(void)arg;
	(void)msg; /* NOTICEs ("... does not exist, skipping") are not errors */
}

/* ---- classifying failures ---- */

static const char *sqlstate_of(const PGresult *r)
{
	return r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
}

/* The connection is gone (or the server is shutting down or starting): worth reconnecting. */
static bool conn_lost(PGconn *c, const PGresult *r)
{
	const char *s = sqlstate_of(r);

	if (PQstatus(c) != CONNECTION_OK)
		return true;
	if (!s)
		return !r;
	return !strncmp(s, "08", 2) || !strcmp(s, "57P01") || !strcmp(s, "57P02") ||
	       !strcmp(s, "57P03");
}

/* A transaction the server gave up on that succeeds when run again. */
static bool tx_conflict(const PGresult *r)
{
	const char *s = sqlstate_of(r);

	return s && (!strcmp(s, "40001") || !strcmp(s, "40P01"));
}

static int code_of(const char *sqlstate)
{
	if (!sqlstate)
		return EIO;
	if (!strcmp(sqlstate, "23505"))
		return EEXIST;
	if (!strcmp(sqlstate, "53100"))
		return ENOSPC;
	if (!strcmp(sqlstate, "53200"))
		return ENOMEM;
	if (!strncmp(sqlstate, "40", 2) || !strcmp(sqlstate, "55P03") || !strncmp(sqlstate, "08", 2) ||
	    !strncmp(sqlstate, "57P", 3))
		return EAGAIN;
	return EIO;
}

/* "store: <ctx>: <what>" from a failed result (r may be NULL: the connection's message). */
static int fail(PGconn *c, const PGresult *r, space_err *err, const char *ctx)
{
	const char *s = sqlstate_of(r);
	const char *primary = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	char msg[512];

	trimmed(msg, sizeof(msg), primary ? primary : PQerrorMessage(c));
	if (s && !strcmp(s, "23503")) /* SQLite's words, which callers and tests know */
		return err_set(err, EIO, "store: %s: FOREIGN KEY constraint failed (%s)", ctx, msg);
	return err_set(err, code_of(s), "store: %s: %s", ctx, msg);
}

static bool result_ok(const PGresult *r)
{
	ExecStatusType t = PQresultStatus(r);

	return r && (t == PGRES_COMMAND_OK || t == PGRES_TUPLES_OK);
}

/* ---- connecting ---- */

PGconn *pg_connect(const char *conninfo)
{
	const char *vals[] = { CONN_DEFAULTS, conninfo, NULL };
	PGconn *c = PQconnectdbParams(conn_keys, vals, 1);

	if (c)
		PQsetNoticeProcessor(c, quiet_notices, NULL);
	return c;
}

/* Is the server away for now? A server that answers but refuses us (a wrong password, no
 * such database) is not worth waiting for. Opening waits only for a server that is starting
 * (or stopping): one that does not answer at all fails the open at once, and the daemon's
 * supervisor starts it again; a store already open waits for it too (a restart). A store
 * already open whose server answers the ping though the connection failed tries again: the
 * server came back while we waited (a connection that timed out against a stalled server,
 * which answers by the time of the ping), not a refusal of a store that was working. */
static bool server_away(const struct pg_store *ps)
{
	const char *vals[] = { CONN_DEFAULTS, ps->conninfo, NULL };
	PGPing p = PQpingParams(conn_keys, vals, 1);

	if (ps->opening)
		return p == PQPING_REJECT;
	return p == PQPING_REJECT || p == PQPING_NO_RESPONSE || p == PQPING_OK;
}

/* Makes ps->conn usable: 0; 1 when the server is away for now (err set, worth waiting);
 * -1 when it refuses us for good. */
static int ensure_conn(struct pg_store *ps, space_err *err, const char *ctx)
{
	char msg[512];

	if (ps->conn && PQstatus(ps->conn) == CONNECTION_OK)
		return 0;
	if (ps->conn)
		PQreset(ps->conn);
	else
		ps->conn = pg_connect(ps->conninfo);
	if (!ps->conn)
		return err_set(err, ENOMEM, "store: %s: out of memory", ctx);
	if (PQstatus(ps->conn) == CONNECTION_OK)
		return 0;
	trimmed(msg, sizeof(msg), PQerrorMessage(ps->conn));
	err_set(err, EAGAIN, "store: %s: %s", ctx, msg);
	return server_away(ps) ? 1 : -1;
}

/* ---- running statements with retry ---- */

/* One attempt of something on the connection: 0 done, -1 failed for good, 1 retry. */
typedef int (*attempt_fn)(struct pg_store *ps, void *arg, space_err *err, const char *ctx);

static int with_retry(struct store *st, attempt_fn fn, void *arg, int64_t wait_ms, space_err *err,
		      const char *ctx)
{
	struct pg_store *ps = pg_of(st);
	int64_t deadline = mono_ms() + wait_ms, pause = 50;
	int rc;

	for (int attempt = 0;; attempt++) {
		pthread_mutex_lock(&ps->lock);
		rc = ensure_conn(ps, err, ctx);
		if (rc == 0)
			rc = fn(ps, arg, err, ctx);
		pthread_mutex_unlock(&ps->lock);
		if (rc <= 0) {
			if (rc == 0 && attempt) {
				log_info("store: %s: done after %d retries", ctx, attempt);
				err_clear(err);
			}
			return rc;
		}
		if (mono_ms() + pause > deadline) {
			char what[sizeof(err->msg)];

			/* "store: <ctx>: <why>" -> "store: <ctx>: database unreachable: <why>" */
			size_t skip = strlen("store: ") + strlen(ctx) + 2;

			snprintf(what, sizeof(what), "%s", strlen(err->msg) > skip ? err->msg + skip : err->msg);
			return err_set(err, EAGAIN, "store: %s: database unreachable: %s", ctx, what);
		}
		if (!attempt)
			log_warn("%s (retrying)", err->msg);
		sleep_ms(pause);
		pause = pause * 2 > 1000 ? 1000 : pause * 2;
	}
}

struct exec_args {
	const char *sql;
	const struct pg_params *p;
	PGresult **out;
};

static PGresult *send_sql(PGconn *c, const char *sql, const struct pg_params *p)
{
	if (!p)
		return PQexec(c, sql);
	return PQexecParams(c, sql, p->n, NULL, p->v, NULL, NULL, 0);
}

static int exec_attempt(struct pg_store *ps, void *arg, space_err *err, const char *ctx)
{
	struct exec_args *a = arg;
	PGresult *r = send_sql(ps->conn, a->sql, a->p);

	if (result_ok(r)) {
		if (a->out)
			*a->out = r;
		else
			PQclear(r);
		return 0;
	}
	fail(ps->conn, r, err, ctx);
	bool again = conn_lost(ps->conn, r);
	PQclear(r);
	return again ? 1 : -1;
}

int pg_exec(struct store *st, const char *sql, const struct pg_params *p, PGresult **out,
	    space_err *err, const char *ctx)
{
	struct exec_args a = { sql, p, out };

	if (out)
		*out = NULL;
	if (p && p->nomem)
		return err_set(err, ENOMEM, "store: %s: out of memory", ctx);
	return with_retry(st, exec_attempt, &a, PG_RETRY_MS, err, ctx);
}

int pg_ping(struct store *st, space_err *err)
{
	struct exec_args a = { "SELECT 1", NULL, NULL };

	return with_retry(st, exec_attempt, &a, 0, err, "ping");
}

int pg_exec_tx(struct pg_tx *tx, const char *sql, const struct pg_params *p, PGresult **out,
	       space_err *err, const char *ctx)
{
	PGresult *r;

	if (out)
		*out = NULL;
	if (p && p->nomem)
		return err_set(err, ENOMEM, "store: %s: out of memory", ctx);
	r = send_sql(tx->c, sql, p);
	if (result_ok(r)) {
		if (out)
			*out = r;
		else
			PQclear(r);
		return 0;
	}
	fail(tx->c, r, err, ctx);
	if (conn_lost(tx->c, r) || tx_conflict(r))
		tx->retry = true;
	PQclear(r);
	return -1;
}

struct tx_args {
	int (*body)(struct pg_tx *tx, void *arg, space_err *err, const char *ctx);
	void *arg;
};

static int tx_attempt(struct pg_store *ps, void *arg, space_err *err, const char *ctx)
{
	struct tx_args *a = arg;
	struct pg_tx tx = { .c = ps->conn };

	if (pg_exec_tx(&tx, "BEGIN", NULL, NULL, err, ctx) == 0 && a->body(&tx, a->arg, err, ctx) == 0 &&
	    pg_exec_tx(&tx, "COMMIT", NULL, NULL, err, ctx) == 0)
		return 0;
	if (PQstatus(ps->conn) == CONNECTION_OK && PQtransactionStatus(ps->conn) != PQTRANS_IDLE)
		PQclear(PQexec(ps->conn, "ROLLBACK"));
	return tx.retry ? 1 : -1;
}

int pg_tx(struct store *st, int (*body)(struct pg_tx *tx, void *arg, space_err *err, const char *ctx),
	  void *arg, space_err *err, const char *ctx)
{
	struct tx_args a = { body, arg };

	return with_retry(st, tx_attempt, &a, PG_RETRY_MS, err, ctx);
}

/* ---- opening ---- */

static void pg_close(struct store *st)
{
	struct pg_store *ps = pg_of(st);

	if (!ps)
		return;
	PQfinish(ps->conn);
	pthread_mutex_destroy(&ps->lock);
	free(ps->conninfo);
	free(ps);
}

static const struct store_ops pg_ops = {
	.name = "postgres",
	.close = pg_close,
	.ping = pg_ping,
	.template_put = pg_template_put,
	.template_resolve = pg_template_resolve,
	.template_get = pg_template_get,
	.template_each = pg_template_each,
	.template_named = pg_template_named,
	.template_untag = pg_template_untag,
	.sandbox_put = pg_sandbox_put,
	.sandbox_put_if = pg_sandbox_put_if,
	.sandbox_get = pg_sandbox_get,
	.sandbox_each = pg_sandbox_each,
	.op_put = pg_op_put,
	.op_get = pg_op_get,
	.op_each_open = pg_op_each_open,
	.session_put = pg_session_put,
	.session_get = pg_session_get,
	.session_each = pg_session_each,
	.snapshot_put = pg_snapshot_put,
	.snapshot_get = pg_snapshot_get,
	.snapshot_get_by_name = pg_snapshot_get_by_name,
	.snapshot_each = pg_snapshot_each,
	.snapshot_delete = pg_snapshot_delete,
	.token_put = pg_token_put,
	.token_get = pg_token_get,
	.tokens_prune = pg_tokens_prune,
	.tokens_each = pg_tokens_each,
	.token_delete = pg_token_delete,
	.event_put = pg_event_put,
	.events_each = pg_events_each,
	.events_max = pg_events_max,
	.events_prune = pg_events_prune,
	.webhook_put = pg_webhook_put,
	.webhook_cursor = pg_webhook_cursor,
	.webhook_delete = pg_webhook_delete,
	.webhooks_each = pg_webhooks_each,
	.delivery_put = pg_delivery_put,
	.deliveries_each = pg_deliveries_each,
	.secret_put = pg_secret_put,
	.secret_get = pg_secret_get,
	.secret_delete = pg_secret_delete,
	.secret_each = pg_secret_each,
	.intent_put = pg_intent_put,
	.intent_restore = pg_intent_restore,
	.claim = pg_claim,
	.node_put = pg_node_put,
	.node_get = pg_node_get,
	.node_each = pg_node_each,
	.nodes_expire = pg_nodes_expire,
	.kv_get = pg_kv_get,
	.kv_set = pg_kv_set,
};

/* The URL without its password, for messages. */
static void redacted(char *out, size_t outlen, const char *conninfo)
{
	const char *at = strchr(conninfo, '@'), *scheme = strstr(conninfo, "://");
	const char *colon = scheme && at ? memchr(scheme + 3, ':', (size_t)(at - scheme - 3)) : NULL;

	if (colon)
		snprintf(out, outlen, "%.*s:***%s", (int)(colon - conninfo), conninfo, at);
	else
		snprintf(out, outlen, "%s", conninfo);
}

int store_pg_open(struct store **out, const char *conninfo, space_err *err)
{
	struct pg_store *ps = calloc(1, sizeof(*ps));
	char shown[256];

	redacted(shown, sizeof(shown), conninfo);
	if (!ps || !(ps->conninfo = strdup(conninfo))) {
		free(ps);
		return err_set(err, ENOMEM, "store: open %s: out of memory", shown);
	}
	ps->base.ops = &pg_ops;
	pthread_mutex_init(&ps->lock, NULL);
	/* The first connection waits for a server that is still starting, as statements do;
	 * migrating takes the advisory lock, so processes starting together migrate once. */
	struct exec_args a = { "SELECT 1", NULL, NULL };
	ps->opening = true;
	if (with_retry(&ps->base, exec_attempt, &a, PG_RETRY_MS, err, "connect") < 0 ||
	    pg_migrate(&ps->base, err) < 0) {
		err_wrap(err, "opening %s", shown);
		pg_close(&ps->base);
		return -1;
	}
	ps->opening = false;
	*out = &ps->base;
	return 0;
}
