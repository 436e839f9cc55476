"""gwlab.py -- a small internet for egress tests, and a standalone space-gw in front of a
"guest" network namespace (docs/design/egress.md).

  Lab()               namespaces named spgw-<pid>-*: "inet" (the internet, joined to the host
                      netns by a veth: host side 198.51.100.1/24 and 203.0.113.1/24) running
                      gwlab_servers.py: DNS at 198.51.100.53 from NAMES, HTTP :80 / HTTPS :443
                      echo servers (certificates from a test CA made with the openssl CLI,
                      lab.ca_cert), TCP echo :7000, UDP sink :9999 (lab.udp_received()).
  lab.sandbox()       a "sandbox" netns (tap0 169.254.0.22/30, the ruleset of space-gw
                      --print-ruleset) and a "guest" netns (eth0 169.254.0.21/30, MAC
                      52:54:00:a9:00:15, default route via .22) joined by a veth.
  lab.start_gateway() space-gw (the ASan+UBSan build) on that sandbox; lab.policy(...) sends
                      it a policy, lab.audit() reads its records, lab.stop_gateway() checks
                      its exit and its stderr for sanitizer reports.
  lab.in_guest(fn)    runs fn in a thread that entered the guest netns (sockets it makes stay
                      there); dns(), http(), http_raw(), tls_http(), tls_raw(), tcp() are such
                      clients.
  lab.requests()      what reached the HTTP(S) servers (lab.mark() / since= for "after now").
  lab.close()         removes everything (also after a failed start).
Needs root. Other tests (real VMs) reuse Lab and the servers without the sandbox part."""

import ctypes
import hashlib
import http.client as httpclient

import json
import os
import random
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
# SPACE_TEST_GW: another gateway binary (an older build, to see a test fail without a fix)
SAN_GW = os.environ.get("SPACE_TEST_GW") or os.path.join(REPO, "build", "san", "bin", "space-gw")

HOST_ADDRS = ["198.51.100.1/24", "203.0.113.1/24"]
INET_ADDRS = ["198.51.100.2/24", "198.51.100.10/24", "198.51.100.11/24", "198.51.100.12/24",
              "198.51.100.13/24", "198.51.100.53/24", "203.0.113.10/24", "203.0.113.11/24"]
DNS_ADDR = "198.51.100.53"
NAMES = {
    "allowed.test": ["198.51.100.10"],
    "blocked.test": ["198.51.100.11"],
    "inject.test": ["198.51.100.12"],
    "cdn-a.test": ["198.51.100.13"],
    "cdn-b.test": ["198.51.100.13"],
    "raw.test": ["198.51.100.10"],
    "loop.test": ["127.0.0.1"],
    "private.test": ["10.1.2.3"],
    "nocert.test": ["198.51.100.10"],  # not in the servers' certificate
    "www.allowed.test": ["198.51.100.10"],
    "metadata.test": ["169.254.169.254"],
    "hostaddr.test": ["198.51.100.1"],     # the host's own address
    # names no test's policy lists (E2B's internet resolves every name: test_e2b_network.py)
    "unlisted.test": ["198.51.100.10"],
    "also-unlisted.test": ["198.51.100.13"],
}
CERT_NAMES = [n for n in NAMES if n != "nocert.test"] + ["*.wild.test"]
GUEST_MAC = "52:54:00:a9:00:15"
SNIFF_SECONDS = 5  # what the gateway waits for a connection's first bytes (GW_SNIFF_SECONDS)
SAN_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
               "SUMMARY: UndefinedBehaviorSanitizer")

_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


