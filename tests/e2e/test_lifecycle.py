"""Sandbox lifecycle at its edges: expiry (timeout_s), deletion while creating, a daemon killed
while a sandbox boots, the state directory's disk running full under a streaming command, and a
QEMU that dies before its guest agent answers.

All tests use daemons of their own: own_daemon (restarted by one test) and, for the full disk, a
daemon whose state directory is a small tmpfs mounted here."""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import pytest

import space

MIB = 1 << 20


def exec_works(api, sb_id):
    r = api.run(sb_id, ["echo", "works"], timeout=60)
    assert bytes(r.stdout) == b"works\n" and r.exit_code == 0, r


def wait_no_qemu(sb_id, timeout=5):
    deadline = time.monotonic() + timeout
    while space.qemu_pids(sb_id):
        assert time.monotonic() < deadline, \
            f"QEMU of {sb_id} still alive after {timeout}s: {space.qemu_pids(sb_id)}"
        time.sleep(0.05)


# ---------------------------------------------------------------------------
# 1. timeout_s


def test_timeout_expiry_deletes_the_sandbox_and_ends_its_commands(own_daemon):
    api = own_daemon.api
    t0 = time.monotonic()
    short, short_op = api.create_sandbox("minimal", timeout_s=3, metadata={"t": "expire"})
    assert short["timeout_s"] == 3 and short["expires_at"] is not None, short
    assert space.parse_time(short["expires_at"]) - space.parse_time(short["created_at"]) \
        == pytest.approx(3.0, abs=0.01), short

    op = api.wait_op(short_op["id"], timeout=30)
    assert op["state"] == "succeeded", \
        f"the sandbox must boot within its 3 s lifetime for this test: {op}"
    rec = api.sandbox(short["id"])
    assert rec["state"] == "running" and rec["expires_at"] == short["expires_at"], rec
    pid = space.qemu_pid(short["id"])

    # Created once the short one runs (not to slow its boot), it lives through the expiry.
    never, never_op = api.create_sandbox("minimal", timeout_s=0, metadata={"t": "never"})
    t_never = time.monotonic()
    assert never["timeout_s"] == 0 and never["expires_at"] is None, never

    # A command that would outlive the sandbox, attached.
    s = api.create_session(short["id"], ["sleep", "100"])
    job = s.start(timeout=30)
    s.wait_running(timeout=10)

    rec = api.wait_sandbox_state(short["id"], ("deleted",), timeout=10)
    gone_after = time.monotonic() - t0
    assert 2.5 <= gone_after <= 8.5, f"expired after {gone_after:.1f}s, want ~3s: {rec}"
    assert space.parse_time(rec["updated_at"]) >= space.parse_time(short["expires_at"]) - 0.01, rec
    assert not space.pid_alive(pid), "QEMU of the expired sandbox is still alive"
    wait_no_qemu(short["id"])
    assert short["id"] not in {x["id"] for x in api.sandboxes()}
    assert short["id"] in {x["id"] for x in api.sandboxes(state="deleted")}

    # The expiry went through a delete operation, which succeeded.
    log = own_daemon.log_text()
    assert f"sandbox {short['id']}: deleting (timeout reached)" in log
    m = re.search(rf"operation (op-[0-9a-f]{{16}}) \(delete {short['id']}\) succeeded", log)
    assert m, "no delete operation logged for the expired sandbox"
    dop = api.operation(m.group(1))
    assert dop["kind"] == "delete" and dop["state"] == "succeeded" and dop["sandbox_id"] == short["id"]

    # The attached client was told, and its stream ended.
    r = job.wait(timeout=15)
    assert r.error is not None and not r.exited, f"want an error event, got {r}"
    assert "deleted" in r.error, r.error
    srec = s.get()
    assert srec["state"] == "failed" and srec["error"], srec

    # timeout_s=0 never expires: still running seconds later, no expires_at, usable.
    assert api.wait_op(never_op["id"], timeout=30)["state"] == "succeeded"
    while time.monotonic() - t_never < 4.5:
        time.sleep(0.2)
    rec = api.sandbox(never["id"])
    assert rec["state"] == "running" and rec["expires_at"] is None and rec["timeout_s"] == 0, rec
    assert space.qemu_pids(never["id"])
    exec_works(api, never["id"])
    assert api.remove_sandbox(never["id"])["state"] == "deleted"


# ---------------------------------------------------------------------------
# 2. delete while creating


