"""test_gateway.py -- space-gw alone (the ASan+UBSan build) between a guest netns and gwlab's
small internet: DNS, SNI and Host checks against handed-out addresses, CIDR rules, reserved
and host addresses and the node's refused ranges, the ruleset's drops, TLS intercepted by
default (every Host inside checked, ALPN, passthrough entries, TLS that is not HTTP), Upgrade
and CONNECT relayed raw only once the upstream accepted them, injection, TRACE, policy
changes, the audit log, the buffer budget, the seccomp filter, and 1000 concurrent
connections (docs/design/egress.md). Needs root; about a minute."""

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
from gwlab import dns, http, http_raw, sha256, tcp, tls_http, tls_raw

# Network namespaces need root (make test runs as root; a skip shows in the closing line).
# A missing space-gw is a failure, not a skip: make test builds it.
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")


def test_the_sanitized_gateway_is_built():
    assert os.access(gwlab.SAN_GW, os.X_OK), f"{gwlab.SAN_GW} missing (make san-bins)"

SECRET = "Bearer s3cr3t-value-0123"
KEY = "k3y-value-4567"
NOBODY = 65534
# The node refuses this one (inside gwlab's internet: routed to its veth, see test_refused_ranges).
REFUSED = "203.0.113.11"
MAX_BUFFER = 16 << 20
GW_ARGS = ["--uid", str(NOBODY), "--gid", str(NOBODY), "--refuse", "192.0.2.0/24," + REFUSED,
           "--max-buffer", str(MAX_BUFFER)]


@pytest.fixture(scope="module")
def lab():
    lab = gwlab.Lab()
    try:
        lab.sandbox()
        # as the daemon runs it: privileges dropped, the audit dir the gateway's own, the
        # sandbox's CA sent with the first policy
        os.chmod(lab.tmp, 0o755)
        os.makedirs(os.path.join(lab.tmp, "audit"))
        os.chown(os.path.join(lab.tmp, "audit"), NOBODY, NOBODY)
        lab.start_gateway(extra=GW_ARGS)
        lab.sandbox_ca = lab.make_ca("sandbox-ca")
        lab.policy({}, ca=lab.sandbox_ca)
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
    # its seccomp allowlist, in force once it set up (2: a filter)
    assert status["Seccomp"].strip() == "2"


# ---- names

def test_allowed_name_http_and_https(lab):
    lab.policy({"allow": ["allowed.test"]})
    assert lab.in_guest(dns, "allowed.test") == (0, ["198.51.100.10"])
    assert lab.in_guest(dns, "allowed.test", qtype=28) == (0, [])  # AAAA: NOERROR, empty
    [(status, _, body)] = lab.in_guest(http, "198.51.100.10", get("allowed.test"))
    assert status == 200 and json.loads(body)["server"] == "198.51.100.10"
    mark = len(records(lab, proto="https", name="allowed.test", path="/tls"))
    issuer, [(status, _, body)] = lab.in_guest(tls_http, "198.51.100.10", "allowed.test",
                                               get("allowed.test", "/tls"), lab.sandbox_ca[0])
    # intercepted by default: the sandbox CA's leaf, the upstream verified and reached over TLS
    assert status == 200 and issuer == "sandbox-ca" and json.loads(body)["tls"]
    wait_record(lab, proto="dns", name="allowed.test", verdict="allow")
    wait_record(lab, proto="http", name="allowed.test", verdict="allow", dst="198.51.100.10:80")
    # each request inside is audited, then the connection
    r = wait_record(lab, proto="https", name="allowed.test", verdict="allow", dst="198.51.100.10:443")
    assert r["bytes_out"] > 0 and r["bytes_in"] > 0 and mark == 0


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


# ---- TLS: intercepted by default, every request's Host checked

