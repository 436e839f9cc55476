"""The files API (docs/design/channels.md): read with ranges, atomic writes, listings with their
metadata, stat, mkdir, remove, rename, tar both ways, watching, the errors each maps to, and the
files token on the data plane. Against a real `base` sandbox (Debian userland, user `user`)."""

import hashlib
import io
import json
import os
import queue
import tarfile
import threading
import time
import urllib.parse

import pytest

import space


def fpath(sb_id, route="", **query):
    qs = urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
    return f"/v1/sandboxes/{sb_id}/files{route}" + (f"?{qs}" if qs else "")


def sh(api, sb_id, script, user="root"):
    r = api.run(sb_id, ["/bin/sh", "-c", script], user=user)
    assert r.exit_code == 0, (script, r)
    return r.stdout.decode()


def put(api, sb_id, path, data, expect=200, **query):
    resp = api.raw("PUT", fpath(sb_id, path=path, **query), bytes(data),
                   headers={"Content-Type": "application/octet-stream"}, timeout=600)
    assert resp.status == expect, resp
    return resp


def get(api, sb_id, path, expect=200, headers=None, **query):
    resp = api.raw("GET", fpath(sb_id, path=path, **query), headers=headers, timeout=600)
    assert resp.status == expect, resp
    return resp


def err(api, method, path, status, code, body=None, headers=None):
    resp = api.raw(method, path, body, headers=headers)
    assert resp.status == status, resp
    e = space.check_error(resp, f"{method} {path}")
    assert e["code"] == code, e
    return e


def test_64_mib_write_then_read_back_with_matching_checksum(api, base_sb):
    sb_id = base_sb["id"]
    data = os.urandom(1 << 20) * 64
    want = hashlib.sha256(data).hexdigest()
    r = put(api, sb_id, "/tmp/big.bin", data)
    assert r.json == {"path": "/tmp/big.bin", "size": len(data)}, r.json
    # The guest holds exactly those bytes...
    assert sh(api, sb_id, "sha256sum /tmp/big.bin").split()[0] == want
    # ...and reading them back gives them again, with their size and mode.
    r = get(api, sb_id, "/tmp/big.bin")
    assert r.headers["Content-Length"] == str(len(data))
    assert r.headers["X-Space-File-Size"] == str(len(data))
    assert hashlib.sha256(r.body).hexdigest() == want


def test_write_is_atomic_replace_with_mode_and_owner(api, base_sb):
    sb_id = base_sb["id"]
    put(api, sb_id, "/tmp/m.txt", b"one\n", mode="0600")
    assert sh(api, sb_id, "stat -c %a /tmp/m.txt").strip() == "600"
    # Replacing keeps the mode unless one is given; no temp file is left behind.
    put(api, sb_id, "/tmp/m.txt", b"two\n")
    assert sh(api, sb_id, "stat -c %a /tmp/m.txt; cat /tmp/m.txt; ls -a /tmp | grep -c space- || true") \
        == "600\ntwo\n0\n"
    # As user: the file is theirs.
    put(api, sb_id, "/home/user/mine.txt", b"hi", user="user")
    assert sh(api, sb_id, "stat -c %U:%G /home/user/mine.txt").strip() == "user:user"
    # parents=1 makes the directories.
    put(api, sb_id, "/tmp/deep/a/b/c.txt", b"c", parents="1")
    assert get(api, sb_id, "/tmp/deep/a/b/c.txt").body == b"c"


def test_byte_ranges(api, base_sb):
    sb_id = base_sb["id"]
    data = bytes(range(256)) * 40
    put(api, sb_id, "/tmp/r.bin", data)
    r = get(api, sb_id, "/tmp/r.bin", expect=206, headers={"Range": "bytes=100-1099"})
    assert r.body == data[100:1100]
    assert r.headers["Content-Range"] == f"bytes 100-1099/{len(data)}"
    r = get(api, sb_id, "/tmp/r.bin", expect=206, headers={"Range": "bytes=10000-"})
    assert r.body == data[10000:]
    r = get(api, sb_id, "/tmp/r.bin", offset="5", length="7")
    assert r.body == data[5:12]
    e = err(api, "GET", fpath(sb_id, path="/tmp/r.bin"), 416, "range_not_satisfiable",
            headers={"Range": f"bytes={len(data) + 5}-"})
    assert e["message"]
    r = api.raw("GET", fpath(sb_id, path="/tmp/r.bin"), headers={"Range": f"bytes={len(data)}-"})
    assert r.status == 416 and r.headers["Content-Range"] == f"bytes */{len(data)}", r
    err(api, "GET", fpath(sb_id, path="/tmp/r.bin"), 416, "range_not_satisfiable", headers={"Range": "bytes=x-"})


