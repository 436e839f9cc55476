"""The asyncio client: :class:`AsyncClient`, with the same resources and methods as
:class:`~space.Client`, as coroutines.

Its I/O is asyncio's own: HTTP/1.1 over ``asyncio.open_connection`` (``space._aio_http``), no
threads (a file object given as an upload body is read through the loop's executor). A
command started with :meth:`AsyncCommands.start` is followed by an asyncio task; its
callbacks may be plain functions or coroutine functions::

    import asyncio, space

    async def main():
        async with space.AsyncClient() as c:
            sb = await c.sandboxes.create(template="base")
            r = await sb.run(["python3", "-c", "print(6*7)"])
            await sb.files.write("/home/user/a.txt", b"hi")
            await sb.delete()

    asyncio.run(main())
"""

import asyncio
import inspect
import json as _json
import os
import time

from . import _api
from ._aio_http import AsyncTransport
from ._config import resolve
from ._http import q
from ._sse import Parser
from ._stream import OutputState
from .client import MAX_RECONNECTS, OPERATION_TIMEOUT
from .errors import (CommandError, CommandTimeout, Conflict, ConnectionFailed, NotFound,
                     OperationFailed, Timeout, Unauthorized, Unavailable)
from .records import (CommandResult, Entry, FsEvent, Operation, PortToken, SandboxInfo, Secret,
                      SessionInfo, Snapshot, Template)

__all__ = ["AsyncClient", "AsyncSandboxes", "AsyncSandbox", "AsyncOperations", "AsyncCommands",
           "AsyncCommand", "AsyncFiles", "AsyncWatch", "AsyncPorts", "AsyncSnapshots",
           "AsyncSecrets", "AsyncTemplates"]


async def _call(fn, arg):
    r = fn(arg)
    if inspect.isawaitable(r):
        await r


class AsyncClient:
    """The asyncio twin of :class:`~space.Client` (same arguments and configuration:
    ``SPACE_URL``, ``SPACE_API_KEY``, ``SPACE_API_KEY_FILE``). An async context manager."""

    def __init__(self, url=None, api_key=None, api_key_file=None, timeout=60.0,
                 operation_timeout=OPERATION_TIMEOUT, ssl_context=None):
        self.url, key = resolve(url, api_key, api_key_file)
        self.transport = AsyncTransport(self.url, key, timeout, ssl_context)
        self.operation_timeout = operation_timeout
        self.sandboxes = AsyncSandboxes(self)
        self.operations = AsyncOperations(self)
        self.snapshots = AsyncSnapshots(self)
        self.secrets = AsyncSecrets(self)
        self.templates = AsyncTemplates(self)

    async def info(self):
        """``GET /v1/info``."""
        return await self.transport.json("GET", "/v1/info")

    async def close(self):
        """Nothing is kept open between calls; here for symmetry."""

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()


class AsyncOperations:
    """As :class:`~space.Operations`."""

    def __init__(self, client):
        self._c = client

    async def get(self, op_id, wait=None):
        t = self._c.transport
        query = {"wait": int(wait)} if wait is not None else None
        return Operation(await t.json("GET", f"/v1/operations/{q(op_id)}", query=query,
                                      timeout=t.timeout + (wait or 0)))

    async def wait(self, op_id, timeout=None, check=True):
        """Long-polls until done; a failed one raises :class:`~space.OperationFailed`."""
        timeout = self._c.operation_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            op = await self.get(op_id, wait=max(0, min(30, int(left))))
            if op.done:
                if check and op.state == "failed":
                    raise OperationFailed(op)
                return op
            if time.monotonic() >= deadline:
                raise Timeout(f"operation {op_id} ({op.get('kind')}) still {op.state} after {timeout}s")