def sh(*args, check=True, input=None):
    r = subprocess.run(list(args), input=input, capture_output=True, text=True)
    if check and r.returncode:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def setns(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {path}")
    finally:
        os.close(fd)


class Lab:
    def __init__(self):
        self.prefix = f"spgw-{os.getpid()}-{random.randrange(1000)}-"
        self.tmp = tempfile.mkdtemp(prefix="gwlab-")
        self.netns = []
        self.host_veth = f"sg{os.getpid() % 100000}h{random.randrange(100)}"
        self.servers = self.gw = self.gw_err = None
        self.generation = 0
        try:
            self._make_certs()
            self._make_inet()
            self._start_servers()
        except BaseException:
            self.close()
            raise

    # ---- setup
    def _ns(self, name):
        full = self.prefix + name
        sh("ip", "netns", "add", full)
        self.netns.append(full)
        sh("ip", "-n", full, "link", "set", "lo", "up")
        return full

    def _openssl(self, *args):
        sh("openssl", *args)

    def make_ca(self, name):
        """A CA (EC P-256) in the lab's temp dir: (cert path, key path)."""
        crt, key = os.path.join(self.tmp, name + ".crt"), os.path.join(self.tmp, name + ".key")
        self._openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                      "-keyout", key, "-out", crt, "-subj", f"/CN={name}", "-days", "2",
                      "-addext", "basicConstraints=critical,CA:TRUE",
                      "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        return crt, key

    def _make_certs(self):
        self.ca_cert, self.ca_key = self.make_ca("gwlab-ca")
        self.srv_cert, self.srv_key = (os.path.join(self.tmp, "srv.crt"), os.path.join(self.tmp, "srv.key"))
        csr, ext = os.path.join(self.tmp, "srv.csr"), os.path.join(self.tmp, "srv.ext")
        with open(ext, "w") as f:
            f.write("subjectAltName=" + ",".join("DNS:" + n for n in CERT_NAMES) + "\n"
                    "extendedKeyUsage=serverAuth\n")
        self._openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                      "-keyout", self.srv_key, "-out", csr, "-subj", "/CN=gwlab-server")
        self._openssl("x509", "-req", "-in", csr, "-CA", self.ca_cert, "-CAkey", self.ca_key,
                      "-CAcreateserial", "-out", self.srv_cert, "-days", "2", "-extfile", ext)

    def _make_inet(self):
        self.inet = self._ns("inet")
        sh("ip", "link", "add", self.host_veth, "type", "veth", "peer", "name", "eth0", "netns", self.inet)
        for a in HOST_ADDRS:
            sh("ip", "addr", "add", a, "dev", self.host_veth)
        sh("ip", "link", "set", self.host_veth, "up")
        for a in INET_ADDRS:
            sh("ip", "-n", self.inet, "addr", "add", a, "dev", "eth0")
        sh("ip", "-n", self.inet, "addr", "add", "203.0.113.2/24", "dev", "eth0")
        sh("ip", "-n", self.inet, "link", "set", "eth0", "up")
        sh("ip", "-n", self.inet, "route", "add", "default", "via", "198.51.100.1")

    def _start_servers(self):
        self.udp_log = os.path.join(self.tmp, "udp.log")
        self.req_log = os.path.join(self.tmp, "requests.log")
        open(self.req_log, "w").close()
        cfg = os.path.join(self.tmp, "servers.json")
        with open(cfg, "w") as f:
            json.dump({"dns_addr": DNS_ADDR, "names": NAMES, "cert": self.srv_cert, "key": self.srv_key,
                       "udp_log": self.udp_log, "req_log": self.req_log}, f)
        self.servers = subprocess.Popen(["ip", "netns", "exec", self.inet, sys.executable,
                                         os.path.join(HERE, "gwlab_servers.py"), cfg],
                                        stdout=subprocess.PIPE, text=True)
        if self.servers.stdout.readline().strip() != "ready":
            raise RuntimeError("gwlab servers did not start")
        self._wait_tcp("198.51.100.10", 80)
        self._wait_tcp("198.51.100.10", 443)
        self._wait_tcp("203.0.113.10", 7000)
        self._wait_tcp("198.51.100.10", 7443)
        self._wait_tcp("198.51.100.10", 7993)

    def assert_routed(self, *addrs):
        """Network safety: each address leaves the host through the lab's veth (so a gateway
        connecting to it from the host's netns reaches the lab, never the real network)."""
        for a in addrs:
            out = sh("ip", "-o", "route", "get", a)
            assert f" dev {self.host_veth} " in out + " ", f"{a} is not routed into the lab: {out}"

    @staticmethod
    def _wait_tcp(addr, port, timeout=10):
        end = time.time() + timeout
        while True:
            try:
                socket.create_connection((addr, port), timeout=1).close()
                return
            except OSError:
                if time.time() > end:
                    raise
                time.sleep(0.05)

    def sandbox(self, binary=SAN_GW):
        """The sandbox netns (tap0 + ruleset) and the guest netns behind it."""
        self.sbx = self._ns("sbx")
        self.guest = self._ns("guest")
        sh("ip", "-n", self.sbx, "link", "add", "tap0", "type", "veth", "peer", "name", "eth0",
           "netns", self.guest)
        sh("ip", "-n", self.guest, "link", "set", "eth0", "address", GUEST_MAC)
        sh("ip", "-n", self.sbx, "addr", "add", "169.254.0.22/30", "dev", "tap0")
        sh("ip", "-n", self.guest, "addr", "add", "169.254.0.21/30", "dev", "eth0")
        sh("ip", "-n", self.sbx, "link", "set", "tap0", "up")
        sh("ip", "-n", self.guest, "link", "set", "eth0", "up")
        sh("ip", "-n", self.guest, "route", "add", "default", "via", "169.254.0.22")
        ruleset = sh(binary, "--print-ruleset")
        sh("ip", "netns", "exec", self.sbx, "nft", "-f", "-", input=ruleset)

    # ---- what reached the servers (HTTP and HTTPS requests, header values as sent)
    def requests(self, since=0):
        with open(self.req_log) as f:
            return [json.loads(line) for line in f if line.strip()][since:]

    def mark(self):
        """How many requests so far: requests(since=lab.mark()) are the ones after now."""
        return len(self.requests())

    def wait_request(self, pred, since=0, timeout=10):
        end = time.time() + timeout
        while time.time() < end:
            for r in self.requests(since):
                if pred(r):
                    return r
            time.sleep(0.05)
        return None

    # ---- the gateway
    def start_gateway(self, extra=(), binary=SAN_GW):
        self.audit_dir = os.path.join(self.tmp, "audit")
        os.makedirs(self.audit_dir, exist_ok=True)
        self.control_path = os.path.join(self.tmp, "gw.sock")
        if os.path.exists(self.control_path):  # a gateway started again
            os.unlink(self.control_path)
        lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        lsock.bind(self.control_path)
        lsock.listen(8)
        self.gw_err = open(os.path.join(self.tmp, "gw.stderr"), "w+")
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0",
                   UBSAN_OPTIONS="print_stacktrace=1")
        self.gw = subprocess.Popen(
            [binary, "--sandbox", "sb-gwlab", "--netns", "/run/netns/" + self.sbx,
             "--control-fd", str(lsock.fileno()), "--audit-dir", self.audit_dir,
             "--dns-upstream", f"{DNS_ADDR}:53", "--upstream-ca", self.ca_cert, *extra],
            pass_fds=[lsock.fileno()], stderr=self.gw_err, env=env)
        lsock.close()
        end = time.time() + 20
        while True:
            try:
                self.control({"op": "stats"})
                return
            except OSError:
                if self.gw.poll() is not None or time.time() > end:
                    raise RuntimeError("space-gw did not start: " + self.gw_stderr())
                time.sleep(0.05)

    def gw_stderr(self):
        self.gw_err.flush()
        with open(self.gw_err.name) as f:
            return f.read()

    def control(self, msg):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(10)
            s.connect(self.control_path)
            s.sendall(json.dumps(msg).encode() + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        return json.loads(buf)

    def policy(self, policy, ca=None, expect_ok=True):
        """Sends a policy (with inject values already in it); ca = (cert path, key path)."""
        self.generation += 1
        msg = {"op": "policy", "generation": self.generation, "policy": policy}
        if ca:
            msg["ca"] = {"cert": open(ca[0]).read(), "key": open(ca[1]).read()}
        r = self.control(msg)
        if expect_ok and not r.get("ok"):
            raise AssertionError(f"policy refused: {r}")
        return r

    def audit(self):
        path = os.path.join(self.audit_dir, "audit.log")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]

    def audit_text(self):
        out = ""
        for n in ("audit.log", "audit.log.1"):
            p = os.path.join(self.audit_dir, n)
            if os.path.exists(p):
                out += open(p).read()
        return out

    def gw_rss_kib(self):
        with open(f"/proc/{self.gw.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop_gateway(self):
        """SIGTERM, then: exit status 0 and no sanitizer report, else AssertionError."""
        if not self.gw:
            return
        self.gw.send_signal(signal.SIGTERM)
        try:
            rc = self.gw.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.gw.kill()
            rc = self.gw.wait()
        self.gw = None
        err = self.gw_stderr()
        bad = [m for m in SAN_MARKERS if m in err]
        if bad or rc != 0:
            raise AssertionError(f"space-gw exit {rc}, sanitizer: {bad}\n{err[-6000:]}")

    def udp_received(self):
        if not os.path.exists(self.udp_log):
            return []
        with open(self.udp_log) as f:
            return [json.loads(line) for line in f]

    # ---- the guest's side
    def in_guest(self, fn, *args, **kw):
        """fn(*args) in a thread inside the guest netns; its result or its exception."""
        out = {}

        def run():
            try:
                setns("/run/netns/" + self.guest)
                out["r"] = fn(*args, **kw)
            except BaseException as e:  # handed to the caller
                out["e"] = e
        t = threading.Thread(target=run)
        t.start()
        t.join()
        if "e" in out:
            raise out["e"]
        return out["r"]

    def close(self):
        try:
            if self.gw:
                self.gw.kill()
                self.gw.wait()
        finally:
            if self.servers:
                self.servers.kill()
                self.servers.wait()
            for ns in reversed(self.netns):
                sh("ip", "netns", "del", ns, check=False)
            sh("ip", "link", "del", self.host_veth, check=False)
            if self.gw_err:
                self.gw_err.close()
            shutil.rmtree(self.tmp, ignore_errors=True)


# ---- clients (call through lab.in_guest)

def dns(name, qtype=1, server="169.254.0.22", src=None, timeout=3):
    """(rcode, [A addresses]); raises socket.timeout without an answer."""
    qid = random.randrange(65536)
    q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\0" + struct.pack("!HH", qtype, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        if src:
            s.bind((src, 0))
        s.settimeout(timeout)
        s.sendto(q, (server, 53))
        r = s.recv(4096)
    rid, flags, qd, an = struct.unpack("!HHHH", r[:8])
    assert rid == qid
    i = 12
    while r[i]:
        i += 1 + r[i]
    i += 5
    addrs = []
    for _ in range(an):
        if r[i] & 0xC0 == 0xC0:
            i += 2
        else:
            while r[i]:
                i += 1 + r[i]
            i += 1
        rtype, _cls, _ttl, rdlen = struct.unpack("!HHIH", r[i:i + 10])
        i += 10
        if rtype == 1:
            addrs.append(socket.inet_ntoa(r[i:i + 4]))
        i += rdlen
    return flags & 0xF, addrs


def _exchange(sock, requests):
    """Sends each (method, path, headers[, body bytes]) in turn on one connection; the
    responses [(status, headers, body bytes)]; stops at a closed connection."""
    out = []
    for method, path, headers, *body in requests:
        head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
        try:
            sock.sendall(head.encode() + (body[0] if body else b""))
            resp = httpclient.HTTPResponse(sock)
            resp.begin()
            body = resp.read()
        except (OSError, httpclient.HTTPException):
            break
        out.append((resp.status, resp.getheaders(), body))
        if resp.will_close:
            break
    return out


def http(addr, requests, port=80, timeout=5):
    with socket.create_connection((addr, port), timeout=timeout) as s:
        return _exchange(s, requests)


def tls_http(addr, sni, requests, cafile, port=443, timeout=5):
    """HTTPS: (peer certificate issuer CN, responses); raises ssl/OS errors on a refused
    handshake. cafile None: no verification at all (curl -k; the issuer is then None)."""
    ctx = ssl.create_default_context(cafile=cafile)
    if cafile is None:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection((addr, port), timeout=timeout) as raw:
        with ctx.wrap_socket(raw, server_hostname=sni) as s:
            cert = s.getpeercert()
            issuer = dict(x[0] for x in cert["issuer"]).get("commonName") if cert else None
            return issuer, _exchange(s, requests)


def recv_all(sock, timeout=5, want=None):
    """Everything until the peer closes, goes quiet for `timeout` or sent `want` bytes."""
    sock.settimeout(timeout)
    buf = b""
    while want is None or len(buf) < want:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            return buf
        except (ConnectionResetError, ssl.SSLError):
            return buf
        if not chunk:
            return buf
        buf += chunk
    return buf


def http_raw(addr, data, port=80, timeout=5, wait=0):
    """Raw bytes on one connection (after `wait` seconds of silence); what came back."""
    with socket.create_connection((addr, port), timeout=timeout) as s:
        if wait:
            time.sleep(wait)
        s.sendall(data)
        return recv_all(s, timeout)


def tls_raw(addr, sni, cafile, data, port=443, alpn=None, timeout=5, first=0, want=None):
    """TLS (offering `alpn` if given), `first` bytes read before sending data, then data and
    everything until close (or `want` bytes): (issuer CN, selected ALPN, bytes read first,
    the rest)."""
    ctx = ssl.create_default_context(cafile=cafile)
    if alpn:
        ctx.set_alpn_protocols(alpn)
    with socket.create_connection((addr, port), timeout=timeout) as raw:
        with ctx.wrap_socket(raw, server_hostname=sni) as s:
            issuer = dict(x[0] for x in s.getpeercert()["issuer"]).get("commonName")
            head = b""
            while len(head) < first:
                chunk = s.recv(first - len(head))
                if not chunk:
                    break
                head += chunk
            s.sendall(data)
            return issuer, s.selected_alpn_protocol(), head, recv_all(s, timeout, want)


def tcp(addr, port, data=b"ping\n", timeout=3):
    """Sends data, returns what came back before close/timeout (b"" if closed at once)."""
    with socket.create_connection((addr, port), timeout=timeout) as s:
        try:
            s.sendall(data)
            buf = b""
            while len(buf) < len(data):
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
            return buf
        except (ConnectionResetError, BrokenPipeError):
            return b""
        except socket.timeout:
            return buf


def sha256(s):
    return "sha256:" + hashlib.sha256(s.encode()).hexdigest()


__all__ = ["Lab", "dns", "http", "http_raw", "tls_http", "tls_raw", "tcp", "sha256"]
