#!/usr/bin/env python3
"""load.py -- many sandboxes, many concurrent short commands, for a while: the daemon's memory
and file descriptors must stay flat, and nothing may fail but documented 429s.

  --sandboxes N   sandboxes made from `minimal` (default 50)
  --sessions N    commands in flight at once, each a fresh session on a random sandbox
                  (default 10)
  --duration S    seconds of load after the sandboxes are up (default 600)
  --warmup S      seconds at the start of the load not judged (default: a fifth of the
                  duration, at least 10)
  --interval S    seconds between samples of the daemon's VmRSS and open fds (default 3)

Each command is `sh -c 'echo out-<n>; echo err-<n> >&2'`; its stdout and stderr must come back
exactly (each stream on its own) with exit code 0. Its round-trip is from the create-session
request to the exit event. A 429 (at_capacity: the documented answer when the node is full)
is counted and retried after a pause; any other error fails the run.

Judged after warm-up: the median of the last three samples may exceed the median of the first
three after warm-up by at most --rss-tolerance-mib (default 16) of VmRSS and --fd-tolerance
(default 4) fds. The daemon is build/bin/spaced (a sanitizer build holds freed memory in its
quarantine, so its RSS says little; --sanitize runs it anyway, with the RSS check relaxed).

Exit status 0 when nothing but 429s failed, the series stayed flat, and the daemon's teardown
(all sandboxes deleted, exit 0 on SIGTERM) was clean.

  python3 tests/load/load.py --sandboxes 5 --sessions 3 --duration 60   # a quick pass
"""

import argparse
import os
import random
import statistics
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import space  # noqa: E402
import stats  # noqa: E402


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def rss_kib(pid):
    return space.vm_rss_kib(pid)


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