def test_delete_while_creating_cancels_the_create(own_daemon):
    api = own_daemon.api
    sb, create_op = api.create_sandbox("minimal")
    dsb, delete_op = api.delete_sandbox(sb["id"])
    assert dsb["state"] in ("deleting", "deleted"), dsb
    assert delete_op["id"] != create_op["id"]

    cop = api.wait_op(create_op["id"], timeout=30)
    assert cop["state"] == "failed", f"create must be cancelled by the delete: {cop}"
    assert "cancel" in cop["error"], cop
    dop = api.wait_op(delete_op["id"], timeout=30)
    assert dop["state"] == "succeeded" and dop["error"] is None, dop
    assert dop["kind"] == "delete" and dop["sandbox_id"] == sb["id"]
    assert api.sandbox(sb["id"])["state"] == "deleted"
    wait_no_qemu(sb["id"])
    api.expect_error("DELETE", f"/v1/sandboxes/{sb['id']}", 409)


# ---------------------------------------------------------------------------
# 3. daemon killed while a sandbox boots


def test_daemon_killed_while_booting_readopts_the_creating_sandbox(own_daemon):
    api = own_daemon.api
    # A size other than the template's: a cold boot, which runs on its own while the daemon
    # is away (a clone's state load cannot; see the next test).
    mem = api.template("minimal")["memory_mib"] + 64
    sb, op = api.create_sandbox("minimal", memory_mib=mem, metadata={"t": "boot-restart"})
    t_kill = time.monotonic()
    # QEMU starts a loop turn after the 202; kill the daemon as soon as it has.
    while not space.qemu_pids(sb["id"]):
        assert time.monotonic() - t_kill < 5, "no QEMU 5 s after the create"
        time.sleep(0.005)
    own_daemon.kill()
    kill_delay = time.monotonic() - t_kill
    # (the daemon may be bringing up a ready-snapshot builder at the same moment: the bound is
    # loose; what matters is checked next, that the guest had not answered yet)
    assert kill_delay < 2.0, f"SIGKILL came {kill_delay * 1000:.0f} ms after the 202"
    assert op["state"] in ("pending", "running"), op
    # The kill came before the guest agent answered: the daemon never saw the sandbox run.
    assert f"sandbox {sb['id']}: creating -> running" not in own_daemon.log_text(), \
        "the sandbox booted before the daemon was killed; the test did not test a boot"
    pid = space.qemu_pid(sb["id"])  # QEMU outlives the daemon

    own_daemon.start()
    done = api.wait_op(op["id"], timeout=60)
    took = time.monotonic() - t_kill
    assert done["state"] == "succeeded", f"create after the restart: {done}"
    rec = api.sandbox(sb["id"])
    assert rec["state"] == "running" and rec["error"] is None, rec
    assert rec["metadata"] == {"t": "boot-restart"}
    assert space.qemu_pid(sb["id"]) == pid, "the VM was replaced instead of re-adopted"
    assert f"sandbox {sb['id']}: adopted qemu pid {pid} (creating)" in own_daemon.log_text()
    exec_works(api, sb["id"])
    print(f"create completed {took:.1f}s after the daemon was killed")
    assert api.remove_sandbox(sb["id"])["state"] == "deleted"


def test_daemon_killed_while_a_clone_starts_still_creates_it(own_daemon):
    """A clone killed with its daemon before its state loaded starts over from the snapshot;
    one that loaded is continued. Either way the create succeeds and the sandbox works."""
    api = own_daemon.api
    api.wait_ready_snapshot("minimal")
    sb, op = api.create_sandbox("minimal", metadata={"t": "clone-restart"})
    own_daemon.kill()
    own_daemon.start()
    done = api.wait_op(op["id"], timeout=60)
    assert done["state"] == "succeeded", f"create after the restart: {done}"
    rec = api.sandbox(sb["id"])
    assert rec["state"] == "running" and rec["start_kind"] == "clone", rec
    exec_works(api, sb["id"])
    assert len(space.qemu_pids(sb["id"])) == 1, "one VM per sandbox, whatever happened"
    assert api.remove_sandbox(sb["id"])["state"] == "deleted"


