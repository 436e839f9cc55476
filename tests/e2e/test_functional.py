"""Functional: templates, sandboxes, operations, commands and their output, stdin, signals,
env/cwd/user, concurrency and listing -- what a client sees when everything goes right."""

import hashlib
import os
import re
import time

import pytest

import space

SH = ["sh", "-c"]


# ---- info and templates


def test_info_describes_this_daemon(daemon, api, sb):
    info = api.info()
    assert info["version"] == "0.1.0"
    assert info["accelerator_reason"].strip(), "the accelerator choice must be explained"
    assert info["data_plane_url"] == daemon.data_url
    assert info["capacity"]["sandboxes_running"] >= 1  # the module's sandbox


def test_daemon_prints_urls_but_never_the_key(daemon):
    log = "\n".join(x for x in daemon.log_text().splitlines()
                    if not x.startswith("---- test framework"))
    assert daemon.url in log, "control-plane URL not printed at start"
    assert daemon.data_url in log, "data-plane URL not printed at start"
    assert daemon.api_key not in log, "the API key reached the log"
    assert "API key:       as given (--api-key)" in log


def test_templates_listed_and_resolved_by_every_ref(api):
    by_name = {t["name"]: t for t in api.templates()}
    assert {"minimal", "base"} <= set(by_name), by_name.keys()
    assert by_name["base"]["default_user"] == "user"
    for name, t in by_name.items():
        digest = t["digest"]
        refs = [name, digest, f"{name}@{digest}"] + t["tags"]
        for ref in refs:
            got = api.template(ref)
            assert got["digest"] == digest and got["name"] == name, (ref, got)
        # `:` and `@` may also come unencoded.
        got = api.call("GET", f"/v1/templates/{name}@{digest}", "template")
        assert got["digest"] == digest
    assert "minimal:latest" in by_name["minimal"]["tags"]


# ---- sandboxes and operations


def test_create_returns_operation_and_wait_returns_when_done(api):
    sb, op = api.create_sandbox("minimal", timeout_s=0, metadata={"t": "wait"})
    assert sb["template"] == "minimal" and sb["metadata"] == {"t": "wait"}
    assert sb["timeout_s"] == 0 and sb["expires_at"] is None
    assert op["state"] in ("pending", "running", "succeeded")
    t0 = time.monotonic()
    done = api.operation(op["id"], wait=60, timeout=90)
    waited = time.monotonic() - t0
    assert done["state"] == "succeeded", done
    assert done["error"] is None
    assert waited < 59, f"?wait returned only at the end of the wait ({waited:.1f}s)"
    assert space.parse_time(done["updated_at"]) >= space.parse_time(done["created_at"])
    assert api.sandbox(sb["id"])["state"] == "running"
    # A finished operation answers at once, even with a long wait.
    t0 = time.monotonic()
    assert api.operation(op["id"], wait=30)["state"] == "succeeded"
    assert time.monotonic() - t0 < 5
    # Delete: 202 with a delete operation; afterwards the record still answers.
    rec = api.remove_sandbox(sb["id"])
    assert rec["state"] == "deleted"
    assert sb["id"] not in [s["id"] for s in api.sandboxes()]
    assert sb["id"] in [s["id"] for s in api.sandboxes(state="deleted")]
    assert not space.qemu_pids(sb["id"]), "QEMU still running after delete"


def test_sandbox_defaults_come_from_template(api, sb):
    t = api.template("minimal")
    rec = api.sandbox(sb["id"])
    assert rec["template_digest"] == t["digest"]
    assert rec["vcpus"] == t["vcpus"] and rec["memory_mib"] == t["memory_mib"]
    assert rec["timeout_s"] == 3600 and rec["expires_at"] is not None
    expires = space.parse_time(rec["expires_at"]) - space.parse_time(rec["created_at"])
    assert abs(expires - 3600) < 5, rec
    assert rec["env"] == {"SB_LEVEL": "from-sandbox"}
    assert rec["error"] is None


