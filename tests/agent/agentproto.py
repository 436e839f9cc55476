"""agentproto.py -- a host-side driver for space-agent's wire protocol (docs/design/agent-protocol.md).

Plays the daemon's part over a unix socket: the agent runs as a normal process with
`--channel PATH` and connects to the server this module listens on.  Everything received is
checked the way the daemon must check it (frame sizes, offsets, windows); a violation raises
ProtocolError so a test fails loudly.
"""
import os
import socket
import struct
import subprocess
import time

PROTO_VERSION = 1
HDR = struct.Struct("<IHHI")
MAX_PAYLOAD = 64 * 1024
OUT_WINDOW = 256 * 1024
IN_WINDOW = 256 * 1024
MAX_CHUNK = MAX_PAYLOAD - 16

H_HELLO, H_EXEC, H_STDIN, H_STDIN_CLOSE, H_SIGNAL, H_ACK, H_RELEASE, H_SETTIME, H_SHUTDOWN, H_PING, \
    H_IDENTITY, H_OPEN, H_RESIZE = range(1, 14)
A_HELLO, A_STARTED, A_DATA, A_EXIT, A_ERROR, A_STDIN_ACK, A_PONG, A_LOG, A_IDENTITY = range(101, 110)
STDOUT, STDERR = 1, 2
CHAN_RUNNING, CHAN_EXITED = 1, 2
EXEC_STDIN = 1
IDENTITY_MAX_ENTROPY = 512
IDENTITY_CLOCK, IDENTITY_ENTROPY, IDENTITY_HOSTNAME = 1, 2, 4
# Channel kinds (H_OPEN; docs/design/channels.md)
KIND_PROC, KIND_PTY, KIND_FILE, KIND_WATCH = 1, 2, 3, 4
PTY_MAX_DIM = 1000

NAMES = {v: k for k, v in globals().items() if k[:2] in ("H_", "A_") and isinstance(v, int)}


class ProtocolError(Exception):
    pass


def encode_exec(argv, env=(), cwd="", user="", uid=0, gid=0, stdin=False):
    b = struct.pack("<5I", EXEC_STDIN if stdin else 0, uid, gid, len(argv), len(env))
    for s in [user, cwd, *argv, *env]:
        b += s.encode() + b"\0"
    return b


def encode_open(kind, payload):
    """H_OPEN payload: u32 kind, then that kind's payload."""
    return struct.pack("<I", kind) + payload


def encode_pty(rows, cols, argv, **kw):
    """The PTY kind's payload: u16 rows, u16 cols, then an H_EXEC payload."""
    return struct.pack("<HH", rows, cols) + encode_exec(argv, **kw)


def encode_resize(rows, cols):
    return struct.pack("<HH", rows, cols)


def encode_identity(realtime_ns=0, entropy=b"", hostname="", net=b""):
    """H_IDENTITY payload, laid out as proto_identity_encode does."""
    return (struct.pack("<QI", realtime_ns, len(entropy)) + entropy + hostname.encode() + b"\0"
            + struct.pack("<I", len(net)) + net)


class Chan:
    """What the host knows about one process channel."""

    def __init__(self, cid):
        self.id = cid
        self.pid = None
        self.data = bytearray()  # combined stream, offset 0..len
        self.out = bytearray()
        self.err = bytearray()
        self.acked = 0           # last H_ACK sent
        self.exit = None         # (final_offset, code, signo)
        self.error = None        # (errno, message)
        self.stdin_ack = 0
        self.max_beyond_ack = 0  # largest (end of DATA - acked) seen: flow control check
        self.dups = 0

    def add_data(self, stream, off, payload):
        end = off + len(payload)
        if off > len(self.data):
            raise ProtocolError(f"chan {self.id}: gap: data at {off}, have {len(self.data)}")
        self.max_beyond_ack = max(self.max_beyond_ack, end - self.acked)
        if end - self.acked > OUT_WINDOW:
            raise ProtocolError(f"chan {self.id}: window exceeded: {end} > ack {self.acked} + {OUT_WINDOW}")
        if end <= len(self.data):
            self.dups += 1
            return
        new = payload[len(self.data) - off:]
        self.data += new
        (self.out if stream == STDOUT else self.err).extend(new)
        if stream not in (STDOUT, STDERR):
            raise ProtocolError(f"bad stream {stream}")


