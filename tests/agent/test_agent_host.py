"""test_agent_host.py -- space-agent run on the host as a normal process, driven over a unix
socket by agentproto.Host (the daemon's side of the protocol).

Run: make build/bin/space-agent && python3 -m pytest tests/agent -q
"""
import errno
import os
import signal
import socket
import struct
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agentproto as P  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
AGENT = os.environ.get("SPACE_AGENT_BIN", os.path.join(ROOT, "build", "bin", "space-agent"))

# RSS bound for the streaming tests; an ASan build needs more (shadow memory, quarantine).
MAX_RSS_KB = int(os.environ.get("SPACE_AGENT_MAX_RSS_KB", 16 * 1024))

pytestmark = pytest.mark.skipif(
    not os.access(AGENT, os.X_OK),
    reason=f"{AGENT} not built (run `make build/bin/space-agent`)")


@pytest.fixture
def host(tmp_path):
    h = P.Host(AGENT, tmp_path)
    h.start_agent()
    h.accept()
    h.hello()
    yield h
    log = h.agent_log()
    h.close()
    # The agent must never crash, whatever a test did to it.
    assert "AddressSanitizer" not in log and "runtime error" not in log, log


ENV = ["PATH=/usr/local/bin:/usr/bin:/bin"]


def test_echo(host):
    c = host.run(1, ["echo", "hi"], env=ENV)
    assert c.error is None
    assert c.pid and c.pid > 1
    assert bytes(c.out) == b"hi\n"
    assert c.exit == (3, 0, 0)


def test_exit_code_and_stderr(host):
    c = host.run(2, ["sh", "-c", "echo out; echo err >&2; exit 3"], env=ENV)
    assert c.exit[1:] == (3, 0)
    assert bytes(c.out) == b"out\n" and bytes(c.err) == b"err\n"
    assert c.exit[0] == 8


def test_killed_by_signal(host):
    c = host.run(3, ["sh", "-c", "kill -9 $$"], env=ENV)
    assert c.exit[1:] == (-1, 9)


def test_h_signal(host):
    c = host.exec(4, ["sleep", "100"], env=ENV)
    host.wait_for(lambda: c.pid is not None)
    host.send(P.H_SIGNAL, 4, struct.pack("<I", signal.SIGTERM))
    host.wait_for(lambda: c.exit is not None, timeout=5)
    assert c.exit[1:] == (-1, signal.SIGTERM)
    # A bad signal number is reported, not acted on.
    host.send(P.H_SIGNAL, 4, struct.pack("<I", 99))
    host.wait_for(lambda: any("bad signal" in m for m in host.logs), timeout=5)


def test_exec_failures(host):
    c = host.run(5, ["definitely-not-a-command"], env=ENV)
    assert c.error[0] == errno.ENOENT
    assert "exec definitely-not-a-command" in c.error[1]
    assert c.exit is None
    c = host.run(6, ["true"], env=ENV, cwd="/nonexistent-dir")
    assert c.error[0] == errno.ENOENT and "chdir" in c.error[1]
    c = host.run(7, ["true"], env=ENV, user="no-such-user-xyz")
    assert c.error[0] == errno.ENOENT and "no-such-user-xyz" in c.error[1]
    # A malformed H_EXEC payload (argc 0).
    host.send(P.H_EXEC, 8, struct.pack("<5I", 0, 0, 0, 0, 0) + b"\0\0")
    host.wait_for(lambda: host.chan(8).error is not None)
    assert host.chan(8).error[0] == errno.EINVAL
    # The failed channels are gone: nothing listed.
    assert host.hello() == {}


def test_path_search_uses_given_env(tmp_path, host):
    d = tmp_path / "bin"
    d.mkdir()
    tool = d / "mytool"
    tool.write_text("echo from-mytool\n")  # no #!: run by /bin/sh, as execvp does
    tool.chmod(0o755)
    c = host.run(9, ["mytool"], env=[f"PATH=/usr/bin:{d}"])
    assert bytes(c.out) == b"from-mytool\n", c.error
    c = host.run(10, ["mytool"], env=["PATH=/usr/bin:/bin"])
    assert c.error[0] == errno.ENOENT


def test_env_user_cwd(host):
    uid = os.getuid()
    c = host.run(11, ["/usr/bin/env"], env=["FOO=bar"], uid=uid, gid=os.getgid(), cwd="/tmp")
    env = dict(line.split("=", 1) for line in bytes(c.out).decode().splitlines())
    assert env["FOO"] == "bar"
    assert env["PATH"].startswith("/usr/local/sbin")
    if uid == 0:
        assert env["HOME"] == "/root" and env["USER"] == "root" and env["LOGNAME"] == "root"
    assert set(env) <= {"FOO", "PATH", "HOME", "USER", "LOGNAME", "PWD"}
    c = host.run(12, ["pwd"], env=ENV, cwd="/tmp")
    assert bytes(c.out) == b"/tmp\n"
    # Given variables win over the user's.
    c = host.run(13, ["sh", "-c", "echo $HOME"], env=ENV + ["HOME=/x"])
    assert bytes(c.out) == b"/x\n"


