"""spacectl's interactive and file verbs against a real daemon and a `base` sandbox:
`exec -it` driven through tmux (keys typed, output seen, exit code, the terminal put back,
window resizes reaching the guest, kill -TERM), `cp` of trees and a 20 MiB file both ways,
tar on stdin/stdout, its errors, and `ls` (names, -R, -l)."""

import hashlib
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import tarfile
import time
import uuid

import pytest

import space

TMUX = shutil.which("tmux")
PROMPT = re.compile(r"bash-[\d.]+[$#]\s*$", re.M)  # capture-pane strips trailing spaces


def ok(daemon, *args, **kw):
    p = space.spacectl(daemon, *args, **kw)
    assert p.returncode == 0, p
    return p


def sh(api, sb_id, script, user="root"):
    r = api.run(sb_id, ["/bin/sh", "-c", script], user=user, timeout=300)
    assert r.exit_code == 0, (script, r)
    return r.stdout.decode()


# ---------------------------------------------------------------------------
# exec -it through tmux


class Tmux:
    """One tmux server of our own (its own socket) with one detached session running `script`
    (a shell script) in a 120x40 window."""

    def __init__(self, tmp_path, script):
        self.sock = f"spacectl-e2e-{uuid.uuid4().hex[:8]}"
        path = tmp_path / "run.sh"
        path.write_text(script)
        path.chmod(0o700)
        self.cmd("new-session", "-d", "-x", "120", "-y", "40", "-s", "t", f"/bin/sh {path}")

    def cmd(self, *args, check=True):
        return subprocess.run([TMUX, "-L", self.sock, *args], capture_output=True, text=True,
                              check=check, timeout=30)

    def keys(self, *keys):
        self.cmd("send-keys", "-t", "t", *keys)

    def type(self, line):
        # -l: literally, so "$((6*7))" is not read as key names
        self.cmd("send-keys", "-t", "t", "-l", line)
        self.keys("Enter")

    def pane(self):
        return self.cmd("capture-pane", "-p", "-t", "t", "-S", "-200").stdout

    def wait_for(self, pattern, timeout=180, after=0):
        """Wait until the pane (from character `after` on) matches; returns the match."""
        rx = re.compile(pattern, re.M) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout
        while True:
            text = self.pane()
            m = rx.search(text, after)
            if m:
                return m
            assert time.monotonic() < deadline, f"no {rx.pattern!r} in the pane:\n{text}"
            time.sleep(0.2)

    def close(self):
        self.cmd("kill-server", check=False)
        # tmux leaves its socket behind
        sock = os.path.join(os.environ.get("TMUX_TMPDIR", "/tmp"), f"tmux-{os.getuid()}", self.sock)
        if os.path.exists(sock):
            os.unlink(sock)


@pytest.fixture
def tmux_script(daemon, tmp_path):
    """A shell script for tmux: the daemon's settings, the terminal's settings before, the
    command, its exit status and the terminal's settings after (files in tmp_path)."""
    if TMUX is None:
        pytest.skip("tmux is not installed (scripts/packages.txt lists it)")
    sessions = []

    def make(command):
        script = "\n".join([
            f"export SPACE_URL={shlex.quote(daemon.url)}",
            f"export SPACE_API_KEY={shlex.quote(daemon.api_key)}",
            f"stty -g > {tmp_path}/before",
            f"stty -a > {tmp_path}/before.txt",
            command,
            f"echo EXIT=$? > {tmp_path}/exit.tmp && mv {tmp_path}/exit.tmp {tmp_path}/exit",
            f"stty -g > {tmp_path}/after",
            f"stty -a > {tmp_path}/after.txt",
            "sleep 600",
            "",
        ])
        t = Tmux(tmp_path, script)
        sessions.append(t)
        return t

    yield make
    for t in sessions:
        t.close()


def wait_file(path, timeout=120):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.2)
    with open(path) as f:
        return f.read()


def assert_terminal_restored(tmp_path):
    before = wait_file(tmp_path / "before").strip()
    after = wait_file(tmp_path / "after").strip()
    modes = wait_file(tmp_path / "after.txt").split()
    assert "icanon" in modes and "echo" in modes and "isig" in modes and "opost" in modes, modes
    assert after == before, "the terminal is not as it was before spacectl ran"