def test_listing_has_the_right_metadata(api, base_sb):
    sb_id = base_sb["id"]
    sh(api, sb_id, "rm -rf /tmp/ls && mkdir -p /tmp/ls/sub && printf 12345 > /tmp/ls/f.txt && "
                   "chmod 0751 /tmp/ls/f.txt && ln -s f.txt /tmp/ls/link && echo x > /tmp/ls/sub/inner && "
                   "chown user:user /tmp/ls/sub/inner && touch -d @1700000000 /tmp/ls/f.txt")
    r = api.raw("GET", fpath(sb_id, "/list", path="/tmp/ls"))
    assert r.status == 200, r
    doc = r.json
    assert doc["path"] == "/tmp/ls"
    by = {e["name"]: e for e in doc["entries"]}
    assert [e["name"] for e in doc["entries"]] == ["f.txt", "link", "sub"]
    f = by["f.txt"]
    assert f["type"] == "file" and f["size"] == 5 and f["mode"] == 0o751
    assert f["permissions"] == "-rwxr-x--x" and f["owner"] == "root" and f["group"] == "root"
    assert f["path"] == "/tmp/ls/f.txt" and int(f["mtime"]) == 1700000000
    assert by["link"]["type"] == "symlink" and by["link"]["symlink_target"] == "f.txt"
    assert by["sub"]["type"] == "dir" and by["sub"]["permissions"].startswith("d")
    # depth 2 reaches into sub, right after it.
    doc = api.raw("GET", fpath(sb_id, "/list", path="/tmp/ls", depth="2")).json
    names = [e["path"] for e in doc["entries"]]
    assert names == ["/tmp/ls/f.txt", "/tmp/ls/link", "/tmp/ls/sub", "/tmp/ls/sub/inner"], names
    inner = doc["entries"][3]
    assert inner["owner"] == "user" and inner["size"] == 2
    st = api.raw("GET", fpath(sb_id, "/stat", path="/tmp/ls/link")).json
    assert st["type"] == "symlink" and st["symlink_target"] == "f.txt"


def test_mkdir_rename_remove(api, base_sb):
    sb_id = base_sb["id"]
    sh(api, sb_id, "rm -rf /tmp/mk")
    r = api.raw("POST", fpath(sb_id, "/mkdir"), {"path": "/tmp/mk/a/b", "parents": True, "mode": "0700"})
    assert r.status == 201 and r.json == {"path": "/tmp/mk/a/b", "created": True}, r
    r = api.raw("POST", fpath(sb_id, "/mkdir"), {"path": "/tmp/mk/a/b", "parents": True})
    assert r.status == 200 and r.json["created"] is False, r
    assert sh(api, sb_id, "stat -c %a /tmp/mk/a/b").strip() == "700"
    put(api, sb_id, "/tmp/mk/a/x", b"x")
    put(api, sb_id, "/tmp/mk/a/y", b"y")
    r = api.raw("POST", fpath(sb_id, "/rename"), {"from": "/tmp/mk/a/x", "to": "/tmp/mk/a/z"})
    assert r.status == 200 and r.json == {"from": "/tmp/mk/a/x", "to": "/tmp/mk/a/z"}, r
    err(api, "POST", fpath(sb_id, "/rename"), 409, "already_exists",
        {"from": "/tmp/mk/a/z", "to": "/tmp/mk/a/y", "overwrite": False})
    r = api.raw("DELETE", fpath(sb_id, path="/tmp/mk/a/z"))
    assert r.status == 200, r
    err(api, "DELETE", fpath(sb_id, path="/tmp/mk"), 409, "not_empty")
    r = api.raw("DELETE", fpath(sb_id, path="/tmp/mk", recursive="1"))
    assert r.status == 200, r
    err(api, "GET", fpath(sb_id, "/stat", path="/tmp/mk"), 404, "not_found")


