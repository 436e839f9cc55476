"""E2B's control plane (src/daemon/e2b/e2b_sandboxes.c, e2b_list.c), driven the way E2B's SDK
drives it: X-API-KEY, E2B's paths and bodies, E2B's error shape {"code", "message"}. Checks
create -> 201 with an envd token, get, list (state and metadata filters, paging by
X-Next-Token), timeouts, pause (204, then 409), connect resuming a paused sandbox with its
files, kill (204 then 404), and the refusals (bad key, malformed JSON, unknown ids)."""

import json
import urllib.parse

import pytest

import space

WAIT = space.CREATE_TIMEOUT + 60
TEMPLATE = "minimal"


class E2B:
    """The control plane as E2B's SDK speaks to it."""

    def __init__(self, daemon, key=None):
        self.url = daemon.url
        self.key = daemon.api_key if key is None else key

    def req(self, method, path, body=None, raw=None, timeout=space.READ_TIMEOUT, key=...):
        hdrs = {"X-API-KEY": self.key if key is ... else key}
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        if data is not None:
            hdrs["Content-Type"] = "application/json"
        r = space.http_request(self.url, method, path, data, hdrs, timeout)
        if r.status >= 400:
            check_error(r)
        return r

    def create(self, **body):
        body.setdefault("templateID", TEMPLATE)
        r = self.req("POST", "/v2/sandboxes", body, timeout=WAIT)
        assert r.status == 201, r
        return r.json


def check_error(r):
    assert r.headers.get("Content-Type", "").startswith("application/json"), r
    j = r.json
    assert set(j) == {"code", "message"}, j
    assert j["code"] == r.status and isinstance(j["message"], str) and j["message"], j
    return j


CREATED = {"sandboxID": space.Pattern(r"^sb-[0-9a-f]{16}$"), "clientID": str, "templateID": str,
           "envdVersion": space.Pattern(r"^\d+\.\d+\.\d+$"), "envdAccessToken": space.Pattern(r"^[0-9a-f]{64}$"),
           "trafficAccessToken": str, "domain": space.Nullable(str)}
INFO = {"sandboxID": str, "templateID": str, "clientID": str, "cpuCount": int, "memoryMB": int,
        "diskSizeMB": int, "startedAt": str, "endAt": space.Nullable(str),
        "state": space.Enum("running", "paused"), "envdVersion": str, "metadata": space.MapOf(str)}


@pytest.fixture(scope="module")
def e2b(daemon):
    return E2B(daemon)


@pytest.fixture(scope="module")
def box(e2b):
    """One sandbox made through E2B's create, killed at the end."""
    c = e2b.create(timeout=600, metadata={"suite": "e2b-api", "who": "box"}, envVars={"A": "1"})
    yield c
    e2b.req("DELETE", f"/sandboxes/{c['sandboxID']}", timeout=WAIT)


def test_create_answers_like_e2b(e2b, box, api):
    space.check(box, CREATED)
    assert box["trafficAccessToken"] == box["envdAccessToken"]
    assert box["templateID"] == TEMPLATE
    # The core shows the same sandbox, running, with E2B's metadata and env.
    sb = api.sandbox(box["sandboxID"])
    assert sb["state"] == "running" and sb["metadata"] == {"suite": "e2b-api", "who": "box"}, sb


def test_get(e2b, box):
    r = e2b.req("GET", f"/sandboxes/{box['sandboxID']}")
    assert r.status == 200, r
    info = space.check(r.json, INFO)
    assert info["sandboxID"] == box["sandboxID"] and info["state"] == "running", info
    assert info["metadata"] == {"suite": "e2b-api", "who": "box"}
    assert info["endAt"] is not None


