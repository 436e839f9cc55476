"""test_cluster.py -- many spaced processes over one real PostgreSQL (docs/design/cluster.md).

A real PostgreSQL (Debian's, started as an unprivileged user in a temp dir), two api processes
(--role api) and three nodes (--role node), each node with its own state dir, ports and
capacity, all on loopback and sharing one API key. What a user of a cluster relies on:
creates written through either api are claimed by nodes with room and spread by capacity;
commands run through the other api with their output streamed from the owning node; a node
killed with SIGKILL has its sandboxes marked lost while the others keep running; PostgreSQL
restarting under load loses no operation."""

import os
import secrets
import shutil
import signal
import sys
import tempfile
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pg"))

import space  # noqa: E402
from pgserver import PgServer  # noqa: E402

VM_MIB = 128 + 48          # minimal's memory and the per-VM overhead capacity.c counts
SLOTS = {"n1": 14, "n2": 14, "n3": 5}
LEASE_S = 10
# Claims and results are pushed (LISTEN/NOTIFY): every process here looks for them on its own
# only every 30 s (test_claims_and_results_are_pushed).
BACKSTOP_S = 30
BACKSTOP = ["--backstop-ms", str(BACKSTOP_S * 1000)]
STALL_S = 5                # PostgreSQL stopped for this long (well inside a lease and a renewal)
CREATES = 30


TLS_NODES = {"n3"}         # serves both planes over TLS; the others plain HTTP
TLS_NAME = "space-node"    # the name its certificate carries (--cluster-tls-name)


def make_tls(d):
    """A CA and a node certificate for TLS_NAME (and 127.0.0.1), signed by it."""
    import subprocess
    ca, cakey = os.path.join(d, "ca.crt"), os.path.join(d, "ca.key")
    cert, key, csr = os.path.join(d, "node.crt"), os.path.join(d, "node.key"), os.path.join(d, "node.csr")
    ext = os.path.join(d, "node.ext")
    with open(ext, "w") as f:
        f.write(f"subjectAltName=DNS:{TLS_NAME},IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    run = lambda *a: subprocess.run(["openssl", *a], check=True, capture_output=True)  # noqa: E731
    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
        "-subj", "/CN=space test cluster CA", "-keyout", cakey, "-out", ca)
    run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", f"/CN={TLS_NAME}",
        "-keyout", key, "-out", csr)
    run("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", cakey, "-CAcreateserial", "-days", "2",
        "-extfile", ext, "-out", cert)
    return {"ca": ca, "cert": cert, "key": key}


