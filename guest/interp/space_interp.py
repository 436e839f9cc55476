#!/usr/bin/python3
"""space_interp.py -- one code-interpreter context in a SPACE sandbox (E2B port 49999).

The daemon runs one of these per context, as a session it owns, and talks to it by lines:

  stdin  (one JSON object per line, one per execution):
         {"code": "...", "env_vars": {"NAME": "value", ...}}
  proto  (the ORIGINAL fd 1, taken before fds 1 and 2 are redirected; one JSON object a line):
         {"type": "number_of_executions", "execution_count": N}     first, as Jupyter's
                                                                     execute_input comes first
         {"type": "stdout"|"stderr", "text": "...", "timestamp": "ISO 8601"}
         {"type": "result", "text"?, "html"?, "markdown"?, "svg"?, "png"?, "jpeg"?, "latex"?,
          "json"?, "is_main_result": bool}      value of the last expression (main) and
                                                matplotlib figures left open (not main)
         {"type": "error", "name": "...", "value": "...", "traceback": "..."}
         {"type": "end_of_execution"}           always last, once per request line

Every execution runs in this context's one namespace, so variables persist between them. The
last statement, when it is an expression, is evaluated separately like Jupyter's Out[] (a
trailing ';' suppresses it). fds 1 and 2 are pipes read by two threads, so output of child
processes (os.system, subprocess) is captured too; before the result and the end, the main
thread writes a random marker into both pipes and waits for the readers to reach it, so all
output written before the end of the code comes before end_of_execution.

SIGINT interrupts the running code (KeyboardInterrupt -> an error line) and is ignored between
executions. Stdlib only; matplotlib is used only when the code imported it.
"""
import ast
import base64
import codecs
import datetime
import io
import json
import linecache
import os
import signal
import sys
import threading
import traceback
import warnings

TEXT_CHUNK = 16 * 1024  # bytes of output per stdout/stderr line at most
MAX_MEDIA = 3 * 1024 * 1024  # larger renderings are left out (the daemon bounds lines too)
MAX_TEXT = 256 * 1024  # a repr longer than this is cut

_proto_lock = threading.Lock()
_proto = None  # binary file on the private protocol fd


