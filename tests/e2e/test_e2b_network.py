"""test_e2b_network.py -- E2B's network default (issue 22): a sandbox an unchanged E2B program
creates (POST /v2/sandboxes with just templateID, or allow_internet_access true) resolves and
reaches a name no policy lists, over HTTP and over HTTPS (intercepted by the gateway); a name in
denyOut neither resolves nor is reached; allow_internet_access false resolves nothing; and our
own /v1 default still resolves nothing (docs/design/e2b.md, egress.md "*").

Network safety: the "internet" is tests/e2e/gwlab.py's namespaces. The daemon's gateways ask
the lab's DNS (--dns-upstream 198.51.100.53) and nothing else, so "resolve every name" sends no
query to the real network; every address a test touches is checked to route into the lab's
veth before any traffic, and only names the lab serves (all inside 198.51.100.0/24) are used.
"""

import json
import os

import pytest

import gwlab
import space

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="sandbox networks need root")

WAIT = space.CREATE_TIMEOUT + 60
TEMPLATE = "base"  # curl and getent
NAME, NAME_ADDR = "unlisted.test", "198.51.100.10"
OTHER, OTHER_ADDR = "also-unlisted.test", "198.51.100.13"
INTERNET = ["0.0.0.0/0", "*"]


@pytest.fixture(scope="module")
def lab():
    lab = gwlab.Lab()
    try:
        assert gwlab.NAMES[NAME] == [NAME_ADDR] and gwlab.NAMES[OTHER] == [OTHER_ADDR]
        lab.assert_routed(gwlab.DNS_ADDR, NAME_ADDR, OTHER_ADDR)
        yield lab
    finally:
        lab.close()


@pytest.fixture(scope="module")
def daemon(lab):
    d = space.Daemon("spaced-e2b-net", extra_args=["--dns-upstream", gwlab.DNS_ADDR + ":53",
                                                   "--egress-ca-file", lab.ca_cert])
    try:
        d.start()
        yield d
    finally:
        d.cleanup()


class E2B:
    """E2B's control plane as its SDK calls it (X-API-KEY, E2B's paths and bodies)."""

    def __init__(self, daemon):
        self.url, self.key = daemon.url, daemon.api_key

    def req(self, method, path, body=None, timeout=space.READ_TIMEOUT):
        hdrs = {"X-API-KEY": self.key}
        data = None if body is None else json.dumps(body).encode()
        if data is not None:
            hdrs["Content-Type"] = "application/json"
        return space.http_request(self.url, method, path, data, hdrs, timeout)

    def create(self, body):
        r = self.req("POST", "/v2/sandboxes", body, timeout=WAIT)
        assert r.status == 201, r
        return r.json["sandboxID"]

    def kill(self, sid):
        self.req("DELETE", f"/sandboxes/{sid}", timeout=WAIT)


@pytest.fixture(scope="module")
def e2b(daemon):
    return E2B(daemon)


@pytest.fixture
def made(e2b):
    """E2B sandboxes a test made, killed after it."""
    ids = []
    yield ids
    for sid in ids:
        e2b.kill(sid)


def sh(api, sid, script, timeout=60):
    r = api.run(sid, ["bash", "-c", script], timeout=timeout, user="root")
    return r.exit_code, bytes(r.stdout).decode(errors="replace"), bytes(r.stderr).decode(errors="replace")


def resolve(api, sid, name):
    """The addresses the guest's resolver gives for name ([] if none)."""
    rc, out, err = sh(api, sid, f"getent ahostsv4 {name} | awk '{{print $1}}' | sort -u")
    return out.split()


def curl(api, sid, url, *args):
    argv = " ".join(["curl", "-sS", "--fail-with-body", "--connect-timeout", "5", "--max-time", "15"] +
                    ["'%s'" % a for a in args] + ["'%s'" % url])
    return sh(api, sid, argv)


def reaches(api, lab, sid, name, addr, path):
    """HTTP and HTTPS (intercepted: the guest trusts its sandbox CA, the gateway verifies the
    lab's server) to name answer from the lab's server at addr."""
    rc, out, err = curl(api, sid, f"http://{name}{path}")
    assert rc == 0, (rc, out, err)
    rec = json.loads(out)
    assert rec["headers"]["host"] == [name] and rec["server"] == addr and not rec["tls"], rec
    rc, out, err = curl(api, sid, f"https://{name}{path}-tls")
    assert rc == 0, (rc, out, err)
    rec = json.loads(out)
    assert rec["tls"] is True and rec["server"] == addr and rec["headers"]["host"] == [name], rec


