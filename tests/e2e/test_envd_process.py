"""envd's process.Process (Connect protocol, JSON codec) as the E2B SDK speaks it, over our
sessions: Start's start/data/end events, stdin, signals, List, Connect to a running process,
a PTY with Update, errors (not_found, unauthenticated), and a process that lives through a
pause and a resume. Spoken over http.client with the SDK's headers and envelopes."""

import base64
import http.client
import json
import struct
import time

import pytest

import space

ENVD_PORT = "49983"
TIMEOUT = 120


def b64(s):
    return base64.b64encode(s if isinstance(s, bytes) else s.encode()).decode()


def unb64(s):
    return base64.b64decode(s)


class Envd:
    """One sandbox's envd, reached on the data plane by E2b-Sandbox-Id + X-Access-Token."""

    def __init__(self, daemon, sb_id, token):
        self.host, self.port = space.split_url(daemon.data_url)
        self.sb_id, self.token = sb_id, token

    def headers(self, content_type, token=..., user=None):
        h = {"Content-Type": content_type, "Connect-Protocol-Version": "1",
             "E2b-Sandbox-Id": self.sb_id, "E2b-Sandbox-Port": ENVD_PORT}
        token = self.token if token is ... else token
        if token is not None:
            h["X-Access-Token"] = token
        if user is not None:
            h["Authorization"] = "Basic " + b64(user + ":")
        return h

    def call(self, method, body, token=..., expect=200):
        """A unary call: (status, JSON reply)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=TIMEOUT)
        try:
            conn.request("POST", f"/process.Process/{method}", json.dumps(body).encode(),
                         self.headers("application/json", token))
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        assert resp.status == expect, (method, resp.status, data)
        assert resp.getheader("Content-Type", "").startswith("application/json"), resp.getheaders()
        return json.loads(data)

    def stream(self, method, body, token=..., user=None):
        return Stream(self, method, body, token, user)


class Stream:
    """A server stream: messages one by one, then the end envelope's JSON in .end."""

    def __init__(self, envd, method, body, token, user):
        self.conn = http.client.HTTPConnection(envd.host, envd.port, timeout=TIMEOUT)
        msg = json.dumps(body).encode()
        h = envd.headers("application/connect+json", token, user)
        h["Connect-Timeout-Ms"] = "600000"
        h["Keepalive-Ping-Interval"] = "50"
        self.conn.request("POST", f"/process.Process/{method}", struct.pack(">BI", 0, len(msg)) + msg, h)
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200, (self.resp.status, self.resp.read())
        assert self.resp.getheader("Content-Type") == "application/connect+json"
        self.end = None

    def _exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.resp.read(n - len(buf))
            assert chunk, f"stream cut after {len(buf)} of {n} bytes (no end envelope)"
            buf += chunk
        return buf

    def next(self):
        """The next message (keepalives skipped), or None once the end envelope came."""
        while self.end is None:
            flags, n = struct.unpack(">BI", self._exact(5))
            msg = json.loads(self._exact(n))
            if flags & 2:
                self.end = msg
                return None
            assert flags == 0, flags
            if "keepalive" in msg.get("event", {}):
                continue
            return msg["event"]
        return None

    def start(self):
        ev = self.next()
        assert ev is not None and "start" in ev, (ev, self.end)
        assert isinstance(ev["start"]["pid"], int) and ev["start"]["pid"] > 0, ev
        return ev["start"]["pid"]

    def until_end(self):
        """Output by stream name and the end event, reading to the end envelope."""
        out, end = {"stdout": b"", "stderr": b"", "pty": b""}, None
        while (ev := self.next()) is not None:
            if "data" in ev:
                for k, v in ev["data"].items():
                    out[k] += unb64(v)
            elif "end" in ev:
                assert end is None, "two end events"
                end = ev["end"]
            else:
                raise AssertionError(f"unexpected event {ev}")
        assert self.end == {}, self.end
        return out, end

    def read_until(self, field, needle, deadline=60):
        got = b""
        limit = time.monotonic() + deadline
        while needle not in got:
            assert time.monotonic() < limit, got
            ev = self.next()
            assert ev is not None, (got, self.end)
            if "data" in ev and field in ev["data"]:
                got += unb64(ev["data"][field])
        return got

    def close(self):
        self.conn.close()


def bash(script, **extra):
    """commands.run(script) as the SDK sends it."""
    return dict({"process": {"cmd": "/bin/bash", "args": ["-l", "-c", script]}, "stdin": False}, **extra)


def sel(pid=None, tag=None):
    return {"process": {"pid": pid} if tag is None else {"tag": tag}}


# ---- a sandbox with an envd token ----