def test_exec_it_bash_types_sees_resizes_and_exits_with_the_code(daemon, base_sb, tmux_script,
                                                                  tmp_path):
    t = tmux_script(f"{shlex.quote(space.SPACECTL)} exec -it {base_sb['id']} -- "
                    "bash --norc --noprofile -i")
    t.wait_for(PROMPT)
    t.type("echo hi-$((6*7))")
    t.wait_for(r"^hi-42\r?$")

    # The guest's terminal has our window's size, and follows it.
    t.type("stty size")
    t.wait_for(r"^40 120\r?$")
    t.cmd("resize-window", "-t", "t", "-x", "100", "-y", "30")
    time.sleep(1)  # tmux -> SIGWINCH -> spacectl -> POST .../resize -> the guest's terminal
    t.type("stty size")
    t.wait_for(r"^30 100\r?$")

    # ^C is a byte for the guest in raw mode: it interrupts the guest's command, not spacectl.
    t.type("sleep 300")
    time.sleep(2)
    t.keys("C-c")
    t.wait_for(PROMPT)
    t.type("echo still-$((1+1))")
    t.wait_for(r"^still-2\r?$")

    t.type("exit 3")
    assert wait_file(tmp_path / "exit").strip() == "EXIT=3"
    assert_terminal_restored(tmp_path)


def test_exec_it_killed_restores_the_terminal_and_hangs_up(daemon, api, base_sb, tmux_script,
                                                           tmp_path):
    marker = f"/tmp/hup-{uuid.uuid4().hex[:8]}"
    # A shell that records the hangup it gets when spacectl goes.
    inner = f"trap 'echo hup > {marker}; exit 0' HUP; echo ready; while :; do sleep 1; done"
    t = tmux_script(f"{shlex.quote(space.SPACECTL)} exec -it --user root {base_sb['id']} -- "
                    f"bash -c {shlex.quote(inner)}")
    t.wait_for(r"^ready\r?$")
    pids = subprocess.run(["pgrep", "-f", f"^{space.SPACECTL} exec -it --user root"],
                          capture_output=True, text=True).stdout.split()
    assert len(pids) == 1, pids
    os.kill(int(pids[0]), 15)
    assert wait_file(tmp_path / "exit").strip() == "EXIT=143"
    assert_terminal_restored(tmp_path)
    assert "hung up the command" in t.pane()
    deadline = time.monotonic() + 60
    while sh(api, base_sb["id"], f"cat {marker} 2>/dev/null || true").strip() != "hup":
        assert time.monotonic() < deadline, "the command never got SIGHUP"
        time.sleep(0.5)


def test_exec_t_needs_a_terminal(daemon, base_sb):
    p = space.spacectl(daemon, "exec", "-t", base_sb["id"], "--", "true", stdin=subprocess.DEVNULL)
    assert p.returncode == 125 and "terminal" in p.stderr, p


def test_exec_i_forwards_stdin_without_a_terminal(daemon, base_sb):
    p = space.spacectl(daemon, "exec", "-i", base_sb["id"], "--", "tr", "a-z", "A-Z",
                       input="hello\n")
    assert (p.returncode, p.stdout) == (0, "HELLO\n"), p


# ---------------------------------------------------------------------------
# cp and ls


def make_tree(root):
    """A tree with files of several modes, an empty file, an empty directory, nested
    directories of their own modes and a relative symbolic link."""
    os.makedirs(root / "sub" / "deep")
    os.makedirs(root / "empty-dir")
    (root / "a.txt").write_text("hello\n")
    (root / "a.txt").chmod(0o640)
    (root / "run.sh").write_text("#!/bin/sh\necho run\n")
    (root / "run.sh").chmod(0o755)
    (root / "empty").write_bytes(b"")
    (root / "empty").chmod(0o600)
    (root / "sub" / "deep" / "data.bin").write_bytes(os.urandom(200_000))
    (root / "sub" / "deep" / "data.bin").chmod(0o644)
    (root / "sub" / "notes.md").write_text("# notes\n" * 100)
    (root / "sub" / "notes.md").chmod(0o664)
    os.symlink("a.txt", root / "link")
    (root / "sub").chmod(0o750)
    (root / "sub" / "deep").chmod(0o700)
    (root / "empty-dir").chmod(0o755)