class AsyncSandboxes:
    """As :class:`~space.Sandboxes`."""

    def __init__(self, client):
        self._c = client

    async def create(self, template=None, *, snapshot=None, vcpus=None, memory_mib=None, env=None,
                     metadata=None, timeout_s=None, on_timeout=None, network=None, wait=True,
                     timeout=None):
        """Creates a sandbox and (``wait``) waits until it runs: an :class:`AsyncSandbox`."""
        body = _api.create_body(template, snapshot, vcpus=vcpus, memory_mib=memory_mib, env=env,
                                metadata=metadata, timeout_s=timeout_s, on_timeout=on_timeout,
                                network=network)
        r = await self._c.transport.json("POST", "/v1/sandboxes", json=body)
        sb = AsyncSandbox(self._c, r["sandbox"], Operation(r["operation"]))
        if wait:
            sb.operation = await self._c.operations.wait(r["operation"]["id"], timeout)
            await sb.refresh()
        return sb

    async def get(self, sandbox_id):
        return AsyncSandbox(self._c, await self._c.transport.json("GET", f"/v1/sandboxes/{q(sandbox_id)}"))

    connect = get

    async def list(self, state=None, metadata=None):
        query = {}
        if state:
            query["state"] = state if isinstance(state, str) else ",".join(state)
        for k, v in (metadata or {}).items():
            query[f"metadata.{k}"] = v
        r = await self._c.transport.json("GET", "/v1/sandboxes", query=query)
        return [AsyncSandbox(self._c, rec) for rec in r["sandboxes"]]

    async def delete(self, sandbox_id, wait=True):
        r = await self._c.transport.json("DELETE", f"/v1/sandboxes/{q(sandbox_id)}")
        op = Operation(r["operation"])
        return await self._c.operations.wait(op.id) if wait else op


class AsyncSandbox:
    """As :class:`~space.Sandbox`; every verb is a coroutine. An async context manager that
    deletes the sandbox on exit."""

    def __init__(self, client, info, operation=None):
        self.client = client
        self.info = SandboxInfo(info)
        self.id = self.info["id"]
        self.operation = operation
        self.commands = AsyncCommands(self)
        self.files = AsyncFiles(self)
        self.ports = AsyncPorts(self)

    def __repr__(self):
        return f"AsyncSandbox({self.id!r}, state={self.state!r})"

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        try:
            await self.delete()
        except NotFound:
            pass

    @property
    def state(self):
        return self.info.get("state")

    @property
    def network(self):
        return self.info.get("network")

    def _t(self):
        return self.client.transport

    def _path(self, rest=""):
        return f"/v1/sandboxes/{q(self.id)}{rest}"

    async def refresh(self):
        self.info = SandboxInfo(await self._t().json("GET", self._path()))
        return self.info

    async def _verb(self, verb, wait=True, timeout=None):
        r = await self._t().json("POST", self._path(f"/{verb}"), json={})
        if r.get("sandbox"):
            self.info = SandboxInfo(r["sandbox"])
        op = Operation(r["operation"]) if r.get("operation") else None
        if op is not None and wait:
            op = await self.client.operations.wait(op.id, timeout)
            await self.refresh()
        return op

    async def pause(self, wait=True):
        return await self._verb("pause", wait)

    async def resume(self, wait=True):
        return await self._verb("resume", wait)

    async def suspend(self, wait=True):
        return await self._verb("suspend", wait)

    async def restore(self, wait=True):
        return await self._verb("restore", wait)

    async def stop(self, wait=True):
        return await self._verb("stop", wait)

    async def start(self, wait=True):
        return await self._verb("start", wait)

    async def wake(self, wait=True):
        return await self._verb("wake", wait)

    async def fork(self, count=1, wait=True):
        """The children, as :class:`AsyncSandbox` objects."""
        r = await self._t().json("POST", self._path("/fork"), json={"count": int(count)})
        if wait:
            await self.client.operations.wait(r["operation"]["id"])
        return [await self.client.sandboxes.get(c) for c in r["children"]]

    async def snapshot(self, name, wait=True):
        r = await self._t().json("POST", self._path("/snapshots"), json={"name": name})
        snap = Snapshot(r.get("snapshot") or {})
        if wait:
            op = await self.client.operations.wait(r["operation"]["id"])
            sid = (op.get("result") or {}).get("snapshot_id") or snap.get("id") or name
            snap = await self.client.snapshots.get(sid)
        return snap

    async def set_timeout(self, timeout_s, on_timeout=None):
        body = _api.drop_none(timeout_s=int(timeout_s), on_timeout=on_timeout)
        self.info = SandboxInfo(await self._t().json("POST", self._path("/timeout"), json=body))
        return self.info

    async def set_network(self, policy=None, *, allow=None, deny=None, inject=None):
        body = _api.network_body(policy, allow, deny, inject)
        return await self._t().json("PUT", self._path("/network"), json=body)

    async def egress(self, limit=None):
        return (await self._t().json("GET", self._path("/egress"), query={"limit": limit}))["records"]

    async def logs(self):
        return (await self._t().request("GET", self._path("/logs"))).body.decode("utf-8", "replace")

    async def files_token(self, ttl_s=None):
        body = _api.drop_none(scope="files", ttl_s=ttl_s)
        return await self._t().json("POST", self._path("/tokens"), json=body)

    async def delete(self, wait=True):
        op = await self.client.sandboxes.delete(self.id, wait=wait)
        if wait:
            self.info = SandboxInfo(dict(self.info, state="deleted"))
        return op

    async def run(self, cmd, **kw):
        """Shorthand for :meth:`AsyncCommands.run`."""
        return await self.commands.run(cmd, **kw)