def test_a_create_whose_vm_is_gone_after_a_restart_is_carried_out(own_daemon):
    """The create is on disk before QEMU starts: if, after a restart, the sandbox is still
    creating and has no VM (never spawned, or gone with the daemon), the daemon starts one."""
    api = own_daemon.api
    mem = api.template("minimal")["memory_mib"] + 64  # a boot: slow enough to catch
    sb, op = api.create_sandbox("minimal", memory_mib=mem)
    t0 = time.monotonic()
    while not space.qemu_pids(sb["id"]):
        assert time.monotonic() - t0 < 5, "no QEMU 5 s after the create"
        time.sleep(0.005)
    own_daemon.kill()
    for pid in space.qemu_pids(sb["id"]):
        os.kill(pid, signal.SIGKILL)
    wait_no_qemu(sb["id"])
    own_daemon.start()
    done = api.wait_op(op["id"], timeout=60)
    assert done["state"] == "succeeded", done
    assert api.sandbox(sb["id"])["state"] == "running"
    exec_works(api, sb["id"])
    assert len(space.qemu_pids(sb["id"])) == 1
    api.remove_sandbox(sb["id"])


def forget_recorded_pid(daemon, sb_id):
    """What a daemon that died before writing the pid down leaves: the row without it, in
    whichever store the daemon uses (SQLite by default; PostgreSQL under make test-postgres).
    Returns how many rows changed."""
    assert re.fullmatch(r"sb-[0-9a-f]{16}", sb_id), sb_id  # (a literal below: our own id)
    args = daemon.extra_args
    store = args[args.index("--store") + 1] if "--store" in args else ""
    if store.startswith(("postgres://", "postgresql://")):
        import sys
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pg"))
        from pgserver import pg_bindir
        sql = (f"WITH u AS (UPDATE sandboxes SET pid = 0, pid_start = 0 WHERE id = '{sb_id}' "
               "RETURNING 1) SELECT count(*) FROM u")
        out = subprocess.run([f"{pg_bindir()}/psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", store,
                              "-c", sql], check=True, stdout=subprocess.PIPE, text=True).stdout
        return int(out.strip())
    import sqlite3
    db = sqlite3.connect(os.path.join(daemon.state_dir, "space.db"))
    with db:
        n = db.execute("UPDATE sandboxes SET pid = 0, pid_start = 0 WHERE id = ?", (sb_id,)).rowcount
    db.close()
    return n


def test_qemu_whose_pid_was_never_recorded_is_found_by_id(own_daemon):
    """The daemon can die between starting QEMU and writing its pid down; the next start must
    find that QEMU by the sandbox id on its command line instead of leaving it orphaned."""
    api = own_daemon.api
    sb = api.new_sandbox("minimal", timeout_s=120)
    pid = space.qemu_pid(sb["id"])
    own_daemon.kill()
    assert forget_recorded_pid(own_daemon, sb["id"]) == 1
    own_daemon.start()
    rec = api.sandbox(sb["id"])
    assert rec["state"] == "running" and rec["error"] is None, rec
    assert space.qemu_pid(sb["id"]) == pid, "the QEMU was not re-adopted"
    assert f"sandbox {sb['id']}: found its qemu (pid {pid}) by id" in own_daemon.log_text()
    exec_works(api, sb["id"])
    assert api.remove_sandbox(sb["id"])["state"] == "deleted"
    wait_no_qemu(sb["id"])


# ---------------------------------------------------------------------------
# 5. QEMU dies during boot


def test_qemu_killed_during_boot_fails_the_create(own_daemon):
    api = own_daemon.api
    sb, op = api.create_sandbox("minimal")
    # QEMU is started before the 202; kill it at once, before the agent can answer.
    pid = None
    deadline = time.monotonic() + 5
    while pid is None:
        pids = space.qemu_pids(sb["id"])
        pid = pids[0] if pids else None
        assert pid or time.monotonic() < deadline, "no QEMU appeared for the new sandbox"
    os.kill(pid, signal.SIGKILL)

    done = api.wait_op(op["id"], timeout=30)
    assert done["state"] == "failed", f"create must fail when QEMU dies: {done}"
    assert "qemu" in done["error"].lower(), done
    rec = api.wait_sandbox_state(sb["id"], ("failed",), timeout=10)
    assert rec["error"] and "qemu" in rec["error"].lower(), rec
    assert f"sandbox {sb['id']}: creating -> running" not in own_daemon.log_text()
    wait_no_qemu(sb["id"])
    api.expect_error("POST", f"/v1/sandboxes/{sb['id']}/sessions", 409, {"argv": ["true"]})
    assert api.remove_sandbox(sb["id"])["state"] == "deleted"
    # The daemon keeps creating sandboxes.
    exec_works(api, api.new_sandbox("minimal", timeout_s=60)["id"])


# ---------------------------------------------------------------------------
# 4. the state directory's disk runs full under a streaming command

