"""The blocking client: :class:`Client` and the handles it gives out.

Every call is one or more HTTP requests made in the calling thread (http.client, a fresh
connection each). A command started with :meth:`Commands.start` is followed by a background
thread, which calls its callbacks; :meth:`Commands.run` follows it in the calling thread.
"""

import json
import os
import socket
import tarfile
import threading
import time

from . import _api
from ._config import resolve
from ._http import Transport, q
from ._sse import Parser
from ._stream import OutputState
from .errors import (CommandError, CommandTimeout, Conflict, ConnectionFailed, NotFound, OperationFailed,
                     Timeout, Unauthorized, Unavailable)
from .records import (CommandResult, Delivery, Entry, EventPage, FsEvent, LifecycleEvent, Operation,
                      PortToken, SandboxInfo, Secret, SessionInfo, Snapshot, Template, Webhook)

__all__ = ["Client", "Sandboxes", "Sandbox", "Operations", "Commands", "Command", "Files", "Watch",
           "Ports", "Snapshots", "Secrets", "Templates", "Events", "Webhooks", "verify_signature"]

OPERATION_TIMEOUT = 300.0
MAX_RECONNECTS = 8


class Client:
    """A connection to SPACE's control plane.

    ``Client(url=None, api_key=None, api_key_file=None, timeout=60.0)``: ``url`` defaults to
    ``SPACE_URL`` (else ``http://127.0.0.1:7070``); the key to ``api_key``, else the first line
    of ``api_key_file``, else ``SPACE_API_KEY``, else the file named by ``SPACE_API_KEY_FILE``
    (a key file must be a regular file of this user or root with no access for others, as for
    spacectl). ``timeout``: seconds for each request's connection and answer.
    ``operation_timeout``: how long an awaited operation may take (default 300 s).
    ``ssl_context``: for an ``https://`` daemon with its own CA.

    Resources: :attr:`sandboxes`, :attr:`snapshots`, :attr:`secrets`, :attr:`templates`,
    :attr:`operations`.
    """

    def __init__(self, url=None, api_key=None, api_key_file=None, timeout=60.0,
                 operation_timeout=OPERATION_TIMEOUT, ssl_context=None):
        self.url, key = resolve(url, api_key, api_key_file)
        self.transport = Transport(self.url, key, timeout, ssl_context)
        self.operation_timeout = operation_timeout
        self.sandboxes = Sandboxes(self)
        self.operations = Operations(self)
        self.snapshots = Snapshots(self)
        self.secrets = Secrets(self)
        self.templates = Templates(self)
        self.events = Events(self)
        self.webhooks = Webhooks(self)

    def info(self):
        """``GET /v1/info``: version, accelerator, data-plane URL, capacity."""
        return self.transport.json("GET", "/v1/info")

    def __repr__(self):
        return f"Client({self.url!r})"


class Operations:
    """Lifecycle operations (``op-...``): every verb of a sandbox starts one."""

    def __init__(self, client):
        self._c = client

    def get(self, op_id, wait=None):
        """The operation; ``wait`` (0..60 s) long-polls until it is done or the wait is over."""
        t = self._c.transport
        query = {"wait": int(wait)} if wait is not None else None
        return Operation(t.json("GET", f"/v1/operations/{q(op_id)}", query=query,
                                timeout=t.timeout + (wait or 0)))

    def wait(self, op_id, timeout=None, check=True):
        """Long-polls until the operation is done and returns it; with ``check`` (default) a
        failed one raises :class:`~space.OperationFailed`. :class:`~space.Timeout` after
        ``timeout`` seconds (default the client's ``operation_timeout``)."""
        timeout = self._c.operation_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            op = self.get(op_id, wait=max(0, min(30, int(left))))
            if op.done:
                if check and op.state == "failed":
                    raise OperationFailed(op)
                return op
            if time.monotonic() >= deadline:
                raise Timeout(f"operation {op_id} ({op.get('kind')}) still {op.state} after {timeout}s")


class Sandboxes:
    """Create, find and delete sandboxes: ``client.sandboxes``."""

    def __init__(self, client):
        self._c = client

    def create(self, template=None, *, snapshot=None, vcpus=None, memory_mib=None, env=None,
               metadata=None, timeout_s=None, on_timeout=None, network=None, wait=True,
               timeout=None):
        """Creates a sandbox from ``template`` (default ``"base"``) or from a named
        ``snapshot``, and (``wait``, the default) waits until it runs. Returns a
        :class:`Sandbox`. ``timeout_s``: its lifetime (0 = never); ``on_timeout``:
        ``"delete"``, ``"suspend"`` or ``"suspend_idle"``; ``network``: its egress policy
        (``{"allow": [...], "deny": [...], "inject": [...]}``). Raises
        :class:`~space.OperationFailed` if it could not start, :class:`~space.AtCapacity`
        when there is no room."""
        body = _api.create_body(template, snapshot, vcpus=vcpus, memory_mib=memory_mib, env=env,
                                metadata=metadata, timeout_s=timeout_s, on_timeout=on_timeout,
                                network=network)
        r = self._c.transport.json("POST", "/v1/sandboxes", json=body)
        sb = Sandbox(self._c, r["sandbox"], Operation(r["operation"]))
        if wait:
            sb.operation = self._c.operations.wait(r["operation"]["id"], timeout)
            sb.refresh()
        return sb

    def get(self, sandbox_id):
        """The sandbox with this id (a deleted one too, in state ``deleted``);
        :class:`~space.NotFound` if there is none."""
        return Sandbox(self._c, self._c.transport.json("GET", f"/v1/sandboxes/{q(sandbox_id)}"))

    connect = get

    def list(self, state=None, metadata=None):
        """Sandboxes, every state but ``deleted`` unless ``state`` (a name or a list) says
        otherwise; ``metadata``: ``{key: value}`` that must all match."""
        query = {}
        if state:
            query["state"] = state if isinstance(state, str) else ",".join(state)
        for k, v in (metadata or {}).items():
            query[f"metadata.{k}"] = v
        r = self._c.transport.json("GET", "/v1/sandboxes", query=query)
        return [Sandbox(self._c, rec) for rec in r["sandboxes"]]

    def delete(self, sandbox_id, wait=True):
        """Deletes a sandbox (cancelling what is in flight); returns the delete operation,
        awaited unless ``wait`` is false."""
        r = self._c.transport.json("DELETE", f"/v1/sandboxes/{q(sandbox_id)}")
        op = Operation(r["operation"])
        return self._c.operations.wait(op.id) if wait else op


