"""Template builds (POST /v1/templates/builds) with real builder VMs: every kind of step, the
result started as a template whose sandboxes see what the steps made, the event log as SSE
(resumable), layers reused by a rebuild, a failing step, and bad input refused."""

import io
import json
import os
import tarfile
import time

import pytest

import space

BUILD_TIMEOUT = 600


@pytest.fixture(scope="module")
def bd():
    d = space.Daemon("spaced-builds")
    try:
        d.start()
        yield d
    finally:
        d.cleanup()


def make_tar(files):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o755 if name.endswith(".sh") else 0o644
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def put_context(d, files):
    r = d.api.raw("PUT", "/v1/contexts", make_tar(files), headers={"Content-Type": "application/x-tar"})
    assert r.status == 201, r.body
    return r.json["context"]


def start_build(d, body, expect=202):
    r = d.api.raw("POST", "/v1/templates/builds", body)
    assert r.status == expect, r.body
    return r.json


def wait_build(d, started):
    op = d.api.wait_op(started["operation"], timeout=BUILD_TIMEOUT)
    r = d.api.raw("GET", f"/v1/templates/builds/{started['build']['id']}")
    assert r.status == 200, r.body
    b = r.json
    assert b["state"] == ("succeeded" if op["state"] == "succeeded" else "failed"), (op, b)
    assert op["kind"] == "build" and op["result"]["build"] == b["id"], op
    return b, op


def events(d, build_id, headers=None, query=""):
    r = d.api.raw("GET", f"/v1/templates/builds/{build_id}/logs{query}", headers=headers, timeout=60)
    assert r.status == 200, r.body
    assert r.headers.get("Content-Type") == "text/event-stream"
    out = []
    for block in r.body.decode().split("\n\n"):
        ev = {}
        for line in block.split("\n"):
            if line.startswith(":") or not line:
                continue
            k, _, v = line.partition(": ")
            ev[k] = v
        if ev:
            out.append((ev.get("id"), ev["event"], json.loads(ev["data"])))
    return out


def run_in(d, sb_id, script, **fields):
    r = d.api.run(sb_id, ["/bin/sh", "-c", script], **fields)
    assert r.exit_code == 0, (script, r.stdout, r.stderr)
    return r.stdout.decode()


RECIPE_FILES = {"app/run.sh": b"#!/bin/sh\necho app-ran\n", "app/data.txt": b"payload\n", "other.txt": b"x\n"}


def recipe(ctx, last="echo last-step"):
    return {
        "name": "e2e-myenv", "tags": ["v1"], "from": "minimal", "context": ctx,
        "steps": [
            {"run": "echo hello-build; mkdir -p /opt/made && echo one > /opt/made/one"},
            {"copy": {"src": "app/", "dest": "/opt/app"}},
            {"copy": {"src": "other.txt", "dest": "/opt/owned/", "chown": "nobody:nogroup"}},
            {"env": {"MODE": "prod"}},
            {"workdir": "/opt/app"},
            {"run": ["/bin/sh", "-c", "pwd > /var/tmp/pwd; echo $MODE > /var/tmp/mode"]},
            {"user": "nobody"},
            {"run": last},
        ],
    }