def test_list_filters_by_state_and_metadata(api, sb):
    tag = os.urandom(4).hex()
    a = api.create_sandbox("minimal", metadata={"suite": tag, "role": "a"})[0]
    b = api.create_sandbox("minimal", metadata={"suite": tag, "role": "b"})[0]
    # No timeout_s given: the default lifetime is 900 s.
    assert a["timeout_s"] == 900 and a["expires_at"] is not None
    expires = space.parse_time(a["expires_at"]) - space.parse_time(a["created_at"])
    assert abs(expires - 900) < 5, a
    assert a["env"] == {} and a["error"] is None
    ids = lambda lst: {s["id"] for s in lst}  # noqa: E731
    assert ids(api.sandboxes(metadata={"suite": tag})) == {a["id"], b["id"]}
    assert ids(api.sandboxes(metadata={"suite": tag, "role": "a"})) == {a["id"]}
    assert ids(api.sandboxes(metadata={"suite": tag, "role": "c"})) == set()
    assert ids(api.sandboxes(metadata={"nosuchkey": tag})) == set()
    running = api.sandboxes(state="running")
    assert sb["id"] in ids(running) and all(s["state"] == "running" for s in running)
    both = api.sandboxes(state="running,creating", metadata={"suite": tag})
    assert ids(both) == {a["id"], b["id"]}
    assert sb["id"] not in ids(api.sandboxes(state="deleted"))
    for s in (a, b):
        api.delete_sandbox(s["id"])


def test_memory_and_vcpus_reach_the_guest(api):
    rec = api.new_sandbox("minimal", vcpus=2, memory_mib=128)
    assert rec["vcpus"] == 2 and rec["memory_mib"] == 128
    r = api.run(rec["id"], SH + ["grep -c ^processor /proc/cpuinfo; "
                                 "grep MemTotal /proc/meminfo"], user="root")
    assert r.exit_code == 0, r
    lines = r.stdout.decode().split("\n")
    assert lines[0] == "2", r
    kib = int(re.search(r"MemTotal:\s+(\d+) kB", lines[1]).group(1))
    assert 64 * 1024 < kib <= 128 * 1024, f"guest sees {kib} KiB for 128 MiB"
    api.delete_sandbox(rec["id"])


def test_logs_are_the_guest_console(api, sb):
    mark = "SPACE-MARK-" + os.urandom(6).hex()
    r = api.run(sb["id"], SH + [f"echo '<1>{mark}' > /dev/kmsg"], user="root")
    assert r.exit_code == 0, r
    deadline = time.monotonic() + 15
    while True:
        text = api.logs(sb["id"])
        if mark in text:
            break
        assert time.monotonic() < deadline, f"kernel message not in logs; tail: {text[-2000:]}"
        time.sleep(0.5)


# ---- commands


def test_echo_hello(api, sb):
    s = api.create_session(sb["id"], ["echo", "hello"])
    assert s.rec["stdin"] is False and s.rec["pid"] is None
    assert s.url == api.daemon.data_url
    r = s.collect()
    assert bytes(r.stdout) == b"hello\n"
    assert bytes(r.stderr) == b""
    assert r.exited and r.exit_code == 0 and r.signal is None and r.error is None
    rec = s.get()
    assert rec["state"] == "exited" and rec["exit_code"] == 0 and rec["signal"] is None
    assert rec["output_bytes"] == 6
    assert isinstance(rec["pid"], int) and rec["pid"] > 0
    assert rec["started_at"] and rec["ended_at"]
    assert space.parse_time(rec["ended_at"]) >= space.parse_time(rec["started_at"])
    assert s.get_dp()["state"] == "exited"  # the data plane answers the same record
    assert s.id in [x["id"] for x in api.sessions(sb["id"])]


@pytest.mark.parametrize("code", [0, 1, 3, 255])
def test_exit_codes(api, sb, code):
    r = api.run(sb["id"], SH + [f"exit {code}"])
    assert r.exit_code == code and r.signal is None, r


def test_killed_by_signal(api, sb):
    r = api.run(sb["id"], SH + ["kill -9 $$"])
    assert r.signal == 9 and r.exit_code is None, r


