#!/usr/bin/env python3
"""seeds.py -- (re)writes the hand-made seed inputs of the fuzz corpora (tests/fuzz/corpus/).

Frames are built with the protocol encoders of tests/agent/agentproto.py, HTTP requests and
QMP lines are what the CLI and QEMU 7.2 send.  `libFuzzer -merge=1` later adds the inputs the
fuzzers found; this script only writes files named seed-*.  Run from anywhere:
    python3 tests/fuzz/seeds.py
"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "agent"))
import agentproto as ap  # noqa: E402


def frame(type_, chan, payload=b"", flags=0, length=None):
    n = len(payload) if length is None else length
    return ap.HDR.pack(n, type_, flags, chan) + payload


def u32(v):
    return struct.pack("<I", v & 0xffffffff)


def u64(v):
    return struct.pack("<Q", v & 0xffffffffffffffff)


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def agent_guest():
    """Host -> agent streams; the first byte is the read size the harness uses."""
    hello = frame(ap.H_HELLO, 0, u32(ap.PROTO_VERSION) + u64(0))
    exec_ = frame(ap.H_EXEC, 5, ap.encode_exec(["sh", "-c", "echo hi"], ["A=1"], "/tmp", "", stdin=True))
    seqs = {
        "hello": hello,
        "hello-ping": hello + frame(ap.H_PING, 0, u64(0x1122334455667788)),
        "exec-session": hello + exec_ + frame(ap.H_STDIN, 5, u64(0) + b"input\n")
        + frame(ap.H_STDIN_CLOSE, 5) + frame(ap.H_ACK, 5, u64(3)) + frame(ap.H_SIGNAL, 5, u32(15))
        + frame(ap.H_RELEASE, 5),
        "exec-user": hello + frame(ap.H_EXEC, 9, ap.encode_exec(["id"], [], "", "nobody")),
        "identity": hello + frame(ap.H_IDENTITY, 0, ap.encode_identity(0, b"\x01" * 32, "sb-1234", b"")),
        "settime-shutdown": hello + frame(ap.H_SETTIME, 0, u64(1700000000 * 10**9))
        + frame(ap.H_SHUTDOWN, 0, u32(1)),
        "before-hello": frame(ap.H_PING, 0, u64(1)) + hello,
        "desync": b"\xff" * 7 + frame(ap.H_PING, 0, u64(1), length=0x7fffffff)[:12] + b"junk" + hello
        + frame(ap.H_PING, 0, u64(2)),
        "bad-version": frame(ap.H_HELLO, 0, u32(2) + u64(0)) + hello,
        "flags-chan": hello + frame(ap.H_PING, 3, u64(1)) + frame(ap.H_ACK, 0, u64(1))
        + frame(ap.H_STDIN, 7, u64(0), flags=1),
        # Channel kinds (docs/design/channels.md): a PTY session, then the other kinds and
        # malformed opens.
        "open-pty": hello + frame(ap.H_OPEN, 11, ap.encode_open(ap.KIND_PTY, ap.encode_pty(24, 80, ["sh"])))
        + frame(ap.H_STDIN, 11, u64(0) + b"ls\r") + frame(ap.H_RESIZE, 11, ap.encode_resize(50, 132))
        + frame(ap.H_STDIN_CLOSE, 11) + frame(ap.H_SIGNAL, 11, u32(2)) + frame(ap.H_ACK, 11, u64(2)),
        "open-kinds": hello
        + frame(ap.H_OPEN, 12, ap.encode_open(ap.KIND_FILE, ap.encode_exec(["stat", "/"], [], "", "nobody")))
        + frame(ap.H_OPEN, 13, ap.encode_open(ap.KIND_WATCH, ap.encode_exec(["watch", "/tmp", "-r"])))
        + frame(ap.H_OPEN, 14, ap.encode_open(9, b"")) + frame(ap.H_OPEN, 15, b"\x02\x00")
        + frame(ap.H_OPEN, 16, ap.encode_open(ap.KIND_PTY, ap.encode_resize(0, 1001)))
        + frame(ap.H_RESIZE, 12, ap.encode_resize(24, 80)) + frame(ap.H_RESIZE, 12, b"\x01"),
    }
    for i, (name, data) in enumerate(sorted(seqs.items())):
        write("agent_guest", name, bytes([(0, 1, 7, 12, 64)[i % 5]]) + data)


def agent_host():
    """Agent -> daemon streams, on a connection whose session runs on channel 7."""
    def hello(chans=((7, ap.CHAN_RUNNING, 0),)):
        body = u32(ap.PROTO_VERSION) + u32(len(chans))
        for c, s, off in chans:
            body += u32(c) + u32(s) + u64(off)
        return frame(ap.A_HELLO, 0, body)

    def data(chan, stream, off, b):
        return frame(ap.A_DATA, chan, bytes([stream]) + b"\0" * 7 + u64(off) + b)

    def exit_(chan, fin, code, sig):
        return frame(ap.A_EXIT, chan, u64(fin) + u32(code) + u32(sig))

    seqs = {
        "hello": hello(),
        "session": hello() + frame(ap.A_STARTED, 7, u32(42)) + data(7, ap.STDOUT, 0, b"hello")
        + data(7, ap.STDERR, 5, b"oops\n") + frame(ap.A_STDIN_ACK, 7, u64(6)) + exit_(7, 10, 3, 0),
        "error": hello() + frame(ap.A_ERROR, 7, u32(2) + b"exec sh: No such file\0"),
        "log-pong-identity": hello() + frame(ap.A_LOG, 0, b"agent up\0") + frame(ap.A_PONG, 0, u64(9))
        + frame(ap.A_IDENTITY, 0, u32(7) + u32(0)),
        "orphans": hello(((7, ap.CHAN_RUNNING, 0), (9, ap.CHAN_EXITED, 4))) + data(9, ap.STDOUT, 0, b"x")
        + exit_(9, 1, 0, 0),
        "garbage-then-hello": b"\x00\x13garbage" + hello() + data(7, ap.STDOUT, 0, b"after"),
        "exit-signalled": hello() + exit_(7, 0, 0xffffffff, 9),
        "three-sessions": hello(((7, ap.CHAN_RUNNING, 0), (8, ap.CHAN_RUNNING, 0), (9, ap.CHAN_EXITED, 0)))
        + frame(ap.A_STDIN_ACK, 7, u64(65520)) + frame(ap.A_STDIN_ACK, 7, u64(98304)) + frame(ap.A_STARTED, 8, u32(7))
        + exit_(9, 0, 0, 0),
        "stdin-resume": hello(((7, ap.CHAN_RUNNING, 4096),)) + frame(ap.A_STDIN_ACK, 7, u64(4096))
        + frame(ap.A_STDIN_ACK, 7, u64(2)),
        "gap-and-overlap": hello() + data(7, ap.STDOUT, 3, b"gap") + data(7, ap.STDOUT, 0, b"abcdef")
        + data(7, ap.STDOUT, 2, b"cdefgh"),
    }
    for name, b in seqs.items():
        write("agent_host", name, b)


def http():
    """First byte: which listener (even: control plane, odd: data plane); then raw HTTP."""
    key = "Authorization: Bearer sk-fuzz\r\n"

    def post(method, path, body, headers=key):
        return "%s %s HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
            method, path, headers, len(body.encode()), body)

    ctl = {
        "info": "GET /v1/info HTTP/1.1\r\nHost: x\r\n" + key + "\r\n",
        "create": post("POST", "/v1/sandboxes", '{"template":"base","env":{"A":"1"}}'),
        "create-snapshot": post("POST", "/v1/sandboxes", '{"snapshot":"nightly","timeout_s":60}'),
        "lifecycle": "".join(post("POST", "/v1/sandboxes/sb-0123456789abcdef/" + a, b) for a, b in (
            ("pause", ""), ("resume", ""), ("suspend", ""), ("restore", ""), ("stop", ""), ("start", ""),
            ("wake", ""), ("fork", '{"count":2}'), ("snapshots", '{"name":"n1"}'),
            ("timeout", '{"timeout_s":60}'))),
        "token": post("POST", "/v1/sandboxes/sb-0123456789abcdef/sessions/ss-0123456789abcdef/token",
                      '{"token_ttl_s":60}'),
        "sessions": "GET /v1/sandboxes/sb-0123456789abcdef/sessions HTTP/1.1\r\n" + key
        + "\r\nGET /v1/sandboxes/sb-0123456789abcdef/sessions/ss-0123456789abcdef HTTP/1.1\r\n" + key + "\r\n",
        "too-big": post("POST", "/v1/sandboxes", '{"template":"' + "a" * 3000 + '"}'),
        "list": "GET /v1/sandboxes?state=running,paused&metadata.owner=ci HTTP/1.1\r\n" + key + "\r\n",
        "get": "GET /v1/sandboxes/sb-0123456789abcdef HTTP/1.1\r\n" + key + "\r\n",
        "delete": "DELETE /v1/sandboxes/sb-0123456789abcdef HTTP/1.1\r\n" + key + "Connection: close\r\n\r\n",
        "exec": post("POST", "/v1/sandboxes/sb-0123456789abcdef/sessions", '{"argv":["ls"]}\n'),
        "op-wait": "GET /v1/operations/op-00000000000000aa?wait=30 HTTP/1.1\r\n" + key + "\r\n",
        "op-get": "GET /v1/operations/op-00000000000000bb HTTP/1.1\r\n" + key + "\r\nGET /v1/operations/"
        "op-00000000000000bb?wait=5 HTTP/1.1\r\n" + key + "\r\nGET /v1/operations/op-0123456789abcdef HTTP/1.1\r\n"
        + key + "\r\n",
        "templates": "GET /v1/templates HTTP/1.1\r\n" + key + "\r\nGET /v1/templates/base HTTP/1.1\r\n" + key
        + "\r\n" + post("PUT", "/v1/templates/base/pool", '{"size":1}'),
        "snapshots": "GET /v1/snapshots HTTP/1.1\r\n" + key + "\r\nDELETE /v1/snapshots/nightly HTTP/1.1\r\n"
        + key + "\r\n",
        "no-key": "GET /v1/info HTTP/1.0\r\n\r\n",
        "bad-method": "PATCH /v1/sandboxes HTTP/1.1\r\n" + key + "\r\n",
        "chunked": "POST /v1/sandboxes/sb-0123456789abcdef/timeout HTTP/1.1\r\n" + key
        + "Transfer-Encoding: chunked\r\n\r\n10\r\n{\"timeout_s\":60}\r\n0\r\n\r\n",
        "logs-pct": "GET /v1/sandboxes/sb-%30123/logs?tail=100 HTTP/1.1\r\n" + key + "\r\n",
    }
    # The sessions fuzz_http.c sets up: A runs (stdin open), B has exited.
    a, b = "ss-00000000000000aa", "ss-00000000000000bb"
    ta, tb = "Authorization: Bearer " + "a" * 64 + "\r\n", "Authorization: Bearer " + "b" * 64 + "\r\n"
    data = {
        "session": "GET /v1/sessions/%s HTTP/1.1\r\n%s\r\nGET /v1/sessions/%s HTTP/1.1\r\n%s\r\n" % (a, ta, b, tb),
        "attach": "GET /v1/sessions/%s/attach?offset=0 HTTP/1.1\r\n%sAccept: text/event-stream\r\n\r\n" % (a, ta),
        "attach-exited": "GET /v1/sessions/%s/attach?offset=5 HTTP/1.1\r\n%s\r\n" % (b, tb),
        "attach-post": post("POST", "/v1/sessions/%s/attach" % a, "input", ta),
        "attach-query-token": "GET /v1/sessions/%s/attach?token=%s HTTP/1.1\r\nLast-Event-ID: 3\r\n\r\n" % (b, "b" * 64),
        "stdin": post("POST", "/v1/sessions/%s/stdin?offset=0" % a, "hello\n", ta)
        + post("POST", "/v1/sessions/%s/stdin/close" % a, "", ta),
        "signal": post("POST", "/v1/sessions/%s/signal" % a, '{"signal":"TERM"}', ta)
        + post("POST", "/v1/sessions/%s/signal" % b, '{"signal":9}', tb),
        "wrong-token": "GET /v1/sessions/%s HTTP/1.1\r\n%s\r\n" % (a, tb),
        "no-token": "POST /v1/sessions/%s/stdin/close HTTP/1.1\r\n\r\n" % a,
    }
    for name, req in ctl.items():
        write("http", "api-" + name, b"\x00" + req.encode())
    for name, req in data.items():
        write("http", "data-" + name, b"\x01" + req.encode())


def qmp():
    """First byte: mode bits for the harness; then what QEMU says, line by line."""
    greeting = ('{"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, "major": 7}, "package": '
                '"Debian 1:7.2+dfsg-7"}, "capabilities": ["oob"]}}\r\n')
    caps = '{"return": {}, "id": "space-caps"}\r\n'
    seqs = {
        "handshake": greeting + caps,
        "replies": greeting + caps + '{"return": {"status": "running", "running": true}, "id": 1}\r\n'
        '{"error": {"class": "GenericError", "desc": "No such device"}, "id": 2}\r\n'
        '{"return": {}, "id": 3}\r\n',
        "events": greeting + caps + '{"timestamp": {"seconds": 1700000000, "microseconds": 1}, '
        '"event": "STOP"}\r\n{"event": "SHUTDOWN", "data": {"guest": true, "reason": "guest-reset"}, '
        '"timestamp": {"seconds": 1, "microseconds": 2}}\r\n{"return": {}, "id": 1}\r\n',
        "caps-error": greeting + '{"error": {"class": "CommandNotFound", "desc": "x"}, "id": "space-caps"}\r\n',
        "no-id": greeting + caps + '{"error": {"class": "GenericError", "desc": "JSON parse error"}}\r\n'
        '{"return": {}}\r\n',
        "bad-json": greeting + caps + '{"return": \r\n',
        "migrate": greeting + caps + '{"return": {}, "id": 1}\r\n{"event": "MIGRATION", "data": '
        '{"status": "completed"}, "timestamp": {"seconds": 1, "microseconds": 0}}\r\n'
        '{"return": {"status": "completed", "total-time": 120, "ram": {"transferred": 1024}}, "id": 2}\r\n',
    }
    for i, (name, text) in enumerate(sorted(seqs.items())):
        write("qmp", name, bytes([i % 4]) + text.encode())


def gw_sni():
    """What a guest sends first on a TCP connection: ClientHellos Python's OpenSSL writes
    (with and without SNI, TLS 1.2 and 1.3), a truncated one, and plain HTTP."""
    import ssl

    def hello(sni, maxver=None):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        if maxver:
            ctx.maximum_version = maxver
        inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
        obj = ctx.wrap_bio(inc, out, server_hostname=sni)
        try:
            obj.do_handshake()
        except ssl.SSLWantReadError:
            pass
        return out.read()

    full = hello("api.example.test")
    seeds = {
        "tls13-sni": full,
        "tls13-nosni": hello(None),
        "tls12-sni": hello("Pypi.Org", ssl.TLSVersion.TLSv1_2),
        "truncated": full[: len(full) // 2],
        "http": b"GET / HTTP/1.1\r\nHost: api.example.test\r\n\r\n",
    }
    for name, data in sorted(seeds.items()):
        write("gw_sni", name, data)


if __name__ == "__main__":
    agent_guest()
    agent_host()
    http()
    qmp()
    gw_sni()