def test_build_every_step_kind_and_start_the_result(bd):
    ctx = put_context(bd, RECIPE_FILES)
    started = start_build(bd, recipe(ctx))
    assert started["build"]["id"].startswith("bd-") and started["build"]["state"] in ("pending", "running")
    assert len(started["build"]["steps"]) == 8
    b, op = wait_build(bd, started)
    assert b["state"] == "succeeded", b
    assert b["digest"].startswith("sha256:") and op["result"]["digest"] == b["digest"]
    assert [s["state"] for s in b["steps"]] == ["done"] * 8 and not any(s["cached"] for s in b["steps"]), b
    assert b["tags"] == ["e2e-myenv:v1"] and b["finished_at"]

    t = bd.api.template("e2e-myenv:v1")
    assert t["digest"] == b["digest"], t
    sb = bd.api.new_sandbox("e2e-myenv:v1")
    assert sb["template_digest"] == b["digest"], sb
    out = run_in(bd, sb["id"], "cat /opt/made/one /opt/app/data.txt; /opt/app/run.sh; cat /var/tmp/pwd /var/tmp/mode;"
                 " stat -c '%u:%g' /opt/owned/other.txt; ls /opt/app; id -u; echo $MODE", user="root")
    assert out.split("\n") == ["one", "payload", "app-ran", "/opt/app", "prod", "65534:65534", "data.txt",
                               "run.sh", "0", "prod", ""], out
    # The template's defaults: the last user step's user and its env for every command.
    assert run_in(bd, sb["id"], "id -u; echo $MODE") == "65534\nprod\n"
    # ... and the last workdir is where its commands start (unless they say otherwise).
    assert run_in(bd, sb["id"], "pwd") == "/opt/app\n"
    assert run_in(bd, sb["id"], "pwd", cwd="/var/tmp") == "/var/tmp\n"
    assert t["workdir"] == "/opt/app" and t["default_user"] == "nobody" and t["env"]["MODE"] == "prod", t

    evs = events(bd, b["id"])
    kinds = [e[1] for e in evs]
    assert kinds[-1] == "end" and evs[-1][2]["state"] == "succeeded" and evs[-1][2]["digest"] == b["digest"]
    logs = "".join(e[2]["data"] for e in evs if e[1] == "log")
    assert "hello-build" in logs and "last-step" in logs, logs
    assert all(e[2]["step"] in (0, 7) for e in evs if e[1] == "log"), evs
    done = [e[2]["index"] for e in evs if e[1] == "step" and e[2]["state"] == "done"]
    assert done == list(range(8)), evs
    # Resumable: from any event's id, exactly what came after it (header or query).
    mid = len(evs) // 2
    assert events(bd, b["id"], headers={"Last-Event-ID": evs[mid][0]}) == evs[mid + 1:]
    assert events(bd, b["id"], query=f"?offset={evs[mid][0]}") == evs[mid + 1:]
    listed = bd.api.raw("GET", "/v1/templates/builds").json["builds"]
    assert b["id"] in [x["id"] for x in listed]
    bd.api.remove_sandbox(sb["id"])


def test_rebuild_reuses_layers(bd):
    ctx = put_context(bd, RECIPE_FILES)
    first, _ = wait_build(bd, start_build(bd, recipe(ctx)))
    assert first["state"] == "succeeded", first
    t0 = time.monotonic()
    again, _ = wait_build(bd, start_build(bd, recipe(ctx)))
    cached_s = time.monotonic() - t0
    assert again["state"] == "succeeded" and all(s["cached"] for s in again["steps"]), again
    assert again["digest"] == first["digest"], (first, again)  # the same layer makes the same template
    evs = events(bd, again["id"])
    assert not [e for e in evs if e[1] == "log"], evs  # nothing ran
    changed, _ = wait_build(bd, start_build(bd, recipe(ctx, last="echo changed-last")))
    assert changed["state"] == "succeeded", changed
    assert [s["cached"] for s in changed["steps"]] == [True] * 7 + [False], changed
    assert changed["digest"] != first["digest"]
    logs = "".join(e[2]["data"] for e in events(bd, changed["id"]) if e[1] == "log")
    assert "changed-last" in logs and "hello-build" not in logs, logs
    print(f"cached rebuild: {cached_s:.1f}s")


def test_failing_step_fails_the_build(bd):
    started = start_build(bd, {"name": "e2e-broken", "from": "minimal",
                               "steps": [{"run": "echo before"}, {"run": "echo bad-output >&2; exit 3"},
                                         {"run": "echo never"}]})
    b, op = wait_build(bd, started)
    assert b["state"] == "failed" and op["state"] == "failed", b
    assert "exited with code 3" in b["error"] and "exited with code 3" in op["error"], b
    assert [s["state"] for s in b["steps"]] == ["done", "failed", "pending"], b
    evs = events(bd, b["id"])
    logs = "".join(e[2]["data"] for e in evs if e[1] == "log")
    assert "bad-output" in logs and "never" not in logs
    assert evs[-1][1] == "end" and evs[-1][2]["state"] == "failed"
    assert "e2e-broken" not in [t["name"] for t in bd.api.templates()]