class AsyncCommands:
    """As :class:`~space.Commands`."""

    def __init__(self, sandbox):
        self.sandbox = sandbox

    async def _create(self, cmd, env, cwd, user, stdin, pty, token_ttl_s):
        body = _api.session_body(cmd, env, cwd, user, stdin, pty, token_ttl_s)
        r = await self.sandbox._t().json("POST", self.sandbox._path("/sessions"), json=body)
        return r["session"], r["data_plane"]

    async def run(self, cmd, *, env=None, cwd=None, user=None, stdin=None, pty=None, timeout=None,
                  on_stdout=None, on_stderr=None, check=False):
        """Runs a command to its end: a :class:`~space.CommandResult` (as
        :meth:`space.Commands.run`; the callbacks may be coroutine functions)."""
        rec, dp = await self._create(cmd, env, cwd, user, stdin is not None, pty, None)
        c = AsyncCommand(self.sandbox, rec, dp, on_stdout, on_stderr)
        if stdin is not None:
            await c.send_stdin(stdin, close=True)
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            await c._follow(deadline)
        except Timeout:
            try:
                await c.kill()
                await c._follow(time.monotonic() + 10)
            except (Conflict, Unavailable, Timeout, ConnectionFailed):
                pass
            raise CommandTimeout(f"command {c.id} ran past {timeout}s; killed", c.result) from None
        return c._finish(check)

    async def start(self, cmd, *, env=None, cwd=None, user=None, stdin=False, pty=None,
                    on_stdout=None, on_stderr=None, token_ttl_s=None):
        """Starts a command; an asyncio task follows its output. Returns an
        :class:`AsyncCommand`."""
        rec, dp = await self._create(cmd, env, cwd, user, stdin, pty, token_ttl_s)
        c = AsyncCommand(self.sandbox, rec, dp, on_stdout, on_stderr)
        c._start_task()
        return c

    async def connect(self, session_id, *, offset=0, on_stdout=None, on_stderr=None):
        """Follows an earlier command from output offset ``offset``."""
        rec = await self.get(session_id)
        c = AsyncCommand(self.sandbox, rec, None, on_stdout, on_stderr, offset=offset)
        await c.refresh_token()
        c._start_task()
        return c

    async def list(self):
        r = await self.sandbox._t().json("GET", self.sandbox._path("/sessions"))
        return [SessionInfo(s) for s in r["sessions"]]

    async def get(self, session_id):
        return SessionInfo(await self.sandbox._t().json(
            "GET", self.sandbox._path(f"/sessions/{q(session_id)}")))


