#!/bin/bash
# run.sh -- start spaced in the foreground on loopback, with the templates built by `make`.
# spaced prints its URLs and API key itself. Override with SPACE_LISTEN, SPACE_DATA_LISTEN,
# SPACE_STATE_DIR; extra arguments are passed on to spaced.
#
# It keeps one warm VM of `base` (spacectl's default template) unless SPACE_POOL says otherwise
# (SPACE_POOL=base=0: none): the first create is then a pool claim, ~15 ms to the first byte
# of a command instead of a clone's ~150 ms under TCG, for ~30 MiB of host memory (an idle
# clone's PSS, QEMU and gateway; bench/lifecycle.py).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bin=build/bin/spaced
[[ -x $bin ]] || { echo "run: $bin not built (run: make)" >&2; exit 1; }
state=${SPACE_STATE_DIR:-$PWD/.state}
mkdir -p "$state"
pool=${SPACE_POOL-base=1}

exec "$bin" \
    --listen "${SPACE_LISTEN:-127.0.0.1:7070}" \
    --data-listen "${SPACE_DATA_LISTEN:-127.0.0.1:7071}" \
    --state-dir "$state" \
    --templates-dir "$PWD/build/templates" \
    ${pool:+--pool "$pool"} \
    "$@"
