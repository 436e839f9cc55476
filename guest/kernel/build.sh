#!/bin/bash
# build.sh -- build the SPACE guest kernel from Debian's linux-source-6.1, cached by content.
#
#   guest/kernel/build.sh OUTDIR
#
# Result: OUTDIR/<key>/bzImage (+ config), and OUTDIR/vmlinuz -> <key>/bzImage, where
# key = sha256(source package version, space.config, this script). A cached key returns at once.
set -euo pipefail

out=${1:?usage: guest/kernel/build.sh OUTDIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
frag=$here/space.config
pkg=linux-source-6.1
tarball=/usr/src/$pkg.tar.xz

say() { printf 'kernel: %s\n' "$*"; }
die() { printf 'kernel: error: %s\n' "$*" >&2; exit 1; }

ver=$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null) ||
    die "package $pkg is not installed (run: make deps)"
[[ -r $tarball ]] || die "$tarball missing (reinstall $pkg)"
key=$({ printf '%s %s\n' "$pkg" "$ver"; cat "$frag" "$here/build.sh"; } | sha256sum | cut -c1-64)
short=${key:0:12}

# Point OUTDIR/vmlinuz at this key's image; rename() so a reader never sees no link.
link_current() {
    ln -sfn "$key/bzImage" "$out/.vmlinuz.tmp"
    mv -fT "$out/.vmlinuz.tmp" "$out/vmlinuz"
}

mkdir -p "$out"
out=$(cd "$out" && pwd)
if [[ -f $out/$key/bzImage ]]; then
    link_current
    say "cached $out/$key/bzImage ($pkg $ver, key $short)"
    exit 0
fi

# One build at a time per OUTDIR (make -j may reach here twice); re-check the cache once locked.
exec 9>"$out/.lock"
flock 9
if [[ -f $out/$key/bzImage ]]; then
    link_current
    say "cached $out/$key/bzImage (built by a concurrent run)"
    exit 0
fi

start=$SECONDS
elapsed() { printf '%dm%02ds' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)); }

# Sources left behind by an interrupted build are useless: every key rebuilds from scratch.
rm -rf "$out"/src-* "$out"/.stage-*
src=$out/src-$key
mkdir -p "$src"
say "building $pkg $ver with $(basename "$frag") (key $short)"
say "extracting $tarball"
tar -xJf "$tarball" -C "$src" --strip-components=1

log=$src/build.log
kmake() {
    make -C "$src" ARCH=x86 \
        KBUILD_BUILD_USER=space KBUILD_BUILD_HOST=space KBUILD_BUILD_VERSION=1 \
        KBUILD_BUILD_TIMESTAMP="$pkg $ver" "$@"
}
fail_with_log() {
    echo "--- last lines of $log ---" >&2
    tail -n 40 "$log" >&2
    die "$1"
}

say "configuring: tinyconfig + $(basename "$frag") ($(elapsed))"
kmake tinyconfig >"$log" 2>&1 || fail_with_log "make tinyconfig failed"
(cd "$src" && scripts/kconfig/merge_config.sh -m .config "$frag") >>"$log" 2>&1 ||
    fail_with_log "merge_config.sh failed"
kmake olddefconfig >>"$log" 2>&1 || fail_with_log "make olddefconfig failed"

# Kconfig silently drops an option whose dependencies are not met; refuse such a kernel.
missing=()
while IFS= read -r line; do
    if [[ $line =~ ^(CONFIG_[A-Za-z0-9_]+)=(.*)$ ]]; then
        grep -qxF -- "$line" "$src/.config" ||
            missing+=("$line (got: $(grep -E "^(# )?${BASH_REMATCH[1]}[= ]" "$src/.config" || echo absent))")
    elif [[ $line =~ ^#\ (CONFIG_[A-Za-z0-9_]+)\ is\ not\ set$ ]]; then
        ! grep -q "^${BASH_REMATCH[1]}=" "$src/.config" ||
            missing+=("$line (got: $(grep "^${BASH_REMATCH[1]}=" "$src/.config"))")
    fi
done <"$frag"
if ((${#missing[@]})); then
    printf 'kernel: option not applied: %s\n' "${missing[@]}" >&2
    die "${#missing[@]} option(s) of $(basename "$frag") did not survive olddefconfig (dependencies?)"
fi
say "config verified: every option of $(basename "$frag") is set"

# Compile with a progress line every 100 build steps; the full output stays in the log.
jobs=$(nproc)
say "compiling bzImage with -j$jobs ($(elapsed)); full log: $log"
if ! kmake -j"$jobs" bzImage 2>&1 | tee -a "$log" |
    awk -v t0="$(($(date +%s) - (SECONDS - start)))" '
        /^  [A-Z]/ { n++; last = $NF }
        n && n % 100 == 0 && n != shown {
            shown = n
            s = systime() - t0
            printf "kernel: %5d steps  %dm%02ds  %s\n", n, s / 60, s % 60, last
            fflush()
        }
        /error:|Error [0-9]/ { print "kernel: " $0; fflush() }'; then
    fail_with_log "make bzImage failed"
fi

# Publish atomically: the key directory appears complete or not at all.
stage=$out/.stage-$key
rm -rf "$stage"
mkdir -p "$stage"
cp "$src/arch/x86/boot/bzImage" "$stage/bzImage"
cp "$src/.config" "$stage/config"
printf '%s %s\n' "$pkg" "$ver" >"$stage/source"
mv -T "$stage" "$out/$key"
link_current
rm -rf "$src"
say "built $out/$key/bzImage ($(du -k "$out/$key/bzImage" | cut -f1) KiB) in $(elapsed)"
