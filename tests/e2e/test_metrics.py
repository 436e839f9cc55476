"""GET /metrics, /v1/healthz and /v1/readyz on a real daemon: the exposition parses with the
Prometheus client's own parser; counters, gauges and histograms move by what a sandbox's life
did (create, a command whose output is read, delete); /metrics needs the API key while the probes
answer without it and say nothing beyond their checks; readyz turns 503 when the database cannot
be read (its WAL read locks held by another process, as a wedged SQLite client would) and when a
node has no templates. docs/design/metrics.md."""

import fcntl
import json
import os
import tempfile
import time

import pytest

import space
from test_pty import read_until, ws_connect

parser = pytest.importorskip("prometheus_client.parser")  # Debian: python3-prometheus-client

MiB = 1 << 20
VM_OVERHEAD_MIB = 48  # src/daemon/sandbox/capacity.c
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
STATES = ["creating", "running", "pausing", "paused", "suspending", "suspended", "restoring",
          "stopping", "stopped", "deleting", "failed", "lost"]
OP_KINDS = ["create", "delete", "pause", "resume", "suspend", "restore", "stop", "start", "fork",
            "snapshot"]


@pytest.fixture(scope="module")
def mdaemon():
    """A daemon of this module's own: the counters are the process's, so nothing else may move
    them between two scrapes. Cold boots (no ready snapshot is built beside the test's VM, so
    node capacity moves by the test's sandbox alone)."""
    d = space.Daemon("spaced-metrics", extra_args=["--no-ready-snapshots"])
    try:
        d.start()
        yield d
    finally:
        d.cleanup()


def scrape(api):
    """{(sample name, ((label, value), ...)): value} of the whole exposition, which must parse."""
    r = api.raw("GET", "/metrics")
    assert r.status == 200, r
    assert r.headers.get("Content-Type") == CONTENT_TYPE, r.headers
    text = r.body.decode()
    families = list(parser.text_string_to_metric_families(text))
    assert families, text
    out, helped, typed = {}, set(), set()
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helped.add(line.split()[2])
        elif line.startswith("# TYPE "):
            typed.add(line.split()[2])
    for fam in families:
        assert fam.documentation, fam.name
        for s in fam.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            assert key not in out, f"series {key} twice"
            out[key] = s.value
        if fam.type == "histogram":
            check_histogram(fam)
    # Every family written has both lines, under its own name (counters keep _total there).
    assert helped == typed, (helped ^ typed)
    return out


def check_histogram(fam):
    """Buckets cumulative and ending in +Inf equal to _count, per label set."""
    series = {}
    for s in fam.samples:
        labels = {k: v for k, v in s.labels.items() if k != "le"}
        key = tuple(sorted(labels.items()))
        series.setdefault(key, {"buckets": [], "sum": None, "count": None})
        if s.name.endswith("_bucket"):
            series[key]["buckets"].append((float(s.labels["le"]), s.value))
        elif s.name.endswith("_sum"):
            series[key]["sum"] = s.value
        elif s.name.endswith("_count"):
            series[key]["count"] = s.value
    for key, h in series.items():
        les = [le for le, _ in h["buckets"]]
        counts = [c for _, c in h["buckets"]]
        assert les == sorted(les) and les[-1] == float("inf"), (fam.name, key, les)
        assert counts == sorted(counts), (fam.name, key, counts)
        assert counts[-1] == h["count"], (fam.name, key)
        assert h["sum"] is not None and h["sum"] >= 0, (fam.name, key)


def val(m, name, **labels):
    key = (name, tuple(sorted(labels.items())))
    assert key in m, f"{name}{labels} not exposed"
    return m[key]


def delta(a, b, name, **labels):
    return val(b, name, **labels) - val(a, name, **labels)


def test_every_family_and_series_is_there(mdaemon):
    m = scrape(mdaemon.api)
    info = [k for k in m if k[0] == "space_build_info"]
    assert len(info) == 1 and m[info[0]] == 1
    assert dict(info[0][1]) == {"version": mdaemon.api.info()["version"], "role": "all", "store": "sqlite"}
    start = val(m, "space_start_time_seconds")
    assert time.time() - 600 < start <= time.time()
    # Every state but deleted, zeros included.
    assert {dict(k[1])["state"] for k in m if k[0] == "space_sandboxes"} == set(STATES)
    for kind in OP_KINDS:
        for result in ("succeeded", "failed"):
            val(m, "space_operations_total", kind=kind, result=result)
        val(m, "space_operation_duration_seconds_count", kind=kind)
        val(m, "space_operation_duration_seconds_bucket", kind=kind, le="+Inf")
    for transport in ("sse", "websocket", "e2b"):
        for stream in ("stdout", "stderr"):
            val(m, "space_output_bytes_total", transport=transport, stream=stream)
    for plane in ("api", "data"):
        for cls in ("1xx", "2xx", "3xx", "4xx", "5xx"):
            val(m, "space_http_requests_total", plane=plane, **{"class": cls})
    info = mdaemon.api.info()["capacity"]
    assert val(m, "space_node_memory_budget_bytes") == info["memory_budget_mib"] * MiB
    assert val(m, "space_node_vcpus") == info["vcpu_budget"]
    assert val(m, "space_node_vms_max") == info["max_sandboxes"]
    val(m, "space_sessions_live")
    val(m, "space_sessions_started_total")
    val(m, "space_store_writes_pending")
    for result in ("written", "retried", "dropped"):
        val(m, "space_store_writes_total", result=result)
    # No sandbox or session id anywhere: labels are bounded sets.
    for name, labels in m:
        for _, v in labels:
            assert not v.startswith(("sb-", "ss-", "op-")), (name, labels)