class Cluster:
    def __init__(self):
        self.pgdir = tempfile.mkdtemp(prefix="space-pg-")
        self.pg = PgServer(self.pgdir)
        self.key = secrets.token_hex(16)
        self.peer_file, self.peer_key = space.cluster_key_file(self.pgdir)
        self.tls = make_tls(self.pgdir)
        self.shared = None
        self.apis = []
        self.nodes = {}

    def _own(self, d):
        d.api_key = self.key
        d.api = space.Api(d.url, self.key, d)
        return d

    def start(self):
        url = self.pg.start()
        self.url = url
        # Storage every node mounts: suspended sandboxes' memory and disks.
        self.shared = tempfile.mkdtemp(prefix="space-shared-")
        peer = ["--cluster-key-file", self.peer_file]
        # the api processes verify TLS nodes (n3) against the cluster's CA, by the name its
        # certificate carries
        verify = ["--cluster-ca", self.tls["ca"], "--cluster-tls-name", TLS_NAME]
        self.apis = [self._own(space.Daemon(f"api{i}", extra_args=["--role", "api", "--store", url] + peer + verify + BACKSTOP))
                     for i in (1, 2)]
        for i, (name, slots) in enumerate(SLOTS.items()):
            args = ["--role", "node", "--store", url, "--node-id", name,
                    "--memory-budget", str(slots * VM_MIB), "--lease", str(LEASE_S),
                    # clients stream through an api process, not from the node itself
                    "--data-url", self.apis[0].data_url,
                    "--jail-uid-base", str(2000000000 + (i + 1) * 100000),
                    "--jail-uid-count", "65536", "--shared-dir", self.shared] + peer + BACKSTOP
            d = self._own(space.Daemon(f"node-{name}", extra_args=args))
            if name in TLS_NODES:
                d.serve_tls(self.tls["cert"], self.tls["key"], self.tls["ca"])
            d.as_peer(self.peer_key)
            d.extra_args += ["--advertise-url", d.url, "--advertise-data-url", d.data_url]
            self.nodes[name] = d
        for d in self.nodes.values():
            d.start()
        for d in self.apis:
            d.start()
        # Each node builds its own ready snapshot of the template; creates clone it (a burst
        # of 30 cold boots on two TCG cores would test the host, not the cluster).
        for d in self.nodes.values():
            d.api.wait_ready_snapshot("minimal")
        return self

    def cleanup(self):
        problems = []
        # Nodes first (each deletes its own sandboxes; a killed one's QEMUs are killed), then
        # the apis, which close what is left (lost sandboxes).
        for d in list(self.nodes.values()) + list(self.apis):
            try:
                d.cleanup()
            except AssertionError as e:
                problems.append(f"{d.name}: {e}")
        try:
            self.pg.stop()
        except Exception as e:  # noqa: BLE001 - a teardown failure must fail the test
            problems.append(f"postgres: {e!r}")
        if self.shared:
            shutil.rmtree(self.shared, ignore_errors=True)
        shutil.rmtree(self.pgdir, ignore_errors=True)
        assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def cluster():
    c = Cluster()
    try:
        c.start()
        yield c
    finally:
        c.cleanup()


