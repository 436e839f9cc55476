"""A sandbox's TCP ports on the data plane (docs/design/ports.md): a real guest's HTTP server
reached as {port}-{id}.localhost through the port proxy. Private by default: port tokens
(header, cookie after ?space_token=), expiry, revocation, another sandbox's token, public
marks; what the guest is sent (X-Forwarded-*, never SPACE's credentials); keep-alive, chunked
and large bodies, server-sent events as they are written, a WebSocket echo; bad names, ports
nothing listens on, traffic waking a paused or suspended sandbox (not a stopped one), a slow
reader; GET .../ports."""

import hashlib
import http.client
import json
import os
import shutil
import socket
import subprocess
import time

import pytest

import space
import wsclient

PORT = 8000


def guest_servers():
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "guest", "port_servers.py")
    with open(here, "rb") as f:
        return f.read()


ECHO = 7000  # the raw TCP echo server


def start_servers(api, sb_id, port=PORT):
    r = api.run(sb_id, ["sh", "-c", "cat > /tmp/port_servers.py"], stdin=guest_servers())
    assert r.exit_code == 0, r
    r = api.run(sb_id, ["sh", "-c", f"setsid python3 /tmp/port_servers.py {port} {ECHO} >/tmp/ps.log 2>&1 "
                        "</dev/null & for i in $(seq 100); do "
                        f"grep -qi ':{port:04X} 00000000:0000 0A' /proc/net/tcp && "
                        f"grep -qi ':{ECHO:04X} 00000000:0000 0A' /proc/net/tcp && exit 0; sleep 0.1; done; "
                        "cat /tmp/ps.log; exit 1"])
    assert r.exit_code == 0, r


@pytest.fixture(scope="module")
def web(api):
    rec = api.new_sandbox("base", timeout_s=3600, metadata={"fixture": "ports"})
    start_servers(api, rec["id"])
    yield rec["id"]
    api.remove_sandbox(rec["id"])


class Port:
    """Requests to one port's name over the daemon's data-plane address."""

    def __init__(self, daemon, sb_id, port=PORT):
        self.daemon = daemon
        self.host = f"{port}-{sb_id}.localhost:{daemon.data_port}"

    def conn(self, timeout=30):
        return http.client.HTTPConnection("127.0.0.1", self.daemon.data_port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, conn=None):
        c = conn or self.conn()
        h = {"Host": self.host}
        h.update(headers or {})
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        if conn is None:
            c.close()
        return r, data


def token(api, sb_id, port=PORT, **body):
    r = api.raw("POST", f"/v1/sandboxes/{sb_id}/ports/{port}/tokens", body)
    assert r.status == 201, r
    t = r.json
    space.check(t, {"token": space.Pattern(r"^[0-9a-f]{64}$"), "id": space.Pattern(r"^[0-9a-f]{16}$"),
                    "sandbox_id": str, "port": int, "header": str, "url": str,
                    "browser_url": str, "expires_at": space.TIME})
    assert (t["sandbox_id"], t["port"], t["header"]) == (sb_id, port, "X-Space-Token"), t
    assert t["browser_url"] == t["url"] + "?space_token=" + t["token"]
    return t


def error_of(data):
    body = json.loads(data)
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    return body["error"]


def test_private_by_default_and_a_token_opens_it(daemon, api, web):
    p = Port(daemon, web)
    r, data = p.request("GET", "/echo")
    assert r.status == 401, data
    assert "private" in error_of(data)["message"]
    t = token(api, web)
    assert t["url"] == f"http://{PORT}-{web}.localhost:{daemon.data_port}/"
    r, data = p.request("GET", "/echo?x=1", headers={"X-Space-Token": t["token"]})
    assert r.status == 200, data
    got = json.loads(data)
    assert got["method"] == "GET" and got["path"] == "/echo?x=1"
    # a token of another port does not open this one, nor a made-up one
    other = token(api, web, port=9000)
    for bad in (other["token"], "0" * 64, "short"):
        r, data = p.request("GET", "/echo", headers={"X-Space-Token": bad})
        assert r.status == 401, (bad, data)


