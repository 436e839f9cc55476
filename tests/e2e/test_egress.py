"""test_egress.py -- egress from inside real sandboxes (issue 7): every way out of a `base`
guest goes through its gateway, which lets through only what the policy allows, refuses DNS
forgeries, shared CDN addresses, Host switches (inside TLS too: it intercepts TLS by default),
spoofed sources, UDP, ICMP, metadata, loopback and other sandboxes, injects credentials the
guest never sees, and audits each decision; the gateway itself runs confined (issue 21: no
inherited environment, a seccomp allowlist, its own cgroup leaf).

The "internet" is tests/e2e/gwlab.py (without its standalone gateway): namespaces of our own holding a DNS server and HTTP(S)
echo servers (certificates from a test CA this module's daemon trusts upstream through
--egress-ca-file). Nothing leaves this machine.
"""

import json
import time
import os
import socket
import threading
import time

import pytest

import gwlab
import space

SECRET_NAME = "api-token"
SECRET_VALUE = "sk-SPACE-test-9f3c1e0a7b"
LAB_CA = "/tmp/lab-ca.crt"
# What the daemon's environment holds and no gateway may (a key it was started with, the
# store's password): the daemon takes its key from --api-key, these only sit in its env.
DAEMON_ENV_SECRETS = {"SPACE_API_KEY": "sk-daemon-env-5a1f0c3e9d", "PGPASSWORD": "pg-secret-77c2e1a9b4"}
# The node's refused range: TEST-NET-1, routed nowhere here (only its appearance on the
# gateway's command line is checked; the refusal itself is test_gateway.py's).
NODE_REFUSE = "192.0.2.0/24"

BASE_POLICY = {
    "allow": ["allowed.test", "*.allowed.test", "cdn-a.test", "inject.test:443",
              "loop.test", "private.test", "metadata.test", "hostaddr.test"],
    "deny": ["blocked.test"],
    "inject": [{"host": "inject.test", "header": "Authorization", "secret": SECRET_NAME,
                "prefix": "Bearer "}],
}


@pytest.fixture(scope="module")
def lab():
    lab = gwlab.Lab()
    yield lab
    lab.close()


@pytest.fixture(scope="module")
def net_daemon(lab):
    d = space.Daemon("spaced-egress", extra_args=["--dns-upstream", gwlab.DNS_ADDR + ":53",
                                                  "--egress-ca-file", lab.ca_cert,
                                                  "--egress-refuse", NODE_REFUSE,
                                                  "--egress-max-conns", "64"],
                     env=DAEMON_ENV_SECRETS)
    try:
        d.start()
        yield d
    finally:
        d.cleanup()


@pytest.fixture(scope="module")
def napi(net_daemon):
    return net_daemon.api


@pytest.fixture(scope="module")
def secret(napi):
    r = napi.raw("PUT", f"/v1/secrets/{SECRET_NAME}", {"value": SECRET_VALUE, "hosts": ["inject.test"]})
    assert r.status in (200, 201), r
    assert SECRET_VALUE not in r.body.decode()
    return SECRET_NAME


@pytest.fixture(scope="module")
def gsb(napi, lab, secret):
    """A running `base` sandbox with BASE_POLICY and the lab's CA at LAB_CA (for TLS an entry
    marks passthrough, which the guest verifies against the real server; intercepted TLS it
    verifies with its system bundle, which holds the sandbox's CA)."""
    rec = napi.new_sandbox("base", network=BASE_POLICY, timeout_s=3600)
    with open(lab.ca_cert, "rb") as f:
        r = napi.run(rec["id"], ["sh", "-c", f"cat > {LAB_CA}"], stdin=f.read())
    assert r.exit_code == 0, r
    yield rec
    if napi.sandbox(rec["id"])["state"] != "deleted":
        napi.remove_sandbox(rec["id"])


@pytest.fixture
def policy(napi, gsb):
    """Sets gsb's policy for one test; BASE_POLICY again afterwards."""
    def put(p):
        return napi.call("PUT", f"/v1/sandboxes/{gsb['id']}/network", None, p).json
    yield put
    put(BASE_POLICY)


