"""PTY sessions (docs/design/channels.md): a terminal of a given size, resizes the guest sees,
TERM, and the WebSocket attach that carries a whole terminal over one connection."""

import json
import time
import urllib.parse

import pytest

import space
import wsclient


def pty_session(api, sb_id, argv, rows=24, cols=80, **fields):
    s = api.create_session(sb_id, argv, pty={"rows": rows, "cols": cols}, **fields)
    assert s.rec["kind"] == "pty" and s.rec["pty"] == {"rows": rows, "cols": cols}, s.rec
    assert s.rec["stdin"] is True, s.rec
    return s


def test_pty_session_reports_a_terminal_of_its_size(api, base_sb):
    s = pty_session(api, base_sb["id"], ["/bin/sh", "-c", "tty; stty size; echo TERM=$TERM"], rows=31, cols=97)
    r = s.collect(timeout=60)
    out = r.stdout.decode().replace("\r\n", "\n")
    assert r.exit_code == 0, r
    lines = out.split("\n")
    assert lines[0].startswith("/dev/pts/"), out
    assert lines[1] == "31 97", out
    assert "TERM=xterm-256color" in out
    assert r.stderr == b"", "a terminal has one output stream"
    assert api.session(base_sb["id"], s.id)["kind"] == "pty"


def test_resize_reaches_the_guest(api, base_sb):
    s = pty_session(api, base_sb["id"], ["/bin/sh", "-c", "stty size; read x; stty size"])
    job = s.start(timeout=60)
    s.wait_running()
    deadline = time.monotonic() + 30
    while s.get()["output_bytes"] < len("24 80\r\n"):
        assert time.monotonic() < deadline, s.rec
        time.sleep(0.1)
    # Resize, then let the script go on.
    resp = s.dp("POST", "/resize", {"rows": 50, "cols": 132})
    assert resp.status == 204, resp
    assert s.get()["pty"] == {"rows": 50, "cols": 132}
    s.send_stdin(b"\n")
    r = job.wait()
    out = r.stdout.decode().replace("\r\n", "\n")
    assert "24 80" in out and "50 132" in out and out.index("24 80") < out.index("50 132"), out
    # Bad sizes and sessions that are not terminals are refused.
    resp = s.dp("POST", "/resize", {"rows": 0, "cols": 10})
    assert resp.status in (400, 409), resp


def test_resize_of_a_plain_session_is_a_conflict(api, base_sb):
    s = api.create_session(base_sb["id"], ["sleep", "30"])
    s.start(timeout=60)
    s.wait_running()
    resp = s.dp("POST", "/resize", {"rows": 10, "cols": 10})
    assert resp.status == 409, resp
    s.signal("KILL")


def ws_connect(s, offset=None, token_in="query"):
    host, port = space.split_url(s.url)
    q = {}
    headers = {}
    if token_in == "query":
        q["token"] = s.token
    else:
        headers.update(space.bearer(s.token))
    if offset is not None:
        q["offset"] = str(offset)
    path = f"/v1/sessions/{s.id}/ws" + ("?" + urllib.parse.urlencode(q) if q else "")
    return wsclient.WebSocket(host, port, path, headers)


def read_until(ws, needle, timeout=60):
    got = b""
    deadline = time.monotonic() + timeout
    ws.sock.settimeout(timeout)
    while needle not in got:
        assert time.monotonic() < deadline, got
        op, data = ws.recv()
        if op == 2:
            assert data[0] in (1, 2), data[:8]
            got += data[1:]
        elif op == 1:
            msg = json.loads(data)
            if msg["type"] == "exit":
                return got, msg
        elif op == 8:
            return got, None
    return got, None


def test_websocket_carries_a_whole_terminal(api, base_sb):
    s = pty_session(api, base_sb["id"], ["/bin/bash", "--norc", "-i"])
    ws = ws_connect(s)
    assert ws.status == 101, ws.head
    ws.send_binary(b"echo ws-$((6*7))\n")
    got, _ = read_until(ws, b"ws-42\r\n")
    ws.send_text(json.dumps({"type": "resize", "rows": 40, "cols": 100}))
    ws.send_binary(b"stty size\n")
    got, _ = read_until(ws, b"40 100")
    ws.send_binary(b"exit 3\n")
    got, msg = read_until(ws, b"\x00never")
    assert msg == {"type": "exit", "exit_code": 3, "signal": None}, (got, msg)
    op, data = ws.recv()
    assert op == 8 and ws.closed == 1000, (op, data)
    ws.close()
    assert s.wait_done()["exit_code"] == 3


def test_websocket_resumes_from_an_offset_and_checks_its_token(api, base_sb):
    s = pty_session(api, base_sb["id"], ["/bin/sh", "-c", "printf abcdefgh; sleep 0.5"])
    s.start(timeout=60)
    assert s.wait_done()["exit_code"] == 0
    ws = ws_connect(s, offset=3, token_in="header")
    got, msg = read_until(ws, b"\x00never")
    assert got == b"defgh" and msg["exit_code"] == 0, (got, msg)
    ws.close()
    # A wrong token gets an ordinary 401, no upgrade.
    host, port = space.split_url(s.url)
    bad = wsclient.WebSocket(host, port, f"/v1/sessions/{s.id}/ws?token={'0' * 64}")
    assert bad.status == 401, bad.head
    # Not an upgrade at all: 400.
    r = space.http_request(s.url, "GET", f"/v1/sessions/{s.id}/ws", headers=space.bearer(s.token))
    assert r.status == 400, r
    space.check_error(r)
