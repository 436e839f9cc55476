"""test_gateway.py -- space-gw alone (the ASan+UBSan build) between a guest netns and gwlab's
small internet: DNS, SNI and Host checks against handed-out addresses, CIDR rules, reserved
and host addresses, the ruleset's drops, injection, policy changes, the audit log, and 1000
concurrent connections (docs/design/egress.md). Needs root; about a minute."""

import hashlib
import json
import os
import resource
import socket
import ssl
import threading
import time

import pytest

import gwlab
from gwlab import dns, http, sha256, tcp, tls_http

# Network namespaces need root (make test runs as root; a skip shows in the closing line).
# A missing space-gw is a failure, not a skip: make test builds it.
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")


def test_the_sanitized_gateway_is_built():
    assert os.access(gwlab.SAN_GW, os.X_OK), f"{gwlab.SAN_GW} missing (make san-bins)"

SECRET = "Bearer s3cr3t-value-0123"
KEY = "k3y-value-4567"
NOBODY = 65534


@pytest.fixture(scope="module")
def lab():
    lab = gwlab.Lab()
    try:
        lab.sandbox()
        # as the daemon runs it: privileges dropped, the audit dir the gateway's own
        os.chmod(lab.tmp, 0o755)
        os.makedirs(os.path.join(lab.tmp, "audit"))
        os.chown(os.path.join(lab.tmp, "audit"), NOBODY, NOBODY)
        lab.start_gateway(extra=["--uid", str(NOBODY), "--gid", str(NOBODY)])
        lab.sandbox_ca = lab.make_ca("sandbox-ca")
        yield lab
        lab.stop_gateway()  # exit status 0, no sanitizer report
    finally:
        lab.close()


def records(lab, **match):
    """Audit records with every given field equal."""
    return [r for r in lab.audit() if all(r.get(k) == v for k, v in match.items())]


def wait_record(lab, **match):
    end = time.time() + 5
    while not records(lab, **match):
        assert time.time() < end, f"no audit record {match}; have {lab.audit()[-5:]}"
        time.sleep(0.05)
    return records(lab, **match)[-1]


def get(host, path="/"):
    return [("GET", path, [("Host", host)])]


def closed_without_answer(lab, addr, port=80, host="x.test"):
    """The gateway closed the connection without a response (refused before relaying)."""
    return lab.in_guest(http, addr, get(host), port=port) == []


def test_privileges_dropped(lab):
    status = dict(line.split(":", 1) for line in open(f"/proc/{lab.gw.pid}/status"))
    assert status["Uid"].split() == [str(NOBODY)] * 4 and status["Gid"].split() == [str(NOBODY)] * 4
    assert status["CapEff"].strip() == "0" * 16 and status["NoNewPrivs"].strip() == "1"
    assert status["Groups"].strip() == ""


# ---- names

def test_allowed_name_http_and_https(lab):
    lab.policy({"allow": ["allowed.test"]})
    assert lab.in_guest(dns, "allowed.test") == (0, ["198.51.100.10"])
    assert lab.in_guest(dns, "allowed.test", qtype=28) == (0, [])  # AAAA: NOERROR, empty
    [(status, _, body)] = lab.in_guest(http, "198.51.100.10", get("allowed.test"))
    assert status == 200 and json.loads(body)["server"] == "198.51.100.10"
    issuer, [(status, _, body)] = lab.in_guest(tls_http, "198.51.100.10", "allowed.test",
                                               get("allowed.test"), lab.ca_cert)
    # not intercepted: the upstream's own certificate
    assert status == 200 and issuer == "gwlab-ca" and json.loads(body)["tls"]
    wait_record(lab, proto="dns", name="allowed.test", verdict="allow")
    wait_record(lab, proto="http", name="allowed.test", verdict="allow", dst="198.51.100.10:80")
    r = wait_record(lab, proto="tls", name="allowed.test", verdict="allow", dst="198.51.100.10:443")
    assert r["bytes_out"] > 0 and r["bytes_in"] > 0