def create_e2b(daemon, timeout=3600):
    resp = space.http_request(daemon.url, "POST", "/v2/sandboxes",
                              {"templateID": "base", "timeout": timeout},
                              headers={"X-API-KEY": daemon.api_key}, timeout=space.CREATE_TIMEOUT)
    assert resp.status == 201, resp
    rec = resp.json
    daemon.sandbox_ids.add(rec["sandboxID"])
    assert rec.get("envdAccessToken"), rec
    return rec


@pytest.fixture(scope="module")
def e2b_sb(daemon):
    rec = create_e2b(daemon)
    yield rec
    space.http_request(daemon.url, "DELETE", f"/sandboxes/{rec['sandboxID']}",
                       headers={"X-API-KEY": daemon.api_key})


@pytest.fixture
def envd(daemon, e2b_sb):
    return Envd(daemon, e2b_sb["sandboxID"], e2b_sb["envdAccessToken"])


# ---- tests ----

def test_run_reports_start_output_and_exit_status(envd):
    s = envd.stream("Start", bash("echo hi; echo err >&2; exit 3"))
    pid = s.start()
    out, end = s.until_end()
    assert out["stdout"] == b"hi\n" and out["stderr"] == b"err\n", out
    assert end == {"exitCode": 3, "exited": True, "status": "exit status 3", "error": "exit status 3"}, end
    # An ended process is no longer listed nor found.
    assert pid not in [p["pid"] for p in envd.call("List", {}).get("processes", [])]


def test_user_env_and_cwd(envd):
    body = bash('echo "$(id -un) $FOO $(pwd)"')
    body["process"].update(envs={"FOO": "bar"}, cwd="/tmp")
    s = envd.stream("Start", body, user="root")
    s.start()
    out, end = s.until_end()
    assert out["stdout"] == b"root bar /tmp\n" and end["exitCode"] == 0, (out, end)
    s = envd.stream("Start", bash("id -un"))  # no Authorization: the template's user
    s.start()
    out, end = s.until_end()
    assert out["stdout"] == b"user\n", out


def test_stdin_then_close(envd):
    s = envd.stream("Start", bash("cat", stdin=True))
    pid = s.start()
    assert envd.call("SendInput", dict(sel(pid), input={"stdin": b64("hello\n")})) == {}
    assert s.read_until("stdout", b"hello\n") == b"hello\n"
    assert envd.call("CloseStdin", sel(pid)) == {}
    out, end = s.until_end()
    assert end["exitCode"] == 0 and end["exited"] is True, end


def test_without_stdin_input_is_refused(envd):
    s = envd.stream("Start", bash("sleep 30"))
    pid = s.start()
    err = envd.call("SendInput", dict(sel(pid), input={"stdin": b64("x")}), expect=400)
    assert err["code"] == "failed_precondition", err
    assert envd.call("SendSignal", dict(sel(pid), signal="SIGNAL_SIGKILL")) == {}
    s.until_end()


def test_sigkill_ends_with_envd_status(envd):
    s = envd.stream("Start", bash("sleep 600"))
    pid = s.start()
    assert envd.call("SendSignal", dict(sel(pid), signal="SIGNAL_SIGKILL")) == {}
    _, end = s.until_end()
    assert end["exitCode"] == -1 and end["status"] == "signal: killed" and not end.get("exited"), end
    assert end["error"] == "signal: killed", end


def test_list_connect_by_pid_and_tag_after_the_client_left(envd):
    s = envd.stream("Start", bash("for i in $(seq 1 600); do echo tick $i; sleep 0.2; done",
                                  tag="ticker"))
    pid = s.start()
    s.read_until("stdout", b"tick 1\n")
    s.close()  # the client goes away: the process runs on
    procs = envd.call("List", {})["processes"]
    mine = [p for p in procs if p["pid"] == pid]
    assert len(mine) == 1, procs
    assert mine[0]["tag"] == "ticker", mine
    assert mine[0]["config"]["cmd"] == "/bin/bash", mine
    assert mine[0]["config"]["args"][:2] == ["-l", "-c"], mine
    c = envd.stream("Connect", sel(pid))
    assert c.start() == pid
    c.read_until("stdout", b"tick")  # output from now on
    c2 = envd.stream("Connect", sel(tag="ticker"))
    assert c2.start() == pid
    c2.read_until("stdout", b"tick")
    assert envd.call("SendSignal", dict(sel(tag="ticker"), signal="SIGNAL_SIGTERM")) == {}
    for st in (c, c2):
        _, end = st.until_end()
        assert end["status"] == "signal: terminated" and end["exitCode"] == -1, end


def test_pty_update_resizes(envd):
    body = {"process": {"cmd": "/bin/bash", "args": ["-c", "stty size; read x; stty size"],
                        "envs": {"TERM": "xterm-256color"}},
            "pty": {"size": {"cols": 100, "rows": 30}}}
    s = envd.stream("Start", body)
    pid = s.start()
    assert b"30 100" in s.read_until("pty", b"30 100")
    assert envd.call("Update", dict(sel(pid), pty={"size": {"cols": 120, "rows": 40}})) == {}
    assert envd.call("SendInput", dict(sel(pid), input={"pty": b64("go\n")})) == {}
    out, end = s.until_end()
    assert b"40 120" in out["pty"], out
    assert out["stdout"] == b"" and end["exitCode"] == 0, (out, end)


