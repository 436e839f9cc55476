"""A small RFC 6455 client on the standard library, enough to drive the data plane's WebSocket
attach from the tests and the benchmark: masked client frames, fragmented and control frames
from the server, the close handshake."""

import base64
import hashlib
import os
import socket
import struct

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class WsError(Exception):
    pass


class WebSocket:
    def __init__(self, host, port, path, headers=None, timeout=30, connect=None):
        # connect: (address, port) to reach when Host names something else (a port's name)
        self.sock = socket.create_connection(connect or (host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [f"GET {path} HTTP/1.1", f"Host: {host}:{port}", "Upgrade: websocket",
                 "Connection: Upgrade", f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise WsError(f"closed during the handshake: {self.buf!r}")
            self.buf += chunk
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        status = head.split(b"\r\n")[0]
        self.status = int(status.split()[1])
        self.head = head.decode("latin-1")
        if self.status != 101:
            # An ordinary reply: keep its body for the caller.
            self.body = self.buf
            self.sock.close()
            return
        want = base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()
        got = [ln.split(":", 1)[1].strip() for ln in self.head.split("\r\n")[1:]
               if ln.lower().startswith("sec-websocket-accept:")]
        if got != [want]:
            raise WsError(f"bad accept key in {self.head!r}")
        self.closed = None

    def _recv_exact(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise WsError("connection closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send_frame(self, opcode, payload, fin=True, mask=True):
        head = bytes([(0x80 if fin else 0) | opcode])
        n = len(payload)
        mbit = 0x80 if mask else 0
        if n < 126:
            head += bytes([mbit | n])
        elif n < 65536:
            head += bytes([mbit | 126]) + struct.pack(">H", n)
        else:
            head += bytes([mbit | 127]) + struct.pack(">Q", n)
        if mask:
            m = os.urandom(4)
            payload = bytes(b ^ m[i % 4] for i, b in enumerate(payload)) if n < 4096 else \
                _mask_fast(payload, m)
            head += m
        self.sock.sendall(head + payload)

    def send_binary(self, data):
        self.send_frame(2, bytes(data))

    def send_text(self, text):
        self.send_frame(1, text.encode())

    def recv_frame(self):
        b0, b1 = self._recv_exact(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack(">H", self._recv_exact(2))[0]
        elif n == 127:
            n = struct.unpack(">Q", self._recv_exact(8))[0]
        if b1 & 0x80:
            raise WsError("the server masked a frame")
        return bool(b0 & 0x80), b0 & 0x0F, self._recv_exact(n)

    def recv(self):
        """The next message as (opcode, bytes): 1 text, 2 binary, 8 close. Pings are answered."""
        parts, op = [], None
        while True:
            fin, opcode, data = self.recv_frame()
            if opcode == 9:
                self.send_frame(10, data)
                continue
            if opcode == 10:
                continue
            if opcode == 8:
                self.closed = struct.unpack(">H", data[:2])[0] if len(data) >= 2 else 1005
                return 8, data
            if opcode != 0:
                op = opcode
            parts.append(data)
            if fin:
                return op, b"".join(parts)

    def close(self, code=1000):
        try:
            self.send_frame(8, struct.pack(">H", code))
        except OSError:
            pass
        self.sock.close()


def _mask_fast(payload, m):
    n = len(payload)
    key = (m * (n // 4 + 1))[:n]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(n, "big")
