"""Fork and named snapshots on real VMs: children are the parent at one instant (files, memory,
running processes), then diverge, each with its own identity; a named snapshot outlives its
sandbox; clones get the right wall clock even from a snapshot whose clock was a day behind."""

import time

import pytest

import space
from test_operations import advances, counter, host_and_guest_clock, start_counter


def urandom(api, sb_id):
    r = api.run(sb_id, ["sh", "-c", "head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'"])
    assert r.exit_code == 0 and len(bytes(r.stdout)) == 64, r
    return bytes(r.stdout)


def test_fork_three_children_share_the_instant_then_diverge(api):
    parent = api.new_sandbox("minimal", metadata={"role": "parent"}, timeout_s=3600)
    p = parent["id"]
    start_counter(api, p)
    assert api.run(p, ["sh", "-c", "echo from-parent > /root/disk-file; echo in-memory > /tmp/mem-file;"
                                   " sync"]).exit_code == 0
    at_fork = counter(api, p)

    r = api.fork(p, count=3)
    kids = r["children"]
    assert len(kids) == 3 and len(set(kids)) == 3 and p not in kids, r
    assert r["operation"]["kind"] == "fork" and r["operation"]["sandbox_id"] == p
    op = api.wait_op(r["operation"]["id"])
    assert op["state"] == "succeeded", op
    assert sorted(op["result"]["children"]) == sorted(kids), op
    try:
        for k in kids:
            rec = api.sandbox(k)
            assert rec["state"] == "running" and rec["parent_id"] == p and rec["start_kind"] == "fork", rec
            assert rec["metadata"] == {"role": "parent"}, rec
            out = api.run(k, ["sh", "-c", "cat /root/disk-file /tmp/mem-file; hostname"])
            assert bytes(out.stdout) == f"from-parent\nin-memory\n{k}\n".encode(), out
            # The parent's process runs on in each child, from where it was.
            assert counter(api, k) >= at_fork
            advances(api, k)
            assert host_and_guest_clock(api, k) < 1.0
        # They diverge: each child's writes are its own.
        for i, k in enumerate(kids):
            assert api.run(k, ["sh", "-c", f"echo child{i} > /root/disk-file"]).exit_code == 0
        for i, k in enumerate(kids):
            assert bytes(api.run(k, ["cat", "/root/disk-file"]).stdout) == f"child{i}\n".encode()
        assert bytes(api.run(p, ["cat", "/root/disk-file"]).stdout) == b"from-parent\n"
        # Never the same random bytes, though all came from one memory image.
        rnd = [urandom(api, k) for k in kids] + [urandom(api, p)]
        assert len(set(rnd)) == 4, rnd
        # The parent kept running throughout.
        assert api.sandbox(p)["state"] == "running"
        advances(api, p)
    finally:
        for k in kids:
            api.remove_sandbox(k)
        api.remove_sandbox(p)


def test_fork_of_a_paused_sandbox_leaves_it_paused(api):
    parent = api.new_sandbox("minimal", timeout_s=3600)
    p = parent["id"]
    try:
        api.do(p, "pause")
        r = api.fork(p, count=1)
        assert api.wait_op(r["operation"]["id"])["state"] == "succeeded"
        assert api.sandbox(p)["state"] == "paused"
        k = r["children"][0]
        assert bytes(api.run(k, ["echo", "child"]).stdout) == b"child\n"
        api.remove_sandbox(k)
        api.do(p, "resume")
    finally:
        api.remove_sandbox(p)


def test_fork_requests_are_checked(api, sb):
    api.expect_error("POST", f"/v1/sandboxes/{sb['id']}/fork", 400, {"count": 0})
    api.expect_error("POST", f"/v1/sandboxes/{sb['id']}/fork", 400, {"count": 17})
    api.expect_error("POST", f"/v1/sandboxes/{sb['id']}/fork", 400, {"count": "2"})
    api.expect_error("POST", "/v1/sandboxes/sb-0000000000000001/fork", 404, {"count": 1})


