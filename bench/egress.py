#!/usr/bin/env python3
"""egress.py -- what the egress gateway costs, beside a direct connection measured in the same
run (issue 7). No VM: a "guest" network namespace is linked to a sandbox namespace by a veth
whose sandbox end is named tap0, so the sandbox namespace has exactly a VM's wiring (the
ruleset from `space-gw --print-ruleset`, the gateway's sockets); upstream is the test
internet of tests/e2e/gwlab.py. Clients are Python (setup latency, concurrency) and curl
(throughput), run in the guest namespace (through the gateway) and in the host's namespace
(direct).

  setup      connect + one small HTTP request -> last byte of the answer, through the gateway
             vs direct; the difference of the medians is the gateway's added setup latency
             (target: p50 <= 1 ms)
  https      256 MiB over HTTPS from a host with an injection rule: the gateway terminates
             TLS with the sandbox CA, re-encrypts upstream and adds the header (target
             >= 200 MB/s) vs curl straight to the server
  conns      1,000 concurrent connections through one gateway: all answered, the gateway's
             RSS before, with all open, and after they closed (bounded memory)

gVisor is not measured here: `runsc do` needs iptables to give its sandbox a network, and it
has no egress policy or gateway to compare with; bench/lifecycle.py prints it for starts.

    python3 bench/egress.py [--setup N] [--mib N] [--conns N]
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

import gwlab  # noqa: E402
import stats  # noqa: E402

GW = os.environ.get("SPACE_GW", os.path.join(ROOT, "build", "bin", "space-gw"))
SECRET = "bench-secret-value"


def sh(*argv, **kw):
    return subprocess.run(list(argv), check=True, capture_output=True, text=True, **kw)


class Sandbox:
    """gwlab's sandbox and guest namespaces with the optimised gateway in front of them."""

    def __init__(self, lab):
        self.lab = lab

    def start(self):
        self.lab.sandbox(binary=GW)
        self.ca = self.lab.make_ca("bench-sandbox-ca")
        self.lab.start_gateway(binary=GW)
        self.guest = self.lab.guest
        return self

    def policy(self, policy):
        self.lab.policy(policy, ca=self.ca)

    def rss_kib(self):
        return self.lab.gw_rss_kib()

    def in_guest(self, *argv, check=False):
        r = subprocess.run(["ip", "netns", "exec", self.guest] + list(argv), capture_output=True, text=True)
        if check and r.returncode != 0:
            raise RuntimeError("%s: exit %d: %s" % (argv[0], r.returncode, r.stderr[-2000:]))
        return r

    def close(self):
        self.lab.stop_gateway()


# A client run in either namespace: resolves through the gateway's DNS when asked (so the
# address is handed out for the name), then times N connect + request + whole answer.
SETUP_CLIENT = r'''
import json, socket, struct, sys, time
host, addr, n, resolve = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
if resolve:
    q = struct.pack("!HHHHHH", 1, 0x100, 1, 0, 0, 0) + b"".join(
        bytes([len(l)]) + l.encode() for l in host.split(".")) + b"\0" + struct.pack("!HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
    s.sendto(q, ("169.254.0.22", 53)); s.recv(512)
req = ("GET /small HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % host).encode()
out = []
for _ in range(n):
    t0 = time.perf_counter()
    c = socket.create_connection((addr, 80), 5)
    c.sendall(req)
    while c.recv(65536):
        pass
    c.close()
    out.append(time.perf_counter() - t0)
print(json.dumps(out))
'''

CONNS_CLIENT = r'''
import json, resource, socket, struct, sys, time
n = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_NOFILE, (n + 256, n + 256))
q = struct.pack("!HHHHHH", 1, 0x100, 1, 0, 0, 0) + b"\x07allowed\x04test\x00" + struct.pack("!HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
s.sendto(q, ("169.254.0.22", 53)); s.recv(512)
socks, ok = [], 0
for i in range(n):
    c = socket.create_connection(("198.51.100.10", 80), 10)
    c.sendall(b"GET /c HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
    socks.append(c)
for c in socks:
    c.settimeout(20)
    if c.recv(12).startswith(b"HTTP/1.1 200"):
        ok += 1
print(json.dumps({"ok": ok}), flush=True)
sys.stdin.readline()
for c in socks:
    c.close()
print("closed", flush=True)
'''