def sh(api, sb, script, timeout=60):
    """A script run as root in the guest: untrusted code may be root there."""
    r = api.run(sb["id"], ["bash", "-c", script], timeout=timeout, user="root")
    return r.exit_code, bytes(r.stdout).decode(errors="replace"), bytes(r.stderr).decode(errors="replace")


def curl(api, sb, url, *args, timeout=60):
    """curl in the guest: (exit code, body, stderr); an HTTP error status is exit code 22 (the
    body kept), short timeouts so a dropped packet fails in seconds."""
    argv = " ".join(["curl", "-sS", "--fail-with-body", "--connect-timeout", "5", "--max-time", "15"] +
                    ["'%s'" % a for a in args] + ["'%s'" % url])
    return sh(api, sb, argv, timeout=timeout)


def egress(api, sb, **q):
    return api.call("GET", f"/v1/sandboxes/{sb['id']}/egress?limit=10000", None).json["records"]


def find(records, **want):
    return [r for r in records if all(r.get(k) == v for k, v in want.items())]


# ---------------------------------------------------------------------------
# What is allowed works


def test_the_guest_is_wired_to_its_gateway(napi, gsb):
    rc, out, err = sh(napi, gsb, "ip -4 addr show eth0; ip route; cat /etc/resolv.conf")
    assert rc == 0, err
    assert "169.254.0.21/30" in out and "default via 169.254.0.22" in out, out
    assert "nameserver 169.254.0.22" in out, out


def test_an_allowed_name_works_over_http_and_https(napi, gsb, lab):
    rc, out, err = curl(napi, gsb, "http://allowed.test/plain")
    assert rc == 0, err
    rec = json.loads(out)
    assert rec["headers"]["host"] == ["allowed.test"] and rec["server"] == "198.51.100.10", rec
    rc, out, err = curl(napi, gsb, "https://allowed.test/tls")
    assert rc == 0, err
    assert json.loads(out)["tls"] is True
    # A wildcard entry covers a name one label down.
    rc, out, err = curl(napi, gsb, "http://www.allowed.test/wild")
    assert rc == 0 and json.loads(out)["headers"]["host"] == ["www.allowed.test"], (rc, out, err)


def test_tls_is_intercepted_unless_an_entry_says_passthrough(napi, gsb, policy):
    rc, out, err = curl(napi, gsb, "https://allowed.test/", "-v")
    assert rc == 0, err
    assert f"SPACE sandbox {gsb['id']} egress CA" in err and "gwlab-ca" not in err, err
    policy({"allow": [{"name": "allowed.test", "tls": "passthrough"}]})
    rc, out, err = curl(napi, gsb, "https://allowed.test/", "--cacert", LAB_CA, "-v")
    assert rc == 0, err
    assert "gwlab-ca" in err, err  # the real server's issuer reached the guest
    recs = find(egress(napi, gsb), proto="tls", name="allowed.test", verdict="allow")
    assert any(r["reason"].endswith("(tls passthrough)") for r in recs), recs


def test_tls_fronting_on_a_shared_address_is_refused(napi, gsb, lab):
    """cdn-a.test is allowed, cdn-b.test shares its address: `curl -k https://cdn-a.test/ -H
    'Host: cdn-b.test'` used to reach cdn-b's virtual host through TLS passed through."""
    mark = lab.mark()
    rc, out, err = curl(napi, gsb, "https://cdn-a.test/front", "-k", "-H", "Host: cdn-b.test")
    assert rc == 22 and "does not match the TLS server name cdn-a.test" in out, (rc, out, err)
    recs = find(egress(napi, gsb), proto="https", name="cdn-b.test", verdict="deny")
    assert recs and recs[-1]["dst"] == "198.51.100.13:443", recs
    rc, out, err = curl(napi, gsb, "https://cdn-a.test/front-ok", "-k")
    assert rc == 0 and json.loads(out)["headers"]["host"] == ["cdn-a.test"], (rc, out, err)
    assert not [r for r in lab.requests(since=mark) if r.get("host") == "cdn-b.test"]


