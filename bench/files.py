#!/usr/bin/env python3
"""files.py -- the files API's throughput beside an exec session's, and keystroke echo through a
PTY over the WebSocket beside the SSE attach + POST stdin pair, each against a baseline measured
in the same run.

Starts its own spaced (like bench/lifecycle.py: free loopback ports, temp state dir, the plain
build) and, in one `base` sandbox, measures:
  file upload         PUT /v1/sandboxes/{id}/files?path=/tmp/b.bin with --mib MiB of random
                      bytes, request sent -> the 200
  file download       GET of the same file, request sent -> its last byte
  exec out (base)     the same bytes out through a session `cat /tmp/b.bin` attached over SSE:
                      session create -> the exit event (every byte base64-decoded and checked)
  exec in (base)      the same bytes in through a session `cat > /tmp/c.bin`: session create,
                      attach, stdin in 4 MiB POSTs (the data plane's body limit) on one kept
                      connection, the last with ?close=1 -> the exit event
  gVisor              `runsc --network=none --platform=ptrace do cat FILE` (stdout to /dev/null)
                      on a host file of the same bytes, spawn -> exit (its sandbox's start
                      included; `runsc do true` is measured beside it to show that part)
  keystroke echo      a PTY session running `cat` (the guest terminal's own echo, canonical
                      mode), one WebSocket: send one byte, time until it comes back in a binary
                      message; beside it (baseline) a second PTY `cat` driven over the SSE
                      attach and one POST .../stdin per byte on a kept connection. The two
                      series are interleaved sample by sample so host noise hits both alike.

Each throughput iteration runs upload, download, exec out and exec in in turn (after the
warm-up iteration); rates are MB/s (10^6 bytes per second) with their median and their low
end (min, or p1 with >= 100 samples). Latencies follow bench/stats.py (median, p99 only with
>= 100 samples, else max). Ratios: files / exec for rates (> 1: the files API is faster),
WebSocket / SSE+POST for echo (< 1: the WebSocket is faster). Figures are printed, never
asserted; a route the daemon does not serve yet (no WebSocket route: 404; a PUT body over the
limit: 413) is printed as "not measured" with the reason, and the rest is still measured.

    python3 bench/files.py [--mib MIB] [--n N] [--keys N] [--gvisor N] [--accel tcg|kvm|auto]
"""

import argparse
import hashlib
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))

import space  # noqa: E402
import stats  # noqa: E402  (bench/, next to this file)
import wsclient  # noqa: E402  (tests/e2e/)

TEMPLATE = "base"
FILE_B = "/tmp/b.bin"  # written by the PUT (and read by GET and the exec-out session)
FILE_C = "/tmp/c.bin"  # written by the exec-in session
STDIN_CHUNK = 4 << 20  # the data plane's request body limit (reference.md, Limits on clients)
GVISOR = ["runsc", "--network=none", "--platform=ptrace", "do"]
ECHO_TARGET_P50 = 0.020
KEYS = b"abcdefghijklmnopqrstuvwxyz"
# The guest terminal's line buffer holds 4095 bytes in canonical mode; the keys stay below it.
MAX_KEYS = 3000


def mbps(nbytes, seconds):
    return nbytes / 1e6 / seconds


def fpath(sb_id, route="", **query):
    return f"/v1/sandboxes/{sb_id}/files{route}?" + urllib.parse.urlencode(query)


def why(resp, what):
    """The one-line reason a route could not be measured, from its answer."""
    if resp.status == 0:  # put_file: no answer came back
        return f"{what}: {resp.body.decode(errors='replace')[:200]}"
    if resp.status == 413:
        return f"{what} answered 413 (request bodies are not streamed in this build)"
    if resp.status == 404 and (resp.content_type != "application/json" or
                               resp.json["error"]["code"] == "not_found"):
        return f"{what} answered 404 (no such route in this build)"
    return f"{what} answered {resp.status}: {resp.body[:200]!r}"


