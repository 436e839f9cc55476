#!/bin/bash
# run.sh -- builds tests/http/stub_daemon (the real HTTP layer over a fake session and fake
# operations, with ASan+UBSan) and drives it: SSE framing, resume, auth, pacing, client
# disconnects, long-polls (check_stub.py), then malformed input (fuzz.py), then hostile and heavy
# clients against stubs of its own (check_limits.py: caps, deadlines, fd limit). No VMs needed.
# Usage: tests/http/run.sh [BUILD_DIR]   (prints TAP; exit 0 when all passed)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
build=${1:-build}/http
mkdir -p "$build"
work=$(mktemp -d)
pid=
trap '[[ -n $pid ]] && kill -TERM $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$work"' EXIT

cc=${CC:-gcc}
$cc -std=gnu11 -Wall -Wextra -Werror -Wno-format-truncation -D_GNU_SOURCE -Isrc/common -Isrc -Isrc/daemon -O1 -g -DSSE_KEEPALIVE_S=1 \
    -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined \
    -o "$build/stub_daemon" tests/http/stub_daemon.c src/daemon/http/http.c src/daemon/http/conn.c src/daemon/http/stream.c src/daemon/http/preauth.c src/daemon/http/ws.c src/daemon/limits.c \
    src/daemon/dataplane/dataplane.c \
    src/daemon/dataplane/dp_attach.c src/daemon/dataplane/dp_ws.c src/daemon/front/render.c src/daemon/sandbox/spool.c src/daemon/api/api_operations.c src/daemon/front/read_async.c src/daemon/front/reply_stored.c \
    src/daemon/e2b/envd_auth.c src/daemon/e2b/connect.c src/daemon/e2b/e2b_reply.c src/daemon/e2b/e2b_routes.c src/daemon/e2b/e2b_dialect.c src/daemon/api/api_files_dp.c src/daemon/sandbox/spec.c \
    src/daemon/model/model.c src/daemon/metrics/metrics.c src/common/err.c src/common/log.c -levent -levent_openssl -ljansson -lssl -lcrypto -lhttp_parser

# Free loopback ports, chosen by the kernel.
read -r ctl data < <(python3 -c 'import socket
a,b=socket.socket(),socket.socket(); a.bind(("127.0.0.1",0)); b.bind(("127.0.0.1",0))
print(a.getsockname()[1], b.getsockname()[1])')
bytes=${STUB_BYTES:-67108864}
STUB_BYTES=$bytes "$build/stub_daemon" "127.0.0.1:$ctl" "127.0.0.1:$data" "$work" 2>"$work/log" &
pid=$!
for _ in $(seq 50); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1', $data))" 2>/dev/null && break
    sleep 0.1
done
rc=0
python3 tests/http/check_stub.py "$ctl" "$data" "$bytes" || rc=1
python3 tests/http/fuzz.py "$data" "${FUZZ_ROUNDS:-300}" 1 >/dev/null || { echo "not ok - data plane survives fuzzing"; rc=1; }
python3 tests/http/fuzz.py "$ctl" "${FUZZ_ROUNDS:-300}" 2 >/dev/null || { echo "not ok - control listener survives fuzzing"; rc=1; }
kill -TERM $pid
wait $pid || { echo "not ok - stub daemon exits cleanly (ASan)"; rc=1; }
pid=
python3 tests/http/check_limits.py "$build/stub_daemon" "$work" || rc=1
if grep -q "ERROR: \|runtime error" "$work/log"; then
    echo "not ok - sanitizers are quiet"; grep -A20 "ERROR: \|runtime error" "$work/log" | head -40; rc=1
else
    echo "ok - sanitizers are quiet (no leaks, no errors)"
fi
exit $rc
