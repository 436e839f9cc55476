#!/usr/bin/env python3
"""check_stub.py -- drives tests/http/stub_daemon: SSE framing, resume, auth, pacing, disconnects,
long-polls. Prints TAP lines. Usage: check_stub.py CTL_PORT DATA_PORT TOTAL_BYTES"""
import base64, http.client, json, socket, sys, time

CTL, DATA, TOTAL = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
SA, SB = "ss-00000000000000aa", "ss-00000000000000bb"
n = 0
failed = 0


def ok(cond, name):
    global n, failed
    n += 1
    if not cond:
        failed += 1
    print(("ok" if cond else "not ok"), n, "-", name, flush=True)


def pat(i):
    return (i * 131 + (i >> 8) * 7 + 1) & 0xFF


def req(port, method, path, headers=None, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, r.getheader("Content-Type"), data


def sse_events(raw):
    evs = []
    for block in raw.split(b"\n\n"):
        if not block:
            continue
        ev = {}
        for line in block.split(b"\n"):
            if line.startswith(b":"):
                ev.setdefault("comment", line)
                continue
            k, _, v = line.partition(b": ")
            ev[k.decode()] = v
        evs.append(ev)
    return evs


def attach(path, headers=None):
    st, ct, raw = req(DATA, "POST", path, headers)
    return st, ct, raw


def check_stream(raw, start):
    """Decode, verify bytes/streams/ids; return (bytes, exit event)."""
    pos = start
    good = True
    last = None
    for ev in sse_events(raw):
        if "comment" in ev and "event" not in ev:
            continue
        kind = ev.get("event", b"").decode()
        if kind in ("stdout", "stderr"):
            data = base64.b64decode(ev["data"])
            want_stream = "stdout" if ((pos >> 20) & 1) == 0 else "stderr"
            if kind != want_stream or int(ev["id"]) != pos + len(data):
                good = False
            if any(b != pat(pos + i) for i, b in zip(range(0, len(data), 997), data[::997])):
                good = False
            if data and (data[-1] != pat(pos + len(data) - 1) or data[0] != pat(pos)):
                good = False
            pos += len(data)
        else:
            last = ev
    return good, pos, last


T = {"Authorization": "Bearer tok"}

# First a stalled reader starts the process: output is paced, not buffered without bound.
s = socket.create_connection(("127.0.0.1", DATA))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
s.sendall(f"GET /v1/sessions/{SA}/attach HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok\r\n\r\n".encode())
time.sleep(1.0)
st, _, raw = req(CTL, "GET", "/stats")
produced = json.loads(raw)["produced"]
print(f"# produced {produced} bytes for a reader that reads nothing")
ok(TOTAL < (32 << 20) or produced < (16 << 20), "a stalled reader holds the process back (~8 MiB + buffers)")
s.close()
time.sleep(0.2)

t0 = time.time()
st, ct, raw = attach(f"/v1/sessions/{SA}/attach", T)
dt = time.time() - t0
ok(st == 200 and ct == "text/event-stream", "attach answers 200 text/event-stream")
good, pos, last = check_stream(raw, 0)
ok(good, "every chunk has the right bytes, stream and id")
ok(pos == TOTAL, f"all {TOTAL} bytes arrived ({pos})")
ok(last and last.get("event") == b"exit" and int(last["id"]) == TOTAL
   and json.loads(last["data"]) == {"exit_code": 3, "signal": None}, "the stream ends with the exit event")
mbps = TOTAL / dt / 1e6
print(f"# {TOTAL} bytes in {dt:.3f}s = {mbps:.0f} MB/s (python client, includes decode wait)")

for start in (1, 12345, (1 << 20) - 3, TOTAL - 1, TOTAL):
    st, _, raw = attach(f"/v1/sessions/{SA}/attach", {**T, "Last-Event-ID": str(start)})
    good, pos, last = check_stream(raw, start)
    ok(st == 200 and good and pos == TOTAL and last.get("event") == b"exit",
       f"resume with Last-Event-ID {start} gets exactly the rest")
st, _, raw = attach(f"/v1/sessions/{SA}/attach?offset=777", T)
good, pos, last = check_stream(raw, 777)
ok(st == 200 and good and pos == TOTAL, "resume with ?offset=")
st, _, raw = req(DATA, "GET", f"/v1/sessions/{SA}/attach?offset=99&token=tok")
good, pos, last = check_stream(raw, 99)
ok(st == 200 and good and pos == TOTAL, "GET attach with ?token= (EventSource)")
st, _, raw = attach(f"/v1/sessions/{SA}/attach?offset={TOTAL + 1}", T)
ok(st == 400 and json.loads(raw)["error"]["code"] == "bad_request", "an offset beyond the output is 400")
st, _, raw = attach(f"/v1/sessions/{SA}/attach", {**T, "Last-Event-ID": "12x"})
ok(st == 400, "a non-numeric Last-Event-ID is 400")

st, _, raw = attach(f"/v1/sessions/{SA}/attach", {"Authorization": "Bearer tokb"})
ok(st == 401 and json.loads(raw)["error"]["code"] == "unauthorized", "another session's token is 401")
st, _, raw = attach(f"/v1/sessions/{SA}/attach")
ok(st == 401, "no token is 401")
# A session not in memory is read from the store (api_step_read, api/read_async.c) before the
# verdict: none here.
st, _, raw = req(DATA, "GET", "/v1/sessions/ss-00000000000000cc", T)
ok(st == 404 and json.loads(raw)["error"]["code"] == "not_found", "a session the process does not hold is looked up: 404")
st, _, raw = attach("/v1/sessions/ss-00000000000000cc/attach", T)
ok(st == 404, "... on a stream route too")
st, _, raw = req(DATA, "GET", f"/v1/sessions/{SA}", T)
j = json.loads(raw)
ok(st == 200 and j["id"] == SA and j["output_bytes"] == TOTAL and j["exit_code"] == 3, "GET session")
st, _, raw = req(DATA, "POST", f"/v1/sessions/{SA}/signal", T, json.dumps({"signal": "SIGTERM"}))
ok(st == 204, "signal by name")
st, _, raw = req(DATA, "POST", f"/v1/sessions/{SA}/signal", T, json.dumps({"signal": "SIGNOPE"}))
ok(st == 400, "unknown signal name is 400")
st, _, raw = req(DATA, "POST", f"/v1/sessions/{SA}/stdin?close=1", T, b"hello\x00\xff")
ok(st == 204, "stdin")
# A body over the limit is refused from its Content-Length, before a byte of it is read.
s = socket.create_connection(("127.0.0.1", DATA), timeout=5)
s.sendall(f"POST /v1/sessions/{SA}/stdin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok\r\n"
          f"Content-Length: {4 << 20 | 1}\r\n\r\n".encode())
hdr = s.recv(4096)
s.close()
ok(hdr.startswith(b"HTTP/1.1 413"), "stdin over 4 MiB is 413 before the body is sent")
st, _, raw = req(DATA, "POST", f"/v1/sessions/{SA}/stdin", T, b"x" * (4 << 20))
ok(st == 204, "stdin of exactly 4 MiB is taken")

# ?token= only where EventSource needs it (GET attach); elsewhere 401 that says so.
for method, path in (("GET", ""), ("POST", "/stdin"), ("POST", "/signal"), ("POST", "/attach")):
    st, _, raw = req(DATA, method, f"/v1/sessions/{SA}{path}?token=tok", None, b"" if method == "POST" else None)
    msg = json.loads(raw)["error"]["message"] if st == 401 else ""
    ok(st == 401 and "Authorization" in msg, f"?token= refused on {method} {path or '/'}: {msg}")
st, _, raw = req(DATA, "GET", f"/v1/sessions/{SA}?token=tok", T)
ok(st == 401, "?token= refused on GET session even beside a header")

# A client that goes away mid-stream: the watch is removed, nothing leaks.
for how in ("close", "reset"):
    s = socket.create_connection(("127.0.0.1", DATA))
    s.sendall(f"GET /v1/sessions/{SB}/attach HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tokb\r\n\r\n".encode())
    hdr = s.recv(4096)
    if how == "close":
        s.settimeout(3)
        more = s.recv(4096)
        ok(b": keepalive" in more, "an idle stream gets keepalive comments")
    time.sleep(0.2)
    st, _, raw = req(CTL, "GET", "/stats")
    ok(b"200 OK" in hdr and json.loads(raw)["watches"] == 1, f"idle stream holds one watch ({how})")
    if how == "reset":
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    s.close()
    time.sleep(0.3)
    st, _, raw = req(CTL, "GET", "/stats")
    ok(json.loads(raw)["watches"] == 0, f"client {how} removes the watch at once")

# A slow reader: paced, the producer stops ~8 MiB ahead of it.
s = socket.create_connection(("127.0.0.1", DATA))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
s.sendall(f"GET /v1/sessions/{SA}/attach HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok\r\n\r\n".encode())
time.sleep(0.5)
st, _, raw = req(CTL, "GET", "/stats")
ok(json.loads(raw)["watches"] == 1, "a stalled reader keeps its watch (bounded by flow control)")
s.close()
time.sleep(0.3)
st, _, raw = req(CTL, "GET", "/stats")
ok(json.loads(raw)["watches"] == 0, "and loses it when it closes")

# Long-poll: finishes when the operation does (2 s), and is cancelled when the client leaves.
s = socket.create_connection(("127.0.0.1", CTL))
s.sendall(b"GET /v1/operations/op-00000000000000aa?wait=30 HTTP/1.1\r\nHost: x\r\n\r\n")
time.sleep(0.3)
st, _, raw = req(CTL, "GET", "/stats")
ok(json.loads(raw)["waiters"] == 1, "a long-poll holds one waiter")
s.close()
time.sleep(0.3)
st, _, raw = req(CTL, "GET", "/stats")
j = json.loads(raw)
ok(j["waiters"] == 0 and j["cancelled"] == 1, "client gone: waiter cancelled")
t0 = time.time()
st, _, raw = req(CTL, "GET", "/v1/operations/op-00000000000000aa?wait=30")
j = json.loads(raw)
ok(st == 200 and j["state"] == "succeeded" and time.time() - t0 < 5, "long-poll answers when the op is done")
# Keep-alive after a long-poll: the same connection serves another request.
c = http.client.HTTPConnection("127.0.0.1", CTL, timeout=10)
c.request("GET", "/v1/operations/op-00000000000000aa?wait=1")
r1 = c.getresponse(); r1.read()
c.request("GET", "/stats")
r2 = c.getresponse(); r2.read()
ok(r1.status == 200 and r2.status == 200, "keep-alive works after a held request")
st, _, raw = req(CTL, "GET", "/v1/operations/op-00000000000000aa?wait=abc")
ok(st == 400, "wait=abc is 400")
st, _, raw = req(CTL, "GET", "/v1/operations/op-zz")
ok(st == 404, "a malformed operation id is 404")

# E2B's envd routes (the real envd_auth in front of 501 stubs; no sandbox exists here).
E2B = {"Content-Type": "application/json", "Connect-Protocol-Version": "1"}
st, ct, raw = req(DATA, "POST", "/filesystem.Filesystem/Stat", E2B, b'{"path":"/"}')
ok(st == 400 and json.loads(raw)["code"] == "invalid_argument", "envd without E2b-Sandbox-Id is 400 invalid_argument")
h = dict(E2B, **{"E2b-Sandbox-Id": "sb-00000000000000aa", "X-Access-Token": "x"})
st, ct, raw = req(DATA, "POST", "/filesystem.Filesystem/Stat", h, b'{"path":"/"}')
ok(st == 503 and json.loads(raw)["code"] == "unavailable", "envd (Connect, unary) for an unknown sandbox is 503 unavailable")
h["E2b-Sandbox-Id"] = "../../etc"
st, ct, raw = req(DATA, "POST", "/process.Process/List", h, b'{}')
ok(st == 503, "a malformed sandbox id is refused the same way")
hs = dict(h, **{"Content-Type": "application/connect+json", "E2b-Sandbox-Id": "sb-00000000000000aa"})
st, ct, raw = req(DATA, "POST", "/process.Process/Start", hs, b"\0\0\0\0\x02{}")
ok(st == 200 and ct == "application/connect+json" and raw[0] == 2
   and json.loads(raw[5:5 + int.from_bytes(raw[1:5], "big")])["error"]["code"] == "unavailable",
   "a stream refused: 200 with only an end envelope carrying the error")
st, ct, raw = req(DATA, "GET", "/files?path=/etc/passwd", {"E2b-Sandbox-Id": "sb-00000000000000aa"})
ok(st == 502 and json.loads(raw)["code"] == 502, "GET /files for an unknown sandbox: 502 in envd's shape")
st, ct, raw = req(DATA, "GET", "/health")
ok(st == 501, "GET /health needs no token (reaches the handler)")
print(f"1..{n}")
sys.exit(1 if failed else 0)