@pytest.mark.skipif(os.getuid() != 0, reason="switching users needs root")
def test_user_by_name(host):
    c = host.run(14, ["sh", "-c", "id -u; id -g; echo $HOME; pwd"], env=ENV, user="nobody")
    lines = bytes(c.out).decode().split()
    assert lines[0] == "65534", (c.out, c.err, c.error)


def test_stdin_roundtrip(host):
    c = host.exec(20, ["cat"], env=ENV, stdin=True)
    host.wait_for(lambda: c.pid is not None)
    host.stdin(20, 0, b"hello ")
    host.stdin(20, 0, b"hello ")          # duplicate: dropped
    host.stdin(20, 3, b"lo world\n")      # overlaps: only the new tail is taken
    host.send(P.H_STDIN_CLOSE, 20)
    host.wait_for(lambda: c.exit is not None, timeout=5)
    assert bytes(c.out) == b"hello world\n"
    assert c.stdin_ack == 12
    assert c.exit[1:] == (0, 0)


def test_stdin_large_with_window(host):
    """2 MiB through cat, never more than IN_WINDOW beyond the agent's A_STDIN_ACK."""
    data = os.urandom(2 << 20)
    c = host.exec(21, ["cat"], env=ENV, stdin=True)
    host.wait_for(lambda: c.pid is not None)
    off = 0
    while off < len(data):
        n = min(P.MAX_CHUNK, len(data) - off, c.stdin_ack + P.IN_WINDOW - off)
        if n <= 0:
            host.pump()
            continue
        host.stdin(21, off, data[off:off + n])
        off += n
    host.send(P.H_STDIN_CLOSE, 21)
    host.wait_for(lambda: c.exit is not None, timeout=30)
    assert bytes(c.out) == data
    assert c.stdin_ack == len(data)


def test_stdin_gap_is_rejected(host):
    c = host.exec(22, ["cat"], env=ENV, stdin=True)
    host.wait_for(lambda: c.pid is not None)
    host.stdin(22, 100, b"x")
    host.wait_for(lambda: any("beyond" in m for m in host.logs), timeout=5)
    host.send(P.H_STDIN_CLOSE, 22)
    host.wait_for(lambda: c.exit is not None, timeout=5)
    assert bytes(c.out) == b""


def test_stdin_without_pipe_is_acked(host):
    c = host.exec(24, ["sleep", "0.2"], env=ENV)  # no stdin flag: /dev/null
    host.wait_for(lambda: c.pid is not None)
    host.stdin(24, 0, b"abc")
    host.wait_for(lambda: c.stdin_ack == 3, timeout=5)
    host.wait_for(lambda: c.exit is not None, timeout=5)


def test_stdin_dropped_when_process_exits(host):
    c = host.exec(23, ["true"], env=ENV, stdin=True)
    host.wait_for(lambda: c.exit is not None)
    host.stdin(23, 0, b"nobody reads this")
    host.wait_for(lambda: c.stdin_ack == 17, timeout=5)


def test_concurrent(host):
    cmds = {30 + i: ["sh", "-c", f"for i in 1 2 3 4 5; do echo {i}-$i; sleep 0.02; done"]
            for i in range(4)}
    for cid, argv in cmds.items():
        host.exec(cid, argv, env=ENV)
    host.wait_for(lambda: all(host.chan(c).exit is not None for c in cmds), timeout=20)
    for i, cid in enumerate(cmds):
        assert bytes(host.chan(cid).out) == "".join(f"{i}-{k}\n" for k in range(1, 6)).encode()


def test_many_channels(host):
    ids = range(100, 300)
    for cid in ids:
        host.exec(cid, ["echo", str(cid)], env=ENV)
    host.wait_for(lambda: all(host.chan(c).exit is not None for c in ids), timeout=60)
    for cid in ids:
        assert bytes(host.chan(cid).out) == f"{cid}\n".encode()
        host.send(P.H_RELEASE, cid)
    assert host.hello() == {}


def test_channel_cap(host):
    """At most 1024 live channels; the next exec fails with EMFILE, and a release frees one."""
    ids = range(1000, 2024)
    for cid in ids:
        host.exec(cid, ["sleep", "30"], env=ENV)
    host.wait_for(lambda: all(host.chan(c).pid for c in ids), timeout=60)
    c = host.run(5000, ["true"], env=ENV)
    assert c.error and c.error[0] == errno.EMFILE
    host.send(P.H_SIGNAL, 1000, struct.pack("<I", 9))
    host.wait_for(lambda: host.chan(1000).exit is not None, timeout=10)
    host.send(P.H_RELEASE, 1000)
    c = host.run(5001, ["true"], env=ENV)
    assert c.exit == (0, 0, 0)
    for cid in ids[1:]:
        host.send(P.H_SIGNAL, cid, struct.pack("<I", 9))
    host.wait_for(lambda: all(host.chan(c).exit is not None for c in ids), timeout=30)


