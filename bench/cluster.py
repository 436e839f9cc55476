#!/usr/bin/env python3
"""cluster.py -- scale-out figures: creates per second and create -> first byte with 3 nodes
beside 1 node, and what an api process adds to an exec round trip, all in one run.

Starts a real PostgreSQL (tests/pg/pgserver.py, as an unprivileged user in a temp dir), one
api process (--role api) and nodes (--role node) on loopback, each with its own state dir, and
measures, in this order:
  gVisor         `runsc --network=none --platform=ptrace do echo hi`: spawn -> first byte (the
                 peer a user could pick instead), for scale
  1 node         a burst of --burst creates through the api (POST all, then wait for every
                 operation): creates/s; then --seq sequential creates, POST -> first output byte
                 of `echo` in the new sandbox
  3 nodes        two more nodes join (each builds its own ready snapshot first); the same burst
                 and sequential creates
  exec via api   --exec round trips of `true` (session create on the control plane, attach on
                 the data plane, exit) through the api process, which relays both to the node
  exec direct    the same against the owning node's own listeners: the baseline of the row above
  one node alone a --role all daemon (its own SQLite store, no api process) on the same host: the
                 same sequential creates, the baseline of create -> first byte through the api
                 (target: within 1.2x; claims and results are pushed by LISTEN/NOTIFY)

Every figure follows bench/stats.py (warm-up dropped, medians, p99 only with >= 100 samples,
else max). On these hosts every node shares the same two cores: 3 nodes cannot add CPU, so the
burst rate measures how well claims spread and overlap, not added hardware.

    python3 bench/cluster.py [--burst N] [--seq N] [--exec N]
"""

import argparse
import os
import secrets
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "pg"))

import space  # noqa: E402
import stats  # noqa: E402
from bench import exec_round_trip  # noqa: E402  (bench/bench.py: `true` round trips)
from lifecycle import gvisor_probe, gvisor_sample  # noqa: E402
from pgserver import PgServer  # noqa: E402

VM_MIB = 128 + 48
SLOTS = 14


def node(url, key, name, data_url, i, shared, peer):
    d = space.Daemon(f"bench-{name}", extra_args=[
        "--role", "node", "--store", url, "--node-id", name, "--memory-budget", str(SLOTS * VM_MIB),
        "--data-url", data_url, "--jail-uid-base", str(2000000000 + (i + 1) * 100000),
        "--shared-dir", shared, "--accel", "tcg", "--cluster-key-file", peer[0]])
    d.extra_args += ["--advertise-url", d.url, "--advertise-data-url", d.data_url]
    d.as_peer(peer[1])  # the bench's direct calls to a node are an api process's
    return own(d, key)


def own(d, key):
    d.binary = space.PLAIN_SPACED  # timed as shipped, not the sanitizer build
    d.api_key = key
    d.api = space.Api(d.url, key, d)
    return d


def first_byte(api, sb_id):
    s = api.create_session(sb_id, ["echo", "x"])
    r = s.attach().collect(until=lambda r: len(r.output) > 0)
    assert r.output, r


def burst(api, n):
    """POST n creates, then wait for all: (creates per second, seconds)."""
    t0 = time.perf_counter()
    made = [api.create_sandbox("minimal", metadata={"bench": "burst"}) for _ in range(n)]
    for sb, op in made:
        got = api.wait_op(op["id"])
        assert got["state"] == "succeeded", got
    dt = time.perf_counter() - t0
    for sb, _ in made:
        api.remove_sandbox(sb["id"])
    return n / dt, dt


def sequential(api, n):
    def one():
        t0 = time.perf_counter()
        sb, op = api.create_sandbox("minimal")
        got = api.wait_op(op["id"])
        assert got["state"] == "succeeded", got
        first_byte(api, sb["id"])
        dt = time.perf_counter() - t0
        api.remove_sandbox(sb["id"])
        return dt
    return stats.series(one, n)