def setup_latency(sb, n):
    via = json.loads(sb.in_guest("python3", "-c", SETUP_CLIENT, "allowed.test", "198.51.100.10",
                                 str(n + 5), "1", check=True).stdout)
    direct = json.loads(subprocess.run(["python3", "-c", SETUP_CLIENT, "allowed.test", "198.51.100.10",
                                        str(n + 5), "0"], capture_output=True, text=True,
                                       check=True).stdout)
    return stats.drop_warmup(via, 5), stats.drop_warmup(direct, 5)


def https_mbps(sb, lab, mib, runs):
    url = "https://inject.test/big/%d" % (mib << 20)
    # Hand the address out for inject.test, then let curl go straight to it.
    sb.in_guest("python3", "-c", SETUP_CLIENT.split("req =")[0], "inject.test", "198.51.100.12", "0", "1", check=True)
    common = ["curl", "-sS", "-o", "/dev/null", "-w", "%{speed_download}", "--resolve",
              "inject.test:443:198.51.100.12"]
    via, direct = [], []
    for _ in range(runs + 1):
        r = sb.in_guest(*common, "--cacert", sb.ca[0], url, check=True)
        via.append(float(r.stdout) / 1e6)
        r = subprocess.run(common + ["--cacert", lab.ca_cert, url], capture_output=True, text=True, check=True)
        direct.append(float(r.stdout) / 1e6)
    injected = [r for r in lab.requests() if r["headers"].get("Authorization") == "Bearer " + SECRET]
    return stats.drop_warmup(via), stats.drop_warmup(direct), len(injected)


def concurrency(sb, n):
    before = sb.rss_kib()
    p = subprocess.Popen(["ip", "netns", "exec", sb.guest, "python3", "-c", CONNS_CLIENT, str(n)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    res = json.loads(p.stdout.readline())
    during = sb.rss_kib()
    p.stdin.write("\n")
    p.stdin.flush()
    p.stdout.readline()
    p.wait()
    time.sleep(1)
    return res["ok"], before, during, sb.rss_kib()


def row(name, xs, unit, target="", higher=False):
    label, t = stats.tail(xs, higher_is_better=higher)
    print("  %-44s %9.3f %-5s %s %9.3f  n=%-4d %s" % (name, stats.median(xs), unit, label, t, len(xs), target))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--setup", type=int, default=300)
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--conns", type=int, default=1000)
    a = ap.parse_args()
    lab = gwlab.Lab()
    sb = Sandbox(lab)
    try:
        sb.start()
        sb.policy({"allow": ["allowed.test", "inject.test:443"],
                   "inject": [{"host": "inject.test", "header": "Authorization", "secret": "bench",
                               "prefix": "Bearer ", "value": "Bearer " + SECRET}]})
        print("egress gateway (%s), %d setup samples, %d MiB x %d HTTPS, %d connections" %
              (GW, a.setup, a.mib, a.runs, a.conns))
        via, direct = setup_latency(sb, a.setup)
        print("setup: connect + GET + whole answer (ms)        median        tail")
        row("direct (host netns -> server)", [x * 1e3 for x in direct], "ms")
        row("through the gateway (guest netns)", [x * 1e3 for x in via], "ms")
        added = (stats.median(via) - stats.median(direct)) * 1e3
        print("  added by the gateway (difference of medians)  %9.3f ms    target p50 <= 1 ms  %s" %
              (added, "ok" if added <= 1 else "MISSED"))
        via_t, direct_t, n_inj = https_mbps(sb, lab, a.mib, a.runs)
        print("https: %d MiB download (MB/s)" % a.mib)
        row("direct (curl -> server, TLS)", direct_t, "MB/s", higher=True)
        row("intercepted + injected (curl -> gw -> server)", via_t, "MB/s", "target >= 200", higher=True)
        print("  ratio gateway/direct %.2f; requests that arrived with the injected header: %d" %
              (stats.ratio(stats.median(via_t), stats.median(direct_t)), n_inj))
        ok, before, during, after = concurrency(sb, a.conns)
        print("conns: %d concurrent connections through one gateway: %d answered" % (a.conns, ok))
        print("  gateway RSS: %.1f MiB before, %.1f MiB with all open (%.1f KiB per connection), "
              "%.1f MiB after they closed" % (before / 1024, during / 1024,
                                             (during - before) / max(1, a.conns), after / 1024))
        print("gVisor: not measured (runsc do needs iptables for a network, and has no egress gateway)")
    finally:
        try:
            sb.close()
        finally:
            lab.close()


if __name__ == "__main__":
    main()
