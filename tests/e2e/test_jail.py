"""The jail every QEMU runs in (docs/design/jail.md), checked on live VMs: its own unprivileged
uid, no capabilities, no_new_privs, seccomp, an empty environment, its own mount and network
namespaces holding only its files, a cgroup leaf with limits; private daemon files; snapshot
images mapped from a sealed memfd nobody can write; the flows that touch the jail (clone, fork,
pause, suspend/restore, delete, adoption after a restart) still work.
One daemon of its own: the last test edits its store and restarts it."""

import fcntl
import mmap
import os
import re
import sqlite3
import subprocess

import pytest

import space

F_GET_SEALS = 1034
SEALS_ALL = 0x1 | 0x2 | 0x4 | 0x8  # SEAL, SHRINK, GROW, WRITE
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def ids(field):
    return [int(x) for x in field.split()]


def cmdline(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return [a.decode() for a in f.read().split(b"\0") if a]


def disk_of(pid):
    drive = [a for a in cmdline(pid) if a.startswith("id=root,file=")][0]
    return re.match(r"id=root,file=([^,]+),", drive).group(1)


def as_user(uid, *argv):
    """Runs argv as uid (no groups, no capabilities); its CompletedProcess."""
    return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv],
                          capture_output=True, timeout=30)


@pytest.fixture(scope="module")
def two(own_daemon):
    api = own_daemon.api
    a = api.new_sandbox("minimal", timeout_s=3600)
    b = api.new_sandbox("minimal", timeout_s=3600)
    return a, b


def test_each_qemu_runs_as_its_own_unprivileged_uid(own_daemon, two):
    uids = []
    for sb in two:
        pid = space.qemu_pid(sb["id"])
        st = status(pid)
        uid, gid = ids(st["Uid"]), ids(st["Gid"])
        assert len(set(uid)) == 1 and uid[0] != 0, f"real, effective, saved, fs uid: {uid}"
        assert len(set(gid)) == 1 and gid[0] != 0, gid
        assert st["Groups"] == "", st["Groups"]
        for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            assert int(st[cap], 16) == 0, f"{cap} = {st[cap]}"
        assert st["NoNewPrivs"] == "1"
        assert st["Seccomp"] == "2", "seccomp filter mode"
        assert int(st.get("Seccomp_filters", "1")) >= 2, "ours and QEMU's -sandbox"
        with open(f"/proc/{pid}/environ", "rb") as f:
            assert f.read() == b"", "QEMU inherits no environment"
        daemon_pid = own_daemon.proc.pid
        for ns in ("net", "mnt", "ipc", "uts"):
            assert os.readlink(f"/proc/{pid}/ns/{ns}") != os.readlink(f"/proc/{daemon_pid}/ns/{ns}"), ns
        args = cmdline(pid)
        assert args[0].startswith("/"), args[0]
        sandbox = args[args.index("-sandbox") + 1]
        for part in ("on", "obsolete=deny", "elevateprivileges=deny", "spawn=deny", "resourcecontrol=deny"):
            assert part in sandbox.split(","), sandbox
        drive = [a for a in args if a.startswith("id=root,")][0]
        assert "werror=report" in drive and "rerror=report" in drive, drive
        uids.append(uid[0])
    assert uids[0] != uids[1], f"two VMs share uid {uids[0]}"


def test_the_jail_root_holds_only_the_vms_files(own_daemon, two):
    a, b = two
    pid = space.qemu_pid(a["id"])
    root = f"/proc/{pid}/root"
    assert os.path.exists(root + cmdline(pid)[0]), "the QEMU binary"
    assert os.path.exists(root + disk_of(pid)), "its own disk layer"
    assert not os.path.exists(root + disk_of(space.qemu_pid(b["id"]))), "another VM's disk"
    for absent in ("/etc/passwd", "/root", "/home", "/var", "/sys", "/dev/shm", "/run",
                   own_daemon.state_dir + "/space.db", "/proc/sys", "/proc/kcore"):
        assert not os.path.exists(root + absent), f"{absent} is visible in the jail"
    # Of the state directory, only the directories of its disk chain, and in them only it.
    assert set(os.listdir(root + own_daemon.state_dir)) <= {"disks", "images"}
    disks = os.listdir(root + own_daemon.state_dir + "/disks")
    assert os.path.basename(disk_of(pid)) in disks and len(disks) <= 3, disks
    assert sorted(os.listdir(root + "/dev")) in (["full", "null", "random", "urandom", "zero"],
                                                  ["full", "kvm", "null", "random", "urandom", "zero"])
    # The jail is mounted where only root reaches it.
    jail = f"/run/space/{own_daemon.state_tag()}/jail"
    st = os.lstat(jail)
    assert st.st_uid == 0 and st.st_mode & 0o077 == 0, oct(st.st_mode)


