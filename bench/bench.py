#!/usr/bin/env python3
"""bench.py -- SPACE benchmarks: medians, p99 and ratios against baselines measured in the same run.

Starts its own spaced (like the e2e tests: free loopback ports, temp state dir; with
--no-ready-snapshots, so every create is a cold boot: starts from snapshots and pools are
bench/lifecycle.py's) and measures:
  create -> first byte   cold create of `minimal` until the first output byte of a command
                         (sequential), beside the host's own spawn of `true`
  exec round trip        session create + attach + exit of `true` in a running sandbox,
                         beside the host's spawn of `true` (subprocess)
  stream throughput      a guest command writing 200 MB to a client, beside the host piping
                         the same 200 MB to this process
  idle QEMU RSS          VmRSS of an idle minimal sandbox's QEMU, beside the guest memory size

    python3 bench/bench.py [--create N] [--exec N] [--stream-mb MB] [--stream-n N] [--idle N]

Figures follow bench/stats.py: a warm-up sample dropped from each timed series, medians, and a
tail called p99 only with >= 100 samples (else "max").
"""

import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))

import space  # noqa: E402
import stats  # noqa: E402  (bench/, next to this file)


def host_spawn(n):
    def one():
        t0 = time.perf_counter()
        subprocess.run(["true"], check=True)
        return time.perf_counter() - t0
    return stats.series(one, n)


def host_pipe_mbps(nbytes, n):
    def one():
        t0 = time.perf_counter()
        p = subprocess.Popen(["head", "-c", str(nbytes), "/dev/zero"], stdout=subprocess.PIPE)
        got = 0
        while True:
            b = p.stdout.read1(1 << 20)
            if not b:
                break
            got += len(b)
        p.wait()
        assert got == nbytes
        return nbytes / 1e6 / (time.perf_counter() - t0)
    return stats.series(one, n)


def create_to_first_byte(api, n):
    """Cold creates (the daemon runs without ready snapshots: each must boot)."""
    def one():
        t0 = time.perf_counter()
        sb, op = api.create_sandbox("minimal")
        op = api.wait_op(op["id"])
        assert op["state"] == "succeeded", op
        ready = time.perf_counter() - t0
        s = api.create_session(sb["id"], ["echo", "x"])
        r = s.attach().collect(until=lambda r: len(r.output) > 0)
        assert r.output, r
        ttfb = time.perf_counter() - t0
        kind = api.sandbox(sb["id"])["start_kind"]
        assert kind == "boot", f"a cold create started by {kind}"
        api.remove_sandbox(sb["id"])
        return ready, ttfb
    samples = stats.series(one, n)
    return [r for r, _ in samples], [t for _, t in samples]


def exec_round_trip(api, sb_id, n):
    def one():
        t0 = time.perf_counter()
        r = api.create_session(sb_id, ["true"]).collect()
        assert r.exit_code == 0, r
        return time.perf_counter() - t0
    return stats.series(one, n)


def stream_mbps(api, sb_id, mib, n):
    """A guest command writing mib MiB (dd with 1 MiB blocks: busybox `head -c` is itself
    CPU-bound near 26 MB/s under TCG) streamed to this client."""
    nbytes = mib << 20

    def one():
        s = api.create_session(sb_id, ["dd", "if=/dev/zero", "bs=1M", f"count={mib}"])
        t0 = time.perf_counter()
        r = s.collect(timeout=1800)
        dt = time.perf_counter() - t0
        assert r.exit_code == 0 and len(r.stdout) == nbytes, r
        return nbytes / 1e6 / dt
    return stats.series(one, n)


def guest_pipe_mbps(api, sb_id, mib, n):
    """Baseline: the same bytes through a pipe inside the guest, no streaming out."""
    nbytes = mib << 20

    def one():
        s = api.create_session(sb_id, ["sh", "-c", f"dd if=/dev/zero bs=1M count={mib} 2>/dev/null | cat >/dev/null"])
        t0 = time.perf_counter()
        r = s.collect(timeout=1800)
        dt = time.perf_counter() - t0
        assert r.exit_code == 0, r
        return nbytes / 1e6 / dt
    return stats.series(one, n)