class Sandbox:
    """One sandbox. ``id``; ``info`` (its :class:`~space.SandboxInfo` as last seen;
    :meth:`refresh` reads it again); ``state``; and its parts: :attr:`commands`,
    :attr:`files`, :attr:`ports`. Every lifecycle verb waits for its operation unless
    given ``wait=False`` and returns the :class:`~space.Operation`. A context manager that
    deletes the sandbox on exit."""

    def __init__(self, client, info, operation=None):
        self.client = client
        self.info = SandboxInfo(info)
        self.id = self.info["id"]
        self.operation = operation
        self.commands = Commands(self)
        self.files = Files(self)
        self.ports = Ports(self)

    def __repr__(self):
        return f"Sandbox({self.id!r}, state={self.state!r})"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.delete()
        except NotFound:
            pass

    @property
    def state(self):
        """The state as last seen (see :meth:`refresh`)."""
        return self.info.get("state")

    @property
    def network(self):
        """Its egress policy as last seen."""
        return self.info.get("network")

    def _t(self):
        return self.client.transport

    def _path(self, rest=""):
        return f"/v1/sandboxes/{q(self.id)}{rest}"

    def refresh(self):
        """Reads the sandbox's record again; returns it."""
        self.info = SandboxInfo(self._t().json("GET", self._path()))
        return self.info

    def _verb(self, verb, body=None, wait=True, timeout=None):
        r = self._t().json("POST", self._path(f"/{verb}"), json=body or {})
        if r.get("sandbox"):
            self.info = SandboxInfo(r["sandbox"])
        op = Operation(r["operation"]) if r.get("operation") else None
        if op is not None and wait:
            op = self.client.operations.wait(op.id, timeout)
            self.refresh()
        return op

    def pause(self, wait=True):
        """Stops the vCPUs; memory stays. Running -> paused."""
        return self._verb("pause", wait=wait)

    def resume(self, wait=True):
        """Paused -> running (the guest's clock is set again)."""
        return self._verb("resume", wait=wait)

    def suspend(self, wait=True):
        """Memory and devices to disk, the VM ends. Running or paused -> suspended."""
        return self._verb("suspend", wait=wait)

    def restore(self, wait=True):
        """Suspended -> running, exactly as it was (processes, sessions, offsets)."""
        return self._verb("restore", wait=wait)

    def stop(self, wait=True):
        """A clean shutdown; the disk is kept. -> stopped."""
        return self._verb("stop", wait=wait)

    def start(self, wait=True):
        """Stopped -> running (boots the kept disk)."""
        return self._verb("start", wait=wait)

    def wake(self, wait=True):
        """Whichever of resume, restore or start applies; ``None`` if it already runs."""
        return self._verb("wake", wait=wait)

    def fork(self, count=1, wait=True):
        """``count`` copies of this sandbox (memory and disk at one instant). Returns the
        children as :class:`Sandbox` objects, running once the fork is awaited."""
        r = self._t().json("POST", self._path("/fork"), json={"count": int(count)})
        if wait:
            self.client.operations.wait(r["operation"]["id"])
        return [self.client.sandboxes.get(c) for c in r["children"]]

    def snapshot(self, name, wait=True):
        """A named snapshot of memory and disk that outlives the sandbox (create from it with
        ``sandboxes.create(snapshot=name)``). Returns the :class:`~space.Snapshot`."""
        r = self._t().json("POST", self._path("/snapshots"), json={"name": name})
        snap = Snapshot(r.get("snapshot") or {})
        if wait:
            op = self.client.operations.wait(r["operation"]["id"])
            sid = (op.get("result") or {}).get("snapshot_id") or snap.get("id") or name
            snap = self.client.snapshots.get(sid)
        return snap

    def set_timeout(self, timeout_s, on_timeout=None):
        """Its lifetime from now (0 = never) and, optionally, what then happens
        (``"delete"``, ``"suspend"``, ``"suspend_idle"``). Returns the new record."""
        body = _api.drop_none(timeout_s=int(timeout_s), on_timeout=on_timeout)
        self.info = SandboxInfo(self._t().json("POST", self._path("/timeout"), json=body))
        return self.info

    def set_network(self, policy=None, *, allow=None, deny=None, inject=None):
        """Replaces its egress policy (``allow``, ``deny`` lists; ``inject`` rules naming
        secrets); returns the policy as the daemon normalised it."""
        body = _api.network_body(policy, allow, deny, inject)
        return self._t().json("PUT", self._path("/network"), json=body)

    def egress(self, limit=None):
        """What its gateway decided, newest last (a list of records)."""
        return self._t().json("GET", self._path("/egress"), query={"limit": limit})["records"]

    def logs(self):
        """The guest console (text)."""
        return self._t().request("GET", self._path("/logs")).body.decode("utf-8", "replace")

    def files_token(self, ttl_s=None):
        """A data-plane token that opens this sandbox's files routes and nothing else (for a
        browser or another program): ``{"token", "url", "expires_at", ...}``."""
        body = _api.drop_none(scope="files", ttl_s=ttl_s)
        return self._t().json("POST", self._path("/tokens"), json=body)

    def delete(self, wait=True):
        """Deletes the sandbox; returns the delete operation (awaited unless ``wait`` is false)."""
        op = self.client.sandboxes.delete(self.id, wait=wait)
        if wait:
            self.info = SandboxInfo(dict(self.info, state="deleted"))
        return op

    def run(self, cmd, **kw):
        """Shorthand for :meth:`Commands.run`: runs ``cmd`` to its end, returns a
        :class:`~space.CommandResult`."""
        return self.commands.run(cmd, **kw)