def wait_nodes_up(api, names, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        nodes = {n["id"]: n for n in api.call("GET", "/v1/nodes", "nodes")["nodes"]}
        if all(nodes.get(n, {}).get("state") == "up" for n in names):
            return nodes
        assert time.monotonic() < deadline, f"nodes not up: {nodes}"
        time.sleep(0.5)


def test_nodes_register_with_their_capacity(cluster):
    nodes = wait_nodes_up(cluster.apis[1].api, SLOTS)
    for name, slots in SLOTS.items():
        n = nodes[name]
        assert n["capacity"]["memory_mib"] == slots * VM_MIB, n
        assert n["api_url"] == cluster.nodes[name].url
        assert n["data_url"] == cluster.nodes[name].data_url


def test_metrics_of_an_api_process_show_the_cluster(cluster):
    resp = cluster.apis[0].api.raw("GET", "/metrics")
    assert resp.status == 200, resp.status
    text = resp.body.decode()
    assert 'space_build_info{version="' in text and 'role="api",store="postgres"} 1' in text, text[:500]
    assert 'space_cluster_nodes{state="up"} 3' in text, text
    for name, slots in SLOTS.items():
        assert f'space_cluster_node_memory_bytes{{node="{name}"}} {slots * VM_MIB * 1048576}' in text
    # A node reports its own capacity, and its role.
    text = cluster.nodes["n1"].api.raw("GET", "/metrics").body.decode()
    assert 'role="node",store="postgres"} 1' in text, text[:500]
    assert 'space_cluster_nodes{state="up"} 3' in text


def bare(url, method, path, body=None, headers=None):
    """A request to a node from nobody in particular: no cluster credential added."""
    import http.client
    host, port = space.split_url(url)
    if body is not None and len(body) > 65536:
        return bare_head(host, port, method, path, body, headers or {})
    c = http.client.HTTPConnection(host, port, timeout=30)
    try:
        c.request(method, path, body, headers or {})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def bare_head(host, port, method, path, body, headers):
    """A request with a large body of which only the head and 64 KiB are sent, then the answer
    read to its end: a server that refuses without reading the body closes while a client would
    still be sending the rest (which then fails with EPIPE, and the answer is lost to the test)."""
    import socket
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    got = b""
    with socket.create_connection((host, port), timeout=30) as s:
        s.sendall(head.encode() + body[:65536])
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    status_line, _, rest = got.partition(b"\r\n")
    assert status_line.startswith(b"HTTP/1.1 "), got[:200]
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


def test_claims_and_results_are_pushed(cluster):
    """Every process looks on its own only every BACKSTOP_S (30 s): a create through an api is
    claimed by a node as its intent commits (NOTIFY), and the client's long-poll is answered as
    its operation is done (NOTIFY). Left to the looks, each create would wait for two of them
    (a node's, then the api's), each anywhere in 0-30 s: five in a row answered within a third
    of that would be a chance of (1/3)^5 at most."""
    for i in range(5):
        api = cluster.apis[i % 2].api
        sb, op = api.create_sandbox("minimal")
        began = time.monotonic()
        got = api.operation(op["id"], wait=55)
        took = time.monotonic() - began
        assert got["state"] == "succeeded", got
        assert took < BACKSTOP_S / 3, f"create {i}: answered after {took:.1f} s: nothing was pushed"
        api.wait_op(api.delete_sandbox(sb["id"])[1]["id"], timeout=60)


def test_creates_through_either_api_spread_by_capacity(cluster):
    ops = []
    for i in range(CREATES):
        api = cluster.apis[i % 2].api
        sb, op = api.create_sandbox("minimal", metadata={"batch": "spread"})
        assert sb["state"] == "creating" and sb["node"] is None, sb
        ops.append((sb["id"], op["id"]))
    per_node = {}
    for i, (sb_id, op_id) in enumerate(ops):
        # Either api answers for any operation: they read the same store.
        got = cluster.apis[(i + 1) % 2].api.wait_op(op_id, timeout=space.CREATE_TIMEOUT)
        assert got["state"] == "succeeded", got
        sb = cluster.apis[i % 2].api.sandbox(sb_id)
        assert sb["state"] == "running" and sb["node"] in SLOTS, sb
        per_node.setdefault(sb["node"], []).append(sb_id)
    for name, ids in per_node.items():
        assert len(ids) <= SLOTS[name], f"{name} took {len(ids)} sandboxes, room for {SLOTS[name]}"
    assert set(per_node) == set(SLOTS), f"not every node was used: {per_node}"
    # Each node lists exactly its own.
    for name, d in cluster.nodes.items():
        mine = {s["id"] for s in d.api.sandboxes() if s["metadata"].get("batch") == "spread"}
        assert mine == set(per_node[name]), name
    cluster.spread = per_node


def test_exec_through_the_other_api_streams_from_the_owning_node(cluster):
    per_node = cluster.spread
    for name in SLOTS:
        sb_id = per_node[name][0]
        # Created through one api, run through the other; the output is relayed from the node.
        r = cluster.apis[1].api.run(sb_id, ["sh", "-c", "echo out-$0; echo err-$0 >&2; exit 7", name])
        assert r.exit_code == 7, r
        assert r.stdout == f"out-{name}\n".encode() and r.stderr == f"err-{name}\n".encode(), r


def test_a_node_serves_its_api_processes_only(cluster):
    """Whoever reaches a node's listeners directly (another pod, a compromised sandbox host)
    gets nothing without the cluster's credential, on either plane, bodies unread; probes and
    the metrics (API key) still answer; through an api process everything works."""
    node = cluster.nodes["n1"]
    key = space.bearer(cluster.key)
    for url, method, path, body, headers in (
            (node.url, "GET", "/v1/sandboxes", None, key),
            (node.url, "POST", "/v1/sandboxes", b'{"template":"minimal"}', key),
            (node.url, "GET", "/v1/info", None, dict(key, **{space.PEER_HEADER: "0" * 48})),
            (node.data_url, "GET", "/v1/sessions/ss-0000000000000000", None, space.bearer("a" * 64)),
            (node.data_url, "POST", "/v1/sessions/ss-0000000000000000/stdin", b"x" * (1 << 20), space.bearer("a" * 64)),
            (node.data_url, "GET", "/files?path=/etc/hostname", None, {"E2b-Sandbox-Id": "sb-0000000000000000"})):
        status, got = bare(url, method, path, body, headers)
        assert status == 401 and b"cluster" in got, (method, path, status, got[:200])
    # an api process reads no body of a request without credentials either (it relays bodies
    # of up to 16 MiB, and checks no token itself)
    api = cluster.apis[0]
    import socket
    for url, path, extra in ((api.data_url, "/v1/sessions/ss-0000000000000000/stdin", ""),
                             (api.url, "/v1/sandboxes", "Authorization: Bearer " + "0" * 32 + "\r\n")):
        with socket.create_connection(space.split_url(url), timeout=10) as s:
            # the head and a little of an 8 MiB body: the answer comes without the rest
            s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\n{extra}Content-Length: {8 << 20}\r\n\r\n".encode()
                      + b"x" * 65536)
            got = s.recv(4096)
        assert got.startswith(b"HTTP/1.1 401"), (path, got[:200])
    assert bare(node.url, "GET", "/v1/healthz")[0] == 200
    assert bare(node.url, "GET", "/metrics", None, key)[0] == 200
    # with it, as the api processes send it
    status, _ = bare(node.url, "GET", "/v1/sandboxes", None, dict(key, **{space.PEER_HEADER: cluster.peer_key}))
    assert status == 200
    # a client cannot smuggle one through an api process: the relay replaces it
    sb_id = cluster.spread["n1"][0]
    status, got = bare(cluster.apis[0].url, "POST", f"/v1/sandboxes/{sb_id}/timeout", b'{"timeout_s": 3600}',
                       dict(key, **{space.PEER_HEADER: "x" * 48}))
    assert status == 200, got