def test_stream_100m_flow_control(host):
    """100 MiB of output with a host that acks late: total exact, window respected, RSS flat."""
    total = 100 << 20
    host.auto_ack = False
    c = host.exec(40, ["head", "-c", str(total), "/dev/zero"], env=ENV)
    max_rss = 0
    stalled = False
    last_rss = 0.0
    while c.exit is None:
        typ, _, _ = host.pump(timeout=30)
        if typ != P.A_DATA:
            continue
        if not stalled and len(c.data) >= 10 << 20:
            # Stop acking for a while: the agent must stop at the window, not buffer.
            stalled = True
            with pytest.raises(TimeoutError):
                host.wait_for(lambda: False, timeout=0.5)
            assert len(c.data) - c.acked <= P.OUT_WINDOW
            max_rss = max(max_rss, host.rss_kb())
        # Ack only once a quarter window is outstanding: a slowish host.  (A host must ack
        # whatever it holds eventually: the agent sends nothing beyond the window.)
        if len(c.data) - c.acked >= P.OUT_WINDOW // 4:
            host.ack(40, len(c.data))
        if time.monotonic() - last_rss > 0.05:
            last_rss = time.monotonic()
            max_rss = max(max_rss, host.rss_kb())
    assert c.exit == (total, 0, 0)
    assert len(c.out) == total and c.out.count(0) == total
    assert c.max_beyond_ack <= P.OUT_WINDOW
    assert max_rss < MAX_RSS_KB, f"agent RSS {max_rss} KiB"


def test_reconnect_rewinds_to_acked(host):
    """Bytes received but not acked before a reconnect are resent from the last ack."""
    host.auto_ack = False
    n = 200000
    expect = "".join(f"{i}\n" for i in range(1, n + 1)).encode()
    c = host.exec(50, ["seq", str(n)], env=ENV)
    host.wait_for(lambda: len(c.data) >= 100000)
    host.ack(50, 50000)
    time.sleep(0.1)
    host.disconnect()
    # Forget what we had beyond the ack, as a restarted daemon would.
    del c.data[50000:]
    c.out = bytearray(c.data)
    host.accept()
    assert host.hello() == {50: P.CHAN_RUNNING}
    host.auto_ack = True
    host.ack(50, len(c.data))
    host.wait_for(lambda: c.exit is not None, timeout=20)
    assert bytes(c.out) == expect
    assert c.exit == (len(expect), 0, 0)


def test_exit_while_disconnected(host):
    c = host.exec(51, ["sh", "-c", "echo a; sleep 0.3; echo b"], env=ENV)
    host.wait_for(lambda: len(c.data) == 2)
    host.disconnect()
    time.sleep(0.8)
    host.accept()
    assert host.hello() == {51: P.CHAN_EXITED}
    host.wait_for(lambda: c.exit is not None, timeout=5)
    assert bytes(c.out) == b"a\nb\n" and c.exit == (4, 0, 0)
    # Exit and data are kept until released, and resent after every reconnect.
    host.disconnect()
    host.accept()
    c2 = host.chans[51] = P.Chan(51)
    c2.acked = 4
    c2.data = bytearray(b"a\nb\n")
    assert host.hello() == {51: P.CHAN_EXITED}
    host.wait_for(lambda: c2.exit is not None, timeout=5)
    assert c2.exit == (4, 0, 0) and c2.pid == c.pid
    host.send(P.H_RELEASE, 51)
    assert host.hello() == {}


def test_output_held_while_disconnected_is_bounded(host):
    """With no host the process blocks on its pipe; nothing is lost on reconnect."""
    host.auto_ack = False
    total = 8 << 20
    c = host.exec(52, ["head", "-c", str(total), "/dev/urandom"], env=ENV)
    host.wait_for(lambda: c.pid is not None)
    host.disconnect()
    time.sleep(1.0)
    assert host.rss_kb() < MAX_RSS_KB
    host.accept()
    c.data = bytearray()
    c.out = bytearray()
    c.acked = 0
    host.auto_ack = True
    host.hello()
    host.wait_for(lambda: c.exit is not None, timeout=30)
    assert len(c.out) == total and c.exit == (total, 0, 0)


def test_no_busy_loop_while_disconnected(host):
    host.disconnect()
    time.sleep(0.3)
    before = host.cpu_seconds()
    time.sleep(1.5)
    assert host.cpu_seconds() - before < 0.2
    host.accept()
    host.hello()
    assert host.run(53, ["echo", "back"], env=ENV).out == b"back\n"