def test_tls_fronting_with_a_forged_host_is_refused(lab):
    """cdn-a and cdn-b share an address; only cdn-a is allowed. `curl -k https://cdn-a.test/
    -H 'Host: cdn-b.test'`: the SNI is fine, the Host inside is not."""
    lab.policy({"allow": ["cdn-a.test"]})
    assert lab.in_guest(dns, "cdn-a.test") == (0, ["198.51.100.13"])
    mark = lab.mark()
    # -k: the guest does not even check the certificate
    _, out = lab.in_guest(tls_http, "198.51.100.13", "cdn-a.test", get("cdn-b.test"), None)
    assert [s for s, _, _ in out] == [403], out
    assert b"does not match the TLS server name cdn-a.test" in out[0][2]
    r = wait_record(lab, proto="https", name="cdn-b.test", verdict="deny", dst="198.51.100.13:443")
    assert "cdn-a.test" in r["reason"]
    # a keep-alive connection that switches Host inside TLS
    _, out = lab.in_guest(tls_http, "198.51.100.13", "cdn-a.test",
                          get("cdn-a.test") + get("cdn-b.test") + get("cdn-a.test"), lab.sandbox_ca[0])
    assert [s for s, _, _ in out] == [200, 403]
    # empty lines before the request line, or an odd method, do not make it opaque bytes
    _, _, _, rest = lab.in_guest(tls_raw, "198.51.100.13", "cdn-a.test", lab.sandbox_ca[0],
                                 b"\r\n\r\nGET / HTTP/1.1\r\nHost: cdn-b.test\r\n\r\n")
    assert rest.startswith(b"HTTP/1.1 403"), rest
    _, _, _, rest = lab.in_guest(tls_raw, "198.51.100.13", "cdn-a.test", lab.sandbox_ca[0],
                                 b"get / HTTP/1.1\r\nHost: cdn-b.test\r\n\r\n")
    assert rest.startswith(b"HTTP/1.1 400"), rest
    assert not [r for r in lab.requests(since=mark) if r["host"] == "cdn-b.test"]


def test_alpn_is_negotiated_honestly(lab):
    """http/1.1 is selected when offered (and offered upstream); an h2-only client gets no
    ALPN, and the HTTP/2 preface it then sends is refused; nothing is offered upstream that
    the guest's side did not select."""
    lab.policy({"allow": ["allowed.test"]})
    assert lab.in_guest(dns, "allowed.test")[0] == 0
    req = b"GET /alpn HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n"
    _, alpn, _, rest = lab.in_guest(tls_raw, "198.51.100.10", "allowed.test", lab.sandbox_ca[0], req,
                                    alpn=["h2", "http/1.1"])
    assert alpn == "http/1.1" and rest.startswith(b"HTTP/1.1 200"), rest
    assert json.loads(rest.split(b"\r\n\r\n", 1)[1])["alpn"] == "http/1.1"
    _, alpn, _, rest = lab.in_guest(tls_raw, "198.51.100.10", "allowed.test", lab.sandbox_ca[0], req)
    assert alpn is None and json.loads(rest.split(b"\r\n\r\n", 1)[1])["alpn"] is None
    mark = lab.mark()
    _, alpn, _, rest = lab.in_guest(tls_raw, "198.51.100.10", "allowed.test", lab.sandbox_ca[0],
                                    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00",
                                    alpn=["h2"])
    assert alpn is None and rest.startswith(b"HTTP/1.1 400"), rest
    wait_record(lab, proto="https", verdict="deny", dst="198.51.100.10:443")
    assert lab.requests(since=mark) == []