@pytest.mark.parametrize("body,status,words", [
    ({"name": "x", "from": "minimal", "bogus": 1}, 400, "bogus"),
    ({"name": "x", "from": "no-such-template", "steps": []}, 404, "no-such-template"),
    ({"name": "x", "from": "minimal", "context": "sha256:" + "0" * 64,
      "steps": [{"copy": {"src": "a", "dest": "/a"}}]}, 404, "context"),
    ({"name": "x", "from": "minimal", "steps": [{"copy": {"src": "a", "dest": "/a"}}]}, 400, "context"),
    ({"name": "x", "from": "minimal", "steps": [{"frobnicate": "a"}]}, 400, "steps[0]"),
    ({"name": "x", "from": "minimal", "disk_mib": 100}, 400, "disk_mib"),
    ({"name": "x", "from": {"image": "sha256:" + "1" * 64}}, 400, "not supported yet"),
])
def test_bad_builds_are_refused(bd, body, status, words):
    r = bd.api.raw("POST", "/v1/templates/builds", body)
    assert r.status >= 400 and (status is None or r.status == status), r.body
    assert words in r.json["error"]["message"], r.json


def test_bad_build_reads(bd):
    bd.api.expect_error("GET", "/v1/templates/builds/bd-0000000000000000", 404)
    bd.api.expect_error("GET", "/v1/templates/builds/bd-0000000000000000/logs", 404)
    r = bd.api.raw("POST", "/v1/templates/builds", b"{not json", headers={"Content-Type": "application/json"})
    assert r.status == 400
    started = start_build(bd, {"name": "e2e-tiny", "from": "minimal", "steps": [{"env": {"A": "1"}}]})
    b, _ = wait_build(bd, started)
    assert b["state"] == "succeeded", b
    bd.api.expect_error("GET", f"/v1/templates/builds/{b['id']}/logs?offset=3", 400)
    bd.api.expect_error("GET", f"/v1/templates/builds/{b['id']}/logs?offset=99999999", 400)
    bd.api.expect_error("GET", f"/v1/templates/builds/{b['id']}/logs?offset=-1", 400)


def test_restart_fails_a_running_build_and_keeps_the_others(bd):
    done, _ = wait_build(bd, start_build(bd, {"name": "e2e-kept", "from": "minimal",
                                              "steps": [{"run": "echo kept > /var/tmp/k"}]}))
    assert done["state"] == "succeeded", done
    started = start_build(bd, {"name": "e2e-cut", "from": "minimal",
                               "steps": [{"run": "echo started-sleeping; sleep 600"}]})
    bid = started["build"]["id"]
    deadline = time.monotonic() + 120
    while "started-sleeping" not in "".join(e[2].get("data", "") for e in events_now(bd, bid)):
        assert time.monotonic() < deadline, "the long step never started"
        time.sleep(0.5)
    bd.restart()
    b = bd.api.raw("GET", f"/v1/templates/builds/{bid}").json
    assert b["state"] == "failed" and "restarted" in b["error"], b
    op = bd.api.wait_op(started["operation"])
    assert op["state"] == "failed", op
    evs = events(bd, bid)  # ends: the stream of a build that will never go on is closed
    assert evs[-1][1] == "end" and evs[-1][2]["state"] == "failed", evs[-3:]
    kept = bd.api.raw("GET", f"/v1/templates/builds/{done['id']}").json
    assert kept["state"] == "succeeded" and kept["digest"] == done["digest"], kept
    assert bd.api.template("e2e-kept")["digest"] == done["digest"]


