"""envd's filesystem as the E2B SDK speaks it (docs/design/e2b.md): filesystem.Filesystem over
Connect's JSON codec (unary calls and the WatchDir server stream), GET /health, GET /files and
POST /files with multipart/form-data, on the data plane, against a real `base` sandbox created
through E2B's control plane (POST /v2/sandboxes, its envdAccessToken)."""

import base64
import hashlib
import http.client
import json
import os
import re
import struct
import threading
import time
import urllib.parse

import pytest

import space

ENVD_PORT = "49983"


def conn(daemon, timeout=120):
    host, port = space.split_url(daemon.data_url)
    return http.client.HTTPConnection(host, port, timeout=timeout)


class Envd:
    def __init__(self, daemon, sb_id, token):
        self.daemon, self.sb_id, self.token = daemon, sb_id, token

    def headers(self, user=None, token=..., extra=None):
        h = {"E2b-Sandbox-Id": self.sb_id, "E2b-Sandbox-Port": ENVD_PORT}
        tok = self.token if token is ... else token
        if tok is not None:
            h["X-Access-Token"] = tok
        if user:
            h["Authorization"] = "Basic " + base64.b64encode(f"{user}:".encode()).decode()
        h.update(extra or {})
        return h

    def rpc(self, method, msg, user=None, token=...):
        """A unary Connect call: (status, parsed JSON)."""
        c = conn(self.daemon)
        h = self.headers(user, token, {"Content-Type": "application/json", "Connect-Protocol-Version": "1"})
        c.request("POST", f"/filesystem.Filesystem/{method}", json.dumps(msg).encode(), h)
        r = c.getresponse()
        body = r.read()
        c.close()
        assert r.getheader("Content-Type", "").startswith("application/json"), (r.status, body)
        return r.status, json.loads(body)

    def ok(self, method, msg, user=None):
        st, j = self.rpc(method, msg, user)
        assert st == 200, (method, msg, st, j)
        return j

    def http(self, method, route, body=None, headers=None, token=..., **query):
        c = conn(self.daemon, timeout=600)
        qs = urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        c.request(method, route + (f"?{qs}" if qs else ""), body, self.headers(token=token, extra=headers))
        r = c.getresponse()
        data = r.read()
        c.close()
        return r, data

    def upload(self, files, path=None, user=None):
        """files: [(filename, bytes)], as the SDK's FormData sends them."""
        boundary = "----formdata-undici-0" + os.urandom(8).hex()
        parts = []
        for name, data in files:
            parts.append(f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
                         f"filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n".encode()
                         + data + b"\r\n")
        body = b"".join(parts) + f"--{boundary}--\r\n".encode()
        return self.http("POST", "/files", body, {"Content-Type": f"multipart/form-data; boundary={boundary}"},
                         path=path, username=user)


def e2b_sandbox(daemon):
    resp = space.http_request(daemon.url, "POST", "/v2/sandboxes",
                              {"templateID": "base", "timeout": 1800},
                              {"X-API-KEY": daemon.api_key}, timeout=600)
    assert resp.status == 201, resp
    rec = resp.json
    daemon.sandbox_ids.add(rec["sandboxID"])
    assert rec.get("envdAccessToken")
    return Envd(daemon, rec["sandboxID"], rec["envdAccessToken"])


def e2b_kill(envd):
    resp = space.http_request(envd.daemon.url, "DELETE", f"/sandboxes/{envd.sb_id}", None,
                              {"X-API-KEY": envd.daemon.api_key}, timeout=600)
    assert resp.status in (204, 404), resp


@pytest.fixture(scope="module")
def envd(daemon):
    e = e2b_sandbox(daemon)
    yield e
    e2b_kill(e)


def test_health(envd):
    r, _ = envd.http("GET", "/health", token=None)
    assert r.status == 204
    c = conn(envd.daemon)
    c.request("GET", "/health", headers={"E2b-Sandbox-Id": "sb-0000000000000000"})
    r = c.getresponse()
    body = r.read()
    assert r.status == 502 and json.loads(body)["code"] == 502


def test_bad_token(envd):
    st, j = envd.rpc("Stat", {"path": "/"}, token="0" * 64)
    assert st == 401 and j["code"] == "unauthenticated"
    r, body = envd.http("GET", "/files", token="nope", path="/etc/hostname")
    assert r.status == 401 and json.loads(body)["code"] == 401


