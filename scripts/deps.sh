#!/bin/bash
# deps.sh [LIST] -- install the Debian packages listed in LIST (default scripts/packages.txt,
# what building and testing need) that are missing. Silent and fast (one dpkg-query) when
# everything is installed. `make bench` also passes scripts/bench-deps.txt.
set -euo pipefail

list=${1:-$(dirname "${BASH_SOURCE[0]}")/packages.txt}
mapfile -t wanted < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$list")
((${#wanted[@]})) || exit 0

# One dpkg-query for the whole list; a package dpkg has never heard of is reported on stderr
# and simply absent from the output, which makes it "missing" below.
declare -A installed=()
while read -r name status; do
    [[ $status == installed ]] && installed[$name]=1
done < <(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "${wanted[@]}" 2>/dev/null || true)

missing=()
for p in "${wanted[@]}"; do
    [[ -n ${installed[${p%%:*}]:-} ]] || missing+=("$p")
done
((${#missing[@]})) || exit 0

echo "deps: missing packages: ${missing[*]}"
if ((EUID != 0)); then
    echo "deps: error: installing packages needs root; run as root:" >&2
    echo "  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends "${missing[@]}"
echo "deps: installed ${#missing[@]} package(s)"