def test_a_tls_node_is_reached_over_verified_tls_only(cluster):
    """n3 serves both planes over TLS: its api processes verify it (the cluster's CA, the name
    space-node) and everything through them works (the rest of this module); plain HTTP to it
    gets nothing, and an api process that expects another name is refused by the handshake."""
    import ssl
    node = cluster.nodes["n3"]
    assert node.url.startswith("https://") and node.api.info()["version"]
    host, port = space.split_url(node.url)
    import socket
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"GET /v1/healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        s.settimeout(10)
        try:
            got = s.recv(4096)
        except (ConnectionResetError, socket.timeout):
            got = b""
    assert not got.startswith(b"HTTP/"), got
    # the certificate a client sees is the cluster CA's, for space-node
    ctx = ssl.create_default_context(cafile=cluster.tls["ca"])
    with socket.create_connection((host, port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname=TLS_NAME) as s:
            assert s.version() in ("TLSv1.2", "TLSv1.3"), s.version()
            assert s.selected_alpn_protocol() is None or s.selected_alpn_protocol() == "http/1.1"
    sb_id = cluster.spread["n3"][0]
    r = cluster.apis[1].api.run(sb_id, ["echo", "over-tls"])
    assert bytes(r.stdout) == b"over-tls\n", r
    wrong = cluster._own(space.Daemon("api-wrong-name", extra_args=[
        "--role", "api", "--store", cluster.url, "--cluster-key-file", cluster.peer_file,
        "--cluster-ca", cluster.tls["ca"], "--cluster-tls-name", "someone-else"]))
    try:
        wrong.start()
        resp = wrong.api.raw("POST", f"/v1/sandboxes/{sb_id}/timeout", {"timeout_s": 3600})
        assert resp.status == 502 and "certificate" in resp.body.decode().lower(), resp
    finally:
        # not cleanup(): it would delete every sandbox of the cluster it lists
        rc = wrong.stop()
        reports = wrong.sanitizer_reports()
        unexpected = wrong.unexpected_exits
        if rc == 0 and not reports and not unexpected:
            shutil.rmtree(wrong.root, ignore_errors=True)
        assert rc == 0 and not reports and not unexpected, (rc, reports, unexpected, wrong.log_tail())


def test_e2b_through_the_apis(cluster):
    """E2B's create on one api (relayed to the roomiest node), envd's files and filesystem on
    the other api's data plane (routed by E2b-Sandbox-Id), kill through the first."""
    from test_envd_fs import Envd
    a1, a2 = cluster.apis
    resp = space.http_request(a1.url, "POST", "/v2/sandboxes", {"templateID": "minimal", "timeout": 600},
                              {"X-API-KEY": cluster.key}, timeout=600)
    assert resp.status == 201, resp
    rec = resp.json
    sb = a2.api.sandbox(rec["sandboxID"])
    assert sb["state"] == "running" and sb["node"] in SLOTS, sb
    envd = Envd(a2, rec["sandboxID"], rec["envdAccessToken"])
    r, _ = envd.upload([("x.bin", b"cluster-bytes")], path="/tmp/x.bin")
    assert r.status == 200, r.status
    r, got = envd.http("GET", "/files", path="/tmp/x.bin")
    assert r.status == 200 and got == b"cluster-bytes", (r.status, got)
    st = envd.ok("Stat", {"path": "/tmp/x.bin"})
    assert int(st["entry"]["size"]) == len(b"cluster-bytes"), st
    r, _ = envd.http("GET", "/files", token="nope", path="/tmp/x.bin")
    assert r.status == 401, r.status
    resp = space.http_request(a2.url, "DELETE", f"/sandboxes/{rec['sandboxID']}", None,
                              {"X-API-KEY": cluster.key}, timeout=600)
    assert resp.status == 204, resp
    assert a1.api.sandbox(rec["sandboxID"])["state"] == "deleted"


def test_deletes_through_an_api_free_room_on_the_nodes(cluster):
    """Keep two sandboxes per node; the rest go (through an api, routed to each owner)."""
    api = cluster.apis[0].api
    ops = []
    for name, ids in cluster.spread.items():
        for sb_id in ids[2:]:
            ops.append((sb_id, api.delete_sandbox(sb_id)[1]["id"]))
        cluster.spread[name] = ids[:2]
    for sb_id, op_id in ops:
        got = cluster.apis[1].api.wait_op(op_id)
        assert got["state"] == "succeeded", got
        assert api.sandbox(sb_id)["state"] == "deleted"
        assert not space.qemu_pids(sb_id), f"QEMU of deleted {sb_id} still runs"


def test_postgres_restart_under_load_loses_no_operation(cluster):
    api = cluster.apis[1].api
    created, errors = [], []

    def load():
        for _ in range(6):
            try:
                sb, op = api.create_sandbox("minimal", metadata={"batch": "pg-restart"})
                created.append((sb["id"], op["id"]))
            except AssertionError as e:
                errors.append(str(e))
            time.sleep(0.3)

    t = threading.Thread(target=load)
    t.start()
    time.sleep(0.5)
    cluster.pg.restart()
    t.join()
    assert created, f"no create was accepted: {errors}"
    for sb_id, op_id in created:
        got = api.wait_op(op_id, timeout=space.CREATE_TIMEOUT)
        assert got["state"] == "succeeded", got
        assert api.sandbox(sb_id)["state"] == "running"
    # Those refused while it was down were refused clearly (503), never half-made.
    for e in errors:
        assert "503" in e, e


def pg_pids(pg):
    """The postmaster and its children (backends, background workers)."""
    root = pg.pid()
    pids = [root]
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == root:
            pids.append(int(p))
    return pids


def test_a_node_serves_while_postgres_stalls_and_its_writes_land_after(cluster):
    """PostgreSQL stopped (SIGSTOP: nothing refused, every query just hangs) for STALL_S
    seconds. A node's loop never waits on the database: a command streaming output keeps
    streaming, probes and reads answer at once; a command started meanwhile is answered once
    its session row is in the store (an api process routes by it), with its output."""
    node = cluster.nodes["n1"]
    sb_id = cluster.spread["n1"][0]
    ticker = node.api.create_session(sb_id, ["sh", "-c", "for i in $(seq 1 80); do echo tick-$i; sleep 0.1; done"])
    ticker.url = node.data_url  # straight from the node: the api processes read the store to route
    arrivals, started = [], {}

    def follow():
        for ev in ticker.attach(timeout=60).events():
            if ev.type == "stdout":
                arrivals.append(time.monotonic())
            if ev.type == "exit":
                return

    def run_one():
        s = node.api.create_session(sb_id, ["sh", "-c", "echo during-$0", "stall"])
        started["answered"] = time.monotonic()
        started["session"] = s
        started["result"] = s.collect(timeout=60)

    # Before the stall: an operation (the api process reads it from the store) and what the
    # lists should hold.
    later = {}
    api0, napi = cluster.apis[0].api, node.api
    reads = [(napi, "/v1/sandboxes"), (napi, "/v1/templates"), (napi, "/v1/snapshots"),
             (napi, "/v1/secrets"), (napi, "/v1/nodes"), (api0, "/v1/sandboxes"),
             (api0, f"/v1/sandboxes/{sb_id}"), (api0, "/v1/templates"), (api0, "/v1/nodes")]

    def read_later(api, path, k, out):
        began = time.monotonic()
        out[k] = (api.raw("GET", path, timeout=60), time.monotonic() - began)

    # What a node's request names and it does not hold (a session let go of or never there, a
    # token it has not seen, a sandbox it does not run) is read on the store's thread before
    # the handler: held until the database answers, then refused as it should be.
    made_up = "ss-" + secrets.token_hex(8)
    bad_token = {"Authorization": "Bearer " + secrets.token_hex(32)}
    held = [(node.data_url, "GET", f"/v1/sessions/{made_up}", None, bad_token, 404),
            (node.data_url, "GET", f"/v1/sandboxes/{sb_id}/files?path=/etc/hostname", None, bad_token, 401),
            (node.data_url, "GET", "/files?path=/etc/hostname", None,
             {"E2b-Sandbox-Id": sb_id, "X-Access-Token": secrets.token_hex(32)}, 401),
            (node.url, "POST", f"/v1/sandboxes/sb-{secrets.token_hex(8)}/pause", {},
             space.bearer(node.api_key), 404)]

    def held_later(k, out):
        url, method, path, body, headers, _ = held[k]
        began = time.monotonic()
        out[("held", k)] = (space.http_request(url, method, path, body, headers, timeout=60),
                            time.monotonic() - began)

    def create_later(out):
        # An api process's create: its template read and its intent wait for the database.
        began = time.monotonic()
        out["create"] = (api0.create_sandbox("minimal", metadata={"batch": "stall"}), time.monotonic() - began)

    t = threading.Thread(target=follow)
    t.start()
    while not arrivals:
        time.sleep(0.05)
    pids = pg_pids(cluster.pg)
    stopped_at = time.monotonic()
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        runner = threading.Thread(target=run_one)
        runner.start()
        # Reads that must go to the database (lists, rows not in memory), on the node and on an
        # api process: they wait for it, on the store's thread; the loops serve on meanwhile.
        waiting = [threading.Thread(target=read_later, args=(api, path, k, later))
                   for k, (api, path) in enumerate(reads)]
        waiting.append(threading.Thread(target=create_later, args=(later,)))
        waiting += [threading.Thread(target=held_later, args=(k, later)) for k in range(len(held))]
        for w in waiting:
            w.start()
        time.sleep(0.5)
        quick = []
        for _ in range(3):
            began = time.monotonic()
            assert space.http_request(node.url, "GET", "/v1/healthz", None, {}).status == 200
            assert space.http_request(cluster.apis[0].url, "GET", "/v1/healthz", None, {}).status == 200
            assert node.api.sandbox(sb_id)["state"] == "running"
            # one with no write waiting either: the node answers from memory
            assert node.api.sandbox(cluster.spread["n1"][1])["state"] == "running"
            quick.append(time.monotonic() - began)
            time.sleep(0.3)
        still_stopped = time.monotonic() - stopped_at < STALL_S
        time.sleep(max(0.0, STALL_S - (time.monotonic() - stopped_at)))
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    resumed_at = time.monotonic()
    t.join(timeout=60)
    runner.join(timeout=60)
    for w in waiting:
        w.join(timeout=60)
    assert still_stopped and max(quick) < 1.0, f"reads took {quick} while PostgreSQL was stopped"
    # Every read waited for the database and was then answered in full.
    (made, op), took = later.pop("create")
    assert took >= STALL_S - 1.5, f"the create was answered in {took:.1f}s while PostgreSQL was stopped"
    assert api0.wait_op(op["id"], timeout=space.CREATE_TIMEOUT)["state"] == "succeeded"
    api0.wait_op(api0.delete_sandbox(made["id"])[1]["id"], timeout=60)
    for k, (_url, _method, path, _body, _headers, status) in enumerate(held):
        resp, took = later.pop(("held", k))
        assert resp.status == status, (path, resp.status, resp.body)
        assert took >= STALL_S - 1.5, f"{path} answered in {took:.1f}s while PostgreSQL was stopped"
    assert sorted(later) == list(range(len(reads))), later
    for k, (api, path) in enumerate(reads):
        resp, took = later[k]
        assert resp.status == 200, (path, resp.status, resp.body)
        assert took >= STALL_S - 1.5, f"{path} answered in {took:.1f}s while PostgreSQL was stopped"
    ids = {sb["id"] for sb in later[0][0].json["sandboxes"]}
    assert set(cluster.spread["n1"]) <= ids, ids
    assert later[6][0].json["id"] == sb_id and later[6][0].json["node"] == "n1"
    assert any(t["name"] == "minimal" for t in later[1][0].json["templates"])
    assert len(later[4][0].json["nodes"]) == 3 and len(later[8][0].json["nodes"]) == 3
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:]) if stopped_at <= b <= resumed_at + 0.5]
    assert len(gaps) >= 10 and max(gaps) < STALL_S / 2, f"output stalled: {len(gaps)} events, gaps {max(gaps, default=0):.1f}s"
    r = started["result"]
    assert r.exit_code == 0 and r.stdout == b"during-stall\n", r
    assert started["answered"] >= resumed_at - 0.2, "the session was announced before the store had it"
    # The api process finds it in the store, and its end soon after.
    deadline = time.monotonic() + 10
    while (got := cluster.apis[1].api.session(sb_id, started["session"].id))["state"] != "exited":
        assert time.monotonic() < deadline, got
        time.sleep(0.2)
    assert got["exit_code"] == 0, got