# ---------------------------------------------------------------------------
# What is not allowed fails, however it is asked for


def test_a_name_not_allowed_fails_at_dns_and_by_address(napi, gsb, lab):
    mark = lab.mark()
    rc, out, err = sh(napi, gsb, "getent hosts blocked.test; getent hosts nowhere.test; echo rc=$?")
    assert "198.51.100.11" not in out and out.strip().endswith("rc=2"), out
    rc, out, err = curl(napi, gsb, "http://198.51.100.11/direct")
    assert rc != 0 or "403" in out, (rc, out)
    rc, out, err = curl(napi, gsb, "http://blocked.test/", "--resolve", "blocked.test:80:198.51.100.11")
    assert rc != 0 or "egress" in out.lower(), (rc, out)
    assert not [r for r in lab.requests(since=mark) if r["kind"] in ("http", "https")
                and r["server"].startswith("198.51.100.11")]


def test_a_forged_hosts_entry_for_an_allowed_name_fails(napi, gsb, lab):
    mark = lab.mark()
    rc, out, err = sh(napi, gsb, "cp /etc/hosts /tmp/hosts.bak && "
                      "echo '198.51.100.11 allowed.test' >> /etc/hosts && "
                      "curl -sS --connect-timeout 5 --max-time 15 http://allowed.test/forged; echo; "
                      "curl -sS --connect-timeout 5 --max-time 15 --cacert %s https://allowed.test/forged; "
                      "echo rc=$?; cp /tmp/hosts.bak /etc/hosts" % LAB_CA)
    # Plain HTTP: the gateway's 403 names why; HTTPS: the handshake is cut.
    assert "198.51.100.11 was not handed out for allowed.test" in out and "rc=0" not in out, out
    assert not [r for r in lab.requests(since=mark) if r.get("server", "").startswith("198.51.100.11")]


def test_an_allowed_sni_to_a_blocked_names_address_fails(napi, gsb, lab):
    mark = lab.mark()
    rc, out, err = curl(napi, gsb, "https://allowed.test/", "--cacert", LAB_CA,
                        "--resolve", "allowed.test:443:198.51.100.11")
    assert rc != 0, (out, err)
    # A shared CDN address: allowing cdn-a.test opens nothing for cdn-b.test.
    rc, out, err = curl(napi, gsb, "http://cdn-a.test/ok")
    assert rc == 0 and json.loads(out)["headers"]["host"] == ["cdn-a.test"], (rc, out, err)
    rc, out, err = curl(napi, gsb, "https://cdn-b.test/", "--cacert", LAB_CA,
                        "--resolve", "cdn-b.test:443:198.51.100.13")
    assert rc != 0, (out, err)
    rc, out, err = curl(napi, gsb, "http://198.51.100.13/", "-H", "Host: cdn-b.test")
    assert "403" in out or rc != 0, (rc, out)
    assert not [r for r in lab.requests(since=mark) if r.get("host") == "cdn-b.test"]


def test_an_allowed_host_sent_to_a_blocked_address_fails(napi, gsb, lab):
    mark = lab.mark()
    rc, out, err = curl(napi, gsb, "http://198.51.100.11/", "-H", "Host: allowed.test", "-i")
    assert "403" in out, (rc, out, err)
    assert not [r for r in lab.requests(since=mark) if r.get("server", "").startswith("198.51.100.11")]


KEEPALIVE = r'''
import socket, sys
s = socket.create_connection(("allowed.test", 80), 5)
def req(host):
    s.sendall(b"GET /ka HTTP/1.1\r\nHost: " + host + b"\r\n\r\n")
    data = b""
    s.settimeout(10)
    while b"\r\n\r\n" not in data:
        d = s.recv(65536)
        if not d:
            return data
        data += d
    head, body = data.split(b"\r\n\r\n", 1)
    n = 0
    for l in head.split(b"\r\n"):
        if l.lower().startswith(b"content-length:"):
            n = int(l.split(b":")[1])
    while len(body) < n:
        d = s.recv(65536)
        if not d:
            break
        body += d
    return head + b"\r\n\r\n" + body
print(req(b"allowed.test").split(b"\r\n")[0].decode())
print(req(b"blocked.test").split(b"\r\n")[0].decode())
'''


