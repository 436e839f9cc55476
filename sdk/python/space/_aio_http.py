"""The asyncio transport: HTTP/1.1 written and read over ``asyncio.open_connection`` (one
connection per request, ``Connection: close``): no threads, no blocking calls."""

import asyncio
import json as _json
import ssl as _ssl
import urllib.parse

from ._http import USER_AGENT, Response, encode_body, with_query
from .errors import ConnectionFailed, Timeout, error_for

MAX_HEAD = 1 << 20


class Headers(dict):
    """Response headers, keys lower-cased; ``get`` is case-insensitive."""

    def get(self, key, default=None):
        return dict.get(self, key.lower(), default)

    def __getitem__(self, key):
        return dict.__getitem__(self, key.lower())


class AsyncStream:
    """An answer being read: ``await read(n)`` returns what is there (``b""`` at the end),
    whatever the framing (Content-Length, chunked, or until the server closes)."""

    def __init__(self, reader, writer, status, headers, method, path, no_body=False):
        self._r, self._w = reader, writer
        self.status, self.headers = status, headers
        self.method, self.path = method, path
        te = (headers.get("transfer-encoding") or "").lower()
        self._chunked = "chunked" in te
        cl = headers.get("content-length")
        self._left = int(cl) if cl is not None and not self._chunked else None
        self._chunk_left = 0
        self._done = no_body or self._left == 0

    def _broken(self, why):
        return ConnectionFailed(f"reading the answer: {why}", method=self.method, path=self.path)

    async def read(self, n=1 << 16):
        if self._done:
            return b""
        try:
            if self._chunked:
                return await self._read_chunked(n)
            if self._left is not None:
                data = await self._r.read(min(n, self._left))
                if not data:
                    raise self._broken(f"closed with {self._left} bytes to come")
                self._left -= len(data)
                self._done = self._left == 0
                return data
            data = await self._r.read(n)
            if not data:
                self._done = True
            return data
        except (ConnectionError, OSError, asyncio.IncompleteReadError) as e:
            raise self._broken(e) from None

    async def _read_chunked(self, n):
        if self._chunk_left == 0:
            line = await self._r.readline()
            if not line.endswith(b"\n"):
                raise self._broken("closed inside a chunked body")
            try:
                size = int(line.split(b";")[0].strip(), 16)
            except ValueError:
                raise self._broken(f"bad chunk size {line[:40]!r}") from None
            if size == 0:
                while True:  # trailers, then the blank line
                    t = await self._r.readline()
                    if t in (b"\r\n", b"\n"):
                        break
                    if not t:
                        raise self._broken("closed inside the trailers")
                self._done = True
                return b""
            self._chunk_left = size
        data = await self._r.read(min(n, self._chunk_left))
        if not data:
            raise self._broken("closed inside a chunk")
        self._chunk_left -= len(data)
        if self._chunk_left == 0:
            await self._r.readexactly(2)
        return data

    async def read_all(self):
        parts = []
        while True:
            chunk = await self.read()
            if not chunk:
                return b"".join(parts)
            parts.append(chunk)

    def abort(self):
        """Cuts the connection (a reader waiting on it sees it end)."""
        self._w.transport.abort()

    async def close(self):
        self._done = True
        self._w.close()
        try:
            await asyncio.wait_for(self._w.wait_closed(), 5)
        except (ConnectionError, OSError, asyncio.TimeoutError):
            self._w.transport.abort()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()


async def _body_chunks(body):
    """Pieces of a streamed body: a binary file object (read off the loop's thread) or an
    (async) iterable of bytes."""
    if hasattr(body, "read"):
        loop = asyncio.get_running_loop()
        while True:
            chunk = await loop.run_in_executor(None, body.read, 1 << 20)
            if not chunk:
                return
            yield chunk
    elif hasattr(body, "__aiter__"):
        async for chunk in body:
            yield chunk
    else:
        for chunk in body:
            yield chunk


