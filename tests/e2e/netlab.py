"""netlab.py -- a small "internet" for egress tests, made of network namespaces of our own on
this machine (no packet leaves it): a namespace reached from the host's namespace over a veth,
holding a DNS server, HTTP and HTTPS echo servers (certificates from a test CA made here with
the openssl CLI), a TCP echo server and a UDP echo server on several addresses in the
documentation ranges 198.51.100.0/24 and 203.0.113.0/24 (tests/e2e/netlab_servers.py).

The host side of the veth holds 198.51.100.1 and 203.0.113.1, so the host routes both ranges
there. Everything made is removed by close(), also after a failed start.

    lab = Internet(); lab.start()
    ... spaced --dns-upstream lab.dns_upstream --egress-ca-file lab.ca_file ...
    lab.requests(kind="https")    # what reached the servers
    lab.close()
"""

import json
import os
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

HOST_ADDRS = ["198.51.100.1", "203.0.113.1"]
DNS_ADDR = "198.51.100.53"
# Every name the lab's DNS answers, and where it points.
ZONE = {
    "allowed.test": ["198.51.100.10"],
    "www.allowed.test": ["198.51.100.10"],
    "blocked.test": ["198.51.100.11"],
    # Two names on one "CDN" address: allowing one must not open the other.
    "cdn-good.test": ["198.51.100.12"],
    "cdn-evil.test": ["198.51.100.12"],
    # The host for credential injection.
    "api.test": ["203.0.113.10"],
    "other.test": ["203.0.113.11"],
    # Names pointing where the gateway must never go.
    "loop.test": ["127.0.0.1"],
    "private.test": ["10.1.2.3"],
    "metadata.test": ["169.254.169.254"],
    "hostaddr.test": ["198.51.100.1"],
}
SERVER_ADDRS = ["198.51.100.10", "198.51.100.11", "198.51.100.12", "203.0.113.10", "203.0.113.11"]


def sh(*argv, check=True, **kw):
    return subprocess.run(list(argv), check=check, capture_output=True, text=True, **kw)


class Internet:
    def __init__(self, tag=None):
        tag = tag or str(os.getpid() % 100000)
        self.ns = "spnet-%s-inet" % tag
        self.veth = "spn%sh" % tag      # host side (IFNAMSIZ: at most 15 bytes)
        self.dir = tempfile.mkdtemp(prefix="space-netlab-")
        self.log = os.path.join(self.dir, "requests.jsonl")
        self.ca_file = os.path.join(self.dir, "ca.crt")
        self.dns_upstream = "%s:53" % DNS_ADDR
        self.proc = None
        self.made_ns = self.made_veth = False

    # ---- setup

    def _ca(self):
        d = self.dir
        names = sorted(ZONE)
        san = ",".join(["DNS:%s" % n for n in names] + ["IP:%s" % a for a in SERVER_ADDRS])
        sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
           "-nodes", "-keyout", d + "/ca.key", "-out", self.ca_file, "-days", "2",
           "-subj", "/CN=SPACE netlab test CA")
        sh("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
           "-keyout", d + "/server.key", "-out", d + "/server.csr", "-subj", "/CN=netlab")
        with open(d + "/ext.cnf", "w") as f:
            f.write("subjectAltName=%s\nextendedKeyUsage=serverAuth\n" % san)
        sh("openssl", "x509", "-req", "-in", d + "/server.csr", "-CA", self.ca_file,
           "-CAkey", d + "/ca.key", "-CAcreateserial", "-out", d + "/server.crt", "-days", "2",
           "-extfile", d + "/ext.cnf")

    def _net(self):
        sh("ip", "netns", "add", self.ns)
        self.made_ns = True
        sh("ip", "link", "add", self.veth, "type", "veth", "peer", "name", "eth0", "netns", self.ns)
        self.made_veth = True
        for a in HOST_ADDRS:
            sh("ip", "addr", "add", a + "/24", "dev", self.veth)
        sh("ip", "link", "set", self.veth, "up")
        n = ["ip", "-n", self.ns]
        sh(*n, "link", "set", "lo", "up")
        sh(*n, "link", "set", "eth0", "up")
        for a in ["198.51.100.2", DNS_ADDR] + SERVER_ADDRS:
            sh(*n, "addr", "add", a + ("/24" if a.endswith(".2") else "/32"), "dev", "eth0")
        # Answers to the other range leave through the same link.
        sh(*n, "addr", "add", "203.0.113.2/24", "dev", "eth0")

    def _servers(self):
        cfg = {"zone": ZONE, "addrs": SERVER_ADDRS, "dns": DNS_ADDR, "log": self.log,
               "cert": self.dir + "/server.crt", "key": self.dir + "/server.key"}
        path = os.path.join(self.dir, "servers.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        open(self.log, "w").close()
        self.proc = subprocess.Popen(["ip", "netns", "exec", self.ns, "/usr/bin/python3",
                                      os.path.join(HERE, "netlab_servers.py"), path],
                                     stdout=subprocess.PIPE, stderr=open(self.dir + "/servers.err", "w"),
                                     text=True)
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError("netlab servers did not start: %s" % open(self.dir + "/servers.err").read())

    def start(self):
        try:
            self._ca()
            self._net()
            self._servers()
        except BaseException:
            self.close()
            raise
        return self

    # ---- use

    def requests(self, kind=None, since=0):
        """What reached the servers (netlab_servers.py records), optionally one kind
        ("dns", "http", "https", "tcp", "udp"), from record number `since` on."""
        with open(self.log) as f:
            recs = [json.loads(l) for l in f if l.strip()][since:]
        return [r for r in recs if kind is None or r["kind"] == kind]

    def mark(self):
        """The number of records so far (for requests(since=...))."""
        with open(self.log) as f:
            return sum(1 for l in f if l.strip())

    def wait_request(self, pred, since=0, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            for r in self.requests(since=since):
                if pred(r):
                    return r
            time.sleep(0.05)
        return None

    # ---- teardown

    def close(self):
        errors = []
        if self.proc:
            self.proc.kill()
            self.proc.wait()
            self.proc.stdout.close()
            self.proc = None
        if self.made_veth:
            r = sh("ip", "link", "del", self.veth, check=False)
            if r.returncode != 0 and "Cannot find" not in r.stderr:
                errors.append("ip link del %s: %s" % (self.veth, r.stderr.strip()))
            self.made_veth = False
        if self.made_ns:
            r = sh("ip", "netns", "del", self.ns, check=False)
            if r.returncode != 0:
                errors.append("ip netns del %s: %s" % (self.ns, r.stderr.strip()))
            self.made_ns = False
        subprocess.run(["rm", "-rf", self.dir], check=False)
        if errors:
            raise RuntimeError("; ".join(errors))