def test_list_filters_and_pages(e2b, box):
    others = [e2b.create(metadata={"suite": "e2b-api", "who": f"page{i}"}) for i in range(2)]
    try:
        meta = urllib.parse.urlencode({"suite": "e2b-api"})
        seen, token, pages = [], None, 0
        while True:
            qs = {"metadata": meta, "limit": 2, "state": "running"}
            if token:
                qs["nextToken"] = token
            r = e2b.req("GET", "/v2/sandboxes?" + urllib.parse.urlencode(qs))
            assert r.status == 200, r
            for s in r.json:
                space.check(s, INFO)
                assert s["metadata"]["suite"] == "e2b-api"
            seen += [s["sandboxID"] for s in r.json]
            pages += 1
            token = r.headers.get("X-Next-Token")
            if not token:
                break
        want = {box["sandboxID"]} | {o["sandboxID"] for o in others}
        assert set(seen) == want and len(seen) == len(want), (seen, want)
        assert pages == 2
        # A filter naming one of them (the SDK's double encoding: key=value percent-encoded,
        # then the pair encoded as a query value).
        meta = urllib.parse.urlencode({urllib.parse.quote("who"): urllib.parse.quote("page1")})
        r = e2b.req("GET", "/v2/sandboxes?" + urllib.parse.urlencode({"metadata": meta}))
        assert [s["sandboxID"] for s in r.json] == [others[1]["sandboxID"]], r.json
        # No paused ones yet among them.
        r = e2b.req("GET", "/v2/sandboxes?state=paused&metadata=" + urllib.parse.quote(
            urllib.parse.urlencode({"suite": "e2b-api"})))
        assert r.json == [], r.json
        assert e2b.req("GET", "/v2/sandboxes?limit=0").status == 400
        assert e2b.req("GET", "/v2/sandboxes?state=sleeping").status == 400
        assert e2b.req("GET", "/v2/sandboxes?nextToken=sb-0000000000000000").status == 400
    finally:
        for o in others:
            assert e2b.req("DELETE", f"/sandboxes/{o['sandboxID']}", timeout=WAIT).status == 204


def test_timeout_and_refresh(e2b, box, api):
    sid = box["sandboxID"]
    r = e2b.req("POST", f"/sandboxes/{sid}/timeout", {"timeout": 1200})
    assert r.status == 204, r
    assert api.sandbox(sid)["timeout_s"] == 1200
    assert e2b.req("POST", f"/sandboxes/{sid}/refreshes", {"duration": 900}).status == 204
    assert api.sandbox(sid)["timeout_s"] == 900
    assert e2b.req("POST", f"/sandboxes/{sid}/timeout", {"timeout": "soon"}).status == 400
    assert e2b.req("POST", f"/sandboxes/{sid}/timeout", {}).status == 400
    assert e2b.req("POST", "/sandboxes/sb-0000000000000000/timeout", {"timeout": 5}).status == 404


def test_metrics_are_real_or_empty(e2b, box):
    r = e2b.req("GET", f"/sandboxes/{box['sandboxID']}/metrics")
    assert r.status == 200, r
    assert isinstance(r.json, list)
    for m in r.json:
        assert m["memTotal"] > 0 and 0 < m["memUsed"], m
        assert 0 <= m["cpuUsedPct"] <= 100 and m["cpuCount"] >= 1, m


def test_pause_connect_keeps_files(e2b, api):
    c = e2b.create(timeout=600)
    sid = c["sandboxID"]
    try:
        r = api.run(sid, ["/bin/sh", "-c", "echo kept > /tmp/e2b-mark && sync"], user="root")
        assert r.exit_code == 0, r
        r = e2b.req("POST", f"/sandboxes/{sid}/pause", timeout=WAIT)
        assert r.status == 204, r
        assert api.sandbox(sid)["state"] == "suspended"
        r = e2b.req("POST", f"/sandboxes/{sid}/pause", timeout=WAIT)
        assert r.status == 409, r
        r = e2b.req("GET", f"/sandboxes/{sid}")
        assert r.json["state"] == "paused", r.json
        listed = e2b.req("GET", "/v2/sandboxes?state=paused").json
        assert sid in [s["sandboxID"] for s in listed]
        # connect resumes it: 201, a new token, its files as they were.
        r = e2b.req("POST", f"/v2/sandboxes/{sid}/connect", {"timeout": 300}, timeout=WAIT)
        assert r.status == 201, r
        space.check(r.json, CREATED)
        assert r.json["envdAccessToken"] != c["envdAccessToken"]
        assert api.sandbox(sid)["state"] == "running"
        assert api.sandbox(sid)["timeout_s"] == 300
        r = api.run(sid, ["/bin/cat", "/tmp/e2b-mark"], user="root")
        assert r.exit_code == 0 and r.stdout == b"kept\n", r
        # connect to a running one: 200; resume (older SDKs) to a running one: 409.
        r = e2b.req("POST", f"/v2/sandboxes/{sid}/connect", {})
        assert r.status == 200, r
        assert e2b.req("POST", f"/sandboxes/{sid}/resume", {}).status == 409
    finally:
        e2b.req("DELETE", f"/sandboxes/{sid}", timeout=WAIT)


