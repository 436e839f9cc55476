"""Security: the control plane opens only with the API key, the data plane only with the token
of that very session (not expired, not replaced, never the API key), and bodies are bounded."""

import json
import os
import re
import resource
import secrets
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

import space


@pytest.fixture(scope="module")
def two_sessions(api, sb):
    a = api.create_session(sb["id"], ["sleep", "60"])
    b = api.create_session(sb["id"], ["echo", "b"])
    return a, b


def control_routes(sb_id, op_id, ss_id):
    return [
        ("GET", "/v1/info", None),
        ("GET", "/v1/templates", None),
        ("GET", "/v1/templates/minimal", None),
        ("GET", "/v1/sandboxes", None),
        ("POST", "/v1/sandboxes", {"template": "minimal"}),
        ("GET", f"/v1/sandboxes/{sb_id}", None),
        ("GET", f"/v1/sandboxes/{sb_id}/logs", None),
        ("GET", f"/v1/operations/{op_id}", None),
        ("POST", f"/v1/sandboxes/{sb_id}/sessions", {"argv": ["true"]}),
        ("GET", f"/v1/sandboxes/{sb_id}/sessions", None),
        ("GET", f"/v1/sandboxes/{sb_id}/sessions/{ss_id}", None),
        ("POST", f"/v1/sandboxes/{sb_id}/sessions/{ss_id}/token", {}),
        ("DELETE", f"/v1/sandboxes/{sb_id}", None),
    ]


def test_control_plane_rejects_missing_and_wrong_keys(daemon, api, sb, two_sessions):
    a, _ = two_sessions
    before = {s["id"] for s in api.sandboxes()}
    op_id = api.sandboxes()[0]["id"].replace("sb-", "op-")
    bad_keys = {
        "missing": None,
        "wrong": secrets.token_hex(16),
        "prefix": daemon.api_key[:-1],
        "longer": daemon.api_key + "0",
        "empty": "",
        "session token": a.token,
    }
    for method, path, body in control_routes(sb["id"], op_id, a.id):
        for why, key in bad_keys.items():
            err = api.expect_error(method, path, 401, body, key=key)
            assert err["message"], (why, method, path)
        err = api.expect_error(method, path, 401, body, key=None,
                               headers={"Authorization": f"Basic {daemon.api_key}"})
    # Nothing happened on the way: no new sandbox, the shared one still runs.
    assert {s["id"] for s in api.sandboxes()} == before
    assert api.sandbox(sb["id"])["state"] == "running"


def test_token_is_not_exposed_by_the_control_plane(api, sb, two_sessions):
    a, b = two_sessions
    listed = json.dumps(api.sessions(sb["id"])) + json.dumps(api.session(sb["id"], a.id))
    assert a.token not in listed and b.token not in listed


def data_routes(s):
    return [
        ("POST", "/attach", None),
        ("GET", "/attach", None),
        ("POST", "/stdin", b"x"),
        ("POST", "/stdin/close", b""),
        ("POST", "/signal", {"signal": "SIGTERM"}),
        ("GET", "", None),
    ]


def assert_401(s, method, path, body, headers):
    resp = space.http_request(s.url, method, f"/v1/sessions/{s.id}{path}", body, headers)
    assert resp.status == 401, f"{method} {path} with {headers}: {resp!r}"
    space.check_error(resp)


def test_data_plane_rejects_api_key_wrong_and_foreign_tokens(daemon, api, two_sessions):
    a, b = two_sessions
    cases = {
        "no auth": {},
        "api key": space.bearer(daemon.api_key),
        "wrong token": space.bearer(secrets.token_hex(32)),
        "other session's token": space.bearer(b.token),
        "token as basic": {"Authorization": f"Basic {a.token}"},
    }
    for why, headers in cases.items():
        for method, path, body in data_routes(a):
            assert_401(a, method, path, body, headers)
    # ?token= (EventSource) is checked the same way.
    for tok in (daemon.api_key, b.token, secrets.token_hex(32)):
        resp = space.http_request(a.url, "GET", f"/v1/sessions/{a.id}/attach?token={tok}")
        assert resp.status == 401, resp
    # None of that started or touched the process.
    assert a.get()["state"] == "created"
    # And the right token still works.
    job = a.start(timeout=30)
    a.wait_running()
    a.signal("SIGKILL")
    assert job.wait().signal == 9