def row(name, xs, base=None, unit="ms", note=""):
    k = 1000.0 if unit == "ms" else 1.0
    med = stats.median(xs)
    label, t = stats.tail(xs)
    ratio = f"{stats.ratio(med, stats.median(base)):.2f}x" if base else ""
    print(f"{name:<44} {med * k:10.1f} {unit:<3} {label} {t * k:10.1f}   n={len(xs):<4} {ratio:>7}  {note}",
          flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--burst", type=int, default=12, help="creates per burst")
    ap.add_argument("--bursts", type=int, default=3, help="bursts per configuration (after one warm-up)")
    ap.add_argument("--seq", type=int, default=10, help="sequential creates per configuration")
    ap.add_argument("--exec", type=int, default=100, help="`true` round trips per path")
    ap.add_argument("--gvisor", type=int, default=10)
    args = ap.parse_args()

    pgdir = tempfile.mkdtemp(prefix="space-bench-pg-")
    shared = tempfile.mkdtemp(prefix="space-bench-shared-")
    pg = PgServer(pgdir)
    key = secrets.token_hex(16)
    procs = []
    try:
        url = pg.start()
        peer = space.cluster_key_file(pgdir)
        api_d = own(space.Daemon("bench-api", extra_args=["--role", "api", "--store", url,
                                                          "--cluster-key-file", peer[0]]), key)
        nodes = [node(url, key, f"n{i + 1}", api_d.data_url, i, shared, peer) for i in range(3)]
        procs = [nodes[0], api_d]
        nodes[0].start()
        nodes[0].api.wait_ready_snapshot("minimal")
        api_d.start()
        api = api_d.api

        print(f"{'':<44} {'median':>10}     {'tail':>14}   {'':<6} {'ratio':>7}", flush=True)
        why = gvisor_probe()
        if why:
            print(f"{'gVisor spawn -> first byte':<44} ({why})")
        else:
            g = stats.series(lambda: gvisor_sample()["first_byte"], args.gvisor)
            row("gVisor (runsc ptrace) spawn -> first byte", g)

        results = {}
        for count in (1, 3):
            if count == 3:
                for d in nodes[1:]:
                    d.start()
                    procs.append(d)
                for d in nodes[1:]:
                    d.api.wait_ready_snapshot("minimal")
            burst(api, args.burst)  # warm-up
            rates = [burst(api, args.burst)[0] for _ in range(args.bursts)]
            seq = sequential(api, args.seq)
            results[count] = (rates, seq)
        for count in (1, 3):
            rates, seq = results[count]
            med = stats.median(rates)
            base = stats.median(results[1][0])
            print(f"{f'creates/s, burst of {args.burst}, {count} node(s)':<44} {med:10.2f} /s  min "
                  f"{min(rates):10.2f}   n={len(rates):<4} {med / base:6.2f}x  (higher is better)", flush=True)
        for d in nodes[1:]:  # the single daemon's run gets the host to itself
            d.cleanup()
            procs.remove(d)
        single = own(space.Daemon("bench-single", extra_args=["--accel", "tcg"]), key)
        single.start()
        procs.append(single)
        single.api.wait_ready_snapshot("minimal")
        alone = sequential(single.api, args.seq)
        single.cleanup()
        procs.remove(single)
        row("create -> first byte, one node alone (role all)", alone)
        row("create -> first byte, 1 node via the api", results[1][1], base=alone,
            note="(ratio against one node alone; target <= 1.2x)")
        row("create -> first byte, 3 nodes via the api", results[3][1], base=alone)

        sb, op = api.create_sandbox("minimal")
        assert api.wait_op(op["id"])["state"] == "succeeded"
        owner = api.sandbox(sb["id"])["node"]
        assert owner == "n1", owner  # the only node left
        direct = next(d for d in nodes if d.extra_args[d.extra_args.index("--node-id") + 1] == owner)
        # The node hands out the api's data URL; talking to it directly means its own.
        direct_api = space.Api(direct.url, key, direct)
        t_direct = exec_round_trip(direct_api, sb["id"], args.exec)
        t_api = exec_round_trip(api, sb["id"], args.exec)
        row("exec `true` round trip, direct to the node", t_direct)
        row("exec `true` round trip, through the api", t_api, base=t_direct,
            note="(control and data plane both relayed)")
        api.remove_sandbox(sb["id"])
    finally:
        for d in reversed(procs):
            try:
                d.cleanup()
            except AssertionError as e:
                print(f"cleanup {d.name}: {e}", file=sys.stderr)
        pg.stop()
        shutil.rmtree(pgdir, ignore_errors=True)
        shutil.rmtree(shared, ignore_errors=True)


if __name__ == "__main__":
    main()