def test_kill_twice(e2b):
    c = e2b.create()
    sid = c["sandboxID"]
    r = e2b.req("DELETE", f"/sandboxes/{sid}", timeout=WAIT)
    assert r.status == 204, r
    r = e2b.req("DELETE", f"/sandboxes/{sid}", timeout=WAIT)
    assert r.status == 404 and r.json["code"] == 404, r
    assert e2b.req("GET", f"/sandboxes/{sid}").status == 404
    assert e2b.req("POST", f"/v2/sandboxes/{sid}/connect", {}).status == 404
    assert e2b.req("POST", f"/sandboxes/{sid}/pause").status == 404
    assert e2b.req("DELETE", "/sandboxes/not-an-id").status == 404


def test_dispatcher_errors_are_e2b_shaped(e2b, daemon):
    """Errors the dispatcher answers itself on E2B's control paths (unknown routes, wrong
    methods, refused keys) are E2B's {"code", "message"} too (E2B.req checks every >= 400)."""
    assert e2b.req("GET", "/sandboxes/sb-0000000000000000/nope").status == 404
    assert e2b.req("POST", "/v2/whatever", {}).status == 404
    assert e2b.req("GET", "/snapshots/x/y").status == 404
    assert e2b.req("GET", "/templates/base/builds").status == 404
    r = e2b.req("PATCH", "/sandboxes/sb-0000000000000000")
    assert r.status == 405 and r.headers.get("Allow"), r
    assert e2b.req("GET", "/sandboxes/sb-x/nope", key="wrong").status == 401
    assert E2B(daemon, key="").req("POST", "/v2/whatever", {}).status == 401
    # /v1 keeps SPACE's shape beside them
    r = space.http_request(daemon.url, "GET", "/v1/nope", None, {"X-API-KEY": daemon.api_key})
    assert r.status == 404 and r.json["error"]["code"] == "not_found", r


def test_refusals(e2b, daemon):
    r = e2b.req("POST", "/v2/sandboxes", {"templateID": TEMPLATE}, key="wrong")
    assert r.status == 401, r
    r = E2B(daemon, key="").req("GET", "/v2/sandboxes")
    assert r.status == 401, r
    r = e2b.req("POST", "/v2/sandboxes", raw=b"{not json")
    assert r.status == 400, r
    r = e2b.req("POST", "/v2/sandboxes", raw=b"[1,2]")
    assert r.status == 400, r
    for bad in ({"timeout": -1}, {"timeout": "x"}, {"metadata": {"a": 1}}, {"envVars": []},
                {"templateID": 7}, {"autoPause": "yes"}, {"network": {"allowOut": ["not a host!"]}},
                {"volumeMounts": [{"name": "v", "path": "/data"}]}):
        r = e2b.req("POST", "/v2/sandboxes", dict(bad, templateID=bad.get("templateID", TEMPLATE)))
        assert r.status == 400, (bad, r)
    r = e2b.req("POST", "/v2/sandboxes", {"templateID": "no-such-template"})
    assert r.status in (400, 404), r


def test_templates_and_info(e2b, api):
    r = e2b.req("GET", "/templates")
    assert r.status == 200, r
    assert any(t["templateID"] == TEMPLATE for t in r.json), r.json
    info = api.info()
    assert info["e2b"]["api_url"] == e2b.url
    assert info["e2b"]["sandbox_url"] == info["data_plane_url"]


