/* store_pg_listen.c -- LISTEN on a connection of its own: what other processes of a cluster
 * wrote reaches this one as it commits (store.h, "Notifications"; the triggers that NOTIFY are
 * in store_pg_schema.c, version 3) */
#include "store_pg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"

struct store_listener {
	PGconn *conn;
};

static bool is_pg_url(const char *url)
{
	return strncmp(url, "postgres://", 11) == 0 || strncmp(url, "postgresql://", 13) == 0;
}

/* Channel names are ours (store.h): identifiers, quoted all the same. */
static int listen_one(PGconn *c, const char *channel, space_err *err)
{
	char sql[96];
	_cleanup_pgres_ PGresult *r = NULL;

	if (strspn(channel, "abcdefghijklmnopqrstuvwxyz_") != strlen(channel) || strlen(channel) > 63)
		return err_set(err, EINVAL, "store: LISTEN: bad channel name");
	snprintf(sql, sizeof(sql), "LISTEN \"%s\"", channel);
	r = PQexec(c, sql);
	if (!r || PQresultStatus(r) != PGRES_COMMAND_OK)
		return err_set(err, EAGAIN, "store: LISTEN %s: %s", channel, PQerrorMessage(c));
	return 0;
}

int store_listener_open(const char *url, const char *const *channels, int n,
			struct store_listener **out, space_err *err)
{
	struct store_listener *l;

	*out = NULL;
	if (!is_pg_url(url))
		return err_set(err, ENOTSUP, "store: notifications need PostgreSQL");
	if (!(l = calloc(1, sizeof(*l))))
		return err_set(err, ENOMEM, "out of memory");
	l->conn = pg_connect(url);
	if (!l->conn || PQstatus(l->conn) != CONNECTION_OK) {
		err_set(err, l->conn ? EAGAIN : ENOMEM, "store: listening: %s",
			l->conn ? PQerrorMessage(l->conn) : "out of memory");
		store_listener_close(l);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		if (listen_one(l->conn, channels[i], err) < 0) {
			store_listener_close(l);
			return -1;
		}
	}
	/* From here on only ever read (PQconsumeInput): it must not block the loop. */
	if (PQsetnonblocking(l->conn, 1) != 0) {
		err_set(err, EIO, "store: listening: %s", PQerrorMessage(l->conn));
		store_listener_close(l);
		return -1;
	}
	*out = l;
	return 0;
}

int store_listener_fd(const struct store_listener *l)
{
	return l ? PQsocket(l->conn) : -1;
}

int store_listener_drain(struct store_listener *l,
			 void (*fn)(const char *channel, const char *payload, void *arg), void *arg,
			 space_err *err)
{
	PGnotify *n;

	if (!PQconsumeInput(l->conn) || PQstatus(l->conn) != CONNECTION_OK)
		return err_set(err, EAGAIN, "store: listening: %s", PQerrorMessage(l->conn));
	while ((n = PQnotifies(l->conn)) != NULL) {
		fn(n->relname, n->extra ? n->extra : "", arg);
		PQfreemem(n);
	}
	return 0;
}

void store_listener_close(struct store_listener *l)
{
	if (!l)
		return;
	if (l->conn)
		PQfinish(l->conn);
	free(l);
}