def test_a_second_request_switching_host_on_a_keepalive_connection_fails(napi, gsb, lab):
    mark = lab.mark()
    rc, out, err = sh(napi, gsb, "python3 - <<'EOF'\n%s\nEOF" % KEEPALIVE)
    lines = out.split("\n")
    assert lines[0].startswith("HTTP/1.1 200"), (out, err)
    assert lines[1].startswith("HTTP/1.1 403"), (out, err)
    assert [r["host"] for r in lab.requests(since=mark)] == ["allowed.test"]


UDP_PROBE = r'''
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
for dst in [("198.51.100.10", 9999), ("169.254.0.22", 9999), ("198.51.100.53", 9999)]:
    s.sendto(b"hello", dst)
    try:
        print("reply", dst, s.recvfrom(100))
    except socket.timeout:
        print("silent", dst)
'''


def test_udp_icmp_and_metadata_are_unreachable(napi, gsb, lab):
    mark = lab.mark()
    rc, out, err = sh(napi, gsb, "python3 - <<'EOF'\n%s\nEOF" % UDP_PROBE)
    assert "reply" not in out and out.count("silent") == 3, (out, err)
    rc, out, err = sh(napi, gsb, "ping -c 1 -W 2 198.51.100.10; echo rc=$?")
    assert "rc=0" not in out, out
    rc, out, err = curl(napi, gsb, "http://169.254.169.254/latest/meta-data/")
    assert rc != 0 or "403" in out, (rc, out)
    rc, out, err = curl(napi, gsb, "http://metadata.test/latest/meta-data/")
    assert rc != 0 or "403" in out, (rc, out)
    rc, out, err = curl(napi, gsb, "http://private.test/")
    assert rc != 0 or "403" in out, (rc, out)
    rc, out, err = curl(napi, gsb, "http://hostaddr.test/")
    assert rc != 0 or "403" in out, (rc, out)
    assert not lab.requests(since=mark) and not lab.udp_received()