def test_network_create_and_update(e2b, api):
    c = e2b.create(allow_internet_access=False)
    sid = c["sandboxID"]
    try:
        assert api.sandbox(sid)["network"] == {"allow": [], "deny": []} or \
            api.sandbox(sid)["network"].get("allow", []) == []
        r = e2b.req("PUT", f"/sandboxes/{sid}/network", {"allowOut": ["pypi.org"], "denyOut": ["0.0.0.0/0"]})
        assert r.status == 204, r
        net = api.sandbox(sid)["network"]
        assert net["allow"] == ["pypi.org"], net
        r = e2b.req("PUT", f"/sandboxes/{sid}/network", {"allowOut": ["bad host!"]})
        assert r.status == 400, r
    finally:
        e2b.req("DELETE", f"/sandboxes/{sid}", timeout=WAIT)


def test_snapshot_then_create_from_it_and_fork(e2b, api):
    c = e2b.create(timeout=600)
    sid = c["sandboxID"]
    made = []
    try:
        r = api.run(sid, ["/bin/sh", "-c", "echo snap > /tmp/e2b-snap && sync"], user="root")
        assert r.exit_code == 0, r
        r = e2b.req("POST", f"/sandboxes/{sid}/snapshots", {}, timeout=WAIT)
        assert r.status == 201, r
        snap = r.json
        assert snap["snapshotID"].startswith("sn-") and len(snap["names"]) == 1, snap
        listed = e2b.req("GET", "/snapshots?" + urllib.parse.urlencode({"sandboxID": sid})).json
        assert [s["snapshotID"] for s in listed] == [snap["snapshotID"]], listed
        # E2B's SDK passes a snapshot to create as its templateID: by id, and by name.
        for ref in (snap["snapshotID"], snap["names"][0]):
            child = e2b.create(templateID=ref)
            made.append(child["sandboxID"])
            r = api.run(child["sandboxID"], ["/bin/cat", "/tmp/e2b-snap"], user="root")
            assert r.exit_code == 0 and r.stdout == b"snap\n", r
        # Fork: one entry per child, each with its own token.
        r = e2b.req("POST", f"/sandboxes/{sid}/fork", {"count": 1, "timeout": 120}, timeout=WAIT)
        assert r.status == 201, r
        assert len(r.json) == 1 and "sandbox" in r.json[0], r.json
        kid = space.check(r.json[0]["sandbox"], CREATED)
        made.append(kid["sandboxID"])
        assert api.sandbox(kid["sandboxID"])["timeout_s"] == 120
        r = api.run(kid["sandboxID"], ["/bin/cat", "/tmp/e2b-snap"], user="root")
        assert r.exit_code == 0 and r.stdout == b"snap\n", r
        assert e2b.req("POST", "/sandboxes/sb-0000000000000000/fork", {}).status == 404
    finally:
        for m in made + [sid]:
            e2b.req("DELETE", f"/sandboxes/{m}", timeout=WAIT)


def test_client_gone_during_create(e2b, daemon, api):
    """A client that hangs up while its create is held: the waiter is dropped (under ASan),
    the sandbox is still made, and the daemon goes on answering."""
    import socket
    import time

    before = {s["id"] for s in api.sandboxes()}
    body = json.dumps({"templateID": TEMPLATE, "metadata": {"suite": "e2b-gone"}}).encode()
    host, port = space.split_url(daemon.url)
    s = socket.create_connection((host, port))
    s.sendall(b"POST /v2/sandboxes HTTP/1.1\r\nHost: x\r\nX-API-KEY: " + daemon.api_key.encode() +
              b"\r\nContent-Type: application/json\r\nContent-Length: " + str(len(body)).encode() +
              b"\r\n\r\n" + body)
    time.sleep(0.1)  # dispatched and held (a clone takes longer), not yet answered
    s.close()
    deadline = time.monotonic() + WAIT
    new = []
    while time.monotonic() < deadline:
        new = [x for x in api.sandboxes() if x["id"] not in before and x["metadata"].get("suite") == "e2b-gone"]
        if new and new[0]["state"] == "running":
            break
        time.sleep(0.5)
    assert new and new[0]["state"] == "running", new
    assert e2b.req("DELETE", f"/sandboxes/{new[0]['id']}", timeout=WAIT).status == 204


def test_banner_prints_e2b_exports(daemon):
    with open(daemon.log_path, errors="replace") as f:
        text = f.read()
    assert f"export E2B_API_URL={daemon.url}\n" in text, text[-2000:]
    assert f"export E2B_SANDBOX_URL={daemon.data_url}\n" in text
    assert "export E2B_API_KEY=" in text