def describe_local(root):
    """{relative path: (type, mode, size, sha256 or link target)} of a local tree."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", None, None, os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("d", stat.S_IMODE(st.st_mode), None, None)
            else:
                with open(p, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
                out[rel] = ("f", stat.S_IMODE(st.st_mode), st.st_size, digest)
    return out


def describe_remote(api, sb_id, root):
    """The same for a tree in the sandbox, from find and sha256sum run there."""
    text = sh(api, sb_id, f"cd {shlex.quote(root)} && find . -mindepth 1 -printf '%y %m %s %P %l\\n'"
                          " && echo --- && find . -type f -exec sha256sum {} +")
    listing, sums = text.split("---\n")
    digests = {line.split(None, 1)[1][2:]: line.split()[0] for line in sums.splitlines()}
    out = {}
    for line in listing.splitlines():
        kind, mode, size, rest = line.split(" ", 3)
        if kind == "l":
            rel, target = rest.split(" ", 1)
            out[rel] = ("l", None, None, target)
        elif kind == "d":
            out[rest.rstrip(" ")] = ("d", int(mode, 8), None, None)
        else:
            rel = rest.rstrip(" ")
            out[rel] = ("f", int(mode, 8), int(size), digests[rel])
    return out


@pytest.fixture
def remote_dir(api, base_sb):
    d = f"/tmp/cli-cp-{uuid.uuid4().hex[:8]}"
    sh(api, base_sb["id"], f"mkdir -p {d} && chown user {d}")
    yield d
    sh(api, base_sb["id"], f"rm -rf {d}")


def test_cp_tree_both_ways(daemon, api, base_sb, remote_dir, tmp_path):
    sb_id = base_sb["id"]
    src = tmp_path / "proj"
    make_tree(src)
    want = describe_local(src)

    # Into an existing directory: it lands as DIR/proj.
    ok(daemon, "cp", str(src), f"{sb_id}:{remote_dir}")
    assert describe_remote(api, sb_id, f"{remote_dir}/proj") == want
    # To a name that does not exist: created with proj's contents.
    ok(daemon, "cp", str(src), f"{sb_id}:{remote_dir}/renamed")
    assert describe_remote(api, sb_id, f"{remote_dir}/renamed") == want
    # proj/. : the contents into an existing directory.
    sh(api, sb_id, f"mkdir {remote_dir}/into && chown user {remote_dir}/into")
    ok(daemon, "cp", f"{src}/.", f"{sb_id}:{remote_dir}/into")
    assert describe_remote(api, sb_id, f"{remote_dir}/into") == want

    # And back.
    back = tmp_path / "back"
    back.mkdir()
    ok(daemon, "cp", f"{sb_id}:{remote_dir}/proj", str(back))
    assert describe_local(back / "proj") == want
    ok(daemon, "cp", f"{sb_id}:{remote_dir}/renamed", str(tmp_path / "fresh"))
    assert describe_local(tmp_path / "fresh") == want
    assert os.path.getmtime(back / "proj" / "a.txt") // 1 == os.path.getmtime(src / "a.txt") // 1

    # One file, and one link (copied as a link), each way.
    ok(daemon, "cp", str(src / "run.sh"), f"{sb_id}:{remote_dir}/run-copy")
    assert sh(api, sb_id, f"stat -c '%a %s' {remote_dir}/run-copy").split() == ["755", "19"]
    ok(daemon, "cp", str(src / "link"), f"{sb_id}:{remote_dir}/")
    assert sh(api, sb_id, f"readlink {remote_dir}/link").strip() == "a.txt"
    ok(daemon, "cp", f"{sb_id}:{remote_dir}/proj/link", str(tmp_path / "l2"))
    assert os.readlink(tmp_path / "l2") == "a.txt"


def test_cp_20_mib_both_ways(daemon, api, base_sb, remote_dir, tmp_path):
    sb_id = base_sb["id"]
    data = os.urandom(20 << 20)
    want = hashlib.sha256(data).hexdigest()
    (tmp_path / "big.bin").write_bytes(data)
    ok(daemon, "cp", str(tmp_path / "big.bin"), f"{sb_id}:{remote_dir}/", timeout=600)
    assert sh(api, sb_id, f"sha256sum {remote_dir}/big.bin").split()[0] == want
    ok(daemon, "cp", f"{sb_id}:{remote_dir}/big.bin", str(tmp_path / "again.bin"), timeout=600)
    with open(tmp_path / "again.bin", "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == want
    assert not [n for n in os.listdir(tmp_path) if "spacectl" in n], "a temporary file was left"


def test_cp_tar_streams(daemon, api, base_sb, remote_dir, tmp_path):
    sb_id = base_sb["id"]
    make_tree(tmp_path / "t")
    archive = subprocess.run(["tar", "-C", str(tmp_path), "-cf", "-", "t"], capture_output=True,
                             check=True).stdout
    env = dict(os.environ, SPACE_URL=daemon.url, SPACE_API_KEY=daemon.api_key)
    p = subprocess.run([space.SPACECTL, "cp", "-", f"{sb_id}:{remote_dir}"], input=archive,
                       env=env, capture_output=True, timeout=300)
    assert p.returncode == 0, p
    assert describe_remote(api, sb_id, f"{remote_dir}/t") == describe_local(tmp_path / "t")
    p = subprocess.run([space.SPACECTL, "cp", f"{sb_id}:{remote_dir}/t", "-"], env=env,
                       capture_output=True, timeout=300)
    assert p.returncode == 0, p
    out = tmp_path / "x"
    out.mkdir()
    subprocess.run(["tar", "-C", str(out), "-xf", "-"], input=p.stdout, check=True)
    assert describe_local(out / "t") == describe_local(tmp_path / "t")


def test_cp_errors(daemon, api, base_sb, remote_dir, tmp_path):
    sb_id = base_sb["id"]
    p = space.spacectl(daemon, "cp", f"{sb_id}:{remote_dir}/nope", str(tmp_path))
    assert p.returncode == 1 and p.stderr.startswith("spacectl: cp: ") and "nope" in p.stderr, p
    p = space.spacectl(daemon, "cp", str(tmp_path / "nope"), f"{sb_id}:{remote_dir}")
    assert p.returncode == 1 and "No such file" in p.stderr, p
    p = space.spacectl(daemon, "cp", f"{sb_id}:{remote_dir}", str(tmp_path / "no" / "dir" / ""))
    assert p.returncode == 1 and p.stderr.startswith("spacectl: cp: "), p
    (tmp_path / "f").write_text("x")
    p = space.spacectl(daemon, "cp", str(tmp_path / "f"), f"{sb_id}:{remote_dir}/missing/dir/")
    assert p.returncode == 1 and "must exist" in p.stderr, p
    p = space.spacectl(daemon, "cp", str(tmp_path / "f"), f"{sb_id}:{remote_dir}/missing/f")
    assert p.returncode == 1 and p.stderr.startswith("spacectl: cp: "), p
    os.mkdir(tmp_path / "d")
    ok(daemon, "cp", str(tmp_path / "f"), f"{sb_id}:{remote_dir}/file")
    p = space.spacectl(daemon, "cp", str(tmp_path / "d"), f"{sb_id}:{remote_dir}/file")
    assert p.returncode == 1 and "directory" in p.stderr, p
    # Not the default user's to write: the API's permission_denied, shown as its message
    # alone (no "(code, HTTP status)").
    p = space.spacectl(daemon, "cp", str(tmp_path / "f"), f"{sb_id}:/root/")
    assert p.returncode == 1 and p.stderr.startswith("spacectl: cp: ") and \
        "HTTP" not in p.stderr, p
    p = space.spacectl(daemon, "cp", str(tmp_path / "f"), "sb-0000000000000000:/tmp/")
    assert p.returncode == 1 and "sb-0000000000000000" in p.stderr, p
    p = space.spacectl(daemon, "cp", str(tmp_path / "f"), str(tmp_path / "g"))
    assert p.returncode == 2, p
    p = space.spacectl(daemon, "cp", str(tmp_path / "f"), f"{sb_id}:relative")
    assert p.returncode == 2, p


def test_ls(daemon, api, base_sb, remote_dir, tmp_path):
    sb_id = base_sb["id"]
    make_tree(tmp_path / "proj")
    ok(daemon, "cp", str(tmp_path / "proj"), f"{sb_id}:{remote_dir}")
    p = ok(daemon, "ls", f"{sb_id}:{remote_dir}/proj")
    assert p.stdout.splitlines() == ["a.txt", "empty", "empty-dir", "link", "run.sh", "sub"], p
    p = ok(daemon, "ls", "-R", f"{sb_id}:{remote_dir}/proj")
    assert p.stdout.splitlines() == ["a.txt", "empty", "empty-dir", "link", "run.sh", "sub",
                                     "sub/deep", "sub/deep/data.bin", "sub/notes.md"], p
    p = ok(daemon, "ls", "-l", f"{sb_id}:{remote_dir}/proj", env={"TZ": "UTC"})
    rows = {line.split()[-1] if "->" not in line else line.split()[-3]: line
            for line in p.stdout.splitlines()}
    assert re.match(r"^-rw-r-----  user +user +6  \d{4}-\d\d-\d\d \d\d:\d\d  a\.txt$",
                    rows["a.txt"]), p.stdout
    assert re.match(r"^-rwxr-xr-x  .* 19  .*  run\.sh$", rows["run.sh"]), p.stdout
    assert re.match(r"^drwxr-x---  .*  sub$", rows["sub"]), p.stdout
    assert rows["link"].startswith("lrwxrwxrwx") and rows["link"].endswith("link -> a.txt"), \
        p.stdout
    p = ok(daemon, "ls", "-l", f"{sb_id}:{remote_dir}/proj/a.txt")
    assert p.stdout.rstrip().endswith(f"{remote_dir}/proj/a.txt"), p
    p = ok(daemon, "ls", "--json", "--depth", "2", f"{sb_id}:{remote_dir}/proj")
    j = json.loads(p.stdout)
    assert {e["path"] for e in j["entries"]} >= {f"{remote_dir}/proj/sub/deep"}, j
    p = space.spacectl(daemon, "ls", f"{sb_id}:{remote_dir}/nope")
    assert p.returncode == 1 and p.stderr.startswith("spacectl: ls: "), p