class Commands:
    """Commands in one sandbox: ``sandbox.commands``. A command is a list of strings (argv)
    or a string, run by ``/bin/sh -c``."""

    def __init__(self, sandbox):
        self.sandbox = sandbox

    def _create(self, cmd, env, cwd, user, stdin, pty, token_ttl_s):
        body = _api.session_body(cmd, env, cwd, user, stdin, pty, token_ttl_s)
        r = self.sandbox._t().json("POST", self.sandbox._path("/sessions"), json=body)
        return r["session"], r["data_plane"]

    def run(self, cmd, *, env=None, cwd=None, user=None, stdin=None, pty=None, timeout=None,
            on_stdout=None, on_stderr=None, check=False):
        """Runs a command to its end and returns its :class:`~space.CommandResult`.

        ``stdin``: bytes or str written to it, then closed (none: it reads end of file).
        ``pty``: ``True``, ``(rows, cols)`` or ``{"rows", "cols"}`` for a terminal.
        ``on_stdout`` / ``on_stderr``: called with each piece of output as text while it
        runs (in this thread). ``timeout``: seconds; past it the command is killed and
        :class:`~space.CommandTimeout` raised. ``check``: raise
        :class:`~space.CommandError` unless it exits 0. A command that could not start (or
        whose sandbox failed) raises :class:`~space.CommandError`. The stream resumes by
        itself after a dropped connection."""
        rec, dp = self._create(cmd, env, cwd, user, stdin is not None, pty, None)
        c = Command(self.sandbox, rec, dp, on_stdout, on_stderr)
        if stdin is not None:
            c.send_stdin(stdin, close=True)  # queued until the process starts
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            c._follow(deadline)
        except Timeout:
            try:
                c.kill()
                c._follow(time.monotonic() + 10)  # its end, so that the result shows the kill
            except (Conflict, Unavailable, Timeout, ConnectionFailed):
                pass
            raise CommandTimeout(f"command {c.id} ran past {timeout}s; killed", c.result) from None
        return c._finish(check)

    def start(self, cmd, *, env=None, cwd=None, user=None, stdin=False, pty=None,
              on_stdout=None, on_stderr=None, token_ttl_s=None):
        """Starts a command and returns its :class:`Command` at once; a background thread
        follows its output (calling ``on_stdout`` / ``on_stderr`` as it comes, resuming
        after a dropped connection). ``stdin=True`` keeps its stdin open for
        :meth:`Command.send_stdin`; a ``pty`` always has stdin."""
        rec, dp = self._create(cmd, env, cwd, user, stdin, pty, token_ttl_s)
        c = Command(self.sandbox, rec, dp, on_stdout, on_stderr)
        c._start_thread()
        return c

    def connect(self, session_id, *, offset=0, on_stdout=None, on_stderr=None):
        """Follows a command started before (by this program or another) from output offset
        ``offset`` (0: all output still kept): a :class:`Command`, followed in the
        background like one from :meth:`start`."""
        rec = self.get(session_id)
        c = Command(self.sandbox, rec, None, on_stdout, on_stderr, offset=offset)
        c.refresh_token()
        c._start_thread()
        return c

    def list(self):
        """Every session of the sandbox (:class:`~space.SessionInfo`)."""
        r = self.sandbox._t().json("GET", self.sandbox._path("/sessions"))
        return [SessionInfo(s) for s in r["sessions"]]

    def get(self, session_id):
        """One session's record."""
        return SessionInfo(self.sandbox._t().json("GET", self.sandbox._path(f"/sessions/{q(session_id)}")))


