#!/usr/bin/env python3
"""builds.py -- template builds: a three-step build cold, the same build again (every step cached),
and with its last step changed (the prefix cached), each against the cold build of the same run;
then create -> first byte of `echo` from the template built beside the same from its base.

Starts its own spaced (free loopback ports, temp state dir, the plain build) and, n times after a
warm-up (each round with a fresh nonce, so its cold build reuses nothing):
  cold          POST /v1/templates/builds -> its operation succeeded: run (writes a file),
                copy (a context of 64 files, 4 MiB), run (reads them back); builder VM boot,
                three steps, two layers, the result flattened, hashed and imported
  cached        the same body again: every step's layer found; only the result is made
  last changed  the last run step's command changed: the builder starts from the copy's layer
Then, interleaved sample by sample (both templates' ready snapshots taken first):
  create -> first byte  POST /v1/sandboxes, then a session `echo x` to its first stdout byte,
                        from the built template and from its base (`minimal`)

Figures follow bench/stats.py: medians, p99 only with >= 100 samples (else max), ratios against
the baseline of the same run. Nothing is asserted about speed.

    python3 bench/builds.py [--n N] [--creates N] [--accel tcg|kvm|auto]
"""

import argparse
import io
import os
import secrets
import sys
import tarfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))

import space  # noqa: E402
import stats  # noqa: E402

BASE = "minimal"


def context_tar():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for i in range(64):
            data = os.urandom(64 << 10)
            info = tarfile.TarInfo(f"data/f{i:02d}.bin")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def body(name, ctx, nonce, last):
    return {"name": name, "from": BASE, "context": ctx,
            "steps": [{"run": f"echo {nonce} > /var/tmp/nonce"},
                      {"copy": {"src": "data/", "dest": "/opt/data"}},
                      {"run": f"cat /opt/data/* | wc -c; echo {last}"}]}


def build(api, b, want_cached):
    t0 = time.perf_counter()
    r = api.call("POST", "/v1/templates/builds", None, b, expect=202).json
    op = api.wait_op(r["operation"], timeout=900)
    dt = time.perf_counter() - t0
    assert op["state"] == "succeeded", op
    got = api.call("GET", f"/v1/templates/builds/{r['build']['id']}", None).json
    assert [s["cached"] for s in got["steps"]] == want_cached, got["steps"]
    return dt, got["digest"]


def first_byte(api, template):
    t0 = time.perf_counter()
    sb, op = api.create_sandbox(template)
    op = api.wait_op(op["id"])
    assert op["state"] == "succeeded", op
    r = api.run(sb["id"], ["echo", "x"])
    assert r.stdout == b"x\n", r
    dt = time.perf_counter() - t0
    api.remove_sandbox(sb["id"])
    return dt


def line(label, xs, base=None):
    t = stats.tail(xs)
    out = f"  {label:<22} median {stats.median(xs):7.3f} s   {t[0]} {t[1]:7.3f} s   (n={len(xs)})"
    if base:
        out += f"   {stats.ratio(stats.median(xs), stats.median(base)):.2f}x of cold"
    print(out, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=3, help="measured rounds of the three builds (after a warm-up)")
    ap.add_argument("--creates", type=int, default=10, help="measured creates from each template")
    ap.add_argument("--accel", default="tcg", choices=("tcg", "kvm", "auto"))
    args = ap.parse_args()
    d = space.Daemon("spaced-bench-builds", extra_args=["--accel", args.accel])
    d.binary = space.PLAIN_SPACED  # benchmarks time the daemon as shipped
    try:
        d.start()
        api = d.api
        info = api.info()
        print(f"spaced {info['version']}, accelerator {info['accelerator']}; base template {BASE}", flush=True)
        r = api.raw("PUT", "/v1/contexts", context_tar(), headers={"Content-Type": "application/x-tar"})
        assert r.status == 201, r.body
        ctx = r.json["context"]
        cold, cached, changed = [], [], []
        for i in range(1 + args.n):
            nonce = secrets.token_hex(8)
            name = f"bench-{nonce}"
            dt, dig = build(api, body(name, ctx, nonce, "a"), [False] * 3)
            cold.append(dt)
            dt, dig2 = build(api, body(name, ctx, nonce, "a"), [True] * 3)
            assert dig2 == dig, (dig, dig2)
            cached.append(dt)
            dt, _ = build(api, body(name, ctx, nonce, "b"), [True, True, False])
            changed.append(dt)
            print(f"  round {i}{' (warm-up)' if i == 0 else ''}: cold {cold[-1]:.3f} s, cached {cached[-1]:.3f} s,"
                  f" last changed {changed[-1]:.2f} s", flush=True)
        cold, cached, changed = (stats.drop_warmup(x) for x in (cold, cached, changed))
        print("three-step build (run, copy 4 MiB, run):")
        line("cold", cold)
        line("cached", cached, cold)
        line("last step changed", changed, cold)

        for ref in (name, BASE):
            first_byte(api, ref)  # warm-up; the first create also takes the ready snapshot
            try:
                api.wait_ready_snapshot(ref, timeout=300)
            except AssertionError as e:
                print(f"  {ref}: {e}")
        built, base = [], []
        for _ in range(args.creates):
            built.append(first_byte(api, name))
            base.append(first_byte(api, BASE))
        print("create -> first byte of echo:")
        line(f"from {BASE} (base)", base)
        t = stats.tail(built)
        print(f"  {'from the built one':<22} median {stats.median(built):7.2f} s   {t[0]} {t[1]:7.2f} s   "
              f"(n={len(built)})   {stats.ratio(stats.median(built), stats.median(base)):.2f}x of base", flush=True)
    finally:
        d.cleanup()


if __name__ == "__main__":
    main()