def events_now(d, build_id):
    """The events so far of a build still running: read with a short timeout, cut off."""
    import http.client
    import urllib.parse
    u = urllib.parse.urlsplit(d.api.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=3)
    out = []
    try:
        conn.request("GET", f"/v1/templates/builds/{build_id}/logs",
                     headers={"Authorization": f"Bearer {d.api.key}"})
        resp = conn.getresponse()
        buf = b""
        try:
            while True:
                chunk = resp.read1(65536)
                if not chunk:
                    break
                buf += chunk
        except (TimeoutError, OSError):
            pass
        for block in buf.decode(errors="replace").split("\n\n"):
            ev = dict(line.partition(": ")[::2] for line in block.split("\n") if line and not line.startswith(":"))
            if "data" in ev:
                out.append((ev.get("id"), ev.get("event"), json.loads(ev["data"])))
    finally:
        conn.close()
    return out


START = {"cmd": "mkdir -p /var/tmp/www && echo served-by-start > /var/tmp/www/index.html && "
                "exec httpd -f -p 127.0.0.1:8000 -h /var/tmp/www",
         "ready": "wget -q -O - http://127.0.0.1:8000/ | grep -q served-by-start", "timeout_s": 60}


def server_answers(d, sb_id):
    return run_in(d, sb_id, "wget -q -O - http://127.0.0.1:8000/; pidof httpd >/dev/null && echo up", user="root")


def test_start_command_runs_in_every_sandbox(bd):
    b, _ = wait_build(bd, start_build(bd, {"name": "e2e-server", "from": "minimal", "start": START,
                                           "steps": [{"run": "echo built"}]}))
    assert b["state"] == "succeeded", b
    t = bd.api.template("e2e-server")
    assert t["start"]["cmd"] == START["cmd"], t
    # The ready snapshot is taken with the server running: a clone has it at once.
    bd.api.new_sandbox("e2e-server")  # the first create boots (and has it running too)
    t = bd.api.wait_ready_snapshot("e2e-server", timeout=120)
    sb = bd.api.new_sandbox("e2e-server")
    assert sb["start_kind"] == "clone", sb
    assert server_answers(bd, sb["id"]) == "served-by-start\nup\n"
    bd.api.remove_sandbox(sb["id"])


def test_start_command_on_a_cold_boot_and_when_it_never_gets_ready():
    # No build cache at all: every layer is deleted once its build ends.
    d = space.Daemon("spaced-builds-cold", extra_args=["--no-ready-snapshots", "--build-cache-max", "0"])
    try:
        d.start()
        b, _ = wait_build(d, start_build(d, {"name": "e2e-cold", "from": "minimal", "start": START,
                                             "steps": [{"run": "echo built"}]}))
        assert b["state"] == "succeeded", b
        sb = d.api.new_sandbox("e2e-cold")
        assert sb["start_kind"] == "boot", sb
        assert server_answers(d, sb["id"]) == "served-by-start\nup\n"
        d.api.remove_sandbox(sb["id"])
        again, _ = wait_build(d, start_build(d, {"name": "e2e-cold", "from": "minimal", "start": START,
                                                 "steps": [{"run": "echo built"}]}))
        assert again["state"] == "succeeded" and not again["steps"][0]["cached"], again
        snaps = os.path.join(d.state_dir, "snapshots")
        deadline = time.monotonic() + 30  # the cache is trimmed just after the build ends
        while os.path.isdir(snaps) and os.listdir(snaps):
            assert time.monotonic() < deadline, os.listdir(snaps)
            time.sleep(0.2)
        never = dict(START, ready="false", timeout_s=3)
        b, _ = wait_build(d, start_build(d, {"name": "e2e-never", "from": "minimal", "start": never,
                                             "steps": [{"run": "echo built"}]}))
        assert b["state"] == "succeeded", b
        sbx, op = d.api.create_sandbox("e2e-never")
        op = d.api.wait_op(op["id"])
        assert op["state"] == "failed" and "not ready within its timeout" in op["error"], op
        assert d.api.sandbox(sbx["id"])["state"] == "failed"
        d.api.remove_sandbox(sbx["id"])
    finally:
        d.cleanup()