def test_a_suspended_sandbox_is_restored_on_another_node_with_its_files_and_processes(cluster):
    api = cluster.apis[0].api
    sb_id = cluster.spread["n2"][0]
    r = api.run(sb_id, ["sh", "-c", "echo kept > /root/mark; sleep 100000 >/dev/null 2>&1 & echo $!"])
    assert r.exit_code == 0, r
    pid = r.stdout.decode().strip()
    sb = api.do(sb_id, "suspend")
    assert sb["state"] == "suspended" and sb["node"] == "n2", sb
    # n2 goes away (SIGTERM: its running VMs stay, but it stops renewing): once its lease
    # lapses its suspended sandbox belongs to no node, and any node may restore it.
    cluster.nodes["n2"].stop()
    deadline = time.monotonic() + LEASE_S * 3 + 10
    while api.sandbox(sb_id)["node"] is not None:
        assert time.monotonic() < deadline, api.sandbox(sb_id)
        time.sleep(0.5)
    assert api.sandbox(sb_id)["state"] == "suspended"
    sb = cluster.apis[1].api.do(sb_id, "restore")
    assert sb["state"] == "running" and sb["node"] in ("n1", "n3"), sb
    r = api.run(sb_id, ["sh", "-c", f"cat /root/mark; kill -0 {pid} && echo alive"])
    assert r.exit_code == 0 and r.stdout == b"kept\nalive\n", r
    # n2's running sandbox was lost with it.
    other = cluster.spread["n2"][1]
    assert api.sandbox(other)["state"] == "lost", api.sandbox(other)
    cluster.spread["n2"] = []
    cluster.restored = (sb_id, sb["node"])