def test_what_the_guest_is_sent(daemon, api, web):
    t = token(api, web)
    p = Port(daemon, web)
    r, data = p.request("GET", "/echo", headers={
        "X-Space-Token": t["token"], "Cookie": f"theme=dark; space_port_token={t['token']}",
        "X-Forwarded-For": "spoofed-by-the-client", "Authorization": f"Bearer {daemon.api_key}",
        "X-Api-Key": daemon.api_key, "X-Space-Cluster-Key": "k", "User-Agent": "ports-test"})
    assert r.status == 200, data
    headers = {}
    for k, v in json.loads(data)["headers"]:
        headers.setdefault(k.lower(), []).append(v)
    assert headers["x-forwarded-for"] == ["127.0.0.1"]
    assert headers["x-forwarded-proto"] == ["http"]
    assert headers["x-forwarded-host"] == [p.host]
    assert headers["host"] == [p.host]
    assert headers["cookie"] == ["theme=dark"]
    assert headers["user-agent"] == ["ports-test"]
    text = data.decode()
    assert t["token"] not in text and daemon.api_key not in text
    for gone in ("x-space-token", "authorization", "x-api-key", "x-space-cluster-key"):
        assert gone not in headers, headers


def test_browser_cookie_flow(daemon, api, web):
    t = token(api, web)
    p = Port(daemon, web)
    r, data = p.request("GET", f"/echo?a=1&space_token={t['token']}&b=2")
    assert r.status == 302, data
    assert r.getheader("Location") == "/echo?a=1&b=2"
    cookie = r.getheader("Set-Cookie")
    assert cookie.startswith(f"space_port_token={t['token']};"), cookie
    assert "HttpOnly" in cookie and "Path=/" in cookie and "Domain" not in cookie
    r, data = p.request("GET", "/echo?a=1&b=2", headers={"Cookie": cookie.split(";")[0]})
    assert r.status == 200, data
    # a bad token in the URL is refused, not turned into a cookie
    r, data = p.request("GET", "/?space_token=" + "1" * 64)
    assert r.status == 401 and r.getheader("Set-Cookie") is None


def test_another_sandboxs_token_is_refused(daemon, api, web, sb):
    theirs = token(api, sb["id"])
    r, data = Port(daemon, web).request("GET", "/echo", headers={"X-Space-Token": theirs["token"]})
    assert r.status == 401, data


def test_expired_and_revoked_tokens(daemon, api, web):
    p = Port(daemon, web)
    short = token(api, web, ttl_s=1)
    r, _ = p.request("GET", "/echo", headers={"X-Space-Token": short["token"]})
    assert r.status == 200
    time.sleep(1.5)
    r, data = p.request("GET", "/echo", headers={"X-Space-Token": short["token"]})
    assert r.status == 401 and "expired" in error_of(data)["message"]
    a, b = token(api, web), token(api, web)
    r = api.raw("DELETE", f"/v1/sandboxes/{web}/ports/{PORT}/tokens/{a['id']}")
    assert r.status == 200 and r.json == {"revoked": 1}, r
    r = api.raw("DELETE", f"/v1/sandboxes/{web}/ports/{PORT}/tokens/{a['id']}")
    assert r.status == 404, r
    assert p.request("GET", "/echo", headers={"X-Space-Token": a["token"]})[0].status == 401
    assert p.request("GET", "/echo", headers={"X-Space-Token": b["token"]})[0].status == 200
    r = api.raw("DELETE", f"/v1/sandboxes/{web}/ports/{PORT}/tokens")
    assert r.status == 200 and r.json["revoked"] >= 1, r
    assert p.request("GET", "/echo", headers={"X-Space-Token": b["token"]})[0].status == 401
    assert api.raw("DELETE", f"/v1/sandboxes/{web}/ports/{PORT}/tokens/XYZ").status == 400


