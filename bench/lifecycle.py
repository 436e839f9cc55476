#!/usr/bin/env python3
"""lifecycle.py -- starts from snapshots and pools, fork, suspend/restore and density, each beside
a cold boot and gVisor measured in the same run.

Starts its own spaced (like bench/bench.py and the e2e tests: free loopback ports, temp state
dir) and measures, in this order:
  gVisor              `runsc --network=none --platform=ptrace do echo hi`: spawn -> first byte of
                      its stdout, and spawn -> exit (the peer a user could pick instead)
  cold boot           create `minimal` at another size than the template's (so it must boot)
                      -> first output byte of `echo`: the baseline of every timed row
  clone               the same from the template's ready snapshot (start_kind "clone")
  warmed clone        (diagnostic) the same from a named snapshot of a clone that had run one
                      `echo` (busybox in the guest's page cache): how much of a clone's first
                      command is the guest reading its binary rather than the VM starting
  pool                the same as a warm-pool claim (start_kind "pool"), the pool full before
                      each sample
  burst               --burst creates posted at once from as many threads, each timed POST ->
                      first byte of `echo` (clones: the pool is off), beside a single clone
  fork                a 256 MiB sandbox with 200 MiB of its memory written (a tmpfs file in the
                      guest, checked with `free -m`): POST fork -> first output byte of `echo`
                      in the child; then suspend (POST -> operation succeeded) and restore
                      (POST -> operation succeeded, and -> first byte of `echo`)
  density             idle clones of `minimal`: summed PSS and RSS of each sandbox whole, its
                      QEMU and its egress gateway (/proc/PID/smaps_rollup), PSS as a share of
                      RSS, beside cold-booted ones

Every create is sequential and deleted after its sample. Figures follow bench/stats.py
(warm-up samples dropped, medians, p99 only with >= 100 samples, else max); the targets are
printed beside them, never asserted. After the table, every kind of start is broken into the
phases the daemon logs for it (netns, gateway, QEMU, restore, agent, identity, policy, running,
first output: medians), and one clone create and one fork are shown with the daemon's log
timestamps. bench/kvm-check.sh runs this under --accel kvm on a host whose KVM boots our guest.

    python3 bench/lifecycle.py [--clone N] [--pool N] [--boot N] [--gvisor N] [--fork N] ...
"""

import argparse
import datetime
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))

import space  # noqa: E402
import stats  # noqa: E402  (bench/, next to this file)

TEMPLATE = "minimal"
ECHO = ["echo", "x"]
GVISOR = ["runsc", "--network=none", "--platform=ptrace", "do", "echo", "hi"]
FILL_DIR = "/mnt/fill"  # a tmpfs of our own in the guest: /tmp and /dev/shm hold half the RAM

# ---------------------------------------------------------------------------
# The daemon's own account of each start: "sandbox ID: up in N ms: netns +a, gateway +b, ..."
# and "sandbox ID: first output N ms after its start began" (src/daemon/sandbox/phases.c).

PHASES = ("netns", "gateway", "qemu", "restore", "agent", "identity", "policy", "running",
          "first_output")
UP_LINE = re.compile(r"sandbox (\S+): up in [0-9.]+ ms: (.*)$")
FIRST_LINE = re.compile(r"sandbox (\S+): first output ([0-9.]+) ms after its start began")
DAEMON = []  # the daemon of this run, once started: samples read its log


def start_phases(sb_id):
    """The last start of sb_id the daemon logged: {phase: ms after its start began}."""
    if not DAEMON:
        return {}
    out = {}
    for line in DAEMON[0].log_text().splitlines():
        if sb_id not in line:
            continue
        m = UP_LINE.search(line)
        if m and m.group(1) == sb_id:
            out = {}
            for part in m.group(2).split(", "):
                name, _, ms = part.partition(" +")
                try:
                    out[name] = float(ms)
                except ValueError:
                    pass
            continue
        m = FIRST_LINE.search(line)
        if m and m.group(1) == sb_id:
            out["first_output"] = float(m.group(2))
    return out


# ---------------------------------------------------------------------------
# Samples. Each returns the times of its phases in seconds from its POST.