def test_a_killed_node_has_its_sandboxes_marked_lost_and_the_others_keep_running(cluster):
    api = cluster.apis[0].api
    by_node = {}
    for sb in api.sandboxes():
        if sb["state"] == "running":
            by_node.setdefault(sb["node"], []).append(sb["id"])
    victims, others = by_node.get("n3", []), by_node.get("n1", [])
    assert victims and others, by_node
    cluster.nodes["n3"].kill()
    deadline = time.monotonic() + LEASE_S * 3 + 10
    while True:
        states = {s: api.sandbox(s)["state"] for s in victims}
        if all(v == "lost" for v in states.values()):
            break
        assert time.monotonic() < deadline, f"not marked lost: {states}"
        time.sleep(0.5)
    sb = api.sandbox(victims[0])
    assert "n3" in sb["error"] and "lease" in sb["error"], sb
    nodes = {n["id"]: n for n in api.call("GET", "/v1/nodes", "nodes")["nodes"]}
    assert nodes["n3"]["state"] == "lost" and nodes["n1"]["state"] == "up", nodes
    # The other node's sandboxes never noticed.
    for sb_id in others:
        assert api.sandbox(sb_id)["state"] == "running"
    r = cluster.apis[1].api.run(others[-1], ["echo", "still-here"])
    assert r.exit_code == 0 and r.stdout == b"still-here\n", r
    # A lost sandbox answers clearly, through either api.
    resp = cluster.apis[1].api.raw("POST", f"/v1/sandboxes/{victims[0]}/sessions", {"argv": ["true"]})
    assert resp.status == 503, (resp.status, resp.body)
    assert "lost" in resp.json["error"]["message"], resp.json
    # Delete needs no node: the record is closed (what was left of the VM went with its node).
    got = api.wait_op(api.delete_sandbox(victims[0])[1]["id"])
    assert got["state"] == "succeeded", got
    assert api.sandbox(victims[0])["state"] == "deleted"


