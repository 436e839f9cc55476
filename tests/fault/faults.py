#!/usr/bin/env python3
"""faults.py -- kill -9 spaced, a QEMU, or both at once in the middle of create, delete,
suspend and fork; restart; check that nothing was lost, duplicated, left half-done or leaked.

Scenarios (--scenarios, default all three):
  daemon   SIGKILL spaced, then start it again on the same state dir
  qemu     SIGKILL one QEMU of this daemon (the one the operation touches when it exists,
           else the newest); the daemon stays up and must notice
  all      SIGKILL spaced and every QEMU (and every other child) of it at once, then start it

Each run: a fresh `minimal` subject sandbox runs a command whose output is kept (the
witness); the operation (--ops: create, delete, suspend, fork; taken in turn) is sent on a
thread; after a random delay (0 .. --max-delay s, so the kill lands before the answer, while
the operation runs, or after it) the scenario's kill comes; the daemon is started again if it
died; then the checks below are polled until they all hold (the recovery; its time, from the
kill, is the figure) or --recover-timeout passes (a failure, with what still did not hold):
  - every sandbox the client was given exists (in a settled state; `deleted` only if the
    client's delete succeeded); no request made two; no sandbox the client never asked for
  - every operation the client was given, and every one in the store, ended `succeeded` or
    `failed` with a reason
  - no orphan QEMU: every QEMU whose command line names this state dir belongs to a sandbox
    the store holds as live, with that pid; every sandbox the store holds as running has one
  - no orphan file: <state>/sandboxes/*, /run/space/<tag>/*, <state>/snapshots/*,
    /dev/shm/space-<tag>/snapshots/* name live sandboxes / stored snapshots; every layer in
    <state>/disks is reached from a live sandbox's or a snapshot's backing chain
  - no orphan cgroup or named network namespace naming our tag or our sandboxes (today the
    daemon makes neither: QEMU gets an anonymous netns that dies with it)
  - the witness's output, written before the kill, reads back byte for byte
Then the run's sandboxes are deleted (those deletes must succeed).

Uses its own daemon (tests/e2e/space.py: the sanitizer build unless SPACE_TEST_SANITIZE=0)
with its own state dir and tag; kills only processes it finds under that daemon.
Exit status 0 when every run recovered and the daemon's final teardown was clean.

  python3 tests/fault/faults.py --count 3           # a quick pass (make faults COUNT=3)
"""

import argparse
import os
import random
import re
import signal
import sqlite3
import statistics
import struct
import sys
import threading
import time
import traceback
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import space  # noqa: E402

