"""E2B's code interpreter ("port 49999": src/daemon/e2b/interp.c over the guest program
guest/interp/space_interp.py) against a real code-interpreter-v1 sandbox, over http.client the
way @e2b/code-interpreter's SDK speaks to it: E2b-Sandbox-Id, E2b-Sandbox-Port: 49999 and the
envd token; POST /execute answers NDJSON, one JSON object a line, ending at end_of_execution.
Checks variables kept across executions, the last expression as the result, stdout, errors with
tracebacks, contexts (create, list, isolation, restart, delete, 404s), a matplotlib figure as a
PNG, interrupt, bad requests, a client that leaves mid-execution, and an interpreter that dies."""
import base64
import http.client
import json
import threading
import time

import pytest

import space

WAIT = space.CREATE_TIMEOUT + 60
TEMPLATE = "code-interpreter-v1"
# Under TCG the first import of numpy and matplotlib takes a while.
EXEC_TIMEOUT = 300


class Interp:
    def __init__(self, url, sb_id, token):
        self.url, self.sb_id, self.token = url, sb_id, token

    def headers(self, token_header="X-Access-Token"):
        return {"E2b-Sandbox-Id": self.sb_id, "E2b-Sandbox-Port": "49999",
                token_header: self.token, "Content-Type": "application/json"}

    def req(self, method, path, body=None, token_header="X-Access-Token"):
        data = None if body is None else json.dumps(body).encode()
        return space.http_request(self.url, method, path, data, self.headers(token_header),
                                  EXEC_TIMEOUT)

    def execute(self, code, **fields):
        """POST /execute; the NDJSON lines, checked: one object each, no blank lines."""
        r = self.req("POST", "/execute", dict(code=code, **fields))
        assert r.status == 200, r
        assert r.headers.get("Content-Type", "").startswith("application/x-ndjson"), r
        text = r.body.decode()
        assert text.endswith("\n"), text
        lines = [json.loads(line) for line in text[:-1].split("\n")]
        assert all(isinstance(m, dict) and isinstance(m.get("type"), str) for m in lines)
        return lines


@pytest.fixture(scope="module")
def box(daemon):
    hdrs = {"X-API-KEY": daemon.api_key, "Content-Type": "application/json"}
    r = space.http_request(daemon.url, "POST", "/v2/sandboxes",
                           json.dumps({"templateID": TEMPLATE, "timeout": 1800}).encode(), hdrs, WAIT)
    assert r.status == 201, r
    c = r.json
    yield Interp(daemon.data_url, c["sandboxID"], c["envdAccessToken"])
    space.http_request(daemon.url, "DELETE", f"/sandboxes/{c['sandboxID']}", None,
                       {"X-API-KEY": daemon.api_key}, WAIT)


def of(lines, t):
    return [m for m in lines if m["type"] == t]


def main_text(lines):
    res = [m for m in of(lines, "result") if m["is_main_result"]]
    return res[0].get("text") if res else None


def test_variables_persist_and_result(box):
    lines = box.execute("x = 41")
    assert lines[-1] == {"type": "end_of_execution"}, lines
    assert not of(lines, "error"), lines
    lines = box.execute("x + 1")
    assert main_text(lines) == "42", lines
    assert of(lines, "number_of_executions")[0]["execution_count"] >= 2
    assert lines[-1]["type"] == "end_of_execution"


def test_stdout_stderr_and_child_processes(box):
    lines = box.execute("import os, sys\nprint('hello')\nprint('warn', file=sys.stderr)\n"
                        "os.system('echo from-shell')\nNone")
    assert "".join(m["text"] for m in of(lines, "stdout")) == "hello\nfrom-shell\n", lines
    assert "".join(m["text"] for m in of(lines, "stderr")) == "warn\n", lines


def test_error_with_traceback(box):
    lines = box.execute("1/0")
    errs = of(lines, "error")
    assert len(errs) == 1, lines
    assert errs[0]["name"] == "ZeroDivisionError" and errs[0]["value"] == "division by zero"
    assert "Traceback" in errs[0]["traceback"] and "1/0" in errs[0]["traceback"]
    assert lines[-1]["type"] == "end_of_execution"


