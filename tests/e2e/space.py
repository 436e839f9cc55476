"""space.py -- test framework: run the real spaced, wrap each API resource, check every answer.

Stdlib only. The pieces:
  Daemon   starts spaced (the sanitizer build, build/san/bin/spaced) on free loopback ports
           with a temp state dir and a random API key, waits for /v1/info, restarts it on the
           same state dir, stops it, and cleans up the QEMU processes of every sandbox it saw.
           Its cleanup raises (so the fixture's teardown fails the test) on a failed delete,
           a daemon that crashed or did not exit 0 on SIGTERM, a QEMU left behind by a
           deleted sandbox, or any sanitizer report.
  Api      the control plane: one method per resource; every JSON answer is checked against
           the shapes of docs/api/reference.md (SHAPES below), every error against the
           error envelope and the status -> code table.
  Session  one command: attach (SSE, parsed and checked: ids are byte offsets that must add
           up), stdin, signal, tokens.
  qemu_pid find a sandbox's QEMU by scanning /proc for its id on a qemu command line.
"""

import base64
import http.client
import json
import os
import re
import secrets
import signal as _signal
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PLAIN_SPACED = os.path.join(REPO, "build", "bin", "spaced")
# The tests run the ASan+UBSan build of the daemon (`make san-bins`; `make test` builds it),
# so that a memory error or undefined behaviour on any path a test drives fails that test.
# SPACE_TEST_SANITIZE=0 runs build/bin/spaced instead (e.g. to compare timings).
SAN_SPACED = os.path.join(REPO, "build", "san", "bin", "spaced")
SANITIZE = os.environ.get("SPACE_TEST_SANITIZE", "1") != "0"
SPACED = SAN_SPACED if SANITIZE else PLAIN_SPACED
SPACECTL = os.path.join(REPO, "build", "bin", "spacectl")
TEMPLATES_DIR = os.path.join(REPO, "build", "templates")

# Generous limits: the suite must also pass under TCG on two loaded cores.
START_TIMEOUT = float(os.environ.get("SPACE_TEST_START_TIMEOUT", "180"))
CREATE_TIMEOUT = float(os.environ.get("SPACE_TEST_CREATE_TIMEOUT", "180"))
READ_TIMEOUT = 60.0  # per socket read; the daemon sends a keepalive every 15 s

# ---------------------------------------------------------------------------
# Shapes: a light checker for the JSON of docs/api/reference.md (required keys and
# their types; extra keys are allowed so the API may grow).


class Nullable:
    def __init__(self, t):
        self.t = t


class Enum:
    def __init__(self, *values):
        self.values = values


class Pattern:
    def __init__(self, regex):
        self.rx = re.compile(regex)


class ListOf:
    def __init__(self, t):
        self.t = t


class MapOf:
    """An object whose keys are free and whose values all have one type."""

    def __init__(self, t):
        self.t = t


class Int:
    def __init__(self, lo=None, hi=None):
        self.lo, self.hi = lo, hi


class ShapeError(AssertionError):
    pass


def check(value, shape, where="$"):
    """Raises ShapeError unless value matches shape; returns value."""
    if isinstance(shape, Nullable):
        if value is not None:
            check(value, shape.t, where)
    elif isinstance(shape, dict):
        if not isinstance(value, dict):
            raise ShapeError(f"{where}: want object, got {value!r:.200}")
        for key, sub in shape.items():
            if key not in value:
                raise ShapeError(f"{where}: missing key {key!r} in {value!r:.300}")
            check(value[key], sub, f"{where}.{key}")
    elif isinstance(shape, MapOf):
        if not isinstance(value, dict):
            raise ShapeError(f"{where}: want object, got {value!r:.200}")
        for key, sub in value.items():
            check(sub, shape.t, f"{where}.{key}")
    elif isinstance(shape, ListOf):
        if not isinstance(value, list):
            raise ShapeError(f"{where}: want array, got {value!r:.200}")
        for i, sub in enumerate(value):
            check(sub, shape.t, f"{where}[{i}]")
    elif isinstance(shape, Enum):
        if value not in shape.values:
            raise ShapeError(f"{where}: {value!r} not one of {shape.values}")
    elif isinstance(shape, Pattern):
        if not isinstance(value, str) or not shape.rx.search(value):
            raise ShapeError(f"{where}: {value!r:.200} does not match {shape.rx.pattern}")
    elif isinstance(shape, Int) or shape is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ShapeError(f"{where}: want integer, got {value!r:.200}")
        if isinstance(shape, Int):
            if shape.lo is not None and value < shape.lo:
                raise ShapeError(f"{where}: {value} < {shape.lo}")
            if shape.hi is not None and value > shape.hi:
                raise ShapeError(f"{where}: {value} > {shape.hi}")
    elif shape is bool:
        if not isinstance(value, bool):
            raise ShapeError(f"{where}: want boolean, got {value!r:.200}")
    elif shape is str:
        if not isinstance(value, str):
            raise ShapeError(f"{where}: want string, got {value!r:.200}")
    else:
        raise TypeError(f"bad shape {shape!r}")
    return value


SB_STATES = ("creating", "running", "pausing", "paused", "suspending", "suspended", "restoring",
             "stopping", "stopped", "deleting", "deleted", "failed", "lost")
OP_KINDS = ("create", "pause", "resume", "suspend", "restore", "fork", "snapshot", "stop", "start",
            "delete", "build")
START_KINDS = ("boot", "clone", "pool", "fork")
OP_STATES = ("pending", "running", "succeeded", "failed")
SS_STATES = ("created", "running", "exited", "failed")
ERROR_CODES = {400: "bad_request", 401: "unauthorized", 404: "not_found",
               405: "method_not_allowed", 409: "conflict", 413: "payload_too_large",
               429: "at_capacity", 503: "unavailable", 500: "internal"}

