"""test_events.py -- lifecycle events and webhooks against a real daemon (docs/design/events.md).

One daemon of this module's own (--webhooks-allow-loopback, --timeout-warning 3) and one
`minimal` sandbox walk through created, running, suspended, a daemon restart, restored, a
timeout warning and deleted. A receiver on 127.0.0.1 (this process) takes the deliveries of a
SPACE webhook, whose first two attempts it answers 500, and of an E2B one: every event arrives,
in order, signed; the events API lists the same records before and after the restart, long-polls
and streams. The tests run in file order and share the scenario's state."""

import base64
import hashlib
import hmac
import http.server
import importlib.util
import json
import os
import sys
import threading
import time

import pytest

import space

SECRET = "whsec-" + os.urandom(12).hex()
E2B_SECRET = "e2b-secret-" + os.urandom(12).hex()
WAIT = 90  # seconds a delivery may take on a busy machine (retries back off 1 s, 2 s)


class Receiver:
    """An HTTP server on loopback recording every POST; the first `fail` on /space get 500."""

    def __init__(self, fail=2):
        self.posts = []
        self.fail = fail
        self.cond = threading.Condition()
        rec = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with rec.cond:
                    status = 200
                    if self.path == "/space" and rec.fail > 0:
                        rec.fail -= 1
                        status = 500
                    rec.posts.append({"path": self.path, "headers": dict(self.headers), "body": body,
                                      "status": status})
                    rec.cond.notify_all()
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def wait_for(self, pred, what, timeout=WAIT):
        deadline = time.monotonic() + timeout
        with self.cond:
            while not pred(self.posts):
                left = deadline - time.monotonic()
                assert left > 0, f"no {what} after {timeout}s; got {[p['path'] for p in self.posts]}"
                self.cond.wait(left)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def delivered(posts, path, sb_id):
    """The events a path got for one sandbox (2xx answers only), in arrival order, each once: a
    delivery the daemon's restart cut after the receiver answered comes again (at least once),
    with the same id, and a receiver drops it as this does."""
    out, seen = [], set()
    for p in posts:
        if p["path"] == path and p["status"] == 200:
            ev = json.loads(p["body"])
            key = ev.get("id")
            if ev.get("sandbox_id", ev.get("sandboxId")) == sb_id and key not in seen:
                seen.add(key)
                out.append(ev)
    return out


def check_space_signature(post):
    h = {k.lower(): v for k, v in post["headers"].items()}
    sig = dict(part.split("=", 1) for part in h["x-space-signature"].split(","))
    assert sig["t"] == h["x-space-timestamp"], h
    assert abs(int(sig["t"]) - time.time()) < 600, h
    want = hmac.new(SECRET.encode(), f"{sig['t']}.".encode() + post["body"], hashlib.sha256).hexdigest()
    assert hmac.compare_digest(sig["v1"], want), f"bad signature on {post['body'][:200]!r}"
    ev = json.loads(post["body"])
    assert h["x-space-event"] == ev["type"]
    assert h["x-space-delivery"] == f"{ev['webhook_id']}-{ev['seq']}"


def check_e2b_signature(post):
    h = {k.lower(): v for k, v in post["headers"].items()}
    want = base64.b64encode(hashlib.sha256(E2B_SECRET.encode() + post["body"]).digest()).decode().rstrip("=")
    assert h["e2b-signature"] == want, h
    assert h["e2b-signature-version"] == "v1"
    assert h["e2b-webhook-id"].startswith("wh-")


def in_order(types, want):
    """want appears in types as a subsequence."""
    it = iter(types)
    return all(any(t == w for t in it) for w in want)


S = {}  # the scenario's state, across the tests of this file