def test_signal_through_api(api, sb):
    s = api.create_session(sb["id"], ["sleep", "100"])
    job = s.start(timeout=60)
    s.wait_running()
    t0 = time.monotonic()
    s.signal("SIGTERM")
    r = job.wait()
    assert r.signal == 15 and r.exit_code is None, r
    assert time.monotonic() - t0 < 20
    rec = s.get()
    assert rec["state"] == "exited" and rec["signal"] == 15
    s.signal("SIGTERM", expect=409)  # not running any more


def test_signal_by_number(api, sb):
    s = api.create_session(sb["id"], ["sleep", "100"])
    job = s.start(timeout=60)
    s.wait_running()
    s.signal(2)
    assert job.wait().signal == 2


def test_stdout_and_stderr_are_separate(api, sb):
    r = api.run(sb["id"], SH + ["echo out; echo err >&2; echo out2; echo err2 >&2"])
    assert bytes(r.stdout) == b"out\nout2\n"
    assert bytes(r.stderr) == b"err\nerr2\n"
    assert len(r.output) == len(r.stdout) + len(r.stderr)
    assert r.exit_code == 0


def test_env_cwd_and_default_user_on_base(api, base_sb):
    s = api.create_session(base_sb["id"],
                           SH + ['echo "$FOO|$(pwd)|$(id -u)|$(id -un)|$HOME"'],
                           env={"FOO": "bar baz"}, cwd="/tmp")
    assert s.rec["user"] == "user" and s.rec["cwd"] == "/tmp" and s.rec["env"] == {"FOO": "bar baz"}
    r = s.collect()
    assert r.exit_code == 0, r
    assert r.stdout.decode() == "bar baz|/tmp|1000|user|/home/user\n"


def test_user_root_on_base(api, base_sb):
    r = api.run(base_sb["id"], SH + ['echo "$(id -u)|$HOME"'], user="root")
    assert r.stdout.decode() == "0|/root\n", r


def test_sandbox_env_reaches_commands_and_session_env_wins(api, sb):
    r = api.run(sb["id"], SH + ['echo "$SB_LEVEL"'])
    assert r.stdout.decode() == "from-sandbox\n", r
    r = api.run(sb["id"], SH + ['echo "$SB_LEVEL"'], env={"SB_LEVEL": "from-session"})
    assert r.stdout.decode() == "from-session\n", r


def test_python_on_base(api, base_sb):
    r = api.run(base_sb["id"], ["python3", "-c", "print(6*7)"])
    assert bytes(r.stdout) == b"42\n" and r.exit_code == 0, r


def test_missing_binary_is_an_error_event(api, sb):
    s = api.create_session(sb["id"], ["/no/such/binary", "x"])
    r = s.collect()
    assert r.error is not None, f"no error event: {r}"
    assert re.search(r"/no/such/binary|no such file|not found", r.error, re.I), r.error
    assert not r.exited
    rec = s.wait_done()
    assert rec["state"] == "failed" and rec["error"], rec


def test_attach_with_get_and_query_token(api, sb):
    """EventSource style: GET with ?token=."""
    s = api.create_session(sb["id"], ["echo", "via-get"])
    r = s.attach(method="GET", how="query-token").collect()
    assert bytes(r.stdout) == b"via-get\n" and r.exit_code == 0


# ---- stdin


def test_stdin_round_trip_binary(api, sb):
    data = bytes(range(256)) * 64 + b"\0\0\r\n\xff" + os.urandom(3 * 1024 * 1024)
    s = api.create_session(sb["id"], ["cat"], stdin=True)
    assert s.rec["stdin"] is True
    job = s.start(timeout=120)
    s.wait_running()
    half = len(data) // 2
    s.send_stdin(data[:half])
    s.send_stdin(b"")  # empty writes are fine
    s.send_stdin(data[half:])
    s.close_stdin()
    r = job.wait()
    assert r.exit_code == 0, r
    assert len(r.stdout) == len(data)
    assert hashlib.sha256(r.stdout).hexdigest() == hashlib.sha256(data).hexdigest()
    s.send_stdin(b"late", expect=409)  # closed and finished