TMPFS_MIB = 160
LEAVE_FREE_MIB = 8


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


@pytest.fixture
def tmpfs_daemon(request):
    """A daemon whose state dir is a small tmpfs. Its extra arguments come from indirect
    parametrization; by default the free-disk watermark is off, so the spool meets ENOSPC."""
    extra = getattr(request, "param", ["--output-min-free", "0"])
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs for the state directory needs root")
    tdir = tempfile.mkdtemp(prefix="space-e2e-tmpl-")
    # Only `minimal`: it is copied (another filesystem) and must fit; `base` would not.
    os.symlink(os.path.join(space.TEMPLATES_DIR, "minimal"), os.path.join(tdir, "minimal"))
    d = space.Daemon("spaced-tmpfs", templates_dir=tdir, extra_args=extra)
    mounted = False
    try:
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_MIB}m,mode=0700", "tmpfs",
                            d.state_dir], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs: {r.stderr.strip()}")
        mounted = True
        d.start()
        yield d
    finally:
        try:
            d.cleanup()  # stops spaced, kills our QEMUs, empties the dirs; raises on a problem
        finally:
            if mounted:
                if subprocess.run(["umount", d.state_dir]).returncode != 0:
                    subprocess.run(["umount", "-l", d.state_dir])
            if not os.environ.get("SPACE_TEST_KEEP"):
                shutil.rmtree(d.root, ignore_errors=True)
            shutil.rmtree(tdir, ignore_errors=True)


class Counter:
    """Collects one attachment on a thread, keeping only counts (100 MiB stays out of memory);
    the Stream checks that every event's id is its offset, so nothing is lost or repeated."""

    def __init__(self, session, timeout):
        self.session = session
        self.stdout = self.stderr = 0
        self.nonzero = 0
        self.exit = None
        self.error = None
        self.exc = None
        self.ended = None
        self.timeout = timeout
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            st = self.session.attach(timeout=self.timeout)
            assert st.status == 200, st.error_response
            for ev in st.events():
                if ev.type == "stdout":
                    self.stdout += len(ev.raw)
                    self.nonzero += len(ev.raw) - ev.raw.count(0)
                elif ev.type == "stderr":
                    self.stderr += len(ev.raw)
                elif ev.type == "exit":
                    self.exit = ev.raw
                elif ev.type == "error":
                    self.error = ev.raw["message"]
            st.close()
        except BaseException as e:
            self.exc = e
        self.ended = time.monotonic()

    def wait(self, timeout):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"stream still going after {timeout}s " \
            f"({self.stdout} bytes)"
        if self.exc:
            raise self.exc


