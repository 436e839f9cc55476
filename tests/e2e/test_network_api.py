"""The egress API without the gateway's logic (docs/design/egress.md): policies validated on
create with the bad entry named, shown and replaced; secrets stored and never shown; a running
sandbox has its netns and its space-gw, both gone after delete and back after a restart.
Its own daemon: the restart test must not disturb the others."""

import glob
import os
import re
import subprocess
import time

import pytest

import space

POLICY = {"allow": ["pypi.org", "*.githubusercontent.com", "203.0.113.0/24", "api.example.com:443"],
          "deny": ["evil.example.com"],
          "inject": [{"host": "api.example.com", "header": "Authorization", "secret": "tok",
                      "prefix": "Bearer "}]}
SECRET = {"name": str, "hosts": space.ListOf(str), "created_at": space.TIME, "updated_at": space.TIME}


def netns_path(daemon, sb_id):
    return f"/run/netns/space-{daemon.state_tag()}-{sb_id}"


gw_pids = space.gw_pids


def wait_for(pred, timeout=15):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    return pred()


@pytest.fixture(scope="module")
def napi(own_daemon):
    return own_daemon.api


def test_create_refuses_a_bad_policy_naming_the_entry(napi):
    for bad, where in ((["ok.example", "bad host!"], "allow[1]"), (["10.0.0.0/33"], "allow[0]")):
        r = napi.expect_error("POST", "/v1/sandboxes", 400,
                              {"template": "minimal", "network": {"allow": bad}})
        assert where in r["message"], r
    r = napi.expect_error("POST", "/v1/sandboxes", 400,
                          {"template": "minimal", "network": {"allow": [], "bogus": 1}})
    r = napi.expect_error("POST", "/v1/sandboxes", 400, {"template": "minimal", "network": ["x"]})
    # values may not come from clients
    r = napi.expect_error("POST", "/v1/sandboxes", 400, {"template": "minimal", "network": {
        "inject": [{"host": "a.example", "header": "X-K", "secret": "s", "value": "v"}]}})
    assert "inject[0]" in r["message"], r


def test_policy_shown_replaced_and_deny_all_by_default(own_daemon, napi):
    plain = napi.new_sandbox("minimal")
    assert plain["network"].get("allow", []) == [] and plain["network"].get("inject", []) == [], plain
    sb = napi.new_sandbox("minimal", network=POLICY)
    try:
        got = napi.sandbox(sb["id"])["network"]
        assert got["allow"] == POLICY["allow"] and got["deny"] == POLICY["deny"], got
        assert got["inject"][0]["secret"] == "tok" and "value" not in got["inject"][0], got
        new = {"allow": ["Example.COM."]}
        r = napi.raw("PUT", f"/v1/sandboxes/{sb['id']}/network", new)
        assert r.status == 200, r
        assert r.json["allow"] == ["example.com"], r.json
        assert napi.sandbox(sb["id"])["network"]["allow"] == ["example.com"]
        r = napi.raw("PUT", f"/v1/sandboxes/{sb['id']}/network", {"allow": ["**"]})
        assert r.status == 400 and "allow[0]" in r.json["error"]["message"], r.json
        # "*": every name (each still reachable only at the addresses resolved for it)
        r = napi.raw("PUT", f"/v1/sandboxes/{sb['id']}/network", {"allow": ["*", "*:8443"]})
        assert r.status == 200 and r.json["allow"] == ["*", "*:8443"], r.json
        # TLS passed through untouched only where an entry says so; "intercept" is the default
        pinned = {"allow": [{"name": "Pinned.Example:443", "tls": "passthrough"},
                            {"name": "other.example", "tls": "intercept"}]}
        r = napi.raw("PUT", f"/v1/sandboxes/{sb['id']}/network", pinned)
        assert r.status == 200, r
        assert r.json["allow"] == [{"name": "pinned.example:443", "tls": "passthrough"}, "other.example"], r.json
        assert napi.sandbox(sb["id"])["network"]["allow"] == r.json["allow"]
        r = napi.raw("PUT", f"/v1/sandboxes/{sb['id']}/network",
                     {"allow": [{"name": "a.example", "tls": "pinned"}]})
        assert r.status == 400 and "allow[0].tls" in r.json["error"]["message"], r.json
        r = napi.raw("PUT", f"/v1/sandboxes/{sb['id']}/network",
                     {"deny": [{"name": "a.example", "tls": "passthrough"}]})
        assert r.status == 400 and "deny[0]: not a string" in r.json["error"]["message"], r.json
        napi.expect_error("PUT", "/v1/sandboxes/sb-0000000000000000/network", 404, {"allow": []})
    finally:
        napi.remove_sandbox(plain["id"])
        napi.remove_sandbox(sb["id"])
    napi.expect_error("PUT", f"/v1/sandboxes/{sb['id']}/network", 409, {"allow": []})


