"""test_memcvt_live.py -- space-memcvt against a real QEMU 7.2 (docs/design/snapshots-memcvt.md).

Boots the minimal template with private anonymous RAM, writes known data in the guest (64 MiB
in /dev/shm and a marker file synced to disk), stops it, freezes its disk with
blockdev-snapshot-sync and migrates with x-ignore-shared on through a pipe into
build/bin/space-memcvt. Then starts two clones, each mapping the image privately
(memory-backend-file share=off) over its own overlay of the frozen disk, loading the state
stream with x-ignore-shared on, and checks that each resumes with the parent's marker and data,
that a write in one clone is not seen by the other, and that the image file is never written.

Stdlib only, no daemon: QEMU is started here the way the daemon starts it (listening unix sockets
passed as fds, QMP, the agent protocol of tests/agent/agentproto.py). Every QEMU and
space-memcvt process and every file is cleaned up on every path; a cleanup that fails fails the
test. Skips, saying why, without QEMU, the minimal template or build/bin/space-memcvt.
"""

import hashlib
import json
import os
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TEMPLATE = os.path.join(REPO, "build", "templates", "minimal")
MEMCVT = os.path.join(REPO, "build", "bin", "space-memcvt")
QEMU = shutil.which("qemu-system-x86_64")
sys.path.insert(0, os.path.join(REPO, "tests", "agent"))

import agentproto  # noqa: E402

MEM_MIB = 256
PAGE = 4096
DATA_MIB = 64
MACHINE = "microvm,x-option-roms=off,rtc=on,pit=on,isa-serial=on,acpi=off,memory-backend=mem"
CMDLINE = ("console=ttyS0 root=/dev/vda rw init=/sbin/space-agent reboot=t panic=-1 quiet "
           "random.trust_cpu=on space.hostname=memcvt")
# The daemon's figure: a migration of a stopped guest is bounded by the pipe, not by QEMU's
# default 32 MiB/s throttle.
MAX_BANDWIDTH = 100 << 30
MARKER = "/var/tmp/memcvt-marker"


def _missing():
    if not QEMU:
        return "qemu-system-x86_64 is not installed"
    for f in ("vmlinuz", "rootfs.ext4"):
        if not os.path.exists(os.path.join(TEMPLATE, f)):
            return f"no minimal template at {TEMPLATE} (make template-minimal)"
    if not os.access(MEMCVT, os.X_OK):
        return f"{MEMCVT} is not built (make bins)"
    return None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")