def test_name_not_allowed(lab):
    lab.policy({"allow": ["allowed.test"]})
    assert lab.in_guest(dns, "blocked.test") == (3, [])
    wait_record(lab, proto="dns", name="blocked.test", verdict="deny")
    [(status, _, body)] = lab.in_guest(http, "198.51.100.11", get("blocked.test"))
    assert status == 403 and b"not allowed" in body
    with pytest.raises((ssl.SSLError, OSError)):
        lab.in_guest(tls_http, "198.51.100.11", "blocked.test", get("blocked.test"), lab.ca_cert)
    wait_record(lab, proto="tls", name="blocked.test", verdict="deny")
    wait_record(lab, proto="http", name="blocked.test", verdict="deny")


def test_forged_address(lab):
    """An allowed SNI/Host to an address not handed out for it (here: blocked.test's)."""
    lab.policy({"allow": ["allowed.test"]})
    assert lab.in_guest(dns, "allowed.test")[0] == 0
    [(status, _, body)] = lab.in_guest(http, "198.51.100.11", get("allowed.test"))
    assert status == 403 and b"was not handed out for allowed.test" in body
    with pytest.raises((ssl.SSLError, OSError)):
        lab.in_guest(tls_http, "198.51.100.11", "allowed.test", get("allowed.test"), lab.ca_cert)
    r = wait_record(lab, proto="tls", name="allowed.test", verdict="deny", dst="198.51.100.11:443")
    assert "not handed out" in r["reason"]


def test_keepalive_host_switch_gets_403(lab):
    """cdn-a and cdn-b share an address; only cdn-a is allowed."""
    lab.policy({"allow": ["cdn-a.test"]})
    assert lab.in_guest(dns, "cdn-a.test") == (0, ["198.51.100.13"])
    out = lab.in_guest(http, "198.51.100.13", get("cdn-a.test") + get("cdn-b.test") + get("cdn-a.test"))
    assert [s for s, _, _ in out] == [200, 403]
    wait_record(lab, proto="http", name="cdn-b.test", verdict="deny")


def test_wildcard_and_deny(lab):
    lab.policy({"allow": ["*.test"], "deny": ["blocked.test"]})
    assert lab.in_guest(dns, "allowed.test")[0] == 0
    assert lab.in_guest(dns, "blocked.test") == (3, [])
    r = wait_record(lab, proto="dns", name="blocked.test", verdict="deny")
    assert r["reason"] == "denied by blocked.test"


# ---- addresses

def test_cidr_allows_raw_tcp(lab):
    lab.policy({"allow": ["allowed.test"]})
    assert lab.in_guest(tcp, "203.0.113.10", 7000, b"\x00\x01raw bytes") == b""
    wait_record(lab, proto="tcp", dst="203.0.113.10:7000", verdict="deny")
    lab.policy({"allow": ["203.0.113.0/24"]})
    assert lab.in_guest(tcp, "203.0.113.10", 7000, b"\x00\x01raw bytes") == b"\x00\x01raw bytes"
    r = wait_record(lab, proto="tcp", dst="203.0.113.10:7000", verdict="allow")
    assert r["reason"] == "allowed by 203.0.113.0/24" and r["bytes_out"] == 11


def test_opaque_needs_a_port_rule(lab):
    lab.policy({"allow": ["raw.test"]})
    assert lab.in_guest(dns, "raw.test")[0] == 0
    assert lab.in_guest(tcp, "198.51.100.10", 7000, b"\x16junk") == b""
    lab.policy({"allow": ["raw.test:7000"]})
    assert lab.in_guest(tcp, "198.51.100.10", 7000, b"\x16junk") == b"\x16junk"
    wait_record(lab, proto="tcp", name="raw.test", dst="198.51.100.10:7000", verdict="allow")


def test_reserved_and_host_addresses_refused(lab):
    lab.policy({"allow": ["loop.test", "private.test", "allowed.test", "198.51.100.0/24",
                          "0.0.0.0/0"]})
    assert lab.in_guest(dns, "loop.test") == (0, ["127.0.0.1"])
    assert lab.in_guest(dns, "private.test") == (0, ["10.1.2.3"])
    # (127.0.0.1 never leaves a guest: its own loopback answers; the unit tests cover 127/8)
    for addr, host in [("10.1.2.3", "private.test"),
                       ("169.254.169.254", "allowed.test"), ("198.51.100.1", "allowed.test"),
                       ("169.254.0.22", "allowed.test")]:
        assert closed_without_answer(lab, addr, host=host), addr
        r = wait_record(lab, proto="tcp", dst=f"{addr}:80", verdict="deny")
        assert r["reason"] in ("reserved or host address", "the gateway itself"), r