def test_a_kept_alive_connection_ends_when_its_token_is_revoked_or_expires(daemon, api, web):
    """The credential that let a connection in is asked again before each later request on it:
    revoked (or expired), the connection ends instead of passing the request; a new one gets 401."""
    p = Port(daemon, web)
    for how in ("revoke", "expire"):
        t = token(api, web, ttl_s=2 if how == "expire" else 600)
        c = p.conn()
        r, _ = p.request("GET", "/echo", headers={"X-Space-Token": t["token"]}, conn=c)
        assert r.status == 200
        if how == "revoke":
            assert api.raw("DELETE", f"/v1/sandboxes/{web}/ports/{PORT}/tokens/{t['id']}").status == 200
        else:
            time.sleep(2.5)
        with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)):
            p.request("GET", "/echo", headers={"X-Space-Token": t["token"]}, conn=c)
        c.close()
        assert p.request("GET", "/echo", headers={"X-Space-Token": t["token"]})[0].status == 401, how


def test_public_port(daemon, api, web):
    p = Port(daemon, web)
    r = api.raw("PUT", f"/v1/sandboxes/{web}/ports/{PORT}", {"public": True})
    assert r.status == 200 and r.json["public"] is True, r
    try:
        r, data = p.request("GET", "/echo")
        assert r.status == 200, data
        # public is per port
        assert Port(daemon, web, 9000).request("GET", "/")[0].status == 401
    finally:
        r = api.raw("PUT", f"/v1/sandboxes/{web}/ports/{PORT}", {"public": False})
        assert r.status == 200 and r.json["public"] is False, r
    assert p.request("GET", "/echo")[0].status == 401
    for bad in ({"public": "yes"}, {}, {"public": True, "x": 1}):
        assert api.raw("PUT", f"/v1/sandboxes/{web}/ports/{PORT}", bad).status == 400


def test_keep_alive_chunked_and_large_bodies(daemon, api, web):
    t = token(api, web)
    p = Port(daemon, web)
    c = p.conn()
    hdr = {"X-Space-Token": t["token"]}
    for i in range(3):  # one connection, several requests
        r, data = p.request("GET", f"/echo?n={i}", headers=hdr, conn=c)
        assert r.status == 200 and json.loads(data)["path"] == f"/echo?n={i}"
    big = os.urandom(5 << 20)
    r, data = p.request("PUT", "/echo", body=big, headers=hdr, conn=c)
    got = json.loads(data)
    assert r.status == 200 and got["length"] == len(big) and got["sha256"] == hashlib.sha256(big).hexdigest()

    def chunks():
        for k in range(10):
            yield bytes([65 + k]) * 1000

    c.putrequest("POST", "/echo", skip_host=True)
    c.putheader("Host", p.host)
    c.putheader("X-Space-Token", t["token"])
    c.putheader("Transfer-Encoding", "chunked")
    c.endheaders()
    for ch in chunks():
        c.send(b"%x\r\n%s\r\n" % (len(ch), ch))
    c.send(b"0\r\n\r\n")
    r = c.getresponse()
    got = json.loads(r.read())
    assert got["length"] == 10000 and got["sha256"] == hashlib.sha256(b"".join(chunks())).hexdigest()
    assert ("Transfer-Encoding", "chunked") in [tuple(h) for h in got["headers"]]
    c.close()


def test_another_host_on_the_same_connection_ends_it(daemon, api, web, sb):
    t = token(api, web)
    s = socket.create_connection(("127.0.0.1", daemon.data_port), timeout=30)
    host = Port(daemon, web).host
    s.sendall(f"GET /echo HTTP/1.1\r\nHost: {host}\r\nX-Space-Token: {t['token']}\r\n\r\n"
              f"GET /echo HTTP/1.1\r\nHost: {PORT}-{sb['id']}.localhost\r\n\r\n".encode())
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    assert data.startswith(b"HTTP/1.0 200") or data.startswith(b"HTTP/1.1 200"), data[:100]
    assert data.count(b"HTTP/1.") == 1, data  # the second request never reached a guest