class Qmp:
    """A blocking QMP client; events are skipped, an error reply raises."""

    def __init__(self, path, timeout=30.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.f = self.sock.makefile("rb")
        assert "QMP" in self._read()
        self.cmd("qmp_capabilities")

    def _read(self):
        line = self.f.readline()
        if not line:
            raise EOFError("QMP connection closed")
        return json.loads(line)

    def cmd(self, name, fd=None, **args):
        """Runs a command; fd is passed along with it (SCM_RIGHTS), as getfd expects."""
        msg = {"execute": name}
        if args:
            msg["arguments"] = args
        data = json.dumps(msg).encode() + b"\n"
        if fd is None:
            self.sock.sendall(data)
        else:
            socket.send_fds(self.sock, [data], [fd])
        while True:
            r = self._read()
            if "event" in r:
                continue
            if "error" in r:
                raise RuntimeError(f"QMP {name}: {r['error'].get('desc')}")
            return r["return"]

    def close(self):
        self.f.close()
        self.sock.close()


class Vm:
    """One QEMU; its sockets, disk and log live in its own folder under the test's."""

    def __init__(self, lab, name, mem_object, disk, incoming=False):
        self.name = name
        self.dir = os.path.join(lab.dir, name)
        os.mkdir(self.dir)
        self.qmp = self.agent = None
        self.socks = {n: self._listen(n) for n in ("agent", "qmp", "con")}
        fds = {n: s.fileno() for n, s in self.socks.items()}
        argv = [QEMU, "-name", f"guest={lab.tag}-{name}", "-M", MACHINE,
                "-accel", "tcg,tb-size=32", "-cpu", "max", "-object", mem_object,
                "-m", f"{MEM_MIB}M", "-smp", "1", "-nodefaults", "-no-user-config",
                "-display", "none", "-no-reboot",
                "-kernel", os.path.join(TEMPLATE, "vmlinuz"), "-append", CMDLINE,
                "-drive", f"id=root,file={disk},format=qcow2,if=none,cache=unsafe",
                "-device", "virtio-blk-device,drive=root",
                "-chardev", f"socket,id=agent,fd={fds['agent']},server=on,wait=off",
                "-device", "virtio-serial-device,max_ports=2",
                "-device", "virtserialport,chardev=agent,name=space.agent",
                "-chardev", f"socket,id=qmp,fd={fds['qmp']},server=on,wait=off",
                "-mon", "chardev=qmp,mode=control",
                "-chardev", f"socket,id=con,fd={fds['con']},server=on,wait=off",
                "-serial", "chardev:con", "-device", "virtio-rng-device"]
        if incoming:
            argv += ["-incoming", "defer"]
        with open(os.path.join(self.dir, "qemu.log"), "wb") as log:
            self.proc = subprocess.Popen(argv, pass_fds=list(fds.values()),
                                         stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT)
        lab.procs.append(self.proc)
        for s in self.socks.values():
            s.close()  # QEMU holds them now
        self.qmp = Qmp(os.path.join(self.dir, "qmp.sock"))

    def _listen(self, n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(os.path.join(self.dir, f"{n}.sock"))
        s.listen(1)
        return s

    def connect_agent(self, timeout=120.0):
        """QEMU listens on the agent socket, so connect instead of accepting; agentproto's own
        listener (in a scratch folder) stays unused. An H_HELLO sent before the guest opened its
        port is dropped, so it is repeated until answered."""
        scratch = os.path.join(self.dir, "host")
        os.mkdir(scratch)
        h = agentproto.Host(None, scratch)
        h.srv.close()
        h.conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        h.conn.connect(os.path.join(self.dir, "agent.sock"))
        self.agent = h
        deadline = time.monotonic() + timeout
        while True:
            try:
                h.hello(ns=time.time_ns(), timeout=0.5)
                return h
            except TimeoutError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"{self.name}: the agent did not answer in {timeout}s")

    def sh(self, cid, script, timeout=120.0):
        c = self.agent.run(cid, ["sh", "-c", script], timeout=timeout)
        assert c.error is None and c.exit and c.exit[1] == 0, \
            f"{self.name}: {script!r}: {c.error or c.exit} {bytes(c.err)!r}"
        # Done with it: otherwise the agent keeps the exit to report again, in every clone.
        self.agent.send(agentproto.H_RELEASE, cid)
        return bytes(c.out).decode()

    def agent_idle(self):
        """A ping answered means every frame sent before it (the releases) was handled."""
        cookie = secrets.randbits(63)
        self.agent.send(agentproto.H_PING, 0, struct.pack("<Q", cookie))
        self.agent.wait_for(lambda: cookie in self.agent.pongs)

    def wait_status(self, done, timeout=60.0):
        deadline = time.monotonic() + timeout
        while True:
            st = self.qmp.cmd("query-status")["status"]
            if st in done:
                return st
            assert st not in ("shutdown", "internal-error", "guest-panicked"), f"{self.name}: {st}"
            assert time.monotonic() < deadline, f"{self.name}: still {st} after {timeout}s"
            time.sleep(0.005)

    def close(self):
        """Quit politely, then kill; the process is reaped before this returns. Idempotent."""
        if self.agent:
            self.agent.disconnect()
            self.agent = None
        if self.qmp:
            try:
                self.qmp.cmd("quit")
            except (OSError, EOFError, RuntimeError):
                pass
            self.qmp.close()
            self.qmp = None
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


class Lab:
    """What one test started: a folder (on tmpfs when there is one) and processes."""

    def __init__(self):
        shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        self.dir = tempfile.mkdtemp(prefix="memcvt-", dir=shm)
        self.tag = "memcvt-" + secrets.token_hex(4)  # finds our QEMUs in /proc
        self.procs = []
        self.vms = []

    def vm(self, *args, **kw):
        v = Vm(self, *args, **kw)
        self.vms.append(v)
        return v

    def leftovers(self):
        pids = []
        for p in os.listdir("/proc"):
            try:
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    if self.tag.encode() in f.read():
                        pids.append(int(p))
            except (OSError, ValueError):
                pass
        return pids

    def cleanup(self):
        errors = []
        for v in self.vms:
            try:
                v.close()
            except Exception as e:  # noqa: BLE001 -- every VM must get its turn
                errors.append(f"{v.name}: {e!r}")
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
        left = self.leftovers()
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.dir)
        assert not left, f"processes left running: {left}"
        assert not errors, f"cleanup failed: {errors}"


@pytest.fixture
def lab():
    lb = Lab()
    try:
        yield lb
    finally:
        lb.cleanup()