class AsyncCommand:
    """As :class:`~space.Command`; its methods are coroutines (``offset``, ``result``,
    ``done`` are plain attributes)."""

    def __init__(self, sandbox, rec, dp, on_stdout, on_stderr, offset=0):
        self.sandbox = sandbox
        self.record = SessionInfo(rec)
        self.id = self.record["id"]
        self.result = CommandResult(self.id)
        self.result.offset = offset
        self._state = OutputState(self.result, on_stdout, on_stderr, offset)
        self._dp = dp
        self._token_lock = asyncio.Lock()
        self._stream = None
        self._detached = False
        self._task = None
        self.reconnects = 0

    def __repr__(self):
        return f"AsyncCommand({self.id!r}, offset={self.offset}, done={self.done})"

    @property
    def offset(self):
        return self._state.offset

    @property
    def done(self):
        return self._state.done

    async def refresh_token(self, ttl_s=None):
        body = _api.drop_none(token_ttl_s=ttl_s)
        r = await self.sandbox._t().json("POST", self.sandbox._path(f"/sessions/{q(self.id)}/token"),
                                         json=body)
        self._dp = r["data_plane"]
        return self._dp

    async def _dp_request(self, method, rest, **kw):
        t = self.sandbox._t()
        for attempt in (0, 1):
            dp = self._dp
            try:
                return await t.request(method, f"/v1/sessions/{q(self.id)}{rest}", base=dp["url"],
                                       token=dp["token"], **kw)
            except Unauthorized:
                if attempt:
                    raise
                await self._renew(dp)

    async def _renew(self, used):
        async with self._token_lock:
            if self._dp is used:
                await self.refresh_token()

    async def send_stdin(self, data, close=False):
        chunks = _api.stdin_chunks(data)
        for i, chunk in enumerate(chunks):
            query = {"close": 1} if close and i == len(chunks) - 1 else None
            for attempt in range(100):
                try:
                    await self._dp_request("POST", "/stdin", body=chunk, query=query)
                    break
                except Unavailable:
                    if attempt == 99:
                        raise
                    await asyncio.sleep(min(0.05 * (attempt + 1), 1.0))

    async def close_stdin(self):
        await self._dp_request("POST", "/stdin/close", body=b"")

    async def signal(self, sig):
        await self._dp_request("POST", "/signal", json={"signal": _api.signal_value(sig)})

    async def kill(self):
        await self.signal(9)

    async def resize(self, rows, cols):
        await self._dp_request("POST", "/resize", json={"rows": int(rows), "cols": int(cols)})

    async def info(self):
        self.record = await self.sandbox.commands.get(self.id)
        return self.record

    async def wait_started(self, timeout=60.0):
        deadline = time.monotonic() + timeout
        while True:
            rec = await self.info()
            if rec.get("pid") is not None or rec.get("state") in ("exited", "failed"):
                return rec
            if time.monotonic() >= deadline:
                raise Timeout(f"command {self.id} not started after {timeout}s")
            await asyncio.sleep(0.05)

    async def _attach(self):
        headers = {"Accept": "text/event-stream"}
        if self._state.offset:
            headers["Last-Event-ID"] = str(self._state.offset)
        return await self.sandbox._t().stream("POST", f"/v1/sessions/{q(self.id)}/attach",
                                              base=self._dp["url"], token=self._dp["token"],
                                              headers=headers)

    async def _follow(self, deadline=None):
        failures = 0
        while not self._state.done and not self._detached:
            used = self._dp
            try:
                st = await self._attach()
            except Unauthorized:
                failures += 1
                if failures > 2:
                    raise
                await self._renew(used)
                continue
            except (ConnectionFailed, Unavailable, Timeout):
                failures += 1
                if failures > MAX_RECONNECTS:
                    raise
                await asyncio.sleep(min(0.1 * 2 ** failures, 2.0))
                continue
            self._stream = st
            try:
                progressed = await self._read(st, deadline)
            finally:
                self._stream = None
                await st.close()
            if self._state.done or self._detached:
                break
            failures = 0 if progressed else failures + 1
            if failures > MAX_RECONNECTS:
                raise ConnectionFailed(f"command {self.id}: the output stream keeps failing")
            self.reconnects += 1
            if failures:
                await asyncio.sleep(min(0.1 * 2 ** failures, 2.0))

    async def _read(self, st, deadline):
        parser = Parser()
        start = self._state.offset
        got_event = False
        while not self._detached:
            wait = 45.0
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    raise Timeout("deadline")
            try:
                chunk = await asyncio.wait_for(st.read(), wait)
            except asyncio.TimeoutError:
                if deadline is not None and time.monotonic() >= deadline:
                    raise Timeout("deadline") from None
                break
            except ConnectionFailed:
                break
            if not chunk:
                break
            for ev in parser.feed(chunk):
                got_event = True
                for fn, text in self._state.handle(ev):
                    await _call(fn, text)
                if self._state.done:
                    return True
        return got_event or self._state.offset > start

    def _start_task(self):
        self._task = asyncio.get_running_loop().create_task(self._follow())

    def _finish(self, check):
        r = self.result
        if r.error is not None and not r.exited:
            raise CommandError(f"command {self.id}: {r.error}", r)
        if check and r.exit_code != 0:
            raise CommandError(f"command {self.id} exited with {r.exit_code}", r)
        return r

    async def wait(self, timeout=None, check=False):
        """Waits for the end; :class:`~space.Timeout` after ``timeout`` (the command runs on)."""
        if self._task is None:
            await self._follow(None if timeout is None else time.monotonic() + timeout)
        else:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout)
            except asyncio.TimeoutError:
                raise Timeout(f"command {self.id} still running after {timeout}s") from None
        return self._finish(check)

    def reconnect(self):
        """Drops the current output connection; the task resumes from the last offset."""
        if self._stream is not None:
            self._stream.abort()

    async def disconnect(self):
        """Stops following; the command runs on. Returns the offset reached."""
        self._detached = True
        self.reconnect()
        if self._task is not None:
            try:
                await asyncio.wait_for(self._task, 30)
            except (asyncio.TimeoutError, ConnectionFailed):
                pass
        return self._state.offset