def test_each_vm_has_a_cgroup_leaf_with_limits(own_daemon, two):
    tag = own_daemon.state_tag()
    for sb in two:
        pid = space.qemu_pid(sb["id"])
        groups = {}
        with open(f"/proc/{pid}/cgroup") as f:
            for line in f:
                _, ctrls, path = line.rstrip("\n").split(":", 2)
                for c in ctrls.split(",") if ctrls else [""]:
                    groups[c] = path
        want_mem = (sb["memory_mib"] + 256) << 20
        leaf_end = f"/space-{tag}/{sb['id']}"
        if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            leaf = "/sys/fs/cgroup" + groups[""]
            assert groups[""].endswith(leaf_end), groups
            assert int(open(leaf + "/memory.max").read()) == want_mem
            assert open(leaf + "/cpu.max").read().split() == [str(sb["vcpus"] * 100000), "100000"]
            assert int(open(leaf + "/pids.max").read()) == 128 + sb["vcpus"]
            continue
        for c in ("memory", "cpu", "pids"):
            assert groups[c].endswith(leaf_end), f"{c}: {groups[c]}"
        base = "/sys/fs/cgroup/"
        assert int(open(base + "memory" + groups["memory"] + "/memory.limit_in_bytes").read()) == want_mem
        cpu = base + "cpu" + groups["cpu"]
        assert int(open(cpu + "/cpu.cfs_period_us").read()) == 100000
        assert int(open(cpu + "/cpu.cfs_quota_us").read()) == sb["vcpus"] * 100000
        assert int(open(base + "pids" + groups["pids"] + "/pids.max").read()) == 128 + sb["vcpus"]


def test_other_users_cannot_read_the_daemons_files(own_daemon, two):
    api = own_daemon.api
    api.wait_ready_snapshot("minimal")
    tag = own_daemon.state_tag()
    shm = f"/dev/shm/space-{tag}"
    images = [os.path.join(r, f) for r, _, fs in os.walk(shm) for f in fs if f == "mem"]
    assert images, f"no snapshot image under {shm}"
    a, b = two
    pa, pb = space.qemu_pid(a["id"]), space.qemu_pid(b["id"])
    files = images + [os.path.join(own_daemon.state_dir, "space.db"), disk_of(pa), disk_of(pb)]
    for path in files:
        r = as_user(65534, "cat", path)
        assert r.returncode != 0, f"nobody read {path}"
    # A VM's uid cannot read another VM's disk, nor the snapshot image on the host.
    uid_a = ids(status(pa)["Uid"])[0]
    for path in [disk_of(pb)] + images:
        r = as_user(uid_a, "cat", path)
        assert r.returncode != 0, f"uid {uid_a} read {path}"
    for d in (shm, f"{shm}/snapshots", os.path.join(own_daemon.state_dir, "disks"),
              f"/run/space/{tag}", f"/run/space/{tag}/{a['id']}"):
        st = os.lstat(d)
        assert st.st_uid == 0 and (st.st_mode & 0o077) == 0 and not os.path.islink(d), \
            f"{d}: owner {st.st_uid} mode {oct(st.st_mode)}"


def test_a_clone_maps_a_sealed_image_nobody_can_write(own_daemon):
    api = own_daemon.api
    api.wait_ready_snapshot("minimal")
    sb = api.new_sandbox("minimal", timeout_s=600)
    pid = space.qemu_pid(sb["id"])
    mem = [a for a in cmdline(pid) if a.startswith("memory-backend-file")]
    assert mem and "mem-path=/proc/self/fd/6" in mem[0] and "share=off" in mem[0], mem
    # Even root, through QEMU's own descriptor, cannot change the image.
    fd = os.open(f"/proc/{pid}/fd/6", os.O_RDWR)
    try:
        assert fcntl.fcntl(fd, F_GET_SEALS) == SEALS_ALL
        with pytest.raises(PermissionError):
            os.pwrite(fd, b"x", 0)
        with pytest.raises(PermissionError):
            mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        before = os.pread(fd, 4096, 0)
    finally:
        os.close(fd)
    r = api.run(sb["id"], ["sh", "-c", "echo clone-ok"])
    assert bytes(r.stdout) == b"clone-ok\n", r
    fd = os.open(f"/proc/{pid}/fd/6", os.O_RDONLY)
    try:
        assert os.pread(fd, 4096, 0) == before, "the running guest changed the image"
    finally:
        os.close(fd)
    api.remove_sandbox(sb["id"])


