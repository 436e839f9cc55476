"""Failure and recovery: a daemon restart (SIGTERM or SIGKILL) leaves sandboxes and running
commands intact; a QEMU that dies (under the daemon, after adoption, or while the daemon is
down) turns its sandbox `failed` with a reason; the daemon keeps serving throughout.
These tests use their own daemon (own_daemon) so that restarts do not disturb the others."""

import os
import signal
import time

import pytest

import space


def exec_works(api, sb_id):
    r = api.run(sb_id, ["echo", "works"])
    assert bytes(r.stdout) == b"works\n" and r.exit_code == 0, r


def kill_qemu_and_expect_failed(api, sb_id, timeout=10):
    pid = space.qemu_pid(sb_id)
    os.kill(pid, signal.SIGKILL)
    rec = api.wait_sandbox_state(sb_id, ("failed",), timeout=timeout)
    assert rec["error"] and rec["error"].strip(), f"failed without a reason: {rec}"
    return rec


# Every ~100 ms: its pid, a counter and the guest's uptime, until /tmp/stop-ticker appears.
TICKER = ["sh", "-c", "i=0; while [ ! -e /tmp/stop-ticker ] && [ $i -lt 3000 ]; do "
          "read up _ < /proc/uptime; echo \"$$ $i $up\"; i=$((i+1)); sleep 0.1; done"]
DOWN_S = 3.0  # how long the daemon stays down: a command that stalled would show a gap this long


def ticks(data):
    """[(pid, counter, uptime)] of complete lines."""
    out = []
    for line in bytes(data).decode().splitlines():
        pid, i, up = line.split()
        out.append((int(pid), int(i), float(up)))
    return out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_running_sandbox_and_command_survive_daemon_restart(own_daemon, sig):
    api = own_daemon.api
    sb, op = api.create_sandbox("minimal", metadata={"restart": sig.name})
    assert api.wait_op(op["id"])["state"] == "succeeded"
    pid = space.qemu_pid(sb["id"])
    s = api.create_session(sb["id"], TICKER)
    first = s.attach().collect(until=lambda r: r.stdout.count(b"\n") >= 10)
    assert not first.exited, first
    rec_before = s.get()
    assert rec_before["state"] == "running" and rec_before["pid"], rec_before
    sb_before = api.sandbox(sb["id"])

    if sig == signal.SIGKILL:
        own_daemon.kill()
    else:
        assert own_daemon.stop(sig) == 0
    time.sleep(DOWN_S)
    own_daemon.start()

    # Same VM, same process, still running; records survived.
    assert space.pid_alive(pid), "QEMU died with the daemon"
    assert space.qemu_pid(sb["id"]) == pid
    after = api.sandbox(sb["id"])
    assert after["state"] == "running", after
    assert after["created_at"] == sb_before["created_at"]
    assert after["metadata"] == {"restart": sig.name}
    assert api.operation(op["id"])["state"] == "succeeded"
    assert s.id in [x["id"] for x in api.sessions(sb["id"])]
    rec_after = s.get()
    assert rec_after["state"] == "running" and rec_after["pid"] == rec_before["pid"], \
        (rec_before, rec_after)

    # Let it tick a while under the new daemon, then stop it and read the rest.
    time.sleep(1.5)
    exec_works(api, sb["id"])
    assert api.run(sb["id"], ["touch", "/tmp/stop-ticker"]).exit_code == 0
    s.new_token()
    rest = s.collect(offset=first.last_id, timeout=60)
    assert rest.exit_code == 0, rest
    lines = ticks(first.stdout + rest.stdout)
    # One process throughout, the one the daemon reported before and after the restart.
    assert {p for p, _, _ in lines} == {rec_before["pid"]}, lines[:3]
    # Nothing lost or repeated: the counter runs 0, 1, 2, ... across the restart.
    assert [i for _, i, _ in lines] == list(range(len(lines))), "counter has a gap or repeat"
    # It ran on while the daemon was down: no pause in its own clock anywhere near DOWN_S,
    # and the ticks span more than the downtime.
    gaps = [b[2] - a[2] for a, b in zip(lines, lines[1:])]
    assert max(gaps) < DOWN_S / 2, f"the command stalled for {max(gaps):.2f}s (daemon down {DOWN_S}s)"
    assert lines[-1][2] - lines[0][2] > DOWN_S + 1.5, lines[-1]
    whole = s.collect(offset=0)
    assert bytes(whole.stdout) == bytes(first.stdout + rest.stdout) and whole.exit_code == 0
    rec = s.get()
    assert rec["state"] == "exited" and rec["exit_code"] == 0 and rec["output_bytes"] == len(whole.stdout)

    # New commands work, and the adopted QEMU is still watched: killing it fails the sandbox.
    exec_works(api, sb["id"])
    kill_qemu_and_expect_failed(api, sb["id"])
    exec_works(api, api.new_sandbox("minimal")["id"])


def test_qemu_killed_from_outside_fails_the_sandbox(own_daemon):
    api = own_daemon.api
    sb = api.new_sandbox("minimal")
    s = api.create_session(sb["id"], ["sleep", "100"])
    job = s.start(timeout=60)
    s.wait_running()

    rec = kill_qemu_and_expect_failed(api, sb["id"])
    assert rec["id"] == sb["id"]
    assert sb["id"] in {x["id"] for x in api.sandboxes(state="failed")}

    # The attached client is told, and the stream ends.
    r = job.wait(timeout=30)
    assert r.error is not None, f"no error event after the sandbox failed: {r}"
    assert s.get()["state"] == "failed"

    # A failed sandbox takes no commands, but can be deleted.
    err = api.expect_error("POST", f"/v1/sandboxes/{sb['id']}/sessions", 409, {"argv": ["true"]})
    assert err["code"] == "conflict"
    assert api.remove_sandbox(sb["id"])["state"] == "deleted"

    # The daemon keeps serving.
    exec_works(api, api.new_sandbox("minimal")["id"])


def test_qemu_gone_while_daemon_down_is_failed_at_start(own_daemon):
    api = own_daemon.api
    sb = api.new_sandbox("minimal")
    pid = space.qemu_pid(sb["id"])
    own_daemon.stop(signal.SIGTERM)
    assert space.pid_alive(pid), "QEMU must outlive the daemon"
    os.kill(pid, signal.SIGKILL)
    own_daemon.start()
    rec = api.wait_sandbox_state(sb["id"], ("failed",), timeout=10)
    assert rec["error"], rec
    err = api.expect_error("POST", f"/v1/sandboxes/{sb['id']}/sessions", 409, {"argv": ["true"]})
    assert err["code"] == "conflict"
    exec_works(api, api.new_sandbox("minimal")["id"])


def test_restart_keeps_deleted_sandboxes_deleted(own_daemon):
    api = own_daemon.api
    sb = api.new_sandbox("minimal")
    api.remove_sandbox(sb["id"])
    own_daemon.restart(signal.SIGTERM)
    assert api.sandbox(sb["id"])["state"] == "deleted"
    assert sb["id"] not in {x["id"] for x in api.sandboxes()}
    assert not space.qemu_pids(sb["id"])
