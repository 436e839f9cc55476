"""The unmodified E2B Python SDK (e2b 2.34.0, e2b-code-interpreter 2.9.0, from
../shared/e2b-python/site: PyPI cannot be reached here) against a sanitizer spaced of this
module's own, configured as `make run` says: E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY.

Each test runs one program of the SDK's in a child `python3` (the SDK's httpx and its
dependencies on PYTHONPATH, isolated from pytest's), written as a user of E2B would write it;
a failed assert in it fails the test with its traceback. Where the folder is absent (a plain
clone of the project has no ../shared) the module is skipped, by name, in the closing line."""

import os
import subprocess
import sys
import textwrap

import pytest

import space

SITE = os.path.realpath(os.path.join(space.REPO, "..", "shared", "e2b-python", "site"))
if not os.path.isdir(os.path.join(SITE, "e2b")):
    pytest.skip(f"the E2B Python SDK is not at {SITE} (../shared/e2b-python/site)",
                allow_module_level=True)

PYTHON = "/usr/bin/python3"  # Debian's, with the python3-* packages scripts/packages.txt names
PROGRAM_TIMEOUT = float(os.environ.get("SPACE_E2B_PY_TIMEOUT", "420"))

PRELUDE = """\
import asyncio, os, sys, time
from e2b import (AsyncSandbox, CommandExitException, FileNotFoundException, FilesystemEventType,
                 NotFoundException, PtySize, Sandbox, SandboxQuery, TimeoutException)
RUN = os.environ["E2B_TEST_RUN"]
"""


@pytest.fixture(scope="module")
def sdk(own_daemon):
    """Runs one SDK program against the module's daemon; its stdout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("E2B_", "PYTHON"))}
    env.update({
        "PYTHONPATH": SITE,
        "E2B_API_URL": own_daemon.url,
        "E2B_SANDBOX_URL": own_daemon.data_url,
        "E2B_API_KEY": own_daemon.api_key,  # e2b_ + 40 hex: the SDK checks its form
        "E2B_TEST_RUN": f"pytest-py-{os.getpid()}",
    })

    def run(program):
        src = PRELUDE + textwrap.dedent(program)
        p = subprocess.run([PYTHON, "-c", src], env=env, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=PROGRAM_TIMEOUT)
        assert p.returncode == 0 and p.stdout.rstrip().endswith("OK"), \
            f"rc={p.returncode}\n--- stdout\n{p.stdout[-4000:]}\n--- stderr\n{p.stderr[-8000:]}"
        return p.stdout
    return run


def test_the_sdk_checks_the_key_form_and_takes_spaceds(sdk):
    """The SDK refuses a key not of the form e2b_<hex> before sending anything (the form
    spaced generates, test_security.py); the daemon's e2b_ key passes and lists nothing yet."""
    sdk("""
    key = os.environ["E2B_API_KEY"]
    assert key.startswith("e2b_") and len(key) == 44, key
    try:
        Sandbox.list(api_key="sk-" + "0" * 48).next_items()
        raise AssertionError("an sk- key was sent")
    except Exception as e:
        assert "Invalid API key format" in str(e), repr(e)
    items = Sandbox.list(query=SandboxQuery(metadata={"run": RUN, "none": "x"})).next_items()
    assert items == [], items
    print("OK")
    """)


def test_create_list_info_timeout_and_kill_twice(sdk):
    sdk("""
    sbx = Sandbox.create(metadata={"run": RUN, "t": "basic"}, timeout=300)
    try:
        info = sbx.get_info()
        assert info.sandbox_id == sbx.sandbox_id and info.metadata.get("t") == "basic", info
        # E2B's default: internet on, shown as such
        assert info.allow_internet_access is True and info.network is not None, info
        end = info.end_at
        sbx.set_timeout(900)
        assert sbx.get_info().end_at > end
        items = Sandbox.list(query=SandboxQuery(metadata={"run": RUN, "t": "basic"})).next_items()
        assert [s.sandbox_id for s in items] == [sbx.sandbox_id], items
        assert sbx.is_running()
    finally:
        assert sbx.kill() is True
    assert Sandbox.kill(sbx.sandbox_id) is False  # gone: not found, no error
    try:
        Sandbox.connect(sbx.sandbox_id)
        raise AssertionError("connected to a killed sandbox")
    except NotFoundException:
        pass
    print("OK")
    """)


