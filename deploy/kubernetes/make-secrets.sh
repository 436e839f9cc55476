#!/usr/bin/env bash
# make-secrets.sh dev|production -- writes the files an overlay's Secrets are made from (into the
# gitignored secrets/ folders), each new and random, none overwritten: the API key, the cluster's
# credential, a CA and the nodes' certificate for the name space-node (and, for dev, PostgreSQL's
# password and a certificate for space-postgres signed by the same CA). With openssl only.
# production's store URL (external-postgres/secrets/url) is the operator's to write.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
overlay=${1:-}
[[ $overlay == dev || $overlay == production ]] || { echo "usage: $0 dev|production" >&2; exit 2; }
out=$here/overlays/$overlay/secrets
umask 077
mkdir -p "$out"

# new FILE COMMAND...: runs COMMAND > FILE unless FILE exists (a secret is never replaced here)
new() {
    local f=$1
    shift
    if [[ -e $f ]]; then echo "kept    $f"; return; fi
    "$@" > "$f.tmp" && mv "$f.tmp" "$f" && echo "written $f"
}
rand() { openssl rand -hex "$1"; }
ec_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256; }

new "$out/api-key" bash -c 'echo "e2b_$(openssl rand -hex 20)"'
new "$out/cluster-key" rand 32
new "$out/cluster-ca.key" ec_key
new "$out/cluster-ca.crt" openssl req -x509 -new -key "$out/cluster-ca.key" -days 3650 \
    -subj "/CN=SPACE cluster CA" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign"

# leaf DIR NAME SANS: DIR/NAME.key and DIR/NAME.crt signed by the cluster CA
leaf() {
    local dir=$1 name=$2 sans=$3
    new "$dir/$name.key" ec_key
    if [[ ! -e $dir/$name.crt ]]; then
        openssl req -new -key "$dir/$name.key" -subj "/CN=${sans%%,*}" |
            openssl x509 -req -CA "$out/cluster-ca.crt" -CAkey "$out/cluster-ca.key" -CAcreateserial \
                -days 825 -extfile <(printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' \
                "$(sed 's/\([^,]*\)/DNS:\1/g' <<<"$sans")") > "$dir/$name.crt"
        echo "written $dir/$name.crt"
    fi
}
leaf "$out" node space-node
if [[ $overlay == dev ]]; then
    pg=$here/postgres/secrets
    mkdir -p "$pg"
    new "$pg/password" rand 24
    leaf "$pg" tls space-postgres,space-postgres.space,space-postgres.space.svc,space-postgres.space.svc.cluster.local
    new "$pg/ca.crt" cat "$out/cluster-ca.crt"
fi
rm -f "$out/cluster-ca.srl"