def test_tls_that_is_not_http_keeps_the_sni_rule(lab):
    """Inside intercepted TLS, bytes that are not HTTP (the client first) and a server that
    speaks first are relayed re-encrypted under the SNI rule alone."""
    lab.policy({"allow": ["allowed.test:7443", "allowed.test:7993"]})
    assert lab.in_guest(dns, "allowed.test")[0] == 0
    issuer, _, _, rest = lab.in_guest(tls_raw, "198.51.100.10", "allowed.test", lab.sandbox_ca[0],
                                      b"\x00\x01binary\r\n", port=7443, want=10)
    assert issuer == "sandbox-ca" and rest == b"\x00\x01binary\r\n"
    # the server's banner comes first; what the client says next is no request line
    _, _, head, rest = lab.in_guest(tls_raw, "198.51.100.10", "allowed.test", lab.sandbox_ca[0],
                                    b"a1 CAPABILITY\r\n", port=7993, first=19, want=15)
    assert head == b"* OK banner first\r\n" and rest == b"a1 CAPABILITY\r\n"
    r = wait_record(lab, proto="tls", name="allowed.test", verdict="allow", dst="198.51.100.10:7993")
    assert r["bytes_out"] == 15 and r["bytes_in"] == 34
    # bytes that might still become a request line: under a name rule they decide at the end
    # of the sniff window, for the HTTP relay (a request line sent in two halves around it is
    # still parsed and its Host checked); under a CIDR rule (anything may go there) at once
    def halves():
        ctx = ssl.create_default_context(cafile=lab.sandbox_ca[0])
        with socket.create_connection(("198.51.100.10", 7443), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname="allowed.test") as s:
                s.sendall(b"GE")
                time.sleep(gwlab.SNIFF_SECONDS + 1)
                s.sendall(b"T / HTTP/1.1\r\nHost: cdn-b.test\r\n\r\n")
                return gwlab.recv_all(s, 5)
    assert lab.in_guest(halves).startswith(b"HTTP/1.1 403")
    lab.policy({"allow": ["198.51.100.10/32:7443"]})
    _, _, _, rest = lab.in_guest(tls_raw, "198.51.100.10", "allowed.test", lab.sandbox_ca[0], b"ping",
                                 port=7443, timeout=2, want=4)
    assert rest == b"ping"


def test_a_passthrough_entry_passes_tls_untouched(lab):
    """{"name": ..., "tls": "passthrough"}: the guest sees the real server's certificate
    (weaker: the gateway sees no request inside)."""
    lab.policy({"allow": [{"name": "allowed.test", "tls": "passthrough"}]})
    assert lab.in_guest(dns, "allowed.test")[0] == 0
    issuer, [(status, _, body)] = lab.in_guest(tls_http, "198.51.100.10", "allowed.test",
                                               get("allowed.test"), lab.ca_cert)
    assert status == 200 and issuer == "gwlab-ca" and json.loads(body)["tls"]
    r = wait_record(lab, proto="tls", name="allowed.test", verdict="allow", dst="198.51.100.10:443")
    assert r["reason"] == "allowed by allowed.test (tls passthrough)", r
    # an inject rule needs the plaintext: it wins over passthrough
    lab.policy({"allow": [{"name": "inject.test", "tls": "passthrough"}],
                "inject": [{"host": "inject.test", "header": "X-Api-Key", "secret": "k", "value": KEY}]})
    assert lab.in_guest(dns, "inject.test")[0] == 0
    issuer, [(status, _, body)] = lab.in_guest(tls_http, "198.51.100.12", "inject.test",
                                               get("inject.test"), lab.sandbox_ca[0])
    assert issuer == "sandbox-ca" and json.loads(body)["headers"]["x-api-key"] == [sha256(KEY)]


def restart_gateway(lab, extra):
    lab.stop_gateway()
    lab.start_gateway(extra=extra)


def test_without_a_ca_tls_is_refused_unless_passthrough(lab):
    """A gateway that was given no CA cannot intercept: it refuses TLS instead of passing it
    through, except to an entry marked passthrough."""
    restart_gateway(lab, GW_ARGS)
    try:
        lab.policy({"allow": ["allowed.test", {"name": "cdn-a.test", "tls": "passthrough"}]})
        assert lab.in_guest(dns, "allowed.test")[0] == 0 and lab.in_guest(dns, "cdn-a.test")[0] == 0
        with pytest.raises((ssl.SSLError, OSError)):
            lab.in_guest(tls_http, "198.51.100.10", "allowed.test", get("allowed.test"), lab.ca_cert)
        r = wait_record(lab, proto="tls", name="allowed.test", verdict="deny")
        assert r["reason"].startswith("no CA to intercept TLS with"), r
        issuer, [(status, _, _)] = lab.in_guest(tls_http, "198.51.100.13", "cdn-a.test",
                                                get("cdn-a.test"), lab.ca_cert)
        assert status == 200 and issuer == "gwlab-ca"
    finally:
        restart_gateway(lab, GW_ARGS)
        lab.policy({}, ca=lab.sandbox_ca)


# ---- Upgrade and CONNECT: raw only once the upstream accepted them

UPGRADE = [("Host", "cdn-a.test"), ("Connection", "Upgrade"), ("Upgrade", "websocket")]


