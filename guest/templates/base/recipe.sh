# recipe.sh -- template "base": Debian bookworm minbase + bash, python3, curl, CA certificates.
# Sourced by guest/templates/build.sh, which adds /sbin/space-agent and the mount points.
# shellcheck shell=bash disable=SC2034  # TEMPLATE_* are read by guest/templates/build.sh
# Needs root (mmdebstrap in root mode) and the host's apt mirror; ~30 s plus the image.

TEMPLATE_VCPUS=1
TEMPLATE_MEMORY_MIB=512
TEMPLATE_USER=user
TEMPLATE_DISK=2G

suite=bookworm
# Further mmdebstrap options (a recipe that sources this one may set them).
mmdebstrap_extra=()
packages=(
    bash coreutils python3 ca-certificates curl
    procps iproute2 iputils-ping less netbase sudo xz-utils
)
# Documentation and translations are most of a minbase's files and no sandbox reads them.
dpkg_excludes=(
    'path-exclude=/usr/share/man/*'
    'path-exclude=/usr/share/info/*'
    'path-exclude=/usr/share/doc/*'
    'path-include=/usr/share/doc/*/copyright'
    'path-exclude=/usr/share/locale/*'
    'path-include=/usr/share/locale/locale.alias'
)

# The host's Debian sources for $suite (main, -updates, -security), one-line format, so the
# image uses whatever mirror this host is configured for. Other vendors' repositories
# (suites not named bookworm*) and backports are left out.
host_mirrors() {
    python3 - "$suite" <<'PY'
import glob, re, sys
suite = sys.argv[1]
wanted = {suite, suite + "-updates", suite + "-security"}
out = []
def add(types, uris, suites, comps):
    if "deb" not in types:
        return
    for u in uris:
        for s in suites:
            if s in wanted:
                line = "deb %s %s %s" % (u, s, " ".join(comps or ["main"]))
                if line not in out:
                    out.append(line)
one_line = ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list"))
for path in one_line:
    try:
        text = open(path).read()
    except OSError:
        continue
    for l in text.splitlines():
        l = re.sub(r"\[[^]]*\]", "", l.split("#", 1)[0]).split()
        if len(l) >= 3:
            add([l[0]], [l[1]], [l[2]], l[3:])
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for para in re.split(r"\n\s*\n", open(path).read()):
        f = {}
        for l in para.splitlines():
            if l.startswith("#") or ":" not in l or l[0].isspace():
                continue
            k, v = l.split(":", 1)
            f[k.strip().lower()] = v.split()
        if f.get("enabled", ["yes"])[0].lower() == "no":
            continue
        add(f.get("types", []), f.get("uris", []), f.get("suites", []), f.get("components", []))
print("\n".join(out))
PY
}

key_extra() {
    host_mirrors
    printf '%s\n' "${packages[@]}" "${dpkg_excludes[@]}"
}

populate() {
    local root=$1 mirrors=() m
    ((EUID == 0)) || die "the base template needs root (mmdebstrap in root mode)"
    mapfile -t mirrors < <(host_mirrors)
    ((${#mirrors[@]})) || die "no Debian $suite source in /etc/apt/sources.list{,.d}"
    for m in "${mirrors[@]}"; do say "mirror: $m"; done

    local opts=() o
    for o in "${dpkg_excludes[@]}"; do opts+=(--dpkgopt="$o"); done
    # mmdebstrap wants to create the target itself (empty or absent). It runs the hooks with
    # the tree as $1, hence single quotes.
    rmdir "$root"
    # shellcheck disable=SC2016
    mmdebstrap --mode=root --variant=minbase --format=directory \
        --include="$(IFS=,; echo "${packages[*]}")" \
        "${opts[@]}" "${mmdebstrap_extra[@]}" \
        --customize-hook='chroot "$1" useradd --uid 1000 --user-group --create-home --shell /bin/bash user' \
        --customize-hook='chroot "$1" usermod -aG sudo user' \
        --customize-hook='echo "user ALL=(ALL) NOPASSWD:ALL" > "$1/etc/sudoers.d/user" && chmod 0440 "$1/etc/sudoers.d/user"' \
        "$suite" "$root" "${mirrors[@]}" ||
        die "mmdebstrap failed"

    echo space >"$root/etc/hostname"
    printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\tspace\n' \
        >"$root/etc/hosts"
    # The sandbox gateway answers DNS at this address (docs/design/guest.md).
    echo 'nameserver 169.254.0.22' >"$root/etc/resolv.conf"
}