def test_server_sent_events_arrive_as_written(daemon, api, web):
    t = token(api, web)
    api.run(web, ["rm", "-f", "/tmp/sse-go"])
    s = socket.create_connection(("127.0.0.1", daemon.data_port), timeout=30)
    s.sendall(f"GET /sse HTTP/1.1\r\nHost: {Port(daemon, web).host}\r\nX-Space-Token: {t['token']}\r\n\r\n"
              .encode())
    data = b""
    while b"data: one" not in data:
        chunk = s.recv(4096)
        assert chunk, data
        data += chunk
    assert b"data: two" not in data  # the guest has not written it yet
    assert b"text/event-stream" in data
    api.run(web, ["touch", "/tmp/sse-go"])
    while b"data: two" not in data:
        chunk = s.recv(4096)
        assert chunk, data
        data += chunk
    s.close()


def test_websocket_echo(daemon, api, web):
    t = token(api, web)
    host = f"{PORT}-{web}.localhost"
    ws = wsclient.WebSocket(host, daemon.data_port, "/ws", headers={"X-Space-Token": t["token"]},
                            connect=("127.0.0.1", daemon.data_port))
    assert ws.status == 101, ws.head
    ws.send_text("hello")
    assert ws.recv() == (1, b"hello")
    payload = os.urandom(200000)
    ws.send_binary(payload)
    assert ws.recv() == (2, payload)
    ws.close()
    # without a token the upgrade is refused in SPACE's shape
    ws = wsclient.WebSocket(host, daemon.data_port, "/ws", connect=("127.0.0.1", daemon.data_port))
    assert ws.status == 401


def test_bad_names_and_closed_ports(daemon, api, web):
    def get(host, headers=None):
        c = http.client.HTTPConnection("127.0.0.1", daemon.data_port, timeout=30)
        h = {"Host": host}
        h.update(headers or {})
        c.request("GET", "/", headers=h)
        r = c.getresponse()
        return r.status, r.read()

    for port in ("0", "65536", "99999", "http", "08000"):
        status, data = get(f"{port}-{web}.localhost")
        assert status == 400 and "port" in error_of(data)["message"], (port, data)
    status, data = get(f"{PORT}-sb-0000000000000000.localhost")
    assert status == 404 and error_of(data)["code"] == "not_found"
    status, data = get(f"{PORT}-nonsense.localhost")
    assert status == 404
    # a port nothing listens on: 502 in SPACE's shape, quickly (the guest refuses)
    t = token(api, web, port=8001)
    started = time.monotonic()
    status, data = get(f"8001-{web}.localhost", {"X-Space-Token": t["token"]})
    assert status == 502 and error_of(data)["code"] == "unavailable", data
    assert "8001" in error_of(data)["message"]
    assert time.monotonic() - started < 8
    # the data plane's own routes still answer beside the port names
    status, _ = get(f"127.0.0.1:{daemon.data_port}")
    assert status == 404


@pytest.mark.parametrize("action", ["pause", "suspend"])
def test_traffic_wakes_the_sandbox(daemon, api, web, action):
    t = token(api, web)
    api.do(web, action)
    assert api.sandbox(web)["state"] in ("paused", "suspended")
    r, data = Port(daemon, web).request("GET", "/echo", headers={"X-Space-Token": t["token"]})
    assert r.status == 200, data  # the server in its memory answers, woken by the request
    assert api.sandbox(web)["state"] == "running"