def test_full_state_disk_pauses_output_until_space_returns(tmpfs_daemon):
    d = tmpfs_daemon
    api = d.api
    sb = api.new_sandbox("minimal", timeout_s=300)

    # Fill the tmpfs but LEAVE_FREE_MIB, so the 100 MiB of output hits the wall fast.
    filler = os.path.join(d.state_dir, "filler")
    fill = free_bytes(d.state_dir) - LEAVE_FREE_MIB * MIB
    assert fill > 100 * MIB, f"tmpfs too small: {free_bytes(d.state_dir)} bytes free"
    with open(filler, "wb") as f:
        block = b"\xff" * MIB
        for _ in range(fill // MIB):
            f.write(block)
    assert free_bytes(d.state_dir) <= (LEAVE_FREE_MIB + 1) * MIB

    s = api.create_session(sb["id"], ["sh", "-c", "dd if=/dev/zero bs=1M count=100 2>/dev/null"])
    t0 = time.monotonic()
    c = Counter(s, timeout=60)

    # The spool fills the disk: output stops short of 100 MiB and stays stopped. Stopped means
    # the client took everything the daemon kept (on two busy cores the reader can be a second
    # behind the spool), so the checks below compare like with like.
    deadline = time.monotonic() + 30
    while True:
        before = c.stdout
        time.sleep(1.0)
        if c.stdout == before and free_bytes(d.state_dir) < MIB and s.get()["output_bytes"] == c.stdout:
            break
        assert c.exit is None and c.thread.is_alive(), \
            f"command finished although the disk was full: {c.exit} {c.error} {c.exc}"
        assert time.monotonic() < deadline, \
            f"output did not stall on the full disk: {c.stdout} bytes, {free_bytes(d.state_dir)} free"
    stalled_at = c.stdout
    t_full = time.monotonic() - t0
    assert 0 < stalled_at < 100 * MIB, stalled_at

    # While full: the daemon lives and answers; the session is still running, nothing moves.
    for _ in range(3):
        assert d.proc.poll() is None, f"spaced died on a full disk:\n{d.log_tail()}"
        api.info()
        rec = s.get()
        assert rec["state"] == "running" and rec["exit_code"] is None, rec
        assert rec["output_bytes"] == stalled_at, rec
        assert c.exit is None and c.error is None and c.exc is None and c.thread.is_alive()
        time.sleep(0.7)
    assert c.stdout == stalled_at, "output advanced although the disk was full"
    assert api.sandbox(sb["id"])["state"] == "running"
    assert "writing spool: No space left on device" in d.log_text()

    # Space returns: the agent's unacknowledged bytes arrive again and the command completes.
    t_free = time.monotonic()
    os.unlink(filler)
    c.wait(timeout=60)
    t_done = time.monotonic()
    assert c.error is None, f"error event: {c.error}"
    assert c.exit == {"exit_code": 0, "signal": None}, c.exit
    assert c.stdout == 100 * MIB and c.nonzero == 0 and c.stderr == 0, \
        f"stdout {c.stdout} bytes ({c.nonzero} nonzero), stderr {c.stderr}"
    rec = s.get()
    assert rec["state"] == "exited" and rec["exit_code"] == 0, rec
    assert rec["output_bytes"] == 100 * MIB, rec
    # A re-read from the spool after the fact gives the same bytes.
    again = s.attach(offset=100 * MIB - 10).collect(deadline=time.monotonic() + 10)
    assert bytes(again.output) == b"\0" * 10 and again.exit_code == 0, again
    assert d.proc.poll() is None
    exec_works(api, sb["id"])
    print(f"full disk: stalled at {stalled_at / MIB:.1f} MiB after {t_full:.1f}s; "
          f"completed {t_done - t_free:.1f}s after space was freed; total {t_done - t0:.1f}s")


@pytest.mark.parametrize("tmpfs_daemon", [["--output-min-free", str(2 * LEAVE_FREE_MIB)]],
                         indirect=True)
def test_state_disk_below_the_watermark_pauses_output_before_it_fills(tmpfs_daemon):
    """With --output-min-free above what is left, output pauses at once (the agent's window,
    not the disk, is what is written past it), the disk never fills, and the command completes
    once space returns."""
    d = tmpfs_daemon
    api = d.api
    # The template's ready snapshot first: its builder VM writes disk layers of its own, which
    # would count against the 1 MiB this test allows the state dir to lose while output waits.
    api.wait_ready_snapshot("minimal")
    sb = api.new_sandbox("minimal", timeout_s=300)
    filler = os.path.join(d.state_dir, "filler")
    fill = free_bytes(d.state_dir) - LEAVE_FREE_MIB * MIB
    with open(filler, "wb") as f:
        block = b"\xff" * MIB
        for _ in range(fill // MIB):
            f.write(block)
    free_before = free_bytes(d.state_dir)
    assert free_before <= (LEAVE_FREE_MIB + 1) * MIB

    s = api.create_session(sb["id"], ["sh", "-c", "dd if=/dev/zero bs=1M count=40 2>/dev/null"])
    c = Counter(s, timeout=90)
    deadline = time.monotonic() + 30
    while True:
        before = c.stdout
        time.sleep(1.0)
        if c.stdout == before and c.stdout > 0:
            break
        assert c.exit is None and c.thread.is_alive(), f"finished under the watermark: {c.exit}"
        assert time.monotonic() < deadline, f"output did not pause: {c.stdout} bytes"
    paused_at = c.stdout
    # One window (256 KiB) may arrive past the watermark, and no more; the disk is not full.
    assert 0 < paused_at <= 512 * 1024, paused_at
    assert free_bytes(d.state_dir) >= free_before - MIB
    assert "command output paused" in d.log_text()
    assert "No space left on device" not in d.log_text()
    time.sleep(1.5)
    assert c.stdout == paused_at and s.get()["state"] == "running"

    t_free = time.monotonic()
    os.unlink(filler)
    c.wait(timeout=90)
    assert c.exit == {"exit_code": 0, "signal": None} and c.stdout == 40 * MIB, (c.exit, c.stdout)
    assert "command output resumed" in d.log_text()
    print(f"watermark: paused at {paused_at} bytes; completed {time.monotonic() - t_free:.1f}s "
          "after space was freed")
    exec_works(api, sb["id"])
