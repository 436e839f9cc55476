"""The blocking transport: http.client, one connection per request (thread-safe, nothing
shared between calls), typed errors for every error answer."""

import http.client
import json as _json
import socket
import ssl as _ssl
import urllib.parse

from .errors import ConnectionFailed, Timeout, error_for

USER_AGENT = "space-python/0.1"


def q(segment):
    """One path segment, percent-encoded (``name:tag`` and ``@`` included)."""
    return urllib.parse.quote(str(segment), safe="")


def with_query(path, query):
    if not query:
        return path
    items = [(k, v) for k, v in query.items() if v is not None and v is not False]
    items = [(k, "1" if v is True else str(v)) for k, v in items]
    return path + ("?" + urllib.parse.urlencode(items, quote_via=urllib.parse.quote) if items else "")


def encode_body(json=None, body=None, headers=None):
    """(body, headers): a JSON document, or raw bytes / str / a file or iterable of bytes."""
    headers = dict(headers or {})
    if json is not None:
        headers.setdefault("Content-Type", "application/json")
        return _json.dumps(json).encode(), headers
    if isinstance(body, str):
        body = body.encode("utf-8")
    if body is not None:
        headers.setdefault("Content-Type", "application/octet-stream")
    return body, headers


class Response:
    """A whole answer: ``status``, ``headers`` (case-insensitive ``get``), ``body`` (bytes)."""

    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return _json.loads(self.body.decode("utf-8")) if self.body else None


class Transport:
    """Requests to the control plane (the API key) or to a data-plane URL (a token)."""

    def __init__(self, url, api_key, timeout=60.0, ssl_context=None):
        self.url = url
        self.api_key = api_key
        self.timeout = timeout
        self.ssl_context = ssl_context

    def connection(self, base, timeout):
        u = urllib.parse.urlsplit(base)
        if u.scheme == "https":
            ctx = self.ssl_context or _ssl.create_default_context()
            return http.client.HTTPSConnection(u.hostname, u.port or 443, timeout=timeout, context=ctx)
        return http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout)

    def _send(self, method, path, query, json, body, headers, base, token, timeout):
        base = base or self.url
        full = with_query(path, query)
        data, hdrs = encode_body(json, body, headers)
        hdrs.setdefault("User-Agent", USER_AGENT)
        hdrs["Authorization"] = f"Bearer {token or self.api_key}"
        chunked = data is not None and not isinstance(data, (bytes, bytearray, memoryview))
        if data is None and method in ("POST", "PUT", "PATCH"):
            data = b""
        conn = self.connection(base, self.timeout if timeout is None else timeout)
        try:
            conn.request(method, full, body=data, headers=hdrs, encode_chunked=chunked)
            resp = conn.getresponse()
        except (BrokenPipeError, ConnectionResetError):
            # The daemon may refuse (413, 401) before reading a large body; its answer stays
            # readable when it closed gracefully.
            try:
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                raise ConnectionFailed(f"connection closed while sending: {e}", method=method,
                                       path=path) from None
        except socket.timeout:
            conn.close()
            raise Timeout("no answer in time", method=method, path=path) from None
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise ConnectionFailed(f"{base}: {e}", method=method, path=path) from None
        return conn, resp

    def request(self, method, path, *, query=None, json=None, body=None, headers=None, base=None,
                token=None, timeout=None):
        """One request; the whole answer, or the typed error for a status of 400 and over."""
        conn, resp = self._send(method, path, query, json, body, headers, base, token, timeout)
        try:
            data = resp.read()
        except socket.timeout:
            raise Timeout("answer not complete in time", method=method, path=path) from None
        except (OSError, http.client.HTTPException) as e:
            raise ConnectionFailed(f"reading the answer: {e}", method=method, path=path) from None
        finally:
            conn.close()
        if resp.status >= 400:
            raise error_for(resp.status, data, method, path)
        return Response(resp.status, resp.headers, data)

    def json(self, method, path, **kw):
        return self.request(method, path, **kw).json()

    def stream(self, method, path, *, query=None, json=None, body=None, headers=None, base=None,
               token=None, timeout=None):
        """A request whose answer is read as it comes: a :class:`Stream` (status under 400)."""
        conn, resp = self._send(method, path, query, json, body, headers, base, token, timeout)
        if resp.status >= 400:
            try:
                data = resp.read()
            except (OSError, http.client.HTTPException):
                data = b""
            conn.close()
            raise error_for(resp.status, data, method, path)
        return Stream(conn, resp, method, path)


class Stream:
    """An answer being read: ``read(n)`` returns what is there (``b""`` at the end);
    ``close()`` drops the connection. A context manager."""

    def __init__(self, conn, resp, method, path):
        self.conn, self.resp, self.method, self.path = conn, resp, method, path
        self.status, self.headers = resp.status, resp.headers

    def read(self, n=1 << 16):
        try:
            return self.resp.read1(n)
        except socket.timeout:
            raise
        except (OSError, http.client.HTTPException) as e:
            raise ConnectionFailed(f"reading the stream: {e}", method=self.method,
                                   path=self.path) from None

    def settimeout(self, seconds):
        if self.conn.sock is not None:
            self.conn.sock.settimeout(seconds)

    def abort(self):
        """Cuts the connection from under the reader (another thread may be blocked in read)."""
        sock = self.conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        try:
            self.resp.close()
        finally:
            self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