def test_async_create_run_and_files(sdk):
    sdk("""
    async def main():
        sbx = await AsyncSandbox.create(metadata={"run": RUN, "t": "async"})
        try:
            r = await sbx.commands.run("echo async-$((6*7))")
            assert r.stdout == "async-42\\n" and r.exit_code == 0, r
            await sbx.files.write("/tmp/a.txt", "A")
            assert await sbx.files.read("/tmp/a.txt") == "A"
        finally:
            await sbx.kill()
    asyncio.run(main())
    print("OK")
    """)


def test_commands(sdk):
    sdk("""
    sbx = Sandbox.create(metadata={"run": RUN, "t": "commands"})
    try:
        r = sbx.commands.run("echo out; echo err >&2")
        assert (r.stdout, r.stderr, r.exit_code) == ("out\\n", "err\\n", 0) and not r.error, r
        try:
            sbx.commands.run("echo bad >&2; exit 3")
            raise AssertionError("exit 3 did not raise")
        except CommandExitException as e:
            assert e.exit_code == 3 and e.stderr == "bad\\n" and e.error == "exit status 3", (e.exit_code, e.error)
        r = sbx.commands.run('echo "$FOO $(pwd) $(whoami)"', envs={"FOO": "bar"}, cwd="/tmp", user="root")
        assert r.stdout == "bar /tmp root\\n", r
        assert sbx.commands.run("whoami", user="user").stdout == "user\\n"
        # the timeout is the server's: the stream ends with deadline_exceeded, the process dies
        t0 = time.time()
        try:
            sbx.commands.run("sleep 30; echo late", timeout=2)
            raise AssertionError("a 30 s command under timeout=2 returned")
        except TimeoutException:
            pass
        assert time.time() - t0 < 15, time.time() - t0
        for _ in range(50):
            left = [p for p in sbx.commands.list() if "sleep 30" in " ".join([p.cmd] + list(p.args))]
            if not left:
                break
            time.sleep(0.2)
        assert not left, left
        out, err = [], []
        r = sbx.commands.run("for i in 1 2 3; do echo o$i; echo e$i >&2; sleep 0.2; done",
                             on_stdout=out.append, on_stderr=err.append)
        assert "".join(out) == "o1\\no2\\no3\\n" and "".join(err) == "e1\\ne2\\ne3\\n", (out, err)
        h = sbx.commands.run("head -n1; echo done", background=True, stdin=True)
        sbx.commands.send_stdin(h.pid, "hello\\n")
        assert h.wait().stdout == "hello\\ndone\\n"
        h = sbx.commands.run("sleep 60", background=True)
        assert sbx.commands.kill(h.pid) is True
        try:
            h.wait()
            raise AssertionError("a killed command ended well")
        except CommandExitException as e:
            assert e.error == "signal: killed" and e.exit_code == -1, (e.exit_code, e.error)
    finally:
        sbx.kill()
    print("OK")
    """)


def test_files(sdk):
    sdk("""
    sbx = Sandbox.create(metadata={"run": RUN, "t": "files"})
    try:
        f = sbx.files
        f.write("/tmp/a.txt", "text")
        assert f.read("/tmp/a.txt") == "text"
        data = bytes(range(256)) * 3
        f.write("/tmp/b.bin", data)
        assert bytes(f.read("/tmp/b.bin", format="bytes")) == data
        big = os.urandom(5 * 1024 * 1024)
        f.write("/tmp/big", big)
        assert bytes(f.read("/tmp/big", format="bytes")) == big
        assert f.make_dir("/tmp/d") is True and f.make_dir("/tmp/d") is False
        f.write_files([{"path": "/tmp/d/x", "data": "X"}, {"path": "/tmp/d/y", "data": b"Y"}])
        assert sorted(e.name for e in f.list("/tmp/d")) == ["x", "y"]
        assert f.exists("/tmp/d/x") and not f.exists("/tmp/nope")
        f.rename("/tmp/d/x", "/tmp/d/z")
        assert f.read("/tmp/d/z") == "X" and not f.exists("/tmp/d/x")
        f.remove("/tmp/d/z")
        assert not f.exists("/tmp/d/z")
        try:
            f.read("/tmp/nope")
            raise AssertionError("reading a missing file worked")
        except (FileNotFoundException, NotFoundException):
            pass
        # a watch shows the user's file only, as envd does (no temporary file of SPACE's)
        f.make_dir("/tmp/w")
        w = f.watch_dir("/tmp/w")
        f.write("/tmp/w/w1.txt", "hi")
        time.sleep(2)
        evs = w.get_new_events()
        w.stop()
        assert {e.name for e in evs} == {"w1.txt"}, evs
        assert FilesystemEventType.WRITE in {e.type for e in evs}, evs
    finally:
        sbx.kill()
    print("OK")
    """)