def test_secrets_never_show_their_value(own_daemon, napi):
    value = "s3cr3t-VALUE-never-shown"
    r = napi.raw("PUT", "/v1/secrets/tok", {"value": value, "hosts": ["api.example.com"]})
    assert r.status == 201, r
    space.check(r.json, SECRET)
    r2 = napi.raw("PUT", "/v1/secrets/tok", {"value": value + "2", "hosts": ["api.example.com"]})
    assert r2.status == 200 and r2.json["created_at"] == r.json["created_at"], r2
    texts = [r.body, r2.body, napi.raw("GET", "/v1/secrets").body, napi.raw("GET", "/v1/secrets/tok").body]
    lst = napi.raw("GET", "/v1/secrets").json["secrets"]
    assert [s["name"] for s in lst] == ["tok"], lst
    for t in texts:
        assert value.encode() not in t, t
    assert value not in own_daemon.log_text()
    napi.expect_error("GET", "/v1/secrets/nope", 404)
    napi.expect_error("DELETE", "/v1/secrets/nope", 404)
    h = ["api.example.com"]
    napi.expect_error("PUT", "/v1/secrets/bad%20name", 400, {"value": "x", "hosts": h})
    napi.expect_error("PUT", "/v1/secrets/ok", 400, {"value": "a\nb", "hosts": h})
    napi.expect_error("PUT", "/v1/secrets/ok", 400, {"value": "", "hosts": h})
    napi.expect_error("PUT", "/v1/secrets/ok", 400, {"valu": "x", "hosts": h})
    r = napi.raw("DELETE", "/v1/secrets/tok")
    assert r.status == 204, r
    napi.expect_error("GET", "/v1/secrets/tok", 404)


def test_egress_records_empty_and_limits(napi):
    sb = napi.new_sandbox("minimal")
    try:
        r = napi.raw("GET", f"/v1/sandboxes/{sb['id']}/egress")
        assert r.status == 200 and isinstance(r.json["records"], list), r
        napi.expect_error("GET", f"/v1/sandboxes/{sb['id']}/egress?limit=0", 400)
        napi.expect_error("GET", f"/v1/sandboxes/{sb['id']}/egress?limit=10001", 400)
        napi.expect_error("GET", "/v1/sandboxes/sb-0000000000000000/egress", 404)
    finally:
        napi.remove_sandbox(sb["id"])


@pytest.mark.skipif(os.geteuid() != 0, reason="sandbox networks need root")
def test_netns_and_gateway_live_with_the_sandbox(own_daemon, napi):
    sb = napi.new_sandbox("minimal", network={"allow": ["pypi.org"]})
    ns = netns_path(own_daemon, sb["id"])
    assert os.path.exists(ns), ns
    qemu = space.cmdline(space.qemu_pid(sb["id"]))
    assert "-netdev" in qemu and any(a.startswith("virtio-net-device") for a in qemu), qemu
    pids = wait_for(lambda: gw_pids(sb["id"]))
    assert len(pids) == 1, pids
    own_daemon.restart()
    after = wait_for(lambda: gw_pids(sb["id"]))
    assert after == pids, f"the gateway was not adopted: {pids} -> {after}"
    assert os.path.exists(ns)
    # A gateway that dies while its VM runs comes back (and gets the policy again).
    os.kill(after[0], 9)
    again = wait_for(lambda: [p for p in gw_pids(sb["id"]) if p != after[0]], 20)
    assert again, "the gateway was not brought back"
    napi.remove_sandbox(sb["id"])
    assert not os.path.exists(ns)
    assert wait_for(lambda: not gw_pids(sb["id"]), 5), gw_pids(sb["id"])


