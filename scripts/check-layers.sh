#!/usr/bin/env bash
# check-layers.sh -- the daemon's layering rule, checked on every build:
#   src/daemon/vmm/   includes only itself, src/egress (link constants) and src/common (no daemon internals);
#   src/daemon/model/ includes only itself and src/common;
#   src/daemon/store/ includes only itself, model/ and src/common.
# A quoted include is resolved the way the compiler would: the including file's own folder
# first, then src/common, then src/daemon/<folder>/... for "folder/x.h" names.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bad=0
check() { # folder, allowed folder prefixes...
    local dir=$1; shift
    local f inc
    for f in src/daemon/"$dir"/*.[ch]; do
        while IFS= read -r inc; do
            if [[ $inc != */* ]]; then
                [[ -f src/daemon/$dir/$inc || -f src/common/$inc ]] && continue
            else
                local ok=0 p
                for p in "$@"; do [[ $inc == "$p"/* ]] && ok=1; done
                ((ok)) && continue
            fi
            echo "layering: $f includes \"$inc\" (src/daemon/$dir may use only: $dir ${*:-} common)" >&2
            bad=1
        done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
    done
}
check vmm egress
check model
check store model
exit $bad
