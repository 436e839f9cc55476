"""A guest that lies about the length of what it sends cannot frame a reply to the client.

Root in the guest can take the agent's port (tests/e2e/guest/forge_agent.py stops PID 1 and
answers the daemon's file operations itself). It then declares a file of 5 bytes and sends 5
bytes followed by a complete HTTP response, or declares 100 and sends 5, or streams a tar that
is a forged HTTP response. On one keep-alive client connection, whatever a client reads after
such a reply must be the daemon's own answer to its next request (or nothing: the daemon cuts
the connection), never the guest's bytes: on the control plane (API key), on the data plane
(a files token) and through envd's GET /files (an E2B envd token), and for an HTTP/1.0 client
that asked for keep-alive on a streamed reply."""

import base64
import json
import socket
import time

import pytest

import space

FORGED_JSON = b'{"secrets":[{"name":"FORGED","hosts":["evil.example"]}]}'
FORGED = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
          + str(len(FORGED_JSON)).encode() + b"\r\n\r\n" + FORGED_JSON)
HOSTILE_S = 12
SCRIPT = space.guest_script("forge_agent.py")


def header(size, length):
    return json.dumps({"size": size, "offset": 0, "length": length, "mode": 420,
                       "mtime": 0}).encode() + b"\n"


def b64(x):
    return base64.b64encode(x).decode()


@pytest.fixture(scope="module")
def box(daemon):
    """A `base` sandbox made through E2B's control plane: its envd token opens /files too."""
    resp = space.http_request(daemon.url, "POST", "/v2/sandboxes", {"templateID": "base", "timeout": 1800},
                              {"X-API-KEY": daemon.api_key}, timeout=600)
    assert resp.status == 201, resp
    rec = resp.json
    daemon.sandbox_ids.add(rec["sandboxID"])
    yield rec
    resp = space.http_request(daemon.url, "DELETE", f"/sandboxes/{rec['sandboxID']}", None,
                              {"X-API-KEY": daemon.api_key}, timeout=600)
    assert resp.status in (204, 404), resp


class Hostile:
    """forge_agent.py running in the guest for HOSTILE_S seconds."""

    def __init__(self, api, sb_id, plan):
        self.api, self.sb_id = api, sb_id
        s = api.create_session(sb_id, ["python3", "-c", SCRIPT, str(HOSTILE_S), json.dumps(plan)],
                               user="root")
        self.job = s.start(timeout=HOSTILE_S + 120)
        t0 = time.monotonic()
        while b"taking the port" not in self.job.result.stdout:
            assert self.job.thread.is_alive() and time.monotonic() - t0 < 120, self.job.result
            time.sleep(0.05)
        self.deadline = time.monotonic() + HOSTILE_S - 1

    def done(self):
        r = self.job.wait()
        assert r.exit_code == 0, r
        return bytes(r.stdout).decode()


def open_conn(url):
    host, port = space.split_url(url)
    s = socket.create_connection((host, port), timeout=15)
    s.settimeout(15)
    return s


def read_head(s, buf=b""):
    while b"\r\n\r\n" not in buf:
        got = s.recv(65536)
        if not got:
            return None, buf
        buf += got
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head.decode("latin-1"), rest


def content_length(head):
    for line in head.split("\r\n")[1:]:
        k, _, v = line.partition(":")
        if k.strip().lower() == "content-length":
            return int(v.strip())
    return None


def read_reply(s):
    """(head, body, cut, extra): cut when the connection ended before Content-Length bytes;
    extra, what came after the body (the beginning of the next reply)."""
    head, rest = read_head(s)
    if head is None:
        return None, rest, True, b""
    n = content_length(head)
    if n is None:
        raise AssertionError(f"expected a sized reply: {head!r}")
    body = rest
    while len(body) < n:
        try:
            got = s.recv(65536)
        except ConnectionResetError:
            got = b""
        if not got:
            return head, body, True, b""
        body += got
    return head, body[:n], False, body[n:]


def read_rest(s, timeout=5):
    """Whatever the connection still yields until it closes (or goes quiet for timeout)."""
    s.settimeout(timeout)
    out = b""
    try:
        while True:
            got = s.recv(65536)
            if not got:
                break
            out += got
    except (socket.timeout, ConnectionResetError):
        pass
    return out