class Command:
    """A running (or finished) command: ``id`` (``ss-...``), ``sandbox``, ``offset`` (output
    bytes received), ``result`` (a :class:`~space.CommandResult`, filled as output comes),
    ``done``. Send it input, signals and terminal sizes; :meth:`wait` for its end."""

    def __init__(self, sandbox, rec, dp, on_stdout, on_stderr, offset=0):
        self.sandbox = sandbox
        self.record = SessionInfo(rec)
        self.id = self.record["id"]
        self.result = CommandResult(self.id)
        self.result.offset = offset
        self._state = OutputState(self.result, on_stdout, on_stderr, offset)
        self._dp = dp
        self._lock = threading.Lock()
        self._token_lock = threading.Lock()
        self._stream = None
        self._detached = False
        self._thread = None
        self._exc = None
        self.reconnects = 0

    def __repr__(self):
        return f"Command({self.id!r}, offset={self.offset}, done={self.done})"

    @property
    def offset(self):
        return self._state.offset

    @property
    def done(self):
        return self._state.done

    # -- the data plane
    def refresh_token(self, ttl_s=None):
        """A fresh data-plane token for this session (the previous one stops working)."""
        body = _api.drop_none(token_ttl_s=ttl_s)
        r = self.sandbox._t().json("POST", self.sandbox._path(f"/sessions/{q(self.id)}/token"), json=body)
        self._dp = r["data_plane"]
        return self._dp

    def _dp_request(self, method, rest, **kw):
        t = self.sandbox._t()
        for attempt in (0, 1):
            dp = self._dp
            try:
                return t.request(method, f"/v1/sessions/{q(self.id)}{rest}", base=dp["url"],
                                 token=dp["token"], **kw)
            except Unauthorized:
                if attempt:
                    raise
                self._renew(dp)  # expired (e.g. across a long suspend): once more

    def _renew(self, used):
        """A new token unless another thread already replaced the one that failed."""
        with self._token_lock:
            if self._dp is used:
                self.refresh_token()

    def send_stdin(self, data, close=False):
        """Writes bytes (or str, as UTF-8) to its stdin; ``close`` closes stdin after them.
        Retries while the daemon's queue for it is full."""
        chunks = _api.stdin_chunks(data)
        for i, chunk in enumerate(chunks):
            last = i == len(chunks) - 1
            query = {"close": 1} if close and last else None
            for attempt in range(100):
                try:
                    self._dp_request("POST", "/stdin", body=chunk, query=query)
                    break
                except Unavailable:
                    if attempt == 99:
                        raise
                    time.sleep(min(0.05 * (attempt + 1), 1.0))

    def close_stdin(self):
        """Closes its stdin (a PTY gets ^D)."""
        self._dp_request("POST", "/stdin/close", body=b"")

    def signal(self, sig):
        """Sends a signal: a number or a name (``"SIGTERM"``, ``"INT"``). The process must
        be running (:class:`~space.Conflict` otherwise)."""
        self._dp_request("POST", "/signal", json={"signal": _api.signal_value(sig)})

    def kill(self):
        """SIGKILL."""
        self.signal(9)

    def resize(self, rows, cols):
        """A PTY's new size (its foreground process gets SIGWINCH)."""
        self._dp_request("POST", "/resize", json={"rows": int(rows), "cols": int(cols)})

    def info(self):
        """The session's record now (state, pid, exit code, output offsets)."""
        self.record = self.sandbox.commands.get(self.id)
        return self.record

    def wait_started(self, timeout=60.0):
        """Waits until the process runs (has a pid) or has ended; returns the record."""
        deadline = time.monotonic() + timeout
        while True:
            rec = self.info()
            if rec.get("pid") is not None or rec.get("state") in ("exited", "failed"):
                return rec
            if time.monotonic() >= deadline:
                raise Timeout(f"command {self.id} not started after {timeout}s")
            time.sleep(0.05)

    # -- following the output
    def _attach(self):
        headers = {"Accept": "text/event-stream"}
        if self._state.offset:
            headers["Last-Event-ID"] = str(self._state.offset)
        t = self.sandbox._t()
        return t.stream("POST", f"/v1/sessions/{q(self.id)}/attach", base=self._dp["url"],
                        token=self._dp["token"], headers=headers)

    def _follow(self, deadline=None):
        """Reads events until the command ends (or :meth:`disconnect`), reconnecting from
        the last offset after a dropped connection."""
        failures = 0
        while not self._state.done and not self._detached:
            used = self._dp
            try:
                st = self._attach()
            except Unauthorized:
                failures += 1
                if failures > 2:
                    raise
                self._renew(used)
                continue
            except (ConnectionFailed, Unavailable, Timeout):
                failures += 1
                if failures > MAX_RECONNECTS:
                    raise
                time.sleep(min(0.1 * 2 ** failures, 2.0))
                continue
            with self._lock:
                self._stream = st
            try:
                progressed = self._read(st, deadline)
            finally:
                with self._lock:
                    self._stream = None
                st.close()
            if self._state.done or self._detached:
                break
            failures = 0 if progressed else failures + 1
            if failures > MAX_RECONNECTS:
                raise ConnectionFailed(f"command {self.id}: the output stream keeps failing")
            self.reconnects += 1
            if failures:
                time.sleep(min(0.1 * 2 ** failures, 2.0))

    def _read(self, st, deadline):
        parser = Parser()
        start = self._state.offset
        got_event = False
        while not self._detached:
            wait = 45.0  # the daemon sends a keepalive every 15 s
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    raise Timeout("deadline")
            st.settimeout(wait)
            try:
                chunk = st.read()
            except socket.timeout:
                if deadline is not None and time.monotonic() >= deadline:
                    raise Timeout("deadline") from None
                break  # silent too long: reconnect
            except ConnectionFailed:
                break
            if not chunk:
                break
            for ev in parser.feed(chunk):
                got_event = True
                for fn, text in self._state.handle(ev):
                    fn(text)
                if self._state.done:
                    return True
        return got_event or self._state.offset > start

    def _start_thread(self):
        def run():
            try:
                self._follow()
            except BaseException as e:  # handed to wait()
                self._exc = e
        self._thread = threading.Thread(target=run, name=f"space-{self.id}", daemon=True)
        self._thread.start()

    def _finish(self, check):
        r = self.result
        if r.error is not None and not r.exited:
            raise CommandError(f"command {self.id}: {r.error}", r)
        if check and r.exit_code != 0:
            raise CommandError(f"command {self.id} exited with {r.exit_code}"
                               f"{'' if r.signal is None else f' (signal {r.signal})'}", r)
        return r

    def wait(self, timeout=None, check=False):
        """Waits for the command's end and returns its :class:`~space.CommandResult`
        (:class:`~space.Timeout` after ``timeout`` seconds; the command runs on).
        ``check``: raise :class:`~space.CommandError` unless it exited 0."""
        if self._thread is None:
            self._follow(None if timeout is None else time.monotonic() + timeout)
        else:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise Timeout(f"command {self.id} still running after {timeout}s")
        if self._exc is not None:
            raise self._exc
        return self._finish(check)

    def reconnect(self):
        """Drops the current output connection; the follower resumes from the last offset
        on a new one (as it does when the network drops it)."""
        with self._lock:
            if self._stream is not None:
                self._stream.abort()

    def disconnect(self):
        """Stops following the output; the command runs on. Returns the offset reached, for
        :meth:`Commands.connect` later."""
        self._detached = True
        self.reconnect()
        if self._thread is not None:
            self._thread.join(30)
        return self._state.offset


