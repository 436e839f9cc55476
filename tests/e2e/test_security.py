"""Security: the control plane opens only with the API key, the data plane only with the token
of that very session (not expired, not replaced, never the API key), and bodies are bounded."""

import json
import secrets
import time

import pytest

import space


@pytest.fixture(scope="module")
def two_sessions(api, sb):
    a = api.create_session(sb["id"], ["sleep", "60"])
    b = api.create_session(sb["id"], ["echo", "b"])
    return a, b


def control_routes(sb_id, op_id, ss_id):
    return [
        ("GET", "/v1/info", None),
        ("GET", "/v1/templates", None),
        ("GET", "/v1/templates/minimal", None),
        ("GET", "/v1/sandboxes", None),
        ("POST", "/v1/sandboxes", {"template": "minimal"}),
        ("GET", f"/v1/sandboxes/{sb_id}", None),
        ("GET", f"/v1/sandboxes/{sb_id}/logs", None),
        ("GET", f"/v1/operations/{op_id}", None),
        ("POST", f"/v1/sandboxes/{sb_id}/sessions", {"argv": ["true"]}),
        ("GET", f"/v1/sandboxes/{sb_id}/sessions", None),
        ("GET", f"/v1/sandboxes/{sb_id}/sessions/{ss_id}", None),
        ("POST", f"/v1/sandboxes/{sb_id}/sessions/{ss_id}/token", {}),
        ("DELETE", f"/v1/sandboxes/{sb_id}", None),
    ]


def test_control_plane_rejects_missing_and_wrong_keys(daemon, api, sb, two_sessions):
    a, _ = two_sessions
    before = {s["id"] for s in api.sandboxes()}
    op_id = api.sandboxes()[0]["id"].replace("sb-", "op-")
    bad_keys = {
        "missing": None,
        "wrong": secrets.token_hex(16),
        "prefix": daemon.api_key[:-1],
        "longer": daemon.api_key + "0",
        "empty": "",
        "session token": a.token,
    }
    for method, path, body in control_routes(sb["id"], op_id, a.id):
        for why, key in bad_keys.items():
            err = api.expect_error(method, path, 401, body, key=key)
            assert err["message"], (why, method, path)
        err = api.expect_error(method, path, 401, body, key=None,
                               headers={"Authorization": f"Basic {daemon.api_key}"})
    # Nothing happened on the way: no new sandbox, the shared one still runs.
    assert {s["id"] for s in api.sandboxes()} == before
    assert api.sandbox(sb["id"])["state"] == "running"


def test_token_is_not_exposed_by_the_control_plane(api, sb, two_sessions):
    a, b = two_sessions
    listed = json.dumps(api.sessions(sb["id"])) + json.dumps(api.session(sb["id"], a.id))
    assert a.token not in listed and b.token not in listed


def data_routes(s):
    return [
        ("POST", "/attach", None),
        ("GET", "/attach", None),
        ("POST", "/stdin", b"x"),
        ("POST", "/stdin/close", b""),
        ("POST", "/signal", {"signal": "SIGTERM"}),
        ("GET", "", None),
    ]


def assert_401(s, method, path, body, headers):
    resp = space.http_request(s.url, method, f"/v1/sessions/{s.id}{path}", body, headers)
    assert resp.status == 401, f"{method} {path} with {headers}: {resp!r}"
    space.check_error(resp)


def test_data_plane_rejects_api_key_wrong_and_foreign_tokens(daemon, api, two_sessions):
    a, b = two_sessions
    cases = {
        "no auth": {},
        "api key": space.bearer(daemon.api_key),
        "wrong token": space.bearer(secrets.token_hex(32)),
        "other session's token": space.bearer(b.token),
        "token as basic": {"Authorization": f"Basic {a.token}"},
    }
    for why, headers in cases.items():
        for method, path, body in data_routes(a):
            assert_401(a, method, path, body, headers)
    # ?token= (EventSource) is checked the same way.
    for tok in (daemon.api_key, b.token, secrets.token_hex(32)):
        resp = space.http_request(a.url, "GET", f"/v1/sessions/{a.id}/attach?token={tok}")
        assert resp.status == 401, resp
    # None of that started or touched the process.
    assert a.get()["state"] == "created"
    # And the right token still works.
    job = a.start(timeout=30)
    a.wait_running()
    a.signal("SIGKILL")
    assert job.wait().signal == 9


def test_expired_token_is_rejected_and_a_new_one_works(api, sb):
    s = api.create_session(sb["id"], ["echo", "fresh"], token_ttl_s=1)
    exp = space.parse_time(s.expires_at) - space.parse_time(s.rec["created_at"])
    assert 0 < exp <= 3, s.expires_at
    time.sleep(2.5)
    st = s.attach()
    assert st.status == 401, "an expired token opened the session"
    assert s.get()["state"] == "created"
    old = s.token
    s.new_token(ttl=60)
    assert s.token != old
    r = s.collect()
    assert bytes(r.stdout) == b"fresh\n" and r.exit_code == 0


def test_new_token_replaces_the_old_one(api, sb):
    s = api.create_session(sb["id"], ["echo", "x"])
    old = s.token
    s.new_token()
    assert s.token != old
    assert_401(s, "GET", "", None, space.bearer(old))
    assert s.attach(token=old).status == 401
    assert bytes(s.collect().stdout) == b"x\n"


def test_control_body_over_1mib_is_413(api, sb):
    big = {"template": "minimal", "metadata": {"k": "x" * 4000}, "pad": "y" * (1 << 20)}
    err = api.expect_error("POST", "/v1/sandboxes", 413, big)
    assert err["code"] == "payload_too_large"
    err = api.expect_error("POST", f"/v1/sandboxes/{sb['id']}/sessions", 413,
                           {"argv": ["echo", "z" * (1 << 20) + "z"]})
    assert api.info()["version"]  # still serving


def test_stdin_over_4mib_is_413(api, sb):
    s = api.create_session(sb["id"], ["cat"], stdin=True)
    job = s.start(timeout=60)
    s.wait_running()
    resp = s.send_stdin(b"a" * (4 * 1024 * 1024 + 1), expect=413)
    assert resp.json["error"]["code"] == "payload_too_large"
    s.send_stdin(b"ok", close=True)
    r = job.wait()
    assert bytes(r.stdout) == b"ok", "a rejected stdin body must not reach the process"


def test_ids_are_unguessable(api, sb):
    """Ids carry 64 random bits: many sessions never collide and do not count up."""
    ids = [api.create_session(sb["id"], ["true"]).id for _ in range(20)]
    assert len(set(ids)) == 20
    hexes = sorted(int(i[3:], 16) for i in ids)
    assert hexes[-1] - hexes[0] > 1 << 32