def emit(obj):
    data = (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode(
        "utf-8", "replace"
    )
    with _proto_lock:
        _proto.write(data)
        _proto.flush()


def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


class Reader(threading.Thread):
    """Reads one redirected fd and emits its bytes as text lines of one stream."""

    def __init__(self, fd, name):
        super().__init__(daemon=True)
        self.fd = fd
        self.name = name
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.cond = threading.Condition()
        self.marker = None  # bytes being waited for
        self.seen = False

    def out(self, data, final=False):
        text = self.decoder.decode(data, final)
        while text:
            emit({"type": self.name, "text": text[:TEXT_CHUNK], "timestamp": now()})
            text = text[TEXT_CHUNK:]

    def run(self):
        buf = b""
        while True:
            try:
                data = os.read(self.fd, 65536)
            except InterruptedError:
                continue
            if not data:
                self.out(buf, True)
                return
            buf += data
            with self.cond:
                marker = self.marker
            if marker is None:
                self.out(buf)
                buf = b""
                continue
            i = buf.find(marker)
            if i < 0:
                # Keep what could be the start of a marker split across reads.
                keep = len(marker) - 1
                self.out(buf[:-keep] if len(buf) > keep else b"")
                buf = buf[-keep:] if len(buf) > keep else buf
                continue
            self.out(buf[:i], True)
            buf = buf[i + len(marker):]
            with self.cond:
                self.marker = None
                self.seen = True
                self.cond.notify_all()

    def drain(self, wfd):
        """Wait until everything written to wfd before now has been emitted."""
        marker = b"\0space-interp-" + os.urandom(8).hex().encode() + b"\0"
        with self.cond:
            self.marker = marker
            self.seen = False
        os.write(wfd, marker)
        with self.cond:
            while not self.seen:
                self.cond.wait(1.0)


def redirect():
    """Keep the original fd 1 for the protocol; make fds 1 and 2 pipes read by threads."""
    global _proto
    pfd = os.dup(1)
    os.set_inheritable(pfd, False)
    _proto = os.fdopen(pfd, "wb", buffering=0)
    readers = []
    for fd, name in ((1, "stdout"), (2, "stderr")):
        r, w = os.pipe()
        os.dup2(w, fd)  # dup2 makes fd inheritable: children write here too
        os.close(w)
        os.set_inheritable(r, False)
        rd = Reader(r, name)
        rd.start()
        readers.append(rd)
    # Line-buffered: print("hi") reaches the pipe as one "hi\n" (one stdout line, as
    # Jupyter sends it); what has no newline yet is flushed at the end of the execution.
    sys.stdout = io.TextIOWrapper(
        os.fdopen(1, "wb", closefd=False), encoding="utf-8",
        errors="backslashreplace", line_buffering=True)
    sys.stderr = io.TextIOWrapper(
        os.fdopen(2, "wb", closefd=False), encoding="utf-8",
        errors="backslashreplace", line_buffering=True)
    sys.__stdout__, sys.__stderr__ = sys.stdout, sys.stderr
    return readers


_executing = False  # the user's code runs: SIGINT raises KeyboardInterrupt in it
_armed = False  # number_of_executions is out, the code is not running yet
_pending = False  # a SIGINT came while armed: raised as the code starts


def on_sigint(signum, frame):
    global _pending
    if _executing:
        raise KeyboardInterrupt
    if _armed:
        # The daemon saw number_of_executions and interrupted this execution before its code
        # started: keep it, or the code would run on as if never interrupted.
        _pending = True
    # Between executions there is nothing to interrupt.


def _b64(data):
    return base64.b64encode(data).decode("ascii")


def figure_png(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    data = buf.getvalue()
    return _b64(data) if len(data) * 4 // 3 < MAX_MEDIA else None


def is_figure(value):
    mpl = sys.modules.get("matplotlib.figure")
    return mpl is not None and isinstance(value, mpl.Figure)


def represent(value):
    """A Jupyter-like bundle of the formats the value offers."""
    out = {}
    try:
        text = repr(value)
    except Exception as e:  # a broken __repr__ must not break the protocol
        text = "<repr failed: %s>" % type(e).__name__
    out["text"] = text[:MAX_TEXT]
    if is_figure(value):
        png = figure_png(value)
        if png:
            out["png"] = png
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is not None:  # shown now: not again among the open figures
            plt.close(value)
        return out
    for attr, key, binary in (
        ("_repr_html_", "html", False), ("_repr_markdown_", "markdown", False),
        ("_repr_svg_", "svg", False), ("_repr_png_", "png", True),
        ("_repr_jpeg_", "jpeg", True), ("_repr_latex_", "latex", False),
        ("_repr_json_", "json", False),
    ):
        meth = getattr(type(value), attr, None)
        if meth is None:
            continue
        try:
            data = meth(value)
        except Exception:
            continue
        if isinstance(data, tuple):  # (data, metadata)
            data = data[0] if data else None
        if data is None:
            continue
        if binary:
            if isinstance(data, str):  # already base64
                data = data.encode("ascii", "replace")
                s = data.decode("ascii")
            else:
                s = _b64(bytes(data))
            if len(s) < MAX_MEDIA:
                out[key] = s
        elif key == "json":
            out[key] = data
        elif isinstance(data, str) and len(data) < MAX_MEDIA:
            out[key] = data
    return out


def open_figures():
    """Results for the matplotlib figures the code left open, then close them (inline-like)."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return []
    out = []
    try:
        for num in plt.get_fignums():
            fig = plt.figure(num)
            png = figure_png(fig)
            r = {"type": "result", "text": repr(fig)[:MAX_TEXT], "is_main_result": False}
            if png:
                r["png"] = png
            out.append(r)
        plt.close("all")
    except Exception as e:
        print("space-interp: rendering figures failed: %r" % (e,), file=sys.stderr)
    return out


def format_error(exc):
    te = traceback.TracebackException.from_exception(exc)
    # Drop this program's own frames: the trace starts at the user's code.
    stack = list(te.stack)
    while stack and stack[0].filename == __file__:
        stack.pop(0)
    te.stack = traceback.StackSummary.from_list(stack)
    tb = "".join(te.format())
    return {"type": "error", "name": type(exc).__name__, "value": str(exc)[:MAX_TEXT],
            "traceback": tb[-MAX_TEXT:]}


class Context:
    def __init__(self):
        self.ns = {"__name__": "__main__", "__builtins__": __builtins__}
        self.count = 0

    def run(self, code, env_vars):
        """Run one cell; returns (result dict or None, error dict or None)."""
        global _executing, _armed, _pending
        filename = "<cell %d>" % self.count
        saved = {}
        for k, v in env_vars.items():
            saved[k] = os.environ.get(k)
            os.environ[k] = v
        result = error = None
        # Tracebacks then show the cell's source lines, as in Jupyter.
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        try:
            _executing = True
            try:
                if _pending:
                    raise KeyboardInterrupt
                tree = ast.parse(code, filename, "exec")
                last = None
                if tree.body and isinstance(tree.body[-1], ast.Expr) \
                        and not code.rstrip().endswith(";"):
                    last = ast.Expression(tree.body.pop().value)
                exec(compile(tree, filename, "exec"), self.ns)
                if last is not None:
                    value = eval(compile(last, filename, "eval"), self.ns)
                    if value is not None:
                        self.ns["_"] = value
                        result = represent(value)
                        result["type"] = "result"
                        result["is_main_result"] = True
            finally:
                _executing = False
        except BaseException as e:  # SystemExit and KeyboardInterrupt included: keep serving
            _executing = False
            error = format_error(e)
        finally:
            _armed = _pending = False
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        return result, error


def serve(infile, cwd=None):
    global _armed, _pending
    readers = redirect()
    if cwd:
        try:
            os.chdir(cwd)
        except OSError as e:  # shown in the first execution's stderr
            print("space-interp: cwd %s: %s" % (cwd, e.strerror), file=sys.stderr)
    signal.signal(signal.SIGINT, on_sigint)
    os.environ.setdefault("MPLBACKEND", "Agg")
    warnings.filterwarnings("ignore", message=".*non-interactive.*cannot be shown")
    ctx = Context()
    while True:
        try:
            line = infile.readline()
        except KeyboardInterrupt:
            continue
        if not line:
            return 0
        try:
            req = json.loads(line)
            if not isinstance(req, dict) or not isinstance(req.get("code"), str):
                raise ValueError("a request is an object with a string \"code\"")
            env = req.get("env_vars") or {}
            if not isinstance(env, dict) or not all(
                    isinstance(k, str) and isinstance(v, str) and k and "=" not in k
                    and "\0" not in k + v for k, v in env.items()):
                raise ValueError("env_vars must map names to strings")
        except ValueError as e:
            emit({"type": "error", "name": "ProtocolError", "value": str(e), "traceback": ""})
            emit({"type": "end_of_execution"})
            continue
        ctx.count += 1
        _armed, _pending = True, False
        emit({"type": "number_of_executions", "execution_count": ctx.count})
        result, error = ctx.run(req["code"], env)
        try:
            for f in (sys.stdout, sys.stderr):
                try:
                    f.flush()
                except Exception:
                    pass
            figures = open_figures()
            for rd in readers:
                rd.drain(1 if rd.name == "stdout" else 2)
            if result is not None:
                emit(result)
            for r in figures:
                emit(r)
            if error is not None:
                emit(error)
        finally:
            emit({"type": "end_of_execution"})


def main():
    # Stdin carries the daemon's requests: keep it on a private fd so that children (which
    # get /dev/null) never consume request lines.
    keep = os.dup(0)
    os.set_inheritable(keep, False)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdin = open(os.devnull)
    if "HOME" not in os.environ:
        try:
            import pwd
            os.environ["HOME"] = pwd.getpwuid(os.getuid()).pw_dir
        except (KeyError, ImportError):
            pass
    cwd = None
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "--cwd":
        cwd = args[1]
    elif args:
        print("usage: space_interp.py [--cwd DIR]", file=sys.stderr)
        return 2
    return serve(os.fdopen(keep, "rb"), cwd)


if __name__ == "__main__":
    sys.exit(main())