def file_digest(path):
    h = hashlib.sha1()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def snapshot(lab, parent):
    """Stop, freeze the disk, migrate through space-memcvt; returns (image, state, summary)."""
    image, state = os.path.join(lab.dir, "mem.img"), os.path.join(lab.dir, "state")
    parent.qmp.cmd("stop")
    parent.qmp.cmd("blockdev-snapshot-sync", device="root", format="qcow2",
                   **{"snapshot-file": os.path.join(parent.dir, "top.qcow2")})
    parent.qmp.cmd("migrate-set-capabilities",
                   capabilities=[{"capability": "x-ignore-shared", "state": True}])
    parent.qmp.cmd("migrate-set-parameters", **{"max-bandwidth": MAX_BANDWIDTH})
    rd, wr = os.pipe()
    # The caller opens the outputs; the converter gets them as fds 3 and 4.
    cvt = subprocess.Popen(["sh", "-c", 'exec "$0" 3>"$1" 4>"$2"', MEMCVT, image, state],
                           stdin=rd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lab.procs.append(cvt)
    os.close(rd)
    t0 = time.monotonic()
    try:
        parent.qmp.cmd("getfd", fd=wr, fdname="snap")
    finally:
        os.close(wr)
    parent.qmp.cmd("migrate", uri="fd:snap")
    while (st := parent.qmp.cmd("query-migrate")).get("status") not in ("completed", "failed"):
        assert time.monotonic() - t0 < 60, f"migration still {st.get('status')} after 60 s"
        time.sleep(0.005)
    out, err = cvt.communicate(timeout=60)
    took = time.monotonic() - t0
    assert st["status"] == "completed", st
    assert cvt.returncode == 0, f"space-memcvt exited {cvt.returncode}: {err.decode()}"
    assert err == b""
    summary = json.loads(out)
    print(f"\nsnapshot: {took * 1000:.0f} ms, {summary}")
    return image, state, summary


def check_summary(image, state, s):
    pages = MEM_MIB << 20 >> 12
    assert s["block"] == "mem" and s["block_bytes"] == MEM_MIB << 20
    # A stopped guest sends each page once: every page is either data or a ZERO record.
    assert s["pages"] + s["zero_pages"] == pages, s
    assert s["pages"] >= (DATA_MIB << 20) // PAGE, s
    assert s["state_bytes"] == os.path.getsize(state)
    assert s["input_bytes"] > s["state_bytes"] + s["pages"] * PAGE
    st = os.stat(image)
    assert st.st_size == MEM_MIB << 20
    # Sparse: zero pages take no space (tmpfs and ext4 allocate in 4 KiB blocks).
    assert s["pages"] * PAGE <= st.st_blocks * 512 < st.st_size, (st.st_blocks, s)


def start_clone(lab, name, image, state, base):
    disk = os.path.join(lab.dir, f"{name}.qcow2")
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", base, disk],
                   check=True)
    mem = f"memory-backend-file,id=mem,size={MEM_MIB}M,mem-path={image},share=off"
    c = lab.vm(name, mem, disk, incoming=True)
    t0 = time.monotonic()
    c.qmp.cmd("migrate-set-capabilities",
              capabilities=[{"capability": "x-ignore-shared", "state": True}])
    fd = os.open(state, os.O_RDONLY | os.O_CLOEXEC)
    try:
        c.qmp.cmd("getfd", fd=fd, fdname="state")
    finally:
        os.close(fd)
    c.qmp.cmd("migrate-incoming", uri="fd:state")
    if c.wait_status(("running", "paused")) == "paused":
        c.qmp.cmd("cont")
    print(f"{name}: resumed in {(time.monotonic() - t0) * 1000:.0f} ms")
    c.connect_agent(timeout=30)
    return c


def test_clones_resume_from_converted_snapshot(lab):
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b",
                    os.path.join(TEMPLATE, "rootfs.ext4"), os.path.join(lab.dir, "disk.qcow2")],
                   check=True)
    parent = lab.vm("parent", f"memory-backend-ram,id=mem,size={MEM_MIB}M",
                    os.path.join(lab.dir, "disk.qcow2"))
    parent.connect_agent()
    token = secrets.token_hex(8)
    data_md5 = parent.sh(2, f"head -c {DATA_MIB << 20} /dev/urandom > /dev/shm/data && "
                            f"echo {token} > {MARKER} && sync && md5sum < /dev/shm/data")
    parent.agent_idle()
    image, state, summary = snapshot(lab, parent)
    check_summary(image, state, summary)
    parent.close()  # the clones need nothing from it but the frozen disk
    image_sha = file_digest(image)

    clones = [start_clone(lab, f"clone{i}", image, state, os.path.join(lab.dir, "disk.qcow2"))
              for i in range(2)]
    # Memory: the page cache still holds the marker and /dev/shm the data; then the marker
    # again from the frozen disk, with the page cache dropped.
    check = (f"cat {MARKER} && md5sum < /dev/shm/data && "
             f"echo 3 > /proc/sys/vm/drop_caches && cat {MARKER}")
    for i, c in enumerate(clones):
        got = c.sh(10 + i, check).split("\n")
        assert got[:3] == [token, data_md5.strip(), token], f"{c.name}: {got}"
    # Private mappings: a write in one clone reaches neither the other nor the image.
    clones[0].sh(20, "dd if=/dev/zero of=/dev/shm/data bs=4k count=1 conv=notrunc 2>/dev/null")
    assert clones[0].sh(21, "md5sum < /dev/shm/data") != data_md5
    assert clones[1].sh(22, "md5sum < /dev/shm/data") == data_md5
    for c in clones:
        c.close()
    assert file_digest(image) == image_sha, "a clone wrote to the image"