def test_descendant_holding_pipes(host):
    """`cmd &` keeps stdout open: the channel still ends, shortly after the main process."""
    t0 = time.monotonic()
    c = host.run(54, ["sh", "-c", "sleep 30 & echo started"], env=ENV, timeout=10)
    assert bytes(c.out) == b"started\n" and c.exit[1:] == (0, 0)
    assert time.monotonic() - t0 < 5


def test_ping_settime(host):
    host.send(P.H_PING, 0, struct.pack("<Q", 0xDEADBEEF12345678))
    host.wait_for(lambda: host.pongs)
    assert host.pongs == [0xDEADBEEF12345678]
    # H_SETTIME is accepted (a host run never sets the clock).
    host.send(P.H_SETTIME, 0, struct.pack("<Q", 1))
    host.send(P.H_PING, 0, struct.pack("<Q", 2))
    host.wait_for(lambda: len(host.pongs) == 2)
    assert abs(time.time() - 1.7e9) < 1e10


def test_identity_host_mode(host):
    """A well-formed H_IDENTITY is answered; a host run applies none of its steps (it would
    re-time, feed and rename the machine the tests run on)."""
    name = socket.gethostname()
    host.send(P.H_IDENTITY, 0, P.encode_identity(realtime_ns=1, entropy=os.urandom(64),
                                                 hostname="clone-1"))
    host.wait_for(lambda: host.identities, timeout=5)
    assert host.identities == [(0, 0)]
    assert socket.gethostname() == name
    assert abs(time.time() - 1.7e9) < 1e10
    # The limits: the most entropy, nothing at all.
    host.send(P.H_IDENTITY, 0, P.encode_identity(entropy=os.urandom(P.IDENTITY_MAX_ENTROPY)))
    host.send(P.H_IDENTITY, 0, P.encode_identity())
    host.wait_for(lambda: len(host.identities) == 3, timeout=5)
    assert host.identities[1:] == [(0, 0), (0, 0)]


def test_identity_then_exec_in_order(host):
    """An H_EXEC sent right behind H_IDENTITY (not waiting for A_IDENTITY) runs after it."""
    host.send(P.H_IDENTITY, 0, P.encode_identity(entropy=os.urandom(32), hostname="clone-2"))
    c = host.exec(80, ["echo", "after"], env=ENV)
    host.wait_for(lambda: c.exit is not None, timeout=10)
    assert bytes(c.out) == b"after\n"
    assert host.identities == [(0, 0)]
    assert host.trace.index((P.A_IDENTITY, 0)) < host.trace.index((P.A_STARTED, 80))


def test_identity_net_block_ignored(host):
    """A net block on a host run (not PID 1) is logged and ignored; the message is still answered."""
    host.send(P.H_IDENTITY, 0, P.encode_identity(net=b"\x01\x02\x03"))
    host.wait_for(lambda: host.identities, timeout=5)
    assert host.identities == [(0, 0)]
    assert any("network configuration ignored" in m for m in host.logs)


def test_identity_malformed(host):
    """Every malformed H_IDENTITY is dropped with a log line and no answer; the agent carries on."""
    good = P.encode_identity(realtime_ns=5, entropy=b"\xaa" * 16, hostname="h")
    bad = [
        good[:-1],                                              # short by a byte
        good + b"\0",                                           # a trailing byte
        good[:11],                                              # no entropy_len
        struct.pack("<QI", 0, 513) + b"\0" * 513 + b"\0" + struct.pack("<I", 0),  # > 512
        struct.pack("<QI", 0, 0xFFFFFFFF) + b"\0" * 8,          # a lying entropy_len
        struct.pack("<QI", 0, 0) + b"no-nul",                   # unterminated hostname
        P.encode_identity(hostname="bad host"),                 # invalid hostname
        P.encode_identity(hostname="-x"),
        P.encode_identity(hostname="a" * 64),                   # too long
        P.encode_identity()[:-4] + struct.pack("<I", 10) + b"x",  # net_len over the payload
    ]
    for payload in bad:
        host.send(P.H_IDENTITY, 0, payload)
    host.send(P.H_IDENTITY, 3, good)                            # not on chan 0
    host.wait_for(lambda: len([m for m in host.logs if "H_IDENTITY" in m]) >= len(bad) + 1,
                  timeout=5)
    # Still healthy: a ping, a good identity and an exec all answered, and nothing else was.
    host.send(P.H_PING, 0, struct.pack("<Q", 7))
    host.send(P.H_IDENTITY, 0, good)
    c = host.run(81, ["echo", "ok"], env=ENV)
    host.wait_for(lambda: host.pongs and host.identities, timeout=5)
    assert bytes(c.out) == b"ok\n"
    assert host.identities == [(0, 0)]
    assert host.proc.poll() is None


