"""spacectl against the real daemon: create --wait, exec (live output, exit code), ls, logs, rm;
the lifecycle verbs (pause .. wake, fork, snapshots, timeout, pool), their 409s and usage errors."""

import json
import os
import re
import subprocess
import time

import pytest

import space

ID_RX = re.compile(r"\bsb-[0-9a-f]{16}\b")
OP_LINE = re.compile(r"^op-[0-9a-f]{16}\n$")
SN_LINE = re.compile(r"^sn-[0-9a-f]{16}\n$")


@pytest.fixture(scope="module")
def cli_sb(daemon, api):
    p = space.spacectl(daemon, "create", "--template", "minimal", "--wait")
    assert p.returncode == 0, p
    ids = ID_RX.findall(p.stdout)
    assert len(ids) == 1, f"create --wait must print the new id: {p.stdout!r}"
    daemon.sandbox_ids.add(ids[0])
    assert api.sandbox(ids[0])["state"] == "running", "create --wait returned before running"
    return ids[0]


def test_info_and_templates(daemon):
    p = space.spacectl(daemon, "info")
    assert p.returncode == 0, p
    assert "0.1.0" in p.stdout
    assert re.search(r"^memory: +\d+ MiB used of \d+ MiB budget$", p.stdout, re.M), p.stdout
    assert re.search(r"^vcpus: +\d+ used of \d+ budget$", p.stdout, re.M), p.stdout
    p = space.spacectl(daemon, "templates")
    assert p.returncode == 0, p
    assert "minimal" in p.stdout and "base" in p.stdout


def test_exec_prints_both_streams_and_exits_with_the_code(daemon, cli_sb):
    p = space.spacectl(daemon, "exec", cli_sb, "--", "sh", "-c", "echo out; echo err >&2; exit 7")
    assert p.returncode == 7, p
    assert p.stdout == "out\n" and p.stderr.endswith("err\n"), p
    p = space.spacectl(daemon, "exec", cli_sb, "--", "echo", "hello")
    assert (p.returncode, p.stdout) == (0, "hello\n"), p


