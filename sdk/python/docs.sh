#!/bin/sh
# docs.sh OUTDIR -- the Python SDK's reference (HTML) from its docstrings: OUTDIR/index.html and
# one page per module, every link relative and inside OUTDIR. Only python3 is needed.
set -eu
if [ $# -ne 1 ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
# -B: nothing written beside the sources (no __pycache__ in the tree).
exec python3 -B "$here/gendocs.py" "$1"