TIME = Pattern(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
DIGEST = Pattern(r"^sha256:[0-9a-f]{64}$")
SB_ID = Pattern(r"^sb-[0-9a-f]{16}$")
OP_ID = Pattern(r"^op-[0-9a-f]{16}$")
SS_ID = Pattern(r"^ss-[0-9a-f]{16}$")
SN_ID = Pattern(r"^sn-[0-9a-f]{16}$")
URL = Pattern(r"^https?://[^/\s]+$")
NONEMPTY = Pattern(r"\S")

# File operations name what went wrong more precisely (docs/design/channels.md).
FILE_ERROR_CODES = {400: ("not_a_directory", "is_a_directory", "invalid_argument"),
                    403: ("permission_denied", "read_only"), 409: ("already_exists", "not_empty"),
                    416: ("range_not_satisfiable",), 500: ("io_error",), 502: ("bad_gateway",),
                    507: ("no_space",)}
ERROR = {"error": {"code": Enum(*ERROR_CODES.values(), *(c for cs in FILE_ERROR_CODES.values() for c in cs)),
                   "message": NONEMPTY}}
INFO = {"version": str, "accelerator": Enum("kvm", "tcg"), "accelerator_reason": str,
        "data_plane_url": URL,
        "capacity": {"max_sandboxes": Int(1), "sandboxes_running": Int(0),
                     "host_vcpus": Int(1), "host_memory_mib": Int(1),
                     "memory_budget_mib": Int(1), "memory_used_mib": Int(0),
                     "vcpu_budget": Int(1), "vcpus_used": Int(0), "tmpfs_free_mib": Int()},
        "ports": {"domain": NONEMPTY, "url_pattern": Pattern(r"^https?://\{port\}-\{id\}\.")},
        "uptime_s": Int(0)}
TEMPLATE = {"name": NONEMPTY, "digest": DIGEST, "tags": ListOf(str), "vcpus": Int(1),
            "memory_mib": Int(1), "default_user": NONEMPTY, "env": MapOf(str),
            "image_bytes": Int(1), "created_at": TIME,
            "pool": {"size": Int(0), "ready": Int(0)}, "ready_snapshot": Nullable(SN_ID)}
SANDBOX = {"id": SB_ID, "state": Enum(*SB_STATES), "template": NONEMPTY, "template_digest": DIGEST,
           "vcpus": Int(1, 16), "memory_mib": Int(64, 65536), "env": MapOf(str),
           "metadata": MapOf(str), "timeout_s": Int(0, 604800), "created_at": TIME,
           "updated_at": TIME, "expires_at": Nullable(TIME), "error": Nullable(str),
           "on_timeout": Enum("delete", "suspend", "suspend_idle"), "start_kind": Enum(*START_KINDS),
           "parent_id": Nullable(SB_ID), "snapshot": Nullable(SN_ID),
           "suspended_bytes": Nullable(Int(0)), "network": {}}
OPERATION = {"id": OP_ID, "kind": Enum(*OP_KINDS), "sandbox_id": Nullable(SB_ID), "state": Enum(*OP_STATES),
             "error": Nullable(str), "created_at": TIME, "updated_at": TIME,
             "result": Nullable({})}
SNAPSHOT = {"id": SN_ID, "name": Nullable(str), "kind": Enum("ready", "named", "suspend", "fork"),
            "state": Enum("creating", "ready", "failed"), "sandbox_id": SB_ID, "template": NONEMPTY,
            "template_digest": DIGEST, "vcpus": Int(1), "memory_mib": Int(1), "bytes": Int(0),
            "created_at": TIME, "error": Nullable(str)}
PTY_SIZE = {"rows": Int(1), "cols": Int(1)}
SESSION = {"id": SS_ID, "sandbox_id": SB_ID, "kind": Enum("process", "pty", "file", "watch"),
           "pty": Nullable(PTY_SIZE), "argv": ListOf(str), "env": MapOf(str), "cwd": str,
           "user": str, "stdin": bool, "state": Enum(*SS_STATES), "pid": Nullable(int),
           "exit_code": Nullable(int), "signal": Nullable(int), "error": Nullable(str),
           "output_bytes": Int(0), "output_start": Int(0), "created_at": TIME,
           "started_at": Nullable(TIME),
           "ended_at": Nullable(TIME)}
DATA_PLANE = {"url": URL, "token": Pattern(r"^[0-9a-f]{64}$"), "expires_at": TIME}
NODE = {"id": NONEMPTY, "state": Enum("up", "lost"), "api_url": URL, "data_url": URL,
        "capacity": {"memory_mib": Int(0), "vcpus": Int(0)},
        "used": {"memory_mib": Int(0), "vcpus": Int(0), "sandboxes": Int(0)},
        "started_at": TIME, "renewed_at": TIME, "lease_expires_at": TIME}
SHAPES = {
    "info": INFO,
    "nodes": {"nodes": ListOf(NODE)},
    "templates": {"templates": ListOf(TEMPLATE)},
    "template": TEMPLATE,
    "sandbox+op": {"sandbox": SANDBOX, "operation": OPERATION},
    "sandbox+maybe_op": {"sandbox": SANDBOX, "operation": Nullable(OPERATION)},
    "fork": {"sandbox": SANDBOX, "operation": OPERATION, "children": ListOf(SB_ID)},
    "snapshot+op": {"sandbox": SANDBOX, "operation": OPERATION, "snapshot": Nullable(SNAPSHOT)},
    "snapshots": {"snapshots": ListOf(SNAPSHOT)},
    "snapshot": SNAPSHOT,
    "sandboxes": {"sandboxes": ListOf(SANDBOX)},
    "sandbox": SANDBOX,
    "operation": OPERATION,
    "session+dp": {"session": SESSION, "data_plane": DATA_PLANE},
    "sessions": {"sessions": ListOf(SESSION)},
    "session": SESSION,
    "dp": {"data_plane": DATA_PLANE},
    "exit": {"exit_code": Nullable(int), "signal": Nullable(int)},
    "error_event": {"message": NONEMPTY},
    "dropped_event": {"from": Int(0), "to": Int(0)},
}


def parse_time(s):
    """RFC 3339 with milliseconds -> seconds since the epoch (float)."""
    import datetime
    dt = datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ")
    return dt.replace(tzinfo=datetime.timezone.utc).timestamp()


# ---------------------------------------------------------------------------
# HTTP


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers  # http.client.HTTPMessage (case-insensitive get)
        self.body = body
        self._json = None

    @property
    def json(self):
        if self._json is None:
            self._json = json.loads(self.body.decode())
        return self._json

    @property
    def content_type(self):
        return (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()

    def __repr__(self):
        return f"<Response {self.status} {self.body[:300]!r}>"


class ApiError(AssertionError):
    """An answer with a status the caller did not expect."""

    def __init__(self, method, path, resp):
        self.status = resp.status
        self.resp = resp
        try:
            self.code = resp.json["error"]["code"]
            self.message = resp.json["error"]["message"]
        except Exception:
            self.code = self.message = None
        super().__init__(f"{method} {path} -> {resp.status}: {resp.body[:500]!r}")


def split_url(url):
    u = urllib.parse.urlsplit(url)
    return u.hostname, u.port or (443 if u.scheme == "https" else 80)


# CA bundles to verify https:// daemons with (a cluster's TLS node), by address.
TLS_CAS = {}


def connection(url, timeout):
    """An http.client connection to url's host: HTTPS (verified against the CA registered for
    it in TLS_CAS) for an https:// URL."""
    host, port = split_url(url)
    if not url.startswith("https://"):
        return http.client.HTTPConnection(host, port, timeout=timeout)
    import ssl
    ctx = ssl.create_default_context(cafile=TLS_CAS.get((host, port)))
    return http.client.HTTPSConnection(host, port, timeout=timeout, context=ctx)


# Headers every request to an address carries unless the caller sets its own (a cluster's node
# admits only its api processes, which send the cluster's credential: a test that talks to a
# node directly, as an api process would, registers it here with Daemon.peer_key).
PEER_HEADERS = {}


def peer_headers(url):
    return dict(PEER_HEADERS.get(split_url(url), {}))


def http_request(url, method, path, body=None, headers=None, timeout=READ_TIMEOUT):
    """One request on a fresh connection; returns a Response with the whole body read."""
    conn = connection(url, timeout)
    try:
        hdrs = peer_headers(url)
        hdrs.update(headers or {})
        if body is not None and not isinstance(body, (bytes, bytearray)):
            body = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        try:
            conn.request(method, path, body=body, headers=hdrs)
        except (BrokenPipeError, ConnectionResetError) as e:
            # The server may answer (413) before reading a large body and close; its answer
            # is still readable as long as it closed gracefully (lingering close).
            try:
                r = conn.getresponse()
            except (OSError, http.client.HTTPException):
                raise AssertionError(f"{method} {path}: connection closed while sending the "
                                     f"body ({e}) and no answer came back") from e
            return Response(r.status, r.headers, r.read())
        r = conn.getresponse()
        data = r.read()
        return Response(r.status, r.headers, data)
    finally:
        conn.close()


def check_error(resp, where=""):
    """An error answer must be the JSON envelope with the code for its status."""
    assert resp.content_type == "application/json", \
        f"{where}: error answer is {resp.content_type!r}, not JSON: {resp!r}"
    check(resp.json, ERROR, where or "$")
    want = ERROR_CODES.get(resp.status)
    if want and resp.json["error"]["code"] not in FILE_ERROR_CODES.get(resp.status, ()):
        assert resp.json["error"]["code"] == want, \
            f"{where}: status {resp.status} carries code {resp.json['error']['code']!r}, want {want!r}"
    return resp.json["error"]


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


def q(ref):
    return urllib.parse.quote(ref, safe="")


class Api:
    """The control plane. Methods return checked JSON; an unexpected status raises ApiError."""

    def __init__(self, url, key, daemon=None):
        self.url = url
        self.key = key
        self.daemon = daemon  # to track the ids of sandboxes created through us

    def raw(self, method, path, body=None, key=..., headers=None, timeout=READ_TIMEOUT):
        """A request whose answer is returned as is (errors are still checked for shape)."""
        hdrs = dict(headers or {})
        if key is ...:
            key = self.key
        if key is not None:
            hdrs["Authorization"] = f"Bearer {key}"
        resp = http_request(self.url, method, path, body, hdrs, timeout)
        if resp.status >= 400:
            check_error(resp, f"{method} {path}")
        return resp

    def call(self, method, path, shape, body=None, expect=200, timeout=READ_TIMEOUT):
        resp = self.raw(method, path, body, timeout=timeout)
        if resp.status != expect:
            raise ApiError(method, path, resp)
        if shape is None:
            return resp
        assert resp.content_type == "application/json", f"{method} {path}: {resp.content_type!r}"
        return check(resp.json, SHAPES[shape], f"{method} {path}")

    def expect_error(self, method, path, status, body=None, key=..., headers=None):
        """Sends a request that must fail with `status`; returns the error object."""
        resp = self.raw(method, path, body, key=key, headers=headers)
        assert resp.status == status, f"{method} {path}: want {status}, got {resp!r}"
        return check_error(resp, f"{method} {path}")

    # -- info / templates
    def info(self):
        return self.call("GET", "/v1/info", "info")

    def templates(self):
        return self.call("GET", "/v1/templates", "templates")["templates"]

    def template(self, ref):
        return self.call("GET", f"/v1/templates/{q(ref)}", "template")

    # -- sandboxes
    def create_sandbox(self, template="minimal", **fields):
        body = dict(fields) if "snapshot" in fields else dict(fields, template=template)
        r = self.call("POST", "/v1/sandboxes", "sandbox+op", body, expect=202)
        sb, op = r["sandbox"], r["operation"]
        if self.daemon is not None:
            self.daemon.sandbox_ids.add(sb["id"])
        assert op["kind"] == "create" and op["sandbox_id"] == sb["id"], r
        assert sb["state"] in ("creating", "running"), sb
        return sb, op

    def sandboxes(self, **params):
        """params: state="running,creating", metadata={"k": "v"}."""
        query = []
        if "state" in params:
            query.append(("state", params["state"]))
        for k, v in (params.get("metadata") or {}).items():
            query.append((f"metadata.{k}", v))
        path = "/v1/sandboxes" + ("?" + urllib.parse.urlencode(query) if query else "")
        return self.call("GET", path, "sandboxes")["sandboxes"]

    def sandbox(self, sb_id):
        return self.call("GET", f"/v1/sandboxes/{sb_id}", "sandbox")

    def delete_sandbox(self, sb_id):
        r = self.call("DELETE", f"/v1/sandboxes/{sb_id}", "sandbox+op", expect=202)
        assert r["operation"]["kind"] == "delete" and r["sandbox"]["id"] == sb_id, r
        return r["sandbox"], r["operation"]

    def act(self, sb_id, action, body=None):
        """POST /v1/sandboxes/{id}/<action> (pause, resume, suspend, restore, stop, start):
        the 202 answer, checked; returns (sandbox, operation)."""
        r = self.call("POST", f"/v1/sandboxes/{sb_id}/{action}", "sandbox+op", body or {}, expect=202)
        assert r["operation"]["kind"] == action and r["operation"]["sandbox_id"] == sb_id, r
        return r["sandbox"], r["operation"]

    def do(self, sb_id, action, timeout=CREATE_TIMEOUT):
        """An action waited for; it must succeed. Returns the sandbox afterwards."""
        _, op = self.act(sb_id, action)
        op = self.wait_op(op["id"], timeout)
        assert op["state"] == "succeeded", f"{action} failed: {op}"
        return self.sandbox(sb_id)

    def wake(self, sb_id):
        r = self.raw("POST", f"/v1/sandboxes/{sb_id}/wake", {})
        assert r.status in (200, 202), r
        return check(r.json, SHAPES["sandbox+maybe_op"], "wake")

    def fork(self, sb_id, count=1, expect=202):
        r = self.call("POST", f"/v1/sandboxes/{sb_id}/fork", "fork", {"count": count}, expect=expect)
        if self.daemon is not None:
            self.daemon.sandbox_ids.update(r["children"])
        return r

    def snapshot_sandbox(self, sb_id, name):
        return self.call("POST", f"/v1/sandboxes/{sb_id}/snapshots", "snapshot+op", {"name": name},
                         expect=202)

    def snapshots(self):
        return self.call("GET", "/v1/snapshots", "snapshots")["snapshots"]

    def snapshot(self, ref):
        return self.call("GET", f"/v1/snapshots/{q(ref)}", "snapshot")

    def delete_snapshot(self, ref):
        return self.call("DELETE", f"/v1/snapshots/{q(ref)}", None, expect=204)

    def set_timeout(self, sb_id, timeout_s, on_timeout=None):
        body = {"timeout_s": timeout_s}
        if on_timeout:
            body["on_timeout"] = on_timeout
        return self.call("POST", f"/v1/sandboxes/{sb_id}/timeout", "sandbox", body)

    def set_pool(self, ref, size):
        return self.call("PUT", f"/v1/templates/{q(ref)}/pool", "template", {"size": size})

    def wait_ready_snapshot(self, ref, timeout=CREATE_TIMEOUT):
        """Waits until the daemon has the template's ready snapshot (creates clone it)."""
        deadline = time.monotonic() + timeout
        while True:
            t = self.template(ref)
            if t["ready_snapshot"]:
                return t
            assert time.monotonic() < deadline, f"no ready snapshot of {ref} after {timeout}s"
            time.sleep(0.2)

    def logs(self, sb_id):
        resp = self.call("GET", f"/v1/sandboxes/{sb_id}/logs", None)
        assert resp.content_type == "text/plain", resp.headers.get("Content-Type")
        return resp.body.decode(errors="replace")

    # -- operations
    def operation(self, op_id, wait=None, timeout=READ_TIMEOUT):
        path = f"/v1/operations/{op_id}" + (f"?wait={wait}" if wait is not None else "")
        return self.call("GET", path, "operation", timeout=timeout)

    def wait_op(self, op_id, timeout=CREATE_TIMEOUT):
        """Long-polls until the operation is done; returns it (succeeded or failed)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            op = self.operation(op_id, wait=max(0, min(30, int(left))), timeout=READ_TIMEOUT + 30)
            if op["state"] in ("succeeded", "failed"):
                return op
            assert time.monotonic() < deadline, f"operation still {op['state']} after {timeout}s: {op}"

    def new_sandbox(self, template="minimal", **fields):
        """Creates a sandbox and waits until it is running; returns its record."""
        sb, op = self.create_sandbox(template, **fields)
        op = self.wait_op(op["id"])
        assert op["state"] == "succeeded", f"create failed: {op}"
        sb = self.sandbox(sb["id"])
        assert sb["state"] == "running", sb
        return sb

    def remove_sandbox(self, sb_id, timeout=60):
        """Deletes and waits for the delete operation to succeed."""
        _, op = self.delete_sandbox(sb_id)
        op = self.wait_op(op["id"], timeout)
        assert op["state"] == "succeeded", op
        return self.sandbox(sb_id)

    def wait_sandbox_state(self, sb_id, states, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            sb = self.sandbox(sb_id)
            if sb["state"] in states:
                return sb
            assert time.monotonic() < deadline, f"sandbox still {sb['state']}, want {states}: {sb}"
            time.sleep(0.2)

    # -- sessions
    def create_session(self, sb_id, argv, **fields):
        body = dict(fields, argv=argv)
        r = self.call("POST", f"/v1/sandboxes/{sb_id}/sessions", "session+dp", body, expect=201)
        s = r["session"]
        assert s["sandbox_id"] == sb_id and s["argv"] == argv and s["state"] == "created", s
        return Session(self, r)

    def sessions(self, sb_id):
        return self.call("GET", f"/v1/sandboxes/{sb_id}/sessions", "sessions")["sessions"]

    def session(self, sb_id, ss_id):
        return self.call("GET", f"/v1/sandboxes/{sb_id}/sessions/{ss_id}", "session")

    def run(self, sb_id, argv, stdin=None, timeout=120, **fields):
        """Runs one command to the end; returns its Result. stdin: bytes to send, then close."""
        if stdin is not None:
            fields["stdin"] = True
        s = self.create_session(sb_id, argv, **fields)
        if stdin is None:
            return s.collect(timeout=timeout)
        job = s.start(timeout=timeout)
        s.wait_running()
        s.send_stdin(stdin, close=True)
        return job.wait()


# ---------------------------------------------------------------------------
# Sessions and the data plane


class Event:
    __slots__ = ("type", "id", "data", "raw")

    def __init__(self, type_, id_, data):
        self.type, self.id, self.data, self.raw = type_, id_, data, None

    def __repr__(self):
        return f"<Event {self.type} id={self.id} {self.data[:80]!r}>"


class Result:
    def __init__(self):
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.output = bytearray()  # stdout and stderr in offset order
        self.exit_code = None
        self.signal = None
        self.exited = False
        self.error = None  # message of an `error` event
        self.last_id = None
        self.first_byte_at = None  # time.monotonic() of the first output byte
        self.events = 0
        self.dropped = []  # (from, to) of each `dropped` event: output the caps discarded

    def __repr__(self):
        return (f"<Result exit_code={self.exit_code} signal={self.signal} error={self.error!r} "
                f"stdout={bytes(self.stdout[:200])!r} stderr={bytes(self.stderr[:200])!r}>")


class Stream:
    """One SSE attachment. Iterate for Events; each output event is checked: its id must be
    the offset before it plus its length, so nothing can be lost or repeated unseen."""

    def __init__(self, session, offset=None, how="header", method="POST", token=None,
                 timeout=READ_TIMEOUT):
        self.session = session
        self.conn = connection(session.url, timeout)
        path = f"/v1/sessions/{session.id}/attach"
        token = session.token if token is None else token
        headers = peer_headers(session.url)
        headers["Accept"] = "text/event-stream"
        query = {}
        if how == "query-token":
            query["token"] = token
        else:
            headers.update(bearer(token))
        if offset is not None:
            if how in ("query", "query-token"):
                query["offset"] = str(offset)
            else:
                headers["Last-Event-ID"] = str(offset)
        if query:
            path += "?" + urllib.parse.urlencode(query)
        self.conn.request(method, path, headers=headers)
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.pos = int(offset or 0) if str(offset or 0).isdigit() else 0
        self.error_response = None
        if self.status != 200:
            body = self.resp.read()
            self.conn.close()
            self.error_response = Response(self.status, self.resp.headers, body)
            check_error(self.error_response, f"attach {session.id}")
        else:
            ctype = (self.resp.headers.get("Content-Type") or "").split(";")[0].strip()
            assert ctype == "text/event-stream", f"attach answered {ctype!r}"

    def __iter__(self):
        return self.events()

    def events(self):
        """Parses the stream per the SSE rules: `field: value` lines, comments start with ':',
        a blank line dispatches; several data lines join with newlines."""
        etype, eid, data = None, None, []
        for line in self._lines():
            line = line.rstrip(b"\r").decode()
            if line == "":
                if data:
                    yield self._checked(Event(etype or "message", eid, "\n".join(data)))
                etype, data = None, []
                continue
            if line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if field == "event":
                etype = value
            elif field == "data":
                data.append(value)
            elif field == "id":
                eid = value

    def _lines(self):
        """Lines of the body without their newline, read in large blocks (fast for the 100 MB
        tests; works for chunked and close-delimited bodies alike)."""
        buf, scan = bytearray(), 0
        while True:
            nl = buf.find(b"\n", scan)
            if nl < 0:
                scan = len(buf)
                chunk = self.resp.read1(1 << 16)
                if not chunk:
                    return  # server ended the stream (a partial last line is not an event)
                buf += chunk
                continue
            line = bytes(buf[:nl])
            del buf[:nl + 1]
            scan = 0
            yield line

    def _checked(self, ev):
        if ev.type in ("stdout", "stderr"):
            ev.raw = base64.b64decode(ev.data, validate=True)
            assert ev.raw, f"empty output event {ev}"
            assert ev.id is not None and int(ev.id) == self.pos + len(ev.raw), \
                f"{ev.type} event id {ev.id} != offset {self.pos} + {len(ev.raw)} bytes"
            self.pos += len(ev.raw)
        elif ev.type == "exit":
            ev.raw = check(json.loads(ev.data), SHAPES["exit"], "exit event")
            assert ev.id is not None and int(ev.id) == self.pos, \
                f"exit event id {ev.id} != final offset {self.pos}"
            assert (ev.raw["exit_code"] is None) != (ev.raw["signal"] is None), \
                f"exit event needs exactly one of exit_code/signal: {ev.raw}"
        elif ev.type == "error":
            ev.raw = check(json.loads(ev.data), SHAPES["error_event"], "error event")
        elif ev.type == "dropped":
            ev.raw = check(json.loads(ev.data), SHAPES["dropped_event"], "dropped event")
            assert ev.raw["from"] == self.pos and ev.raw["to"] > ev.raw["from"] and \
                ev.id is not None and int(ev.id) == ev.raw["to"], \
                f"dropped event {ev.raw} id {ev.id} at offset {self.pos}"
            self.pos = ev.raw["to"]
        else:
            raise AssertionError(f"unknown event type {ev.type!r}: {ev}")
        return ev

    def collect(self, result=None, until=None, deadline=None):
        """Reads events into result until the stream ends (or until(result) is true)."""
        r = result if result is not None else Result()
        assert self.status == 200, f"attach failed: {self.error_response!r}"
        for ev in self.events():
            r.events += 1
            r.last_id = ev.id
            if ev.type in ("stdout", "stderr"):
                if r.first_byte_at is None:
                    r.first_byte_at = time.monotonic()
                (r.stdout if ev.type == "stdout" else r.stderr).extend(ev.raw)
                r.output.extend(ev.raw)
            elif ev.type == "exit":
                r.exited = True
                r.exit_code, r.signal = ev.raw["exit_code"], ev.raw["signal"]
            elif ev.type == "error":
                r.error = ev.raw["message"]
            elif ev.type == "dropped":
                r.dropped.append((ev.raw["from"], ev.raw["to"]))
            if until is not None and until(r):
                break
            if deadline is not None:
                assert time.monotonic() < deadline, f"stream still going at deadline: {r}"
        self.close()
        return r

    def close(self):
        try:
            self.conn.close()
        except Exception:
            pass


class Job:
    """A session collected on a background thread."""

    def __init__(self, session, timeout, **attach):
        self.session = session
        self.result = Result()
        self.exc = None
        self.timeout = timeout
        self.started = time.monotonic()
        self.thread = threading.Thread(target=self._run, kwargs=attach, daemon=True)
        self.thread.start()

    def _run(self, **attach):
        try:
            st = self.session.attach(**attach)
            st.collect(self.result, deadline=self.started + self.timeout)
        except BaseException as e:  # re-raised in wait()
            self.exc = e
        self.ended = time.monotonic()

    def wait(self, timeout=None):
        self.thread.join(self.timeout if timeout is None else timeout)
        assert not self.thread.is_alive(), f"command did not finish in time: {self.result}"
        if self.exc:
            raise self.exc
        return self.result


class Session:
    def __init__(self, api, created):
        self.api = api
        self.rec = created["session"]
        self.id = self.rec["id"]
        self.sandbox_id = self.rec["sandbox_id"]
        self._set_dp(created["data_plane"])

    def _set_dp(self, dp):
        self.url = dp["url"]
        self.token = dp["token"]
        self.expires_at = dp["expires_at"]

    def attach(self, offset=None, how="header", method="POST", token=None, timeout=READ_TIMEOUT):
        return Stream(self, offset, how, method, token, timeout)

    def collect(self, offset=None, timeout=120, **attach):
        st = self.attach(offset, **attach)
        return st.collect(deadline=time.monotonic() + timeout)

    def start(self, timeout=120, **attach):
        return Job(self, timeout, **attach)

    def dp(self, method, path, body=None, token=None, headers=None):
        """A data-plane request for this session (path relative to /v1/sessions/<id>)."""
        hdrs = dict(headers or {})
        hdrs.update(bearer(self.token if token is None else token))
        resp = http_request(self.url, method, f"/v1/sessions/{self.id}{path}", body, hdrs)
        if resp.status >= 400:
            check_error(resp, f"{method} data {path}")
        return resp

    def get(self):
        """The session record from the control plane."""
        self.rec = self.api.session(self.sandbox_id, self.id)
        return self.rec

    def get_dp(self):
        resp = self.dp("GET", "")
        assert resp.status == 200, resp
        return check(resp.json, SESSION, "data GET session")

    def wait_running(self, timeout=60):
        deadline = time.monotonic() + timeout
        while True:
            rec = self.get()
            # The pid arrives from the agent a moment after the state turns running.
            if rec["state"] != "created" and (rec["state"] != "running" or rec["pid"] is not None):
                assert rec["state"] == "running", f"session did not start: {rec}"
                assert rec["pid"] is not None and rec["started_at"] is not None, rec
                return rec
            assert time.monotonic() < deadline, f"session not started after {timeout}s: {rec}"
            time.sleep(0.1)

    def wait_done(self, timeout=60):
        deadline = time.monotonic() + timeout
        while True:
            rec = self.get()
            if rec["state"] in ("exited", "failed"):
                return rec
            assert time.monotonic() < deadline, f"session not done after {timeout}s: {rec}"
            time.sleep(0.1)

    def send_stdin(self, data, close=False, expect=204):
        resp = self.dp("POST", "/stdin" + ("?close=1" if close else ""), bytes(data),
                       headers={"Content-Type": "application/octet-stream"})
        assert resp.status == expect, f"stdin: want {expect}, got {resp!r}"
        return resp

    def close_stdin(self, expect=204):
        resp = self.dp("POST", "/stdin/close", b"")
        assert resp.status == expect, f"stdin/close: want {expect}, got {resp!r}"
        return resp

    def signal(self, sig, expect=204):
        resp = self.dp("POST", "/signal", {"signal": sig})
        assert resp.status == expect, f"signal {sig}: want {expect}, got {resp!r}"
        return resp

    def new_token(self, ttl=None):
        body = {} if ttl is None else {"token_ttl_s": ttl}
        r = self.api.call("POST", f"/v1/sandboxes/{self.sandbox_id}/sessions/{self.id}/token",
                          "dp", body, expect=201)
        self._set_dp(r["data_plane"])
        return self.token


# ---------------------------------------------------------------------------
# Host processes


def pid_alive(pid):
    """True if pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def qemu_pids(sb_id):
    """Live QEMU processes whose command line names the sandbox (spaced passes the id as
    QEMU's -name, and it appears in its socket and disk paths)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        argv = cmdline(entry)
        if not argv or "qemu" not in os.path.basename(argv[0]):
            continue
        if any(sb_id in a for a in argv) and pid_alive(entry):
            found.append(int(entry))
    return found


def mounts_under(prefix):
    """Mount points at or below prefix in our mount namespace, deepest first."""
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].replace("\\040", " ")
            if point.startswith(prefix):
                points.append(point)
    return sorted(set(points), key=len, reverse=True)


def unmount_under(prefix):
    for point in mounts_under(prefix):
        subprocess.run(["umount", "-l", point], capture_output=True)


def own_cgroup(ctrl):
    """This process's cgroup path for a v1 controller (or v2 with ctrl None)."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            hid, ctrls, path = line.rstrip("\n").split(":", 2)
            if (ctrl is None and hid == "0" and ctrls == "") or (ctrl and ctrl in ctrls.split(",")):
                return path
    return None


def cgroup_scopes(scope):
    """The daemon's scope directories (spaced is our child: it shares our cgroups)."""
    import stat as _stat
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        roots = [("/sys/fs/cgroup", own_cgroup(None))]
    else:
        roots = [(f"/sys/fs/cgroup/{c}", own_cgroup(c)) for c in ("memory", "cpu", "pids")]
    out = []
    for mount, path in roots:
        if path is None:
            continue
        d = os.path.join(mount + path.rstrip("/"), scope) if path != "/" else os.path.join(mount, scope)
        if os.path.isdir(d):
            out.append(d)
    return out


def cgroup_leaves(scope):
    leaves = []
    for d in cgroup_scopes(scope):
        leaves += [os.path.join(d, e) for e in os.listdir(d) if os.path.isdir(os.path.join(d, e))]
    return leaves


def gw_procs():
    """(pid, argv) of every live space-gw."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/comm") as f:
                if f.read().strip() != "space-gw":
                    continue
        except OSError:
            continue
        out.append((int(d), cmdline(int(d))))
    return out


def gw_pids_under(netns_prefix):
    """Live space-gw processes whose --netns starts with netns_prefix."""
    return [pid for pid, args in gw_procs()
            if "--netns" in args and args.index("--netns") + 1 < len(args)
            and args[args.index("--netns") + 1].startswith(netns_prefix)]


def gw_pids(sb_id):
    """Live space-gw processes whose command line names the sandbox."""
    return [pid for pid, args in gw_procs() if sb_id in args]


def qemu_pid(sb_id):
    pids = qemu_pids(sb_id)
    assert len(pids) == 1, f"want one QEMU for {sb_id}, found {pids}"
    return pids[0]


def vm_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def free_ports(n):
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


# ---------------------------------------------------------------------------
# The daemon


def _newest_source_mtime(tops):
    newest = 0.0
    for top in tops:
        for dirpath, _, files in os.walk(os.path.join(REPO, top)):
            for f in files:
                if f.endswith((".c", ".h")):
                    newest = max(newest, os.stat(os.path.join(dirpath, f)).st_mtime)
    return newest


def check_binary(path):
    """The daemon binary must exist and be newer than every daemon source file: a stale
    build would test yesterday's code."""
    target = "san-bins" if path == SAN_SPACED else "bins"
    # spaced runs the space-memcvt and space-gw beside it. The converter links only part of
    # src/common, and make relinks it only when that part changes, so only its own folder
    # is compared.
    for p, tops in ((path, ("src/daemon", "src/common", "src/egress")),
                    (os.path.join(os.path.dirname(path), "space-memcvt"), ("src/memcvt",)),
                    (os.path.join(os.path.dirname(path), "space-gw"),
                     ("src/gateway", "src/egress", "src/common"))):
        assert os.access(p, os.X_OK), f"{p} is not built (run make {target})"
        assert os.stat(p).st_mtime >= _newest_source_mtime(tops), \
            f"{p} is older than the daemon's sources (run make {target})"


# What the sanitizer runtime is told. Reports go to files (log_path: <prefix>.<pid>) that
# Daemon.cleanup reads, not to the daemon log. UBSan stops at the first report (the build
# has -fno-sanitize-recover=undefined), ASan at the first error. LeakSanitizer runs at exit:
# on SIGTERM spaced frees its sandboxes and store and what it still holds is reachable, so a
# leak report there is a real leak and fails the test. The variables are inherited by QEMU,
# cp and space-memcvt: the runtime reaches spaced as a DT_NEEDED library of the sanitized
# binary (gcc links libasan.so/libubsan.so), not through LD_PRELOAD, so QEMU and cp, built
# without sanitizers, never load it and ignore the variables; space-memcvt is the sanitized
# build beside spaced and reports into the same files.
def sanitizer_env(prefix):
    common = f"log_path={prefix}:print_stacktrace=1:halt_on_error=1"
    return {
        "ASAN_OPTIONS": f"{common}:detect_leaks=1:abort_on_error=0:strict_string_checks=1"
                        ":detect_stack_use_after_return=1:check_initialization_order=1",
        "UBSAN_OPTIONS": common,
        "LSAN_OPTIONS": f"log_path={prefix}:print_suppressions=0",
    } if not os.environ.get("SPACE_TEST_ASAN_EXTRA") else {
        "ASAN_OPTIONS": f"{common}:detect_leaks=1:{os.environ['SPACE_TEST_ASAN_EXTRA']}",
        "UBSAN_OPTIONS": common,
        "LSAN_OPTIONS": f"log_path={prefix}:print_suppressions=0",
    }


def store_for_daemon(store):
    """SPACE_TEST_STORE (make test-postgres): the --store of one daemon. With a harness server
    (SPACE_TEST_PG_DIR, tests/pg/with-pg.sh) each daemon gets a database of its own, so that
    its counts and restarts see only its rows; otherwise the URL as it is."""
    pg_dir = os.environ.get("SPACE_TEST_PG_DIR")
    if not pg_dir or not store.startswith(("postgres://", "postgresql://")):
        return store
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "pgserver", os.path.join(os.path.dirname(__file__), "..", "pg", "pgserver.py"))
    pgserver = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pgserver)
    return pgserver.PgServer(pg_dir).create_database("e2e_" + secrets.token_hex(6))


