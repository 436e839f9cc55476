"""test_interp_guest.py -- the code interpreter's guest program (guest/interp/space_interp.py) run
on the host with /usr/bin/python3: one JSON request line per execution on stdin, protocol lines
back on its stdout (the daemon's side of the wire: src/daemon/e2b/interp.c). Needs no daemon."""
import json
import os
import signal
import subprocess
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "..", "..", "guest", "interp", "space_interp.py")

class Interp:
    def __init__(self, *args):
        self.p = subprocess.Popen(["/usr/bin/python3", PROGRAM, *args], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def send(self, code, env_vars=None):
        req = {"code": code}
        if env_vars is not None:
            req["env_vars"] = env_vars
        self.p.stdin.write((json.dumps(req) + "\n").encode())
        self.p.stdin.flush()

    def lines(self, timeout=30):
        """The protocol lines of one execution, up to and including end_of_execution."""
        out = []
        deadline = time.monotonic() + timeout
        while True:
            assert time.monotonic() < deadline, out
            raw = self.p.stdout.readline()
            assert raw, "the interpreter ended: %r" % self.p.stderr.read()
            assert raw.endswith(b"\n") and raw.strip(), raw
            msg = json.loads(raw)
            out.append(msg)
            if msg["type"] == "end_of_execution":
                return out

    def run(self, code, **kw):
        self.send(code, **kw)
        return self.lines()

    def close(self):
        self.p.stdin.close()
        self.p.wait(10)


@pytest.fixture
def interp():
    i = Interp()
    yield i
    i.close()


def of(lines, t):
    return [m for m in lines if m["type"] == t]


def stdout(lines, t="stdout"):
    return "".join(m["text"] for m in of(lines, t))


def test_variables_persist_and_last_expression_is_the_result(interp):
    a = interp.run("x = 41")
    assert [m["type"] for m in a] == ["number_of_executions", "end_of_execution"]
    assert a[0]["execution_count"] == 1
    b = interp.run("x + 1")
    res = of(b, "result")
    assert len(res) == 1 and res[0]["text"] == "42" and res[0]["is_main_result"] is True
    assert of(b, "number_of_executions")[0]["execution_count"] == 2
    # Only a trailing expression is a result; a trailing ';' or a statement gives none.
    assert not of(interp.run("x + 1;"), "result")
    assert not of(interp.run("y = x"), "result")
    assert of(interp.run("y\n"), "result")[0]["text"] == "41"
    # An expression's value that is None gives no result, as in Jupyter.
    assert not of(interp.run("None"), "result")


def test_stdout_and_stderr(interp):
    lines = interp.run("import sys\nprint('hello')\nprint('oops', file=sys.stderr)\n'done'")
    assert stdout(lines) == "hello\n"
    assert [m["text"] for m in of(lines, "stdout")] == ["hello\n"]  # one line, one message
    # Output without a newline still comes, at the end of the execution.
    assert stdout(interp.run("print('no newline', end='')")) == "no newline"
    assert stdout(lines, "stderr") == "oops\n"
    assert all(isinstance(m["timestamp"], str) for m in of(lines, "stdout"))
    # Output comes before the result and end_of_execution.
    types = [m["type"] for m in lines]
    assert types.index("stdout") < types.index("result") < types.index("end_of_execution")


def test_child_process_output_is_captured(interp):
    lines = interp.run("import os, subprocess\nos.system('echo from-shell; echo err-shell >&2')\n"
                       "subprocess.run(['echo', 'from-subprocess'])\nNone")
    assert stdout(lines) == "from-shell\nfrom-subprocess\n"
    assert stdout(lines, "stderr") == "err-shell\n"


def test_exception_is_an_error_with_traceback(interp):
    lines = interp.run("def f():\n    return 1/0\nf()")
    err = of(lines, "error")
    assert len(err) == 1
    e = err[0]
    assert e["name"] == "ZeroDivisionError" and e["value"] == "division by zero"
    assert "Traceback" in e["traceback"] and "return 1/0" in e["traceback"]
    assert "space_interp" not in e["traceback"]  # the program's own frames are left out
    assert lines[-1]["type"] == "end_of_execution"
    # A syntax error too; and the context still works afterwards.
    e = of(interp.run("def ("), "error")[0]
    assert e["name"] == "SyntaxError"
    assert of(interp.run("2 * 21"), "result")[0]["text"] == "42"
    # SystemExit does not end the interpreter.
    assert of(interp.run("import sys; sys.exit(3)"), "error")[0]["name"] == "SystemExit"
    assert of(interp.run("'alive'"), "result")[0]["text"] == "'alive'"


def test_env_vars_apply_to_one_execution(interp):
    lines = interp.run("import os\nos.environ['SPACE_T']", env_vars={"SPACE_T": "v1"})
    assert of(lines, "result")[0]["text"] == "'v1'"
    lines = interp.run("import os\nos.system('echo $SPACE_T')\nos.environ.get('SPACE_T')",
                       env_vars={"SPACE_T": "v2"})
    assert stdout(lines) == "v2\n"
    assert not of(interp.run("os.environ.get('SPACE_T')"), "result")


def test_rich_repr_and_bad_requests(interp):
    lines = interp.run("class H:\n    def _repr_html_(self):\n        return '<b>hi</b>'\nH()")
    r = of(lines, "result")[0]
    assert r["html"] == "<b>hi</b>" and "H object" in r["text"]
    # A repr that raises does not break the protocol.
    lines = interp.run("class B:\n    def __repr__(self):\n        raise ValueError()\nB()")
    assert "repr failed" in of(lines, "result")[0]["text"]
    # A request line that is not a request: an error line and the end, and it goes on.
    interp.p.stdin.write(b"garbage\n{\"code\": 5}\n")
    interp.p.stdin.flush()
    for _ in range(2):
        lines = interp.lines()
        assert of(lines, "error")[0]["name"] == "ProtocolError"
    assert of(interp.run("1"), "result")[0]["text"] == "1"


def test_large_output_is_chunked(interp):
    lines = interp.run("print('x' * 100000)")
    assert stdout(lines) == "x" * 100000 + "\n"
    assert all(len(m["text"]) <= 16384 for m in of(lines, "stdout"))


def test_sigint_interrupts_the_running_code():
    i = Interp()
    try:
        assert of(i.run("1"), "result")
        # Between executions SIGINT is ignored.
        i.p.send_signal(signal.SIGINT)
        time.sleep(0.2)
        i.send("import time\nprint('start', flush=True)\ntime.sleep(30)")
        first = json.loads(i.p.stdout.readline())
        assert first["type"] == "number_of_executions"
        out = json.loads(i.p.stdout.readline())
        assert out["type"] == "stdout"
        threading.Timer(0.2, i.p.send_signal, (signal.SIGINT,)).start()
        rest = i.lines(timeout=10)
        assert of(rest, "error")[0]["name"] == "KeyboardInterrupt"
        assert of(i.run("'after'"), "result")[0]["text"] == "'after'"
    finally:
        i.close()


def test_sigint_after_the_count_before_the_code_starts_still_interrupts():
    """The daemon interrupts once it has read number_of_executions; the code may not have started
    yet (here: 10,000 env_vars to set first). That SIGINT must not be lost, or a client that left
    leaves its code running and the context's queue stuck behind it."""
    i = Interp()
    try:
        env = {"SPACE_V%d" % n: "x" for n in range(10000)}
        i.send("import time\ntime.sleep(30)\n'not interrupted'", env_vars=env)
        first = json.loads(i.p.stdout.readline())
        assert first["type"] == "number_of_executions"
        t0 = time.monotonic()
        i.p.send_signal(signal.SIGINT)
        rest = i.lines(timeout=60)  # (setting and restoring the variables is slow under load)
        assert of(rest, "error")[0]["name"] == "KeyboardInterrupt", rest
        assert not of(rest, "result"), rest
        assert time.monotonic() - t0 < 25  # well before the code's 30 s
        # Nothing is left pending for the next execution.
        assert of(i.run("'after'"), "result")[0]["text"] == "'after'"
        assert "SPACE_V1" not in of(i.run("import os\nlist(os.environ)"), "result")[0]["text"]
    finally:
        i.close()


def test_cwd_argument(tmp_path):
    i = Interp("--cwd", str(tmp_path))
    try:
        assert of(i.run("import os\nos.getcwd()"), "result")[0]["text"] == repr(str(tmp_path))
    finally:
        i.close()
