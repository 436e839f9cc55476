# recipe.sh -- template "minimal": busybox (static) and the agent, nothing else. Seconds to build.
# Sourced by guest/templates/build.sh, which adds /sbin/space-agent and the mount points.
# shellcheck shell=bash disable=SC2034  # TEMPLATE_* are read by guest/templates/build.sh

TEMPLATE_VCPUS=1
TEMPLATE_MEMORY_MIB=128
TEMPLATE_USER=root
TEMPLATE_DISK=256M

busybox=/bin/busybox # from busybox-static: no libc needed in the image

key_extra() { sha256sum "$busybox"; }

populate() {
    local root=$1 applet
    [[ -x $busybox && $(readelf -l "$busybox") != *INTERP* ]] ||
        die "$busybox is not the static busybox (install busybox-static)"
    mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,var/tmp,mnt,home}
    install -m 0755 "$busybox" "$root/bin/busybox"
    # --list-full gives each applet's conventional path (bin/sh, usr/bin/awk, ...).
    while read -r applet; do
        [[ $applet == bin/busybox || $applet == linuxrc ]] && continue
        [[ -e $root/$applet ]] || ln -s /bin/busybox "$root/$applet"
    done < <("$busybox" --list-full)
    chmod 1777 "$root/var/tmp"

    cat >"$root/etc/passwd" <<'PW'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
PW
    cat >"$root/etc/group" <<'GR'
root:x:0:
nogroup:x:65534:
GR
    # Locked passwords: nothing logs in; the agent starts processes directly.
    printf 'root:*:0:0:99999:7:::\nnobody:*:0:0:99999:7:::\n' >"$root/etc/shadow"
    chmod 0640 "$root/etc/shadow"
    echo space >"$root/etc/hostname"
    printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\tspace\n' \
        >"$root/etc/hosts"
    # The sandbox gateway answers DNS at this address (docs/design/guest.md).
    echo 'nameserver 169.254.0.22' >"$root/etc/resolv.conf"
    printf 'ID=space-minimal\nNAME="SPACE minimal (busybox)"\n' >"$root/etc/os-release"
}