class AsyncFiles:
    """As :class:`~space.Files`; every method is a coroutine."""

    def __init__(self, sandbox, user=None):
        self.sandbox = sandbox
        self.user = user

    def as_user(self, user):
        return AsyncFiles(self.sandbox, user)

    def _t(self):
        return self.sandbox._t()

    def _p(self, rest=""):
        return self.sandbox._path("/files" + rest)

    def _query(self, path, user, **extra):
        return _api.files_query(path, user or self.user, **extra)

    async def read(self, path, *, offset=None, length=None, user=None):
        query = self._query(path, user, offset=offset, length=length)
        return (await self._t().request("GET", self._p(), query=query, timeout=600)).body

    async def read_text(self, path, encoding="utf-8", user=None):
        return (await self.read(path, user=user)).decode(encoding)

    async def download(self, path, dest, *, user=None):
        """Streams the file into ``dest`` (a binary file object, or a local path); returns the
        bytes written."""
        own = isinstance(dest, (str, os.PathLike))
        f = open(dest, "wb") if own else dest
        n = 0
        try:
            st = await self._t().stream("GET", self._p(), query=self._query(path, user), timeout=600)
            async with st:
                while True:
                    chunk = await st.read(1 << 20)
                    if not chunk:
                        break
                    f.write(chunk)
                    n += len(chunk)
                length = st.headers.get("content-length")
                if length is not None and int(length) != n:
                    raise ConnectionFailed(f"{path}: {n} of {length} bytes arrived")
        finally:
            if own:
                f.close()
        return n

    async def upload(self, local_path, path, **kw):
        """Streams a local file to ``path`` (options as for :meth:`write`)."""
        with open(local_path, "rb") as f:
            return await self.write(path, f, **kw)

    async def write(self, path, data, *, mode=None, parents=False, user=None):
        """``data``: bytes, str, a binary file object or an async iterable of bytes."""
        query = self._query(path, user, mode=_api.mode_str(mode), parents=bool(parents))
        return await self._t().json("PUT", self._p(), query=query, body=data, timeout=600)

    async def list(self, path, depth=None, user=None):
        r = await self._t().json("GET", self._p("/list"), query=self._query(path, user, depth=depth))
        return [Entry(e) for e in r["entries"]]

    async def stat(self, path, user=None):
        return Entry(await self._t().json("GET", self._p("/stat"), query=self._query(path, user)))

    async def exists(self, path, user=None):
        try:
            await self.stat(path, user)
            return True
        except NotFound:
            return False

    async def mkdir(self, path, mode=None, parents=False, user=None):
        self._query(path, None)
        body = _api.drop_none(path=path, mode=_api.mode_str(mode), parents=bool(parents))
        query = _api.drop_none(user=user or self.user)
        return (await self._t().json("POST", self._p("/mkdir"), query=query, json=body))["created"]

    async def remove(self, path, recursive=False, user=None):
        await self._t().json("DELETE", self._p(), query=self._query(path, user, recursive=bool(recursive)))

    async def rename(self, src, dst, overwrite=True, user=None):
        self._query(src, None), self._query(dst, None)
        body = {"from": src, "to": dst, "overwrite": bool(overwrite)}
        query = _api.drop_none(user=user or self.user)
        return await self._t().json("POST", self._p("/rename"), query=query, json=body)

    async def tar_download(self, path, user=None):
        return (await self._t().request("GET", self._p("/tar"), query=self._query(path, user),
                                        timeout=600)).body

    async def tar_upload(self, directory, data, user=None):
        return await self._t().json("PUT", self._p("/tar"), query=self._query(directory, user),
                                    body=data, headers={"Content-Type": "application/x-tar"},
                                    timeout=600)

    async def watch(self, path, recursive=False, user=None, timeout=None):
        """An :class:`AsyncWatch`, returned once the watch is in place."""
        query = self._query(path, user, recursive=bool(recursive))
        st = await self._t().stream("GET", self._p("/watch"), query=query,
                                    headers={"Accept": "text/event-stream"})
        w = AsyncWatch(st, path)
        try:
            await asyncio.wait_for(w._wait_ready(), timeout or self._t().timeout)
        except asyncio.TimeoutError:
            await w.close()
            raise Timeout(f"watch {path} not ready in time") from None
        except BaseException:
            await w.close()
            raise
        return w