def test_pty(sdk):
    sdk("""
    sbx = Sandbox.create(metadata={"run": RUN, "t": "pty"})
    try:
        out = bytearray()
        h = sbx.pty.create(PtySize(rows=24, cols=80))
        sbx.pty.send_stdin(h.pid, b"echo pty-$((6*7)); exit\\n")
        h.wait(on_pty=lambda d: out.extend(d))
        assert b"pty-42" in out, bytes(out)
    finally:
        sbx.kill()
    print("OK")
    """)


def test_pause_then_connect_keeps_processes_and_files(sdk):
    sdk("""
    sbx = Sandbox.create(metadata={"run": RUN, "t": "pause"}, timeout=600)
    try:
        h = sbx.commands.run("sleep 600", background=True, timeout=0)
        sbx.files.write("/tmp/keep.txt", "kept")
        sbx.commands.run("echo mem > /dev/shm/m")
        sbx.pause()
        assert Sandbox.get_info(sbx.sandbox_id).state.value == "paused"
        again = Sandbox.connect(sbx.sandbox_id)
        assert again.files.read("/tmp/keep.txt") == "kept"
        assert again.commands.run("cat /dev/shm/m").stdout == "mem\\n"
        assert h.pid in [p.pid for p in again.commands.list()]
    finally:
        sbx.kill()
    print("OK")
    """)


def test_code_interpreter(sdk):
    sdk("""
    from e2b_code_interpreter import Sandbox as CodeSandbox
    sbx = CodeSandbox.create(metadata={"run": RUN, "t": "interp"})
    try:
        sbx.run_code("x = 41")
        assert sbx.run_code("x + 1").text == "42"
        e = sbx.run_code("1/0")
        assert e.error and e.error.name == "ZeroDivisionError" and "ZeroDivisionError" in e.error.traceback, e
        e = sbx.run_code("import matplotlib.pyplot as plt\\nplt.plot([1, 2, 3])\\nplt.show()")
        assert any(r.png for r in e.results), e
        ctx = sbx.create_code_context()
        sbx.run_code("y = 5", context=ctx)
        assert sbx.run_code("y", context=ctx).text == "5"
        e = sbx.run_code("y")
        assert e.error and e.error.name == "NameError", e
        lines = []
        sbx.run_code("print('a'); print('b')", on_stdout=lambda m: lines.append(m.line))
        assert "".join(lines).split() == ["a", "b"], lines
    finally:
        sbx.kill()
    print("OK")
    """)


def test_get_host_reaches_a_port_and_the_traffic_token_opens_a_private_one(sdk, own_daemon):
    """get_host(port) names the port on the data plane (the create response's domain); E2B's
    default leaves it open; allow_public_traffic=False closes it to all but the traffic token."""
    sdk(f"""
    import http.client
    DATA_PORT = {own_daemon.data_port}

    def get(host, headers=None):
        c = http.client.HTTPConnection("127.0.0.1", DATA_PORT, timeout=30)
        c.request("GET", "/", headers={{"Host": host, **(headers or {{}})}})
        r = c.getresponse()
        return r.status, r.read()

    for public in (True, False):
        sbx = Sandbox.create(metadata={{"run": RUN}}, timeout=300,
                             network={{"allow_public_traffic": public}})
        try:
            sbx.commands.run("cd /tmp && echo hi-from-port > index.html && python3 -m http.server 8000",
                             background=True)
            sbx.commands.run("for i in $(seq 100); do grep -qi ':1F40 00000000:0000 0A' /proc/net/tcp "
                             "&& exit 0; sleep 0.1; done; exit 1")
            host = sbx.get_host(8000)
            assert host == f"8000-{{sbx.sandbox_id}}.localhost:{{DATA_PORT}}", host
            status, body = get(host)
            if public:
                assert status == 200 and body == b"hi-from-port\\n", (status, body)
            else:
                assert status == 401, (status, body)
                status, body = get(host, {{"e2b-traffic-access-token": sbx.traffic_access_token}})
                assert status == 200 and body == b"hi-from-port\\n", (status, body)
        finally:
            sbx.kill()
    print("OK")
    """)