class Files:
    """Files of one sandbox: ``sandbox.files``. Paths are absolute; each call runs in the
    guest as ``user`` (default: the template's default user) with the guest's own
    permissions. Errors are typed: :class:`~space.NotFound`,
    :class:`~space.AlreadyExists`, :class:`~space.PermissionDenied`,
    :class:`~space.IsADirectory`, ..."""

    def __init__(self, sandbox, user=None):
        self.sandbox = sandbox
        self.user = user

    def as_user(self, user):
        """The same files seen as another user: ``sb.files.as_user("root").read(...)``."""
        return Files(self.sandbox, user)

    def _t(self):
        return self.sandbox._t()

    def _p(self, rest=""):
        return self.sandbox._path("/files" + rest)

    def _query(self, path, user, **extra):
        return _api.files_query(path, user or self.user, **extra)

    def read(self, path, *, offset=None, length=None, user=None):
        """The file's bytes (``offset`` / ``length``: a part of it)."""
        query = self._query(path, user, offset=offset, length=length)
        return self._t().request("GET", self._p(), query=query, timeout=600).body

    def read_text(self, path, encoding="utf-8", user=None):
        """The file as text."""
        return self.read(path, user=user).decode(encoding)

    def download(self, path, dest, *, user=None):
        """Streams the file into ``dest`` (a binary file object, or a local path); returns the
        bytes written."""
        return self._download(self._p(), self._query(path, user), dest)

    def _download(self, route, query, dest):
        own = isinstance(dest, (str, os.PathLike))
        f = open(dest, "wb") if own else dest
        n = 0
        try:
            with self._t().stream("GET", route, query=query, timeout=600) as st:
                while True:
                    chunk = st.read(1 << 20)
                    if not chunk:
                        break
                    f.write(chunk)
                    n += len(chunk)
                length = st.headers.get("Content-Length")
                if length is not None and int(length) != n:
                    raise ConnectionFailed(f"{query['path']}: {n} of {length} bytes arrived")
        finally:
            if own:
                f.close()
        return n

    def write(self, path, data, *, mode=None, parents=False, user=None):
        """Writes the whole file atomically (readers see the old file or the new one).
        ``data``: bytes, str (UTF-8) or a binary file object (streamed). ``mode``: e.g.
        ``0o600`` (default: kept for a replaced file, else 0644); ``parents``: make missing
        directories. Returns ``{"path", "size"}``."""
        query = self._query(path, user, mode=_api.mode_str(mode), parents=bool(parents))
        return self._t().json("PUT", self._p(), query=query, body=data, timeout=600)

    def upload(self, local_path, path, **kw):
        """Streams a local file to ``path`` (options as for :meth:`write`)."""
        with open(local_path, "rb") as f:
            return self.write(path, f, **kw)

    def list(self, path, depth=None, user=None):
        """The entries of a directory (``depth`` levels, 1..64), as :class:`~space.Entry`."""
        r = self._t().json("GET", self._p("/list"), query=self._query(path, user, depth=depth))
        return [Entry(e) for e in r["entries"]]

    def stat(self, path, user=None):
        """A path's :class:`~space.Entry` (a symlink as itself)."""
        return Entry(self._t().json("GET", self._p("/stat"), query=self._query(path, user)))

    def exists(self, path, user=None):
        """True if something is at ``path``."""
        try:
            self.stat(path, user)
            return True
        except NotFound:
            return False

    def mkdir(self, path, mode=None, parents=False, user=None):
        """Makes a directory; returns whether it was created (``parents``: also its parents,
        and an existing directory is not an error)."""
        body = _api.drop_none(path=path, mode=_api.mode_str(mode), parents=bool(parents))
        self._query(path, None)
        query = _api.drop_none(user=user or self.user)
        return self._t().json("POST", self._p("/mkdir"), query=query, json=body)["created"]

    def remove(self, path, recursive=False, user=None):
        """Removes a file, a symlink or an empty directory (``recursive``: a whole tree)."""
        self._t().json("DELETE", self._p(), query=self._query(path, user, recursive=bool(recursive)))

    def rename(self, src, dst, overwrite=True, user=None):
        """Renames ``src`` to ``dst`` (``overwrite=False``: :class:`~space.AlreadyExists` if
        ``dst`` exists)."""
        self._query(src, None), self._query(dst, None)
        body = {"from": src, "to": dst, "overwrite": bool(overwrite)}
        query = _api.drop_none(user=user or self.user)
        return self._t().json("POST", self._p("/rename"), query=query, json=body)

    def tar_download(self, path, dest=None, user=None):
        """A tar (pax) of ``path``, entries named under its base name. Returns the bytes, or
        streams them into ``dest`` (a file object or local path) and returns the count."""
        query = self._query(path, user)
        if dest is not None:
            return self._download(self._p("/tar"), query, dest)
        return self._t().request("GET", self._p("/tar"), query=query, timeout=600).body

    def tar_upload(self, directory, data, user=None):
        """Extracts a tar (bytes or a binary file object, streamed) into the existing
        ``directory``. Returns ``{"path", "entries", "bytes"}``."""
        headers = {"Content-Type": "application/x-tar"}
        return self._t().json("PUT", self._p("/tar"), query=self._query(directory, user), body=data,
                              headers=headers, timeout=600)

    def upload_dir(self, local_dir, directory, user=None):
        """Copies a local directory's contents into ``directory`` (one tar, streamed from a
        temporary file)."""
        import tempfile
        with tempfile.TemporaryFile() as tmp:
            with tarfile.open(fileobj=tmp, mode="w") as tf:
                for name in sorted(os.listdir(local_dir)):
                    tf.add(os.path.join(local_dir, name), arcname=name)
            tmp.seek(0)
            return self.tar_upload(directory, tmp, user=user)

    def download_dir(self, path, local_dir, user=None):
        """Copies ``path`` (a directory or file) into ``local_dir`` (as ``local_dir/<base
        name>``), refusing names that would land outside it."""
        import io
        data = self.tar_download(path, user=user)
        with tarfile.open(fileobj=io.BytesIO(data)) as tf:
            if hasattr(tarfile, "data_filter"):
                tf.extractall(local_dir, filter="data")
            else:
                root = os.path.realpath(local_dir)
                for m in tf.getmembers():
                    target = os.path.realpath(os.path.join(root, m.name))
                    if not (target == root or target.startswith(root + os.sep)) or m.islnk() \
                            or m.isdev():
                        raise ValueError(f"unsafe tar entry {m.name!r}")
                tf.extractall(local_dir)

    def watch(self, path, recursive=False, user=None, timeout=None):
        """Watches a directory: a :class:`Watch` (iterate it for :class:`~space.FsEvent`;
        close it to end the watch in the guest). Returns once the watch is in place, so
        every change made afterwards is seen."""
        query = self._query(path, user, recursive=bool(recursive))
        st = self._t().stream("GET", self._p("/watch"), query=query,
                              headers={"Accept": "text/event-stream"})
        w = Watch(st, path)
        try:
            w._wait_ready(timeout or self._t().timeout)
        except BaseException:
            w.close()
            raise
        return w


