"""The Python SDK (sdk/python, package `space`) against the real daemon: the README's snippet
exactly as a user runs it, commands (streaming callbacks, stdin, signals, a PTY, resuming a
dropped stream), files (incl. watch and tar), lifecycle verbs, snapshots, network, secrets,
ports, typed errors, and the asyncio client.

The test framework is also a module named `space` (tests/e2e/space.py), so the SDK is loaded
here under the name `space_sdk`; the snippet test runs it as `space` in a python3 of its own,
with only PYTHONPATH=sdk/python, as a user would."""

import asyncio
import hashlib
import importlib.util
import io
import os
import subprocess
import sys
import tarfile
import threading

import pytest

import space  # the test framework

SDK_DIR = os.path.join(space.REPO, "sdk", "python")


def load_sdk():
    spec = importlib.util.spec_from_file_location(
        "space_sdk", os.path.join(SDK_DIR, "space", "__init__.py"),
        submodule_search_locations=[os.path.join(SDK_DIR, "space")])
    mod = importlib.util.module_from_spec(spec)
    sys.modules["space_sdk"] = mod
    spec.loader.exec_module(mod)
    return mod


sdk = load_sdk()


@pytest.fixture(scope="module")
def client(daemon):
    return sdk.Client(url=daemon.url, api_key=daemon.api_key)


def tracked(daemon, sb):
    """The daemon's teardown checks that no QEMU outlives a sandbox it knows of."""
    daemon.sandbox_ids.add(sb.id)
    return sb


@pytest.fixture(scope="module")
def bsb(daemon, client):
    """One `base` sandbox (python3, user `user`) made through the SDK, for the module."""
    sb = tracked(daemon, client.sandboxes.create(template="base", timeout_s=900))
    assert sb.state == "running" and sb.info.template == "base", sb.info
    yield sb
    if client.sandboxes.get(sb.id).state != "deleted":
        op = sb.delete()
        assert op.state == "succeeded", op


SNIPPET = """
from space import Client
sb = Client().sandboxes.create(template="base")      # SPACE_URL, SPACE_API_KEY(_FILE)
r = sb.run(["python3", "-c", "print(6*7)"])         # r.stdout == "42\\n", r.exit_code == 0
assert r.stdout == "42\\n" and r.exit_code == 0, r
sb.files.write("/home/user/a.txt", b"hi"); assert sb.files.read("/home/user/a.txt") == b"hi"
kid = sb.fork(count=1)[0]; kid.delete(); sb.delete()
print(sb.id, kid.id, kid.info.parent_id, kid.info.start_kind)
"""