def test_a_stopped_sandbox_stays_stopped(daemon, api):
    rec = api.new_sandbox("minimal", timeout_s=600)
    try:
        assert api.raw("PUT", f"/v1/sandboxes/{rec['id']}/ports/80", {"public": True}).status == 200
        api.do(rec["id"], "stop")
        r, data = Port(daemon, rec["id"], 80).request("GET", "/")
        assert r.status == 503 and r.getheader("Retry-After"), data
        assert "stopped" in error_of(data)["message"]
        assert api.sandbox(rec["id"])["state"] == "stopped"
    finally:
        api.remove_sandbox(rec["id"])


def test_a_slow_reader_is_held_to_a_bounded_buffer(daemon, api, web):
    t = token(api, web)

    def rss_kib():
        with open(f"/proc/{daemon.proc.pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))

    before = rss_kib()
    s = socket.create_connection(("127.0.0.1", daemon.data_port), timeout=30)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(f"GET /big?n={256 << 20} HTTP/1.1\r\nHost: {Port(daemon, web).host}\r\n"
              f"X-Space-Token: {t['token']}\r\n\r\n".encode())
    s.recv(1024)
    time.sleep(4)  # the guest writes as fast as it can; nobody reads
    grew = rss_kib() - before
    s.close()
    assert grew < 32 << 10, f"the daemon grew by {grew} KiB for one slow reader"


def test_ports_list(daemon, api, web):
    t = token(api, web)
    r = api.raw("GET", f"/v1/sandboxes/{web}/ports")
    assert r.status == 200, r
    body = r.json
    assert body["pattern"] == f"http://{{port}}-{web}.localhost:{daemon.data_port}/"
    entry = next(e for e in body["ports"] if e["port"] == PORT)
    assert entry["listening"] is True and entry["reachable"] is True and entry["address"] == "0.0.0.0"
    assert entry["tokens"] >= 1 and entry["public"] is False
    assert entry["url"] == t["url"]
    ports = [e["port"] for e in body["ports"]]
    assert ports == sorted(ports)
    assert api.raw("GET", "/v1/sandboxes/sb-0000000000000000/ports").status == 404
    assert api.raw("POST", f"/v1/sandboxes/{web}/ports/0/tokens", {}).status == 400
    assert api.raw("POST", f"/v1/sandboxes/{web}/ports/80/tokens", {"ttl_s": 0}).status == 400
    assert api.raw("POST", f"/v1/sandboxes/{web}/ports/80/tokens", {"scope": "x"}).status == 400
    # the API key never opens a port
    r, _ = Port(daemon, web).request("GET", "/echo", headers={"Authorization": f"Bearer {daemon.api_key}"})
    assert r.status == 401


def test_cli_ports_and_expose_and_curl_follows_the_cookie(daemon, api, web, tmp_path):
    p = space.spacectl(daemon, "ports", web)
    assert p.returncode == 0, p
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith(f"{PORT} "))
    assert "yes" in line and f"{PORT}-{web}.localhost" in line, p.stdout
    p = space.spacectl(daemon, "expose", "--ttl", "60", web, str(PORT))
    assert p.returncode == 0, p
    url = p.stdout.strip()
    assert url.startswith(f"http://{PORT}-{web}.localhost:{daemon.data_port}/?space_token="), url
    # curl resolves *.localhost to loopback itself, as browsers do: the URL, its redirect and
    # the cookie jar are what a user's browser goes through
    jar = tmp_path / "jar"
    c = subprocess.run(["curl", "-sS", "-L", "-c", str(jar), "-b", str(jar), "-o", "-", "-w", "\n%{http_code}",
                        url.replace("/?", "/echo?")], capture_output=True, text=True, timeout=60)
    assert c.returncode == 0, c
    body, code = c.stdout.rsplit("\n", 1)
    assert code == "200", c.stdout
    assert json.loads(body)["path"] == "/echo"
    assert "space_port_token" in jar.read_text()
    # --public, then --private
    p = space.spacectl(daemon, "expose", "--public", web, str(PORT))
    assert p.returncode == 0 and p.stdout.strip() == f"http://{PORT}-{web}.localhost:{daemon.data_port}/", p
    c = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                        f"http://{PORT}-{web}.localhost:{daemon.data_port}/echo"],
                       capture_output=True, text=True, timeout=60)
    assert c.stdout == "200", c
    p = space.spacectl(daemon, "expose", "--private", web, str(PORT))
    assert p.returncode == 0 and "private" in p.stdout, p
    for bad in (["expose", web, "0"], ["expose", web], ["expose", "--public", "--ttl", "5", web, "80"]):
        assert space.spacectl(daemon, *bad).returncode == 2, bad


