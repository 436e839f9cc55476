# recipe.sh -- template "code-interpreter-v1": the base template plus what E2B's code
# interpreter needs: python3-matplotlib (brings numpy) and the interpreter program
# guest/interp/space_interp.py at /usr/local/lib/space/space_interp.py, which the daemon runs
# once per context (src/daemon/e2b/interp.c). Sourced by guest/templates/build.sh.
# shellcheck shell=bash disable=SC2034  # TEMPLATE_* are read by guest/templates/build.sh

# shellcheck source=guest/templates/base/recipe.sh
ci_templates=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ci_templates/base/recipe.sh"

TEMPLATE_MEMORY_MIB=1024
# The data libraries people reach for first, without Recommends. Debian's matplotlib still
# brings scipy and sympy (python3-fonttools depends on them) and with scipy a C++ compiler and
# Boost's headers (python3-pythran): the tree is ~1.2 GB, built in ~4 minutes from the mirror.
packages+=(python3-matplotlib python3-numpy python3-pandas)
mmdebstrap_extra+=(--aptopt='APT::Install-Recommends "false"')
interp_src=$ci_templates/../interp/space_interp.py

# The tree's key covers base's recipe (build.sh hashes only this file); the program is added by
# finish, so changing it rebuilds the image from the cached tree, not the tree.
base_key_extra=$(declare -f key_extra)
eval "base_${base_key_extra}"
key_extra() {
    base_key_extra
    sha256sum "$ci_templates/base/recipe.sh" | cut -d' ' -f1
}
finish_extra() {
    sha256sum "$interp_src" | cut -d' ' -f1
}
finish() {
    install -D -m 0755 "$interp_src" "$1/usr/local/lib/space/space_interp.py"
}

eval "base_$(declare -f populate)"
populate() {
    local root=$1
    base_populate "$root"
    # matplotlib builds its font cache on first import (seconds under TCG): build it now, for
    # the default user, whose sessions run the interpreter.
    chroot "$root" runuser -u user -- env MPLBACKEND=Agg HOME=/home/user \
        python3 -c 'import matplotlib.pyplot' || die "matplotlib does not import in the image"
}