def test_malformed_frames(host):
    host.send(999, 0, b"junk")                       # unknown type
    host.send(P.H_PING, 0, b"short")                 # wrong length
    host.send(P.H_ACK, 0, struct.pack("<Q", 1))      # channel frame on chan 0
    host.send(P.H_ACK, 77, struct.pack("<Q", 1))     # unknown chan
    host.send(P.H_HELLO, 5, struct.pack("<IQ", 1, 0))  # control frame on a chan
    host.send_raw(P.HDR.pack(1, P.H_PING, 1, 0) + b"x")  # flags set
    host.wait_for(lambda: len(host.logs) >= 6, timeout=5)
    # A length over the maximum loses the framing: A_ERROR EPROTO, input discarded ...
    host.send_raw(P.HDR.pack(P.MAX_PAYLOAD + 1, P.H_PING, 0, 0) + os.urandom(5000))
    host.wait_for(lambda: host.errors0, timeout=5)
    assert host.errors0[0][0] == errno.EPROTO
    # ... until an H_HELLO header, which resynchronises without reconnecting.
    assert host.hello() == {}
    assert host.run(60, ["echo", "ok"], env=ENV).out == b"ok\n"
    assert host.proc.poll() is None


def test_bad_ack_and_release_running(host):
    c = host.exec(61, ["sleep", "5"], env=ENV)
    host.wait_for(lambda: c.pid is not None)
    host.send(P.H_ACK, 61, struct.pack("<Q", 1 << 40))
    host.send(P.H_RELEASE, 61)
    host.wait_for(lambda: len(host.logs) >= 2, timeout=5)
    assert host.hello() == {61: P.CHAN_RUNNING}
    host.send(P.H_SIGNAL, 61, struct.pack("<I", 9))
    host.wait_for(lambda: c.exit is not None, timeout=5)


def test_chan_in_use(host):
    c = host.exec(62, ["sleep", "5"], env=ENV)
    host.wait_for(lambda: c.pid is not None)
    host.send(P.H_EXEC, 62, P.encode_exec(["true"], env=ENV))
    host.wait_for(lambda: host.errors0, timeout=5)
    assert host.errors0[0][0] == errno.EEXIST
    host.send(P.H_SIGNAL, 62, struct.pack("<I", 9))
    host.wait_for(lambda: c.exit is not None, timeout=5)


def test_version_mismatch(host):
    host.send(P.H_HELLO, 0, struct.pack("<IQ", 99, 0))
    host.wait_for(lambda: host.errors0, timeout=5)
    assert host.errors0[0][0] == errno.EPROTONOSUPPORT
    host.hello()


def test_shutdown_kills_and_exits(host):
    c = host.exec(70, ["sleep", "100"], env=ENV)
    host.wait_for(lambda: c.pid is not None)
    host.send(P.H_SHUTDOWN, 0, struct.pack("<I", 0))
    assert host.proc.wait(5) == 0
    time.sleep(0.1)
    with pytest.raises(ProcessLookupError):
        os.kill(c.pid, 0)


def test_shutdown_clean_terminates_first(tmp_path, host):
    """Mode 1: children get SIGTERM and time to act on it before the agent exits."""
    marker = tmp_path / "marker"
    c = host.exec(71, ["sh", "-c", f"trap 'sleep 0.5; echo term > {marker}; exit 0' TERM; "
                       "echo ready; while :; do sleep 0.05; done"], env=ENV)
    host.wait_for(lambda: bytes(c.out) == b"ready\n", timeout=5)
    t0 = time.monotonic()
    host.send(P.H_SHUTDOWN, 0, struct.pack("<I", 1))
    assert host.proc.wait(5) == 0
    assert marker.read_text() == "term\n"
    # Waited for the trap (0.5 s), but not for the whole grace: everyone was gone.
    assert 0.4 < time.monotonic() - t0 < 2.5
    with pytest.raises(ProcessLookupError):
        os.kill(c.pid, 0)
    assert "shutdown: SIGTERM to the channels' processes" in host.agent_log()


def test_shutdown_clean_kills_after_grace(host):
    """Mode 1: a process that ignores SIGTERM is SIGKILLed once the 3 s grace is over."""
    c = host.exec(72, ["sh", "-c", "trap '' TERM; echo ready; exec sleep 100"], env=ENV)
    host.wait_for(lambda: bytes(c.out) == b"ready\n", timeout=5)
    t0 = time.monotonic()
    host.send(P.H_SHUTDOWN, 0, struct.pack("<I", 1))
    assert host.proc.wait(10) == 0
    assert 2.5 < time.monotonic() - t0 < 8
    with pytest.raises(ProcessLookupError):
        os.kill(c.pid, 0)
    assert "SIGKILL" in host.agent_log()