def test_expired_token_is_rejected_and_a_new_one_works(api, sb):
    s = api.create_session(sb["id"], ["echo", "fresh"], token_ttl_s=1)
    exp = space.parse_time(s.expires_at) - space.parse_time(s.rec["created_at"])
    assert 0 < exp <= 3, s.expires_at
    time.sleep(2.5)
    st = s.attach()
    assert st.status == 401, "an expired token opened the session"
    assert s.get()["state"] == "created"
    old = s.token
    s.new_token(ttl=60)
    assert s.token != old
    r = s.collect()
    assert bytes(r.stdout) == b"fresh\n" and r.exit_code == 0


def test_new_token_replaces_the_old_one(api, sb):
    s = api.create_session(sb["id"], ["echo", "x"])
    old = s.token
    s.new_token()
    assert s.token != old
    assert_401(s, "GET", "", None, space.bearer(old))
    assert s.attach(token=old).status == 401
    assert bytes(s.collect().stdout) == b"x\n"


def test_control_body_over_1mib_is_413(api, sb):
    """Over the limit, libevent refuses from Content-Length before reading the body (its own
    413 page: there is no hook to send ours before the body, docs/design/http.md)."""
    big = {"template": "minimal", "metadata": {"k": "x" * 4000}, "pad": "y" * (1 << 20)}
    resp = space.http_request(api.url, "POST", "/v1/sandboxes", big, space.bearer(api.key))
    assert resp.status == 413, resp
    resp = space.http_request(api.url, "POST", f"/v1/sandboxes/{sb['id']}/sessions",
                              {"argv": ["echo", "z" * (1 << 20) + "z"]}, space.bearer(api.key))
    assert resp.status == 413, resp
    assert api.info()["version"]  # still serving


def test_stdin_over_4mib_is_413(api, sb):
    s = api.create_session(sb["id"], ["cat"], stdin=True)
    job = s.start(timeout=60)
    s.wait_running()
    resp = space.http_request(s.url, "POST", f"/v1/sessions/{s.id}/stdin",
                              b"a" * (4 * 1024 * 1024 + 1), space.bearer(s.token))
    assert resp.status == 413, resp
    s.send_stdin(b"ok", close=True)
    r = job.wait()
    assert bytes(r.stdout) == b"ok", "a rejected stdin body must not reach the process"


def test_query_token_only_on_the_stream_route(api, sb):
    """?token= is for EventSource (GET attach); anywhere else it is refused, with a message
    that says how to send the token, and it opens nothing."""
    s = api.create_session(sb["id"], ["echo", "q"])
    for method, path, body in (("GET", "", None), ("POST", "/stdin", b"x"),
                               ("POST", "/signal", {"signal": "SIGTERM"}), ("POST", "/attach", None)):
        resp = space.http_request(s.url, method, f"/v1/sessions/{s.id}{path}?token={s.token}", body)
        assert resp.status == 401, (method, path, resp)
        assert "Authorization" in space.check_error(resp)["message"]
    assert s.get()["state"] == "created"
    r = s.collect(how="query-token", method="GET")
    assert bytes(r.stdout) == b"q\n" and r.exit_code == 0


def test_ids_are_unguessable(api, sb):
    """Ids carry 64 random bits: many sessions never collide and do not count up."""
    ids = [api.create_session(sb["id"], ["true"]).id for _ in range(20)]
    assert len(set(ids)) == 20
    hexes = sorted(int(i[3:], 16) for i in ids)
    assert hexes[-1] - hexes[0] > 1 << 32


# ---- hostile and heavy clients, each against a daemon of its own ----
# These daemons have no templates and TCG chosen up front (no probe boot): only their HTTP side
# and start-up are exercised, so they cost no VM.

class BareDaemon(space.Daemon):
    """spaced without templates. key_args replaces `--api-key KEY`; nofile runs it under
    `prlimit --nofile=N:N` (soft and hard: it cannot raise it)."""

    def __init__(self, name, extra_args=(), key_args=None, nofile=None, templates_dir=None):
        self.own_tdir = templates_dir is None
        self.tdir = templates_dir or tempfile.mkdtemp(prefix="space-e2e-notmpl-")
        super().__init__(name, extra_args=["--accel", "tcg", *extra_args], templates_dir=self.tdir)
        self.key_args = key_args
        self.nofile = nofile

    def argv(self):
        a = super().argv()
        if self.key_args is not None:
            i = a.index("--api-key")
            del a[i:i + 2]
            a += self.key_args
        if self.nofile:
            lim = self.nofile if ":" in str(self.nofile) else f"{self.nofile}:{self.nofile}"
            a = ["prlimit", f"--nofile={lim}", *a]
        return a

    def cleanup(self):
        super().cleanup()
        if self.own_tdir:
            shutil.rmtree(self.tdir, ignore_errors=True)


