#!/bin/bash
# pg-server.sh -- a throwaway PostgreSQL for shell use (tests/pg/pgserver.py does the work):
#   tests/pg/pg-server.sh start DIR      prints postgres://space@127.0.0.1:PORT/space
#   tests/pg/pg-server.sh stop DIR       stops it and removes its files
#   tests/pg/pg-server.sh restart DIR | stop-keep DIR | kill DIR | createdb DIR NAME
set -euo pipefail
exec /usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/pgserver.py" "$@"
