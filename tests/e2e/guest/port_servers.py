"""Servers a sandbox runs for the port tests (python3 -c, in the guest; stdlib only):
one HTTP/1.1 server (keep-alive) on the port given as argv[1]:
  GET|POST|PUT /echo     what it got, as JSON: method, path, headers, body length and sha256
  GET /sse               text/event-stream: "one" at once, "two" once /tmp/sse-go exists
  GET /big?n=N           N bytes (Content-Length), written as fast as the client reads
  GET /ws                a WebSocket that echoes every text and binary message
and, when argv[2] is given, a raw TCP echo server on that port."""

import base64
import hashlib
import json
import os
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    wbufsize = 1 << 16  # a reply leaves in one write (no Nagle stall between head and body)

    def log_message(self, *args):
        pass

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        h, left = hashlib.sha256(), n
        while left:
            chunk = self.rfile.read(min(left, 1 << 20))
            if not chunk:
                break
            h.update(chunk)
            left -= len(chunk)
        return (n - left, h.hexdigest())

    def echo(self, body):
        if isinstance(body, bytes):
            body = (len(body), hashlib.sha256(body).hexdigest())
        out = json.dumps({"method": self.command, "path": self.path, "headers": list(self.headers.items()),
                          "length": body[0], "sha256": body[1]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def do_POST(self):
        self.echo(self.body())

    do_PUT = do_POST

    def do_GET(self):
        url = urlsplit(self.path)
        if url.path == "/sse":
            return self.sse()
        if url.path == "/big":
            return self.big(int(parse_qs(url.query)["n"][0]))
        if url.path == "/ws":
            return self.ws()
        self.echo(b"")

    def sse(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(b"data: one\n\n")
        self.wfile.flush()
        deadline = time.monotonic() + 60
        while not os.path.exists("/tmp/sse-go") and time.monotonic() < deadline:
            time.sleep(0.05)
        self.wfile.write(b"data: two\n\n")
        self.wfile.flush()
        self.close_connection = True

    def big(self, n):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(n))
        self.end_headers()
        block = b"\0" * (1 << 20)
        while n:
            k = min(n, len(block))
            self.wfile.write(block[:k])
            n -= k

    def ws(self):
        key = self.headers.get("Sec-WebSocket-Key", "")
        accept = base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        while True:
            head = self.rfile.read(2)
            if len(head) < 2:
                break
            op, n = head[0] & 15, head[1] & 127
            if n == 126:
                n = struct.unpack(">H", self.rfile.read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self.rfile.read(8))[0]
            mask = self.rfile.read(4) if head[1] & 128 else b"\0\0\0\0"
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n)))
            if op == 8:
                self.wfile.write(b"\x88\x02" + data[:2])
                break
            if op in (1, 2):
                size = bytes([n]) if n < 126 else (b"\x7e" + struct.pack(">H", n) if n < 65536
                                                   else b"\x7f" + struct.pack(">Q", n))
                self.wfile.write(bytes([0x80 | op]) + size + data)
                self.wfile.flush()
        self.close_connection = True


def tcp_echo(port):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(16)

    def serve(c):
        with c:
            while True:
                data = c.recv(65536)
                if not data:
                    return
                c.sendall(data)

    while True:
        c, _ = srv.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()


if len(sys.argv) > 2:
    threading.Thread(target=tcp_echo, args=(int(sys.argv[2]),), daemon=True).start()
ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("0.0.0.0", int(sys.argv[1])), Handler).serve_forever()
