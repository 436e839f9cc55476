"""Lifecycle operations on real VMs: pause/resume, suspend/restore (also across a daemon
restart), stop/start, wake, timeouts that suspend, and the 409 every invalid transition gets.
Processes, files, sessions and their output offsets come back exactly."""

import os
import signal
import time

import pytest

import space

# A process that outlives its session: it writes a counter to /tmp every 0.2 s (by rename, so
# a reader never sees the file half written).
COUNTER = ["sh", "-c", "(i=0; while true; do i=$((i+1)); echo $i > /tmp/counter.new;"
           " mv /tmp/counter.new /tmp/counter; sleep 0.2; done) >/dev/null 2>&1 & echo started"]


def counter(api, sb_id):
    r = api.run(sb_id, ["cat", "/tmp/counter"])
    assert r.exit_code == 0, r
    return int(bytes(r.stdout))


def start_counter(api, sb_id):
    r = api.run(sb_id, COUNTER)
    assert bytes(r.stdout) == b"started\n", r
    deadline = time.monotonic() + 20
    while True:
        r = api.run(sb_id, ["sh", "-c", "cat /tmp/counter 2>/dev/null || echo 0"])
        if int(bytes(r.stdout)) >= 2:
            return
        assert time.monotonic() < deadline, "the counter did not start"
        time.sleep(0.2)


def advances(api, sb_id, timeout=20):
    """The counter moves on from where it is."""
    first = counter(api, sb_id)
    deadline = time.monotonic() + timeout
    while counter(api, sb_id) <= first:
        assert time.monotonic() < deadline, f"the counter stays at {first}"
        time.sleep(0.3)
    return first


def host_and_guest_clock(api, sb_id):
    """How far the guest's wall clock is from the host's, at least: the guest read whole
    seconds g (busybox date), so its clock was in [g, g+1) while the host's was in
    [before, after]; the answer is the gap between the two intervals (0 if they meet)."""
    before = time.time()
    r = api.run(sb_id, ["date", "+%s"])
    after = time.time()
    g = int(bytes(r.stdout))
    if g + 1 < before:
        return before - (g + 1)
    if g > after:
        return g - after
    return 0.0


@pytest.fixture(scope="module")
def box(api):
    rec = api.new_sandbox("minimal", metadata={"module": "operations"}, timeout_s=3600)
    start_counter(api, rec["id"])
    yield rec
    api.remove_sandbox(rec["id"])


def test_pause_stops_the_vcpus_and_resume_goes_on(api, box):
    sb = box["id"]
    before = advances(api, sb)
    paused = api.do(sb, "pause")
    assert paused["state"] == "paused", paused
    pid = space.qemu_pid(sb)
    assert pid and space.pid_alive(pid), "a paused VM stays resident"
    time.sleep(2.0)
    running = api.do(sb, "resume")
    assert running["state"] == "running"
    # Two seconds passed; a counter that ran would be ~10 further along.
    now = counter(api, sb)
    assert now - before < 8, f"the counter ran while paused: {before} -> {now}"
    advances(api, sb)
    assert host_and_guest_clock(api, sb) < 1.0, "the guest clock was not set after resume"


def test_suspend_releases_the_vm_and_restore_brings_everything_back(api, box, daemon):
    sb = box["id"]
    advances(api, sb)
    assert api.run(sb, ["sh", "-c", "echo kept > /root/file && sync"]).exit_code == 0
    # A command running across suspend and restore keeps its output offsets.
    s = api.create_session(sb, ["sh", "-c", "for i in $(seq 1 20); do echo line$i; sleep 0.2; done; exit 5"])
    first = s.attach().collect(until=lambda r: r.stdout.count(b"\n") >= 3)
    pid = space.qemu_pid(sb)

    suspended = api.do(sb, "suspend")
    assert suspended["state"] == "suspended", suspended
    assert suspended["suspended_bytes"] and suspended["suspended_bytes"] > 0, suspended
    assert not space.pid_alive(pid), "QEMU still runs after suspend"
    assert space.qemu_pids(sb) == [], "a suspended sandbox has no QEMU"
    err = api.expect_error("POST", f"/v1/sandboxes/{sb}/sessions", 409, {"argv": ["true"]})
    assert "suspended" in err["message"], err

    restored = api.do(sb, "restore")
    assert restored["state"] == "running" and restored["suspended_bytes"] is None, restored
    assert bytes(api.run(sb, ["cat", "/root/file"]).stdout) == b"kept\n"
    advances(api, sb)
    assert host_and_guest_clock(api, sb) < 1.0
    s.new_token()
    rest = s.collect(offset=first.last_id, timeout=60)
    assert bytes(first.stdout + rest.stdout) == b"".join(b"line%d\n" % i for i in range(1, 21))
    assert not first.stderr and not rest.stderr, (first, rest)
    assert rest.exit_code == 5, rest


def test_wake_and_a_timeout_that_suspends(api):
    rec = api.new_sandbox("minimal", timeout_s=3600)
    sb = rec["id"]
    try:
        w = api.wake(sb)
        assert w["operation"] is None and w["sandbox"]["state"] == "running", "wake of a running sandbox"
        got = api.set_timeout(sb, 2, "suspend")
        assert got["on_timeout"] == "suspend" and got["timeout_s"] == 2 and got["expires_at"], got
        api.wait_sandbox_state(sb, ("suspended",), timeout=60)
        w = api.wake(sb)
        assert w["operation"]["kind"] == "restore", w
        assert api.wait_op(w["operation"]["id"])["state"] == "succeeded"
        after = api.sandbox(sb)
        assert after["state"] == "running", after
        # Restored with its timeout running again from now.
        assert after["expires_at"] and space.parse_time(after["expires_at"]) > time.time(), after
        api.set_timeout(sb, 0)
        assert api.sandbox(sb)["expires_at"] is None
    finally:
        api.remove_sandbox(sb)


