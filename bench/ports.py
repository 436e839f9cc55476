#!/usr/bin/env python3
"""ports.py -- a sandbox's port through the port proxy against the same server from inside the guest.

Starts its own spaced (free loopback ports, temp state dir, the plain build), one `base` sandbox
running tests/e2e/guest/port_servers.py on port 8000, and measures in one run:
  round trip, kept alive   GET /echo on one kept-alive connection: through the proxy from the host
                           (X-Space-Token) beside the same loop in the guest against 127.0.0.1
  round trip, new conn     the same with a new connection per request (the proxy's setns, connect,
                           token check and takeover included)
  download MB/s            GET /big of 256 MiB through the proxy beside the same in the guest
Each also from the sandbox's network namespace straight to the guest (nsenter: the TAP and the
guest's virtio-net, no proxy), which tells the proxy's own cost from the VM's network.
Figures follow bench/stats.py: medians, p99 only with >= 100 samples (else max), ratios against
the in-guest baseline of the same run; a warm-up is discarded. Nothing is asserted about speed.

    python3 bench/ports.py [--n N] [--mib M] [--downloads N] [--accel tcg|kvm|auto]
"""

import argparse
import http.client
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))

import space  # noqa: E402
import stats  # noqa: E402

PORT = 8000

# Runs in the guest: the same requests against the server on loopback; JSON of seconds.
IN_GUEST = r"""
import http.client, json, sys, time
n, size = int(sys.argv[1]), int(sys.argv[2])
def rt(keep):
    out, c = [], http.client.HTTPConnection("127.0.0.1", 8000, timeout=60)
    for _ in range(n + 1):
        if not keep:
            c = http.client.HTTPConnection("127.0.0.1", 8000, timeout=60)
        t0 = time.perf_counter()
        c.request("GET", "/echo")
        c.getresponse().read()
        out.append(time.perf_counter() - t0)
        if not keep:
            c.close()
    return out
def dl():
    c = http.client.HTTPConnection("127.0.0.1", 8000, timeout=600)
    t0 = time.perf_counter()
    c.request("GET", "/big?n=%d" % size)
    r, got = c.getresponse(), 0
    while True:
        b = r.read(1 << 20)
        if not b:
            break
        got += len(b)
    assert got == size, got
    return time.perf_counter() - t0
print(json.dumps({"keep": rt(True), "new": rt(False), "dl": [dl() for _ in range(int(sys.argv[3]) + 1)]}))
"""


# The same from the host, inside the sandbox's netns, straight to the guest's address.
IN_NETNS = IN_GUEST.replace('"127.0.0.1"', '"169.254.0.21"')


def start_servers(api, sb_id):
    path = os.path.join(space.REPO, "tests", "e2e", "guest", "port_servers.py")
    with open(path, "rb") as f:
        r = api.run(sb_id, ["sh", "-c", "cat > /tmp/port_servers.py"], stdin=f.read())
    assert r.exit_code == 0, r
    r = api.run(sb_id, ["sh", "-c", f"setsid python3 /tmp/port_servers.py {PORT} >/tmp/ps.log 2>&1 </dev/null & "
                        "for i in $(seq 100); do grep -qi ':1F40 00000000:0000 0A' /proc/net/tcp && exit 0; "
                        "sleep 0.1; done; exit 1"])
    assert r.exit_code == 0, r


def host_rt(d, host, token, n, keep):
    out, c = [], None
    for _ in range(n + 1):
        if c is None or not keep:
            c = http.client.HTTPConnection("127.0.0.1", d.data_port, timeout=60)
        t0 = time.perf_counter()
        c.request("GET", "/echo", headers={"Host": host, "X-Space-Token": token})
        r = c.getresponse()
        r.read()
        assert r.status == 200, r.status
        out.append(time.perf_counter() - t0)
        if not keep:
            c.close()
    return out


def host_dl(d, host, token, size):
    c = http.client.HTTPConnection("127.0.0.1", d.data_port, timeout=600)
    t0 = time.perf_counter()
    c.request("GET", f"/big?n={size}", headers={"Host": host, "X-Space-Token": token})
    r, got = c.getresponse(), 0
    assert r.status == 200, r.status
    while True:
        b = r.read(1 << 20)
        if not b:
            break
        got += len(b)
    assert got == size, got
    return time.perf_counter() - t0