class HostService:
    """A TCP service on the host's loopback, counting the connections it gets."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.hits += 1
            c.close()


def test_the_hosts_loopback_services_are_unreachable(napi, gsb):
    svc = HostService()
    try:
        for url in ["http://127.0.0.1:%d/" % svc.port, "http://loop.test:%d/" % svc.port,
                    "http://169.254.0.22:%d/" % svc.port]:
            rc, out, err = curl(napi, gsb, url)
            assert rc != 0 or "403" in out, (url, rc, out)
        assert svc.hits == 0
    finally:
        svc.sock.close()


def test_a_spoofed_source_address_is_dropped(napi, gsb, lab):
    mark = lab.mark()
    # (not 169.254.0.23: that is the link's broadcast address, which the guest never sends from)
    rc, out, err = sh(napi, gsb, "ip addr add 10.9.9.9/32 dev eth0 && "
                      "curl -sS --connect-timeout 4 --interface 10.9.9.9 http://198.51.100.10/spoof; "
                      "echo rc=$?; ip addr del 10.9.9.9/32 dev eth0")
    assert "rc=0" not in out, out
    assert not [r for r in lab.requests(since=mark) if r.get("path") == "/spoof"]


def test_a_second_sandbox_is_unreachable(napi, gsb):
    other = napi.new_sandbox("base", network={"allow": ["allowed.test"]}, timeout_s=600)
    try:
        job = napi.create_session(other["id"], ["python3", "-c",
                                                "import socket,sys\ns=socket.socket()\n"
                                                "s.bind(('0.0.0.0',8080));s.listen()\ns.settimeout(20)\n"
                                                "try:\n  s.accept();print('CONNECTED')\n"
                                                "except socket.timeout:\n  print('nobody')\n"]).start(timeout=60)
        for url in ["http://169.254.0.21:8080/", "http://169.254.0.22:8080/"]:
            rc, out, err = curl(napi, gsb, url)
            assert rc != 0 or "403" in out, (url, rc, out)
        r = job.wait()
        assert b"nobody" in bytes(r.stdout), r
    finally:
        napi.remove_sandbox(other["id"])


# ---------------------------------------------------------------------------
# Credentials


def test_an_injected_credential_arrives_upstream_and_never_in_the_guest(napi, net_daemon, gsb, lab):
    mark = lab.mark()
    # The guest's own Authorization is replaced, and the guest trusts the sandbox CA through
    # its system bundle (no --cacert).
    rc, out, err = curl(napi, gsb, "https://inject.test/v1/models", "-H", "Authorization: Bearer guest", "-v")
    assert rc == 0, err
    assert SECRET_VALUE not in out and SECRET_VALUE not in err
    got = lab.wait_request(lambda r: r["kind"] == "https" and r["path"] == "/v1/models", since=mark)
    assert got, lab.requests(since=mark)
    auth = {k.lower(): v for k, v in got["headers"].items()}["authorization"]
    assert auth == "Bearer " + SECRET_VALUE, got
    assert "authorization" in json.loads(out)["headers"]
    # Nowhere in the guest: environment, files, what it can read.
    # (the command names the secret in two halves, so that its own argv does not hold it)
    half = len(SECRET_VALUE) // 2
    pat = "\"$(printf %%s%%s '%s' '%s')\"" % (SECRET_VALUE[:half], SECRET_VALUE[half:])
    rc, out, err = sh(napi, gsb, "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c -F %s; "
                      "grep -rIl -F %s /etc /root /home /tmp /var /usr/local /run 2>/dev/null | head; "
                      "echo done" % (pat, pat), timeout=180)
    assert out.split("\n")[0].strip() == "0" and out.strip().endswith("done") and \
        len(out.strip().split("\n")) == 2, out
    # Nor in any API answer, the daemon's log or the gateway's files.
    for path in [f"/v1/secrets", f"/v1/secrets/{SECRET_NAME}", f"/v1/sandboxes/{gsb['id']}",
                 f"/v1/sandboxes/{gsb['id']}/egress"]:
        assert SECRET_VALUE not in napi.raw("GET", path).body.decode(), path
    assert SECRET_VALUE not in net_daemon.log_text()
    run_dir = os.path.join(net_daemon.state_dir, "sandboxes", gsb["id"])
    for root, _, files in os.walk(run_dir):
        for f in files:
            if f.endswith((".log", ".jsonl")) or "audit" in f:
                with open(os.path.join(root, f), "rb") as fh:
                    assert SECRET_VALUE.encode() not in fh.read(), f


def test_injection_is_audited_by_header_name(napi, gsb):
    rc, out, err = curl(napi, gsb, "https://inject.test/audited")
    assert rc == 0, err
    recs = find(egress(napi, gsb), proto="https", name="inject.test", verdict="allow")
    assert recs and any(r.get("injected") == ["Authorization"] for r in recs), recs


def test_a_binding_narrowed_later_stops_the_value_at_the_daemon(napi, net_daemon, gsb, lab):
    """The policy was accepted while the secret was bound to inject.test; bound elsewhere now,
    its value is no longer sent to the gateway: the upstream sees the guest's own header."""
    r = napi.raw("PUT", f"/v1/secrets/{SECRET_NAME}", {"value": SECRET_VALUE, "hosts": ["elsewhere.test"]})
    assert r.status == 200, r
    try:
        mark = lab.mark()
        deadline = time.monotonic() + 30
        while True:
            rc, out, err = curl(napi, gsb, "https://inject.test/narrowed", "-H", "Authorization: Bearer guest")
            assert rc == 0, err
            got = lab.wait_request(lambda q: q["kind"] == "https" and q["path"] == "/narrowed", since=mark)
            auth = {k.lower(): v for k, v in got["headers"].items()}.get("authorization")
            if auth == "Bearer guest" or time.monotonic() > deadline:
                break
            mark = lab.mark()
            time.sleep(0.5)
        assert auth == "Bearer guest", got
        assert SECRET_VALUE not in json.dumps(lab.requests(since=mark))
        assert "is not bound to inject.test" in net_daemon.log_text()
    finally:
        r = napi.raw("PUT", f"/v1/secrets/{SECRET_NAME}", {"value": SECRET_VALUE, "hosts": ["inject.test"]})
        assert r.status == 200, r