def test_a_gateway_holds_none_of_the_daemons_descriptors(own_daemon, napi):
    """A gateway started while other sandboxes run inherits none of the daemon's
    descriptors: an agent connection it kept would keep that VM's one-client port from
    accepting the next daemon (its sandbox would hang after a restart), the state dir's
    lock would keep the next daemon from starting."""
    first = napi.new_sandbox("minimal", timeout_s=600)
    second = napi.new_sandbox("minimal", timeout_s=600)
    try:
        pid = wait_for(lambda: gw_pids(second["id"]))[0]
        fds = {}
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                fds[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                pass
        state = os.path.realpath(own_daemon.state_dir)
        own = os.path.join(state, "sandboxes", second["id"])
        for fd, target in fds.items():
            # Its own audit dir and log, nothing else of the state dir (no lock, no database).
            assert not target.startswith(state) or target in (own + "/egress", own + "/gw.log") or \
                target.startswith(own + "/egress/"), (fd, target)
        # 0-3 are its own (null, log, log, control socket); every socket past them it made
        # itself after dropping privileges or in the sandbox's netns: none is a unix socket
        # connected to an agent (those are the daemon's, and the daemon keeps them).
        agent_socks = {l.split()[-1] for l in open("/proc/net/unix").read().splitlines()[1:]
                       if l.split()[-1].endswith("agent.sock")}
        assert agent_socks, "no agent sockets seen"
        assert all(not t.endswith("agent.sock") for t in fds.values()), fds
        # The first sandbox still answers through its agent after a restart.
        own_daemon.restart()
        r = napi.run(first["id"], ["echo", "still-here"], timeout=60)
        assert bytes(r.stdout) == b"still-here\n", r
    finally:
        for sb in (first, second):
            if napi.sandbox(sb["id"])["state"] != "deleted":
                napi.remove_sandbox(sb["id"])


def test_spare_netns_are_made_ahead_taken_by_a_start_and_removed_with_the_daemon(own_daemon, napi):
    """--net-spares (default 2): sandbox network namespaces made ahead as space-<tag>-spare-<n>.
    A start takes one (the daemon says which), the spare's own name is gone, the sandbox's netns
    has the TAP, the set is made whole again; a stopped daemon leaves no spare behind, and a
    sandbox's netns stays (its VM runs on)."""
    prefix = f"/run/netns/space-{own_daemon.state_tag()}-spare-"

    def spares():
        return sorted(glob.glob(prefix + "*"))
    assert wait_for(lambda: len(spares()) == 2), spares()
    # A spare's file exists while its child still sets it up (a start skips it then): under a
    # loaded host the first start may make its own; one of a few must take one.
    made = []
    m = None
    for _ in range(4):
        time.sleep(1)
        sb = napi.new_sandbox("minimal", timeout_s=600)
        made.append(sb)
        ns = netns_path(own_daemon, sb["id"])
        m = re.search(rf"sandbox {sb['id']}: network namespace {re.escape(ns)} taken from (spare-\d+)",
                      own_daemon.log_text())
        if m:
            break
    for other in made[:-1]:
        napi.remove_sandbox(other["id"])
    try:
        assert m, "no start took a spare"
        assert prefix + m.group(1)[len("spare-"):] not in spares(), (m.group(1), spares())
        link = subprocess.run(["ip", "-n", os.path.basename(ns), "link", "show", "tap0"],
                              capture_output=True, text=True)
        assert link.returncode == 0 and "tap0" in link.stdout, link
        assert wait_for(lambda: len(spares()) == 2), spares()
        r = napi.run(sb["id"], ["echo", "on-a-spare"], timeout=60)
        assert bytes(r.stdout) == b"on-a-spare\n", r
        own_daemon.stop()
        assert spares() == [], spares()
        assert os.path.exists(ns), "the sandbox's netns went with the daemon"
        own_daemon.start()
        assert wait_for(lambda: len(spares()) == 2), spares()
    finally:
        napi.remove_sandbox(sb["id"])