class AsyncWatch:
    """A live watch: ``async for ev in w``; ``await w.next(timeout)``; ``await w.close()``
    (or ``async with w``). A task reads the stream, so a timeout in :meth:`next` loses
    nothing."""

    def __init__(self, stream, path):
        self._st = stream
        self.path = path
        self._q = asyncio.Queue()
        self._ready = asyncio.Event()
        self._ready_seen = False
        self._error = None
        self.ended = False
        self._closed = False
        self._task = asyncio.get_running_loop().create_task(self._reader())

    async def _reader(self):
        parser = Parser()
        try:
            while True:
                chunk = await self._st.read()
                if not chunk:
                    break
                for ev in parser.feed(chunk):
                    if ev.type == "ready":
                        self._ready_seen = True
                        self._ready.set()
                    elif ev.type == "fs":
                        self._q.put_nowait(FsEvent(_json.loads(ev.data)))
                    elif ev.type == "end":
                        return
        except (ConnectionFailed, ValueError, OSError) as e:
            if not self._closed:
                self._error = ConnectionFailed(f"watch {self.path}: {e}")
                self._q.put_nowait(self._error)
        finally:
            self._q.put_nowait(None)
            self._ready.set()

    async def _wait_ready(self):
        await self._ready.wait()
        if not self._ready_seen:
            raise self._error or ConnectionFailed(f"watch {self.path} ended before it was ready")

    async def next(self, timeout=None):
        """The next :class:`~space.FsEvent` (:class:`~space.Timeout` after ``timeout``);
        ``None`` once the watch ended."""
        if self.ended:
            return None
        try:
            ev = await asyncio.wait_for(self._q.get(), timeout)
        except asyncio.TimeoutError:
            raise Timeout(f"watch {self.path}: no event in {timeout}s") from None
        if isinstance(ev, Exception):
            self.ended = True
            raise ev
        if ev is None:
            self.ended = True
        return ev

    def __aiter__(self):
        return self

    async def __anext__(self):
        ev = await self.next()
        if ev is None:
            raise StopAsyncIteration
        return ev

    async def close(self):
        self._closed = True
        self.ended = True
        self._st.abort()
        self._task.cancel()
        try:
            await self._task
        except (asyncio.CancelledError, Exception):
            pass
        await self._st.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()