def test_an_upgrade_the_upstream_refused_switches_nothing(lab):
    """An Upgrade answered 200 leaves the connection HTTP: the next request's Host is checked."""
    lab.policy({"allow": ["cdn-a.test"]})
    assert lab.in_guest(dns, "cdn-a.test")[0] == 0
    mark = lab.mark()
    out = lab.in_guest(http, "198.51.100.13", [("GET", "/up", UPGRADE)] + get("cdn-b.test"))
    assert [s for s, _, _ in out] == [200, 403], out
    wait_record(lab, proto="http", name="cdn-b.test", verdict="deny")
    # pipelined: the second request is in the same segment as the Upgrade; it waits for the
    # Upgrade's answer, then is parsed as a request
    pipelined = (b"GET /up2 HTTP/1.1\r\nHost: cdn-a.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
                 b"GET /x HTTP/1.1\r\nHost: cdn-b.test\r\n\r\n")
    got = lab.in_guest(http_raw, "198.51.100.13", pipelined)
    assert got.startswith(b"HTTP/1.1 200") and b"HTTP/1.1 403" in got, got
    # the same inside intercepted TLS
    _, out = lab.in_guest(tls_http, "198.51.100.13", "cdn-a.test", [("GET", "/up3", UPGRADE)] +
                          get("cdn-b.test"), lab.sandbox_ca[0])
    assert [s for s, _, _ in out] == [200, 403], out
    # h2c is not relayed: the Upgrade goes away, the request is answered as HTTP/1.1
    out = lab.in_guest(http, "198.51.100.13", [("GET", "/h2c", [
        ("Host", "cdn-a.test"), ("Connection", "Upgrade, HTTP2-Settings"), ("Upgrade", "h2c"),
        ("HTTP2-Settings", "AAMAAABkAAQAAP__")])] + get("cdn-b.test"))
    assert [s for s, _, _ in out] == [200, 403], out
    h2c = [r for r in lab.requests(since=mark) if r["path"] == "/h2c"]
    assert h2c and "Upgrade" not in h2c[0]["headers"] and "HTTP2-Settings" not in h2c[0]["headers"]
    assert not [r for r in lab.requests(since=mark) if r["host"] == "cdn-b.test"]


def test_a_101_still_switches_to_raw(lab):
    lab.policy({"allow": ["cdn-a.test"]})
    assert lab.in_guest(dns, "cdn-a.test")[0] == 0
    req = (b"GET /upgrade-101 HTTP/1.1\r\nHost: cdn-a.test\r\nConnection: Upgrade\r\n"
           b"Upgrade: websocket\r\n\r\n\x81\x05hello")
    got = lab.in_guest(http_raw, "198.51.100.13", req, timeout=2)
    assert got.startswith(b"HTTP/1.1 101") and got.endswith(b"\r\n\r\n\x81\x05hello"), got
    _, _, _, rest = lab.in_guest(tls_raw, "198.51.100.13", "cdn-a.test", lab.sandbox_ca[0], req, timeout=2)
    assert rest.startswith(b"HTTP/1.1 101") and rest.endswith(b"\x81\x05hello"), rest


def test_connect_is_a_tunnel_only_after_a_2xx(lab):
    lab.policy({"allow": ["cdn-a.test"]})
    assert lab.in_guest(dns, "cdn-a.test")[0] == 0
    mark = lab.mark()
    got = lab.in_guest(http_raw, "198.51.100.13",
                       b"CONNECT cdn-a.test:81 HTTP/1.1\r\nHost: cdn-a.test:81\r\n\r\n"
                       b"GET / HTTP/1.1\r\nHost: cdn-b.test\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 407") and b"HTTP/1.1 403" in got, got
    got = lab.in_guest(http_raw, "198.51.100.13",
                       b"CONNECT cdn-a.test:80 HTTP/1.1\r\nHost: cdn-a.test:80\r\n\r\nthrough the tunnel",
                       timeout=2)
    assert got.startswith(b"HTTP/1.1 200") and got.endswith(b"through the tunnel"), got
    assert not [r for r in lab.requests(since=mark) if r["host"] == "cdn-b.test"]