def test_ruleset_drops_udp_and_spoofing(lab):
    lab.policy({"allow": ["0.0.0.0/0", "allowed.test"]})

    def udp_out():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"escape", ("198.51.100.10", 9999))
    lab.in_guest(udp_out)
    gwlab.sh("ip", "-n", lab.guest, "addr", "add", "169.254.0.99/32", "dev", "eth0")
    try:
        with pytest.raises(socket.timeout):
            lab.in_guest(dns, "allowed.test", src="169.254.0.99", timeout=1)
    finally:
        gwlab.sh("ip", "-n", lab.guest, "addr", "del", "169.254.0.99/32", "dev", "eth0")
    assert lab.in_guest(dns, "allowed.test")[0] == 0  # the real address still works
    time.sleep(0.3)
    assert lab.udp_received() == []


# ---- injection

def inject_policy(plain_http=False):
    return {"allow": ["inject.test", "allowed.test"],
            "inject": [{"host": "inject.test", "header": "Authorization", "secret": "tok",
                        "prefix": "Bearer ", "value": SECRET, "plain_http": plain_http},
                       {"host": "*.nothere.test", "header": "X-Api-Key", "secret": "k", "value": KEY},
                       {"host": "inject.test", "header": "X-Api-Key", "secret": "gone"}]}


def test_injection_over_intercepted_tls(lab):
    lab.policy(inject_policy(), ca=lab.sandbox_ca)
    assert lab.in_guest(dns, "inject.test") == (0, ["198.51.100.12"])
    reqs = [("GET", "/a", [("Host", "inject.test"), ("authorization", "Bearer guest-own")])]
    issuer, out = lab.in_guest(tls_http, "198.51.100.12", "inject.test", reqs, lab.sandbox_ca[0])
    assert issuer == "sandbox-ca"  # intercepted: the leaf is the sandbox CA's
    [(status, headers, body)] = out
    echo = json.loads(body)
    assert status == 200 and echo["tls"]
    assert echo["headers"]["authorization"] == [sha256(SECRET)]  # replaced, exactly once
    assert "x-api-key" not in echo["headers"]  # its secret is missing: nothing injected
    raw = body + repr(headers).encode()
    assert SECRET.encode() not in raw and b"s3cr3t" not in raw
    r = wait_record(lab, proto="https", name="inject.test", verdict="allow", injected=["Authorization"])
    assert "secret-missing: gone" in r["reason"]
    assert "s3cr3t" not in lab.audit_text() and KEY not in lab.audit_text()
    assert "s3cr3t" not in lab.gw_stderr()


def test_injection_not_over_plain_http_by_default(lab):
    lab.policy(inject_policy(), ca=lab.sandbox_ca)
    assert lab.in_guest(dns, "inject.test")[0] == 0
    [(status, _, body)] = lab.in_guest(http, "198.51.100.12", [
        ("GET", "/", [("Host", "inject.test"), ("Authorization", "Bearer guest-own")])])
    assert status == 200 and json.loads(body)["headers"]["authorization"] == [sha256("Bearer guest-own")]
    lab.policy(inject_policy(plain_http=True), ca=lab.sandbox_ca)
    [(status, _, body)] = lab.in_guest(http, "198.51.100.12", get("inject.test"))
    assert json.loads(body)["headers"]["authorization"] == [sha256(SECRET)]


def test_upstream_certificate_checked(lab):
    """nocert.test resolves to a server whose certificate does not name it: intercepted, the
    upstream handshake fails, the guest's connection is closed, and the audit says why."""
    pol = {"allow": ["nocert.test"],
           "inject": [{"host": "nocert.test", "header": "X-Api-Key", "secret": "k", "value": KEY}]}
    lab.policy(pol, ca=lab.sandbox_ca)
    assert lab.in_guest(dns, "nocert.test")[0] == 0
    try:
        _, out = lab.in_guest(tls_http, "198.51.100.10", "nocert.test", get("nocert.test"),
                              lab.sandbox_ca[0])
    except (ssl.SSLError, OSError):
        out = []
    assert out == []
    r = wait_record(lab, proto="https", name="nocert.test", verdict="deny")
    assert r["reason"].startswith("upstream certificate"), r


