#!/bin/bash
# with-pg.sh -- runs a command with a throwaway PostgreSQL (tests/pg/pgserver.py):
#   tests/pg/with-pg.sh CMD ARGS...
# exports SPACE_TEST_STORE_PG (its URL) and SPACE_TEST_PG_DIR (for pg-server.sh restart/kill/
# createdb), and stops the server and removes its files when CMD ends, whatever way it ends.
# A server that cannot start fails the run (the PostgreSQL cases must not silently vanish).
set -uo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
dir=$(mktemp -d "${TMPDIR:-/tmp}/space-with-pg.XXXXXX")
trap '"$here/pg-server.sh" stop "$dir" >/dev/null 2>&1; rm -rf "$dir"' EXIT
if ! url=$("$here/pg-server.sh" start "$dir"); then
    echo "with-pg: could not start PostgreSQL (Debian package postgresql)" >&2
    exit 1
fi
export SPACE_TEST_STORE_PG=$url SPACE_TEST_PG_DIR=$dir
"$@"