class Host:
    def __init__(self, agent_bin, tmpdir):
        self.agent_bin = agent_bin
        self.path = os.path.join(str(tmpdir), "agent.sock")
        self.logpath = os.path.join(str(tmpdir), "agent.log")
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(self.path)
        self.srv.listen(1)
        self.conn = None
        self.proc = None
        self.buf = b""
        self.chans = {}
        self.logs = []
        self.errors0 = []   # A_ERROR on chan 0
        self.pongs = []
        self.hellos = []
        self.identities = []  # A_IDENTITY (applied, error)
        self.trace = []       # (type, chan) of every frame handled, in order
        self.auto_ack = True

    # -- process and connection --
    def start_agent(self, *extra):
        self.log = open(self.logpath, "ab")
        self.proc = subprocess.Popen([self.agent_bin, "--channel", self.path, *extra],
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)

    def accept(self, timeout=5.0):
        self.srv.settimeout(timeout)
        self.conn, _ = self.srv.accept()
        self.conn.settimeout(None)
        self.buf = b""

    def disconnect(self):
        if self.conn:
            self.conn.close()
            self.conn = None

    def close(self):
        self.disconnect()
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.srv.close()
        if getattr(self, "log", None):
            self.log.close()

    def agent_log(self):
        with open(self.logpath, "rb") as f:
            return f.read().decode(errors="replace")

    def rss_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def cpu_seconds(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    # -- frames --
    def send(self, typ, chan, payload=b""):
        self.conn.sendall(HDR.pack(len(payload), typ, 0, chan) + payload)

    def send_raw(self, data):
        self.conn.sendall(data)

    def recv_frame(self, timeout=10.0):
        deadline = time.monotonic() + timeout
        while True:
            if len(self.buf) >= HDR.size:
                ln, typ, flags, chan = HDR.unpack_from(self.buf)
                if ln > MAX_PAYLOAD:
                    raise ProtocolError(f"frame too big: {ln}")
                if flags != 0:
                    raise ProtocolError(f"flags {flags}")
                if len(self.buf) >= HDR.size + ln:
                    payload = self.buf[HDR.size:HDR.size + ln]
                    self.buf = self.buf[HDR.size + ln:]
                    return typ, chan, payload
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no frame from agent")
            self.conn.settimeout(left)
            try:
                d = self.conn.recv(1 << 20)
            except socket.timeout:
                raise TimeoutError("no frame from agent")
            if not d:
                raise EOFError("agent closed the channel")
            self.buf += d

    def chan(self, cid):
        if cid not in self.chans:
            self.chans[cid] = Chan(cid)
        return self.chans[cid]

    def handle(self, typ, chan, p):
        """Apply one frame to the host's state; returns it for callers that wait on it."""
        self.trace.append((typ, chan))
        if typ == A_HELLO:
            ver, n = struct.unpack_from("<II", p)
            if len(p) != 8 + 16 * n:
                raise ProtocolError("A_HELLO length")
            lst = [struct.unpack_from("<II", p, 8 + 16 * i) for i in range(n)]
            self.hellos.append((ver, lst))
        elif typ == A_STARTED:
            if len(p) != 4:
                raise ProtocolError("A_STARTED length")
            self.chan(chan).pid = struct.unpack("<I", p)[0]
        elif typ == A_DATA:
            if len(p) < 16:
                raise ProtocolError("A_DATA length")
            stream = p[0]
            off = struct.unpack_from("<Q", p, 8)[0]
            c = self.chan(chan)
            c.add_data(stream, off, p[16:])
            if self.auto_ack:
                self.ack(chan, len(c.data))
        elif typ == A_EXIT:
            if len(p) != 16:
                raise ProtocolError("A_EXIT length")
            c = self.chan(chan)
            c.exit = struct.unpack("<Qii", p)
            if c.exit[0] != len(c.data):
                raise ProtocolError(f"A_EXIT at {c.exit[0]} but have {len(c.data)} bytes")
        elif typ == A_ERROR:
            e = struct.unpack_from("<i", p)[0]
            msg = p[4:].rstrip(b"\0").decode(errors="replace")
            if chan == 0:
                self.errors0.append((e, msg))
            else:
                self.chan(chan).error = (e, msg)
        elif typ == A_STDIN_ACK:
            self.chan(chan).stdin_ack = struct.unpack("<Q", p)[0]
        elif typ == A_PONG:
            self.pongs.append(struct.unpack("<Q", p)[0])
        elif typ == A_LOG:
            self.logs.append(p.rstrip(b"\0").decode(errors="replace"))
        elif typ == A_IDENTITY:
            if len(p) != 8 or chan != 0:
                raise ProtocolError("A_IDENTITY length or chan")
            applied, err = struct.unpack("<Ii", p)
            if applied & ~(IDENTITY_CLOCK | IDENTITY_ENTROPY | IDENTITY_HOSTNAME) or err < 0:
                raise ProtocolError(f"A_IDENTITY values {applied:#x} {err}")
            self.identities.append((applied, err))
        else:
            raise ProtocolError(f"unknown frame type {typ}")
        return typ, chan, p

    def pump(self, timeout=10.0):
        return self.handle(*self.recv_frame(timeout))

    def wait_for(self, pred, timeout=20.0):
        deadline = time.monotonic() + timeout
        while not pred():
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("condition not reached")
            self.pump(left)

    # -- requests --
    def hello(self, ns=0, timeout=10.0):
        """Send H_HELLO and return the channel list of the A_HELLO that answers it.
        Frames before it belong to the previous connection's stream and are skipped."""
        n = len(self.hellos)
        self.send(H_HELLO, 0, struct.pack("<IQ", PROTO_VERSION, ns))
        deadline = time.monotonic() + timeout
        while len(self.hellos) == n:
            typ, chan, p = self.recv_frame(deadline - time.monotonic())
            if typ == A_HELLO:
                self.handle(typ, chan, p)
        return dict(self.hellos[-1][1])

    def ack(self, chan, off):
        c = self.chan(chan)
        c.acked = max(c.acked, off)
        self.send(H_ACK, chan, struct.pack("<Q", off))

    def exec(self, cid, argv, **kw):
        self.chans[cid] = Chan(cid)
        self.send(H_EXEC, cid, encode_exec(argv, **kw))
        return self.chans[cid]

    def open(self, cid, kind, payload):
        """H_OPEN of a kind with its payload (after the u32 kind)."""
        self.chans[cid] = Chan(cid)
        self.send(H_OPEN, cid, encode_open(kind, payload))
        return self.chans[cid]

    def pty(self, cid, argv, rows=24, cols=80, **kw):
        return self.open(cid, KIND_PTY, encode_pty(rows, cols, argv, **kw))

    def resize(self, cid, rows, cols):
        self.send(H_RESIZE, cid, encode_resize(rows, cols))

    def stdin(self, cid, off, data):
        self.send(H_STDIN, cid, struct.pack("<Q", off) + data)

    def run(self, cid, argv, timeout=20.0, **kw):
        c = self.exec(cid, argv, **kw)
        self.wait_for(lambda: c.exit is not None or c.error is not None, timeout)
        return c