def test_snippet_runs_exactly_with_only_the_environment(daemon, tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text(daemon.api_key + "\n")
    key_file.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPACE_")}
    env.update(SPACE_URL=daemon.url, SPACE_API_KEY_FILE=str(key_file), PYTHONPATH=SDK_DIR)
    p = subprocess.run(["/usr/bin/python3", "-c", SNIPPET], env=env, capture_output=True,
                       text=True, timeout=300, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    parent, kid, kid_parent, kid_kind = p.stdout.split()
    daemon.sandbox_ids.update((parent, kid))
    assert kid_parent == parent and kid_kind == "fork"
    # Both are gone: the deletes were awaited before the program ended.
    assert daemon.api.sandbox(parent)["state"] == "deleted"
    assert daemon.api.sandbox(kid)["state"] == "deleted"
    # A key file others can read is refused, as spacectl refuses it.
    key_file.chmod(0o644)
    with pytest.raises(sdk.ConfigError, match="mode 0644"):
        sdk.Client(url=daemon.url, api_key_file=str(key_file))


def test_streaming_callbacks_see_output_as_it_comes_in_order(bsb):
    out, err = [], []
    script = "for i in 1 2 3; do echo out$i; echo err$i >&2; done; printf 'caf\\303'; printf '\\251\\n'"
    r = bsb.run(["/bin/sh", "-c", script], on_stdout=out.append, on_stderr=err.append)
    assert r.exit_code == 0 and r.signal is None and r.error is None
    # A UTF-8 character cut between two writes reaches the callback whole.
    assert "".join(out) == r.stdout == "out1\nout2\nout3\ncafé\n"
    assert "".join(err) == r.stderr == "err1\nerr2\nerr3\n"
    assert r.stdout_bytes == "out1\nout2\nout3\ncafé\n".encode()
    # The bytes of both streams together, each stream in its order (the two pipes are read
    # apart, so how they interleave is up to the guest).
    assert sorted(r.output.split(b"\n")) == sorted((r.stdout_bytes + r.stderr_bytes).split(b"\n"))
    assert r.offset == len(r.output) == len(r.stdout_bytes) + len(r.stderr_bytes)
    # A shell string runs through /bin/sh -c; a non-zero exit is a result unless check=True.
    assert bsb.run("exit 7").exit_code == 7
    with pytest.raises(sdk.CommandError) as e:
        bsb.run("echo nope >&2; exit 5", check=True)
    assert e.value.result.exit_code == 5 and e.value.result.stderr == "nope\n"


def test_stdin_whole_and_in_pieces(bsb):
    data = os.urandom(1536 * 1024)  # sent as two requests (the daemon takes at most 4 MiB each)
    r = bsb.run(["sha256sum"], stdin=data)
    assert r.exit_code == 0 and r.stdout.split()[0] == hashlib.sha256(data).hexdigest()
    c = bsb.commands.start(["cat"], stdin=True)
    c.send_stdin("one ")
    c.send_stdin(b"two\n")
    c.close_stdin()
    r = c.wait(timeout=120)
    assert (r.stdout, r.exit_code) == ("one two\n", 0)


def wait_for_text(got, text, timeout=60):
    ev = threading.Event()

    def cb(s):
        got.append(s)
        if text in "".join(got):
            ev.set()
    return ev, cb


def test_signals_reach_the_process(bsb):
    got = []
    ready, cb = wait_for_text(got, "ready")
    c = bsb.commands.start(["/bin/sh", "-c", "trap 'echo got TERM; exit 3' TERM; echo ready; "
                                             "while :; do sleep 0.1; done"], on_stdout=cb)
    assert ready.wait(60), got
    c.signal("SIGTERM")
    r = c.wait(timeout=60)
    assert (r.exit_code, r.signal) == (3, None) and r.stdout == "ready\ngot TERM\n", r
    c = bsb.commands.start(["sleep", "600"])
    c.wait_started()
    c.kill()
    r = c.wait(timeout=60)
    assert (r.exit_code, r.signal) == (None, 9), r
    # Past its timeout, run() kills the command and says so.
    with pytest.raises(sdk.CommandTimeout) as e:
        bsb.run("echo started; exec sleep 600", timeout=2)
    assert e.value.result.stdout == "started\n" and e.value.result.signal == 9
    assert bsb.commands.get(e.value.result.session_id).signal == 9
    # A finished command cannot be signalled: a typed 409.
    with pytest.raises(sdk.Conflict) as e:
        c.signal("INT")
    assert e.value.code == "conflict" and e.value.status == 409


def test_pty_has_its_size_and_resizes(bsb):
    got = []
    first, cb = wait_for_text(got, "31 97")
    c = bsb.commands.start(["/bin/sh", "-c", "tty; stty size; read x; stty size; echo TERM=$TERM"],
                           pty=(31, 97), on_stdout=cb)
    assert first.wait(60), got
    c.resize(40, 120)
    c.send_stdin("\n")
    r = c.wait(timeout=60)
    lines = r.stdout.replace("\r", "").split("\n")
    assert lines[0].startswith("/dev/pts/") and "31 97" in lines and "40 120" in lines, r
    assert "TERM=xterm-256color" in lines and r.exit_code == 0
    assert c.info().kind == "pty" and r.stderr == ""


def test_a_dropped_stream_resumes_where_it_was(bsb):
    got = []
    first, cb = wait_for_text(got, "before\n")
    c = bsb.commands.start(["/bin/sh", "-c", "echo before; read x; echo after $x"], stdin=True,
                           on_stdout=cb)
    assert first.wait(60), got
    c.reconnect()  # the connection is cut under the follower, as a network drop would
    c.send_stdin("go\n")
    r = c.wait(timeout=60)
    assert r.stdout == "before\nafter go\n" and "".join(got) == r.stdout, (r, got)
    assert c.reconnects >= 1 and r.exit_code == 0
    # Disconnect on purpose, connect again later from the offset reached: nothing lost or twice.
    got = []
    first, cb = wait_for_text(got, "one\n")
    c = bsb.commands.start(["/bin/sh", "-c", "echo one; read x; echo two; echo three >&2"],
                           stdin=True, on_stdout=cb)
    assert first.wait(60), got
    offset = c.disconnect()
    assert offset == 4 and not c.done
    c.send_stdin("\n")
    rest = bsb.commands.connect(c.id, offset=offset).wait(timeout=60)
    assert (rest.stdout, rest.stderr, rest.exit_code) == ("two\n", "three\n", 0), rest
    whole = bsb.commands.connect(c.id).wait(timeout=60)
    assert whole.output == b"one\ntwo\nthree\n"
    assert any(s.id == c.id and s.state == "exited" for s in bsb.commands.list())


def test_an_expired_data_plane_token_is_renewed(bsb):
    import time
    got = []
    first, cb = wait_for_text(got, "a\n")
    c = bsb.commands.start(["/bin/sh", "-c", "echo a; read x; echo b"], stdin=True, token_ttl_s=1,
                           on_stdout=cb)
    assert first.wait(60), got
    old = c._dp["token"]
    time.sleep(2)  # the token has expired: stdin, and the stream's reconnect, must renew it
    c.send_stdin("\n")
    c.reconnect()
    r = c.wait(timeout=60)
    assert r.stdout == "a\nb\n" and r.exit_code == 0 and c._dp["token"] != old


def test_files_read_write_list_stat_mkdir_rename_remove(bsb):
    f = bsb.files
    assert f.write("/home/user/d/x.txt", "héllo", parents=True) == {"path": "/home/user/d/x.txt", "size": 6}
    assert f.read_text("/home/user/d/x.txt") == "héllo"
    assert f.read("/home/user/d/x.txt", offset=1, length=2) == "é".encode()
    f.write("/home/user/d/m.bin", io.BytesIO(b"\0" * 70000), mode=0o600)  # streamed, chunked
    st = f.stat("/home/user/d/m.bin")
    assert (st.type, st.size, st.mode, st.permissions, st.owner) == ("file", 70000, 0o600, "-rw-------", "user")
    assert f.mkdir("/home/user/d/sub") is True
    assert f.mkdir("/home/user/d/sub", parents=True) is False
    f.rename("/home/user/d/x.txt", "/home/user/d/sub/y.txt")
    names = [(e.name, e.type) for e in f.list("/home/user/d", depth=2)]
    assert names == [("m.bin", "file"), ("sub", "dir"), ("y.txt", "file")], names
    assert f.exists("/home/user/d/sub/y.txt") and not f.exists("/home/user/d/x.txt")
    f.remove("/home/user/d", recursive=True)
    assert not f.exists("/home/user/d")
    # As another user: root's file is root's; user may not write /root.
    f.as_user("root").write("/root/r.txt", b"r")
    assert f.as_user("root").stat("/root/r.txt").owner == "root"
    with pytest.raises(sdk.PermissionDenied) as e:
        f.write("/root/no.txt", b"x")
    assert (e.value.code, e.value.status) == ("permission_denied", 403)


def test_file_errors_are_typed(bsb):
    f = bsb.files
    with pytest.raises(sdk.NotFound) as e:
        f.read("/home/user/missing")
    assert (e.value.code, e.value.status) == ("not_found", 404) and "missing" in e.value.message
    f.mkdir("/home/user/e")
    f.write("/home/user/e/a", b"a")
    with pytest.raises(sdk.AlreadyExists) as e:
        f.mkdir("/home/user/e")
    assert isinstance(e.value, sdk.Conflict) and e.value.code == "already_exists"
    with pytest.raises(sdk.NotEmpty):
        f.remove("/home/user/e")
    with pytest.raises(sdk.AlreadyExists):
        f.rename("/home/user/e/a", "/home/user/e/a", overwrite=False)
    with pytest.raises(sdk.IsADirectory) as e:
        f.read("/home/user/e")
    assert isinstance(e.value, sdk.BadRequest) and e.value.status == 400
    with pytest.raises(sdk.BadRequest):
        f.read("relative/path")  # refused before it is sent
    f.remove("/home/user/e", recursive=True)


def test_watch_sees_changes_made_after_it_returns(bsb):
    bsb.files.mkdir("/home/user/w")
    with bsb.files.watch("/home/user/w", recursive=True) as w:
        with pytest.raises(sdk.Timeout):
            w.next(timeout=0.2)  # nothing changed yet; the watch goes on
        bsb.files.write("/home/user/w/new.txt", b"1")
        bsb.files.mkdir("/home/user/w/deep")
        bsb.files.write("/home/user/w/deep/in.txt", b"2")
        seen = set()
        while not {"/home/user/w/new.txt", "/home/user/w/deep/in.txt"} <= seen:
            ev = w.next(timeout=60)
            assert ev is not None, seen
            assert ev.type in ("create", "write", "remove", "rename", "chmod"), ev
            seen.add(ev.path)
    assert w.ended
    with pytest.raises(sdk.NotADirectory):
        bsb.files.watch("/home/user/w/new.txt")


def test_tar_both_ways(bsb, tmp_path):
    f = bsb.files
    f.write("/home/user/proj/a.txt", b"A", parents=True)
    f.write("/home/user/proj/lib/b.txt", b"BB", parents=True)
    with tarfile.open(fileobj=io.BytesIO(f.tar_download("/home/user/proj"))) as tf:
        got = {m.name: (tf.extractfile(m).read() if m.isfile() else None) for m in tf.getmembers()}
    assert got["proj/a.txt"] == b"A" and got["proj/lib/b.txt"] == b"BB" and "proj/lib" in got, got
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, data in (("up/one.txt", b"1"), ("up/two/three.txt", b"3")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    r = f.tar_upload("/home/user", buf.getvalue())
    assert r["path"] == "/home/user" and r["entries"] == 2, r
    assert f.read("/home/user/up/two/three.txt") == b"3"
    # Whole directories to and from the local disk.
    (tmp_path / "src" / "s").mkdir(parents=True)
    (tmp_path / "src" / "s" / "k.txt").write_bytes(b"K")
    f.mkdir("/home/user/dst")
    f.upload_dir(str(tmp_path / "src"), "/home/user/dst")
    assert f.read("/home/user/dst/s/k.txt") == b"K"
    f.download_dir("/home/user/proj", str(tmp_path / "back"))
    assert (tmp_path / "back" / "proj" / "lib" / "b.txt").read_bytes() == b"BB"
    # A tar that would write outside the directory is refused by the guest.
    evil = io.BytesIO()
    with tarfile.open(fileobj=evil, mode="w") as tf:
        info = tarfile.TarInfo("../escape.txt")
        info.size = 1
        tf.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(sdk.BadRequest):
        f.tar_upload("/home/user/dst", evil.getvalue())


def test_api_errors_are_typed_with_code_status_message(daemon, client, bsb):
    with pytest.raises(sdk.Unauthorized) as e:
        sdk.Client(url=daemon.url, api_key="e2b_" + "0" * 40).sandboxes.list()
    assert (e.value.code, e.value.status) == ("unauthorized", 401)
    with pytest.raises(sdk.NotFound) as e:
        client.sandboxes.get("sb-0000000000000000")
    assert (e.value.code, e.value.status) == ("not_found", 404) and e.value.message
    with pytest.raises(sdk.BadRequest) as e:
        client.sandboxes.create(template="minimal", vcpus=99)
    assert "vcpus" in e.value.message and e.value.code == "bad_request"
    with pytest.raises(sdk.NotFound):
        client.sandboxes.create(template="no-such-template")
    # A body over the control plane's 1 MiB: the HTTP layer's own (HTML) 413, still typed.
    with pytest.raises(sdk.PayloadTooLarge) as e:
        client.sandboxes.create(template="minimal", env={"A": "x" * (2 << 20)})
    assert e.value.status == 413 and "Too Large" in e.value.message
    # A command that cannot start is an error, not an exit status.
    with pytest.raises(sdk.CommandError) as e:
        bsb.run(["/no/such/binary"])
    assert "No such file" in e.value.result.error and e.value.result.exit_code is None
    with pytest.raises(sdk.Conflict) as e:
        bsb.resume()  # it runs: nothing to resume
    assert "running" in e.value.message and e.value.status == 409
    with pytest.raises(sdk.ConnectionFailed):
        sdk.Client(url=f"http://127.0.0.1:{space.free_ports(1)[0]}", api_key="k").info()
    with pytest.raises(sdk.ConfigError):
        sdk.Client(url="ftp://x", api_key="k")


def test_lifecycle_snapshot_network_secrets_ports(daemon, client):
    sb = tracked(daemon, client.sandboxes.create(template="minimal", metadata={"sdk": "life"},
                                                 timeout_s=600))
    try:
        assert [s.id for s in client.sandboxes.list(metadata={"sdk": "life"})] == [sb.id]
        sb.run(["/bin/sh", "-c", "echo kept > /root/k"], check=True)
        assert sb.pause().state == "succeeded" and sb.state == "paused"
        with pytest.raises(sdk.Conflict):
            sb.run(["true"])  # no commands while paused
        sb.resume()
        assert sb.state == "running"
        sb.suspend()
        assert sb.state == "suspended" and sb.info.suspended_bytes > 0
        op = sb.wake()
        assert op.kind == "restore" and sb.state == "running"
        assert sb.run(["cat", "/root/k"]).stdout == "kept\n"
        sb.stop()
        assert sb.state == "stopped"
        sb.start()
        assert sb.state == "running" and sb.run(["cat", "/root/k"]).stdout == "kept\n"
        info = sb.set_timeout(0)
        assert info.expires_at is None and sb.info.timeout_s == 0
        snap = sb.snapshot("sdk-golden")
        assert (snap.name, snap.kind, snap.state, snap.sandbox_id) == ("sdk-golden", "named", "ready", sb.id)
        assert "sdk-golden" in [s.name for s in client.snapshots.list()]
        with pytest.raises(sdk.Conflict):
            sb.snapshot("sdk-golden")  # the name is taken
        # A sandbox from the snapshot has the files it had.
        with tracked(daemon, client.sandboxes.create(snapshot="sdk-golden")) as clone:
            assert clone.info.snapshot == snap.id and clone.info.start_kind == "clone"
            assert clone.run(["cat", "/root/k"]).stdout == "kept\n"
        assert client.sandboxes.get(clone.id).state == "deleted"
        client.snapshots.delete("sdk-golden")
        with pytest.raises(sdk.NotFound):
            client.snapshots.get("sdk-golden")
        # Network policy and secrets.
        sec = client.secrets.put("sdk-token", "s3cret", ["API.example.com"])
        assert sec.hosts == ["api.example.com"] and "value" not in sec
        assert "sdk-token" in [s.name for s in client.secrets.list()]
        pol = sb.set_network(allow=["Example.COM", "203.0.113.0/24"], deny=["evil.example.com"],
                             inject=[{"host": "api.example.com", "header": "Authorization",
                                      "secret": "sdk-token", "prefix": "Bearer "}])
        assert "example.com" in pol["allow"] and pol["deny"] == ["evil.example.com"], pol
        assert sb.refresh().network["inject"][0]["secret"] == "sdk-token"
        with pytest.raises(sdk.BadRequest) as e:
            sb.set_network(inject=[{"host": "other.example.net", "header": "X", "secret": "sdk-token"}])
        assert "may not be sent" in e.value.message
        client.secrets.delete("sdk-token")
        with pytest.raises(sdk.NotFound):
            client.secrets.get("sdk-token")
        assert isinstance(sb.egress(limit=10), list)
        # Ports: private by default, a token for one, revoked.
        assert sb.ports.url(8000).startswith("http://8000-" + sb.id + ".")
        tok = sb.ports.token(8000, ttl_s=60)
        assert tok.port == 8000 and tok.header == "X-Space-Token" and len(tok.token) >= 32
        assert [p for p in sb.ports.list()["ports"] if p["port"] == 8000][0]["tokens"] == 1
        assert sb.ports.revoke(8000, tok.id) == 1
        assert sb.ports.set_public(8000)["public"] is True
        assert "space-agent" in sb.logs()  # the guest console
    finally:
        op = sb.delete()
    assert op.state == "succeeded" and client.sandboxes.get(sb.id).state == "deleted"


def test_asyncio_client(daemon, bsb, tmp_path):
    async def main():
        async with sdk.AsyncClient(url=daemon.url, api_key=daemon.api_key) as c:
            sb = await c.sandboxes.get(bsb.id)
            assert sb.state == "running"
            assert bsb.id in [s.id for s in await c.sandboxes.list(state="running")]
            r = await sb.run(["python3", "-c", "print(6*7)"])
            assert (r.stdout, r.exit_code) == ("42\n", 0)
            # Callbacks may be coroutine functions; output arrives while the command runs.
            got = []

            async def on_out(s):
                got.append(s)
            r = await sb.run("for i in 1 2 3; do echo $i; done; echo e >&2", on_stdout=on_out,
                             on_stderr=got.append)
            assert "".join(got) == "1\n2\n3\ne\n" and r.stderr == "e\n"
            assert (await sb.run(["cat"], stdin=b"in\n")).stdout == "in\n"
            # Several commands at once on one event loop.
            rs = await asyncio.gather(*(sb.run(["echo", str(i)]) for i in range(4)))
            assert [x.stdout for x in rs] == ["0\n", "1\n", "2\n", "3\n"]
            # Start, resume a dropped stream, signal.
            cmd = await sb.commands.start(["/bin/sh", "-c", "trap 'echo T; exit 4' TERM; echo up; "
                                                            "while :; do sleep 0.1; done"])
            while "up" not in cmd.result.stdout:
                await asyncio.sleep(0.05)
            cmd.reconnect()
            await cmd.signal("TERM")
            r = await cmd.wait(timeout=60)
            assert (r.stdout, r.exit_code) == ("up\nT\n", 4) and cmd.reconnects >= 1
            # Files, watch, tar.
            await sb.files.write("/home/user/aio.txt", "async")
            assert await sb.files.read("/home/user/aio.txt") == b"async"
            blob = os.urandom(300_000)
            src, dst = tmp_path / "blob", tmp_path / "back"
            src.write_bytes(blob)
            assert (await sb.files.upload(str(src), "/home/user/blob"))["size"] == len(blob)
            assert await sb.files.download("/home/user/blob", str(dst)) == len(blob)
            assert dst.read_bytes() == blob
            await sb.files.mkdir("/home/user/aw")
            async with await sb.files.watch("/home/user/aw") as w:
                with pytest.raises(sdk.Timeout):
                    await w.next(timeout=0.2)
                await sb.files.write("/home/user/aw/f", b"x")
                ev = await w.next(timeout=60)
                assert ev.path.startswith("/home/user/aw/"), ev
            tar = await sb.files.tar_download("/home/user/aw")
            assert "aw/f" in tarfile.open(fileobj=io.BytesIO(tar)).getnames()
            assert [e.name for e in await sb.files.list("/home/user/aw")] == ["f"]
            with pytest.raises(sdk.NotFound) as e:
                await sb.files.stat("/home/user/none")
            assert e.value.status == 404
            with pytest.raises(sdk.Conflict):
                await sb.resume()
            assert (await c.info())["version"]
            # Create (awaited), lifecycle verbs and fork through asyncio.
            async with await c.sandboxes.create(template="minimal", timeout_s=300) as m:
                daemon.sandbox_ids.add(m.id)
                assert m.state == "running"
                await m.pause()
                assert m.state == "paused"
                await m.resume()
                kids = await m.fork(count=1)
                daemon.sandbox_ids.update(k.id for k in kids)
                assert [k.info.parent_id for k in kids] == [m.id] and kids[0].state == "running"
                assert (await kids[0].run(["echo", "kid"])).stdout == "kid\n"
                assert (await kids[0].delete()).state == "succeeded"
            assert (await c.sandboxes.get(m.id)).state == "deleted"
    asyncio.run(main())


def test_reference_docs_are_generated_with_links_that_resolve(tmp_path):
    import html
    import re
    out = tmp_path / "ref"
    p = subprocess.run([os.path.join(SDK_DIR, "docs.sh"), str(out)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    pages = {f.name: f.read_text() for f in out.iterdir()}
    assert {"index.html", "space.client.html", "space.aio.html", "space.errors.html",
            "space.records.html"} <= set(pages)
    ids = {name: set(re.findall(r'id="([^"]+)"', text)) for name, text in pages.items()}
    for name, text in pages.items():
        for href in re.findall(r'href="([^"]+)"', text):
            page, _, frag = href.partition("#")
            page = page or name
            assert page in pages and (not frag or html.unescape(frag) in ids[page]), (name, href)
    # Every public name of the package is documented somewhere.
    for n in sdk.__all__:
        assert any(f'id="{n}"' in t for t in pages.values()), n
    assert 'id="Commands.run"' in pages["space.client.html"] and "on_stdout" in pages["space.client.html"]