def test_stop_keeps_the_disk_and_start_boots_it(api):
    rec = api.new_sandbox("minimal", timeout_s=3600)
    sb = rec["id"]
    try:
        assert api.run(sb, ["sh", "-c", "echo on-disk > /root/persist; echo gone > /tmp/volatile"]).exit_code == 0
        pid = space.qemu_pid(sb)
        stopped = api.do(sb, "stop")
        assert stopped["state"] == "stopped" and not space.pid_alive(pid), stopped
        started = api.do(sb, "start")
        assert started["state"] == "running", started
        r = api.run(sb, ["sh", "-c", "cat /root/persist; cat /tmp/volatile 2>/dev/null || echo none"])
        assert bytes(r.stdout) == b"on-disk\nnone\n", r
        # Stop works from suspended too: the saved state is dropped, the disk kept.
        api.do(sb, "suspend")
        assert api.do(sb, "stop")["state"] == "stopped"
        w = api.wake(sb)
        assert w["operation"]["kind"] == "start"
        assert api.wait_op(w["operation"]["id"])["state"] == "succeeded"
        assert bytes(api.run(sb, ["cat", "/root/persist"]).stdout) == b"on-disk\n"
    finally:
        api.remove_sandbox(sb)


# (state the sandbox is put in, action, the state named in the refusal)
INVALID = [
    ("running", "resume"), ("running", "restore"), ("running", "start"),
    ("paused", "pause"), ("paused", "restore"), ("paused", "start"),
    ("suspended", "pause"), ("suspended", "resume"), ("suspended", "suspend"), ("suspended", "start"),
    ("stopped", "pause"), ("stopped", "resume"), ("stopped", "suspend"), ("stopped", "restore"),
    ("stopped", "stop"),
]


def test_every_invalid_transition_is_a_409_naming_the_state(api):
    rec = api.new_sandbox("minimal", timeout_s=3600)
    sb = rec["id"]
    reach = {"running": [], "paused": ["pause"], "suspended": ["suspend"], "stopped": ["stop"]}
    back = {"running": [], "paused": ["resume"], "suspended": ["restore"], "stopped": ["start"]}
    try:
        for state in ("running", "paused", "suspended", "stopped"):
            for a in reach[state]:
                api.do(sb, a)
            assert api.sandbox(sb)["state"] == state
            for s, action in INVALID:
                if s != state:
                    continue
                err = api.expect_error("POST", f"/v1/sandboxes/{sb}/{action}", 409, {})
                assert f"is {state}" in err["message"] and action in err["message"], err
            # Fork and snapshot need a VM.
            if state in ("suspended", "stopped"):
                api.expect_error("POST", f"/v1/sandboxes/{sb}/fork", 409, {"count": 1})
                api.expect_error("POST", f"/v1/sandboxes/{sb}/snapshots", 409, {"name": f"x-{state}"})
            for a in back[state]:
                api.do(sb, a)
        # One operation at a time: the second is refused, naming the first.
        _, op = api.act(sb, "suspend")
        err = api.expect_error("POST", f"/v1/sandboxes/{sb}/pause", 409, {})
        assert op["id"] in err["message"] or "suspend" in err["message"], err
        assert api.wait_op(op["id"])["state"] == "succeeded"
        # Unknown ids and bodies.
        api.expect_error("POST", "/v1/sandboxes/sb-0000000000000000/pause", 404, {})
        api.expect_error("POST", f"/v1/sandboxes/{sb}/restore", 400, {"force": True})
        api.do(sb, "restore")
    finally:
        api.remove_sandbox(sb)
    # A deleted sandbox refuses everything with 409.
    err = api.expect_error("POST", f"/v1/sandboxes/{sb}/resume", 409, {})
    assert "deleted" in err["message"], err


def test_suspend_then_daemon_restart_then_restore(own_daemon):
    api = own_daemon.api
    rec = api.new_sandbox("minimal", timeout_s=3600)
    sb = rec["id"]
    start_counter(api, sb)
    assert api.run(sb, ["sh", "-c", "echo across-restart > /root/f && sync"]).exit_code == 0
    api.do(sb, "suspend")
    own_daemon.restart(signal.SIGKILL)
    assert api.sandbox(sb)["state"] == "suspended"
    api.do(sb, "restore")
    assert bytes(api.run(sb, ["cat", "/root/f"]).stdout) == b"across-restart\n"
    advances(api, sb)
    # And it is still a full citizen: suspend and restore once more.
    api.do(sb, "suspend")
    api.do(sb, "restore")
    advances(api, sb)
    api.remove_sandbox(sb)


def test_suspend_leaves_no_memory_behind(own_daemon):
    """A suspended sandbox costs disk only: no QEMU, nothing of its on tmpfs."""
    api = own_daemon.api
    rec = api.new_sandbox("minimal", timeout_s=3600)
    sb = rec["id"]
    api.do(sb, "suspend")
    tmpfs = f"/dev/shm/space-{own_daemon.state_tag()}"
    for root, _dirs, files in os.walk(tmpfs):
        for f in files:
            assert sb not in f, os.path.join(root, f)
    snap_dirs = os.listdir(os.path.join(own_daemon.state_dir, "snapshots"))
    assert len(snap_dirs) >= 1, "the saved state lives under the state directory"
    api.remove_sandbox(sb)
    # Deleting a suspended sandbox removes its saved state.
    left = [d for d in os.listdir(os.path.join(own_daemon.state_dir, "snapshots"))
            if os.path.isdir(os.path.join(own_daemon.state_dir, "snapshots", d))]
    assert not (set(left) & set(snap_dirs)), f"saved state left behind: {left}"