# ---------------------------------------------------------------------------
# Throughput samples. Each returns MB/s; its bytes are checked after the clock stops.


def put_file(api, sb_id, data, path=FILE_B):
    """PUT -> 200; returns (seconds, response)."""
    t0 = time.perf_counter()
    try:
        resp = space.http_request(api.url, "PUT", fpath(sb_id, path=path), data,
                                  {"Authorization": f"Bearer {api.key}",
                                   "Content-Type": "application/octet-stream"}, timeout=600)
    except AssertionError as e:  # the server closed while the body was still going out
        return time.perf_counter() - t0, space.Response(0, {}, str(e).encode())
    return time.perf_counter() - t0, resp


def put_sample(api, sb_id, data):
    """The file's bytes are checked by the GET that follows in the same iteration."""
    dt, resp = put_file(api, sb_id, data)
    assert resp.status == 200 and resp.json == {"path": FILE_B, "size": len(data)}, resp
    return mbps(len(data), dt)


def get_file(api, sb_id, path=FILE_B):
    t0 = time.perf_counter()
    resp = space.http_request(api.url, "GET", fpath(sb_id, path=path), None,
                              {"Authorization": f"Bearer {api.key}"}, timeout=600)
    return time.perf_counter() - t0, resp


def get_sample(api, sb_id, size, want):
    dt, resp = get_file(api, sb_id)
    assert resp.status == 200, resp
    assert len(resp.body) == size and hashlib.sha256(resp.body).hexdigest() == want, \
        f"GET gave {len(resp.body)} bytes, not the {size} written"
    return mbps(size, dt)


def exec_out_sample(api, sb_id, size, want):
    """Session create -> SSE attach of `cat FILE` -> its exit event; every byte is decoded (what
    a client of the stream must do) and hashed."""
    h = hashlib.sha256()
    got, dropped, exit_ev = 0, [], None
    t0 = time.perf_counter()
    s = api.create_session(sb_id, ["cat", FILE_B])
    st = s.attach(timeout=600)
    assert st.status == 200, st.error_response
    for ev in st.events():
        if ev.type in ("stdout", "stderr"):
            assert ev.type == "stdout", bytes(ev.raw[:200])
            h.update(ev.raw)
            got += len(ev.raw)
        elif ev.type == "dropped":
            dropped.append((ev.raw["from"], ev.raw["to"]))
        elif ev.type == "exit":
            exit_ev = ev.raw
            break
        elif ev.type == "error":
            raise AssertionError(f"exec out: error event {ev.raw}")
    dt = time.perf_counter() - t0
    st.close()
    assert exit_ev == {"exit_code": 0, "signal": None}, exit_ev
    assert not dropped, f"exec out: the output caps dropped {dropped} before the client read them"
    assert got == size and h.hexdigest() == want, f"exec out: {got} bytes, not the {size} of the file"
    return mbps(size, dt)


class StdinConn:
    """POST /v1/sessions/{sid}/stdin on one kept HTTP/1.1 connection (reopened if the server
    closed it); a 503 (the session's stdin queue is full) is retried."""

    def __init__(self, session):
        self.s = session
        self.host, self.port = space.split_url(session.url)
        self.conn = None
        self.retries = 0

    def post(self, data, close=False):
        path = f"/v1/sessions/{self.s.id}/stdin" + ("?close=1" if close else "")
        hdrs = {"Authorization": f"Bearer {self.s.token}", "Content-Type": "application/octet-stream"}
        while True:
            for attempt in (0, 1):
                if self.conn is None:
                    self.conn = http.client.HTTPConnection(self.host, self.port, timeout=600)
                try:
                    self.conn.request("POST", path, body=data, headers=hdrs)
                    r = self.conn.getresponse()
                    body = r.read()
                    break
                except (http.client.HTTPException, ConnectionError):
                    self.conn.close()
                    self.conn = None
                    if attempt:
                        raise
            if r.status == 204:
                if r.getheader("Connection", "").lower() == "close":
                    self.conn.close()
                    self.conn = None
                return
            if r.status == 503:
                self.retries += 1
                time.sleep(0.002)  # no Retry-After to go by: poll, finely enough not to idle the pipe
                continue
            raise AssertionError(f"stdin: {r.status} {body[:300]!r}")

    def close(self):
        if self.conn is not None:
            self.conn.close()