def idle_rss(api, n, settle_s=3.0):
    """A memory figure, not a timed series: no warm-up to drop."""
    sbs = [api.new_sandbox("minimal") for _ in range(n)]
    time.sleep(settle_s)
    rss = [space.vm_rss_kib(space.qemu_pid(sb["id"])) / 1024 for sb in sbs]
    mem = [sb["memory_mib"] for sb in sbs]
    for sb in sbs:
        api.delete_sandbox(sb["id"])
    return rss, mem


def fmt(v, unit):
    if unit == "ms":
        return f"{v * 1000:.1f} ms"
    if unit == "MB/s":
        return f"{v:.1f} MB/s"
    return f"{v:.1f} MiB"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--create", type=int, default=10, help="sequential cold creates")
    ap.add_argument("--exec", type=int, default=50, help="`true` round trips")
    ap.add_argument("--stream-mb", type=int, default=200, help="MiB per streaming run")
    ap.add_argument("--stream-n", type=int, default=3, help="streaming runs")
    ap.add_argument("--idle", type=int, default=3, help="idle sandboxes for RSS")
    ap.add_argument("--accel", default="tcg", choices=("tcg", "kvm", "auto"),
                    help="the daemon's accelerator, passed explicitly so runs on different hosts "
                         "compare like with like (default tcg: what these hosts can run)")
    args = ap.parse_args()

    d = space.Daemon("spaced-bench", extra_args=["--no-ready-snapshots", "--accel", args.accel])
    # Benchmarks time the daemon as shipped, never the sanitizer build the tests run.
    d.binary = space.PLAIN_SPACED
    rows = []
    try:
        d.start()
        api = d.api
        info = api.info()
        print(f"accelerator: {info['accelerator']} (asked: --accel {args.accel})", flush=True)
        assert args.accel == "auto" or info["accelerator"] == args.accel, info
        print(f"spaced {info['version']}, accelerator {info['accelerator']} "
              f"({info['accelerator_reason']}), host {info['capacity']['host_vcpus']} vCPUs",
              flush=True)

        spawn = host_spawn(max(args.exec, args.create))
        print("measuring create -> first byte ...", flush=True)
        ready, ttfb = create_to_first_byte(api, args.create)
        rows.append(("create -> running (minimal, cold)", ready, "ms", spawn, "host spawn `true`"))
        rows.append(("create -> first output byte", ttfb, "ms", spawn, "host spawn `true`"))

        print("measuring exec round trip ...", flush=True)
        sb = api.new_sandbox("minimal")
        rtt = exec_round_trip(api, sb["id"], args.exec)
        rows.append(("exec `true` round trip", rtt, "ms", spawn, "host spawn `true`"))

        print(f"measuring streaming of {args.stream_mb} MiB ...", flush=True)
        mbps = stream_mbps(api, sb["id"], args.stream_mb, args.stream_n)
        guest = guest_pipe_mbps(api, sb["id"], args.stream_mb, args.stream_n)
        host = host_pipe_mbps(args.stream_mb << 20, args.stream_n)
        rows.append((f"stream {args.stream_mb} MiB guest -> client", mbps, "MB/s", guest,
                     "same bytes piped inside the guest"))
        rows.append((f"  (host pipe, {args.stream_mb} MiB)", host, "MB/s", host, "itself"))
        api.delete_sandbox(sb["id"])

        print("measuring idle QEMU RSS ...", flush=True)
        rss, mem = idle_rss(api, args.idle)
        rows.append(("idle minimal QEMU VmRSS", rss, "MiB", mem, "guest memory_mib"))
    finally:
        d.cleanup()

    head = (f"{'metric':<38} {'n':>4} {'median':>12} {'p99 / max':>16}   "
            f"{'baseline (median)':<40} {'ratio':>8}")
    print()
    print(head)
    print("-" * len(head))
    for name, xs, unit, base, base_name in rows:
        med, b = stats.median(xs), stats.median(base)
        label, worst = stats.tail(xs, higher_is_better=(unit == "MB/s"))
        print(f"{name:<38} {len(xs):>4} {fmt(med, unit):>12} {label + ' ' + fmt(worst, unit):>16}   "
              f"{fmt(b, unit) + ' ' + base_name:<40} {stats.ratio(med, b):>7.2f}x")
    print(f"\nratio = median / baseline median (for MB/s: guest throughput as a share of the host's);"
          f"\na tail is p99 only with >= {stats.P99_MIN} samples, else the max (for MB/s the min); "
          f"{stats.WARMUP} warm-up sample dropped from each timed series")


if __name__ == "__main__":
    main()