def test_env_vars_language_and_refusals(box):
    lines = box.execute("import os\nos.environ['E2B_T']", env_vars={"E2B_T": "yes"})
    assert main_text(lines) == "'yes'", lines
    lines = box.execute("1", language="python")
    assert main_text(lines) == "1"
    r = box.req("POST", "/execute", {"code": "1", "language": "r"})
    assert r.status == 400 and "only python" in r.json["message"], r
    for bad in ({}, {"code": 5}, {"code": "1", "env_vars": {"A": 1}}):
        r = box.req("POST", "/execute", bad)
        assert r.status == 400, (bad, r)
    r = box.req("POST", "/execute", {"code": "1", "context_id": "ctx-nope"})
    assert r.status == 404, r
    hdrs = box.headers()
    hdrs["X-Access-Token"] = "0" * 64
    r = space.http_request(box.url, "POST", "/execute", b'{"code":"1"}', hdrs)
    assert r.status == 401, r


def test_contexts(box):
    # The SDK sends only E2B-Traffic-Access-Token on /contexts.
    r = box.req("POST", "/contexts", {"language": "python", "cwd": "/tmp"},
                token_header="E2B-Traffic-Access-Token")
    assert r.status == 200, r
    ctx = r.json
    assert set(ctx) == {"id", "language", "cwd"} and ctx["cwd"] == "/tmp", ctx
    r = box.req("GET", "/contexts", token_header="E2B-Traffic-Access-Token")
    assert r.status == 200 and ctx["id"] in [c["id"] for c in r.json], r
    # Isolated from the default context; has its own cwd.
    lines = box.execute("import os\ny = 'mine'\nos.getcwd()", context_id=ctx["id"])
    assert main_text(lines) == "'/tmp'", lines
    lines = box.execute("'y' in dir()")
    assert main_text(lines) == "False", lines
    assert main_text(box.execute("y", context_id=ctx["id"])) == "'mine'"
    # Restart: fresh state.
    r = box.req("POST", f"/contexts/{ctx['id']}/restart", token_header="E2B-Traffic-Access-Token")
    assert r.status in (200, 204), r
    lines = box.execute("'y' in dir()", context_id=ctx["id"])
    assert main_text(lines) == "False", lines
    # Delete: gone.
    r = box.req("DELETE", f"/contexts/{ctx['id']}", token_header="E2B-Traffic-Access-Token")
    assert r.status in (200, 204), r
    r = box.req("GET", "/contexts")
    assert ctx["id"] not in [c["id"] for c in r.json], r
    for method, path in (("DELETE", f"/contexts/{ctx['id']}"), ("POST", f"/contexts/{ctx['id']}/restart"),
                         ("POST", "/contexts/ctx-0000000000000000/interrupt")):
        assert box.req(method, path).status == 404
    r = box.req("POST", "/contexts", {"language": "javascript"})
    assert r.status == 400, r


def test_matplotlib_figure_is_png(box):
    lines = box.execute("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()")
    pngs = [m for m in of(lines, "result") if "png" in m]
    assert len(pngs) == 1, lines
    assert base64.b64decode(pngs[0]["png"]).startswith(b"\x89PNG\r\n\x1a\n")
    assert pngs[0]["is_main_result"] is False
    assert not of(lines, "error") and not of(lines, "stderr"), lines
    # A figure as the last expression is the main result, with its png.
    lines = box.execute("fig = plt.figure()\nfig.add_subplot().plot([1, 2])\nfig")
    main = [m for m in of(lines, "result") if m["is_main_result"]]
    assert len(main) == 1 and base64.b64decode(main[0]["png"]).startswith(b"\x89PNG"), lines


def test_interrupt(box):
    ctx = box.req("POST", "/contexts", {}).json["id"]
    got = {}

    def run():
        got["lines"] = box.execute("import time\nfor i in range(600):\n    time.sleep(0.1)", context_id=ctx)

    t = threading.Thread(target=run)
    t.start()
    time.sleep(3)
    deadline = time.monotonic() + 60
    while t.is_alive() and time.monotonic() < deadline:
        r = box.req("POST", f"/contexts/{ctx}/interrupt")
        assert r.status in (200, 204), r
        t.join(2)
    t.join(5)
    assert not t.is_alive()
    assert of(got["lines"], "error")[0]["name"] == "KeyboardInterrupt", got["lines"]
    assert main_text(box.execute("'after'", context_id=ctx)) == "'after'"
    box.req("DELETE", f"/contexts/{ctx}")