def test_promote_a_sandbox(bd):
    sb = bd.api.new_sandbox("minimal")
    run_in(bd, sb["id"], "mkdir -p /opt/p && echo promoted > /opt/p/file")
    r = bd.api.raw("POST", f"/v1/sandboxes/{sb['id']}/template", {"name": "e2e-promoted", "tags": ["v1"]})
    assert r.status == 202, r.body
    b, op = wait_build(bd, r.json)
    assert b["state"] == "succeeded" and b["steps"] == [], b
    assert bd.api.sandbox(sb["id"])["state"] == "running"  # it runs on
    assert run_in(bd, sb["id"], "cat /opt/p/file") == "promoted\n"
    kid = bd.api.new_sandbox("e2e-promoted:v1")
    assert kid["template_digest"] == b["digest"]
    assert run_in(bd, kid["id"], "cat /opt/p/file") == "promoted\n"
    # The snapshot it was made from is gone; nothing hidden is listed.
    assert not [s for s in bd.api.snapshots() if s["name"] and s["name"].startswith(".")]
    bd.api.expect_error("POST", f"/v1/sandboxes/{sb['id']}/template", 400, {"name": "x", "bogus": 1})
    e = bd.api.raw("POST", f"/v1/sandboxes/{sb['id']}/template", {"name": "x", "memory": True})
    assert e.status == 400 and "memory" in e.json["error"]["message"], e.body
    bd.api.expect_error("POST", "/v1/sandboxes/sb-0000000000000000/template", 404, {"name": "x"})
    bd.api.remove_sandbox(kid["id"])
    bd.api.remove_sandbox(sb["id"])


def test_tags_move_history_and_delete(bd):
    one, _ = wait_build(bd, start_build(bd, {"name": "e2e-tags", "tags": ["v1", "latest"], "from": "minimal",
                                             "steps": [{"run": "echo 1 > /var/tmp/v"}]}))
    sb = bd.api.new_sandbox("e2e-tags:v1")
    two, _ = wait_build(bd, start_build(bd, {"name": "e2e-tags", "tags": ["v2", "latest"], "from": "minimal",
                                             "steps": [{"run": "echo 2 > /var/tmp/v"}]}))
    assert one["digest"] != two["digest"]
    t = bd.api.template("e2e-tags")  # latest moved to the new digest; v1 stayed
    assert t["digest"] == two["digest"] and sorted(t["tags"]) == ["e2e-tags:latest", "e2e-tags:v2"], t
    assert [h["digest"] for h in t["history"]] == [two["digest"], one["digest"]], t["history"]
    assert t["history"][1]["tags"] == ["e2e-tags:v1"], t["history"]
    assert bd.api.template("e2e-tags:v1")["digest"] == one["digest"]
    bd.api.call("DELETE", "/v1/templates/e2e-tags:v1", None, expect=204)
    bd.api.expect_error("GET", "/v1/templates/e2e-tags:v1", 404)
    bd.api.expect_error("DELETE", "/v1/templates/e2e-tags:v1", 404)
    # The sandbox made from the untagged digest runs on, and the digest still makes sandboxes.
    assert run_in(bd, sb["id"], "cat /var/tmp/v") == "1\n"
    other = bd.api.new_sandbox(one["digest"])
    assert run_in(bd, other["id"], "cat /var/tmp/v") == "1\n"
    bd.api.call("DELETE", "/v1/templates/e2e-tags", None, expect=204)
    assert "e2e-tags" not in [x["name"] for x in bd.api.templates()]
    bd.api.expect_error("GET", "/v1/templates/e2e-tags", 404)
    bd.api.expect_error("DELETE", "/v1/templates/no-such-thing", 404)
    bd.api.expect_error("DELETE", "/v1/templates/bad%20name", 400)
    assert run_in(bd, sb["id"], "cat /var/tmp/v") == "1\n"
    bd.api.remove_sandbox(sb["id"])
    bd.api.remove_sandbox(other["id"])
