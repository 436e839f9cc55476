"""gwlab_servers.py -- the "internet" of gwlab.py, run inside its netns: a DNS server answering
from a fixed table, HTTP (:80) and HTTPS (:443) servers that echo the request as JSON, a TCP
echo (:7000) and a UDP sink (:9999) that records what reached it. Sensitive request headers
are echoed as sha256 hashes, so a test can check a secret arrived without the guest seeing it.

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
        if self.path.startswith("/big/"):  # /big/N: N bytes, for back-pressure
            n = int(self.path[5:])
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            chunk = b"x" * 65536
            while n > 0:
                self.wfile.write(chunk[:min(n, len(chunk))])
                n -= len(chunk)
            return
        headers = {}
        for k, v in self.headers.items():
            if k.lower() in HASHED:
                v = "sha256:" + hashlib.sha256(v.encode()).hexdigest()
            headers.setdefault(k.lower(), []).append(v)
        out = json.dumps({"server": self.connection.getsockname()[0], "method": self.command,
                          "path": self.path, "headers": headers, "body_len": len(body), "body_sha": hashlib.sha256(body).hexdigest(),
                          "tls": isinstance(self.connection, ssl.SSLSocket)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = answer


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


def serve_udp_sink(port, path):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", port))
    while True:
        data, peer = s.recvfrom(4096)
        with open(path, "a") as f:
            f.write(json.dumps({"from": peer[0], "data": data.decode("latin-1")}) + "\n")


def main():
    cfg = json.load(open(sys.argv[1]))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    threads = [threading.Thread(target=serve_dns, args=(cfg["dns_addr"], cfg["names"])),
               threading.Thread(target=serve_echo, args=(7000,)),
               threading.Thread(target=serve_udp_sink, args=(9999, cfg["udp_log"]))]
    plain = Threaded(("0.0.0.0", 80), Echo)
    tls = Threaded(("0.0.0.0", 443), Echo)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cfg["cert"], cfg["key"])
    tls.socket = ctx.wrap_socket(tls.socket, server_side=True)
    threads += [threading.Thread(target=plain.serve_forever), threading.Thread(target=tls.serve_forever)]
    for t in threads:
        t.daemon = True
        t.start()
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