def tunnel(daemon, sb_id, port, headers=None):
    return wsclient.WebSocket("127.0.0.1", daemon.data_port, f"/v1/sandboxes/{sb_id}/ports/{port}/tunnel",
                              headers=headers)


def test_tcp_tunnel_over_a_websocket(daemon, api, web):
    t = token(api, web, port=ECHO)
    assert t["tunnel_url"] == f"ws://127.0.0.1:{daemon.data_port}/v1/sandboxes/{web}/ports/{ECHO}/tunnel"
    ws = tunnel(daemon, web, ECHO, {"Authorization": f"Bearer {t['token']}"})
    assert ws.status == 101, ws.head
    payload = os.urandom(300000)
    for i in range(0, len(payload), 50000):
        ws.send_binary(payload[i:i + 50000])
    got = b""
    while len(got) < len(payload):
        op, data = ws.recv()
        assert op == 2, (op, data)
        got += data
    assert got == payload
    ws.close()
    # refused: no token, another port's token, a port nothing listens on (closed with why)
    assert tunnel(daemon, web, ECHO).status == 401
    other = token(api, web, port=PORT)
    assert tunnel(daemon, web, ECHO, {"X-Space-Token": other["token"]}).status == 401
    t2 = token(api, web, port=7001)
    ws = tunnel(daemon, web, 7001, {"X-Space-Token": t2["token"]})
    assert ws.status == 101
    op, data = ws.recv()
    assert op == 8 and ws.closed == 1011 and b"7001" in data, (op, data)
    ws.sock.close()
    assert tunnel(daemon, web, 0, {"X-Space-Token": t["token"]}).status == 400
    assert tunnel(daemon, "sb-0000000000000000", ECHO, {"X-Space-Token": t["token"]}).status == 404