def exec_in_sample(api, sb_id, data, check_hash=None, path=FILE_C):
    """Session create -> attach (starts `cat > FILE`) -> stdin in 4 MiB POSTs, the last closing
    stdin -> the exit event."""
    t0 = time.perf_counter()
    s = api.create_session(sb_id, ["/bin/sh", "-c", f"cat > {path}"], stdin=True)
    st = s.attach(timeout=600)
    assert st.status == 200, st.error_response
    conn = StdinConn(s)
    view = memoryview(data)
    for off in range(0, len(data), STDIN_CHUNK):
        conn.post(view[off:off + STDIN_CHUNK], close=off + STDIN_CHUNK >= len(data))
    exit_ev = None
    for ev in st.events():
        if ev.type == "exit":
            exit_ev = ev.raw
            break
        assert ev.type != "error", ev.raw
    dt = time.perf_counter() - t0
    st.close()
    conn.close()
    assert exit_ev == {"exit_code": 0, "signal": None}, exit_ev
    stat = api.call("GET", fpath(sb_id, "/stat", path=path), None).json
    assert stat["size"] == len(data), stat
    if check_hash:
        r = api.run(sb_id, ["sha256sum", path], timeout=300)
        assert r.exit_code == 0 and bytes(r.stdout).split()[0].decode() == check_hash, r
    return mbps(len(data), dt), conn.retries


# ---------------------------------------------------------------------------
# gVisor


def gvisor_probe(host_file, want):
    """None if runsc runs `cat FILE` here and gives the file's bytes, else why not."""
    if shutil.which(GVISOR[0]) is None:
        return "runsc not installed (make bench installs it from scripts/bench-deps.txt)"
    try:
        p = subprocess.run(GVISOR + ["cat", host_file], capture_output=True, timeout=120)
    except subprocess.TimeoutExpired:
        return "runsc did not finish within 120 s"
    if p.returncode != 0 or hashlib.sha256(p.stdout).hexdigest() != want:
        err = p.stderr.decode(errors="replace").strip().splitlines()
        return (f"runsc exited {p.returncode} with {len(p.stdout)} bytes of stdout: " +
                (err[-1] if err else "(no stderr)"))
    return None


def gvisor_run(argv):
    t0 = time.perf_counter()
    subprocess.run(GVISOR + argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


# ---------------------------------------------------------------------------
# Keystroke echo


def ws_open(s):
    host, port = space.split_url(s.url)
    return wsclient.WebSocket(host, port, f"/v1/sessions/{s.id}/ws", space.bearer(s.token), timeout=60)


class WsEcho:
    """One byte out as a binary message, seconds until it is back in a binary message."""

    def __init__(self, ws):
        self.ws = ws
        self.n = 0

    def sample(self):
        key = KEYS[self.n % len(KEYS):][:1]
        self.n += 1
        t0 = time.perf_counter()
        self.ws.send_binary(key)
        while True:
            op, data = self.ws.recv()
            if op == 2:
                assert data[:1] == b"\x01", data[:8]
                if key in data[1:]:
                    return time.perf_counter() - t0
            elif op == 1:
                raise AssertionError(f"WebSocket: {json.loads(data)} while waiting for an echo")
            elif op == 8:
                raise AssertionError(f"WebSocket closed ({self.ws.closed}) while waiting for an echo")


class SseEcho:
    """One byte out as POST .../stdin on a kept connection, seconds until it is back in a stdout
    event of the session's SSE attach (the 204 is read after, off the clock)."""

    def __init__(self, s):
        self.stream = s.attach(timeout=60)
        assert self.stream.status == 200, self.stream.error_response
        self.events = self.stream.events()
        self.host, self.port = space.split_url(s.url)
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)  # TCP_NODELAY set
        self.path = f"/v1/sessions/{s.id}/stdin"
        self.hdrs = {"Authorization": f"Bearer {s.token}", "Content-Type": "application/octet-stream"}
        self.n = 0
        self.reconnects = 0

    def sample(self):
        key = KEYS[self.n % len(KEYS):][:1]
        self.n += 1
        t0 = time.perf_counter()
        self.conn.request("POST", self.path, body=key, headers=self.hdrs)
        while True:
            ev = next(self.events)
            if ev.type == "stdout" and key in ev.raw:
                dt = time.perf_counter() - t0
                break
            assert ev.type in ("stdout", "dropped"), ev
        r = self.conn.getresponse()
        body = r.read()
        assert r.status == 204, (r.status, body)
        if r.getheader("Connection", "").lower() == "close":  # not kept: count it, reopen
            self.reconnects += 1
            self.conn.close()
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        return dt

    def close(self):
        self.conn.close()
        self.stream.close()


