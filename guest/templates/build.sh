#!/bin/bash
# build.sh -- build one SPACE template (rootfs.ext4 + kernel + template.json + digest).
#
#   guest/templates/build.sh NAME BUILDDIR
#
# Inputs:  guest/templates/NAME/recipe.sh, BUILDDIR/bin/space-agent, BUILDDIR/kernel/vmlinuz.
# Output:  BUILDDIR/templates/NAME/{rootfs.ext4,vmlinuz,template.json,digest,.key}, replaced
#          atomically. key = sha256(recipe, agent, kernel, this script, recipe's key_extra and
#          finish_extra);
#          an unchanged key returns at once. Layout and digest: docs/design/guest.md.
set -euo pipefail

name=${1:?usage: guest/templates/build.sh NAME BUILDDIR}
builddir=${2:?usage: guest/templates/build.sh NAME BUILDDIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
recipe=$here/$name/recipe.sh

say() { printf 'template %s: %s\n' "$name" "$*"; }
die() { printf 'template %s: error: %s\n' "$name" "$*" >&2; exit 1; }

[[ $name =~ ^[a-z0-9][a-z0-9._-]*$ ]] || die "bad template name"
# mkfs.ext4 -d copies owners from the staging tree: only root can make root-owned files.
((EUID == 0)) || die "templates are built as root (file owners in the image come from the tree)"
[[ -f $recipe ]] || die "no recipe $recipe"
builddir=$(cd "$builddir" && pwd)
agent=$builddir/bin/space-agent
[[ -x $agent ]] || die "$agent missing (run: make bins)"
kernel=$(readlink -f "$builddir/kernel/vmlinuz" || true)
[[ -f $kernel ]] || die "$builddir/kernel/vmlinuz missing (run: make kernel)"

# Recipe contract: sets TEMPLATE_VCPUS, TEMPLATE_MEMORY_MIB, TEMPLATE_USER, TEMPLATE_DISK
# (mkfs size, e.g. 256M) and defines populate ROOTDIR; may define key_extra (printed inputs
# outside the repo that the image depends on, e.g. the host's busybox or apt mirror), and
# finish ROOTDIR with finish_extra: files added to the tree after it is populated or taken from
# the cache (e.g. a program of the repo that changes more often than the packages), whose
# inputs finish_extra prints; they are part of the image's key but not of the cached tree's.
key_extra() { :; }
finish() { :; }
finish_extra() { :; }
# shellcheck source=/dev/null
source "$recipe"
declare -F populate >/dev/null || die "$recipe defines no populate()"

key=$({
    sha256sum "$recipe" "$agent" "$kernel" "$here/build.sh" | cut -d' ' -f1
    key_extra
    finish_extra
} | sha256sum | cut -c1-64)

out=$builddir/templates/$name
mkdir -p "$builddir/templates"
if [[ -f $out/.key && $(<"$out/.key") == "$key" ]]; then
    say "cached $out ($(<"$out/digest"))"
    exit 0
fi

# One build per template at a time; a second caller waits, then finds the cache.
exec 9>"$builddir/templates/.$name.lock"
flock 9
if [[ -f $out/.key && $(<"$out/.key") == "$key" ]]; then
    say "cached $out (built by a concurrent run)"
    exit 0
fi

start=$SECONDS
stage=$builddir/templates/.$name.stage-$$
trap 'rm -rf "$stage"' EXIT
rm -rf "$builddir/templates/.$name.stage-"*
mkdir -p "$stage/root"
root=$stage/root

# The recipe's tree depends only on the recipe and its outside inputs, not on the agent or the
# kernel, which change far more often: keep it as a tarball so rebuilding after an agent change
# costs an extraction instead of a debootstrap (and needs no mirror).
tree_key=$({ sha256sum "$recipe" | cut -d' ' -f1; key_extra; } | sha256sum | cut -c1-16)
tree_tar=$builddir/templates/.cache/$name-$tree_key.tar
tar_opts=(--numeric-owner --xattrs --xattrs-include='*' --acls)
if [[ -f $tree_tar ]]; then
    say "root filesystem from cache ${tree_tar#"$builddir"/}"
    tar -xpf "$tree_tar" "${tar_opts[@]}" -C "$root"
else
    say "populating root filesystem"
    populate "$root"
    mkdir -p "$builddir/templates/.cache"
    rm -f "$builddir/templates/.cache/$name-"*.tar
    tar -cf "$tree_tar.tmp" "${tar_opts[@]}" -C "$root" .
    mv -f "$tree_tar.tmp" "$tree_tar"
fi
finish "$root"

# What every template has, whatever the recipe: the agent as PID 1 (the kernel is booted
# with init=/sbin/space-agent) and the mount points the agent mounts over.
# Debian images have /sbin -> usr/sbin; resolve such a link inside the tree, never on the host.
sbin=$root/sbin
if [[ -L $sbin ]]; then
    target=$(readlink "$sbin")
    [[ $target == /* ]] && sbin=$root$target || sbin=$root/$target
fi
install -D -m 0755 "$agent" "$sbin/space-agent"
for d in proc sys dev run tmp root home; do mkdir -p "$root/$d"; done
chmod 1777 "$root/tmp"
chmod 0700 "$root/root"
[[ -s $root/etc/hostname ]] || echo space >"$root/etc/hostname"

say "making rootfs.ext4 ($TEMPLATE_DISK, $(du -sh "$root" | cut -f1) used)"
# -d copies the tree without mounting. -m 0: no blocks reserved for root (everything runs as
# root or as the one default user). -b 4096: mke2fs would pick 1 KiB blocks under 512 MiB.
# Inode tables and journal are zeroed now (flagged ITABLE_ZEROED), or the guest kernel's
# lazy-init thread would write them in every sandbox's copy-on-write disk after boot.
# mke2fs zeroes with unwritten extents that still take disk space; the sparse copy turns them
# into holes (a 2 GiB image of a small tree then allocates ~1 MiB plus the files).
mkfs.ext4 -q -F -m 0 -b 4096 -E lazy_itable_init=0,lazy_journal_init=0 -L space-root \
    -d "$root" "$stage/rootfs.raw" "$TEMPLATE_DISK" >/dev/null || die "mkfs.ext4 failed"
cp --sparse=always "$stage/rootfs.raw" "$stage/rootfs.ext4"
rm "$stage/rootfs.raw"
rm -rf "$root"

# Hard link when the kernel cache is on the same filesystem; a template must not change
# when build/kernel later points elsewhere.
ln "$kernel" "$stage/vmlinuz" 2>/dev/null || cp "$kernel" "$stage/vmlinuz"

# template.json minus created_at is what the digest covers, so the line goes last.
json_body() {
    printf '{\n'
    printf '  "name": "%s",\n' "$name"
    printf '  "tags": ["%s:latest"],\n' "$name"
    printf '  "vcpus": %d,\n' "$TEMPLATE_VCPUS"
    printf '  "memory_mib": %d,\n' "$TEMPLATE_MEMORY_MIB"
    printf '  "default_user": "%s",\n' "$TEMPLATE_USER"
    printf '  "env": {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},\n'
    printf '  "kernel": "vmlinuz",\n'
    printf '  "image": "rootfs.ext4",\n'
}
{
    json_body
    printf '  "created_at": "%s"\n}\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} >"$stage/template.json"

say "computing digest"
(
    cd "$stage"
    {
        sha256sum vmlinuz rootfs.ext4
        printf '%s  template.json\n' "$(json_body | sha256sum | cut -d' ' -f1)"
    } >digest.inputs
    printf 'sha256:%s\n' "$(sha256sum <digest.inputs | cut -d' ' -f1)" >digest
    rm digest.inputs
)
echo "$key" >"$stage/.key"

# Publish: swap the new directory with the old one in one renameat2(RENAME_EXCHANGE), so a
# reader sees either the complete old template or the complete new one.
if [[ -d $out ]]; then
    python3 - "$stage" "$out" <<'EOF' || { rm -rf "$out"; mv -T "$stage" "$out"; }
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
if libc.renameat2(AT_FDCWD, sys.argv[1].encode(), AT_FDCWD, sys.argv[2].encode(), RENAME_EXCHANGE):
    sys.exit(os.strerror(ctypes.get_errno()))
EOF
else
    mv -T "$stage" "$out"
fi
say "built $out in $((SECONDS - start))s: $(du -sh --apparent-size "$out/rootfs.ext4" | cut -f1) image" \
    "($(du -sh "$out/rootfs.ext4" | cut -f1) allocated), $(<"$out/digest")"
