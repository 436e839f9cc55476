"""e2b_py.py -- bench/e2b.py's Python SDK side: the unmodified `e2b` 2.34.0 from
../shared/e2b-python/site (on PYTHONPATH; run by Debian's python3). For every line "go" on
stdin, one sample: Sandbox.create() -> the first stdout bytes of commands.run('echo x'), printed
as one JSON line {created, first, done} in seconds from the start of Sandbox.create(); the
sandbox is then killed (not timed). E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY name the
daemon; E2B_BENCH_TEMPLATE the template."""

import json
import os
import sys
import time

from e2b import Sandbox

TEMPLATE = os.environ.get("E2B_BENCH_TEMPLATE", "base")


def sample():
    t0 = time.perf_counter()
    s = Sandbox.create(template=TEMPLATE, timeout=300)
    created = time.perf_counter()
    first = []
    try:
        r = s.commands.run("echo x", on_stdout=lambda _: first or first.append(time.perf_counter()))
        done = time.perf_counter()
        if r.stdout != "x\n":
            raise RuntimeError(f"echo x printed {r.stdout!r}")
        return {"created": created - t0, "first": first[0] - t0, "done": done - t0}
    finally:
        if s.kill() is not True:
            raise RuntimeError(f"kill {s.sandbox_id}: not found")


for line in sys.stdin:
    if line.strip() != "go":
        continue
    try:
        out = sample()
    except Exception as e:  # reported to the parent, which stops the run
        out = {"error": repr(e)}
    print(json.dumps(out), flush=True)
