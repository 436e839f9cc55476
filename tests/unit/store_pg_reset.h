/* store_pg_reset.h -- the hook test_store.c calls before each case it runs against PostgreSQL
 * (SPACE_TEST_STORE_PG=postgres://...): empties that database, so that the case starts from
 * nothing, as it does on a fresh SQLite file. Returns 0, or -1 with a message on stderr.
 * test_store.c defines a weak stand-in that fails; the PostgreSQL back end's tests provide
 * the real one. */
#ifndef SPACE_TEST_STORE_PG_RESET_H
#define SPACE_TEST_STORE_PG_RESET_H

int store_test_pg_reset(const char *url);

#endif