class AsyncPorts:
    """As :class:`~space.Ports`."""

    def __init__(self, sandbox):
        self.sandbox = sandbox

    async def list(self):
        return await self.sandbox._t().json("GET", self.sandbox._path("/ports"))

    async def url(self, port):
        return (await self.list())["pattern"].replace("{port}", str(int(port)))

    async def set_public(self, port, public=True):
        return await self.sandbox._t().json("PUT", self.sandbox._path(f"/ports/{int(port)}"),
                                            json={"public": bool(public)})

    async def token(self, port, ttl_s=None):
        return PortToken(await self.sandbox._t().json(
            "POST", self.sandbox._path(f"/ports/{int(port)}/tokens"), json=_api.drop_none(ttl_s=ttl_s)))

    async def revoke(self, port, token_id=None):
        rest = f"/ports/{int(port)}/tokens" + (f"/{q(token_id)}" if token_id else "")
        return (await self.sandbox._t().json("DELETE", self.sandbox._path(rest)))["revoked"]


class AsyncSnapshots:
    """As :class:`~space.Snapshots`."""

    def __init__(self, client):
        self._c = client

    async def list(self):
        return [Snapshot(s) for s in (await self._c.transport.json("GET", "/v1/snapshots"))["snapshots"]]

    async def get(self, ref):
        return Snapshot(await self._c.transport.json("GET", f"/v1/snapshots/{q(ref)}"))

    async def delete(self, ref):
        await self._c.transport.request("DELETE", f"/v1/snapshots/{q(ref)}")


class AsyncSecrets:
    """As :class:`~space.Secrets`."""

    def __init__(self, client):
        self._c = client

    async def put(self, name, value, hosts):
        return Secret(await self._c.transport.json("PUT", f"/v1/secrets/{q(name)}",
                                                   json={"value": value, "hosts": list(hosts)}))

    async def list(self):
        return [Secret(s) for s in (await self._c.transport.json("GET", "/v1/secrets"))["secrets"]]

    async def get(self, name):
        return Secret(await self._c.transport.json("GET", f"/v1/secrets/{q(name)}"))

    async def delete(self, name):
        await self._c.transport.request("DELETE", f"/v1/secrets/{q(name)}")


class AsyncTemplates:
    """As :class:`~space.Templates`."""

    def __init__(self, client):
        self._c = client

    async def list(self):
        return [Template(t) for t in (await self._c.transport.json("GET", "/v1/templates"))["templates"]]

    async def get(self, ref):
        return Template(await self._c.transport.json("GET", f"/v1/templates/{q(ref)}"))

    async def set_pool(self, ref, size):
        return Template(await self._c.transport.json("PUT", f"/v1/templates/{q(ref)}/pool",
                                                     json={"size": int(size)}))
