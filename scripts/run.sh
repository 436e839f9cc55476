#!/bin/bash
# run.sh -- start spaced in the foreground on loopback, with the templates built by `make`.
# spaced prints its URLs and API key itself. Override with SPACE_LISTEN, SPACE_DATA_LISTEN,
# SPACE_STATE_DIR; extra arguments are passed on to spaced.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bin=build/bin/spaced
[[ -x $bin ]] || { echo "run: $bin not built (run: make)" >&2; exit 1; }
state=${SPACE_STATE_DIR:-$PWD/.state}
mkdir -p "$state"

exec "$bin" \
    --listen "${SPACE_LISTEN:-127.0.0.1:7070}" \
    --data-listen "${SPACE_DATA_LISTEN:-127.0.0.1:7071}" \
    --state-dir "$state" \
    --templates-dir "$PWD/build/templates" \
    "$@"