def load_sdk():
    """The Python SDK (sdk/python, package `space`) under another name: `space` here is the
    test framework."""
    sdk_dir = os.path.join(space.REPO, "sdk", "python", "space")
    spec = importlib.util.spec_from_file_location("space_sdk", os.path.join(sdk_dir, "__init__.py"),
                                                  submodule_search_locations=[sdk_dir])
    mod = importlib.util.module_from_spec(spec)
    sys.modules["space_sdk"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def ev_daemon():
    d = space.Daemon("spaced-events", extra_args=["--webhooks-allow-loopback", "--timeout-warning", "3"])
    try:
        d.start()
        yield d
    finally:
        d.cleanup()


@pytest.fixture(scope="module")
def receiver():
    r = Receiver()
    yield r
    r.close()


def events(api, **params):
    qs = "&".join(f"{k}={v}" for k, v in params.items())
    r = api.raw("GET", "/v1/events?" + qs, timeout=90)
    assert r.status == 200, r
    j = r.json
    assert set(j) >= {"events", "cursor", "has_more"}, j
    return j


def test_webhooks_refuse_bad_input(ev_daemon):
    api = ev_daemon.api
    good = {"url": "http://127.0.0.1:9/x", "secret": SECRET}
    bad = [
        ({**good, "url": "http://10.1.2.3/"}, "10.0.0.0/8"),
        ({**good, "url": "http://169.254.169.254/latest"}, "link-local"),
        ({**good, "url": "http://[fe80::1]/"}, "fe80"),
        ({**good, "url": "http://[::ffff:192.168.1.1]/"}, "192.168"),
        ({**good, "url": "ftp://127.0.0.1/"}, "http://"),
        ({**good, "url": "http://u:p@127.0.0.1/"}, "password"),
        ({**good, "url": "http://127.0.0.1:70000/"}, "port"),
        ({"url": good["url"]}, "secret"),
        ({**good, "secret": "short"}, "secret"),
        ({**good, "events": ["sandbox.exploded"]}, "exploded"),
        ({**good, "events": []}, "events"),
        ({**good, "colour": "red"}, "colour"),
        ({**good, "enabled": "yes"}, "enabled"),
    ]
    for body, word in bad:
        err = api.expect_error("POST", "/v1/webhooks", 400, body)
        assert word in err["message"], (body, err)
    r = api.raw("POST", "/v1/webhooks", b"{not json", headers={"Content-Type": "application/json"})
    assert r.status == 400, r
    api.expect_error("GET", "/v1/webhooks/wh-0000000000000000", 404)
    api.expect_error("DELETE", "/v1/webhooks/wh-0000000000000000", 404)
    for qs in ("after=-1", "after=x", "wait=999", "limit=0", "limit=5000", "sandbox=nope", "types=exploded"):
        api.expect_error("GET", "/v1/events?" + qs, 400)
    # A webhook made with a wrong key is no webhook at all.
    r = api.raw("POST", "/v1/webhooks", good, key="wrong")
    assert r.status == 401, r
    assert api.call("GET", "/v1/webhooks", None).json["webhooks"] == []


def test_loopback_refused_without_the_flag(api):
    """The session's daemon runs without --webhooks-allow-loopback: loopback is refused too."""
    # (IP literals only: a name would be looked up, and a test asks no name server anything)
    for url in ("http://127.0.0.1:9/", "http://[::1]:9/", "http://127.1.2.3:9/"):
        err = api.expect_error("POST", "/v1/webhooks", 400, {"url": url, "secret": SECRET})
        assert "loopback" in err["message"], (url, err)


def test_register_webhooks(ev_daemon, receiver):
    api = ev_daemon.api
    r = api.raw("POST", "/v1/webhooks", {"url": receiver.url("/space"), "secret": SECRET, "name": "all"})
    assert r.status == 201, r
    w = r.json["webhook"]
    assert w["id"].startswith("wh-") and w["url"] == receiver.url("/space") and w["enabled"] is True
    assert "secret" not in w and SECRET not in r.body.decode()
    assert "sandbox.created" in w["events"] and "sandbox.deleted" in w["events"]
    S["hook"] = w["id"]
    # E2B's form, through E2B's route and key header.
    r = space.http_request(ev_daemon.url, "POST", "/events/webhooks",
                           {"name": "e2b", "url": receiver.url("/e2b"), "enabled": True,
                            "events": ["sandbox.lifecycle.created", "sandbox.lifecycle.paused",
                                       "sandbox.lifecycle.resumed", "sandbox.lifecycle.killed"],
                            "signatureSecret": E2B_SECRET},
                           {"X-API-KEY": ev_daemon.api_key})
    assert r.status == 201, r
    assert r.json["events"] == ["sandbox.lifecycle.created", "sandbox.lifecycle.killed",
                                "sandbox.lifecycle.paused", "sandbox.lifecycle.resumed"], r.json
    S["e2b_hook"] = r.json["id"]
    listed = space.http_request(ev_daemon.url, "GET", "/events/webhooks", None, {"X-API-KEY": ev_daemon.api_key})
    assert [w["id"] for w in listed.json] == [S["e2b_hook"]], listed.json
    assert len(api.call("GET", "/v1/webhooks", None).json["webhooks"]) == 2


def test_lifecycle_before_restart(ev_daemon):
    api = ev_daemon.api
    sb = api.new_sandbox("minimal", timeout_s=3600)
    S["sb"] = sb["id"]
    api.do(sb["id"], "suspend")
    page = events(api, sandbox=sb["id"])
    types = [e["type"] for e in page["events"]]
    assert in_order(types, ["sandbox.created", "sandbox.running", "sandbox.suspended"]), types
    seqs = [e["seq"] for e in page["events"]]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), seqs
    created = page["events"][0]
    assert created["sandbox_id"] == sb["id"] and created["template"] == "minimal"
    assert created["operation_id"] and created["operation_id"].startswith("op-"), created
    S["before"] = page["events"]


