"""A secret goes only to the hosts it is bound to (PUT /v1/secrets/{name} "hosts").

Before, any key holder could create a sandbox whose policy injects any stored secret toward a
host of its choosing and read it there. Now a policy whose inject rule names a host outside the
secret's binding is refused with 400 naming the secret and the host, on create and on PUT
.../network (the check is in the core's create read, which E2B's create uses too); a binding
narrowed later stops the value from reaching the gateway (test_egress.py shows that end to
end). A secret stored before bindings existed is bound to no host."""

import os
import sqlite3

import pytest

import space


@pytest.fixture(scope="module")
def napi(own_daemon):
    return own_daemon.api


def put(napi, name, hosts, value="v4lue"):
    body = {"value": value}
    if hosts is not None:
        body["hosts"] = hosts
    return napi.raw("PUT", f"/v1/secrets/{name}", body)


def policy(host, secret="stripe"):
    return {"allow": [host if not host.startswith("*.") else host], "inject": [
        {"host": host, "header": "Authorization", "secret": secret, "prefix": "Bearer "}]}


def test_hosts_are_required_validated_and_normalised(napi):
    for hosts, why in ((None, "hosts is required"), ([], "hosts is required"), ("a.example", "hosts is required"),
                       (["10.0.0.1"], "hosts[0]"), (["a.example:443"], "hosts[0]"), (["*"], "hosts[0]"),
                       (["ok.example", "bad host"], "hosts[1]"), ([f"h{i}.example" for i in range(33)],
                                                                  "hosts is required")):
        r = put(napi, "stripe", hosts)
        assert r.status == 400 and why in r.json["error"]["message"], (hosts, r)
    r = put(napi, "stripe", ["API.Stripe.com", "api.stripe.com.", "*.Stripe.NET"])
    assert r.status == 201, r
    assert r.json["hosts"] == ["api.stripe.com", "*.stripe.net"], r.json
    assert napi.raw("GET", "/v1/secrets/stripe").json["hosts"] == ["api.stripe.com", "*.stripe.net"]
    assert [s["hosts"] for s in napi.raw("GET", "/v1/secrets").json["secrets"] if s["name"] == "stripe"] == \
        [["api.stripe.com", "*.stripe.net"]]


def test_create_refuses_a_rule_outside_the_binding(napi, own_daemon):
    assert put(napi, "stripe", ["api.stripe.com", "*.stripe.net"]).status in (200, 201)
    for host in ("evil.example", "stripe.com", "api.stripe.com.evil.example", "stripe.net", "*.stripe.com"):
        r = napi.raw("POST", "/v1/sandboxes", {"template": "minimal", "network": policy(host)})
        assert r.status == 400, (host, r)
        msg = r.json["error"]["message"]
        assert "stripe" in msg and host in msg, msg
    assert not [s for s in napi.sandboxes() if s["state"] != "deleted"], "a refused create made a sandbox"
    # inside it: the exact name, a name below the wildcard, the wildcard itself or a narrower one
    for host in ("api.stripe.com", "x.stripe.net", "*.stripe.net", "*.eu.stripe.net"):
        rec = napi.new_sandbox("minimal", network=policy(host))
        napi.remove_sandbox(rec["id"])


def test_put_network_refuses_a_rule_outside_the_binding(napi):
    assert put(napi, "stripe", ["api.stripe.com"]).status in (200, 201)
    rec = napi.new_sandbox("minimal", network=policy("api.stripe.com"))
    try:
        r = napi.raw("PUT", f"/v1/sandboxes/{rec['id']}/network", policy("collector.evil.example"))
        assert r.status == 400 and "collector.evil.example" in r.json["error"]["message"], r
        assert napi.sandbox(rec["id"])["network"]["inject"][0]["host"] == "api.stripe.com"
        r = napi.raw("PUT", f"/v1/sandboxes/{rec['id']}/network", policy("api.stripe.com"))
        assert r.status == 200, r
    finally:
        napi.remove_sandbox(rec["id"])


def test_a_secret_from_before_bindings_goes_nowhere(napi, own_daemon):
    assert put(napi, "legacy", ["api.legacy.example"]).status in (200, 201)
    # what schema 8's migration gives a row stored before it: no hosts
    db = sqlite3.connect(os.path.join(own_daemon.state_dir, "space.db"), timeout=10)
    db.execute("UPDATE secrets SET hosts = '[]' WHERE name = 'legacy'")
    db.commit()
    db.close()
    assert napi.raw("GET", "/v1/secrets/legacy").json["hosts"] == []
    r = napi.raw("POST", "/v1/sandboxes", {"template": "minimal", "network": policy("api.legacy.example", "legacy")})
    assert r.status == 400 and "bound to no host" in r.json["error"]["message"], r


def test_a_secret_that_does_not_exist_yet_is_no_refusal(napi):
    """As before: the rule injects nothing (audited secret-missing) until the secret is put."""
    rec = napi.new_sandbox("minimal", network=policy("api.later.example", "later"))
    napi.remove_sandbox(rec["id"])