def test_stdin_close_flag_and_conflicts(api, sb):
    s = api.create_session(sb["id"], ["sh", "-c", "cat; echo done"], stdin=True)
    job = s.start(timeout=60)
    s.wait_running()
    s.send_stdin(b"line\n", close=True)
    r = job.wait()
    assert bytes(r.stdout) == b"line\ndone\n", r
    s.send_stdin(b"more", expect=409)


def test_stdin_to_session_without_stdin_is_409(api, sb):
    s = api.create_session(sb["id"], ["sleep", "30"])
    job = s.start(timeout=60)
    s.wait_running()
    err = s.send_stdin(b"nope", expect=409).json["error"]
    assert err["code"] == "conflict"
    s.signal("SIGKILL")
    assert job.wait().signal == 9


# ---- concurrency


def test_four_commands_run_in_parallel(api, sb):
    nap = 3
    sessions = [api.create_session(sb["id"], SH + [f"sleep {nap}; echo out-{i}"]) for i in range(4)]
    t0 = time.monotonic()
    jobs = [s.start(timeout=90) for s in sessions]
    results = [j.wait() for j in jobs]
    wall = time.monotonic() - t0
    for i, r in enumerate(results):
        assert bytes(r.stdout) == f"out-{i}\n".encode() and r.exit_code == 0, r
    assert wall < 4 * nap * 0.75, f"4 x sleep {nap} took {wall:.1f}s: not in parallel"
    recs = [s.get() for s in sessions]
    first_end = min(space.parse_time(x["ended_at"]) for x in recs)
    last_start = max(space.parse_time(x["started_at"]) for x in recs)
    assert last_start < first_end, "every command must start before any ends"


def test_five_sandboxes_at_once(api):
    t = api.template("minimal")
    refs = ["minimal", "minimal:latest", t["digest"], f"minimal@{t['digest']}", "minimal"]
    created = [api.create_sandbox(ref) for ref in refs]
    for (rec, _), ref in zip(created, refs):
        assert rec["template"] == ref and rec["template_digest"] == t["digest"], rec
    for _, op in created:
        assert api.wait_op(op["id"])["state"] == "succeeded"
    ids = [rec["id"] for rec, _ in created]
    assert len(set(ids)) == 5
    pids = [space.qemu_pid(i) for i in ids]
    assert len(set(pids)) == 5, "each sandbox needs its own QEMU"
    sessions = [api.create_session(i, ["echo", i]) for i in ids]
    jobs = [s.start(timeout=90) for s in sessions]
    for i, j in zip(ids, jobs):
        r = j.wait()
        assert bytes(r.stdout) == f"{i}\n".encode() and r.exit_code == 0, r
    for i in ids:
        api.delete_sandbox(i)


def test_sessions_share_the_sandbox_filesystem(api, sb):
    mark = os.urandom(8).hex()
    assert api.run(sb["id"], SH + [f"echo {mark} > /tmp/shared-{mark}"], user="root").exit_code == 0
    r = api.run(sb["id"], ["cat", f"/tmp/shared-{mark}"], user="root")
    assert r.stdout.decode() == mark + "\n"


def test_sandboxes_are_isolated_from_each_other(api, sb):
    other = api.new_sandbox("minimal")
    mark = os.urandom(8).hex()
    assert api.run(sb["id"], SH + [f"echo x > /tmp/iso-{mark}"], user="root").exit_code == 0
    r = api.run(other["id"], ["ls", f"/tmp/iso-{mark}"], user="root")
    assert r.exit_code != 0, "a file written in one sandbox is visible in another"
    api.delete_sandbox(other["id"])


def test_concurrent_attach_of_one_session(api, sb):
    """Two clients attached to one session both receive the whole output."""
    s = api.create_session(sb["id"], SH + ["sleep 1; seq 1 20000"])
    a = s.start(timeout=60)
    b = s.start(timeout=60)
    ra, rb = a.wait(), b.wait()
    want = "".join(f"{i}\n" for i in range(1, 20001)).encode()
    assert bytes(ra.stdout) == want and bytes(rb.stdout) == want
    assert ra.exit_code == rb.exit_code == 0