def test_each_error_has_its_status(api, base_sb):
    sb_id = base_sb["id"]
    sh(api, sb_id, "mkdir -p /tmp/e && echo s > /root/secret && chmod 600 /root/secret && echo f > /tmp/e/f")
    err(api, "GET", fpath(sb_id, path="/tmp/e/missing"), 404, "not_found")
    err(api, "GET", fpath(sb_id, path="/tmp/e"), 400, "is_a_directory")
    err(api, "GET", fpath(sb_id, "/list", path="/tmp/e/f"), 400, "not_a_directory")
    err(api, "POST", fpath(sb_id, "/mkdir"), 409, "already_exists", {"path": "/tmp/e"})
    err(api, "POST", fpath(sb_id, "/mkdir"), 404, "not_found", {"path": "/tmp/nope/x"})
    err(api, "GET", fpath(sb_id, path="/root/secret", user="user"), 403, "permission_denied")
    err(api, "PUT", fpath(sb_id, path="/etc/passwd", user="user"), 403, "permission_denied", b"x")
    err(api, "PUT", fpath(sb_id, path="/tmp/e"), 400, "is_a_directory", b"x")
    err(api, "PUT", fpath(sb_id, path="/tmp/nope/x"), 404, "not_found", b"x")
    # Requests we refuse before the guest sees them.
    err(api, "GET", fpath(sb_id, path="relative"), 400, "bad_request")
    err(api, "GET", fpath(sb_id), 400, "bad_request")
    err(api, "PUT", fpath(sb_id, path="/tmp/x", mode="999"), 400, "bad_request", b"")
    err(api, "GET", fpath("sb-0000000000000000", path="/tmp"), 404, "not_found")
    err(api, "GET", fpath(sb_id, "/list", path="/tmp", depth="0"), 400, "bad_request")
    # The sandbox still answers afterwards, and the user's file is intact.
    assert get(api, sb_id, "/tmp/e/f").body == b"f\n"


def test_tar_a_directory_out_and_in_again(api, base_sb):
    sb_id = base_sb["id"]
    long = "d" * 120
    sh(api, sb_id, f"rm -rf /tmp/proj /tmp/copy && mkdir -p /tmp/proj/src/{long} /tmp/proj/empty /tmp/copy && "
                   f"head -c 300000 /dev/urandom > /tmp/proj/src/blob && echo hi > /tmp/proj/src/{long}/n.txt && "
                   "chmod 0640 /tmp/proj/src/blob && ln -s src/blob /tmp/proj/link && chmod 0700 /tmp/proj/empty")
    # As root: the tree has a 0700 directory root made (as `user`, the stream would stop there,
    # cut short: a reader can tell a partial archive from a whole one).
    r = api.raw("GET", fpath(sb_id, "/tar", path="/tmp/proj", user="root"), timeout=300)
    assert r.status == 200 and r.headers["Content-Type"] == "application/x-tar", r
    with tarfile.open(fileobj=io.BytesIO(r.body)) as t:
        names = sorted(m.name.rstrip("/") for m in t.getmembers())
    assert "proj/src/blob" in names and f"proj/src/{long}/n.txt" in names and "proj/link" in names, names
    assert all(n == "proj" or n.startswith("proj/") for n in names), names
    r = api.raw("PUT", fpath(sb_id, "/tar", path="/tmp/copy", user="root"), r.body,
                headers={"Content-Type": "application/x-tar"}, timeout=300)
    assert r.status == 200 and r.json["entries"] >= 6, r
    tree = ("cd {} && find . -printf '%p %y %m %s %l\\n' | sort && find . -type f -exec sha256sum {{}} + | sort")
    assert sh(api, sb_id, tree.format("/tmp/proj")) == sh(api, sb_id, tree.format("/tmp/copy/proj"))


def test_tar_in_refuses_paths_outside_the_target(api, base_sb):
    sb_id = base_sb["id"]
    sh(api, sb_id, "rm -rf /tmp/t && mkdir -p /tmp/t /tmp/outside && ln -s /tmp/outside /tmp/t/link")
    for name in ("../escape", "/tmp/abs-escape", "link/escape"):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
            info = tarfile.TarInfo(name)
            info.size = 3
            t.addfile(info, io.BytesIO(b"bad"))
        r = api.raw("PUT", fpath(sb_id, "/tar", path="/tmp/t"), buf.getvalue(),
                    headers={"Content-Type": "application/x-tar"})
        assert r.status == 400, (name, r)
    assert sh(api, sb_id, "ls -A /tmp/outside; ls /tmp/escape /tmp/abs-escape 2>&1 | grep -c 'No such' || true") == "2\n"


