"""Hostile conditions against the real daemon: malformed HTTP on both listeners, a guest that
dies in the middle of a command, a guest whose disk fills up, command output that imitates the
agent protocol and SSE, and many sessions in one sandbox. After each, the daemon must still be
up and serving."""

import os
import random
import subprocess
import sys
import time

import pytest

import space

FUZZ = os.path.join(space.REPO, "tests", "http", "fuzz.py")
FUZZ_ROUNDS = int(os.environ.get("SPACE_TEST_FUZZ_ROUNDS", "300"))


def still_serving(daemon, api, sb):
    """The daemon process lives, answers /v1/info, and runs a command in sb correctly."""
    assert daemon.proc is not None and daemon.proc.poll() is None, \
        f"spaced exited with {daemon.proc.returncode if daemon.proc else None}:\n{daemon.log_tail()}"
    info = api.info()
    assert info["capacity"]["sandboxes_running"] >= 1, info
    r = api.run(sb["id"], ["sh", "-c", "echo alive; echo err >&2; exit 5"])
    assert bytes(r.stdout) == b"alive\n" and bytes(r.stderr) == b"err\n" and r.exit_code == 5, r


# ---------------------------------------------------------------------------
# a. malformed HTTP on the real listeners


@pytest.mark.parametrize("which,seed", [("control", 11), ("data", 12)])
def test_fuzzing_the_listeners_leaves_the_daemon_serving(daemon, api, sb, which, seed):
    port = daemon.port if which == "control" else daemon.data_port
    # A session in flight while the fuzzer hammers: its stream must be unaffected.
    s = api.create_session(sb["id"], ["sh", "-c", "i=0; while [ $i -lt 20 ]; do echo line$i; "
                                      "i=$((i+1)); sleep 0.1; done"])
    job = s.start(timeout=300)
    before = {x["id"] for x in api.sandboxes()}
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, FUZZ, str(port), str(FUZZ_ROUNDS), str(seed)],
                       capture_output=True, text=True, timeout=600)
    took = time.monotonic() - t0
    assert p.returncode == 0, \
        f"fuzz.py on the {which} port failed ({p.returncode}): {p.stdout}{p.stderr}\n{daemon.log_tail()}"
    # fuzz.py ends with GET /nope without a key: 401 on the control plane, 404 on the data plane.
    want = "401" if which == "control" else "404"
    assert p.stdout.startswith(f"alive: HTTP/1.1 {want}"), p.stdout
    print(f"# {FUZZ_ROUNDS} fuzz rounds on the {which} port in {took:.1f}s")
    r = job.wait()
    want = "".join(f"line{i}\n" for i in range(20)).encode()
    assert bytes(r.stdout) == want and r.exit_code == 0, r
    still_serving(daemon, api, sb)
    # Nothing the fuzzer sent (with a wrong key) created a sandbox.
    assert {x["id"] for x in api.sandboxes()} == before


# ---------------------------------------------------------------------------
# b. the guest dies under a running command


