/* store_pg_reset.c -- the real store_test_pg_reset (store_pg_reset.h): empties the test
 * database so that a case starts from nothing, as on a fresh SQLite file. Linked into the
 * store tests by the Makefile (test_store*), overriding test_store.c's weak stand-in. */
#include <libpq-fe.h>
#include <stdio.h>

#include "store_pg_reset.h"

int store_test_pg_reset(const char *url)
{
	PGconn *c = PQconnectdb(url);
	PGresult *r;
	int rc = -1;

	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "store_test_pg_reset: connect: %s", PQerrorMessage(c));
		PQfinish(c);
		return -1;
	}
	/* every table, index and sequence lives in public (store_pg_schema.c) */
	r = PQexec(c, "SET client_min_messages = warning;"
		      " DROP SCHEMA public CASCADE; CREATE SCHEMA public");
	if (PQresultStatus(r) == PGRES_COMMAND_OK)
		rc = 0;
	else
		fprintf(stderr, "store_test_pg_reset: %s", PQerrorMessage(c));
	PQclear(r);
	PQfinish(c);
	return rc;
}
