#!/usr/bin/env python3
"""netlab_servers.py -- the servers of the test "internet" (tests/e2e/netlab.py), run inside its
network namespace: an authoritative-looking DNS server answering A queries from a zone file,
HTTP and HTTPS echo servers on every address (each answer is JSON describing the request and
naming its headers; the log has their values, so a test sees what an injection added upstream
while the guest never gets it back), a TCP echo server and a UDP
echo server. Every request is appended to a JSON-lines log.

    netlab_servers.py CONFIG.json     (runs until killed; prints "ready" once listening)

CONFIG: {"zone": {name: [addr, ...]}, "addrs": [addr, ...], "dns": addr, "cert": path,
         "key": path, "log": path}
"""

import http.server
import json
import socket
import socketserver
import ssl
import struct
import sys
import threading

CFG = json.load(open(sys.argv[1]))
LOG_LOCK = threading.Lock()


def log(rec):
    with LOG_LOCK, open(CFG["log"], "a") as f:
        f.write(json.dumps(rec) + "\n")


# ---------------------------------------------------------------- DNS


def dns_name(msg, off):
    labels = []
    while True:
        n = msg[off]
        if n == 0:
            return ".".join(labels).lower(), off + 1
        if n & 0xC0:
            raise ValueError("compressed name in a question")
        labels.append(msg[off + 1:off + 1 + n].decode("ascii", "replace"))
        off += 1 + n


def dns_answer(query):
    qid, flags, qd = struct.unpack("!HHH", query[:6])
    name, end = dns_name(query, 12)
    qtype, _qclass = struct.unpack("!HH", query[end:end + 4])
    question = query[12:end + 4]
    addrs = CFG["zone"].get(name)
    log({"kind": "dns", "name": name, "type": qtype})
    rcode = 0 if addrs is not None else 3
    answers = b""
    count = 0
    if addrs and qtype == 1:
        for a in addrs:
            answers += b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 300, 4) + socket.inet_aton(a)
            count += 1
    hdr = struct.pack("!HHHHHH", qid, 0x8400 | (flags & 0x0100) | rcode, 1, count, 0, 0)
    return hdr + question + answers


def udp_socket(addr, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, port))
    return s


def serve_dns(s):
    while True:
        data, peer = s.recvfrom(4096)
        try:
            s.sendto(dns_answer(data), peer)
        except (ValueError, IndexError, struct.error):
            pass


# ---------------------------------------------------------------- HTTP(S)


class Echo(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        local = self.connection.getsockname()
        rec = {"kind": "https" if isinstance(self.connection, ssl.SSLSocket) else "http",
               "server": "%s:%d" % local, "method": self.command, "path": self.path,
               "host": self.headers.get("Host"), "headers": dict(self.headers.items()),
               "body_len": len(body)}
        log(rec)
        # The answer names the headers but never carries their values: what a gateway
        # injected must not come back to the guest through us.
        rec = dict(rec, headers=sorted(k.lower() for k in self.headers.keys()))
        if self.path.startswith("/bytes/"):
            n = int(self.path.split("/")[2])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(n))
            self.end_headers()
            chunk = b"x" * (1 << 20)
            while n > 0:
                k = min(n, len(chunk))
                self.wfile.write(chunk[:k])
                n -= k
            return
        out = json.dumps(rec).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = _answer


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024


def http_server(addr, port, tls):
    srv = Server((addr, port), Echo)
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(CFG["cert"], CFG["key"])
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    return srv


# ---------------------------------------------------------------- raw TCP and UDP echo


class TcpEcho(socketserver.BaseRequestHandler):
    def handle(self):
        log({"kind": "tcp", "server": "%s:%d" % self.request.getsockname()})
        while True:
            data = self.request.recv(65536)
            if not data:
                return
            self.request.sendall(data)


class TcpServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve_udp(s, addr, port):
    while True:
        data, peer = s.recvfrom(4096)
        log({"kind": "udp", "server": "%s:%d" % (addr, port), "peer": peer[0]})
        s.sendto(data, peer)


def main():
    # Everything is bound before "ready": a test may connect the moment it reads it.
    threads = [threading.Thread(target=serve_dns, args=(udp_socket(CFG["dns"], 53),), daemon=True)]
    for a in CFG["addrs"]:
        for srv in (http_server(a, 80, False), http_server(a, 443, True), TcpServer((a, 2222), TcpEcho)):
            threads.append(threading.Thread(target=srv.serve_forever, daemon=True))
        threads.append(threading.Thread(target=serve_udp, args=(udp_socket(a, 9999), a, 9999), daemon=True))
    for t in threads:
        t.start()
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