def test_shutdown_unknown_mode_ignored(host):
    host.send(P.H_SHUTDOWN, 0, struct.pack("<I", 7))
    host.wait_for(lambda: any("unknown mode 7" in m for m in host.logs), timeout=5)
    assert host.run(73, ["echo", "up"], env=ENV).out == b"up\n"
    assert host.proc.poll() is None


# ---- channel kinds (H_OPEN; docs/design/channels.md) ----

def wait_out(host, c, pattern, timeout=5):
    """Pump until the channel's stdout contains pattern (bytes)."""
    host.wait_for(lambda: pattern in bytes(c.out) or c.exit is not None or c.error is not None,
                  timeout=timeout)
    assert pattern in bytes(c.out), (bytes(c.out), c.exit, c.error)


def test_open_process_kind_is_exec(host):
    c = host.open(300, P.KIND_PROC, P.encode_exec(["sh", "-c", "echo out; echo err >&2"], env=ENV))
    host.wait_for(lambda: c.exit is not None, timeout=5)
    assert (bytes(c.out), bytes(c.err), c.exit[1:]) == (b"out\n", b"err\n", (0, 0))
    c = host.open(301, P.KIND_PROC, P.encode_exec(["cat"], env=ENV, stdin=True))
    host.wait_for(lambda: c.pid is not None)
    host.stdin(301, 0, b"piped\n")
    host.send(P.H_STDIN_CLOSE, 301)
    host.wait_for(lambda: c.exit is not None, timeout=5)
    assert bytes(c.out) == b"piped\n"
    # H_OPEN on a live id: EEXIST on chan 0, the channel untouched.
    host.send(P.H_OPEN, 300, P.encode_open(P.KIND_PTY, P.encode_pty(24, 80, ["true"], env=ENV)))
    host.wait_for(lambda: host.errors0, timeout=5)
    assert host.errors0[0][0] == errno.EEXIST


def test_open_malformed(host):
    """An unknown kind or a malformed payload: A_ERROR(chan, EINVAL), no channel."""
    good = P.encode_exec(["true"], env=ENV)
    cases = {
        310: P.encode_open(0, good),                                   # kind 0
        311: P.encode_open(99, good),                                  # unknown kind
        312: b"\x02\x00",                                              # kind truncated
        313: b"",                                                      # empty
        314: P.encode_open(P.KIND_PTY, b"\x18\x00"),                   # size truncated
        315: P.encode_open(P.KIND_PTY, P.encode_pty(0, 80, ["true"])), # rows 0
        316: P.encode_open(P.KIND_PTY, P.encode_pty(24, P.PTY_MAX_DIM + 1, ["true"])),
        317: P.encode_open(P.KIND_PTY, struct.pack("<HH", 24, 80)),    # no exec payload
        318: P.encode_open(P.KIND_PTY, struct.pack("<HH", 24, 80) + struct.pack("<5I", 0, 0, 0, 0, 0) + b"\0\0"),
        319: P.encode_open(P.KIND_FILE, b"\x01"),                      # bad exec payload
        320: P.encode_open(P.KIND_WATCH, b""),
        321: P.encode_open(P.KIND_PROC, struct.pack("<5I", 0, 0, 0, 0, 0) + b"\0\0"),  # argc 0
    }
    for cid, payload in cases.items():
        host.chans[cid] = P.Chan(cid)
        host.send(P.H_OPEN, cid, payload)
    host.wait_for(lambda: all(host.chan(c).error is not None for c in cases), timeout=10)
    for cid in cases:
        c = host.chan(cid)
        assert c.error[0] == errno.EINVAL, (cid, c.error)
        assert c.pid is None and c.exit is None
    assert "unknown channel kind 99" in host.chan(311).error[1]
    assert host.hello() == {}
    # The agent carries on.
    assert host.run(322, ["echo", "up"], env=ENV).out == b"up\n"


def test_pty_tty_and_env(host):
    c = host.pty(330, ["sh", "-c", "tty; [ -t 0 ] && [ -t 1 ] && [ -t 2 ] && echo all-tty; "
                       "echo TERM=$TERM; echo to-stderr >&2"], env=ENV)
    host.wait_for(lambda: c.exit is not None, timeout=5)
    out = bytes(c.out).decode()
    assert c.pid and c.exit[1:] == (0, 0), (out, c.error)
    lines = out.split("\r\n")  # the terminal's ONLCR
    assert lines[0].startswith("/dev/pts/"), out
    assert "all-tty" in lines and "TERM=xterm-256color" in lines and "to-stderr" in lines
    assert bytes(c.err) == b""  # everything is stream 1
    # TERM given in env wins; the process leads its session on its controlling terminal.
    c = host.pty(331, ["sh", "-c", "echo TERM=$TERM; cut -d' ' -f5,6,8 /proc/$$/stat; echo pid=$$"],
                 env=ENV + ["TERM=dumb"])
    host.wait_for(lambda: c.exit is not None, timeout=5)
    out = bytes(c.out).decode()
    assert "TERM=dumb" in out
    pid = out.split("pid=")[1].split()[0]
    pgid, sid, tpgid = out.split("\r\n")[1].split()
    assert sid == pgid == tpgid == pid == str(c.pid), out