def pty_cat(api, sb_id):
    s = api.create_session(sb_id, ["cat"], pty={"rows": 24, "cols": 80})
    assert s.rec["kind"] == "pty" and s.rec["stdin"] is True, s.rec
    return s


# ---------------------------------------------------------------------------
# The table


def fmt(v, unit):
    if v is None:
        return "-"
    if unit == "ms":
        return f"{v * 1000:.1f} ms"
    return f"{v:.1f} MB/s"


class Row:
    """xs: samples (seconds, or MB/s); base: the baseline's samples; gv: gVisor's (rates);
    target: seconds for a p50 latency target, or None; note: why a row was not measured."""

    def __init__(self, name, xs, unit, base=None, gv=None, target=None, note=None):
        self.name, self.xs, self.unit, self.base, self.gv = name, xs, unit, base, gv
        self.target, self.note = target, note

    @property
    def rate(self):
        return self.unit == "MB/s"


def print_table(rows):
    head = (f"{'metric':<50} {'n':>4} {'median':>12} {'p99/max, p1/min':>17}  {'baseline':>12} "
            f"{'ratio':>7}  {'gVisor':>12} {'ratio':>7}  {'target':<14} {'met'}")
    print(head)
    print("-" * len(head))
    for r in rows:
        if r.xs is None:
            print(f"{r.name:<50} {'-':>4}  {r.note}")
            continue
        med = stats.median(r.xs)
        label, worst = stats.tail(r.xs, higher_is_better=r.rate)
        b = stats.median(r.base) if r.base else None
        g = stats.median(r.gv) if r.gv else None
        br = f"{stats.ratio(med, b):.2f}x" if b else "-"
        gr = f"{stats.ratio(med, g):.2f}x" if g else "-"
        target = met = ""
        if r.target is not None:
            target = f"p50 <= {r.target * 1000:.0f} ms"
            met = "yes" if med <= r.target else "NO"
        print(f"{r.name:<50} {len(r.xs):>4} {fmt(med, r.unit):>12} {label + ' ' + fmt(worst, r.unit):>17}"
              f"  {fmt(b, r.unit):>12} {br:>7}  {fmt(g, r.unit):>12} {gr:>7}  {target:<14} {met}".rstrip())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mib", type=int, default=64, help="size of the file moved each way (MiB)")
    ap.add_argument("--n", type=int, default=5, help="throughput iterations after the warm-up")
    ap.add_argument("--gvisor", type=int, default=5, help="runsc runs of cat FILE and of true")
    ap.add_argument("--keys", type=int, default=200, help="keystrokes timed on each path")
    ap.add_argument("--key-warmup", type=int, default=10, help="keystrokes dropped first on each path")
    ap.add_argument("--warmup", type=int, default=stats.WARMUP, help="throughput iterations dropped")
    ap.add_argument("--accel", default="tcg", choices=("tcg", "kvm", "auto"),
                    help="the daemon's accelerator (default tcg: what these hosts can run)")
    args = ap.parse_args()
    if args.keys + args.key_warmup > MAX_KEYS:
        ap.error(f"--keys + --key-warmup must stay under {MAX_KEYS} (the guest terminal's line buffer)")
    started = time.monotonic()
    size = args.mib << 20
    print(f"{args.mib} MiB of random bytes ...", flush=True)
    data = os.urandom(size)
    want = hashlib.sha256(data).hexdigest()
    tmp = tempfile.mkdtemp(prefix="space-bench-files-")
    host_file = os.path.join(tmp, "b.bin")
    with open(host_file, "wb") as f:
        f.write(data)

    d = space.Daemon("spaced-bench-files", extra_args=["--accel", args.accel])
    d.binary = space.PLAIN_SPACED  # benchmarks time the daemon as shipped
    rows, notes = [], []
    try:
        d.start()
        api = d.api
        info = api.info()
        assert args.accel == "auto" or info["accelerator"] == args.accel, info
        tpl = api.wait_ready_snapshot(TEMPLATE)
        # /tmp is a tmpfs of half the guest's RAM: it holds b.bin twice for a moment (the PUT
        # writes beside it and renames) and c.bin once.
        mem = max(tpl["memory_mib"], -(-2 * (3 * args.mib + 48) // 64) * 64)
        print(f"spaced {info['version']}, accelerator {info['accelerator']} "
              f"({info['accelerator_reason']}), host {info['capacity']['host_vcpus']} vCPUs; "
              f"{TEMPLATE}: {mem} MiB", flush=True)
        fields = {} if mem == tpl["memory_mib"] else {"memory_mib": mem}
        sb = api.new_sandbox(TEMPLATE, timeout_s=3600, **fields)
        sb_id = sb["id"]
        print(f"sandbox {sb_id} ({sb['start_kind']})", flush=True)

        # --- throughput
        dt, resp = put_file(api, sb_id, data)
        put_reason = None
        if resp.status != 200:
            put_reason = why(resp, f"PUT of {args.mib} MiB")
            print(f"  upload not measured: {put_reason}; {FILE_B} written through exec stdin instead",
                  flush=True)
            exec_in_sample(api, sb_id, data, want, path=FILE_B)
        dt, resp = get_file(api, sb_id)
        get_reason = None if resp.status == 200 else why(resp, "GET")
        if get_reason:
            print(f"  download not measured: {get_reason}", flush=True)
        first = [True]
        retries = []

        def iteration():
            out = {}
            if not put_reason:
                out["put"] = put_sample(api, sb_id, data)
            if not get_reason:
                out["get"] = get_sample(api, sb_id, size, want)
            out["exec_out"] = exec_out_sample(api, sb_id, size, want)
            out["exec_in"], n503 = exec_in_sample(api, sb_id, data, want if first[0] else None)
            retries.append(n503)
            first[0] = False
            print("  " + ", ".join(f"{k} {v:.1f} MB/s" for k, v in out.items()), flush=True)
            return out
        print(f"throughput: {args.warmup} warm-up + {args.n} iterations of upload, download, "
              f"exec out, exec in ...", flush=True)
        it = stats.series(iteration, args.n, args.warmup)

        def col(k):
            return [s[k] for s in it]

        # --- gVisor
        print(f"gVisor: {' '.join(GVISOR)} cat {host_file} x {args.gvisor} ...", flush=True)
        gv_reason = gvisor_probe(host_file, want)
        gv = gv_true = None
        if gv_reason is None:
            gv = [mbps(size, t) for t in stats.series(lambda: gvisor_run(["cat", host_file]),
                                                      args.gvisor, args.warmup)]
            gv_true = stats.series(lambda: gvisor_run(["true"]), args.gvisor, args.warmup)
        else:
            print(f"  gVisor not measured: {gv_reason}", flush=True)

        rows.append(Row(f"upload: PUT /files {args.mib} MiB -> 200", col("put") if not put_reason else None,
                        "MB/s", col("exec_in"), note=f"not measured: {put_reason}"))
        rows.append(Row(f"download: GET /files {args.mib} MiB -> last byte",
                        col("get") if not get_reason else None, "MB/s", col("exec_out"), gv,
                        note=f"not measured: {get_reason}"))
        rows.append(Row("  exec in: cat > FILE, 4 MiB stdin POSTs -> exit", col("exec_in"), "MB/s",
                        col("exec_in")))
        rows.append(Row("  exec out: cat FILE, SSE attach -> exit", col("exec_out"), "MB/s",
                        col("exec_out"), gv))
        if gv:
            rows.append(Row("gVisor: runsc do cat FILE > /dev/null -> exit", gv, "MB/s", None, gv))
            rows.append(Row("  gVisor: runsc do true -> exit (its start)", gv_true, "ms"))
        else:
            rows.append(Row("gVisor: runsc do cat FILE", None, "MB/s", note=f"not measured: {gv_reason}"))
        if any(retries):
            notes.append(f"exec in: stdin POSTs answered 503 (queue full) and retried: {retries}")

        # --- keystroke echo
        print(f"keystroke echo: PTY `cat`, {args.key_warmup} warm-up + {args.keys} keystrokes per path, "
              f"interleaved ...", flush=True)
        s_ws = pty_cat(api, sb_id)
        ws = ws_open(s_ws)
        ws_reason = None
        if ws.status != 101:
            ws_reason = ("no WebSocket route" if ws.status == 404 else
                         f"the WebSocket upgrade answered {ws.status}: {ws.body[:200]!r}")
            print(f"  WebSocket not measured: {ws_reason}", flush=True)
        s_sse = pty_cat(api, sb_id)
        sse = SseEcho(s_sse)
        s_sse.wait_running()
        paths = [sse]
        if not ws_reason:
            s_ws.wait_running()
            ws.sock.settimeout(60)
            paths.insert(0, WsEcho(ws))
        samples = {p: [] for p in paths}
        for _ in range(args.key_warmup + args.keys):
            for p in paths:
                samples[p].append(p.sample())
        sse_xs = stats.drop_warmup(samples[sse], args.key_warmup)
        if ws_reason:
            rows.append(Row("keystroke echo: PTY over WebSocket", None, "ms",
                            note=f"not measured: {ws_reason}"))
        else:
            ws_xs = stats.drop_warmup(samples[paths[0]], args.key_warmup)
            rows.append(Row("keystroke echo: PTY over WebSocket", ws_xs, "ms", sse_xs,
                            target=ECHO_TARGET_P50))
            ws.close()
        rows.append(Row("  PTY over SSE attach + POST stdin (baseline)", sse_xs, "ms", sse_xs,
                        target=ECHO_TARGET_P50))
        if sse.reconnects:
            notes.append(f"SSE path: the data plane closed the stdin connection {sse.reconnects} times")
        sse.close()
        api.remove_sandbox(sb_id)  # ends both `cat`s
    finally:
        d.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)

    print()
    print_table(rows)
    print(f"\nratio = median / the baseline's median: files API / exec session (same bytes, same "
          f"sandbox, same run) for rates, > 1 = the files API is faster; WebSocket / SSE + POST for "
          f"echo, < 1 = the WebSocket is faster; gVisor: the row's median / runsc's.\n"
          f"MB/s = 10^6 bytes per second; a rate's tail is its low end (min, p1 with >= "
          f"{stats.P99_MIN} samples); a latency's is p99 with >= {stats.P99_MIN} samples, else max. "
          f"{args.warmup} warm-up iteration(s) and {args.key_warmup} warm-up keystroke(s) per "
          f"path dropped.")
    for n in notes:
        print(n)
    print(f"\ntotal {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