def test_a_sandbox_life_moves_the_right_series(mdaemon):
    api = mdaemon.api
    m0 = scrape(api)
    sb = api.new_sandbox("minimal", timeout_s=600)
    m1 = scrape(api)
    assert delta(m0, m1, "space_sandboxes", state="running") == 1
    assert delta(m0, m1, "space_sandboxes", state="creating") == 0
    assert delta(m0, m1, "space_operations_total", kind="create", result="succeeded") == 1
    assert delta(m0, m1, "space_operations_total", kind="create", result="failed") == 0
    assert delta(m0, m1, "space_operation_duration_seconds_count", kind="create") == 1
    took = delta(m0, m1, "space_operation_duration_seconds_sum", kind="create")
    assert 0 < took < 600, took
    assert delta(m0, m1, "space_node_vms") == 1
    assert delta(m0, m1, "space_node_vcpus_used") == sb["vcpus"]
    assert delta(m0, m1, "space_node_memory_used_bytes") == (sb["memory_mib"] + VM_OVERHEAD_MIB) * MiB
    # The scrapes and the create's requests were answered 2xx on the control plane.
    assert delta(m0, m1, "space_http_requests_total", plane="api", **{"class": "2xx"}) >= 3
    # Its rows went through write-behind: the sandbox's and the operation's states, each written
    # (a newer version may replace one still waiting, so at least one each), none refused.
    assert delta(m0, m1, "space_store_writes_total", result="written") >= 2
    assert delta(m0, m1, "space_store_writes_total", result="dropped") == 0

    res = api.run(sb["id"], ["sh", "-c", "printf hello-metrics; printf oops >&2"])
    assert res.exit_code == 0 and bytes(res.stdout) == b"hello-metrics" and bytes(res.stderr) == b"oops", res
    m2 = scrape(api)
    assert delta(m1, m2, "space_sessions_started_total") == 1
    assert val(m2, "space_sessions_live") == val(m1, "space_sessions_live")  # it ended
    assert delta(m1, m2, "space_output_bytes_total", transport="sse", stream="stdout") == len(b"hello-metrics")
    assert delta(m1, m2, "space_output_bytes_total", transport="sse", stream="stderr") == len(b"oops")
    assert delta(m1, m2, "space_output_bytes_total", transport="websocket", stream="stdout") == 0
    # The attach was answered on the data plane.
    assert delta(m1, m2, "space_http_requests_total", plane="data", **{"class": "2xx"}) >= 1

    # A terminal's output over the WebSocket counts there (as stdout: a PTY has one stream).
    pty = api.create_session(sb["id"], ["/bin/sh", "-c", "printf ws-bytes-12"], pty={"rows": 24, "cols": 80})
    ws = ws_connect(pty)
    assert ws.status == 101, ws.head
    got, msg = read_until(ws, b"\x00never")
    ws.close()
    assert msg and msg["exit_code"] == 0 and got == b"ws-bytes-12", (got, msg)
    m2b = scrape(api)
    assert delta(m2, m2b, "space_output_bytes_total", transport="websocket", stream="stdout") == len(got)
    assert delta(m2, m2b, "space_output_bytes_total", transport="sse", stream="stdout") == 0
    assert delta(m2, m2b, "space_sessions_started_total") == 1
    m2 = m2b

    api.remove_sandbox(sb["id"])
    m3 = scrape(api)
    assert delta(m0, m3, "space_sandboxes", state="running") == 0
    assert delta(m2, m3, "space_sandboxes", state="running") == -1
    assert delta(m2, m3, "space_operations_total", kind="delete", result="succeeded") == 1
    assert delta(m2, m3, "space_operation_duration_seconds_count", kind="delete") == 1
    assert delta(m0, m3, "space_node_vms") == 0
    assert delta(m0, m3, "space_node_memory_used_bytes") == 0