def guest_script(name):
    """tests/e2e/guest/NAME with agentport.py (what the hostile-agent programs share) before it,
    as one program for `python3 -c` in a guest."""
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "guest")
    with open(os.path.join(here, "agentport.py")) as a, open(os.path.join(here, name)) as b:
        return a.read() + "\n\n" + b.read()


PEER_HEADER = "X-Space-Cluster-Key"


def cluster_key_file(dirpath):
    """A cluster's credential (--cluster-key-file), mode 600 in dirpath: (path, key)."""
    key = secrets.token_hex(24)
    path = os.path.join(dirpath, "cluster-key")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key + "\n")
    return path, key


class Daemon:
    """One spaced on loopback. Every instance alive is in Daemon.running (for log dumps)."""

    running = []

    def __init__(self, name="spaced", extra_args=(), templates_dir=TEMPLATES_DIR, env=None):
        self.name = name
        self.extra_env = dict(env or {})  # on top of the test's own environment
        self.root = tempfile.mkdtemp(prefix="space-e2e-")
        self.state_dir = os.path.join(self.root, "state")
        os.mkdir(self.state_dir)
        self.log_path = os.path.join(self.root, "spaced.log")
        self.api_key = "e2b_" + secrets.token_hex(20)  # the form E2B's SDKs check (what spaced generates)
        self.port, self.data_port = free_ports(2)
        self.url = f"http://127.0.0.1:{self.port}"
        self.data_url = f"http://127.0.0.1:{self.data_port}"
        self.templates_dir = templates_dir
        self.extra_args = list(extra_args)
        # Sandboxes' gateways resolve names upstream (E2B's default policy resolves any name):
        # a test daemon's ask loopback's discard port, where nothing answers, unless the test
        # names its own lab's DNS. No query from a test leaves this machine.
        if "--dns-upstream" not in self.extra_args:
            self.extra_args += ["--dns-upstream", "127.0.0.1:9"]
        accel = os.environ.get("SPACE_TEST_ACCEL")
        if accel and "--accel" not in self.extra_args:
            self.extra_args += ["--accel", accel]
        store = os.environ.get("SPACE_TEST_STORE")
        if store and "--store" not in self.extra_args:
            self.extra_args += ["--store", store_for_daemon(store)]
        self.proc = None
        self.sandbox_ids = set()
        self.api = Api(self.url, self.api_key, self)
        self.binary = SPACED
        self.san_prefix = os.path.join(self.root, "sanitizer")
        # Exit statuses of stops a test did not ask for (cleanup reports them).
        self.unexpected_exits = []

    def serve_tls(self, cert, key, ca):
        """Both listeners over TLS (--tls-cert/--tls-key); this test verifies them with ca."""
        self.extra_args += ["--tls-cert", cert, "--tls-key", key]
        self.url = self.url.replace("http://", "https://")
        self.data_url = self.data_url.replace("http://", "https://")
        self.api = Api(self.url, self.api_key, self)
        for url in (self.url, self.data_url):
            TLS_CAS[split_url(url)] = ca

    def as_peer(self, key):
        """Requests from this test to the daemon (a node) carry the cluster's credential, as an
        api process's relays do."""
        for url in (self.url, self.data_url):
            PEER_HEADERS[split_url(url)] = {PEER_HEADER: key}

    def argv(self):
        return [self.binary, "--listen", f"127.0.0.1:{self.port}",
                "--data-listen", f"127.0.0.1:{self.data_port}",
                "--state-dir", self.state_dir, "--api-key", self.api_key,
                "--templates-dir", self.templates_dir] + self.extra_args

    def start(self, timeout=START_TIMEOUT):
        check_binary(self.binary)
        assert os.path.isdir(self.templates_dir), f"{self.templates_dir} missing (run make)"
        env = dict(os.environ, **self.extra_env)
        if self.binary == SAN_SPACED:
            env.update(sanitizer_env(self.san_prefix))
        with open(self.log_path, "ab") as log:
            shown = " ".join(self.argv()).replace(self.api_key, "<api key>")
            log.write(f"---- test framework: start {shown}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, cwd=self.root, env=env)
        if self not in Daemon.running:
            Daemon.running.append(self)
        deadline = time.monotonic() + timeout
        while True:
            rc = self.proc.poll()
            assert rc is None, f"spaced exited with {rc} at start:\n{self.log_tail()}"
            try:
                resp = http_request(self.url, "GET", "/v1/info", headers=bearer(self.api_key),
                                    timeout=5)
                if resp.status == 200:
                    check(resp.json, INFO, "GET /v1/info")
                    return self
            except (OSError, http.client.HTTPException):
                pass
            assert time.monotonic() < deadline, \
                f"spaced not answering after {timeout}s:\n{self.log_tail()}"
            time.sleep(0.1)

    def stop(self, sig=_signal.SIGTERM, timeout=60):
        """Signals the daemon (only it: QEMUs must outlive it) and reaps it. Returns its
        exit status; SIGKILL after `timeout` if a SIGTERM was not enough. A daemon found dead
        before the signal, or one that does not exit 0 on SIGTERM, is recorded and fails
        cleanup(). (A test that kills the daemon on purpose uses kill().)"""
        if self.proc is None:
            return None
        if self.proc.poll() is not None:
            self.unexpected_exits.append(f"spaced (pid {self.proc.pid}) had exited with "
                                         f"{self.proc.returncode} before it was stopped")
        else:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self.proc = None
                raise AssertionError(f"spaced ignored signal {sig} for {timeout}s")
            if sig in (_signal.SIGTERM, _signal.SIGINT) and self.proc.returncode != 0:
                self.unexpected_exits.append(f"spaced (pid {self.proc.pid}) exited with "
                                             f"{self.proc.returncode} on signal {sig}, not 0")
        rc = self.proc.returncode
        self.proc = None
        return rc

    def kill(self):
        """SIGKILL, on purpose (a crash the test simulates), and reap."""
        assert self.proc is not None and self.proc.poll() is None, "spaced is not running"
        self.proc.kill()
        self.proc.wait()
        self.proc = None

    def restart(self, sig=_signal.SIGTERM, timeout=START_TIMEOUT):
        """Stops with `sig` and starts again on the same state dir, ports and key."""
        self.stop(sig)
        return self.start(timeout)

    def log_tail(self, lines=60):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 64 * 1024))
                text = f.read().decode(errors="replace")
        except OSError as e:
            return f"(no log: {e})"
        return "\n".join(text.splitlines()[-lines:])

    def state_tag(self):
        """The daemon's name for its tmpfs and socket directories (paths.c)."""
        import hashlib
        return hashlib.sha256(os.path.realpath(self.state_dir).encode()).hexdigest()[:16]

    def own_qemu_pids(self):
        """Every QEMU this daemon started (its log names each), still alive."""
        try:
            text = self.log_text()
        except OSError:
            return []
        pids = []
        for m in re.finditer(r"vm (sb-[0-9a-f]{16}): qemu pid (\d+) started", text):
            pid = int(m.group(2))
            args = cmdline(pid)
            if args and "qemu" in args[0] and f"guest={m.group(1)}" in " ".join(args):
                pids.append(pid)
        return pids

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def new_sanitizer_reports(self):
        """The reports not seen by an earlier call (conftest checks after every test, so a
        report is blamed on the test during which it appeared)."""
        seen = getattr(self, "_seen_reports", set())
        out = {p: t for p, t in self.sanitizer_reports().items() if p not in seen}
        self._seen_reports = seen | set(out)
        return out

    def sanitizer_reports(self):
        """{path: text} of every report the sanitizer runtime wrote (one file per pid)."""
        out = {}
        d, base = os.path.split(self.san_prefix)
        try:
            names = sorted(os.listdir(d))
        except OSError:
            return out
        for n in names:
            if n.startswith(base + "."):
                with open(os.path.join(d, n), "rb") as f:
                    text = f.read().decode(errors="replace")
                if text.strip():
                    out[os.path.join(d, n)] = text
        return out

    def cleanup(self):
        """Deletes what is left, stops the daemon, kills stray QEMUs of our sandboxes, removes
        the temp dir (kept if SPACE_TEST_KEEP is set, or when something was wrong).
        Everything is cleaned first; then, if anything went wrong on the way (a delete that
        did not succeed, a daemon that had crashed or did not exit 0, a QEMU that outlived its
        deleted sandbox, a sanitizer report), it raises AssertionError naming all of it."""
        problems = list(self.unexpected_exits)
        deleted = set()
        if self.proc is not None and self.proc.poll() is None:
            ops = {}
            try:
                for sb in self.api.sandboxes():
                    self.sandbox_ids.add(sb["id"])
                    if sb["state"] in ("deleting", "deleted"):
                        continue
                    try:
                        ops[sb["id"]] = self.api.delete_sandbox(sb["id"])[1]["id"]
                    except AssertionError as e:
                        problems.append(f"delete {sb['id']} (state {sb['state']}): {e}")
                for sb_id, op in ops.items():
                    try:
                        got = self.api.wait_op(op, timeout=60)
                        if got["state"] != "succeeded":
                            problems.append(f"delete {sb_id} ended {got['state']}: {got['error']}")
                        else:
                            deleted.add(sb_id)
                    except AssertionError as e:
                        problems.append(f"delete {sb_id}: {e}")
            except (AssertionError, OSError, http.client.HTTPException) as e:
                problems.append(f"listing sandboxes at teardown: {e!r}")
        seen = len(self.unexpected_exits)
        try:
            self.stop()
        except AssertionError as e:
            problems.append(str(e))
        problems += self.unexpected_exits[seen:]
        for sb_id in self.sandbox_ids:
            for pid in qemu_pids(sb_id):
                if sb_id in deleted:
                    problems.append(f"QEMU pid {pid} of deleted sandbox {sb_id} still running")
                try:
                    os.kill(pid, _signal.SIGKILL)
                except OSError:
                    pass
        # The daemon's VMs that no client saw (warm pools, ready-snapshot builders): they
        # outlive the daemon by design (adopted at the next start), so they are not a leak.
        for pid in self.own_qemu_pids():
            try:
                os.kill(pid, _signal.SIGKILL)
            except OSError:
                pass
        # Their egress gateways and network namespaces outlive it the same way.
        prefix = f"/run/netns/space-{self.state_tag()}-"
        for pid in gw_pids_under(prefix):
            try:
                os.kill(pid, _signal.SIGKILL)
            except OSError:
                pass
        for name in (os.listdir("/run/netns") if os.path.isdir("/run/netns") else []):
            path = "/run/netns/" + name
            if path.startswith(prefix):
                subprocess.run(["umount", "-l", path], capture_output=True)
                try:
                    os.unlink(path)
                except OSError:
                    pass
        # Ready and fork snapshots live on tmpfs and outlive the daemon (a restart reuses
        # them); a test daemon's go with it, and so do its socket directories.
        shutil.rmtree(f"/dev/shm/space-{self.state_tag()}", ignore_errors=True)
        # Jail roots of VMs killed behind the daemon's back stay mounted: unmount them
        # before removing anything under them, and remove the VMs' cgroup leaves.
        unmount_under(f"/run/space/{self.state_tag()}/")
        shutil.rmtree(f"/run/space/{self.state_tag()}", ignore_errors=True)
        for leaf in cgroup_leaves(f"space-{self.state_tag()}"):
            try:
                os.rmdir(leaf)
            except OSError:
                pass
        for scope in cgroup_scopes(f"space-{self.state_tag()}"):
            try:
                os.rmdir(scope)
            except OSError:
                pass
        if self in Daemon.running:
            Daemon.running.remove(self)
        for path, text in self.new_sanitizer_reports().items():
            problems.append(f"sanitizer report {path}:\n{text[:20000]}")
        if problems:
            raise AssertionError(f"{self.name} teardown ({self.root} kept):\n" +
                                 "\n".join(problems) + f"\n---- log tail:\n{self.log_tail(40)}")
        if not os.environ.get("SPACE_TEST_KEEP"):
            shutil.rmtree(self.root, ignore_errors=True)


def spacectl(daemon, *args, env=None, timeout=120, **kw):
    """Runs the CLI against daemon; returns CompletedProcess (text)."""
    e = dict(os.environ)
    e.update({"SPACE_URL": daemon.url, "SPACE_API_KEY": daemon.api_key})
    e.update(env or {})
    return subprocess.run([SPACECTL, *args], env=e, capture_output=True, text=True,
                          timeout=timeout, **kw)