def test_watch_sees_a_file_created_by_a_command(api, base_sb):
    sb_id = base_sb["id"]
    sh(api, sb_id, "rm -rf /tmp/w && mkdir -p /tmp/w/sub")
    host, port = space.split_url(api.url)
    import http.client
    conn = http.client.HTTPConnection(host, port, timeout=60)
    conn.request("GET", fpath(sb_id, "/watch", path="/tmp/w", recursive="1"),
                 headers=space.bearer(api.key))
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("Content-Type") == "text/event-stream"
    events = queue.Queue()

    def reader():
        ev = {}
        try:
            for raw in resp:
                line = raw.decode().rstrip("\n")
                if not line:
                    events.put(ev)
                    ev = {}
                elif line.startswith("event: "):
                    ev["event"] = line[7:]
                elif line.startswith("data: "):
                    ev["data"] = json.loads(line[6:])
        except Exception:  # the connection closed under us at the end of the test
            pass
        events.put(None)

    threading.Thread(target=reader, daemon=True).start()
    first = events.get(timeout=60)
    assert first["event"] == "ready" and first["data"]["path"] == "/tmp/w", first
    sh(api, sb_id, "echo hello > /tmp/w/sub/made-by-command && mv /tmp/w/sub/made-by-command /tmp/w/moved && "
                   "rm /tmp/w/moved")
    seen = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ev = events.get(timeout=max(0.1, deadline - time.monotonic()))
        assert ev is not None, f"stream ended early; saw {seen}"
        assert ev["event"] == "fs", ev
        seen.append((ev["data"]["type"], ev["data"]["path"]))
        if ("remove", "/tmp/w/moved") in seen:
            break
    assert ("create", "/tmp/w/sub/made-by-command") in seen, seen
    assert ("write", "/tmp/w/sub/made-by-command") in seen, seen
    assert ("rename", "/tmp/w/sub/made-by-command") in seen and ("create", "/tmp/w/moved") in seen, seen
    conn.close()
    # The watch goes with its client: no watcher is left running in the guest.
    agents = ('c=$(cat /proc/1/comm); n=0; for p in /proc/[0-9]*; do '
              '[ "$(cat $p/comm 2>/dev/null)" = "$c" ] && n=$((n+1)); done; echo $n')
    deadline = time.monotonic() + 30
    while sh(api, sb_id, agents).strip() != "1":
        assert time.monotonic() < deadline, "the watcher outlived its client"
        time.sleep(0.5)


def test_files_token_opens_exactly_that_sandboxs_files(api, base_sb, sb):
    sb_id = base_sb["id"]
    r = api.raw("POST", f"/v1/sandboxes/{sb_id}/tokens", {"scope": "files", "ttl_s": 600})
    assert r.status == 201, r
    tok = r.json
    assert tok["scope"] == "files" and tok["sandbox_id"] == sb_id and len(tok["token"]) == 64
    dp = tok["url"]
    put(api, sb_id, "/tmp/tok.txt", b"via-token")
    r = space.http_request(dp, "GET", fpath(sb_id, path="/tmp/tok.txt"), headers=space.bearer(tok["token"]))
    assert r.status == 200 and r.body == b"via-token", r
    r = space.http_request(dp, "PUT", fpath(sb_id, path="/tmp/tok2.txt"), b"up", headers=space.bearer(tok["token"]))
    assert r.status == 200, r
    # Not another sandbox's files, not with the API key, not a session, not a bad token.
    for path, key in ((fpath(sb["id"], path="/tmp"), tok["token"]),
                      (fpath(sb_id, path="/tmp/tok.txt"), api.key),
                      (fpath(sb_id, path="/tmp/tok.txt"), "0" * 64),
                      ("/v1/sessions/ss-0000000000000000", tok["token"])):
        r = space.http_request(dp, "GET", path, headers=space.bearer(key))
        assert r.status in (401, 404), (path, r)
        space.check_error(r)
    err(api, "POST", f"/v1/sandboxes/{sb_id}/tokens", 400, "bad_request", {"scope": "everything"})