class Watch:
    """A live watch. Iterate for :class:`~space.FsEvent`; :meth:`next` waits with a
    timeout; :meth:`close` (or leaving a ``with`` block) ends it. A thread reads the
    stream, so a timeout in :meth:`next` loses nothing."""

    def __init__(self, stream, path):
        import queue
        self._st = stream
        self.path = path
        self._q = queue.Queue()
        self._ready = threading.Event()
        self._ready_seen = False
        self._error = None
        self.ended = False
        self._closed = False
        self._thread = threading.Thread(target=self._reader, name=f"space-watch-{path}", daemon=True)
        self._thread.start()

    def _reader(self):
        import json
        parser = Parser()
        try:
            self._st.settimeout(None)
            while True:
                chunk = self._st.read()
                if not chunk:
                    break
                for ev in parser.feed(chunk):
                    if ev.type == "ready":
                        self._ready_seen = True
                        self._ready.set()
                    elif ev.type == "fs":
                        self._q.put(FsEvent(json.loads(ev.data)))
                    elif ev.type == "end":
                        return
        except Exception as e:  # noqa: BLE001 -- any failure ends the watch, reported in next()
            if not self._closed:
                self._error = ConnectionFailed(f"watch {self.path}: {e}")
                self._q.put(self._error)
        finally:
            self._q.put(None)
            self._ready.set()

    def _wait_ready(self, timeout):
        if not self._ready.wait(timeout):
            raise Timeout(f"watch {self.path} not ready after {timeout}s")
        if not self._ready_seen:
            raise self._error or ConnectionFailed(f"watch {self.path} ended before it was ready")

    def next(self, timeout=None):
        """The next change, waiting at most ``timeout`` seconds (:class:`~space.Timeout`);
        ``None`` once the watch has ended."""
        import queue
        if self.ended:
            return None
        try:
            ev = self._q.get(timeout=timeout)
        except queue.Empty:
            raise Timeout(f"watch {self.path}: no event in {timeout}s") from None
        if isinstance(ev, Exception):
            self.ended = True
            raise ev
        if ev is None:
            self.ended = True
        return ev

    def __iter__(self):
        while True:
            ev = self.next()
            if ev is None:
                return
            yield ev

    def close(self):
        """Ends the watch (closing the connection ends it in the guest)."""
        self._closed = True
        self.ended = True
        self._st.abort()  # the reader sees the end; only then is the connection freed
        self._thread.join(10)
        if not self._thread.is_alive():
            self._st.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Ports:
    """A sandbox's TCP ports on the data plane: ``sandbox.ports``."""

    def __init__(self, sandbox):
        self.sandbox = sandbox

    def list(self):
        """``{"pattern", "public_all", "ports": [{"port", "listening", "public", "tokens",
        "url"}, ...]}``: what listens in the guest and what is exposed."""
        return self.sandbox._t().json("GET", self.sandbox._path("/ports"))

    def url(self, port):
        """The URL that reaches ``port`` (private unless public: send a token)."""
        return self.list()["pattern"].replace("{port}", str(int(port)))

    def set_public(self, port, public=True):
        """Opens the port to anyone with its URL (``public=False``: private again)."""
        return self.sandbox._t().json("PUT", self.sandbox._path(f"/ports/{int(port)}"),
                                      json={"public": bool(public)})

    def token(self, port, ttl_s=None):
        """A :class:`~space.PortToken` that opens this port alone (send it as
        ``X-Space-Token``; a browser opens ``browser_url``)."""
        body = _api.drop_none(ttl_s=ttl_s)
        return PortToken(self.sandbox._t().json("POST", self.sandbox._path(f"/ports/{int(port)}/tokens"),
                                                json=body))

    def revoke(self, port, token_id=None):
        """Revokes one token (by its ``id``) or every token of the port; returns how many."""
        rest = f"/ports/{int(port)}/tokens" + (f"/{q(token_id)}" if token_id else "")
        return self.sandbox._t().json("DELETE", self.sandbox._path(rest))["revoked"]


