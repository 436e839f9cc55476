#!/usr/bin/env python3
"""events.py -- how soon a lifecycle event reaches its readers: a webhook on loopback, a long-poll.

Starts its own spaced (the plain build, --webhooks-allow-loopback), one `minimal` sandbox and a
receiver in this process, and measures in one run, per sample one `POST .../timeout` (which
emits `sandbox.timeout_set`):
  the call alone          POST .../timeout round trip (the baseline)
  webhook delivery        from before the call to the receiver holding the signed delivery
  long-poll wake          from the call's answer to a waiting GET /v1/events?wait= answering
  direct POST             this process POSTing the same bytes to the receiver (the HTTP floor)
  events page             GET /v1/events?limit=100 round trip
Figures follow bench/stats.py: medians, p99 only with >= 100 samples (else max), ratios against
the call alone in the same run; a warm-up is discarded. Nothing is asserted about speed. gVisor
(the peer measured by the other benchmarks) has no lifecycle events or webhooks to compare.

    python3 bench/events.py [--n N] [--accel tcg|kvm|auto]
"""

import argparse
import http.client
import http.server
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))

import space  # noqa: E402
import stats  # noqa: E402

SECRET = "bench-secret-0123456789"


class Receiver:
    def __init__(self):
        self.got = {}
        self.cond = threading.Condition()
        rec = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                now = time.perf_counter()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
                try:
                    ev = json.loads(body)
                except ValueError:
                    return
                with rec.cond:
                    rec.got[(ev.get("data") or {}).get("timeout_s")] = now
                    rec.cond.notify_all()

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait(self, key, timeout=30):
        deadline = time.monotonic() + timeout
        with self.cond:
            while key not in self.got:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(f"no delivery of {key} in {timeout}s")
                self.cond.wait(left)
            return self.got[key]


def ms_line(label, xs, base=None):
    t = stats.tail(xs)
    out = f"  {label:<24} median {stats.median(xs) * 1000:8.2f} ms   {t[0]} {t[1] * 1000:8.2f} ms   (n={len(xs)})"
    if base is not None:
        out += f"   {stats.ratio(stats.median(xs), stats.median(base)):.2f}x of the call alone"
    print(out, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=150, help="measured samples of each series")
    ap.add_argument("--accel", default="tcg", choices=("tcg", "kvm", "auto"))
    args = ap.parse_args()
    rcv = Receiver()
    d = space.Daemon("spaced-bench-events", extra_args=["--accel", args.accel, "--webhooks-allow-loopback"])
    d.binary = space.PLAIN_SPACED  # benchmarks time the daemon as shipped
    try:
        d.start()
        api = d.api
        info = api.info()
        print(f"spaced {info['version']}, accelerator {info['accelerator']}; template minimal", flush=True)
        r = api.raw("POST", "/v1/webhooks", {"url": f"http://127.0.0.1:{rcv.port}/in", "secret": SECRET,
                                             "events": ["timeout_set"]})
        assert r.status == 201, r
        sb = api.new_sandbox("minimal", timeout_s=3600)
        calls, deliveries, wakes, direct, pages = [], [], [], [], []
        for i in range(args.n + stats.WARMUP):
            value = 1000 + i
            t0 = time.perf_counter()
            api.set_timeout(sb["id"], value)
            t1 = time.perf_counter()
            t2 = rcv.wait(value)
            calls.append(t1 - t0)
            deliveries.append(t2 - t0)
        for i in range(args.n + stats.WARMUP):
            value = 5000 + i
            cursor = api.call("GET", "/v1/events?limit=1&types=deleted", None).json["cursor"]
            got = {}

            def poll():
                api.raw("GET", f"/v1/events?after={cursor}&wait=30&types=timeout_set", timeout=60)
                got["t"] = time.perf_counter()

            t = threading.Thread(target=poll)
            t.start()
            time.sleep(0.02)  # the poll is held before the event comes
            api.set_timeout(sb["id"], value)
            t1 = time.perf_counter()
            t.join(60)
            wakes.append(got["t"] - t1)
        body = json.dumps({"type": "sandbox.timeout_set", "data": {"timeout_s": -1}}).encode()
        for i in range(args.n + stats.WARMUP):
            c = http.client.HTTPConnection("127.0.0.1", rcv.port, timeout=10)
            t0 = time.perf_counter()
            c.request("POST", "/in", body=body, headers={"Content-Type": "application/json"})
            c.getresponse().read()
            direct.append(time.perf_counter() - t0)
            c.close()
        for i in range(args.n + stats.WARMUP):
            t0 = time.perf_counter()
            api.call("GET", "/v1/events?limit=100", None)
            pages.append(time.perf_counter() - t0)
        calls, deliveries, wakes, direct, pages = (stats.drop_warmup(x) for x in (calls, deliveries, wakes, direct, pages))
        print("one sandbox.timeout_set event (POST .../timeout):")
        ms_line("the call alone", calls)
        ms_line("webhook delivery", deliveries, calls)
        ms_line("long-poll wake", wakes)
        ms_line("direct POST (floor)", direct)
        ms_line("events page of 100", pages)
        print(f"  delivery after the call's answer: median {(stats.median(deliveries) - stats.median(calls)) * 1000:.2f} ms",
              flush=True)
        api.remove_sandbox(sb["id"])
    finally:
        d.cleanup()
        rcv.server.shutdown()


if __name__ == "__main__":
    main()