def test_a_refused_create_is_no_operation(mdaemon):
    """A create that cannot fit the node is refused before an operation exists: the operation
    series stay still, the refusal is one 4xx answer."""
    api = mdaemon.api
    m0 = scrape(api)
    r = api.raw("POST", "/v1/sandboxes", {"template": "minimal", "memory_mib": 65536})
    assert r.status in (400, 429), r
    m1 = scrape(api)
    assert delta(m0, m1, "space_operations_total", kind="create", result="failed") == 0
    assert delta(m0, m1, "space_operations_total", kind="create", result="succeeded") == 0
    assert delta(m0, m1, "space_http_requests_total", plane="api", **{"class": "4xx"}) == 1


def test_pool_target_is_exposed_by_template(mdaemon):
    api = mdaemon.api
    api.set_pool("minimal", 0)
    m = scrape(api)
    assert val(m, "space_pool_target", template="minimal") == 0
    assert val(m, "space_pool_ready", template="minimal") == 0


def test_metrics_needs_the_api_key(mdaemon):
    api = mdaemon.api
    for key in (None, "wrong-key"):
        r = api.raw("GET", "/metrics", key=key)
        assert r.status == 401, r
        assert b"space_" not in r.body
    r = api.raw("GET", "/metrics", key=None, headers={"X-API-KEY": mdaemon.api_key})
    assert r.status == 200


def probe(d, path, method="GET"):
    return space.http_request(d.url, method, path)


def test_probes_answer_without_a_key_and_say_nothing_else(mdaemon):
    r = probe(mdaemon, "/v1/healthz")
    assert r.status == 200 and r.content_type == "application/json", r
    assert r.json == {"status": "ok"}
    r = probe(mdaemon, "/v1/readyz")
    assert r.status == 200, r
    assert r.json == {"status": "ok", "checks": {"store": "ok", "templates": "ok", "accelerator": "ok"}}
    # Exactly these two paths and method are open: the key is asked for everywhere else.
    for method, path in (("POST", "/v1/healthz"), ("HEAD", "/v1/readyz"), ("GET", "/v1/healthz/x"),
                         ("GET", "/v1/healthzz"), ("GET", "/v1/info"), ("GET", "/healthz"),
                         ("GET", "/v1/sandboxes"), ("GET", "/metrics")):
        r = probe(mdaemon, path, method)
        assert r.status == 401, (method, path, r)


class ReadLocks:
    """Holds every read-mark lock of a SQLite WAL database (bytes 123..127 of its -shm file, the
    locks a reader must take one of) for writing, from this process: no reader of the database
    gets in, as with a wedged process holding them. SQLite gives up after its retries
    (SQLITE_PROTOCOL, about 10 s)."""

    def __init__(self, db):
        self.path = db + "-shm"

    def __enter__(self):
        self.fd = os.open(self.path, os.O_RDWR)
        deadline = time.monotonic() + 30
        while True:
            try:
                fcntl.lockf(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 5, 123)
                return self
            except OSError:
                # The daemon is reading at this instant: its read lock goes with the read.
                assert time.monotonic() < deadline, "the daemon never let go of its read locks"
                time.sleep(0.01)

    def __exit__(self, *exc):
        fcntl.lockf(self.fd, fcntl.LOCK_UN, 5, 123)
        os.close(self.fd)


@pytest.fixture(scope="module")
def bare():
    """A daemon that runs no VM: no templates (an empty templates directory), TCG chosen."""
    empty = tempfile.mkdtemp(prefix="space-no-templates-")
    d = space.Daemon("spaced-bare", extra_args=["--accel", "tcg"], templates_dir=empty)
    try:
        d.start()
        yield d
    finally:
        d.cleanup()
        os.rmdir(empty)


def test_readyz_is_503_on_a_node_without_templates(bare):
    r = probe(bare, "/v1/readyz")
    assert r.status == 503, r
    assert r.json == {"status": "unready",
                      "checks": {"store": "ok", "templates": "none imported", "accelerator": "ok"}}
    assert probe(bare, "/v1/healthz").status == 200


def test_readyz_is_503_while_the_store_cannot_answer(bare):
    db = os.path.join(bare.state_dir, "space.db")
    assert os.path.exists(db + "-shm"), os.listdir(bare.state_dir)
    with ReadLocks(db):
        t0 = time.monotonic()
        r = space.http_request(bare.url, "GET", "/v1/readyz", timeout=60)
        assert r.status == 503, r
        assert r.json == {"status": "unready",
                          "checks": {"store": "failed", "templates": "unknown", "accelerator": "ok"}}
        assert time.monotonic() - t0 > 1  # it did wait on the database
    # Locks released: the database answers again (no restart needed).
    r = space.http_request(bare.url, "GET", "/v1/readyz", timeout=60)
    assert r.status == 503 and r.json["checks"]["store"] == "ok", r
    # And the failure was logged with its cause (not shown to the unauthenticated prober).
    with open(bare.log_path, errors="replace") as f:
        assert "readyz: the store does not answer" in f.read()
    assert json.dumps(r.json).count("store") == 1
