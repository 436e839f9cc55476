#!/usr/bin/env bash
# check-layers.sh -- the daemon's layering rule, checked on every build:
#   src/daemon/vmm/   includes only itself, src/egress (link constants) and src/common (no daemon internals);
#   src/daemon/model/ includes only itself and src/common;
#   src/daemon/store/ includes only itself, model/ and src/common;
# and the front ends (api/ = /v1, e2b/ = E2B's API and envd, dataplane/, mcp/ = MCP) stand side by side:
#   no front end includes another, nor does front/ (their kit), cluster/ or any other folder:
#   only src/daemon/listeners.c and main.c include every front end (and listeners.h);
#   only sandbox/ includes sandbox/runtime.h (the core's insides: the rest use sandbox.h).
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
# Every include of every daemon file (top level and folders), as "file<TAB>include" lines.
includes() {
    local f
    for f in src/daemon/*.[ch] src/daemon/*/*.[ch]; do
        sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" | sed "s|^|$f\t|"
    done
}
FRONTS="api e2b dataplane mcp"
ASSEMBLERS="src/daemon/listeners.c src/daemon/main.c"
# folder of a daemon file ("" at the top level)
folder_of() { local rel=${1#src/daemon/}; [[ $rel == */* ]] && echo "${rel%%/*}" || echo ""; }
peers() {
    local f inc dir fe a assembler
    while IFS=$'\t' read -r f inc; do
        dir=$(folder_of "$f")
        assembler=0
        for a in $ASSEMBLERS; do [[ $f == "$a" ]] && assembler=1; done
        ((assembler)) && continue
        # an unprefixed name is the file's own folder's (or src/common's) first
        if [[ $inc != */* ]]; then
            [[ -n $dir && -f src/daemon/$dir/$inc ]] && continue
            [[ -f src/common/$inc ]] && continue
            if [[ $inc == listeners.h ]]; then
                echo "layering: $f includes \"$inc\" (only ${ASSEMBLERS// /, } assemble the listeners)" >&2
                bad=1
            fi
            continue
        fi
        for fe in $FRONTS; do
            if [[ $inc == "$fe"/* && $dir != "$fe" ]]; then
                echo "layering: $f includes \"$inc\" (front end $fe/ is included only by itself and ${ASSEMBLERS// /, })" >&2
                bad=1
            fi
        done
        if [[ $inc == sandbox/runtime.h && $dir != sandbox ]]; then
            echo "layering: $f includes \"$inc\" (the core's insides: outside sandbox/, use sandbox/sandbox.h)" >&2
            bad=1
        fi
    done < <(includes)
}
check vmm egress
check model
check store model
peers
exit $bad