def request(method, target, headers, version="1.1"):
    lines = [f"{method} {target} HTTP/{version}", "Host: space"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def forged_or_real(url, read_req, next_req, real, deadline):
    """Reads a file on a fresh keep-alive connection until the hostile agent answers; then
    sends next_req on the same connection. Returns (the read's head, body, cut) and what the
    connection yielded after it."""
    while time.monotonic() < deadline:
        s = open_conn(url)
        try:
            s.sendall(read_req)
            head, body, cut, after = read_reply(s)
            if not cut and body == real and not after:
                time.sleep(0.3)
                continue
            if not cut:
                try:
                    s.sendall(next_req)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                after += read_rest(s)
            return head, body, cut, after
        finally:
            s.close()
    raise AssertionError("the hostile agent never answered a read")


def real_hostname(api, sb_id):
    r = api.run(sb_id, ["cat", "/etc/hostname"])
    assert r.exit_code == 0, r
    return bytes(r.stdout)


def check_not_framed(head, body, cut, after, what):
    print(f"# {what}: head {head!r} body {body!r} cut {cut}; then {after[:200]!r}")
    assert b"FORGED" not in after, f"{what}: the guest's bytes were read as the next reply: {after!r}"
    assert cut, f"{what}: a reply the guest over-filled was not cut: {head!r} {body!r}"


EXCESS = {"read": b64(header(5, 5) + b"hello" + FORGED)}  # 5 bytes declared, then a whole reply


def excess_read(api, box, url, path, hdrs, next_req, what):
    """A read the hostile agent over-fills, then next_req on the same connection: neither it nor
    anything after may be the guest's."""
    real = real_hostname(api, box["sandboxID"])
    h = Hostile(api, box["sandboxID"], EXCESS)
    got = forged_or_real(url, request("GET", path, hdrs), next_req, real, h.deadline)
    answered = h.done()
    check_not_framed(*got, what)
    assert "read" in answered, answered
    return real


def first_forged_read(api, box, plan, url, path, hdrs):
    """Reads path on fresh connections until the hostile agent (running plan) answers; that
    answer as (head, body, cut). A reply left open (no end, no close) fails the test."""
    sb = box["sandboxID"]
    real = real_hostname(api, sb)
    h = Hostile(api, sb, plan)
    while True:
        assert time.monotonic() < h.deadline, "the hostile agent never answered a read"
        s = open_conn(url)
        s.sendall(request("GET", path, hdrs))
        try:
            head, body, cut, _ = read_reply(s)
        except socket.timeout:
            raise AssertionError("the short reply was left open: the client waits for bytes "
                                 "the next reply would fill")
        finally:
            s.close()
        if head and head.startswith("HTTP/1.1 200") and not cut and body == real:
            time.sleep(0.3)
            continue
        h.done()
        return head, body, cut


def envd_headers(box):
    return {"E2b-Sandbox-Id": box["sandboxID"], "E2b-Sandbox-Port": "49983", "X-Access-Token": box["envdAccessToken"]}


def test_control_plane_read_with_excess_bytes(api, daemon, box):
    sb = box["sandboxID"]
    hdrs = {"Authorization": f"Bearer {daemon.api_key}"}
    log_at = len(daemon.log_text())
    real = excess_read(api, box, daemon.url, f"/v1/sandboxes/{sb}/files?path=/etc/hostname", hdrs,
                       request("GET", "/v1/secrets", hdrs), "control plane")
    assert "the guest sent more bytes than it declared" in daemon.log_text()[log_at:]
    # the sandbox and the connection's next users are unharmed
    assert real_hostname(api, sb) == real


def test_data_plane_read_with_excess_bytes(api, daemon, box):
    sb = box["sandboxID"]
    tok = api.call("POST", f"/v1/sandboxes/{sb}/tokens", None, {"scope": "files"}, expect=201).json["token"]
    hdrs = {"Authorization": f"Bearer {tok}"}
    excess_read(api, box, daemon.data_url, f"/v1/sandboxes/{sb}/files?path=/etc/hostname", hdrs,
                request("GET", "/v1/sessions/ss-0000000000000000", hdrs), "data plane")


def test_envd_read_with_excess_bytes(api, daemon, box):
    hdrs = envd_headers(box)
    excess_read(api, box, daemon.data_url, "/files?path=/etc/hostname", hdrs, request("GET", "/health", hdrs),
                "envd")


def test_envd_read_whose_header_contradicts_itself(api, daemon, box):
    """envd asks for the whole file: a length other than the size is refused before a reply."""
    head, body, _ = first_forged_read(api, box, {"read": b64(header(1000, 5) + b"hello" + FORGED)},
                                      daemon.data_url, "/files?path=/etc/hostname", envd_headers(box))
    assert head.startswith("HTTP/1.1 502"), (head, body)
    assert b"FORGED" not in body


def test_read_that_ends_short_cuts_the_connection(api, daemon, box):
    """Declared 100 bytes, sent 5: the client sees the connection end, instead of waiting for
    bytes that the next reply would fill."""
    sb = box["sandboxID"]
    log_at = len(daemon.log_text())
    head, body, cut = first_forged_read(api, box, {"read": b64(header(100, 100) + b"hello")}, daemon.url,
                                        f"/v1/sandboxes/{sb}/files?path=/etc/hostname",
                                        {"Authorization": f"Bearer {daemon.api_key}"})
    assert cut and body == b"hello", (head, body)
    assert "fewer bytes than it declared" in daemon.log_text()[log_at:]


def test_http10_keepalive_stream_is_delimited_by_close(api, daemon, box):
    """A streamed reply (tar) to an HTTP/1.0 client that asked for keep-alive: evhttp would
    say `Content-Length: 0` and send the stream unframed; the daemon ends it by closing."""
    sb = box["sandboxID"]
    hdrs = {"Authorization": f"Bearer {daemon.api_key}", "Connection": "keep-alive"}
    h = Hostile(api, sb, {"tar-out": b64(b"{}\n" + FORGED)})
    deadline = h.deadline
    while True:
        assert time.monotonic() < deadline, "the hostile agent never answered a tar"
        s = open_conn(daemon.url)
        s.sendall(request("GET", f"/v1/sandboxes/{sb}/files/tar?path=/etc/hostname", hdrs, version="1.0"))
        head, rest = read_head(s)
        assert head, rest
        n = content_length(head)
        keep = "connection: keep-alive" in head.lower()
        if n is not None and keep:
            # what a 1.0 keep-alive client does: take n bytes, send the next request
            s.settimeout(5)
            body = rest[:n]
            s.sendall(request("GET", "/v1/secrets", hdrs, version="1.0"))
            after = rest[n:] + read_rest(s)
        else:
            body = rest + read_rest(s, timeout=15)
            after = b""
        s.close()
        if b"FORGED" not in body + after:
            time.sleep(0.3)  # a real tar of the file: the hostile agent is not in yet
            continue
        break
    h.done()
    print(f"# 1.0 tar: {head!r}")
    assert b"FORGED" not in after, f"the streamed bytes were read as the next reply: {after!r}"
    assert not keep and n is None, head