def first_byte(api, sb_id):
    """Session create + attach of `echo` until its first output byte; returns the seconds."""
    t0 = time.perf_counter()
    s = api.create_session(sb_id, ECHO)
    r = s.attach().collect(until=lambda r: len(r.output) > 0)
    assert bytes(r.output) and r.error is None, r
    return time.perf_counter() - t0


def create_sample(api, want_kind, **fields):
    """POST create -> operation succeeded -> first byte of `echo`; then, untimed, the start kind
    is checked and a second `echo` in the same VM is timed (what a VM whose guest has run a
    command once answers), and the sandbox deleted."""
    wall = time.time()
    t0 = time.perf_counter()
    sb, op = api.create_sandbox(TEMPLATE, **fields)
    answer = time.perf_counter() - t0
    op = api.wait_op(op["id"])
    assert op["state"] == "succeeded", op
    running = time.perf_counter() - t0
    fb = running + first_byte(api, sb["id"])
    kind = api.sandbox(sb["id"])["start_kind"]
    assert kind == want_kind, f"{sb['id']} started by {kind}, not {want_kind}"
    second = first_byte(api, sb["id"])
    api.remove_sandbox(sb["id"])
    return {"answer": answer, "running": running, "first_byte": fb, "exec1": fb - running,
            "exec2": second, "id": sb["id"], "wall": wall, "end": wall + fb,
            "phases": start_phases(sb["id"])}


def burst_sample(api, n):
    """n creates posted at once from n threads, each timed POST -> first byte of `echo`;
    returns the n times (seconds). The sandboxes are deleted after."""
    import threading

    out, errors, ids = [None] * n, [], []
    gate = threading.Barrier(n)

    def one(i):
        try:
            gate.wait()
            t0 = time.perf_counter()
            sb, op = api.create_sandbox(TEMPLATE)
            ids.append(sb["id"])
            op = api.wait_op(op["id"])
            assert op["state"] == "succeeded", op
            out[i] = time.perf_counter() - t0 + first_byte(api, sb["id"])
        except Exception as e:  # noqa: BLE001 (re-raised below, in the caller's thread)
            errors.append(e)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in ids:
        api.remove_sandbox(i)
    if errors:
        raise errors[0]
    return out


def pool_ready(api):
    return api.template(TEMPLATE)["pool"]["ready"]


def wait_pool(api, want, timeout=120):
    deadline = time.monotonic() + timeout
    while pool_ready(api) != want:
        assert time.monotonic() < deadline, f"pool of {TEMPLATE}: {api.template(TEMPLATE)['pool']}, want {want} ready"
        time.sleep(0.02)