def test_exec_streams_live(daemon, cli_sb):
    env = dict(os.environ, SPACE_URL=daemon.url, SPACE_API_KEY=daemon.api_key)
    proc = subprocess.Popen([space.SPACECTL, "exec", cli_sb, "--", "sh", "-c",
                             "echo first; sleep 4; echo second"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        first = proc.stdout.readline()
        t_first = time.monotonic()
        rest = proc.stdout.read()
        proc.wait(60)
        t_end = time.monotonic()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert first == b"first\n" and rest == b"second\n", (first, rest)
    assert t_end - t_first > 2.5, "output came only at the end, not live"
    assert proc.returncode == 0


def test_exec_reports_signal_death(daemon, cli_sb):
    p = space.spacectl(daemon, "exec", cli_sb, "--", "sh", "-c", "kill -9 $$")
    assert p.returncode == 128 + 9, p


def test_ls_lists_the_sandbox(daemon, cli_sb):
    p = space.spacectl(daemon, "ls")
    assert p.returncode == 0, p
    line = [x for x in p.stdout.splitlines() if cli_sb in x]
    assert line and "running" in line[0], p.stdout


def test_logs_prints_the_console(daemon, api, cli_sb):
    p = space.spacectl(daemon, "logs", cli_sb)
    assert p.returncode == 0, p
    assert p.stdout.strip(), "empty console log"
    first = p.stdout.strip().splitlines()[0]
    assert first in api.logs(cli_sb), "spacectl logs does not print the console log"


def test_errors_exit_nonzero(daemon):
    p = space.spacectl(daemon, "exec", "sb-0000000000000000", "--", "true")
    assert p.returncode != 0 and p.stderr.strip(), p
    p = space.spacectl(daemon, "ls", env={"SPACE_API_KEY": "wrong"})
    assert p.returncode != 0 and p.stderr.strip(), p
    p = space.spacectl(daemon, "rm", "sb-0000000000000000")
    assert p.returncode != 0, p


def test_rm_deletes(daemon, api, cli_sb):
    p = space.spacectl(daemon, "rm", cli_sb)
    assert p.returncode == 0, p
    rec = api.wait_sandbox_state(cli_sb, ("deleted",), timeout=60)
    assert rec["state"] == "deleted"
    p = space.spacectl(daemon, "ls")
    assert cli_sb not in p.stdout


# ---------------------------------------------------------------------------
# The lifecycle verbs


def ok(daemon, *args):
    p = space.spacectl(daemon, *args)
    assert p.returncode == 0, p
    return p


@pytest.fixture(scope="module")
def life_sb(daemon, api):
    p = ok(daemon, "create", "--template", "minimal", "--timeout", "3600", "--on-timeout", "suspend",
           "--wait")
    sb = p.stdout.strip()
    daemon.sandbox_ids.add(sb)
    rec = api.sandbox(sb)
    assert rec["state"] == "running" and rec["on_timeout"] == "suspend", rec
    yield sb
    if api.sandbox(sb)["state"] != "deleted":
        api.remove_sandbox(sb)


@pytest.mark.parametrize("verb,state,kind", [
    ("pause", "paused", "pause"), ("resume", "running", "resume"),
    ("suspend", "suspended", "suspend"), ("restore", "running", "restore"),
    ("stop", "stopped", "stop"), ("start", "running", "start"),
])
def test_lifecycle_verb_waits_and_leaves_the_state(daemon, api, life_sb, verb, state, kind):
    p = ok(daemon, verb, "--wait", life_sb)
    assert OP_LINE.match(p.stdout), f"{verb} must print its operation id alone: {p.stdout!r}"
    op = api.operation(p.stdout.strip())
    assert (op["kind"], op["state"], op["sandbox_id"]) == (kind, "succeeded", life_sb), op
    assert api.sandbox(life_sb)["state"] == state


def test_wake(daemon, api, life_sb):
    p = ok(daemon, "wake", "--wait", life_sb)
    assert p.stdout == "", "waking a running sandbox prints nothing"
    p = ok(daemon, "--json", "wake", life_sb)
    assert json.loads(p.stdout)["operation"] is None, p.stdout
    for sleep, kind in (("pause", "resume"), ("suspend", "restore"), ("stop", "start")):
        ok(daemon, sleep, "--wait", life_sb)
        p = ok(daemon, "wake", "--wait", life_sb)
        assert OP_LINE.match(p.stdout), p
        assert api.operation(p.stdout.strip())["kind"] == kind
        assert api.sandbox(life_sb)["state"] == "running"


def test_a_refused_transition_is_a_clear_409(daemon, api, life_sb):
    p = space.spacectl(daemon, "resume", life_sb)
    assert p.returncode == 1 and p.stdout == "", p
    assert p.stderr.startswith(f"spacectl: resume: {life_sb}: "), p.stderr
    assert "is running" in p.stderr and "conflict, HTTP 409" in p.stderr, p.stderr
    # One bad id does not stop the others.
    p = space.spacectl(daemon, "pause", "sb-0000000000000000", life_sb)
    assert p.returncode == 1 and "HTTP 404" in p.stderr and OP_LINE.match(p.stdout), p
    assert api.wait_sandbox_state(life_sb, ("paused",))["state"] == "paused"
    ok(daemon, "resume", "--wait", life_sb)


def test_fork_prints_the_children_and_ls_shows_their_parent(daemon, api, life_sb):
    p = ok(daemon, "fork", "-n", "2", "--wait", life_sb)
    kids = p.stdout.split()
    daemon.sandbox_ids.update(kids)
    assert len(kids) == 2 and all(ID_RX.fullmatch(k) for k in kids), p.stdout
    ls = ok(daemon, "ls").stdout.splitlines()
    assert ls[0].split() == ["ID", "STATE", "TEMPLATE", "CREATED", "START", "PARENT"], ls[0]
    for k in kids:
        row = [line.split() for line in ls if line.startswith(k)]
        assert row and row[0][1] == "running" and row[0][4:] == ["fork", life_sb], ls
    mine = [line.split() for line in ls if line.startswith(life_sb)]
    assert mine[0][4] in ("boot", "clone") and mine[0][5] == "-", mine
    # rm --wait --json reports the sandbox as the wait left it.
    p = ok(daemon, "rm", "--wait", "--json", *kids)
    assert p.stdout.count('"deleted"') == 2, p.stdout


def test_snapshot_create_from_it_list_and_remove(daemon, api, life_sb):
    p = ok(daemon, "snapshot", "--wait", life_sb, "cli-golden")
    assert SN_LINE.match(p.stdout), p
    snap = p.stdout.strip()
    rows = [line.split() for line in ok(daemon, "snapshots").stdout.splitlines()]
    assert rows[0] == ["ID", "NAME", "KIND", "STATE", "TEMPLATE", "SIZE", "CREATED"], rows[0]
    mine = [r for r in rows if r[0] == snap]
    assert mine and mine[0][1:5] == ["cli-golden", "named", "ready", "minimal"], rows
    assert mine[0][6] in ("KiB", "MiB", "GiB"), mine  # a size: "20.4 MiB"
    clone = ok(daemon, "create", "--snapshot", "cli-golden", "--wait").stdout.strip()
    daemon.sandbox_ids.add(clone)
    rec = api.sandbox(clone)
    assert rec["snapshot"] == snap and rec["start_kind"] == "clone", rec
    ok(daemon, "rm", clone)
    p = ok(daemon, "snapshot-rm", "cli-golden")
    assert p.stdout == "", p
    assert snap not in ok(daemon, "snapshots").stdout
    p = space.spacectl(daemon, "snapshot-rm", "cli-golden")
    assert p.returncode == 1 and "no snapshot 'cli-golden'" in p.stderr and "HTTP 404" in p.stderr, p
    p = space.spacectl(daemon, "create", "--snapshot", "cli-golden")
    assert p.returncode == 1 and "HTTP 404" in p.stderr, p


def test_timeout(daemon, api, life_sb):
    p = ok(daemon, "timeout", life_sb, "600", "--on-timeout", "delete")
    rec = api.sandbox(life_sb)
    assert (rec["timeout_s"], rec["on_timeout"]) == (600, "delete") and rec["expires_at"], rec
    assert p.stdout == f"{life_sb}: expires at {rec['expires_at']}, then delete\n", p.stdout
    p = ok(daemon, "timeout", life_sb, "0")
    assert p.stdout == f"{life_sb}: never expires\n", p.stdout
    rec = api.sandbox(life_sb)
    assert rec["expires_at"] is None and rec["on_timeout"] == "delete", rec


def test_pool(daemon, api):
    try:
        p = ok(daemon, "pool", "minimal", "1")
        assert re.fullmatch(r"minimal: pool size 1, [01] ready\n", p.stdout), p.stdout
        assert api.template("minimal")["pool"]["size"] == 1
    finally:
        p = ok(daemon, "pool", "minimal", "0")
    assert p.stdout.startswith("minimal: pool size 0, "), p.stdout
    p = space.spacectl(daemon, "pool", "no-such-template", "1")
    assert p.returncode == 1 and "HTTP 404" in p.stderr, p


@pytest.mark.parametrize("args", [
    ["pause"], ["wake", "--bogus", "sb-0000000000000000"], ["fork"], ["fork", "-n", "0", "x"],
    ["fork", "a", "b"], ["snapshot", "sb-0000000000000000"], ["snapshot-rm"],
    ["snapshot-rm", "--wait", "x"], ["snapshots", "x"], ["timeout", "x"], ["timeout", "x", "-1"],
    ["timeout", "x", "5", "--on-timeout", "never"], ["pool", "minimal"], ["pool", "minimal", "-1"],
    ["create", "--template", "minimal", "--snapshot", "s"], ["create", "--on-timeout", "later"],
])
def test_usage_errors_exit_2(daemon, args):
    p = space.spacectl(daemon, *args)
    assert p.returncode == 2 and p.stdout == "", p
    assert f"usage: spacectl {args[0]} " in p.stderr, p.stderr


def test_help_describes_every_verb(daemon):
    verbs = ["pause", "resume", "suspend", "restore", "stop", "start", "wake", "fork", "snapshot",
             "snapshots", "snapshot-rm", "timeout", "pool"]
    listed = ok(daemon, "help").stdout
    for v in verbs:
        assert re.search(rf"^  {re.escape(v)} +\S", listed, re.M), f"{v} missing from help"
        p = ok(daemon, "help", v)
        assert p.stdout.startswith(f"usage: spacectl {v} "), p.stdout