def test_pause_fork_suspend_and_restore_in_the_jail(own_daemon, two):
    api = own_daemon.api
    a, _ = two
    sb = a["id"]
    assert api.do(sb, "pause")["state"] == "paused"
    assert api.do(sb, "resume")["state"] == "running"
    assert api.run(sb, ["sh", "-c", "echo before > /root/mark"]).exit_code == 0
    pid = space.qemu_pid(sb)
    uid = ids(status(pid)["Uid"])[0]
    old_top = disk_of(pid)

    fork = api.fork(sb, 1)
    op = api.wait_op(fork["operation"]["id"])
    assert op["state"] == "succeeded", op
    child = fork["children"][0]
    api.wait_sandbox_state(child, ("running",), timeout=60)
    cpid = space.qemu_pid(child)
    cuid = ids(status(cpid)["Uid"])[0]
    assert cuid not in (0, uid), "the child runs as a uid of its own"
    # The only child maps the fork image alone: bound into its jail, not a sealed copy.
    cmem = [x for x in cmdline(cpid) if x.startswith("memory-backend-file")][0]
    assert "/proc/self/fd/" not in cmem, cmem
    # The parent moved to a new layer bound into its jail; the old one is read-only, root's.
    st = os.stat(old_top)
    assert st.st_uid == 0 and st.st_mode & 0o777 == 0o644, oct(st.st_mode)
    with open(f"/proc/{pid}/mountinfo") as f:
        layers = [line.split()[4] for line in f if ".qcow2" in line.split()[4]]
    new = [p for p in layers if p != old_top and os.stat(p).st_uid == uid]
    assert new and os.stat(new[0]).st_mode & 0o777 == 0o600, layers
    # The daemon's own record of the new layer's backing file (chains are followed by it,
    # never by a header the QEMU wrote).
    with open(new[0] + ".backing") as f:
        assert f.read() == old_top + "\n"
    assert bytes(api.run(sb, ["sh", "-c", "echo parent > /root/mark; cat /root/mark"]).stdout) == b"parent\n"
    assert bytes(api.run(child, ["cat", "/root/mark"]).stdout) == b"before\n"

    # Suspend: the converter runs in the VM's jail; restore maps the image sealed.
    assert api.do(child, "suspend")["state"] == "suspended"
    assert api.do(child, "restore")["state"] == "running"
    assert bytes(api.run(child, ["cat", "/root/mark"]).stdout) == b"before\n"
    rpid = space.qemu_pid(child)
    ruid = ids(status(rpid)["Uid"])[0]
    assert ruid != 0
    # Its suspend image is its own alone: bound into its jail, not copied.
    mem = [a for a in cmdline(rpid) if a.startswith("memory-backend-file")][0]
    image = re.search(r"mem-path=([^,]+)", mem).group(1)
    assert image.startswith(own_daemon.state_dir + "/snapshots/"), mem
    st = os.stat(image)
    assert st.st_uid == ruid and st.st_mode & 0o777 == 0o600, (st.st_uid, oct(st.st_mode))
    api.remove_sandbox(child)


def test_delete_tears_the_jail_and_cgroup_down(own_daemon):
    api = own_daemon.api
    sb = api.new_sandbox("minimal", timeout_s=600)
    jail = f"/run/space/{own_daemon.state_tag()}/jail/{sb['id']}"
    assert jail in space.mounts_under(jail), "the jail root is a mount while the VM runs"
    leaves = [p for p in space.cgroup_leaves(f"space-{own_daemon.state_tag()}") if p.endswith(sb["id"])]
    assert leaves, "a cgroup leaf while the VM runs"
    api.remove_sandbox(sb["id"])
    assert space.mounts_under(jail) == [] and not os.path.exists(jail)
    assert not any(os.path.exists(p) for p in leaves), leaves


def test_adoption_refuses_a_qemu_of_another_uid(own_daemon, two):
    api = own_daemon.api
    victim = api.new_sandbox("minimal", timeout_s=600)
    pid = space.qemu_pid(victim["id"])
    uid = ids(status(pid)["Uid"])[0]
    own_daemon.stop()
    db = sqlite3.connect(os.path.join(own_daemon.state_dir, "space.db"))
    with db:
        recorded = db.execute("SELECT jail_uid FROM sandboxes WHERE id = ?", (victim["id"],)).fetchone()
        assert recorded == (uid,), recorded
        db.execute("UPDATE sandboxes SET jail_uid = ? WHERE id = ?", (uid + 7, victim["id"]))
    db.close()
    own_daemon.start()
    try:
        rec = api.wait_sandbox_state(victim["id"], ("failed",), timeout=30)
        assert rec["state"] == "failed", rec
        assert f"does not run as its uid {uid + 7}" in own_daemon.log_text()
        # The others, whose uids match, were adopted and still work.
        for sb in two:
            assert api.sandbox(sb["id"])["state"] == "running"
            assert bytes(api.run(sb["id"], ["echo", "adopted"]).stdout) == b"adopted\n"
    finally:
        try:
            os.kill(pid, 9)
        except OSError:
            pass