def test_pty_size_and_resize(host):
    c = host.pty(340, ["stty", "size"], rows=33, cols=101, env=ENV)
    host.wait_for(lambda: c.exit is not None, timeout=5)
    assert bytes(c.out) == b"33 101\r\n", (c.out, c.error)
    # After H_RESIZE a new `stty size` shows the new size ...
    c = host.pty(341, ["sh", "-c", "stty size; echo ready; read x; stty size"], env=ENV)
    wait_out(host, c, b"ready")
    assert bytes(c.out).startswith(b"24 80\r\n")
    host.resize(341, 50, 132)
    host.stdin(341, 0, b"\n")
    host.wait_for(lambda: c.exit is not None, timeout=5)
    assert bytes(c.out).endswith(b"50 132\r\n"), bytes(c.out)
    # ... and the foreground process group gets SIGWINCH.
    c = host.pty(342, ["sh", "-c", "trap 'stty size' WINCH; echo ready; "
                       "while :; do sleep 0.05; done"], env=ENV)
    wait_out(host, c, b"ready")
    host.resize(342, 7, 1000)
    wait_out(host, c, b"7 1000")
    host.send(P.H_SIGNAL, 342, struct.pack("<I", signal.SIGKILL))
    host.wait_for(lambda: c.exit is not None, timeout=5)
    # Out of range or malformed: logged and dropped, the size unchanged.
    c = host.pty(343, ["sh", "-c", "echo ready; read x; stty size"], rows=10, cols=20, env=ENV)
    wait_out(host, c, b"ready")
    n = len(host.logs)
    host.resize(343, 0, 80)
    host.resize(343, 24, 1001)
    host.send(P.H_RESIZE, 343, b"\x01\x00\x01")
    host.send(P.H_RESIZE, 343, b"\x01\x00\x01\x00\x00")
    host.wait_for(lambda: len([m for m in host.logs[n:] if "H_RESIZE chan 343" in m]) >= 4,
                  timeout=5)
    host.stdin(343, 0, b"\n")
    host.wait_for(lambda: c.exit is not None, timeout=5)
    assert bytes(c.out).endswith(b"10 20\r\n")


def test_pty_echo_and_stdin_close(host):
    c = host.pty(350, ["cat"], env=ENV)
    host.wait_for(lambda: c.pid is not None)
    host.stdin(350, 0, b"hello\n")
    # The terminal echoes the line, then cat writes it back.
    wait_out(host, c, b"hello\r\nhello\r\n")
    host.wait_for(lambda: c.stdin_ack == 6, timeout=5)
    # H_STDIN_CLOSE: ^D ends cat (a terminal cannot be half-closed).
    host.send(P.H_STDIN_CLOSE, 350)
    host.wait_for(lambda: c.exit is not None, timeout=5)
    assert c.exit[1:] == (0, 0)
    # Buffered input is written before the ^D; stdin after the close is dropped.
    c = host.pty(351, ["sh", "-c", "cat; echo cat-done; sleep 0.3"], env=ENV)
    host.wait_for(lambda: c.pid is not None)
    host.stdin(351, 0, b"one\ntwo\n")
    host.send(P.H_STDIN_CLOSE, 351)
    host.send(P.H_STDIN_CLOSE, 351)  # a repeat (as after a reconnect) is the first one
    wait_out(host, c, b"cat-done")
    host.stdin(351, 8, b"late\n")
    host.wait_for(lambda: c.exit is not None, timeout=5)
    out = bytes(c.out)
    lines = out.split(b"\r\n")  # echo of the input, cat's copy of it (interleaving is the tty's)
    assert lines.count(b"one") == 2 and lines.count(b"two") == 2, out
    assert lines[-2:] == [b"cat-done", b""], out
    assert b"late" not in out
    assert c.exit[1:] == (0, 0)


def test_pty_signals(host):
    # ^C typed into the terminal: SIGINT for the foreground process group.
    c = host.pty(360, ["sleep", "100"], env=ENV)
    host.wait_for(lambda: c.pid is not None)
    time.sleep(0.1)
    host.stdin(360, 0, b"\x03")
    host.wait_for(lambda: c.exit is not None, timeout=5)
    assert c.exit[1:] == (-1, signal.SIGINT)
    # H_SIGNAL reaches the whole process group on the terminal.
    c = host.pty(361, ["sh", "-c", "trap 'echo trapped' TERM; sleep 100 & echo started; "
                       "wait $!; echo status=$?"], env=ENV)
    wait_out(host, c, b"started")
    time.sleep(0.1)
    host.send(P.H_SIGNAL, 361, struct.pack("<I", signal.SIGTERM))
    host.wait_for(lambda: c.exit is not None, timeout=5)
    out = bytes(c.out)
    assert b"trapped" in out and b"status=143" in out, out
    assert c.exit[1:] == (0, 0)


