"""Failure: bad input gets the right status and error code (and changes nothing), unknown ids
are 404, wrong methods 405, invalid state transitions 409 -- and the daemon keeps serving."""

import pytest

import space

NO_SB = "sb-0000000000000000"
NO_OP = "op-0000000000000000"
NO_SS = "ss-0000000000000000"


def still_serving(api, sb):
    r = api.run(sb["id"], ["echo", "alive"])
    assert bytes(r.stdout) == b"alive\n" and r.exit_code == 0, r


@pytest.mark.parametrize("body", [b"{", b'{"template": ', b"", b"\xff\xfe", b"{'template': 'minimal'}",
                                  b"[]", b'"minimal"', b"5", b"null", b"true"])
def test_create_rejects_malformed_or_non_object_body(api, body):
    err = api.expect_error("POST", "/v1/sandboxes", 400, body,
                           headers={"Content-Type": "application/json"})
    assert err["code"] == "bad_request"


BAD_CREATE = [
    {},
    {"template": 5},
    {"template": ""},
    {"template": None},
    {"template": "minimal", "vcpus": "1"},
    {"template": "minimal", "vcpus": 1.5},
    {"template": "minimal", "vcpus": 0},
    {"template": "minimal", "vcpus": 17},
    {"template": "minimal", "memory_mib": 63},
    {"template": "minimal", "memory_mib": 65537},
    {"template": "minimal", "memory_mib": True},
    {"template": "minimal", "env": []},
    {"template": "minimal", "env": {"K": 1}},
    {"template": "minimal", "env": {"": "v"}},
    {"template": "minimal", "metadata": "x"},
    {"template": "minimal", "metadata": {"k": {"n": 1}}},
    {"template": "minimal", "metadata": {"k" * 129: "v"}},
    {"template": "minimal", "metadata": {"k": "v" * 4097}},
    {"template": "minimal", "metadata": {f"k{i}": "v" for i in range(129)}},
    {"template": "minimal", "timeout_s": -1},
    {"template": "minimal", "timeout_s": 604801},
    {"template": "minimal", "timeout_s": "900"},
]


def test_create_rejects_wrong_types_and_values(api, sb):
    before = {s["id"] for s in api.sandboxes()}
    for body in BAD_CREATE:
        err = api.expect_error("POST", "/v1/sandboxes", 400, body)
        assert err["code"] == "bad_request", body
    assert {s["id"] for s in api.sandboxes()} == before, "a rejected create made a sandbox"
    still_serving(api, sb)


def test_create_accepts_the_limits(api):
    """The edges of every range are valid (so the 400s above are about the values)."""
    meta = {f"k{i}": "v" * 4096 for i in range(127)}
    meta["k" * 128] = "x"
    sb, op = api.create_sandbox("minimal", vcpus=1, memory_mib=64, timeout_s=604800,
                                env={"A": ""}, metadata=meta)
    assert sb["metadata"] == meta and sb["timeout_s"] == 604800 and sb["memory_mib"] == 64
    api.wait_op(op["id"])
    api.delete_sandbox(sb["id"])


def test_create_with_unknown_template_is_404(api):
    for ref in ("nosuch", "minimal:nosuchtag", "sha256:" + "0" * 64, "minimal@sha256:" + "0" * 64):
        err = api.expect_error("POST", "/v1/sandboxes", 404, {"template": ref})
        assert err["code"] == "not_found" and err["message"]


BAD_SESSION = [
    {},
    {"argv": []},
    {"argv": "echo hi"},
    {"argv": [1]},
    {"argv": ["echo", None]},
    {"argv": ["x"] * 4097},
    {"argv": ["true"], "env": {"K": 1}},
    {"argv": ["true"], "env": ["K=V"]},
    {"argv": ["true"], "cwd": 5},
    {"argv": ["true"], "user": 0},
    {"argv": ["true"], "stdin": "yes"},
    {"argv": ["true"], "token_ttl_s": "60"},
    {"argv": ["true"], "token_ttl_s": -1},
]


def test_session_create_rejects_bad_bodies(api, sb):
    path = f"/v1/sandboxes/{sb['id']}/sessions"
    for body in BAD_SESSION:
        err = api.expect_error("POST", path, 400, body)
        assert err["code"] == "bad_request", body
    for raw in (b"{", b"[]", b'"x"'):
        api.expect_error("POST", path, 400, raw, headers={"Content-Type": "application/json"})
    assert all(s["argv"] != [] for s in api.sessions(sb["id"]))
    still_serving(api, sb)