def test_events_survive_a_restart(ev_daemon):
    api = ev_daemon.api
    ev_daemon.restart()
    page = events(api, sandbox=S["sb"])
    assert page["events"] == S["before"], "events changed across the restart"
    hooks = api.call("GET", "/v1/webhooks", None).json["webhooks"]
    assert {w["id"] for w in hooks} == {S["hook"], S["e2b_hook"]}
    # A cursor that is older than memory is served from the store.
    assert events(api, after=0, limit=1)["events"][0]["seq"] == 1


def test_long_poll_wakes_on_the_next_event(ev_daemon):
    api = ev_daemon.api
    cursor = events(api)["cursor"]
    got = {}

    def poll():
        got["page"] = events(api, after=cursor, wait=30, sandbox=S["sb"])

    t = threading.Thread(target=poll)
    t.start()
    time.sleep(0.5)
    api.do(S["sb"], "restore")
    t.join(60)
    assert not t.is_alive(), "the long-poll did not answer"
    types = [e["type"] for e in got["page"]["events"]]
    assert types and types[0] == "sandbox.restored", types
    assert int(got["page"]["cursor"]) >= got["page"]["events"][-1]["seq"]
    # Nothing new: the long-poll waits, then answers an empty page with the same cursor.
    cur = events(api)["cursor"]
    empty = events(api, after=cur, wait=1, types="deleted")
    assert empty["events"] == [] and int(empty["cursor"]) >= int(cur), empty


def test_stream_and_timeout_warning(ev_daemon):
    """A stream from a cursor sees a timeout set, then the warning that comes before it runs out."""
    api = ev_daemon.api
    cursor = events(api)["cursor"]
    conn = space.connection(ev_daemon.url, 30)
    conn.request("GET", f"/v1/events?sandbox={S['sb']}",
                 headers={"Authorization": f"Bearer {ev_daemon.api_key}", "Accept": "text/event-stream",
                          "Last-Event-ID": cursor})
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("Content-Type") == "text/event-stream"
    api.set_timeout(S["sb"], 6)
    seen, ids = [], []
    deadline = time.monotonic() + 30
    while "sandbox.timeout_warning" not in seen:
        assert time.monotonic() < deadline, f"stream saw only {seen}"
        line = resp.fp.readline().decode()
        assert line, "the stream ended"
        if line.startswith("event: "):
            seen.append(line[7:].strip())
        elif line.startswith("id: "):
            ids.append(int(line[4:]))
    conn.close()
    assert seen[:2] == ["sandbox.timeout_set", "sandbox.timeout_warning"], seen
    assert ids == sorted(ids) and ids[0] > int(cursor), ids
    api.set_timeout(S["sb"], 3600)  # before it runs out