def ms_line(label, xs, base=None):
    t = stats.tail(xs)
    out = f"  {label:<28} median {stats.median(xs) * 1000:8.2f} ms   {t[0]} {t[1] * 1000:8.2f} ms   (n={len(xs)})"
    if base:
        out += f"   {stats.ratio(stats.median(xs), stats.median(base)):.2f}x of in-guest"
    print(out, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200, help="measured requests of each round-trip series")
    ap.add_argument("--mib", type=int, default=256, help="size of the download")
    ap.add_argument("--downloads", type=int, default=3, help="measured downloads of each kind")
    ap.add_argument("--accel", default="tcg", choices=("tcg", "kvm", "auto"))
    args = ap.parse_args()
    d = space.Daemon("spaced-bench-ports", extra_args=["--accel", args.accel])
    d.binary = space.PLAIN_SPACED  # benchmarks time the daemon as shipped
    size = args.mib << 20
    try:
        d.start()
        api = d.api
        info = api.info()
        print(f"spaced {info['version']}, accelerator {info['accelerator']}; template base, port {PORT}", flush=True)
        sb = api.new_sandbox("base", timeout_s=3600)
        start_servers(api, sb["id"])
        tok = api.raw("POST", f"/v1/sandboxes/{sb['id']}/ports/{PORT}/tokens", {"ttl_s": 3600}).json["token"]
        host = f"{PORT}-{sb['id']}.localhost:{d.data_port}"
        r = api.run(sb["id"], ["python3", "-c", IN_GUEST, str(args.n), str(size), str(args.downloads)],
                    timeout=1800)
        assert r.exit_code == 0, r
        guest = json.loads(bytes(r.stdout))
        ns = f"/run/netns/space-{d.state_tag()}-{sb['id']}"
        p = subprocess.run(["nsenter", f"--net={ns}", sys.executable, "-c", IN_NETNS, str(args.n), str(size),
                            str(args.downloads)], capture_output=True, text=True, timeout=1800)
        assert p.returncode == 0, p.stderr
        netns = json.loads(p.stdout)
        keep = host_rt(d, host, tok, args.n, True)
        new = host_rt(d, host, tok, args.n, False)
        dls = [host_dl(d, host, tok, size) for _ in range(args.downloads + 1)]
        g_keep, g_new, g_dl = (stats.drop_warmup(guest[k]) for k in ("keep", "new", "dl"))
        n_keep, n_new, n_dl = (stats.drop_warmup(netns[k]) for k in ("keep", "new", "dl"))
        keep, new, dls = (stats.drop_warmup(x) for x in (keep, new, dls))
        print("GET /echo round trip:")
        ms_line("in the guest, kept alive", g_keep)
        ms_line("from its netns, kept alive", n_keep, g_keep)
        ms_line("through the proxy, kept", keep, g_keep)
        ms_line("in the guest, new conn", g_new)
        ms_line("from its netns, new conn", n_new, g_new)
        ms_line("through the proxy, new conn", new, g_new)
        print(f"GET of {args.mib} MiB:")
        g_rate = [args.mib / t for t in g_dl]
        p_rate = [args.mib / t for t in dls]
        n_rate = [args.mib / t for t in n_dl]
        for label, xs, base in (("in the guest", g_rate, None), ("from its netns", n_rate, g_rate),
                                ("through the proxy", p_rate, g_rate)):
            t = stats.tail(xs, higher_is_better=True)
            out = f"  {label:<28} median {stats.median(xs):8.1f} MB/s   {t[0]} {t[1]:8.1f} MB/s   (n={len(xs)})"
            if base:
                out += f"   {stats.ratio(stats.median(xs), stats.median(base)):.2f}x of in-guest"
            print(out, flush=True)
        api.remove_sandbox(sb["id"])
    finally:
        d.cleanup()


if __name__ == "__main__":
    main()