def test_unknown_ids_are_404(api, sb):
    sid = sb["id"]
    cases = [
        ("GET", f"/v1/sandboxes/{NO_SB}", None),
        ("GET", "/v1/sandboxes/not-an-id", None),
        ("DELETE", f"/v1/sandboxes/{NO_SB}", None),
        ("GET", f"/v1/sandboxes/{NO_SB}/logs", None),
        ("GET", f"/v1/sandboxes/{NO_SB}/sessions", None),
        ("POST", f"/v1/sandboxes/{NO_SB}/sessions", {"argv": ["true"]}),
        ("GET", f"/v1/sandboxes/{sid}/sessions/{NO_SS}", None),
        ("POST", f"/v1/sandboxes/{sid}/sessions/{NO_SS}/token", {}),
        ("GET", f"/v1/operations/{NO_OP}", None),
        ("GET", f"/v1/operations/{NO_OP}?wait=1", None),
        ("GET", "/v1/operations/garbage", None),
        ("GET", "/v1/templates/nosuch", None),
        ("GET", f"/v1/templates/{space.q('sha256:' + '0' * 64)}", None),
        ("GET", "/v1/nosuch", None),
        ("GET", "/v9/info", None),  # (/v2/... is E2B's: its errors in E2B's shape, test_e2b_api.py)
        ("GET", "/", None),
    ]
    for method, path, body in cases:
        err = api.expect_error(method, path, 404, body)
        assert err["code"] == "not_found", (method, path)


def test_session_of_another_sandbox_is_404(api, sb):
    other, op = api.create_sandbox("minimal")
    api.wait_op(op["id"])
    s = api.create_session(sb["id"], ["true"])
    api.expect_error("GET", f"/v1/sandboxes/{other['id']}/sessions/{s.id}", 404)
    api.delete_sandbox(other["id"])


def test_wrong_method_is_405(api, sb):
    cases = [
        ("DELETE", "/v1/info"),
        ("POST", "/v1/info"),
        ("PUT", "/v1/sandboxes"),
        ("DELETE", "/v1/sandboxes"),
        ("POST", "/v1/templates"),
        ("PATCH", f"/v1/sandboxes/{sb['id']}"),
        ("POST", f"/v1/sandboxes/{sb['id']}/logs"),
        ("DELETE", f"/v1/sandboxes/{sb['id']}/sessions"),
    ]
    for method, path in cases:
        err = api.expect_error(method, path, 405, {} if method in ("POST", "PUT", "PATCH") else None)
        assert err["code"] == "method_not_allowed", (method, path)
    assert api.sandbox(sb["id"])["state"] == "running"


@pytest.fixture(scope="module")
def done_ops(api):
    """The create and delete operations of a sandbox that came and went."""
    sb, create = api.create_sandbox("minimal")
    api.wait_op(create["id"])
    _, delete = api.delete_sandbox(sb["id"])
    api.wait_op(delete["id"])
    return create["id"], delete["id"]


@pytest.mark.parametrize("query", ["wait=61", "wait=-1", "wait=abc", "wait=1.5"])
def test_operation_wait_out_of_range_is_400(api, done_ops, query):
    for op_id in done_ops:
        err = api.expect_error("GET", f"/v1/operations/{op_id}?{query}", 400)
        assert err["code"] == "bad_request"


def test_done_operations_stay_readable(api, done_ops):
    create, delete = (api.operation(i, wait=0) for i in done_ops)
    assert create["kind"] == "create" and delete["kind"] == "delete"
    assert create["sandbox_id"] == delete["sandbox_id"]
    assert create["state"] == delete["state"] == "succeeded"


def test_list_with_bad_state_is_400(api):
    api.expect_error("GET", "/v1/sandboxes?state=nosuchstate", 400)
    api.expect_error("GET", "/v1/sandboxes?state=running,bogus", 400)


def test_bad_signal_and_bad_offsets_on_the_data_plane(api, sb):
    s = api.create_session(sb["id"], ["sleep", "60"])
    job = s.start(timeout=60)
    s.wait_running()
    for body in ({"signal": "SIGNOPE"}, {"signal": 0x7fffffff}, {"signal": None}, {}, b"{"):
        resp = s.dp("POST", "/signal", body,
                    headers={"Content-Type": "application/json"} if isinstance(body, bytes) else None)
        assert resp.status == 400, (body, resp)
    assert s.get()["state"] == "running"
    s.signal("SIGKILL")
    assert job.wait().signal == 9


def test_delete_twice_is_409_and_deleted_sandbox_refuses_sessions(api):
    sb = api.new_sandbox("minimal")
    _, op = api.delete_sandbox(sb["id"])
    # Deleting or deleted: a second delete is a conflict either way.
    err = api.expect_error("DELETE", f"/v1/sandboxes/{sb['id']}", 409)
    assert err["code"] == "conflict"
    assert api.wait_op(op["id"])["state"] == "succeeded"
    assert api.sandbox(sb["id"])["state"] == "deleted"
    err = api.expect_error("DELETE", f"/v1/sandboxes/{sb['id']}", 409)
    err = api.expect_error("POST", f"/v1/sandboxes/{sb['id']}/sessions", 409, {"argv": ["true"]})
    assert err["code"] == "conflict"
    assert not space.qemu_pids(sb["id"])


def test_sessions_of_a_deleted_sandbox_are_closed(api):
    sb = api.new_sandbox("minimal")
    s = api.create_session(sb["id"], ["sleep", "100"])
    job = s.start(timeout=60)
    s.wait_running()
    api.remove_sandbox(sb["id"])
    r = job.wait(timeout=30)  # the stream must end, not hang
    assert r.error is not None or r.exited, r