def test_request_bodies_and_big_responses(lab):
    """Content-Length and chunked bodies pass intact (re-chunked), plain and intercepted; a
    response far larger than the relay's buffers arrives whole."""
    lab.policy(inject_policy(), ca=lab.sandbox_ca)
    assert lab.in_guest(dns, "inject.test")[0] == 0
    body = os.urandom(300 * 1024)
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 70000]), body[i:i + 70000])
                       for i in range(0, len(body), 70000)) + b"0\r\n\r\n"
    h = [("Host", "inject.test")]
    reqs = [("POST", "/cl", h + [("Content-Length", str(len(body)))], body),
            ("POST", "/ch", h + [("Transfer-Encoding", "chunked")], chunked),
            ("GET", "/big/5000000", h)]
    want = hashlib.sha256(body).hexdigest()
    for out in (lab.in_guest(http, "198.51.100.12", reqs, timeout=20),
                lab.in_guest(tls_http, "198.51.100.12", "inject.test", reqs, lab.sandbox_ca[0],
                             timeout=20)[1]):
        assert [s for s, _, _ in out] == [200, 200, 200]
        assert json.loads(out[0][2])["body_sha"] == want
        assert json.loads(out[1][2])["body_sha"] == want
        assert len(out[2][2]) == 5000000


def test_policy_change_applies_to_next_connection(lab):
    lab.policy({"allow": ["allowed.test"]})
    assert lab.in_guest(dns, "allowed.test")[0] == 0
    assert lab.in_guest(http, "198.51.100.10", get("allowed.test"))[0][0] == 200
    r = lab.policy({"allow": []})
    assert r == {"ok": True, "generation": lab.generation}
    assert lab.in_guest(http, "198.51.100.10", get("allowed.test"))[0][0] == 403
    assert lab.in_guest(dns, "allowed.test") == (3, [])
    stats = lab.control({"op": "stats"})
    assert stats["ok"] and stats["generation"] == lab.generation and stats["dns_names"] >= 1


def test_control_rejects_bad_policies(lab):
    lab.policy({"allow": ["allowed.test"]})
    gen = lab.generation
    r = lab.policy({"allow": ["10.0.0.1/8"]}, expect_ok=False)
    assert r == {"ok": False, "error": 'allow[0]: bad CIDR "10.0.0.1/8": host bits set'}
    assert lab.control({"op": "nope"})["ok"] is False
    assert lab.control({"op": "stats"})["generation"] == gen  # unchanged
    assert lab.in_guest(dns, "allowed.test")[0] == 0


def test_garbage_from_the_guest(lab):
    lab.policy({"allow": ["allowed.test"]})
    assert lab.in_guest(dns, "allowed.test")[0] == 0
    for data in [b"GET / HTTP/1.1\r\nHost: allowed.test\r\n" + b"X: " + b"a" * 70000 + b"\r\n\r\n",
                 b"\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00",
                 b"GET\x00 /\r\n\r\n", b"POST / HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 5\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"]:
        lab.in_guest(tcp, "198.51.100.10", 80, data, timeout=1)
    assert lab.in_guest(http, "198.51.100.10", get("allowed.test"))[0][0] == 200


# ---- load

def test_1000_concurrent_connections_stay_bounded(lab):
    lab.policy({"allow": ["203.0.113.0/24"]})
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    rss_before = lab.gw_rss_kib()

    def open_many():
        socks = []
        for i in range(1000):
            s = socket.create_connection(("203.0.113.10", 7000), timeout=10)
            s.sendall(b"x" * 100)
            socks.append(s)
        for s in socks:
            got = b""
            while len(got) < 100:
                chunk = s.recv(100 - len(got))
                assert chunk, "closed"
                got += chunk
        return socks
    socks = lab.in_guest(open_many)
    try:
        stats = lab.control({"op": "stats"})
        assert stats["conns"] >= 1000
        rss = lab.gw_rss_kib()
    finally:
        for s in socks:
            s.close()
    # the sanitized build: ASan's shadow and quarantine included
    print(f"space-gw RSS with 1000 connections: {rss} KiB (before {rss_before} KiB)")
    assert rss - rss_before < 64 * 1024, (rss_before, rss)
    end = time.time() + 10
    while lab.control({"op": "stats"})["conns"] > 0:
        assert time.time() < end, "connections not released"
        time.sleep(0.1)