def test_unknown_process_is_not_found(envd):
    for method, body in (("SendSignal", dict(sel(999999), signal="SIGNAL_SIGKILL")),
                         ("SendInput", dict(sel(999999), input={"stdin": ""})),
                         ("CloseStdin", sel(999999)),
                         ("Update", dict(sel(999999), pty={"size": {"cols": 1, "rows": 1}})),
                         ("SendSignal", dict(sel(tag="nope"), signal="SIGNAL_SIGKILL"))):
        err = envd.call(method, body, expect=404)
        assert err["code"] == "not_found", (method, err)
    assert "999999" in envd.call("CloseStdin", sel(999999), expect=404)["message"]
    s = envd.stream("Connect", sel(999999))
    assert s.next() is None
    assert s.end["error"]["code"] == "not_found", s.end


def test_bad_requests(envd):
    err = envd.call("SendSignal", {"process": {}}, expect=400)
    assert err["code"] == "invalid_argument", err
    s = envd.stream("Start", {"process": {"cmd": ""}})
    assert s.next() is None and s.end["error"]["code"] == "invalid_argument", s.end
    s = envd.stream("StreamInput", {})
    assert s.next() is None and s.end["error"]["code"] == "unimplemented", s.end


def test_token_is_required(envd):
    err = envd.call("List", {}, token=None, expect=401)
    assert err["code"] == "unauthenticated", err
    err = envd.call("List", {}, token="0" * 64, expect=401)
    assert err["code"] == "unauthenticated", err
    s = envd.stream("Start", bash("true"), token="x")
    assert s.next() is None and s.end["error"]["code"] == "unauthenticated", s.end


def test_output_nobody_reads_does_not_stop_the_process(envd):
    """envd drops output no client takes; a detached chatty process must not block on it."""
    s = envd.stream("Start", bash("head -c 24000000 /dev/zero | tr '\\0' x; echo; sleep 600"))
    pid = s.start()
    s.close()
    deadline = time.monotonic() + 180
    while True:
        # Blocked on a full pipe, `head` would still be there; done, only the sleep is left.
        check = envd.stream("Start", bash(f"pgrep -P {pid} -x head || echo gone"))
        check.start()
        out, _ = check.until_end()
        if out["stdout"] == b"gone\n":
            break
        assert time.monotonic() < deadline, "the process stayed blocked on output nobody read"
        time.sleep(2)
    assert envd.call("SendSignal", dict(sel(pid), signal="SIGNAL_SIGKILL")) == {}


def test_process_survives_pause_and_connect(daemon):
    rec = create_e2b(daemon)
    sb_id = rec["sandboxID"]
    key = {"X-API-KEY": daemon.api_key}
    try:
        envd = Envd(daemon, sb_id, rec["envdAccessToken"])
        s = envd.stream("Start", bash("i=0; while true; do i=$((i+1)); echo n $i; sleep 0.3; done"))
        pid = s.start()
        s.read_until("stdout", b"n 2\n")
        s.close()
        resp = space.http_request(daemon.url, "POST", f"/sandboxes/{sb_id}/pause", headers=key,
                                  timeout=space.CREATE_TIMEOUT)
        assert resp.status == 204, resp
        resp = space.http_request(daemon.url, "POST", f"/v2/sandboxes/{sb_id}/connect",
                                  {"timeout": 600}, headers=key, timeout=space.CREATE_TIMEOUT)
        assert resp.status in (200, 201), resp
        envd = Envd(daemon, sb_id, resp.json.get("envdAccessToken") or rec["envdAccessToken"])
        deadline = time.monotonic() + 60
        while True:  # the connect may answer before the sandbox runs again
            procs = [p["pid"] for p in envd_list(envd)]
            if pid in procs or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert pid in procs, procs
        c = envd.stream("Connect", sel(pid))
        assert c.start() == pid
        c.read_until("stdout", b"n ")
        assert envd.call("SendSignal", dict(sel(pid), signal="SIGNAL_SIGKILL")) == {}
        _, end = c.until_end()
        assert end["status"] == "signal: killed", end
    finally:
        space.http_request(daemon.url, "DELETE", f"/sandboxes/{sb_id}", headers=key)


def envd_list(envd):
    conn = http.client.HTTPConnection(envd.host, envd.port, timeout=TIMEOUT)
    try:
        conn.request("POST", "/process.Process/List", b"{}", envd.headers("application/json"))
        resp = conn.getresponse()
        data = resp.read()
    finally:
        conn.close()
    return json.loads(data).get("processes", []) if resp.status == 200 else []