class Snapshots:
    """Named snapshots (``client.snapshots``); take one with :meth:`Sandbox.snapshot`."""

    def __init__(self, client):
        self._c = client

    def list(self):
        """Named and ready snapshots, oldest first."""
        return [Snapshot(s) for s in self._c.transport.json("GET", "/v1/snapshots")["snapshots"]]

    def get(self, ref):
        """A snapshot by id or name."""
        return Snapshot(self._c.transport.json("GET", f"/v1/snapshots/{q(ref)}"))

    def delete(self, ref):
        """Deletes a named snapshot (sandboxes cloned from it run on)."""
        self._c.transport.request("DELETE", f"/v1/snapshots/{q(ref)}")


class Secrets:
    """Secrets that egress gateways inject into requests (``client.secrets``); values are
    never returned."""

    def __init__(self, client):
        self._c = client

    def put(self, name, value, hosts):
        """Creates or replaces a secret, bound to the ``hosts`` (names or ``*.suffix``) it
        may be sent to. Returns its :class:`~space.Secret`."""
        body = {"value": value, "hosts": list(hosts)}
        return Secret(self._c.transport.json("PUT", f"/v1/secrets/{q(name)}", json=body))

    def list(self):
        return [Secret(s) for s in self._c.transport.json("GET", "/v1/secrets")["secrets"]]

    def get(self, name):
        return Secret(self._c.transport.json("GET", f"/v1/secrets/{q(name)}"))

    def delete(self, name):
        self._c.transport.request("DELETE", f"/v1/secrets/{q(name)}")


class Templates:
    """Templates sandboxes are made from (``client.templates``)."""

    def __init__(self, client):
        self._c = client

    def list(self):
        return [Template(t) for t in self._c.transport.json("GET", "/v1/templates")["templates"]]

    def get(self, ref):
        """A template by ``name``, ``name:tag`` or digest."""
        return Template(self._c.transport.json("GET", f"/v1/templates/{q(ref)}"))

    def set_pool(self, ref, size):
        """Keeps ``size`` VMs of the template booted for creates (0 ends the pool)."""
        return Template(self._c.transport.json("PUT", f"/v1/templates/{q(ref)}/pool",
                                               json={"size": int(size)}))


def _types(types):
    if types is None:
        return None
    return types if isinstance(types, str) else ",".join(types)