def test_delete_and_every_delivery(ev_daemon, receiver):
    api = ev_daemon.api
    sb_id = S["sb"]
    api.remove_sandbox(sb_id)
    receiver.wait_for(lambda posts: any(e["type"] == "sandbox.deleted" for e in delivered(posts, "/space", sb_id)),
                      "sandbox.deleted on /space")
    receiver.wait_for(lambda posts: any(e["type"] == "sandbox.lifecycle.killed"
                                        for e in delivered(posts, "/e2b", sb_id)), "killed on /e2b")
    with receiver.cond:
        posts = list(receiver.posts)
    got = delivered(posts, "/space", sb_id)
    types = [e["type"] for e in got]
    # Every event of the sandbox, once each, in order: what the events API lists too.
    listed = [e["type"] for e in events(api, sandbox=sb_id)["events"]]
    assert types == listed, (types, listed)
    assert in_order(types, ["sandbox.created", "sandbox.running", "sandbox.suspended", "sandbox.restored",
                            "sandbox.timeout_set", "sandbox.timeout_warning", "sandbox.deleted"]), types
    assert [e["seq"] for e in got] == sorted(e["seq"] for e in got)
    # The first two attempts failed (500) and the same event came again: at least once.
    space_posts = [p for p in posts if p["path"] == "/space"]
    assert [p["status"] for p in space_posts[:3]] == [500, 500, 200], [p["status"] for p in space_posts[:5]]
    assert len({p["body"] for p in space_posts[:3]}) <= 3
    assert json.loads(space_posts[0]["body"])["seq"] == json.loads(space_posts[2]["body"])["seq"]
    for p in space_posts:
        check_space_signature(p)
    e2b = delivered(posts, "/e2b", sb_id)
    assert [e["type"] for e in e2b] == ["sandbox.lifecycle.created", "sandbox.lifecycle.paused",
                                        "sandbox.lifecycle.resumed", "sandbox.lifecycle.killed"], e2b
    for p in posts:
        if p["path"] == "/e2b":
            check_e2b_signature(p)
    assert e2b[0]["sandboxTemplateId"] == "minimal" and e2b[0]["version"] == "v1"
    # The delivery log shows the failures and the success, newest first.
    log = api.call("GET", f"/v1/webhooks/{S['hook']}/deliveries?limit=1000", None).json["deliveries"]
    oldest = list(reversed(log))[:3]
    assert [d["status"] for d in oldest] == [500, 500, 200], oldest
    # (attempts are counted by the process making them: a restart between two starts at 1 again)
    assert [d["attempt"] for d in oldest[:2]] == [1, 2] and oldest[2]["ok"] is True, oldest
    assert {d["event_id"] for d in oldest} == {str(json.loads(space_posts[0]["body"])["seq"])}, oldest
    assert oldest[0]["error"] == "answered 500"


def test_e2b_events_api(ev_daemon):
    hdr = {"X-API-KEY": ev_daemon.api_key}
    r = space.http_request(ev_daemon.url, "GET", f"/events/sandboxes/{S['sb']}?limit=100", None, hdr)
    assert r.status == 200, r
    types = [e["type"] for e in r.json]
    assert types[0] == "sandbox.lifecycle.killed" and types[-1] == "sandbox.lifecycle.created", types
    assert "sandbox.lifecycle.updated" in types
    upd = next(e for e in r.json if e["type"] == "sandbox.lifecycle.updated")
    assert "set_timeout" in upd["eventData"], upd
    asc = space.http_request(ev_daemon.url, "GET",
                             f"/events/sandboxes/{S['sb']}?orderAsc=true&limit=1&types=sandbox.lifecycle.killed",
                             None, hdr)
    assert [e["type"] for e in asc.json] == ["sandbox.lifecycle.killed"], asc.json
    bad = space.http_request(ev_daemon.url, "GET", "/events/sandboxes?limit=0", None, hdr)
    assert bad.status == 400 and bad.json["code"] == 400, bad


def test_webhook_update_and_delete(ev_daemon):
    api = ev_daemon.api
    r = api.raw("PATCH", f"/v1/webhooks/{S['hook']}", {"enabled": False, "events": ["deleted"]})
    assert r.status == 200, r
    assert r.json["webhook"]["enabled"] is False and r.json["webhook"]["events"] == ["sandbox.deleted"]
    api.expect_error("PATCH", f"/v1/webhooks/{S['hook']}", 400, {"url": "http://10.0.0.1/"})
    assert api.raw("DELETE", f"/v1/webhooks/{S['hook']}").status == 204
    api.expect_error("GET", f"/v1/webhooks/{S['hook']}", 404)
    r = space.http_request(ev_daemon.url, "DELETE", f"/events/webhooks/{S['e2b_hook']}", None,
                           {"X-API-KEY": ev_daemon.api_key})
    assert r.status == 200, r
    assert api.call("GET", "/v1/webhooks", None).json["webhooks"] == []