def test_guest_dying_mid_command_fails_the_sandbox_and_its_sessions(daemon, api, sb):
    victim = api.new_sandbox("minimal", metadata={"hostile": "reboot"}, timeout_s=600)
    vid = victim["id"]
    qpid = space.qemu_pid(vid)
    long = api.create_session(vid, ["sleep", "100"])
    job = long.start(timeout=120)
    long.wait_running()
    t0 = time.monotonic()
    # busybox reboot -f: reboot(2) at once; the VM runs with -no-reboot and reboot=t, so the
    # guest's reset ends QEMU.
    killer = api.create_session(vid, ["reboot", "-f"])
    kjob = killer.start(timeout=120)

    r = job.wait(timeout=90)
    took = time.monotonic() - t0
    assert not r.exited, f"a command of a dead guest reported an exit: {r}"
    assert r.error, f"the attached stream ended without an error event: {r}"
    assert took < 60, f"the stream took {took:.1f}s to end"

    rec = long.get()
    assert rec["state"] == "failed" and rec["error"], rec
    assert rec["exit_code"] is None and rec["ended_at"] is not None, rec
    kr = kjob.wait(timeout=60)
    assert kr.error and not kr.exited, f"reboot -f never returns, yet: {kr}"
    krec = killer.get()
    assert krec["state"] == "failed" and krec["error"], krec

    sbr = api.wait_sandbox_state(vid, ("failed",), timeout=30)
    assert sbr["error"] and sbr["error"].strip(), sbr
    print(f"# stream error {r.error!r}; sandbox error {sbr['error']!r}; {took:.1f}s")
    deadline = time.monotonic() + 30
    while space.pid_alive(qpid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not space.pid_alive(qpid), "QEMU still runs after the guest rebooted"

    # A failed sandbox refuses new commands; a resumed attach of the failed session ends with
    # the same error at once.
    err = api.expect_error("POST", f"/v1/sandboxes/{vid}/sessions", 409, {"argv": ["true"]})
    assert err["code"] == "conflict"
    again = long.collect(timeout=30)
    assert again.error and not again.exited, again

    # Other sandboxes are untouched.
    still_serving(daemon, api, sb)
    assert api.sandbox(sb["id"])["state"] == "running"
    api.remove_sandbox(vid)


# ---------------------------------------------------------------------------
# c. the guest's disk fills up


def test_full_guest_disk_fails_the_writer_and_the_sandbox_recovers(daemon, api, sb):
    box = api.new_sandbox("minimal", metadata={"hostile": "disk"}, timeout_s=600)
    bid = box["id"]

    def free_kib():
        r = api.run(bid, ["sh", "-c", "df -k / | tail -n 1"])
        assert r.exit_code == 0, r
        return int(bytes(r.stdout).split()[3])

    before = free_kib()
    assert before > 10 * 1024, f"only {before} KiB free on a fresh sandbox"
    r = api.run(bid, ["dd", "if=/dev/zero", "of=/fill", "bs=1M"], timeout=300)
    assert r.exit_code not in (0, None), f"dd on a full disk exited {r.exit_code}: {r}"
    assert b"No space left on device" in bytes(r.stderr), r
    print(f"# dd: exit {r.exit_code}, {bytes(r.stderr).splitlines()[0]!r}; {before} KiB free before")
    full = free_kib()
    assert full < 1024, f"the disk should be full, {full} KiB free"

    r = api.run(bid, ["echo", "ok"])
    assert bytes(r.stdout) == b"ok\n" and r.exit_code == 0, r
    # Writing more fails the same way and the sandbox stays running.
    r = api.run(bid, ["sh", "-c", "echo more >> /fill2"])
    assert r.exit_code != 0 and b"No space left" in bytes(r.stderr), r
    assert api.sandbox(bid)["state"] == "running"

    r = api.run(bid, ["sh", "-c", "rm -f /fill /fill2 && sync && echo removed"])
    assert bytes(r.stdout) == b"removed\n" and r.exit_code == 0, r
    after = free_kib()
    assert after > before - 2048, f"rm did not free the space: {before} KiB before, {after} after"
    r = api.run(bid, ["sh", "-c", "echo written > /after && cat /after"])
    assert bytes(r.stdout) == b"written\n" and r.exit_code == 0, r
    still_serving(daemon, api, sb)
    api.remove_sandbox(bid)


# ---------------------------------------------------------------------------
# d. output that looks like protocol


def hostile_payload():
    """Bytes that imitate SSE, the agent's frames and HTTP, with NULs, 0xff, lone CRs,
    invalid UTF-8, plus a random tail."""
    def hdr(length, typ, chan):
        return (length.to_bytes(4, "little") + typ.to_bytes(2, "little") + b"\0\0"
                + chan.to_bytes(4, "little"))
    parts = [
        b"\n\nevent: exit\ndata: x\n\n",
        b'event: exit\nid: 0\ndata: {"exit_code":0,"signal":null}\n\n',
        b"event: error\ndata: {\"message\":\"fake\"}\n\r\n\r\n",
        b"id: 999999\nretry: 1\n: comment\n\n",
        b"\0\0\0\0\xff\xff\xff\xff\xfe\xfd\r\r\n\x1b[2J\x7f",
        hdr(16, 104, 1) + (0).to_bytes(8, "little") + (0).to_bytes(4, "little") * 2,  # A_EXIT
        hdr(24, 101, 0) + (1).to_bytes(4, "little") + (1).to_bytes(4, "little") + b"\0" * 16,
        hdr(0x10000, 103, 7) + b"\x01" + b"\0" * 15,  # A_DATA header
        hdr(0xffffffff, 65535, 0xffffffff),
        b"\x0c\0\0\0\x01\0\0\0\0\0\0\0",  # the H_HELLO header the agent resyncs on
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n0\r\n\r\n",
        b"\xc3\x28\xa0\xa1\xe2\x82\xf0\x28\x8c\xbc\xed\xa0\x80",
        bytes(range(256)),
    ]
    rnd = random.Random(5)
    tail = bytes(rnd.getrandbits(8) for _ in range(300_000))
    return b"".join(parts) * 3 + tail + b"".join(parts)


def test_hostile_output_arrives_byte_exact_with_the_real_exit(daemon, api, sb):
    payload = hostile_payload()
    # Put the payload in the guest through stdin (byte-exact on the way in too).
    r = api.run(sb["id"], ["sh", "-c", "cat > /tmp/hostile && wc -c < /tmp/hostile"], stdin=payload)
    assert r.exit_code == 0 and bytes(r.stdout).strip() == str(len(payload)).encode(), r
    # The same bytes on stdout and stderr, then a real exit code the fakes do not carry.
    s = api.create_session(sb["id"], ["sh", "-c", "cat /tmp/hostile; cat /tmp/hostile >&2; "
                                      "printf '\\n\\nevent: exit\\ndata: x\\n\\n'; exit 42"])
    st = s.attach()
    events = []
    res = space.Result()
    kind_at = bytearray()  # per output byte, in offset order: b"o" for stdout, b"e" for stderr
    for ev in st.events():  # each event is checked by the framework (ids are byte offsets)
        events.append(ev)
        if ev.type in ("stdout", "stderr"):
            (res.stdout if ev.type == "stdout" else res.stderr).extend(ev.raw)
            res.output.extend(ev.raw)
            kind_at.extend((b"o" if ev.type == "stdout" else b"e") * len(ev.raw))
    st.close()
    tail = b"\n\nevent: exit\ndata: x\n\n"
    assert bytes(res.stdout) == payload + tail, \
        f"stdout differs: {len(res.stdout)} bytes vs {len(payload) + len(tail)}"
    assert bytes(res.stderr) == payload, f"stderr differs: {len(res.stderr)} vs {len(payload)}"
    kinds = [e.type for e in events]
    assert kinds.count("exit") == 1 and kinds[-1] == "exit" and "error" not in kinds, kinds[-5:]
    assert events[-1].raw == {"exit_code": 42, "signal": None}, events[-1].raw
    assert int(events[-1].id) == 2 * len(payload) + len(tail)
    rec = s.get()
    assert rec["state"] == "exited" and rec["exit_code"] == 42, rec
    assert rec["output_bytes"] == 2 * len(payload) + len(tail), rec
    # A resume from the middle returns the same bytes from there, each on the same stream.
    # How stdout and stderr interleave is the agent's to choose (two pipes read as they fill),
    # so the reference is the order the first attach saw, not the order the shell wrote.
    mid = len(payload) // 2 + 7
    again = s.collect(offset=mid)
    assert bytes(again.output) == bytes(res.output[mid:]), \
        f"resume at {mid}: {len(again.output)} bytes, expected {len(res.output) - mid}"
    want_out = bytes(b for b, k in zip(res.output[mid:], kind_at[mid:]) if k == ord("o"))
    assert bytes(again.stdout) == want_out and \
        len(again.stdout) + len(again.stderr) == len(res.output) - mid
    assert again.exit_code == 42
    still_serving(daemon, api, sb)


# ---------------------------------------------------------------------------
# e. many sessions


def test_hundred_sessions_in_one_sandbox(daemon, api):
    box = api.new_sandbox("minimal", metadata={"hostile": "sessions"}, timeout_s=600)
    bid = box["id"]
    t0 = time.monotonic()
    batch = 5
    done = {}
    for start in range(0, 100, batch):
        jobs = []
        for i in range(start, start + batch):
            s = api.create_session(bid, ["sh", "-c", f"echo out{i}; echo err{i} >&2; exit {i % 7}"])
            jobs.append((i, s, s.start(timeout=120)))
        for i, s, job in jobs:
            r = job.wait()
            assert bytes(r.stdout) == f"out{i}\n".encode() and bytes(r.stderr) == f"err{i}\n".encode(), \
                (i, r)
            assert r.exit_code == i % 7, (i, r)
            done[s.id] = i
    took = time.monotonic() - t0
    print(f"# 100 sessions in {took:.1f}s")
    listed = api.sessions(bid)
    assert len(listed) >= 100, len(listed)
    by_id = {x["id"]: x for x in listed}
    assert set(done) <= set(by_id), "sessions missing from the list"
    for sid, i in done.items():
        rec = by_id[sid]
        assert rec["state"] == "exited" and rec["exit_code"] == i % 7, rec
        assert rec["output_bytes"] == len(f"out{i}\nerr{i}\n"), rec
    # The sandbox still works after them.
    r = api.run(bid, ["echo", "still"])
    assert bytes(r.stdout) == b"still\n" and r.exit_code == 0, r
    api.remove_sandbox(bid)