def test_cli_port_forward_and_stdio(daemon, api, web):
    env = dict(os.environ, SPACE_URL=daemon.url, SPACE_API_KEY=daemon.api_key)
    proc = subprocess.Popen([space.SPACECTL, "port-forward", web, f"0:{ECHO}"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("Forwarding from 127.0.0.1:") and f"-> {web}:{ECHO}" in line, line
        local = int(line.split("127.0.0.1:")[1].split()[0])
        socks = [socket.create_connection(("127.0.0.1", local), timeout=30) for _ in range(2)]
        for i, s in enumerate(socks):  # two connections at once, each its own tunnel
            s.sendall(b"conn-%d " % i * 1000)
        for i, s in enumerate(socks):
            want, got = b"conn-%d " % i * 1000, b""
            while len(got) < len(want):
                chunk = s.recv(65536)
                assert chunk, got
                got += chunk
            assert got == want
            s.shutdown(socket.SHUT_WR)  # a half-close reaches the guest: its echo server ends it
            assert s.recv(10) == b""
            s.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    # stdin to the guest's port and its answer to stdout; the end of stdin is an end of file there
    data = os.urandom(100000)
    p = subprocess.run([space.SPACECTL, "port-forward", "--stdio", web, str(ECHO)], env=env, input=data,
                       capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout == data
    # a port nothing listens on: the error, and a failing exit
    p = subprocess.run([space.SPACECTL, "port-forward", "--stdio", web, "7001"], env=env, input=b"x",
                       capture_output=True, timeout=120)
    assert p.returncode == 1 and b"7001" in p.stderr, p
    assert space.spacectl(daemon, "port-forward", web, "70000").returncode == 2


def test_cookie_flow_in_chromium(daemon, api, web):
    """What `spacectl expose` printed, opened in Debian's chromium (tests/e2e/browser/ports.mjs):
    the redirect, the HttpOnly cookie, the guest's page, a reload, and 401 without it."""
    chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    node = shutil.which("node")
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "browser")
    assert os.access(chromium, os.X_OK) and node, "chromium and node come with make deps"
    assert os.path.isdir(os.path.join(here, "node_modules", "playwright-core")), "make browser-test-deps"
    t = token(api, web)
    url = t["browser_url"].replace("/?", "/from-the-guest?")
    p = subprocess.run([node, "ports.mjs", "--url", url, "--expect", "/from-the-guest"], cwd=here,
                       env=dict(os.environ, CHROMIUM=chromium), capture_output=True, text=True, timeout=180)
    assert p.returncode == 0 and "ports.mjs: 5 passed, 0 failed" in p.stdout, p.stdout + p.stderr


def test_tokens_and_public_marks_survive_a_restart(own_daemon):
    """Both are rows of the store: after a restart the new process reads them (a token it never
    issued, a mark it never set) and the guest's server, still running, answers."""
    api = own_daemon.api
    rec = api.new_sandbox("base", timeout_s=600)
    sb_id = rec["id"]
    try:
        start_servers(api, sb_id)
        t = token(api, sb_id)
        assert api.raw("PUT", f"/v1/sandboxes/{sb_id}/ports/{ECHO}", {"public": True}).status == 200
        own_daemon.restart()
        p = Port(own_daemon, sb_id)
        r, data = p.request("GET", "/echo", headers={"X-Space-Token": t["token"]})
        assert r.status == 200, data
        assert p.request("GET", "/echo")[0].status == 401
        ws = tunnel(own_daemon, sb_id, ECHO)  # public: no token
        assert ws.status == 101, ws.head
        ws.send_binary(b"after-restart")
        got = b""
        while len(got) < len(b"after-restart"):
            op, data = ws.recv()
            assert op == 2, (op, data)
            got += data
        assert got == b"after-restart"
        ws.close()
        listed = {e["port"]: e for e in api.raw("GET", f"/v1/sandboxes/{sb_id}/ports").json["ports"]}
        assert listed[ECHO]["public"] is True and listed[PORT]["tokens"] >= 1, listed
    finally:
        api.remove_sandbox(sb_id)


def test_suspend_idle_traffic_keeps_it_and_wakes_it(daemon, api):
    """on_timeout suspend_idle: the timeout counts from the last activity (port traffic, a
    session running); idle that long it is suspended; a request wakes it again."""
    rec = api.new_sandbox("base", timeout_s=600)
    sb_id = rec["id"]
    try:
        start_servers(api, sb_id)
        assert api.raw("PUT", f"/v1/sandboxes/{sb_id}/ports/{PORT}", {"public": True}).status == 200
        sb = api.set_timeout(sb_id, 3, "suspend_idle")
        assert sb["on_timeout"] == "suspend_idle", sb
        p = Port(daemon, sb_id)
        end = time.monotonic() + 6  # twice its idle time, with traffic all along
        while time.monotonic() < end:
            assert p.request("GET", "/echo")[0].status == 200
            time.sleep(0.5)
        assert api.sandbox(sb_id)["state"] == "running"
        r = api.run(sb_id, ["sleep", "5"])  # a session running is use too
        assert r.exit_code == 0, r
        assert api.sandbox(sb_id)["state"] == "running"
        t0 = time.monotonic()
        api.wait_sandbox_state(sb_id, ("suspended",), timeout=60)
        assert time.monotonic() - t0 >= 1.5  # not before it was idle long enough
        r, data = p.request("GET", "/echo")
        assert r.status == 200, data
        assert api.sandbox(sb_id)["state"] == "running"
    finally:
        api.remove_sandbox(sb_id)


def test_ssh_through_port_forward_stdio(daemon, api, web, tmp_path):
    """ssh -o ProxyCommand='spacectl port-forward --stdio SB 2222' to an sshd in the guest:
    dropbear (Debian's dropbear-bin, scripts/packages.txt) and the libraries it needs, copied
    from the host into the guest (the same Debian release), with a key of this test's own."""
    dropbear = "/usr/sbin/dropbear"
    assert os.access(dropbear, os.X_OK) and shutil.which("ssh"), "make deps installs dropbear-bin, openssh-client"
    libs = [line.split("=>")[1].split()[0] for line in subprocess.run(["ldd", dropbear], capture_output=True,
                                                                       text=True).stdout.splitlines()
            if "=>" in line and any(n in line for n in ("libtomcrypt", "libtommath", "libgmp"))]
    assert len(libs) == 3, libs
    subprocess.run(["dropbearkey", "-t", "ed25519", "-f", str(tmp_path / "hostkey")], check=True,
                   capture_output=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "key")], check=True)
    put = {"/opt/db/dropbear": dropbear, "/opt/db/hostkey": str(tmp_path / "hostkey"),
           "/root/.ssh/authorized_keys": str(tmp_path / "key.pub")}
    put.update({f"/opt/db/{os.path.basename(p)}": p for p in libs})
    for dest, src in put.items():
        with open(src, "rb") as f:
            r = api.run(web, ["sh", "-c", f"mkdir -p {os.path.dirname(dest)} && cat > {dest}"], stdin=f.read(),
                        user="root")
        assert r.exit_code == 0, (dest, r)
    r = api.run(web, ["sh", "-c", "chmod 755 /opt/db/dropbear && chmod 700 /root/.ssh && "
                      "chmod 600 /root/.ssh/authorized_keys && LD_LIBRARY_PATH=/opt/db /opt/db/dropbear "
                      "-r /opt/db/hostkey -p 2222 -s -E 2>/tmp/dropbear.log; "
                      "for i in $(seq 100); do grep -qi ':08AE 00000000:0000 0A' /proc/net/tcp && exit 0; "
                      "sleep 0.1; done; cat /tmp/dropbear.log; exit 1"], user="root")
    assert r.exit_code == 0, r
    env = dict(os.environ, SPACE_URL=daemon.url, SPACE_API_KEY=daemon.api_key)
    p = subprocess.run(["ssh", "-F", "/dev/null", "-i", str(tmp_path / "key"), "-o", "BatchMode=yes",
                        "-o", "StrictHostKeyChecking=no", "-o", f"UserKnownHostsFile={tmp_path / 'known'}",
                        "-o", f"ProxyCommand={space.SPACECTL} port-forward --stdio {web} 2222",
                        "root@sandbox", "echo ssh-$((6*7)) from $(hostname)"],
                       env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p
    assert p.stdout.startswith("ssh-42 from "), p.stdout


def test_a_connection_to_a_deleted_sandbox_ends(daemon, api):
    """A client that keeps a connection open after its sandbox is deleted holds nothing for
    long: the guest's side stops answering, keepalive ends it (its socket kept the netns)."""
    rec = api.new_sandbox("base", timeout_s=600)
    sb_id = rec["id"]
    try:
        start_servers(api, sb_id)
        t = token(api, sb_id)
        p = Port(daemon, sb_id)
        c = p.conn(timeout=120)
        r, _ = p.request("GET", "/echo", headers={"X-Space-Token": t["token"]}, conn=c)
        assert r.status == 200
    finally:
        api.remove_sandbox(sb_id)
    started = time.monotonic()
    c.sock.settimeout(120)
    assert c.sock.recv(1) == b""  # closed by the daemon, not left open
    assert time.monotonic() - started < 90
    c.close()