def test_write_read_stat(envd):
    data = os.urandom(3 * 1024 * 1024 + 17)
    r, body = envd.upload([("ignored", data)], path="/tmp/e2b/big.bin")
    assert r.status == 200, body
    assert json.loads(body) == [{"name": "big.bin", "type": "file", "path": "/tmp/e2b/big.bin"}]
    r, got = envd.http("GET", "/files", path="/tmp/e2b/big.bin")
    assert r.status == 200 and r.getheader("Content-Type") == "application/octet-stream"
    assert hashlib.sha256(got).hexdigest() == hashlib.sha256(data).hexdigest()
    e = envd.ok("Stat", {"path": "/tmp/e2b/big.bin"})["entry"]
    assert e["name"] == "big.bin" and e["type"] == "FILE_TYPE_FILE" and e["path"] == "/tmp/e2b/big.bin"
    assert e["size"] == str(len(data)) and e["permissions"].startswith("-rw")
    assert e["modifiedTime"].endswith("Z") and "T" in e["modifiedTime"]
    # relative paths are under the user's home
    r, body = envd.upload([("ignored", b"home\n")], path="rel.txt", user="user")
    assert r.status == 200 and json.loads(body)[0]["path"] == "/home/user/rel.txt"
    assert envd.ok("Stat", {"path": "rel.txt"}, user="user")["entry"]["owner"] == "user"


def test_write_many(envd):
    files = [(f"/tmp/many/d{i}/f{i}.txt", f"file {i}\n".encode() * (i + 1)) for i in range(4)]
    r, body = envd.upload(files)
    assert r.status == 200, body
    assert [x["path"] for x in json.loads(body)] == [f for f, _ in files]
    for f, d in files:
        r, got = envd.http("GET", "/files", path=f)
        assert r.status == 200 and got == d


def test_files_errors(envd):
    r, body = envd.http("GET", "/files", path="/no/such/file")
    assert r.status == 404 and json.loads(body)["code"] == 404
    r, body = envd.http("GET", "/files", path="/tmp")
    assert r.status == 400
    # malformed multipart, a missing boundary, over-long part headers
    r, body = envd.http("POST", "/files", b"--x\r\ngarbage", {"Content-Type": "multipart/form-data; boundary=x"},
                        path="/tmp/bad")
    assert r.status == 400 and json.loads(body)["code"] == 400
    r, body = envd.http("POST", "/files", b"data", {"Content-Type": "multipart/form-data"}, path="/tmp/bad")
    assert r.status == 400
    long = b"--x\r\nX-Long: " + b"a" * 20000 + b"\r\n\r\nv\r\n--x--\r\n"
    r, body = envd.http("POST", "/files", long, {"Content-Type": "multipart/form-data; boundary=x"}, path="/tmp/bad")
    assert r.status == 400
    # nothing was written by the failed uploads
    st, j = envd.rpc("Stat", {"path": "/tmp/bad"})
    assert st == 404 and j["code"] == "not_found"


def test_dirs(envd):
    assert envd.ok("MakeDir", {"path": "/tmp/tree/a/b"})["entry"]["type"] == "FILE_TYPE_DIRECTORY"
    st, j = envd.rpc("MakeDir", {"path": "/tmp/tree/a/b"})
    assert st == 409 and j["code"] == "already_exists"
    envd.upload([("/tmp/tree/a/b/c.txt", b"c"), ("/tmp/tree/top.txt", b"t")])
    names = [e["name"] for e in envd.ok("ListDir", {"path": "/tmp/tree"})["entries"]]
    assert names == ["a", "top.txt"]
    deep = envd.ok("ListDir", {"path": "/tmp/tree", "depth": 3})["entries"]
    assert {e["path"] for e in deep} == {"/tmp/tree/a", "/tmp/tree/a/b", "/tmp/tree/a/b/c.txt", "/tmp/tree/top.txt"}
    moved = envd.ok("Move", {"source": "/tmp/tree/top.txt", "destination": "/tmp/tree/a/moved.txt"})["entry"]
    assert moved["path"] == "/tmp/tree/a/moved.txt" and moved["type"] == "FILE_TYPE_FILE"
    assert envd.ok("Remove", {"path": "/tmp/tree"}) == {}
    st, j = envd.rpc("Stat", {"path": "/tmp/tree"})
    assert st == 404 and j["code"] == "not_found"
    st, j = envd.rpc("ListDir", {"path": "/tmp/none"})
    assert st == 404 and j["code"] == "not_found"