def test_python_sdk_events_and_webhooks(ev_daemon, receiver):
    """The Python SDK (sdk/python) reads the same events, waits for the next, streams, manages
    webhooks, and verifies a delivery's signature."""
    sdk = sys.modules.get("space_sdk") or load_sdk()
    Client, NotFound, verify_signature = sdk.Client, sdk.NotFound, sdk.verify_signature

    c = Client(ev_daemon.url, ev_daemon.api_key)
    page = c.events.list(sandbox=S["sb"], limit=1000)
    assert [e.type for e in page.events] == [e["type"] for e in events(ev_daemon.api, sandbox=S["sb"])["events"]]
    assert page.events[0].sandbox_id == S["sb"]
    w = c.webhooks.create(receiver.url("/sdk"), SECRET, events=["timeout_set"], name="sdk")
    assert w.events == ["sandbox.timeout_set"] and [x.id for x in c.webhooks.list()] == [w.id]
    sb = ev_daemon.api.new_sandbox("minimal", timeout_s=600)
    try:
        got = {}
        t = threading.Thread(target=lambda: got.update(ev=c.events.wait_for("timeout_set", sandbox=sb["id"])))
        t.start()
        time.sleep(0.5)
        ev_daemon.api.set_timeout(sb["id"], 900)
        t.join(60)
        assert got["ev"].type == "sandbox.timeout_set" and got["ev"].data["timeout_s"] == 900, got
        stream = c.events.stream(after=page.cursor, sandbox=sb["id"])
        first = next(stream)
        assert first.type == "sandbox.created" and first.sandbox_id == sb["id"], first
        stream.close()
    finally:
        ev_daemon.api.remove_sandbox(sb["id"])
    receiver.wait_for(lambda posts: any(p["path"] == "/sdk" for p in posts), "a delivery on /sdk")
    post = next(p for p in receiver.posts if p["path"] == "/sdk")
    assert verify_signature(post["headers"], post["body"], SECRET)
    assert not verify_signature(post["headers"], post["body"] + b" ", SECRET)
    assert not verify_signature(post["headers"], post["body"], SECRET + "x")
    assert c.webhooks.deliveries(w.id)[0].ok is True
    c.webhooks.delete(w.id)
    try:
        c.webhooks.get(w.id)
        raise AssertionError("a deleted webhook was found")
    except NotFound as e:
        assert e.code == "not_found"


def test_cli_events_and_webhook(ev_daemon, receiver):
    p = space.spacectl(ev_daemon, "events", "--sandbox", S["sb"], "--types", "created,deleted")
    assert p.returncode == 0, p.stderr
    lines = [ln.split("\t") for ln in p.stdout.splitlines()]
    assert [ln[3] for ln in lines] == ["sandbox.created", "sandbox.deleted"] and lines[0][2] == S["sb"], p.stdout
    p = space.spacectl(ev_daemon, "events", "--json", "--sandbox", S["sb"], "--after", lines[0][0])
    assert p.returncode == 0, p.stderr
    evs = [json.loads(ln) for ln in p.stdout.splitlines()]
    assert evs and evs[-1]["type"] == "sandbox.deleted" and all(e["seq"] > int(lines[0][0]) for e in evs)
    assert space.spacectl(ev_daemon, "events", "--after", "x").returncode == 2
    assert space.spacectl(ev_daemon, "events", "--types", "nope").returncode == 1
    p = space.spacectl(ev_daemon, "webhook", "add", receiver.url("/cli"), "--events", "created", input=SECRET + "\n")
    assert p.returncode == 0, p.stderr
    hook = p.stdout.strip()
    assert hook.startswith("wh-"), p.stdout
    p = space.spacectl(ev_daemon, "webhook", "add", receiver.url("/cli"), input="short\n")
    assert p.returncode == 1 and "secret" in p.stderr, p.stderr
    p = space.spacectl(ev_daemon, "webhook", "ls")
    assert p.returncode == 0 and hook in p.stdout and receiver.url("/cli") in p.stdout, p.stdout
    assert space.spacectl(ev_daemon, "webhook", "log", hook).returncode == 0
    assert space.spacectl(ev_daemon, "webhook", "rm", hook).returncode == 0
    p = space.spacectl(ev_daemon, "webhook", "rm", hook)
    assert p.returncode == 1 and "no webhook" in p.stderr, p.stderr