def test_trace_is_refused(lab):
    """TRACE echoes the request, so it would hand the guest the header the gateway injected."""
    lab.policy(inject_policy(plain_http=True), ca=lab.sandbox_ca)
    assert lab.in_guest(dns, "inject.test")[0] == 0
    mark = lab.mark()
    trace = [("TRACE", "/", [("Host", "inject.test")])]
    [(status, _, body)] = lab.in_guest(http, "198.51.100.12", trace)
    assert status == 403 and SECRET.encode() not in body
    _, [(status, _, body)] = lab.in_guest(tls_http, "198.51.100.12", "inject.test", trace, lab.sandbox_ca[0])
    assert status == 403 and SECRET.encode() not in body
    r = wait_record(lab, proto="https", name="inject.test", verdict="deny")
    assert r["reason"].startswith("TRACE is not relayed"), r
    assert not [r for r in lab.requests(since=mark) if r["method"] == "TRACE"]


def test_opaque_bytes_that_are_http_get_the_host_check(lab):
    """A name:port rule allows bytes that are not HTTP; HTTP disguised as such (empty lines
    first, or sent after the sniffing window) still goes through the Host check."""
    lab.policy({"allow": ["cdn-a.test:80"]})
    assert lab.in_guest(dns, "cdn-a.test")[0] == 0
    mark = lab.mark()
    got = lab.in_guest(http_raw, "198.51.100.13", b"\r\nGET / HTTP/1.1\r\nHost: cdn-b.test\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 403"), got
    got = lab.in_guest(http_raw, "198.51.100.13", b"GET / HTTP/1.1\r\nHost: cdn-b.test\r\n\r\n",
                       wait=gwlab.SNIFF_SECONDS + 0.5, timeout=gwlab.SNIFF_SECONDS + 5)
    assert got.startswith(b"HTTP/1.1 403"), got
    assert not [r for r in lab.requests(since=mark) if r["host"] == "cdn-b.test"]


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


def test_refused_ranges_win_over_an_open_policy(lab):
    """--refuse (spaced --egress-refuse: a cluster's pod and service ranges) holds under 0/0."""
    for addr in (REFUSED, "203.0.113.10"):  # both routed into gwlab's own namespace
        assert lab.host_veth in gwlab.sh("ip", "route", "get", addr), addr
    lab.policy({"allow": ["0.0.0.0/0", "203.0.113.11/32"]})
    assert lab.in_guest(tcp, REFUSED, 7000, b"refused?") == b""
    r = wait_record(lab, proto="tcp", dst=f"{REFUSED}:7000", verdict="deny")
    assert r["reason"] == f"refused by the node (--egress-refuse {REFUSED})", r
    assert lab.in_guest(tcp, "203.0.113.10", 7000, b"open\n") == b"open\n"


def test_the_buffer_budget_bounds_a_guest_that_does_not_read(lab):
    """300 connections fetching a large body without reading: the gateway's buffers stop at
    --max-buffer (reading stops, new connections are refused), and come back after."""
    lab.policy({"allow": ["allowed.test"]})
    assert lab.in_guest(dns, "allowed.test")[0] == 0
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    rss_before = lab.gw_rss_kib()

    def stall():
        socks = []
        for _ in range(300):
            s = socket.create_connection(("198.51.100.10", 80), timeout=10)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(b"GET /big/30000000 HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
            socks.append(s)
        return socks
    socks = lab.in_guest(stall)
    try:
        time.sleep(3)
        rss = lab.gw_rss_kib()
        refused = closed_without_answer(lab, "198.51.100.10", host="allowed.test")
        r = records(lab, reason="the gateway's buffers are full")
    finally:
        for s in socks:
            s.close()
    print(f"space-gw RSS with 300 stalled downloads: {rss} KiB (before {rss_before} KiB)")
    # the sanitized build: ASan's shadow and redzones on top of the budget
    assert rss - rss_before < 2 * MAX_BUFFER // 1024 + 48 * 1024, (rss_before, rss)
    assert refused and r, lab.audit()[-3:]
    end = time.time() + 10
    while lab.in_guest(http, "198.51.100.10", get("allowed.test")) == []:
        assert time.time() < end, "the budget did not come back"
        time.sleep(0.2)


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