def gvisor_probe():
    """None if runsc runs here, else why not (printed in the table instead of figures)."""
    if shutil.which(GVISOR[0]) is None:
        return "runsc not installed (make bench installs it from scripts/bench-deps.txt)"
    try:
        p = subprocess.run(GVISOR, capture_output=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "runsc did not finish within 60 s"
    if p.returncode != 0 or p.stdout != b"hi\n":
        err = p.stderr.decode(errors="replace").strip().splitlines()
        return f"runsc exited {p.returncode}: " + (err[-1] if err else repr(p.stdout[:80]))
    return None


def gvisor_sample():
    t0 = time.perf_counter()
    p = subprocess.Popen(GVISOR, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    first = p.stdout.read(1)
    fb = time.perf_counter() - t0
    rest = p.stdout.read()
    rc = p.wait()
    done = time.perf_counter() - t0
    assert rc == 0 and first + rest == b"hi\n", (rc, first + rest)
    return {"first_byte": fb, "exit": done}


def fill_guest(api, sb_id, mib):
    """Writes `mib` MiB of incompressible bytes into a tmpfs sized for them (a 1 MiB random
    block repeated) and checks with `free -m` that the guest's memory holds them; returns the
    `free -m` Mem: line."""
    script = (f"mkdir -p {FILL_DIR} && mount -t tmpfs -o size={mib + 16}m tmpfs {FILL_DIR} && "
              f"dd if=/dev/urandom of=/tmp/block bs=1M count=1 2>/dev/null && "
              f"for i in $(seq {mib}); do cat /tmp/block; done > {FILL_DIR}/x && rm /tmp/block && "
              f"sync && free -m")
    r = api.run(sb_id, ["sh", "-c", script], timeout=600)
    assert r.exit_code == 0, r
    return check_filled(bytes(r.stdout).decode(), mib)


def check_filled(free_out, mib):
    line = next(x for x in free_out.splitlines() if x.startswith("Mem:"))
    total, available = int(line.split()[1]), int(line.split()[-1])
    assert total - available >= 0.95 * mib, f"guest memory not filled with {mib} MiB: {line}"
    return " ".join(line.split())


def fork_sample(api, parent, check_child=False):
    """POST fork (1 child) -> the parent's fork operation succeeded -> first byte of `echo` in the
    child; the child is deleted after."""
    wall = time.time()
    t0 = time.perf_counter()
    r = api.fork(parent, count=1)
    child = r["children"][0]
    op = api.wait_op(r["operation"]["id"])
    assert op["state"] == "succeeded", op
    running = time.perf_counter() - t0
    fb = running + first_byte(api, child)
    rec = api.sandbox(child)
    assert rec["start_kind"] == "fork" and rec["parent_id"] == parent, rec
    if check_child:  # the child has the parent's memory: the filled tmpfs is there
        out = api.run(child, ["sh", "-c", f"ls -l {FILL_DIR}/x; free -m"])
        assert out.exit_code == 0 and FILL_DIR in bytes(out.stdout).decode(), out
    phases = start_phases(child)
    api.remove_sandbox(child)
    return {"running": running, "first_byte": fb, "id": child, "parent": parent,
            "op": r["operation"]["id"], "wall": wall, "end": wall + fb, "phases": phases}


def suspend_restore_sample(api, sb_id):
    t0 = time.perf_counter()
    _, op = api.act(sb_id, "suspend")
    op = api.wait_op(op["id"])
    assert op["state"] == "succeeded", op
    suspend = time.perf_counter() - t0
    assert api.sandbox(sb_id)["state"] == "suspended"
    t0 = time.perf_counter()
    _, op = api.act(sb_id, "restore")
    op = api.wait_op(op["id"])
    assert op["state"] == "succeeded", op
    restore = time.perf_counter() - t0
    fb = restore + first_byte(api, sb_id)
    return {"suspend": suspend, "restore": restore, "restore_fb": fb, "phases": start_phases(sb_id)}


def rollup(pid):
    """/proc/PID/smaps_rollup in KiB: {"Rss": .., "Pss": .., "Pss_Anon": .., ...}."""
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[2] == "kB":
                out[parts[0].rstrip(":")] = int(parts[1])
    return out


MAP_HEAD = re.compile(r"^[0-9a-f]+-[0-9a-f]+ (\S+) \S+ \S+ \S+\s*(.*)$")


def breakdown(pid):
    """Where a clone's QEMU memory is, from /proc/PID/smaps, in KiB of Rss/Pss/Anonymous per
    part: the guest's RAM (the private mapping of the snapshot's memory image: its Anonymous
    pages are the guest's copy-on-write writes), the TCG code buffer (the rwx anonymous
    mapping), the rest of QEMU's anonymous memory (heap, thread stacks, allocations), and
    file mappings (QEMU's binary and libraries: shared with every QEMU on the host)."""
    parts = {k: {"Rss": 0, "Pss": 0, "Anonymous": 0} for k in ("guest RAM", "TCG buffer",
                                                                  "QEMU anon", "files")}
    cur = None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            m = MAP_HEAD.match(line)
            if m:
                perms, path = m.group(1), m.group(2).strip()
                if path.endswith("/mem") and "/snapshots/" in path:
                    cur = parts["guest RAM"]
                elif not path and "x" in perms:
                    cur = parts["TCG buffer"]
                elif not path or path.startswith("["):
                    cur = parts["QEMU anon"]
                else:
                    cur = parts["files"]
                continue
            f3 = line.split()
            if cur is not None and len(f3) == 3 and f3[0].rstrip(":") in cur:
                cur[f3[0].rstrip(":")] += int(f3[1])
    return parts


def gateway_pids(sb_id):
    """The live egress gateway processes of sb_id (space-gw --sandbox ID; none without egress)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        argv = space.cmdline(entry)
        if not argv or os.path.basename(argv[0]) != "space-gw" or "--make-netns" in argv:
            continue
        if any(a == "--sandbox" and b == sb_id for a, b in zip(argv, argv[1:])):
            found.append(int(entry))
    return found


def density(api, n, want_kind, settle_s, **fields):
    """n idle sandboxes, created one after the other; after settle_s, each QEMU's smaps_rollup
    (and, for clones, breakdown()), and its gateway's ("gw", None without one). Returns the
    rollups (KiB), each with "parts" and "gw" added; the sandboxes are deleted."""
    sbs = []
    try:
        for _ in range(n):
            sb = api.new_sandbox(TEMPLATE, **fields)
            assert sb["start_kind"] == want_kind, sb
            sbs.append(sb["id"])
        time.sleep(settle_s)
        out = []
        for i in sbs:
            pid = space.qemu_pid(i)
            gws = gateway_pids(i)
            assert len(gws) <= 1, f"{i}: gateways {gws}"
            out.append(dict(rollup(pid), parts=breakdown(pid) if want_kind == "clone" else None,
                            gw=rollup(gws[0]) if gws else None))
        return out
    finally:
        for i in sbs:
            api.delete_sandbox(i)
        for i in sbs:
            api.wait_sandbox_state(i, ("deleted",), timeout=60)


# ---------------------------------------------------------------------------
# Where the time goes: the daemon's log lines about one sample, on the client's clock.

LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z (\S+ \w+: .*)$")


def timeline(daemon, ids, wall0, wall1, marks):
    """Log lines naming any of ids (None: every line) between wall0 and wall1 (epoch seconds),
    merged with the client's own marks [(seconds after wall0, text)], as lines "+ms  text"."""
    events = [(wall0 + dt, "client: " + text) for dt, text in marks]
    for line in daemon.log_text().splitlines():
        m = LOG_LINE.match(line)
        if not m or (ids is not None and not any(i in line for i in ids)):
            continue
        t = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f")
        t = t.replace(tzinfo=datetime.timezone.utc).timestamp()
        if wall0 - 0.001 <= t <= wall1:  # log times are cut to the millisecond
            events.append((t, m.group(2)))
    events.sort(key=lambda e: e[0])
    return [f"  {(t - wall0) * 1000:+8.1f} ms  {text}" for t, text in events]


# ---------------------------------------------------------------------------
# The table


def fmt(v, unit, digits=1):
    if v is None:
        return "-"
    if unit == "ms":
        return f"{v * 1000:.{digits}f} ms"
    if unit == "%":
        return f"{v:.{digits}f} %"
    return f"{v:.{digits}f} MiB"


class Row:
    """One line of the table. xs: samples (seconds, MiB or %); base: the cold-boot samples of
    the same figure; gv: gVisor's; targets: [(stat, limit)] with stat "p50", "p99" or "value"."""

    def __init__(self, name, xs, unit, base=None, gv=None, targets=(), note=None):
        self.name, self.xs, self.unit = name, xs, unit
        self.base, self.gv, self.targets, self.note = base, gv, list(targets), note

    def target_text(self):
        return ", ".join(f"{'' if s == 'value' else s + ' '}<= {fmt(v, self.unit, 0)}"
                         for s, v in self.targets)

    def met(self):
        """'yes', 'NO', or '' without a target; a p99 target on < 100 samples is judged by the
        max (stricter) and says so."""
        if not self.targets or not self.xs:
            return ""
        ok, by_max = True, False
        for s, limit in self.targets:
            if s == "p99":
                label, v = stats.tail(self.xs)
                by_max = by_max or label == "max"
            else:
                v = stats.median(self.xs)
            ok = ok and v <= limit
        return ("yes" if ok else "NO") + (" (p99 by max)" if by_max else "")


def print_table(rows, gv_reason):
    head = (f"{'metric':<46} {'n':>4} {'median':>11} {'p99 / max':>15}  {'cold boot':>11} {'ratio':>7}"
            f"  {'gVisor':>10} {'ratio':>7}  {'target':<30} {'met'}")
    print(head)
    print("-" * len(head))
    for r in rows:
        if r.xs is None:  # a measurement that could not run here: say why
            print(f"{r.name:<46} {'-':>4}  {r.note}")
            continue
        med = stats.median(r.xs)
        label, worst = stats.tail(r.xs)
        b = stats.median(r.base) if r.base else None
        g = stats.median(r.gv) if r.gv else None
        br = f"{stats.ratio(med, b):.2f}x" if b else "-"
        gr = f"{stats.ratio(med, g):.2f}x" if g else ("n/a" if gv_reason and r.unit == "ms" else "-")
        print(f"{r.name:<46} {len(r.xs):>4} {fmt(med, r.unit):>11} {label + ' ' + fmt(worst, r.unit):>15}"
              f"  {fmt(b, r.unit):>11} {br:>7}  {fmt(g, r.unit):>10} {gr:>7}  {r.target_text():<30} {r.met()}".rstrip())


def phase_table(kinds):
    """Lines of a table: one column per phase, one row per kind of start, each cell the median
    of the phase's time over the samples whose start logged it ('-': none did)."""
    head = f"  {'start':<11}" + "".join(f" {p:>9}" for p in PHASES[:-1]) + f" {'1st out':>9}"
    out = [head]
    for name, samples in kinds:
        if not samples:
            continue
        cells = []
        for p in PHASES:
            xs = [s["phases"][p] for s in samples if p in s.get("phases", {})]
            cells.append(f"{stats.median(xs):9.1f}" if xs else f"{'-':>9}")
        out.append(f"  {name:<11}" + "".join(" " + c for c in cells))
    return "\n".join(out)


def med_ms(samples, key):
    return f"{stats.median([s[key] for s in samples]) * 1000:.1f} ms"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clone", type=int, default=100, help="creates from the ready snapshot")
    ap.add_argument("--warmed", type=int, default=10,
                    help="creates from a snapshot taken after one echo (0: skip)")
    ap.add_argument("--pool", type=int, default=100, help="creates claimed from the warm pool")
    ap.add_argument("--pool-size", type=int, default=4, help="warm pool size")
    ap.add_argument("--burst", type=int, default=10, help="creates posted at once (0: skip)")
    ap.add_argument("--bursts", type=int, default=3, help="bursts measured (after one warm-up)")
    ap.add_argument("--boot", type=int, default=10, help="cold-boot creates (the baseline)")
    ap.add_argument("--gvisor", type=int, default=30, help="runsc runs")
    ap.add_argument("--fork", type=int, default=5, help="forks of the filled sandbox")
    ap.add_argument("--suspend", type=int, default=5, help="suspend + restore cycles")
    ap.add_argument("--fork-mib", type=int, default=256, help="memory of the sandbox to fork")
    ap.add_argument("--fill-mib", type=int, default=200, help="MiB written in its guest")
    ap.add_argument("--density", type=int, default=20, help="idle clones measured together")
    ap.add_argument("--density-boot", type=int, default=5, help="idle cold boots (0: skip)")
    ap.add_argument("--settle", type=float, default=5.0, help="seconds idle before measuring")
    ap.add_argument("--warmup", type=int, default=stats.WARMUP, help="warm-up samples dropped")
    ap.add_argument("--accel", default="tcg", choices=("tcg", "kvm", "auto"),
                    help="the daemon's accelerator, passed explicitly so runs on different hosts "
                         "compare like with like (default tcg: what these hosts can run)")
    args = ap.parse_args()
    w = args.warmup
    started = time.monotonic()

    d = space.Daemon("spaced-bench-lifecycle", extra_args=["--accel", args.accel])
    # Benchmarks time the daemon as shipped, never the sanitizer build the tests run.
    d.binary = space.PLAIN_SPACED
    rows, lines = [], []
    try:
        d.start()
        DAEMON.append(d)
        api = d.api
        info = api.info()
        print(f"accelerator: {info['accelerator']} (asked: --accel {args.accel})", flush=True)
        assert args.accel == "auto" or info["accelerator"] == args.accel, info
        # Every template's ready snapshot first: a builder booting meanwhile would be noise.
        for t in api.templates():
            api.wait_ready_snapshot(t["name"])
        tpl = api.template(TEMPLATE)
        boot_mib = tpl["memory_mib"] + 64  # another size than the template's: no snapshot fits
        print(f"spaced {info['version']}, accelerator {info['accelerator']} "
              f"({info['accelerator_reason']}), host {info['capacity']['host_vcpus']} vCPUs; "
              f"{TEMPLATE}: {tpl['memory_mib']} MiB, ready snapshot {tpl['ready_snapshot']}",
              flush=True)

        print(f"gVisor: {' '.join(GVISOR)} x {args.gvisor} ...", flush=True)
        gv_reason = gvisor_probe()
        gv = None
        if gv_reason is None:
            gv = stats.series(gvisor_sample, args.gvisor, w)
        else:
            print(f"  gVisor not measured: {gv_reason}", flush=True)
        gv_fb = [s["first_byte"] for s in gv] if gv else None

        print(f"cold boot ({boot_mib} MiB) x {args.boot} ...", flush=True)
        boot = stats.series(lambda: create_sample(api, "boot", memory_mib=boot_mib), args.boot, w)
        base = {k: [s[k] for s in boot] for k in ("running", "first_byte", "exec1", "exec2")}

        print(f"clone of the ready snapshot x {args.clone} ...", flush=True)
        clone = stats.series(lambda: create_sample(api, "clone"), args.clone, w)

        warmed = None
        if args.warmed:
            print(f"clone of a snapshot taken after one echo x {args.warmed} ...", flush=True)
            src = api.new_sandbox(TEMPLATE)
            first_byte(api, src["id"])
            r = api.snapshot_sandbox(src["id"], "bench-warmed")
            assert api.wait_op(r["operation"]["id"])["state"] == "succeeded", r
            api.remove_sandbox(src["id"])
            warmed = stats.series(lambda: create_sample(api, "clone", snapshot="bench-warmed"),
                                  args.warmed, w)
            api.delete_snapshot("bench-warmed")

        print(f"pool of {args.pool_size}: claims x {args.pool} ...", flush=True)
        api.set_pool(TEMPLATE, args.pool_size)

        def pool_sample():
            wait_pool(api, args.pool_size)
            return create_sample(api, "pool")
        pool = stats.series(pool_sample, args.pool, w)
        api.set_pool(TEMPLATE, 0)
        wait_pool(api, 0)

        burst = []
        if args.burst:
            print(f"bursts of {args.burst} creates at once x {args.bursts} ...", flush=True)
            for b in stats.series(lambda: burst_sample(api, args.burst), args.bursts, w):
                burst += b

        def col(samples, key):
            return [s[key] for s in samples]

        # The targets: a clone's first byte at most 0.6x gVisor's (0.120 s where gVisor
        # could not run), a burst's median within 2x a single clone's.
        gv_limit = 0.6 * stats.median(gv_fb) if gv_fb else 0.120
        target_clone = [("p50", gv_limit), ("p99", 0.250)]
        single = stats.median(col(clone, "first_byte"))
        rows += [
            Row("create -> 1st byte, ready-snapshot clone", col(clone, "first_byte"), "ms",
                base["first_byte"], gv_fb, target_clone),
            Row("  create -> running (clone)", col(clone, "running"), "ms", base["running"], gv_fb,
                [("p50", 0.060)]),
            Row("create -> 1st byte, warm-pool claim", col(pool, "first_byte"), "ms",
                base["first_byte"], gv_fb, [("p50", 0.015)]),
            Row("  create -> running (pool claim)", col(pool, "running"), "ms", base["running"], gv_fb),
        ]
        if burst:
            rows.append(Row(f"burst of {args.burst} at once: each create -> 1st byte", burst, "ms",
                            base["first_byte"], gv_fb, [("p50", 2 * single)]))
        rows += [
            Row(f"create -> 1st byte, cold boot ({boot_mib} MiB)", base["first_byte"], "ms",
                base["first_byte"], gv_fb),
            Row("  create -> running (cold boot)", base["running"], "ms", base["running"], gv_fb),
            Row("  running -> 1st byte, clone", col(clone, "exec1"), "ms", base["exec1"], gv_fb),
            Row("  running -> 1st byte, pool claim", col(pool, "exec1"), "ms", base["exec1"], gv_fb),
            Row("  2nd echo in the VM -> 1st byte, clone", col(clone, "exec2"), "ms", base["exec2"], gv_fb),
            Row("  2nd echo in the VM -> 1st byte, pool", col(pool, "exec2"), "ms", base["exec2"], gv_fb),
        ]
        if warmed:
            rows += [Row("  (diag.) clone of a snapshot after one echo", col(warmed, "first_byte"),
                         "ms", base["first_byte"], gv_fb),
                     Row("  (diag.) its running -> 1st byte", col(warmed, "exec1"), "ms",
                         base["exec1"], gv_fb)]
        if gv:
            rows += [Row("gVisor runsc do echo: spawn -> 1st byte", gv_fb, "ms", base["first_byte"], gv_fb),
                     Row("gVisor runsc do echo: spawn -> exit", col(gv, "exit"), "ms", base["first_byte"], gv_fb)]
        else:
            rows.append(Row("gVisor runsc do echo", None, "ms", note=f"not measured: {gv_reason}"))

        print(f"fork: {args.fork_mib} MiB sandbox, {args.fill_mib} MiB written ...", flush=True)
        parent = api.new_sandbox(TEMPLATE, memory_mib=args.fork_mib, timeout_s=3600)
        assert parent["start_kind"] == "boot", parent
        p = parent["id"]
        free_line = fill_guest(api, p, args.fill_mib)
        print(f"  guest `free -m`: {free_line}", flush=True)
        first = [True]

        def one_fork():
            s = fork_sample(api, p, check_child=first[0])
            first[0] = False
            return s
        forks = stats.series(one_fork, args.fork, w)
        print(f"suspend + restore x {args.suspend} ...", flush=True)
        sr = stats.series(lambda: suspend_restore_sample(api, p), args.suspend, w)
        out = api.run(p, ["free", "-m"])
        restored_line = check_filled(bytes(out.stdout).decode(), args.fill_mib)
        api.remove_sandbox(p)
        rows += [
            Row(f"fork ({args.fork_mib} MiB, {args.fill_mib} written) -> child 1st byte",
                col(forks, "first_byte"), "ms", base["first_byte"], gv_fb, [("p50", 0.400)]),
            Row("  fork -> child running (fork op succeeded)", col(forks, "running"), "ms",
                base["running"], gv_fb),
            Row("suspend (POST -> operation succeeded)", col(sr, "suspend"), "ms", base["running"],
                gv_fb, [("p50", 1.0)]),
            Row("restore (POST -> operation succeeded)", col(sr, "restore"), "ms", base["running"],
                gv_fb),
            Row("restore -> 1st byte of echo", col(sr, "restore_fb"), "ms", base["first_byte"],
                gv_fb, [("p50", 0.200)]),
        ]

        print(f"density: {args.density} idle clones ...", flush=True)
        dens = density(api, args.density, "clone", args.settle)
        dboot = []
        if args.density_boot:
            print(f"density: {args.density_boot} idle cold boots ({boot_mib} MiB) ...", flush=True)
            dboot = density(api, args.density_boot, "boot", args.settle, memory_mib=boot_mib)

        def whole(r, key):
            """QEMU's figure plus its gateway's: what one sandbox costs the host."""
            return r[key] + (r["gw"][key] if r["gw"] else 0)

        def pss_share(rs):
            return [100.0 * sum(whole(r, "Pss") for r in rs) / sum(whole(r, "Rss") for r in rs)] if rs else None

        def mib(rs, key):
            return [r[key] / 1024 for r in rs] if rs else None

        def mib_whole(rs, key):
            return [whole(r, key) / 1024 for r in rs] if rs else None

        def mib_gw(rs, key):
            return [r["gw"][key] / 1024 for r in rs if r["gw"]] or None
        rows += [
            Row(f"idle clone PSS, QEMU + gateway (of {args.density})", mib_whole(dens, "Pss"), "MiB",
                mib_whole(dboot, "Pss"), None, [("p50", 32.0)]),
            Row("  its QEMU's PSS", mib(dens, "Pss"), "MiB", mib(dboot, "Pss")),
            Row("  its gateway's PSS", mib_gw(dens, "Pss"), "MiB", mib_gw(dboot, "Pss")),
            Row("  its anonymous part (Pss_Anon)", mib(dens, "Pss_Anon"), "MiB", mib(dboot, "Pss_Anon")),
            Row(f"idle clone QEMU RSS (of {args.density})", mib(dens, "Rss"), "MiB", mib(dboot, "Rss")),
            Row(f"summed PSS / summed RSS (QEMU + gateway), {args.density} clones", pss_share(dens), "%",
                pss_share(dboot), None, [("value", 40.0)]),
        ]
        for what, rs in ((f"{args.density} clones", dens), (f"{len(dboot)} cold boots", dboot)):
            if rs:
                lines.append(f"  {what}, QEMU + gateway: summed PSS {sum(whole(r, 'Pss') for r in rs) / 1024:.1f} MiB, "
                             f"summed RSS {sum(whole(r, 'Rss') for r in rs) / 1024:.1f} MiB "
                             f"({pss_share(rs)[0]:.1f} %); {sum(1 for r in rs if r['gw'])} gateways")
        lines.append("  per idle clone (median MiB)      Rss     Pss  Anonymous")
        for part in dens[0]["parts"]:
            lines.append(f"    {part:<28}" + "".join(
                f" {stats.median([r['parts'][part][k] for r in dens]) / 1024:7.1f}"
                for k in ("Rss", "Pss", "Anonymous")))

        # Where the time goes: the last sample of each kind, on the daemon's log.
        c = clone[-1]
        clone_tl = timeline(d, [c["id"]], c["wall"], c["end"],
                            [(0.0, "POST /v1/sandboxes"), (c["answer"], "202 answered"),
                             (c["running"], "operation seen succeeded"),
                             (c["first_byte"], "first byte of echo")])
        c = pool[-1]
        pool_tl = timeline(d, None, c["wall"], c["end"],
                           [(0.0, "POST /v1/sandboxes"), (c["answer"], "202 answered"),
                            (c["running"], "operation seen succeeded"),
                            (c["first_byte"], "first byte of echo")])
        f = forks[-1]
        fork_tl = timeline(d, [f["id"], f["parent"], f["op"]], f["wall"], f["end"],
                           [(0.0, f"POST /v1/sandboxes/{f['parent']}/fork"),
                            (f["running"], "fork operation seen succeeded"),
                            (f["first_byte"], "first byte of echo in the child")])
    finally:
        d.cleanup()

    print()
    print_table(rows, gv_reason)
    print(f"\nratio = median / the baseline's median (cold boot: the same figure for a create at "
          f"{boot_mib} MiB, which cannot clone; gVisor: runsc spawn -> first byte)."
          f"\nA tail is p99 only with >= {stats.P99_MIN} samples, else the max; {w} warm-up "
          f"sample(s) dropped from each timed series.")
    print("\ndensity:")
    print("\n".join(lines))
    print(f"\nfork parent `free -m` after filling: {free_line}; after the last restore: {restored_line}")
    print("\nphases (median): POST -> 202 | -> operation succeeded | -> 1st byte | 2nd echo")
    for name, s in (("clone", clone), ("warmed", warmed), ("pool", pool), ("cold boot", boot)):
        if not s:
            continue
        print(f"  {name:<10} {med_ms(s, 'answer'):>9} | {med_ms(s, 'running'):>9} | "
              f"{med_ms(s, 'first_byte'):>9} | {med_ms(s, 'exec2'):>9}")
    print("\nthe daemon's phases of a start (median ms after its start began; the log's "
          "'up in' and 'first output' lines):")
    print(phase_table([("clone", clone), ("warmed", warmed), ("pool", pool), ("cold boot", boot),
                       ("fork child", forks), ("restore", sr)]))
    print("\nwhere the time goes, one clone create (the last sample), daemon log on the client's clock:")
    print("\n".join(clone_tl))
    print("\nwhere the time goes, one pool claim (the last sample), every daemon log line:")
    print("\n".join(pool_tl))
    print("\nwhere the time goes, one fork (the last sample):")
    print("\n".join(fork_tl))
    print(f"\ntotal {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