SCENARIOS = ("daemon", "qemu", "all")
OPS = ("create", "delete", "suspend", "fork")
# Longest random delay after sending the request, per operation: about its duration under
# TCG on a loaded host, so kills land before, during and after the work.
MAX_DELAY = {"create": 2.5, "delete": 0.5, "suspend": 1.5, "fork": 2.5}
SETTLED = ("running", "paused", "suspended", "stopped", "deleted", "failed")
LIVE_VM = ("running", "paused")
WITNESS_CMD = ["sh", "-c", "seq 1 4000; echo witness-stderr >&2"]


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def proc_stat(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None
    rest = s.rsplit(")", 1)[1].split()
    return {"state": rest[0], "ppid": int(rest[1]), "start": int(rest[19])}


def qcow2_backing(path):
    """The backing file named in a qcow2 header, or None."""
    with open(path, "rb") as f:
        hdr = f.read(20)
        if len(hdr) < 20 or hdr[:4] != b"QFI\xfb":
            return None
        off, size = struct.unpack(">QI", hdr[8:20])
        if not off or not size:
            return None
        f.seek(off)
        name = f.read(size).decode()
    return name if os.path.isabs(name) else os.path.join(os.path.dirname(path), name)


class Faults:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        extra = ["--accel", args.accel] if args.accel else []
        self.d = space.Daemon("spaced-faults", extra_args=extra)
        self.api = self.d.api
        self.expect = {}      # sb id -> "live" | "deleted" | "any" (what the client knows)
        self.tags = {}        # metadata tag of a create request -> "answered" | "unanswered"
        self.parents = {}     # parent id -> number of children asked for, answered or not
        self.fork_children = set()
        self.ops = set()      # operation ids the client was given
        self.witness = []     # (session, bytes of stdout, bytes of stderr)
        self.results = []     # (scenario, op, recovered, seconds, problems, missed, answered)
        self.lock_busy = 0    # restarts refused: the state dir still locked

    # -- processes of this daemon
    def daemon_qemus(self):
        """{pid: sandbox id} of live QEMUs whose command line names our state dir."""
        out = {}
        for e in os.listdir("/proc"):
            if not e.isdigit():
                continue
            argv = space.cmdline(e)
            if not argv or "qemu" not in os.path.basename(argv[0]):
                continue
            line = " ".join(argv)
            if self.d.state_dir not in line or not space.pid_alive(e):
                continue
            sb = None
            for a in argv:
                if a.startswith("guest="):
                    sb = a.split(",")[0][len("guest="):]
            out[int(e)] = sb
        return out

    def children_of(self, ppid):
        out = []
        for e in os.listdir("/proc"):
            if e.isdigit():
                st = proc_stat(e)
                if st and st["ppid"] == ppid:
                    out.append(int(e))
        return out

    def kill(self, scenario, involved):
        """Does the scenario's kill; returns a line saying what it killed."""
        if scenario in ("daemon", "all"):
            pid = self.d.proc.pid
            if scenario == "all":
                # Stopped first, so it forks nothing between the listing and the kill.
                os.kill(pid, signal.SIGSTOP)
            kids = self.children_of(pid) if scenario == "all" else []
            qemus = list(self.daemon_qemus()) if scenario == "all" else []
            os.kill(pid, signal.SIGKILL)
            for p in set(kids + qemus):
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
            self.d.proc.wait()
            self.d.proc = None
            return f"spaced {pid}" + (f" + {len(set(kids + qemus))} children/QEMUs" if qemus or kids else "")
        qemus = self.daemon_qemus()
        if not qemus:
            return "no QEMU to kill"
        mine = [p for p, sb in qemus.items() if sb in involved]
        if mine:
            pid = self.rng.choice(mine)
        else:  # the newest: most likely the one being made
            pid = max(qemus, key=lambda p: (proc_stat(p) or {"start": 0})["start"])
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
        return f"QEMU {pid} of {qemus[pid]}"

    def restart(self):
        """Starts the daemon again. A child it forked just before the kill holds the state
        dir's lock until that child execs or dies; the daemon then refuses to start, and a
        supervisor would retry: so do we, counting it (and the orphan check will find the
        QEMU such a child became)."""
        for attempt in range(20):
            try:
                return self.d.start()
            except AssertionError as e:
                if "another spaced is using state directory" not in str(e):
                    raise
                self.lock_busy += 1
                self.d.proc = None
                log(f"restart {attempt + 1}: state dir still locked by a child of the killed daemon")
                time.sleep(0.5)
        raise AssertionError("state dir still locked after 10 s")

    # -- the store, read-only
    def store(self):
        db = sqlite3.connect(f"file:{self.d.state_dir}/space.db?mode=ro", uri=True, timeout=10)
        db.row_factory = sqlite3.Row
        try:
            sbs = {r["id"]: dict(r) for r in db.execute(
                "SELECT id, state, pid, disk, role, error FROM sandboxes")}
            snaps = {r["id"]: dict(r) for r in db.execute("SELECT id, kind, state, dir, disk FROM snapshots")}
            open_ops = [dict(r) for r in db.execute(
                "SELECT id, kind, sandbox_id, state FROM operations WHERE state NOT IN ('succeeded','failed')")]
        finally:
            db.close()
        return sbs, snaps, open_ops

    # -- the checks
    def check(self):
        problems = []
        try:
            self.api.info()
        except Exception as e:  # noqa: BLE001 -- a daemon not answering is the first problem
            return [f"daemon not answering: {e!r}"]
        # operations
        for op_id in sorted(self.ops):
            op = self.api.operation(op_id)
            if op["state"] not in ("succeeded", "failed"):
                problems.append(f"operation {op_id} ({op['kind']}) still {op['state']}")
            elif op["state"] == "failed" and not (op["error"] or "").strip():
                problems.append(f"operation {op_id} failed without a reason")
        sbs, snaps, open_ops = self.store()
        for op in open_ops:
            problems.append(f"store: operation {op['id']} ({op['kind']} {op['sandbox_id']}) still {op['state']}")
        # sandboxes: none lost, none duplicated, none unasked for
        listed = self.api.sandboxes()
        for sb_id, want in sorted(self.expect.items()):
            try:
                rec = self.api.sandbox(sb_id)
            except space.ApiError as e:
                problems.append(f"sandbox {sb_id} lost: {e}")
                continue
            if rec["state"] not in SETTLED:
                problems.append(f"sandbox {sb_id} still {rec['state']}")
            elif want == "live" and rec["state"] == "deleted":
                problems.append(f"sandbox {sb_id} deleted, but no delete of it succeeded")
            elif want == "deleted" and rec["state"] != "deleted":
                problems.append(f"sandbox {sb_id} is {rec['state']} after its delete succeeded")
            if rec["state"] == "failed" and not (rec["error"] or "").strip():
                problems.append(f"sandbox {sb_id} failed without a reason")
        by_tag = {}
        for rec in listed:
            tag = rec["metadata"].get("fault-req")
            if rec["id"] in self.expect or rec["id"] in self.fork_children:
                pass
            elif tag in self.tags and self.tags[tag] == "unanswered":
                pass  # a create whose answer the kill swallowed may or may not have happened
            elif rec["parent_id"] in self.parents:
                pass  # a fork child whose answer the kill swallowed
            else:
                problems.append(f"sandbox {rec['id']} ({rec['state']}) was never asked for")
            if tag and not rec["parent_id"]:
                by_tag.setdefault(tag, []).append(rec["id"])
        for tag, ids in by_tag.items():
            if len(ids) > 1:
                problems.append(f"one create request ({tag}) made {len(ids)} sandboxes: {ids}")
        kids = {}
        for rec in listed:
            if rec["parent_id"]:
                kids.setdefault(rec["parent_id"], []).append(rec["id"])
        for parent, ids in kids.items():
            if len(ids) > self.parents.get(parent, 0):
                problems.append(f"{parent} has {len(ids)} fork children, {self.parents.get(parent, 0)} asked for")
        # QEMUs: none the store does not hold as live with that pid; one for each running sandbox
        qemus = self.daemon_qemus()
        for pid, sb_id in qemus.items():
            rec = sbs.get(sb_id)
            if not rec or rec["state"] in ("deleted", "failed", "suspended", "stopped") or rec["pid"] != pid:
                problems.append(f"orphan QEMU {pid} of {sb_id} (store: {rec and (rec['state'], rec['pid'])})")
        for sb_id, rec in sbs.items():
            if rec["state"] in LIVE_VM and rec["pid"] not in qemus:
                problems.append(f"store: {sb_id} ({rec['role']}) {rec['state']} but its QEMU {rec['pid']} is gone")
        # files
        live = {i for i, r in sbs.items() if r["state"] != "deleted"}
        tag = self.d.state_tag()
        # /run/space/<tag>/jail/<sb-id>: the mount tree of a jailed QEMU, only while it runs.
        jails = f"/run/space/{tag}/jail"
        for n in sorted(os.listdir(jails)) if os.path.isdir(jails) else []:
            if n not in live or sbs[n]["pid"] not in qemus:
                problems.append(f"orphan jail {jails}/{n} ({sbs.get(n, {}).get('state', 'unknown')})")
        for where in (os.path.join(self.d.state_dir, "sandboxes"), f"/run/space/{tag}"):
            for n in sorted(os.listdir(where)) if os.path.isdir(where) else []:
                if n == "jail" and where.startswith("/run/space/"):
                    continue
                if n not in live:
                    problems.append(f"orphan {where}/{n} ({sbs.get(n, {}).get('state', 'unknown')})")
        for where in (os.path.join(self.d.state_dir, "snapshots"), f"/dev/shm/space-{tag}/snapshots"):
            for n in sorted(os.listdir(where)) if os.path.isdir(where) else []:
                if n not in snaps:
                    problems.append(f"orphan snapshot dir {where}/{n}")
        problems += self.orphan_cgroups_and_netns(sbs, live, qemus)
        reached = set()
        roots = [r["disk"] for r in sbs.values() if r["state"] != "deleted" and r["disk"]]
        for s in snaps.values():
            roots += [s["disk"], os.path.join(s["dir"], "seed.qcow2")]
        for path in roots:
            depth = 0
            while path and path not in reached and os.path.exists(path) and depth < 256:
                reached.add(path)
                path = qcow2_backing(path)
                depth += 1
        disks = os.path.join(self.d.state_dir, "disks")
        for n in sorted(os.listdir(disks)) if os.path.isdir(disks) else []:
            # <layer>.backing: the daemon's own record of a layer's backing file (jail.md)
            layer = n[:-len(".backing")] if n.endswith(".backing") else n
            if os.path.join(disks, layer) not in reached:
                problems.append(f"orphan disk layer {disks}/{n}")
        # output written before the fault
        for s, out, err in self.witness:
            if self.expect.get(s.sandbox_id) != "live" and \
                    self.api.sandbox(s.sandbox_id)["state"] == "deleted":
                continue  # the client deleted it: its output went with it
            try:
                s.new_token()
                r = s.collect(offset=0, timeout=60)
            except AssertionError as e:
                problems.append(f"witness {s.id} of {s.sandbox_id} unreadable: {e}")
                continue
            if bytes(r.stdout) != out or bytes(r.stderr) != err:
                problems.append(f"witness {s.id} of {s.sandbox_id}: {len(r.stdout)}+{len(r.stderr)} bytes "
                                f"read back, {len(out)}+{len(err)} written (or different bytes)")
        return problems

    @staticmethod
    def is_gateway_of(pid, sb_id):
        args = space.cmdline(pid)
        return bool(args) and args[0].endswith("space-gw") and "--sandbox" in args and \
            args[args.index("--sandbox") + 1:args.index("--sandbox") + 2] == [sb_id]

    def orphan_cgroups_and_netns(self, sbs, live, qemus):
        """QEMU runs in an anonymous network namespace (gone with the process) and in a cgroup
        leaf <controller>/<daemon's cgroup>/space-<tag>/<sb-id> (vmm/cgroup.c), which must be
        a live sandbox's; its gateway in space-<tag>-gw/<sb-id>. A cgroup dir under /sys/fs/cgroup naming our tag may hold only
        sandbox dirs of live sandboxes, whose processes are their QEMUs; /run/netns entries
        naming our tag or one of our sandboxes must be live ones."""
        problems = []
        tag = self.d.state_tag()
        top = "/sys/fs/cgroup"
        for dirpath, dirs, _ in os.walk(top):
            # <controller>/<the daemon's own cgroup path>/space-<tag>/<sb-id> (vmm/cgroup.c)
            if dirpath.count("/") - top.count("/") >= 6:
                dirs[:] = []
            if tag not in os.path.basename(dirpath):
                continue
            for n in dirs:
                if n.startswith("sb-") and n not in live:
                    problems.append(f"orphan cgroup {dirpath}/{n}")
                try:
                    with open(os.path.join(dirpath, n, "cgroup.procs")) as f:
                        pids = [int(x) for x in f.read().split()]
                except OSError:
                    pids = []
                # space-<tag>-gw/<sb-id>: the sandbox's egress gateway, nothing else
                gw = os.path.basename(dirpath).endswith("-gw")
                for pid in pids:
                    if gw and self.is_gateway_of(pid, n):
                        continue
                    if gw or pid not in qemus:
                        problems.append(f"cgroup {dirpath}/{n} holds pid {pid}, not "
                                        f"{'the gateway' if gw else 'a QEMU'} of a live sandbox")
            dirs[:] = []
        if os.path.isdir("/run/netns"):
            for n in os.listdir("/run/netns"):
                ids = [i for i in sbs if i in n]
                if (tag in n or ids) and not any(i in live for i in ids):
                    problems.append(f"orphan network namespace /run/netns/{n}")
        return problems

    # -- one run
    def setup_subject(self):
        tag = uuid.uuid4().hex[:12]
        self.tags[tag] = "answered"
        sb = self.api.new_sandbox("minimal", metadata={"fault-req": tag})
        self.expect[sb["id"]] = "live"
        s = self.api.create_session(sb["id"], WITNESS_CMD)
        r = s.collect(timeout=120)
        assert r.exit_code == 0 and len(r.stdout) > 10000, r
        self.witness.append((s, bytes(r.stdout), bytes(r.stderr)))
        return sb["id"]

    def fire(self, op, subject, box):
        """Sends the operation; box gets 'answer' or 'error'. Runs on a thread."""
        try:
            if op == "create":
                tag = uuid.uuid4().hex[:12]
                self.tags[tag] = "unanswered"
                box["involved"].append(tag)
                sb, o = self.api.create_sandbox("minimal", metadata={"fault-req": tag})
                self.tags[tag] = "answered"
                self.expect[sb["id"]] = "live"
                box["involved"].append(sb["id"])
            elif op == "delete":
                self.expect[subject] = "any"
                _, o = self.api.delete_sandbox(subject)
            elif op == "suspend":
                _, o = self.api.act(subject, "suspend")
            elif op == "fork":
                self.parents[subject] = self.parents.get(subject, 0) + 1
                r = self.api.fork(subject, count=1)
                o = r["operation"]
                for k in r["children"]:
                    self.expect[k] = "live"
                    self.fork_children.add(k)
                    box["involved"].append(k)
            self.ops.add(o["id"])
            box["op"] = o["id"]
            box["answer"] = time.monotonic()
        except BaseException as e:  # noqa: BLE001 -- a kill may cut the request off
            box["error"] = e

    def settle_op(self, op, box):
        """After recovery: what the client now knows from the operation's outcome."""
        if "op" not in box:
            return
        got = self.api.operation(box["op"])
        if op == "delete" and got["state"] == "succeeded":
            self.expect[got["sandbox_id"]] = "deleted"
        if op == "create" and got["state"] == "failed":
            self.expect[got["sandbox_id"]] = "any"
        if op == "fork" and got["state"] == "failed":
            for k in (got.get("result") or {}).get("children", []):
                self.expect[k] = "any"

    def teardown_run(self):
        """Deletes every sandbox left; each delete must succeed."""
        problems = []
        ops = {}
        for rec in self.api.sandboxes():
            if rec["state"] in ("deleting", "deleted"):
                continue
            _, o = self.api.delete_sandbox(rec["id"])
            ops[rec["id"]] = o["id"]
        for sb_id, o in ops.items():
            got = self.api.wait_op(o, timeout=120)
            if got["state"] != "succeeded":
                problems.append(f"teardown: delete {sb_id} {got['state']}: {got['error']}")
            self.expect[sb_id] = "deleted"
        # What is settled stays settled: checked here once more, then no longer polled (the
        # checks would otherwise grow with every run).
        for sb_id, want in list(self.expect.items()):
            if want in ("deleted", "any"):
                state = self.api.sandbox(sb_id)["state"]
                if want == "deleted" and state != "deleted":
                    problems.append(f"teardown: {sb_id} is {state} after its delete succeeded")
                if state == "deleted":
                    del self.expect[sb_id]
        for op_id in list(self.ops):
            if self.api.operation(op_id)["state"] in ("succeeded", "failed"):
                self.ops.discard(op_id)
        self.witness = []
        return problems

    def run_one(self, scenario, op, n):
        subject = self.setup_subject()
        box = {"involved": [subject]}
        top = self.args.max_delay if self.args.max_delay is not None else MAX_DELAY[op]
        # A third of the kills come within 8 ms (the 202 takes a few ms: before the answer, or
        # as the work starts); the rest anywhere up to about the operation's duration.
        delay = self.rng.uniform(0, min(top, 0.008)) if self.rng.random() < 1 / 3 else self.rng.uniform(0, top)
        th = threading.Thread(target=self.fire, args=(op, subject, box), daemon=True)
        t0 = time.monotonic()
        th.start()
        time.sleep(max(0.0, delay - (time.monotonic() - t0)))
        what = self.kill(scenario, set(box["involved"]))
        t_kill = time.monotonic()
        th.join(90)
        answered = "answer" in box and box["answer"] <= t_kill
        if self.d.proc is None:
            self.restart()
        deadline = t_kill + self.args.recover_timeout
        problems = ["not checked"]
        waited = {}  # what recovery waited on: each kind of problem -> last seen (s after kill)
        while time.monotonic() < deadline:
            try:
                problems = self.check()
            except (AssertionError, OSError, sqlite3.Error) as e:
                problems = [f"check raised {e!r}"]
            if not problems:
                break
            for pr in problems:
                kind = re.sub(r"\b(sb|op|ss|sn|dk)-[0-9a-f]{16}\b", r"\1-*", pr)
                kind = re.sub(r"/tmp/space-e2e-[^/]+/|\d+", "", kind)[:80]
                waited[kind] = time.monotonic() - t_kill
            time.sleep(0.5)
        first = "; ".join(f"{k} until {t:.1f}s" for k, t in sorted(waited.items(), key=lambda kv: kv[1]))
        ttr = time.monotonic() - t_kill
        ok = not problems
        if ok:
            self.settle_op(op, box)
            problems = self.teardown_run()
            ok = not problems
        missed = what.startswith("no ")
        log(f"{scenario:6} {op:7} #{n:<3} delay {delay:4.2f}s killed {what}; answer "
            f"{'before' if answered else 'not before'} the kill; "
            + (f"recovered in {ttr:.1f}s" + (f" (waited on: {first})" if first else "") if ok
               else f"FAILED after {ttr:.1f}s:\n    " + "\n    ".join(problems[:30])))
        self.results.append((scenario, op, ok, ttr, problems, missed, answered))
        return ok

    def main(self):
        a = self.args
        self.d.start()
        info = self.api.info()
        log(f"spaced {self.d.binary} ({'sanitized' if self.d.binary == space.SAN_SPACED else 'plain'}), "
            f"accelerator {info['accelerator']}, state {self.d.state_dir}, tag {self.d.state_tag()}")
        self.api.wait_ready_snapshot("minimal")
        failed = 0
        try:
            for scenario in a.scenarios:
                for i in range(a.count):
                    op = a.ops[i % len(a.ops)]
                    try:
                        if not self.run_one(scenario, op, i + 1):
                            failed += 1
                    except Exception as e:  # noqa: BLE001 -- counted, shown, and the run goes on
                        failed += 1
                        self.results.append((scenario, op, False, 0.0, [repr(e)], False, False))
                        log(f"{scenario} {op} #{i + 1}: ERROR {e!r}\n{traceback.format_exc()}")
                        if self.d.proc is None or self.d.proc.poll() is not None:
                            self.d.proc = None
                            self.restart()
                        try:
                            self.teardown_run()
                        except Exception as e2:  # noqa: BLE001
                            log(f"teardown after error: {e2!r}")
                    if failed and a.stop_on_failure:
                        raise SystemExit(self.summary(failed))
        finally:
            try:
                self.d.cleanup()
            except AssertionError as e:
                failed += 1
                log(f"daemon teardown: {e}")
        return self.summary(failed)

    def summary(self, failed):
        print("\n==== faults summary")
        print(f"runs: {len(self.results)}, recovered: {sum(1 for r in self.results if r[2])}, "
              f"failed: {failed}; restarts refused for a state dir still locked: {self.lock_busy}")
        for scenario in self.args.scenarios:
            rs = [r for r in self.results if r[0] == scenario]
            if not rs:
                continue
            per_op = ", ".join(f"{op} {sum(1 for r in rs if r[1] == op)}" for op in self.args.ops)
            ttr = sorted(r[3] for r in rs if r[2])
            fig = (f"time to recover p50 {statistics.median(ttr):.1f}s max {max(ttr):.1f}s"
                   if ttr else "no recovery")
            missed = sum(1 for r in rs if r[5])
            early = sum(1 for r in rs if not r[6])
            print(f"  {scenario:6} faults {len(rs)} ({per_op}); {early} before the answer; "
                  f"{missed} found nothing to kill; recovered {len(ttr)}; {fig}")
        return 1 if failed else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--count", type=int, default=int(os.environ.get("COUNT", "50")),
                   help="runs per scenario (default 50; env COUNT)")
    p.add_argument("--scenarios", default=",".join(SCENARIOS), help="daemon,qemu,all")
    p.add_argument("--ops", default=",".join(OPS), help="create,delete,suspend,fork (taken in turn)")
    p.add_argument("--seed", type=int, default=None, help="random seed (printed; default: random)")
    p.add_argument("--max-delay", type=float, default=None,
                   help="seconds; the kill comes 0..this after the request (default per operation)")
    p.add_argument("--recover-timeout", type=float, default=180.0,
                   help="seconds from the kill for every check to hold (default 180; the daemon "
                        "collects unused disk layers every 30 s)")
    p.add_argument("--accel", default=os.environ.get("SPACE_TEST_ACCEL"), help="pass --accel to spaced")
    p.add_argument("--stop-on-failure", action="store_true")
    a = p.parse_args()
    a.scenarios = [s for s in a.scenarios.split(",") if s]
    a.ops = [o for o in a.ops.split(",") if o]
    for s in a.scenarios:
        if s not in SCENARIOS:
            p.error(f"unknown scenario {s}")
    for o in a.ops:
        if o not in OPS:
            p.error(f"unknown operation {o}")
    if a.seed is None:
        a.seed = random.randrange(1 << 30)
    log(f"faults: {a.count} per scenario, scenarios {a.scenarios}, ops {a.ops}, seed {a.seed}")
    return Faults(a).main()


if __name__ == "__main__":
    sys.exit(main())