def read_envelopes(resp, out, stop):
    try:
        while not stop.is_set():
            hdr = resp.read(5)
            if len(hdr) < 5:
                return
            flags, n = struct.unpack(">BI", hdr)
            out.append((flags, json.loads(resp.read(n))))
            if flags & 2:
                return
    except Exception:  # noqa: BLE001 -- the connection closed under us at the end
        return


def test_watch_dir(envd):
    envd.ok("MakeDir", {"path": "/tmp/watched"})
    c = conn(envd.daemon)
    msg = json.dumps({"path": "/tmp/watched", "recursive": False}).encode()
    h = envd.headers(extra={"Content-Type": "application/connect+json", "Connect-Protocol-Version": "1",
                            "Connect-Timeout-Ms": "60000"})
    c.request("POST", "/filesystem.Filesystem/WatchDir", struct.pack(">BI", 0, len(msg)) + msg, h)
    resp = c.getresponse()
    assert resp.status == 200 and resp.getheader("Content-Type") == "application/connect+json"
    events, stop = [], threading.Event()
    t = threading.Thread(target=read_envelopes, args=(resp, events, stop), daemon=True)
    t.start()
    deadline = time.time() + 60
    while not events and time.time() < deadline:
        time.sleep(0.1)
    assert events and events[0] == (0, {"start": {}})
    r, _ = envd.upload([("x", b"hello")], path="/tmp/watched/new.txt")
    assert r.status == 200
    while time.time() < deadline and not any(
            e.get("filesystem", {}).get("name") == "new.txt" for _, e in events):
        time.sleep(0.1)
    fs = [e["filesystem"] for _, e in events if "filesystem" in e]
    assert any(e["name"] == "new.txt" and e["type"] in ("EVENT_TYPE_CREATE", "EVENT_TYPE_RENAME") for e in fs), fs
    stop.set()
    c.close()
    # a missing directory: the stream's end carries not_found
    c = conn(envd.daemon)
    msg = json.dumps({"path": "/tmp/not-there"}).encode()
    c.request("POST", "/filesystem.Filesystem/WatchDir", struct.pack(">BI", 0, len(msg)) + msg, h)
    resp = c.getresponse()
    out = []
    read_envelopes(resp, out, threading.Event())
    assert out and out[-1][0] & 2 and out[-1][1]["error"]["code"] == "not_found", out


def watch_dir_stream(envd, path, extra=None):
    c = conn(envd.daemon)
    msg = json.dumps({"path": path}).encode()
    h = envd.headers(extra={"Content-Type": "application/connect+json", "Connect-Protocol-Version": "1",
                            **(extra or {})})
    c.request("POST", "/filesystem.Filesystem/WatchDir", struct.pack(">BI", 0, len(msg)) + msg, h)
    resp = c.getresponse()
    assert resp.status == 200
    events, stop = [], threading.Event()
    threading.Thread(target=read_envelopes, args=(resp, events, stop), daemon=True).start()
    return c, events, stop


def test_watch_dir_keepalive(envd):
    envd.ok("MakeDir", {"path": "/tmp/idle"})
    c, events, stop = watch_dir_stream(envd, "/tmp/idle", {"Keepalive-Ping-Interval": "1"})
    deadline = time.time() + 30
    while time.time() < deadline and not any(e == {"keepalive": {}} for _, e in events):
        time.sleep(0.1)
    assert events[0] == (0, {"start": {}}), events
    assert (0, {"keepalive": {}}) in events, events
    # an event still goes out whole between keepalives
    r, _ = envd.upload([("x", b"k")], path="/tmp/idle/k.txt")
    assert r.status == 200
    while time.time() < deadline and not any(e.get("filesystem", {}).get("name") == "k.txt" for _, e in events):
        time.sleep(0.1)
    assert any(e.get("filesystem", {}).get("name") == "k.txt" for _, e in events), events
    stop.set()
    c.close()


def poll_until(envd, wid, names, timeout=60):
    seen, deadline = [], time.time() + timeout
    while time.time() < deadline and not names <= {e["name"] for e in seen}:
        seen += envd.ok("GetWatcherEvents", {"watcherId": wid}).get("events", [])
        time.sleep(0.2)
    return seen