@pytest.fixture
def bare():
    made = []

    def make(*args, **kw):
        d = BareDaemon(f"spaced-bare{len(made)}", *args, **kw)
        made.append(d)
        return d
    yield make
    for d in made:
        d.cleanup()


def cpu_seconds(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def raw_request(port, line, headers="", timeout=10):
    """(status, body) of one request on a new connection, or (None, why) if it was closed."""
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        s.sendall(f"{line} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{headers}\r\n".encode())
        raw = b""
        while chunk := s.recv(65536):
            raw += chunk
        s.close()
    except OSError as e:
        return None, str(e)
    if not raw:
        return None, "closed"
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_connection_cap_refuses_extra_clients_and_keeps_the_others(bare):
    d = bare(["--max-connections", "6", "--max-connections-per-client", "6"]).start()
    key = f"Authorization: Bearer {d.api_key}\r\n"
    held = [socket.create_connection(("127.0.0.1", d.port), timeout=10) for _ in range(6)]
    time.sleep(0.3)
    status, body = raw_request(d.port, "GET /v1/info", key)
    assert status == 429 and json.loads(body)["error"]["code"] == "at_capacity", (status, body)
    status, _ = raw_request(d.data_port, "GET /v1/sessions/ss-0000000000000000")
    assert status == 429, "the cap spans both planes"
    for s in held[:2]:
        s.sendall(f"GET /v1/info HTTP/1.1\r\nHost: x\r\n{key}\r\n".encode())
        assert s.recv(65536).startswith(b"HTTP/1.1 200"), "a connection already open is served"
    for s in held:
        s.close()
    time.sleep(0.3)
    assert d.api.info()["version"]
    assert "refusing connections over the per-daemon cap" in d.log_text()


def test_slowloris_is_cut_off_at_the_request_deadline(bare):
    d = bare(["--request-timeout", "2"]).start()
    slow = socket.create_connection(("127.0.0.1", d.port), timeout=10)
    t0 = time.monotonic()
    closed_at, served = None, 0
    for ch in "GET /v1/info HTTP/1.1\r\nHost: x\r\nX-Pad: " + "a" * 200:
        try:
            slow.sendall(ch.encode())
            slow.settimeout(0.01)
            try:
                if slow.recv(4096) == b"":
                    closed_at = time.monotonic() - t0
                    break
            except socket.timeout:
                pass
        except OSError:
            closed_at = time.monotonic() - t0
            break
        served += d.api.info()["version"] is not None
        time.sleep(0.3)
        if time.monotonic() - t0 > 10:
            break
    slow.close()
    assert closed_at is not None and 1.5 < closed_at < 5, f"slow client closed at {closed_at}"
    assert served >= 4, "a normal client is served meanwhile"


def test_body_over_the_limit_is_refused_before_it_is_read(bare):
    d = bare().start()
    s = socket.create_connection(("127.0.0.1", d.data_port), timeout=10)
    t0 = time.monotonic()
    s.sendall(b"POST /v1/sessions/ss-0000000000000000/stdin HTTP/1.1\r\nHost: x\r\n"
              b"Authorization: Bearer wrong\r\nContent-Length: 1073741824\r\n\r\n")
    head = s.recv(4096)
    assert head.startswith(b"HTTP/1.1 413") and time.monotonic() - t0 < 3, head
    s.close()
    # Nothing left behind: the daemon goes on serving.
    assert d.api.info()["version"]


def test_fd_limit_1024_daemon_does_not_spin_and_recovers(bare):
    d = bare(nofile=1024).start()
    text = d.log_text()
    m = re.search(r"fd limit (\d+): up to (\d+) connections", text)
    assert m and int(m.group(1)) == 1024, text[-2000:]
    cap = int(m.group(2))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    socks = []
    try:
        for _ in range(1100):  # past the daemon's fd limit
            socks.append(socket.create_connection(("127.0.0.1", d.port), timeout=10))
        time.sleep(1)
        pid = d.proc.pid
        c0 = cpu_seconds(pid)
        time.sleep(2)
        used = cpu_seconds(pid) - c0
        assert used < 0.3, f"spaced used {used:.2f} s of CPU in 2 s with {len(socks)} clients waiting"
        assert "pausing accepts" not in d.log_text(), "caps sized from the fd limit keep accept() off EMFILE"
    finally:
        for s in socks:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    time.sleep(1)
    assert d.api.info()["version"], "serves again once the clients are gone"
    assert cap < 1024


def test_soft_fd_limit_is_raised_to_the_hard_one(bare):
    d = bare(nofile="1024:4096").start()
    assert re.search(r"fd limit 4096: up to \d+ connections", d.log_text())
    limits = open(f"/proc/{d.proc.pid}/limits").read()
    assert re.search(r"Max open files\s+4096\s+4096", limits), limits


def test_fd_exhaustion_backs_off_accept_without_spinning(bare):
    d = bare(["--max-connections", "5000", "--max-connections-per-client", "5000"], nofile=256).start()
    socks = []
    try:
        for _ in range(400):
            socks.append(socket.create_connection(("127.0.0.1", d.port), timeout=10))
        time.sleep(1)
        c0 = cpu_seconds(d.proc.pid)
        time.sleep(2)
        used = cpu_seconds(d.proc.pid) - c0
        assert used < 0.3, f"spaced used {used:.2f} s of CPU in 2 s at EMFILE (accept loop spin)"
        assert d.log_text().count("pausing accepts") == 1, "logged once per episode"
    finally:
        for s in socks:
            s.close()
    time.sleep(1)
    assert d.api.info()["version"]
    assert "accepting connections again" in d.log_text()


def wait_up(proc, log_path, start_at, timeout=60):
    """The log written since offset start_at, once the daemon says it is up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(log_path) as f:
            f.seek(start_at)
            text = f.read()
        if "is up" in text:
            return text
        assert proc.poll() is None, f"spaced exited {proc.returncode}:\n{text[-3000:]}"
        time.sleep(0.1)
    raise AssertionError("spaced did not come up")


def test_generated_key_never_reaches_the_log(bare):
    """A generated key is written to <state>/api-key (0600) and, as stdout is no terminal, never
    printed: not at its first start, not later."""
    d = bare(key_args=[])
    for start in (1, 2):
        with open(d.log_path, "ab") as log:
            at = log.tell()
            proc = subprocess.Popen(d.argv(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        try:
            text = wait_up(proc, d.log_path, at)
            path = os.path.join(d.state_dir, "api-key")
            st = os.stat(path)
            assert st.st_mode & 0o777 == 0o600
            key = open(path).read().strip()
            assert re.fullmatch(r"e2b_[0-9a-f]{40}", key) and key not in d.log_text(), f"start {start}: the key is in the log"
            assert f"in {path}" in text
            resp = space.http_request(d.url, "GET", "/v1/info", headers=space.bearer(key))
            assert resp.status == 200
            # spacectl reads the same file.
            env = dict(os.environ, SPACE_URL=d.url, SPACE_API_KEY_FILE=path)
            env.pop("SPACE_API_KEY", None)
            r = subprocess.run([space.SPACECTL, "info"], env=env, capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
        finally:
            proc.terminate()
            proc.wait(30)


def test_api_key_file_modes(bare, tmp_path):
    key = "sk-" + secrets.token_hex(16)
    path = tmp_path / "key"
    path.write_text(key + "\n")
    for mode in (0o644, 0o640, 0o604):
        os.chmod(path, mode)
        d = bare(key_args=["--api-key-file", str(path)])
        r = subprocess.run(d.argv(), capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and "chmod 600" in r.stderr + r.stdout, (oct(mode), r.stderr)
        assert key not in r.stderr + r.stdout
    os.chmod(path, 0o600)
    d = bare(key_args=["--api-key-file", str(path)])
    d.api_key = key
    d.api.key = key
    d.start()
    assert d.api.info()["version"]
    assert key not in d.log_text()
    env = dict(os.environ, SPACE_URL=d.url, SPACE_API_KEY_FILE=str(path))
    env.pop("SPACE_API_KEY", None)
    os.chmod(path, 0o644)
    r = subprocess.run([space.SPACECTL, "info"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "chmod 600" in r.stderr, "spacectl refuses a readable key file too"


def test_template_that_does_not_match_its_digest_is_refused(bare, tmp_path):
    src = os.path.join(space.TEMPLATES_DIR, "minimal")
    tdir = tmp_path / "templates"

    def template(name, tweak):
        t = tdir / name
        t.mkdir(parents=True)
        for f in ("vmlinuz", "rootfs.ext4", "template.json", "digest"):
            try:
                os.link(os.path.join(src, f), t / f)
            except OSError:
                shutil.copy(os.path.join(src, f), t / f)
        tweak(t)

    def edited_json(t):
        body = (t / "template.json").read_text().replace('"memory_mib": 128', '"memory_mib": 4096')
        (t / "template.json").unlink()
        (t / "template.json").write_text(body)

    def symlinked_image(t):
        (t / "rootfs.ext4").unlink()
        os.symlink(os.path.join(src, "rootfs.ext4"), t / "rootfs.ext4")

    def group_writable(t):
        body = (t / "template.json").read_text()
        (t / "template.json").unlink()
        (t / "template.json").write_text(body)
        os.chmod(t / "template.json", 0o664)

    def not_roots(t):
        body = (t / "template.json").read_text()
        (t / "template.json").unlink()
        (t / "template.json").write_text(body)
        os.chown(t / "template.json", 65534, 65534)

    template("a-edited", edited_json)
    template("b-symlink", symlinked_image)
    template("c-groupw", group_writable)
    if os.geteuid() == 0:
        template("d-nobody", not_roots)
    d = bare(templates_dir=str(tdir)).start()
    assert d.api.raw("GET", "/v1/templates").json["templates"] == [], "nothing was imported"
    text = d.log_text()
    assert "a-edited not imported" in text and "do not match the digest" in text
    assert "b-symlink not imported" in text and "symbolic link" in text
    assert "c-groupw not imported" in text and "writable by group or others" in text
    if os.geteuid() == 0:
        assert "d-nobody not imported" in text and "not to root" in text
    d.stop()
    # The same files, untouched, are accepted.
    shutil.rmtree(tdir)
    template("minimal", lambda t: None)
    d2 = bare(templates_dir=str(tdir)).start()
    names = [t["name"] for t in d2.api.raw("GET", "/v1/templates").json["templates"]]
    assert names == ["minimal"]


def test_generated_key_is_shown_once_on_a_terminal(bare):
    import pty
    d = bare(key_args=[])
    shown = []
    for start in (1, 2):
        master, slave = pty.openpty()
        proc = subprocess.Popen(d.argv(), stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.DEVNULL)
        os.close(slave)
        out = b""
        deadline = time.monotonic() + 60
        try:
            while b"try:" not in out and time.monotonic() < deadline:
                try:
                    out += os.read(master, 4096)
                except OSError:
                    break
        finally:
            proc.terminate()
            proc.wait(30)
            os.close(master)
        key = open(os.path.join(d.state_dir, "api-key")).read().strip()
        shown.append(key in out.decode(errors="replace"))
    assert shown == [True, False], "the key is printed when made, on a terminal, and not again"


def test_stream_cap_per_sandbox_is_429_and_frees_on_close(bare):
    """Attached streams of one sandbox over --max-streams-per-sandbox are refused with 429;
    a closed stream gives its place back (the real daemon and a real VM)."""
    d = bare(["--max-streams-per-sandbox", "2", "--no-ready-snapshots"],
             templates_dir=space.TEMPLATES_DIR).start()
    rec = d.api.new_sandbox("minimal", timeout_s=600)
    sessions = [d.api.create_session(rec["id"], ["sleep", "60"]) for _ in range(3)]
    first, second = sessions[0].attach(), sessions[1].attach()
    assert first.status == 200 and second.status == 200
    third = sessions[2]
    resp = space.http_request(third.url, "POST", f"/v1/sessions/{third.id}/attach",
                              headers=space.bearer(third.token))
    err = space.check_error(resp)
    assert resp.status == 429 and err["code"] == "at_capacity" and rec["id"] in err["message"], resp
    assert third.get()["state"] == "created", "a refused attach starts nothing"
    first.close()
    deadline = time.monotonic() + 10
    while True:
        st = third.attach()
        if st.status == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert st.status == 200, "a closed stream gives its place back"
    for s in (second, st):
        s.close()


def test_tokens_in_urls_are_redacted_in_the_log(bare, monkeypatch):
    """With every request logged (SPACE_DEBUG=1), a ?token= value shows as REDACTED."""
    monkeypatch.setenv("SPACE_DEBUG", "1")
    d = bare().start()
    tok = secrets.token_hex(32)
    resp = space.http_request(d.data_url, "GET", f"/v1/sessions/ss-00000000000000aa/attach?offset=0&token={tok}")
    assert resp.status == 404
    resp = space.http_request(d.data_url, "POST", f"/v1/sessions/ss-00000000000000aa/stdin?token={tok}", b"x")
    assert resp.status == 401
    text = d.log_text()
    assert "attach?offset=0&token=REDACTED" in text and "stdin?token=REDACTED" in text, text[-2000:]
    assert tok not in text