def test_client_leaving_interrupts_and_queue_goes_on(box):
    ctx = box.req("POST", "/contexts", {}).json["id"]
    conn = http.client.HTTPConnection(*space.split_url(box.url), timeout=120)
    conn.request("POST", "/execute", json.dumps({
        "code": "import time\nfor i in range(3000):\n    time.sleep(0.1)", "context_id": ctx}).encode(),
        box.headers())
    resp = conn.getresponse()
    assert resp.status == 200
    assert b"number_of_executions" in resp.read(40)  # it runs
    conn.close()
    # The loop gets SIGINT; the next execution in that context runs soon after.
    t0 = time.monotonic()
    assert main_text(box.execute("'next'", context_id=ctx)) == "'next'"
    assert time.monotonic() - t0 < 120
    box.req("DELETE", f"/contexts/{ctx}")


def test_interpreter_death_then_fresh_context(box):
    ctx = box.req("POST", "/contexts", {}).json["id"]
    box.execute("z = 1", context_id=ctx)
    lines = box.execute("import os\nos._exit(3)", context_id=ctx)
    errs = of(lines, "error")
    assert errs and errs[-1]["name"] == "InterpreterDied", lines
    lines = box.execute("'z' in dir()", context_id=ctx)
    assert main_text(lines) == "False", lines
    box.req("DELETE", f"/contexts/{ctx}")


def test_pause_connect_keeps_the_context(daemon):
    """E2B's pause then connect: the guest's memory comes back, the interpreter with it."""
    hdrs = {"X-API-KEY": daemon.api_key, "Content-Type": "application/json"}

    def ctl(method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        return space.http_request(daemon.url, method, path, data, hdrs, WAIT)

    r = ctl("POST", "/v2/sandboxes", {"templateID": TEMPLATE, "timeout": 600})
    assert r.status == 201, r
    sid = r.json["sandboxID"]
    try:
        box = Interp(daemon.data_url, sid, r.json["envdAccessToken"])
        assert not of(box.execute("kept = 'across pause'"), "error")
        assert ctl("POST", f"/sandboxes/{sid}/pause").status == 204
        r = ctl("POST", f"/v2/sandboxes/{sid}/connect", {"timeout": 600})
        assert r.status in (200, 201), r
        box.token = r.json["envdAccessToken"]
        lines = box.execute("kept")
        assert main_text(lines) == "'across pause'", lines
    finally:
        ctl("DELETE", f"/sandboxes/{sid}")


def test_hostile_protocol_lines_are_dropped(box):
    """Code in the context can write to the interpreter's protocol fd: whatever is not a known
    line of bounded size is dropped, known lines are re-encoded, and the execution goes on."""
    code = (
        "import sys, os\n"
        "fd = sys.modules['__main__']._proto.fileno()\n"
        "os.write(fd, b'garbage\\n\\n[1,2]\\n{\"type\":\"result\",\"png\":[1]}\\n')\n"
        "os.write(fd, b'{\"type\":\"stdout\",\"text\":\"forged\",\"evil\":\"x\"}\\n')\n"
        "os.write(fd, b'{\"type\":\"stdout\",\"text\":\"' + b'A' * (5 << 20) + b'\"}\\n')\n"
        "os.write(fd, b'{\"type\":\"stdout\",\"text\":\"\\xff\\xfe\"}\\n')\n"
        "'still here'")
    lines = box.execute(code)
    assert main_text(lines) == "'still here'", [str(m)[:200] for m in lines]
    forged = [m for m in of(lines, "stdout") if m["text"] == "forged"]
    assert forged == [{"type": "stdout", "text": "forged"}], forged
    assert not any(len(m.get("text", "")) > (1 << 20) for m in lines)
    assert lines[-1]["type"] == "end_of_execution"
    assert main_text(box.execute("6 * 7")) == "42"


def test_template_without_the_interpreter(daemon):
    """A sandbox of a template without the program: a clear error, not a hang."""
    hdrs = {"X-API-KEY": daemon.api_key, "Content-Type": "application/json"}
    r = space.http_request(daemon.url, "POST", "/v2/sandboxes",
                           json.dumps({"templateID": "base", "timeout": 300}).encode(), hdrs, WAIT)
    assert r.status == 201, r
    sid = r.json["sandboxID"]
    try:
        box = Interp(daemon.data_url, sid, r.json["envdAccessToken"])
        lines = box.execute("1")
        err = of(lines, "error")
        assert err and err[-1]["name"] == "InterpreterDied", lines
        assert "space_interp.py" in err[-1]["value"], err
    finally:
        space.http_request(daemon.url, "DELETE", f"/sandboxes/{sid}", None, {"X-API-KEY": daemon.api_key}, WAIT)