def test_a_port_through_either_api(cluster):
    """A sandbox's port by name on an api process's data plane: the connection goes to the
    owning node, which checks the token and relays to the guest; the TCP tunnel through the
    other api. (docs/design/ports.md)"""
    import http.client
    import wsclient
    a1, a2 = cluster.apis
    rec = a1.api.new_sandbox("minimal", timeout_s=600)
    sb_id = rec["id"]
    try:
        r = a2.api.run(sb_id, ["sh", "-c", "mkdir -p /tmp/www && echo through-the-cluster > /tmp/www/index.html"
                               " && httpd -p 8000 -h /tmp/www"])
        assert r.exit_code == 0, r
        t = a2.api.raw("POST", f"/v1/sandboxes/{sb_id}/ports/8000/tokens", {"ttl_s": 600})
        assert t.status == 201, t
        tok = t.json["token"]
        for api_proc in (a1, a2):
            c = http.client.HTTPConnection("127.0.0.1", api_proc.data_port, timeout=60)
            host = f"8000-{sb_id}.localhost:{api_proc.data_port}"
            c.request("GET", "/index.html", headers={"Host": host, "X-Space-Token": tok})
            resp = c.getresponse()
            assert resp.status == 200 and resp.read() == b"through-the-cluster\n", api_proc.name
            c.close()
            c = http.client.HTTPConnection("127.0.0.1", api_proc.data_port, timeout=60)
            c.request("GET", "/index.html", headers={"Host": host})
            resp = c.getresponse()
            assert resp.status == 401, (api_proc.name, resp.status, resp.read())
            c.close()
        ws = wsclient.WebSocket("127.0.0.1", a1.data_port, f"/v1/sandboxes/{sb_id}/ports/8000/tunnel",
                                headers={"Authorization": f"Bearer {tok}"})
        assert ws.status == 101, ws.head
        ws.send_binary(b"GET /index.html HTTP/1.0\r\n\r\n")
        got = b""
        while b"through-the-cluster" not in got:
            op, data = ws.recv()
            assert op == 2, (op, data, got)
            got += data
        ws.close()
    finally:
        a1.api.remove_sandbox(sb_id)