class AsyncTransport:
    """Requests to the control plane (the API key) or to a data-plane URL (a token)."""

    def __init__(self, url, api_key, timeout=60.0, ssl_context=None):
        self.url, self.api_key, self.timeout, self.ssl_context = url, api_key, timeout, ssl_context

    async def _connect(self, base, timeout, method, path):
        u = urllib.parse.urlsplit(base)
        tls = None
        if u.scheme == "https":
            tls = self.ssl_context or _ssl.create_default_context()
        port = u.port or (443 if tls else 80)
        try:
            return await asyncio.wait_for(
                asyncio.open_connection(u.hostname, port, ssl=tls, limit=MAX_HEAD), timeout)
        except asyncio.TimeoutError:
            raise Timeout(f"{base}: no connection in {timeout}s", method=method, path=path) from None
        except OSError as e:
            raise ConnectionFailed(f"{base}: {e}", method=method, path=path) from None

    async def _send(self, method, path, query, json, body, headers, base, token, timeout):
        base = base or self.url
        timeout = self.timeout if timeout is None else timeout
        full = with_query(path, query)
        data, hdrs = encode_body(json, body, headers)
        u = urllib.parse.urlsplit(base)
        hdrs.setdefault("User-Agent", USER_AGENT)
        hdrs["Authorization"] = f"Bearer {token or self.api_key}"
        hdrs["Host"] = u.netloc
        hdrs["Connection"] = "close"
        streamed = data is not None and not isinstance(data, (bytes, bytearray, memoryview))
        if streamed:
            hdrs["Transfer-Encoding"] = "chunked"
        elif data is not None or method in ("POST", "PUT", "PATCH"):
            data = bytes(data or b"")
            hdrs["Content-Length"] = str(len(data))
        head = f"{method} {full} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items())
        reader, writer = await self._connect(base, timeout, method, path)
        try:
            try:
                writer.write(head.encode("latin-1") + b"\r\n")
                if streamed:
                    async for chunk in _body_chunks(data):
                        if chunk:
                            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                            await writer.drain()
                    writer.write(b"0\r\n\r\n")
                elif data:
                    writer.write(data)
                await writer.drain()
            except (ConnectionError, OSError):
                pass  # refused before the body was read (413, 401): its answer may be there
            st = await asyncio.wait_for(self._head(reader, writer, method, path), timeout)
        except asyncio.TimeoutError:
            writer.close()
            raise Timeout("no answer in time", method=method, path=path) from None
        except BaseException:
            writer.close()
            raise
        return st

    async def _head(self, reader, writer, method, path):
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, OSError) as e:
            raise ConnectionFailed(f"no answer: {e!r}", method=method, path=path) from None
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise ConnectionFailed(f"not an HTTP answer: {lines[0][:80]!r}", method=method, path=path)
        headers = Headers()
        for line in lines[1:]:
            if ":" in line:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
        status = int(parts[1])
        no_body = method == "HEAD" or status in (204, 304) or 100 <= status < 200
        return AsyncStream(reader, writer, status, headers, method, path, no_body)

    async def request(self, method, path, *, query=None, json=None, body=None, headers=None,
                      base=None, token=None, timeout=None):
        """One request; the whole answer, or the typed error for a status of 400 and over."""
        st = await self._send(method, path, query, json, body, headers, base, token, timeout)
        try:
            data = await asyncio.wait_for(st.read_all(), self.timeout if timeout is None else timeout)
        except asyncio.TimeoutError:
            raise Timeout("answer not complete in time", method=method, path=path) from None
        except ConnectionFailed:
            if st.status < 400:
                raise
            data = b""
        finally:
            await st.close()
        if st.status >= 400:
            raise error_for(st.status, data, method, path)
        return Response(st.status, st.headers, data)

    async def json(self, method, path, **kw):
        r = await self.request(method, path, **kw)
        return _json.loads(r.body.decode("utf-8")) if r.body else None

    async def stream(self, method, path, *, query=None, json=None, body=None, headers=None,
                     base=None, token=None, timeout=None):
        """A request whose answer is read as it comes (status under 400)."""
        st = await self._send(method, path, query, json, body, headers, base, token, timeout)
        if st.status >= 400:
            try:
                data = await asyncio.wait_for(st.read_all(), 10)
            except (asyncio.TimeoutError, ConnectionFailed):
                data = b""
            await st.close()
            raise error_for(st.status, data, method, path)
        return st