class Load:
    def __init__(self, a):
        self.a = a
        # The default vCPU budget (16 per core: 32 here) would refuse 50 one-vCPU sandboxes;
        # the load is about the daemon, so the budget is sized to the run.
        extra = ["--max-sandboxes", str(max(64, a.sandboxes + 8)),
                 "--vcpu-budget", str(max(32, 2 * a.sandboxes))]
        if a.accel:
            extra += ["--accel", a.accel]
        self.d = space.Daemon("spaced-load", extra_args=extra)
        if not a.sanitize:
            self.d.binary = space.PLAIN_SPACED
        self.api = self.d.api
        self.lock = threading.Lock()
        self.sandboxes = []
        self.rtt = []           # (t since load start, seconds)
        self.errors = []
        self.n429 = 0
        self.done = 0
        self.samples = []       # (t since load start, rss KiB, fds, commands done)
        self.stop = threading.Event()

    def retry_429(self, what, fn):
        """Calls fn until it does not answer 429 (counted, with a pause)."""
        while True:
            try:
                return fn()
            except space.ApiError as e:
                if e.status != 429:
                    raise
                with self.lock:
                    self.n429 += 1
                log(f"{what}: 429 ({e.message}); retrying")
                time.sleep(1.0)

    def make_sandboxes(self):
        pending = []
        kw = {"timeout_s": 0}
        if self.a.memory_mib:
            kw["memory_mib"] = self.a.memory_mib
        for i in range(self.a.sandboxes):
            sb, op = self.retry_429("create", lambda: self.api.create_sandbox(
                "minimal", metadata={"load": str(i)}, **kw))
            pending.append((sb["id"], op["id"]))
            # A few in flight at a time: each clone runs a warm-up command under TCG.
            if len(pending) >= 4:
                self.settle(pending.pop(0))
        for p in pending:
            self.settle(p)

    def settle(self, p):
        sb_id, op_id = p
        op = self.api.wait_op(op_id, timeout=600)
        assert op["state"] == "succeeded", f"create {sb_id}: {op}"
        self.sandboxes.append(sb_id)

    def worker(self, wid, t0):
        rng = random.Random(wid)
        n = 0
        while not self.stop.is_set():
            n += 1
            tag = f"{wid}-{n}"
            sb_id = rng.choice(self.sandboxes)
            try:
                t = time.monotonic()
                s = self.retry_429("session", lambda: self.api.create_session(
                    sb_id, ["sh", "-c", f"echo out-{tag}; echo err-{tag} >&2"]))
                r = s.collect(timeout=120)
                dt = time.monotonic() - t
                assert r.exit_code == 0 and r.error is None, f"{sb_id}: {r}"
                assert bytes(r.stdout) == f"out-{tag}\n".encode(), f"{sb_id} stdout: {r}"
                assert bytes(r.stderr) == f"err-{tag}\n".encode(), f"{sb_id} stderr: {r}"
                with self.lock:
                    self.rtt.append((t - t0, dt))
                    self.done += 1
            except Exception as e:  # noqa: BLE001 -- every error is counted and fails the run
                with self.lock:
                    self.errors.append(f"{sb_id} #{tag}: {e!r}"[:500])
                log(f"worker {wid}: {e!r}"[:400])
                time.sleep(0.5)

    def sampler(self, t0):
        pid = self.d.proc.pid
        while True:
            with self.lock:
                done = self.done
            self.samples.append((time.monotonic() - t0, rss_kib(pid), fd_count(pid), done))
            if self.stop.wait(self.a.interval):
                break

    def judge(self):
        """Problems with the RSS and fd series after warm-up."""
        after = [s for s in self.samples if s[0] >= self.a.warmup]
        if len(after) < 6:
            return [f"only {len(after)} samples after the {self.a.warmup:.0f}s warm-up: "
                    "run longer or sample more often"]
        problems = []
        tol_kib = self.a.rss_tolerance_mib * 1024 * (4 if self.a.sanitize else 1)
        for name, idx, tol, unit in (("VmRSS", 1, tol_kib, "KiB"), ("fds", 2, self.a.fd_tolerance, "")):
            first = statistics.median(s[idx] for s in after[:3])
            last = statistics.median(s[idx] for s in after[-3:])
            if last - first > tol:
                problems.append(f"{name} grew {first:.0f} -> {last:.0f} {unit} after warm-up "
                                f"(tolerance {tol} {unit})")
        return problems

    def run(self):
        a = self.a
        self.d.start()
        info = self.api.info()
        log(f"spaced {self.d.binary}, accelerator {info['accelerator']}; "
            f"{a.sandboxes} sandboxes x {a.sessions} concurrent sessions x {a.duration:.0f}s")
        problems = []
        try:
            t = time.monotonic()
            self.make_sandboxes()
            log(f"{len(self.sandboxes)} sandboxes up in {time.monotonic() - t:.1f}s; "
                f"daemon VmRSS {rss_kib(self.d.proc.pid) // 1024} MiB, {fd_count(self.d.proc.pid)} fds")
            t0 = time.monotonic()
            threads = [threading.Thread(target=self.sampler, args=(t0,), daemon=True)]
            threads += [threading.Thread(target=self.worker, args=(w, t0), daemon=True)
                        for w in range(a.sessions)]
            for th in threads:
                th.start()
            while time.monotonic() - t0 < a.duration:
                time.sleep(min(30.0, a.duration - (time.monotonic() - t0)) if a.duration > 0 else 0)
                s = self.samples[-1] if self.samples else None
                if s:
                    log(f"t={s[0]:.0f}s commands {s[3]}, VmRSS {s[1] // 1024} MiB, fds {s[2]}, "
                        f"429s {self.n429}, errors {len(self.errors)}")
            self.stop.set()
            for th in threads:
                th.join(180)
                if th.is_alive():
                    problems.append(f"thread {th.name} did not stop")
            problems += self.judge()
        except Exception as e:  # noqa: BLE001 -- reported with the summary
            problems.append(f"load run: {e!r}")
            traceback.print_exc()
        finally:
            self.stop.set()
            try:
                self.d.cleanup()
            except AssertionError as e:
                problems.append(f"daemon teardown: {e}")
        if self.errors:
            problems.append(f"{len(self.errors)} errors other than 429, first: {self.errors[:5]}")
        self.summary(problems)
        return 1 if problems else 0

    def summary(self, problems):
        a = self.a
        print("\n==== load summary")
        print(f"{a.sandboxes} sandboxes, {a.sessions} concurrent sessions, {a.duration:.0f}s "
              f"(warm-up {a.warmup:.0f}s), daemon {self.d.binary}")
        rt = [dt for t, dt in self.rtt if t >= a.warmup]
        print(f"commands: {self.done} ({self.done / a.duration if a.duration else 0:.1f}/s), "
              f"429s: {self.n429}, other errors: {len(self.errors)}")
        if rt:
            label, worst = stats.tail(rt)
            print(f"session round-trip after warm-up (n={len(rt)}): median {stats.median(rt) * 1000:.0f} ms, "
                  f"{label} {worst * 1000:.0f} ms" + (f", max {max(rt) * 1000:.0f} ms" if label != "max" else ""))
        for name, idx, scale, unit in (("VmRSS", 1, 1 / 1024, "MiB"), ("fds", 2, 1, "")):
            xs = [s[idx] * scale for s in self.samples]
            after = [s[idx] * scale for s in self.samples if s[0] >= a.warmup]
            if not xs:
                continue
            line = f"{name:5} series ({len(xs)} samples every {a.interval:.0f}s): start {xs[0]:.1f}, "
            if after:
                line += (f"after warm-up first {after[0]:.1f} median {statistics.median(after):.1f} "
                         f"max {max(after):.1f} last {after[-1]:.1f} {unit}")
            print(line)
        print("result: " + ("OK" if not problems else "FAILED\n  " + "\n  ".join(problems)))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sandboxes", type=int, default=50)
    p.add_argument("--sessions", type=int, default=10)
    p.add_argument("--duration", type=float, default=600.0)
    p.add_argument("--warmup", type=float, default=None)
    p.add_argument("--interval", type=float, default=3.0)
    p.add_argument("--memory-mib", type=int, default=None, help="per sandbox (default: the template's)")
    p.add_argument("--rss-tolerance-mib", type=float, default=16.0)
    p.add_argument("--fd-tolerance", type=int, default=4)
    p.add_argument("--accel", default=os.environ.get("SPACE_TEST_ACCEL"))
    p.add_argument("--sanitize", action="store_true", help="run build/san/bin/spaced")
    a = p.parse_args()
    if a.warmup is None:
        a.warmup = max(10.0, a.duration / 5)
    return Load(a).run()


if __name__ == "__main__":
    sys.exit(main())