def reached(lab, since, path):
    return [r for r in lab.requests(since=since) if r.get("path", "").startswith(path)]


def dns_audit(api, sid, name):
    recs = api.call("GET", f"/v1/sandboxes/{sid}/egress?limit=10000", None).json["records"]
    return [r for r in recs if r.get("proto") == "dns" and r.get("name") == name]


def test_a_default_e2b_sandbox_resolves_and_reaches_any_name(daemon, e2b, lab, made):
    """Just templateID, as an unchanged E2B program creates: E2B's internet."""
    sid = e2b.create({"templateID": TEMPLATE})
    made.append(sid)
    api = daemon.api
    assert api.sandbox(sid)["network"]["allow"] == INTERNET, api.sandbox(sid)["network"]
    assert resolve(api, sid, NAME) == [NAME_ADDR]
    reaches(api, lab, sid, NAME, NAME_ADDR, "/e2b-default")
    # the query went to the lab's DNS (the daemon's only upstream) and was audited as allowed by "*"
    assert any(r["verdict"] == "allow" and r["reason"] == "allowed by *" for r in dns_audit(api, sid, NAME))
    # a name the lab does not know: NXDOMAIN from the lab, nothing else asked
    assert resolve(api, sid, "nowhere.test") == []
    # a name pointing into a private range (10.1.2.3): its address is withheld (no connection
    # is tried: 10/8 is not routed into the lab; the refusal is test_gw_decide's)
    assert resolve(api, sid, "private.test") == []
    assert any("withheld" in r["reason"] for r in dns_audit(api, sid, "private.test"))


def test_internet_true_with_deny_out_neither_resolves_nor_reaches_the_denied_name(daemon, e2b, lab, made):
    sid = e2b.create({"templateID": TEMPLATE, "allow_internet_access": True,
                      "network": {"denyOut": [NAME]}})
    made.append(sid)
    api = daemon.api
    net = api.sandbox(sid)["network"]
    assert net["allow"] == INTERNET and net["deny"] == [NAME], net
    # allow_internet_access true: another unlisted name resolves and answers
    assert resolve(api, sid, OTHER) == [OTHER_ADDR]
    reaches(api, lab, sid, OTHER, OTHER_ADDR, "/e2b-true")
    # the denied name: no answer, and not reachable under its name at its real address
    mark = lab.mark()
    assert resolve(api, sid, NAME) == []
    rc, out, err = curl(api, sid, f"http://{NAME}/e2b-denied", "--resolve", f"{NAME}:80:{NAME_ADDR}")
    assert rc != 0 and "denied by " + NAME in out, (rc, out, err)
    rc, out, err = curl(api, sid, f"https://{NAME}/e2b-denied-tls", "--resolve", f"{NAME}:443:{NAME_ADDR}")
    assert rc != 0, (rc, out, err)
    assert not reached(lab, mark, "/e2b-denied")
    assert all(r["verdict"] == "deny" for r in dns_audit(api, sid, NAME))
    # E2B's update to internet off: from then on nothing resolves
    r = e2b.req("PUT", f"/sandboxes/{sid}/network", {"allow_internet_access": False})
    assert r.status == 204, r
    assert api.sandbox(sid)["network"]["allow"] == []
    assert resolve(api, sid, OTHER) == []


def test_internet_false_resolves_nothing(daemon, e2b, lab, made):
    sid = e2b.create({"templateID": TEMPLATE, "allow_internet_access": False})
    made.append(sid)
    api = daemon.api
    assert api.sandbox(sid)["network"]["allow"] == []
    mark = lab.mark()
    assert resolve(api, sid, NAME) == [] and resolve(api, sid, OTHER) == []
    rc, out, err = curl(api, sid, f"http://{NAME}/e2b-off", "--resolve", f"{NAME}:80:{NAME_ADDR}")
    assert rc != 0, (rc, out)
    assert not reached(lab, mark, "/e2b-off")


def test_a_v1_sandbox_by_default_still_resolves_nothing(daemon, lab):
    api = daemon.api
    sb = api.new_sandbox(TEMPLATE)
    try:
        assert api.sandbox(sb["id"])["network"].get("allow", []) == []
        assert resolve(api, sb["id"], NAME) == []
    finally:
        api.remove_sandbox(sb["id"])
