#!/usr/bin/env python3
"""fuzz.py -- throws malformed and hostile HTTP at a listener; the daemon must keep answering.
Usage: fuzz.py PORT [ROUNDS] [SEED]"""
import random, socket, sys, time

port = int(sys.argv[1])
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
rnd = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)

PATHS = ["/v1/info", "/v1/sandboxes", "/v1/sandboxes/sb-0123456789abcdef", "/v1/sessions/ss-00000000000000aa/attach",
         "/v1/sessions/ss-00000000000000aa/stdin", "/v1/sessions/ss-00000000000000aa/signal",
         "/v1/sessions/ss-00000000000000bb/attach", "/v1/operations/op-00000000000000aa", "/stats", "/", "//", "/%",
         "/%zz", "/%00", "/v1/templates/%2F", "/v1/sessions/%73s-00000000000000aa", "/" + "a/" * 40]
METHODS = ["GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "FOO", "", "G\x00T"]
QUERIES = ["", "?", "?a", "?=", "?token=tok", "?token=tokb&offset=5", "?offset=-1", "?offset=99999999999999999999999",
           "?wait=1", "?wait=0", "?state=running,,", "?close=1", "?%zz=1", "?a=%ff%fe"]
HEADERS = ["Authorization: Bearer tok", "Authorization: Bearer tokb", "Authorization: Bearer", "Authorization: Bearer  a b",
           "Authorization: bearer tok", "Last-Event-ID: 3", "Last-Event-ID: x", "Content-Length: 5", "Content-Length: -1",
           "Content-Length: 99999999999", "Transfer-Encoding: chunked", "Expect: 100-continue", "X: " + "y" * 70000,
           "Connection: close", "Host:", ":::", "\x01\x02"]
BODIES = [b"", b"{}", b"{", b'{"signal":9}', b'{"signal":"KILL"}', b'{"signal":[1]}', b'{"signal":"\\u0000"}',
          b"\xff\xfe", b'{"a":1,"a":2}', b"5\r\nhello\r\n0\r\n\r\n", b"zz\r\n", b"[]" * 1000]


def one():
    s = socket.create_connection(("127.0.0.1", port), timeout=3)
    try:
        if rnd.random() < 0.1:
            s.sendall(bytes(rnd.getrandbits(8) for _ in range(rnd.randint(1, 3000))))
        else:
            line = f"{rnd.choice(METHODS)} {rnd.choice(PATHS)}{rnd.choice(QUERIES)} HTTP/1.{rnd.choice('01')}\r\n"
            hdrs = rnd.sample(HEADERS, rnd.randint(0, 4))
            req = (line + "".join(h + "\r\n" for h in hdrs) + "\r\n").encode("latin-1") + rnd.choice(BODIES)
            if rnd.random() < 0.2:
                req = req[: rnd.randint(0, len(req))]
            s.sendall(req)
        if rnd.random() < 0.3:
            return  # hang up without reading
        s.settimeout(0.3)
        try:
            s.recv(65536)
        except (socket.timeout, ConnectionResetError):
            pass
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        s.close()


for i in range(rounds):
    one()
# Still alive and answering?
s = socket.create_connection(("127.0.0.1", port), timeout=5)
s.sendall(b"GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
time.sleep(0.2)
resp = s.recv(4096)
print("alive:", resp.split(b"\r\n")[0].decode())
sys.exit(0 if resp.startswith(b"HTTP/1.1 ") else 1)
