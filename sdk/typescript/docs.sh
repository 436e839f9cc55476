#!/bin/sh
# docs.sh OUTDIR -- the SDK's reference (OUTDIR/index.html and a page per module) from the exported
# declarations and JSDoc comments of src/*.ts; python3 alone (tools/docgen.py), no npm package.
set -eu
[ $# -eq 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
exec python3 "$here/tools/docgen.py" "$here/src" "$1"