# ---------------------------------------------------------------------------
# Policy changes and the audit


def test_a_policy_change_applies_to_the_next_connection(napi, gsb, policy):
    rc, out, err = curl(napi, gsb, "http://allowed.test/before")
    assert rc == 0, err
    got = policy({"allow": ["cdn-a.test"]})
    assert got["allow"] == ["cdn-a.test"], got
    rc, out, err = curl(napi, gsb, "http://allowed.test/after")
    assert rc != 0 or "403" in out, (rc, out)
    policy({"allow": ["allowed.test"]})
    rc, out, err = curl(napi, gsb, "http://allowed.test/again")
    assert rc == 0, err


def test_a_cidr_rule_allows_raw_tcp_without_a_name(napi, gsb, policy):
    probe = ("python3 -c \"import socket;s=socket.create_connection(('203.0.113.11',7000),5);"
             "s.sendall(b'ping');s.settimeout(5);print(s.recv(10))\"")
    rc, out, err = sh(napi, gsb, probe)
    assert "ping" not in out, out
    policy({"allow": ["203.0.113.0/24:7000"]})
    rc, out, err = sh(napi, gsb, probe)
    assert "b'ping'" in out, (out, err)


def test_the_audit_records_each_case(napi, gsb):
    curl(napi, gsb, "http://allowed.test/audit-allow")
    curl(napi, gsb, "http://198.51.100.11/audit-deny", "-H", "Host: blocked.test")
    sh(napi, gsb, "getent hosts blocked.test")
    recs = egress(napi, gsb)
    for r in recs:
        for k in ("time", "sandbox", "proto", "verdict", "reason"):
            assert k in r, r
        assert r["sandbox"] == gsb["id"]
        assert "dst" in r if r["proto"] != "dns" else "name" in r, r
    assert find(recs, proto="http", name="allowed.test", verdict="allow")
    assert find(recs, proto="dns", name="blocked.test", verdict="deny")
    denied = [r for r in recs if r["verdict"] == "deny" and r.get("dst", "").startswith("198.51.100.11")]
    assert denied, recs
    allowed = [r for r in find(recs, proto="http", name="allowed.test") if "bytes_in" in r]
    assert allowed and any(r["bytes_in"] > 0 for r in allowed), allowed


# ---------------------------------------------------------------------------
# Lifecycle: the network comes back after every restore and fork; default deny


def test_the_network_comes_back_after_suspend_restore_and_fork(napi, gsb):
    napi.do(gsb["id"], "suspend")
    napi.do(gsb["id"], "restore")
    rc, out, err = curl(napi, gsb, "http://allowed.test/restored")
    assert rc == 0, err
    r = napi.fork(gsb["id"])
    child_id = r["children"][0]
    op = napi.wait_op(r["operation"]["id"])
    assert op["state"] == "succeeded", op
    try:
        child = napi.sandbox(child_id)
        assert child["network"]["allow"] == napi.sandbox(gsb["id"])["network"]["allow"]
        rc, out, err = curl(napi, child, "http://allowed.test/forked")
        assert rc == 0, err
        rc, out, err = curl(napi, child, "http://blocked.test/")
        assert rc != 0 or "403" in out
        # Its own CA: the parent's is not what the child's gateway signs with.
        _, pca, _ = sh(napi, gsb, "cat /usr/local/share/ca-certificates/space-egress.crt")
        _, cca, _ = sh(napi, child, "cat /usr/local/share/ca-certificates/space-egress.crt")
        assert "BEGIN CERTIFICATE" in pca and "BEGIN CERTIFICATE" in cca and pca != cca
    finally:
        napi.remove_sandbox(child_id)


