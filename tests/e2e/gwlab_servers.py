"""gwlab_servers.py -- the "internet" of gwlab.py, run inside its netns: a DNS server answering
from a fixed table, HTTP (:80) and HTTPS (:443) servers that echo the request as JSON (and the
ALPN protocol the TLS client got), a TCP echo (:7000), TLS echoes where the client speaks first
(:7443) and where the server does (:7993, a banner line first), and a UDP sink (:9999) that
records what reached it. The HTTP(S) servers also answer `Upgrade` on /upgrade-101 with a 101
and then echo raw bytes, CONNECT with a 2xx tunnel (an echo) or, to port 81, a 407, and TRACE
like any method. Every HTTP(S) request is logged (header values as sent) to a file on the host
side. Sensitive request headers are echoed as sha256 hashes, so a test can check a secret
arrived without the guest seeing it.

usage: python3 gwlab_servers.py CONFIG.json   (prints "ready" once every server listens)"""

import asyncio
import hashlib
import http.server
import json
import resource
import socket
import socketserver
import ssl
import struct
import sys
import threading

HASHED = {"authorization", "x-api-key"}


def dns_answer(query, table):
    """The reply to one query: A records from the table, NOERROR/empty for other types of
    known names, NXDOMAIN otherwise; None for garbage."""
    if len(query) < 12:
        return None
    qid, flags, qd = struct.unpack("!HHH", query[:6])
    if qd != 1:
        return None
    i, labels = 12, []
    while i < len(query) and query[i]:
        n = query[i]
        labels.append(query[i + 1:i + 1 + n].decode("ascii", "replace"))
        i += 1 + n
    if i + 5 > len(query):
        return None
    qtype = struct.unpack("!H", query[i + 1:i + 3])[0]
    question = query[12:i + 5]
    name = ".".join(labels).lower()
    addrs = table.get(name)
    rcode = 0 if addrs is not None else 3
    answers = b""
    if addrs and qtype == 1:
        for a in addrs:
            answers += struct.pack("!HHHIH", 0xC00C, 1, 1, 300, 4) + socket.inet_aton(a)
    n = len(answers) // 16
    header = struct.pack("!HHHHHH", qid, 0x8180 | rcode, 1, n, 0, 0)
    return header + question + answers


def serve_dns(addr, table):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, 53))
    while True:
        q, peer = s.recvfrom(4096)
        r = dns_answer(q, table)
        if r:
            s.sendto(r, peer)


REQ_LOG = None
REQ_LOCK = threading.Lock()


def log_request(h, body):
    """What reached us, with header values as sent (the log stays on the host; the answer
    hashes the sensitive ones)."""
    local = h.connection.getsockname()
    rec = {"kind": "https" if isinstance(h.connection, ssl.SSLSocket) else "http",
           "server": "%s:%d" % local, "method": h.command, "path": h.path,
           "host": h.headers.get("Host"), "headers": dict(h.headers.items()), "body_len": len(body)}
    with REQ_LOCK, open(REQ_LOG, "a") as f:
        f.write(json.dumps(rec) + "\n")


class Echo(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def read_body(self):
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return body
                body += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def answer(self):
        body = self.read_body()
        log_request(self, body)
        if self.path.startswith("/big/"):  # /big/N: N bytes, for back-pressure
            n = int(self.path[5:])
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            chunk = b"x" * (1 << 20)
            while n > 0:
                self.wfile.write(chunk[:min(n, len(chunk))])
                n -= len(chunk)
            return
        if self.path == "/upgrade-101" and self.headers.get("Upgrade"):
            self.send_response(101)
            self.send_header("Upgrade", self.headers["Upgrade"])
            self.send_header("Connection", "Upgrade")
            self.end_headers()
            self.raw_echo()
            return
        headers = {}
        for k, v in self.headers.items():
            if k.lower() in HASHED:
                v = "sha256:" + hashlib.sha256(v.encode()).hexdigest()
            headers.setdefault(k.lower(), []).append(v)
        tls = isinstance(self.connection, ssl.SSLSocket)
        out = json.dumps({"server": self.connection.getsockname()[0], "method": self.command,
                          "path": self.path, "headers": headers, "body_len": len(body), "body_sha": hashlib.sha256(body).hexdigest(),
                          "tls": tls, "alpn": self.connection.selected_alpn_protocol() if tls else None}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(out)

    def raw_echo(self):
        """After a 101 or a CONNECT's 200: bytes back as they come, until the client ends."""
        self.wfile.flush()
        self.close_connection = True
        while True:
            data = self.rfile.read1(65536)
            if not data:
                return
            self.wfile.write(data)
            self.wfile.flush()

    def do_CONNECT(self):
        log_request(self, b"")
        if self.path.endswith(":81"):
            body = b"no tunnel here\n"
            self.send_response(407)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200, "Connection established")
        self.end_headers()
        self.raw_echo()

    do_GET = do_POST = do_PUT = do_HEAD = do_TRACE = answer


class Threaded(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024


async def tcp_echo(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


def serve_echo(port):
    async def main():
        srv = await asyncio.start_server(tcp_echo, "0.0.0.0", port, backlog=2048)
        async with srv:
            await srv.serve_forever()
    asyncio.run(main())


def serve_tls_echo(port, cert, key, banner=None):
    """TLS, then bytes back as they come; banner: a line the server sends first."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)

    def one(conn):
        try:
            with ctx.wrap_socket(conn, server_side=True) as s:
                if banner:
                    s.sendall(banner)
                while True:
                    data = s.recv(65536)
                    if not data:
                        return
                    s.sendall(data)
        except (OSError, ssl.SSLError):
            pass
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(128)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=one, args=(conn,), daemon=True).start()


def serve_udp_sink(port, path):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", port))
    while True:
        data, peer = s.recvfrom(4096)
        with open(path, "a") as f:
            f.write(json.dumps({"from": peer[0], "data": data.decode("latin-1")}) + "\n")


def main():
    global REQ_LOG
    cfg = json.load(open(sys.argv[1]))
    REQ_LOG = cfg["req_log"]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    threads = [threading.Thread(target=serve_dns, args=(cfg["dns_addr"], cfg["names"])),
               threading.Thread(target=serve_echo, args=(7000,)),
               threading.Thread(target=serve_udp_sink, args=(9999, cfg["udp_log"]))]
    plain = Threaded(("0.0.0.0", 80), Echo)
    tls = Threaded(("0.0.0.0", 443), Echo)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cfg["cert"], cfg["key"])
    ctx.set_alpn_protocols(["http/1.1"])  # (it speaks no HTTP/2: it selects nothing else)
    tls.socket = ctx.wrap_socket(tls.socket, server_side=True)
    threads += [threading.Thread(target=serve_tls_echo, args=(7443, cfg["cert"], cfg["key"])),
                threading.Thread(target=serve_tls_echo,
                                 args=(7993, cfg["cert"], cfg["key"], b"* OK banner first\r\n"))]
    threads += [threading.Thread(target=plain.serve_forever), threading.Thread(target=tls.serve_forever)]
    for t in threads:
        t.daemon = True
        t.start()
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