class Events:
    """Lifecycle events of every sandbox, in order (``client.events``; docs/guides/webhooks.md)."""

    def __init__(self, client):
        self._c = client

    def list(self, after=None, *, sandbox=None, types=None, limit=None, wait=None):
        """One page of the events after the cursor ``after`` (``None``: the oldest kept) of
        ``sandbox`` (an id or a :class:`Sandbox`), of ``types`` (names, with or without
        ``sandbox.``). With ``wait`` (seconds, at most 60), an empty page is held until the
        first event comes. Returns an :class:`~space.EventPage`; its ``cursor`` is the next
        ``after``."""
        query = {"after": after, "sandbox": getattr(sandbox, "id", sandbox), "types": _types(types),
                 "limit": limit, "wait": wait}
        query = {k: v for k, v in query.items() if v is not None}
        timeout = (wait or 0) + self._c.transport.timeout
        page = self._c.transport.json("GET", "/v1/events", query=query, timeout=timeout)
        page["events"] = [LifecycleEvent(e) for e in page["events"]]
        return EventPage(page)

    def wait_for(self, type_, *, sandbox=None, after=None, timeout=60.0):
        """Long-polls until an event of ``type_`` (of ``sandbox``) comes after ``after``;
        returns it. Raises :class:`~space.Timeout` when none came in ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        cursor = after if after is not None else self._newest()
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout(f"no {type_} event in {timeout:g} s", method="GET", path="/v1/events")
            page = self.list(cursor, sandbox=sandbox, types=type_, wait=max(1, min(60, int(left))))
            if page.events:
                return page.events[0]
            cursor = page.cursor

    def _newest(self):
        page = self.list(limit=1000)
        while page.has_more:
            page = self.list(page.cursor, limit=1000)
        return page.cursor

    def stream(self, after=None, *, sandbox=None, types=None):
        """Events as they happen, from ``after`` on: an iterator of
        :class:`~space.LifecycleEvent`. A dropped connection is opened again from the last
        event seen (nothing lost, nothing twice). Stop by breaking out of the loop."""
        cursor = after
        reconnects = 0
        while True:
            query = {"sandbox": getattr(sandbox, "id", sandbox), "types": _types(types)}
            query = {k: v for k, v in query.items() if v is not None}
            headers = {"Accept": "text/event-stream"}
            if cursor is not None:
                headers["Last-Event-ID"] = str(cursor)
            try:
                with self._c.transport.stream("GET", "/v1/events", query=query, headers=headers,
                                              timeout=60) as st:
                    parser = Parser()
                    while True:
                        chunk = st.read()
                        if not chunk:
                            break
                        for ev in parser.feed(chunk):
                            if ev.type.startswith("sandbox."):
                                rec = LifecycleEvent(json.loads(ev.data))
                                cursor = rec.seq
                                reconnects = 0
                                yield rec
            except (ConnectionFailed, socket.timeout):
                pass
            reconnects += 1
            if reconnects > MAX_RECONNECTS:
                raise ConnectionFailed("the events stream dropped too often", method="GET", path="/v1/events")
            time.sleep(min(2.0, 0.1 * reconnects))


class Webhooks:
    """Where events are POSTed, signed (``client.webhooks``). See :func:`verify_signature`
    for the receiver's side."""

    def __init__(self, client):
        self._c = client

    def create(self, url, secret, *, events=None, name=None, enabled=True):
        """Events from now on go to ``url`` (public addresses only, unless the daemon allows
        loopback), signed with ``secret`` (16 or more characters). Returns the
        :class:`~space.Webhook`."""
        body = {"url": url, "secret": secret, "enabled": enabled}
        if events is not None:
            body["events"] = list(events)
        if name is not None:
            body["name"] = name
        return Webhook(self._c.transport.json("POST", "/v1/webhooks", json=body)["webhook"])

    def list(self):
        return [Webhook(w) for w in self._c.transport.json("GET", "/v1/webhooks")["webhooks"]]

    def get(self, webhook_id):
        return Webhook(self._c.transport.json("GET", f"/v1/webhooks/{q(webhook_id)}")["webhook"])

    def update(self, webhook_id, **fields):
        """Changes ``url``, ``secret``, ``events``, ``name`` or ``enabled``."""
        return Webhook(self._c.transport.json("PATCH", f"/v1/webhooks/{q(webhook_id)}", json=fields)["webhook"])

    def delete(self, webhook_id):
        self._c.transport.request("DELETE", f"/v1/webhooks/{q(webhook_id)}")

    def deliveries(self, webhook_id, limit=100):
        """Its delivery attempts, newest first (:class:`~space.Delivery`)."""
        d = self._c.transport.json("GET", f"/v1/webhooks/{q(webhook_id)}/deliveries", query={"limit": limit})
        return [Delivery(x) for x in d["deliveries"]]


def verify_signature(headers, body, secret, tolerance=300):
    """True when a delivery's ``X-Space-Signature`` is ``secret``'s over its timestamp and
    ``body`` (bytes), and the timestamp is within ``tolerance`` seconds of now."""
    import hashlib
    import hmac

    h = {k.lower(): v for k, v in dict(headers).items()}
    try:
        parts = dict(p.split("=", 1) for p in h["x-space-signature"].split(","))
        ts = int(parts["t"])
    except (KeyError, ValueError):
        return False
    if abs(time.time() - ts) > tolerance:
        return False
    want = hmac.new(secret.encode(), str(ts).encode() + b"." + bytes(body), hashlib.sha256).hexdigest()
    return hmac.compare_digest(want, parts.get("v1", ""))