def gw_pid_of(daemon, sb_id):
    with open(os.path.join(daemon.state_dir, "sandboxes", sb_id, "gw.pid")) as f:
        return int(f.read().split()[0])


def gw_cgroups(pid):
    """{controller: path} of a process (v1: one per controller; v2: "")."""
    out = {}
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            for c in ctrls.split(",") if ctrls else [""]:
                out[c] = path
    return out


def gw_memory_limit(pid):
    cg = gw_cgroups(pid)
    if "memory" in cg:
        path = f"/sys/fs/cgroup/memory{cg['memory']}/memory.limit_in_bytes"
    else:
        path = f"/sys/fs/cgroup{cg['']}/memory.max"
    with open(path) as f:
        return path, f.read().strip()


def test_the_gateway_is_confined(net_daemon, napi):
    """A real sandbox's gateway: nothing of the daemon's environment (the daemon was started
    with SPACE_API_KEY and PGPASSWORD set), a seccomp filter, a cgroup leaf of its own with a
    memory limit, kept by the gateway across a daemon restart and removed with the sandbox;
    the node's --egress-refuse and --egress-max-conns passed on."""
    rec = napi.new_sandbox("minimal", network={"allow": ["allowed.test"]}, timeout_s=600)
    pid = gw_pid_of(net_daemon, rec["id"])
    with open(f"/proc/{pid}/environ", "rb") as f:
        env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if kv)
    assert set(env) <= {b"ASAN_OPTIONS", b"UBSAN_OPTIONS", b"LSAN_OPTIONS"}, sorted(env)
    for value in DAEMON_ENV_SECRETS.values():
        assert value.encode() not in b"".join(env.values())
    with open(f"/proc/{pid}/status") as f:
        status = dict(line.split(":", 1) for line in f)
    assert status["Seccomp"].strip() == "2" and status["NoNewPrivs"].strip() == "1", status
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = f.read().split(b"\0")
    assert argv[argv.index(b"--refuse") + 1] == NODE_REFUSE.encode()
    assert argv[argv.index(b"--max-conns") + 1] == b"64"
    leaf = f"space-{net_daemon.state_tag()}-gw/{rec['id']}"
    cgs = gw_cgroups(pid)
    mine = ("memory", "pids") if "memory" in cgs else ("",)  # v1 (or hybrid), else v2
    assert all(cgs[c].endswith("/" + leaf) for c in mine), cgs
    path, limit = gw_memory_limit(pid)
    assert limit != "max" and int(limit) < 4 << 30, (path, limit)
    # a daemon restart: the same gateway, still in its leaf
    net_daemon.restart()
    assert gw_pid_of(net_daemon, rec["id"]) == pid and gw_memory_limit(pid) == (path, limit)
    napi.remove_sandbox(rec["id"])
    deadline = time.monotonic() + 10
    while os.path.exists(os.path.dirname(path)):
        assert time.monotonic() < deadline, f"{os.path.dirname(path)} outlived its sandbox"
        time.sleep(0.1)


def test_a_sandbox_without_a_policy_reaches_nothing(napi, lab):
    rec = napi.new_sandbox("base", timeout_s=600)
    try:
        assert rec["network"] == {"allow": [], "deny": [], "inject": []} or \
            not rec["network"].get("allow"), rec["network"]
        mark = lab.mark()
        rc, out, err = sh(napi, rec, "getent hosts allowed.test; echo rc=$?; "
                          "curl -sS -f --connect-timeout 4 --max-time 8 http://198.51.100.10/; echo rc=$?")
        assert "198.51.100.10 " not in out and "rc=0" not in out.split("\n", 2)[-1], out
        assert not lab.requests(since=mark)
    finally:
        napi.remove_sandbox(rec["id"])