def test_polled_watcher(envd):
    envd.ok("MakeDir", {"path": "/tmp/polled"})
    wid = envd.ok("CreateWatcher", {"path": "/tmp/polled", "recursive": False})["watcherId"]
    assert re.fullmatch(r"[0-9a-f]{16}", wid), wid
    for name in ("one.txt", "two.txt"):
        r, _ = envd.upload([("x", name.encode())], path=f"/tmp/polled/{name}")
        assert r.status == 200
    seen = poll_until(envd, wid, {"one.txt", "two.txt"})
    assert {"one.txt", "two.txt"} <= {e["name"] for e in seen}, seen
    assert all(e["type"].startswith("EVENT_TYPE_") for e in seen), seen
    time.sleep(1)
    envd.ok("GetWatcherEvents", {"watcherId": wid})  # whatever trailed
    assert envd.ok("GetWatcherEvents", {"watcherId": wid}).get("events", []) == []
    assert envd.ok("RemoveWatcher", {"watcherId": wid}) == {}
    for method in ("GetWatcherEvents", "RemoveWatcher"):
        st, j = envd.rpc(method, {"watcherId": wid})
        assert st == 404 and j["code"] == "not_found", (method, st, j)
    # unknown ids, bad requests, a missing directory
    st, j = envd.rpc("GetWatcherEvents", {"watcherId": "0123456789abcdef"})
    assert st == 404 and j["code"] == "not_found"
    st, j = envd.rpc("GetWatcherEvents", {"watcherId": 7})
    assert st == 400 and j["code"] == "invalid_argument"
    st, j = envd.rpc("CreateWatcher", {"path": "/tmp/not-there"})
    assert st == 404 and j["code"] == "not_found", j
    r, _ = envd.upload([("x", b"f")], path="/tmp/a-file")
    st, j = envd.rpc("CreateWatcher", {"path": "/tmp/a-file"})
    assert st == 400 and j["code"] == "invalid_argument", j


def test_polled_watcher_ends(envd):
    """The watched directory removed: its last events once, then not_found saying why."""
    envd.ok("MakeDir", {"path": "/tmp/doomed"})
    wid = envd.ok("CreateWatcher", {"path": "/tmp/doomed"})["watcherId"]
    envd.upload([("x", b"d")], path="/tmp/doomed/f.txt")
    assert envd.ok("Remove", {"path": "/tmp/doomed"}) == {}
    seen, deadline = [], time.time() + 60
    while time.time() < deadline:
        st, j = envd.rpc("GetWatcherEvents", {"watcherId": wid})
        if st != 200:
            break
        seen += j.get("events", [])
        time.sleep(0.2)
    assert st == 404 and j["code"] == "not_found" and "ended" in j["message"], (st, j)
    assert "f.txt" in {e["name"] for e in seen}, seen
    st, j = envd.rpc("RemoveWatcher", {"watcherId": wid})
    assert st == 404


def test_polled_watcher_bounds(envd):
    """Watcher ids are bound to their sandbox; a sandbox has at most 16; deleting a sandbox
    frees its watchers (the sanitizer daemon's teardown checks for leaks)."""
    other = e2b_sandbox(envd.daemon)
    try:
        envd.ok("MakeDir", {"path": "/tmp/bounds"})
        mine = envd.ok("CreateWatcher", {"path": "/tmp/bounds"})["watcherId"]
        theirs = other.ok("CreateWatcher", {"path": "/tmp"})["watcherId"]
        for method in ("GetWatcherEvents", "RemoveWatcher"):
            st, j = other.rpc(method, {"watcherId": mine})
            assert st == 404 and j["code"] == "not_found", (method, j)
            st, j = envd.rpc(method, {"watcherId": theirs})
            assert st == 404 and j["code"] == "not_found", (method, j)
        # the other sandbox's token naming mine is refused before any lookup
        st, j = envd.rpc("GetWatcherEvents", {"watcherId": mine}, token=other.token)
        assert st == 401 and j["code"] == "unauthenticated", (st, j)
        ids = [mine] + [envd.ok("CreateWatcher", {"path": "/tmp/bounds"})["watcherId"] for _ in range(15)]
        st, j = envd.rpc("CreateWatcher", {"path": "/tmp/bounds"})
        assert st == 429 and j["code"] == "resource_exhausted", (st, j)
        for wid in ids:
            assert envd.ok("RemoveWatcher", {"watcherId": wid}) == {}
        # one more watcher left running in the other sandbox: freed with it
        other.ok("CreateWatcher", {"path": "/tmp", "recursive": True})
    finally:
        e2b_kill(other)
    st, _ = other.rpc("GetWatcherEvents", {"watcherId": theirs})
    assert st in (401, 404, 502, 503), st