def test_named_snapshot_outlives_its_sandbox(api):
    src = api.new_sandbox("minimal", env={"FROM": "snapshot"}, timeout_s=3600)
    s = src["id"]
    assert api.run(s, ["sh", "-c", "echo golden-data > /root/g; echo tmp-data > /tmp/g; sync"]).exit_code == 0
    r = api.snapshot_sandbox(s, "golden-e2e")
    op = api.wait_op(r["operation"]["id"])
    assert op["state"] == "succeeded" and op["result"]["name"] == "golden-e2e", op
    snap = api.snapshot("golden-e2e")
    assert snap["kind"] == "named" and snap["state"] == "ready" and snap["bytes"] > 0, snap
    assert snap == api.snapshot(snap["id"]), "by name and by id: one snapshot"
    assert any(x["id"] == snap["id"] for x in api.snapshots())
    # The name is taken.
    api.expect_error("POST", f"/v1/sandboxes/{s}/snapshots", 409, {"name": "golden-e2e"})
    api.expect_error("POST", f"/v1/sandboxes/{s}/snapshots", 400, {"name": "../x"})
    assert api.sandbox(s)["state"] == "running", "the source runs on"
    api.remove_sandbox(s)

    kids = []
    try:
        for _ in range(2):
            rec = api.new_sandbox(snapshot="golden-e2e", timeout_s=3600)
            kids.append(rec["id"])
            assert rec["start_kind"] == "clone" and rec["snapshot"] == snap["id"], rec
            out = api.run(rec["id"], ["sh", "-c", "cat /root/g /tmp/g; echo $FROM"])
            assert bytes(out.stdout) == b"golden-data\ntmp-data\nsnapshot\n", out
        assert urandom(api, kids[0]) != urandom(api, kids[1])
        # A clone's size is the snapshot's.
        api.expect_error("POST", "/v1/sandboxes", 400, {"snapshot": "golden-e2e", "memory_mib": 4096})
        api.delete_snapshot("golden-e2e")
        api.expect_error("GET", "/v1/snapshots/golden-e2e", 404)
        api.expect_error("POST", "/v1/sandboxes", 404, {"snapshot": "golden-e2e"})
        # Clones of a deleted snapshot run on (their memory stays mapped).
        assert bytes(api.run(kids[0], ["cat", "/root/g"]).stdout) == b"golden-data\n"
    finally:
        for k in kids:
            api.remove_sandbox(k)


def test_clone_from_a_day_old_snapshot_has_the_right_clock(api):
    """A day-old snapshot, faked by setting the guest clock a day back before taking it."""
    src = api.new_sandbox("minimal", timeout_s=3600)
    s = src["id"]
    day_ago = int(time.time()) - 86400
    assert api.run(s, ["date", "-s", f"@{day_ago}"]).exit_code == 0
    assert host_and_guest_clock(api, s) > 80000
    r = api.snapshot_sandbox(s, "day-old-e2e")
    assert api.wait_op(r["operation"]["id"])["state"] == "succeeded"
    clone = api.new_sandbox(snapshot="day-old-e2e", timeout_s=3600)
    try:
        assert host_and_guest_clock(api, clone["id"]) < 1.0
        # The same for restore: the clock is a day behind when it is suspended.
        assert api.run(s, ["date", "-s", f"@{day_ago}"]).exit_code == 0
        api.do(s, "suspend")
        api.do(s, "restore")
        assert host_and_guest_clock(api, s) < 1.0
    finally:
        api.remove_sandbox(clone["id"])
        api.remove_sandbox(s)
        api.delete_snapshot("day-old-e2e")


def test_fork_while_the_daemon_restarts_leaves_no_half_fork(own_daemon):
    """A daemon killed while children start: afterwards every child is running or failed with
    a reason, and the parent runs."""
    api = own_daemon.api
    parent = api.new_sandbox("minimal", timeout_s=3600)
    p = parent["id"]
    r = api.fork(p, count=2)
    own_daemon.restart(space._signal.SIGKILL)
    assert api.sandbox(p)["state"] == "running"
    for k in r["children"]:
        rec = api.wait_sandbox_state(k, ("running", "failed"), timeout=60)
        assert rec["state"] == "running" or rec["error"], rec
    op = api.operation(r["operation"]["id"])
    assert op["state"] in ("succeeded", "failed"), op
    assert bytes(api.run(p, ["echo", "ok"]).stdout) == b"ok\n"