def test_pty_output_complete_and_descendants(host):
    """All output written before the exit arrives (EIO on the master is its EOF), and a
    descendant holding the terminal does not keep the channel open."""
    c = host.pty(370, ["seq", "1", "30000"], env=ENV)
    host.wait_for(lambda: c.exit is not None, timeout=20)
    assert bytes(c.out) == "".join(f"{i}\r\n" for i in range(1, 30001)).encode()
    assert c.exit == (len(c.data), 0, 0)
    t0 = time.monotonic()
    c = host.pty(371, ["sh", "-c", "trap '' HUP; (trap '' HUP; exec sleep 30) & echo bg"], env=ENV)
    host.wait_for(lambda: c.exit is not None, timeout=10)
    assert time.monotonic() - t0 < 5
    assert b"bg" in bytes(c.out)
    host.send(P.H_RELEASE, 371)
    assert 371 not in host.hello()


def test_resize_not_pty_dropped(host):
    c = host.exec(380, ["sleep", "100"], env=ENV)
    host.wait_for(lambda: c.pid is not None)
    host.resize(380, 24, 80)
    host.wait_for(lambda: any("H_RESIZE chan 380: not a pty" in m for m in host.logs), timeout=5)
    host.resize(381, 24, 80)  # no such channel
    host.send(P.H_RESIZE, 0, P.encode_resize(24, 80))  # chan 0
    host.wait_for(lambda: any("for unknown chan 381" in m for m in host.logs)
                  and any("H_RESIZE on chan 0" in m for m in host.logs), timeout=5)
    assert host.hello() == {380: P.CHAN_RUNNING}
    host.send(P.H_SIGNAL, 380, struct.pack("<I", 9))
    host.wait_for(lambda: c.exit is not None, timeout=5)


def test_file_kind_runs_fsop_main(tmp_path, host):
    """A file channel runs the agent's fsop_main in the child.  (While src/agent/fs/ has only
    the temporary one, every operation fails with ENOSYS: exit 38, one JSON line on stderr,
    nothing on stdout; the real operations are tested in their own unit tests.)"""
    cases = ((390, P.KIND_FILE, ["stat", "/"], 0),
             (391, P.KIND_WATCH, ["watch", str(tmp_path / "nonexistent")], errno.ENOENT))
    for cid, kind, argv, code in cases:
        c = host.open(cid, kind, P.encode_exec(argv, env=["IGNORED=1"]))
        host.wait_for(lambda: c.exit is not None or c.error is not None, timeout=5)
        assert c.error is None and c.pid
        assert c.exit[1] in (code, errno.ENOSYS) and c.exit[2] == 0, (c.exit, bytes(c.err))
        if c.exit[1] != 0:
            assert bytes(c.out) == b""
            assert bytes(c.err).startswith(b'{"errno":%d,' % c.exit[1]), bytes(c.err)
    # The user switch and its errors are a process's.
    c = host.open(392, P.KIND_FILE, P.encode_exec(["stat", "/"], user="no-such-user-xyz"))
    host.wait_for(lambda: c.error is not None, timeout=5)
    assert c.error[0] == errno.ENOENT and "no-such-user-xyz" in c.error[1]
    c = host.open(393, P.KIND_FILE, P.encode_exec(["stat", "/"], cwd="/nonexistent-dir"))
    host.wait_for(lambda: c.error is not None, timeout=5)
    assert c.error[0] == errno.ENOENT and "chdir" in c.error[1]
    # Stdin is always a pipe: it is acked, whatever the operation does with it.
    c = host.open(394, P.KIND_FILE, P.encode_exec(["write", str(tmp_path / "x")]))
    host.stdin(394, 0, b"data")
    host.send(P.H_STDIN_CLOSE, 394)
    host.wait_for(lambda: c.exit is not None and c.stdin_ack == 4, timeout=5)


@pytest.mark.skipif(os.getuid() != 0, reason="switching users needs root")
def test_file_kind_as_user(host):
    c = host.open(395, P.KIND_FILE, P.encode_exec(["stat", "/"], user="nobody"))
    host.wait_for(lambda: c.exit is not None or c.error is not None, timeout=5)
    assert c.error is None and c.pid
    assert c.exit[1] in (0, errno.ENOSYS), (c.exit, bytes(c.err))
    if c.exit[1] == errno.ENOSYS:  # the temporary fsop_main
        assert bytes(c.err).startswith(b'{"errno":38,')
