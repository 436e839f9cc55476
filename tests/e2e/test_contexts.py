"""Build contexts (PUT /v1/contexts): a tar of build files, stored once under the sha256 of its
bytes, streamed (a body larger than the control plane's 1 MiB JSON limit is taken), and every
hostile or broken tar refused with what is wrong, leaving nothing behind."""

import hashlib
import http.client
import io
import os
import tarfile
import urllib.parse

import pytest

import space


@pytest.fixture(scope="module")
def ctx_daemon():
    d = space.Daemon("spaced-ctx", extra_args=["--context-max", "4", "--no-ready-snapshots"])
    try:
        d.start()
        yield d
    finally:
        d.cleanup()


def make_tar(entries):
    """entries: (name, bytes | None for a directory | ('sym', target) | ('chr',))"""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                t.addfile(info)
            elif isinstance(data, tuple) and data[0] == "sym":
                info.type = tarfile.SYMTYPE
                info.linkname = data[1]
                t.addfile(info)
            elif isinstance(data, tuple) and data[0] == "chr":
                info.type = tarfile.CHRTYPE
                t.addfile(info)
            else:
                info.size = len(data)
                info.mode = 0o644
                t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def stored(d):
    path = os.path.join(d.state_dir, "contexts")
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def put(d, body, key=...):
    return d.api.raw("PUT", "/v1/contexts", body, key=key, headers={"Content-Type": "application/x-tar"})


def test_put_is_content_addressed_and_stored_once(ctx_daemon):
    body = make_tar([("app/", None), ("app/main.py", b"print('hi')\n"), ("app/l", ("sym", "main.py")),
                     ("big.bin", os.urandom(2 << 20))])
    assert len(body) > 1 << 20  # over the control plane's JSON limit: the body streams
    r = put(ctx_daemon, body)
    assert r.status == 201, r.body
    want = "sha256:" + hashlib.sha256(body).hexdigest()
    assert r.json == {"context": want, "bytes": len(body)}
    again = put(ctx_daemon, body)
    assert again.status == 201 and again.json["context"] == want
    hexd = want[7:]
    assert stored(ctx_daemon) == [hexd + ".json", hexd + ".tar"]
    with open(os.path.join(ctx_daemon.state_dir, "contexts", hexd + ".tar"), "rb") as f:
        assert f.read() == body


def test_chunked_upload(ctx_daemon):
    body = make_tar([("a.txt", b"chunked\n" * 1000)])
    u = urllib.parse.urlsplit(ctx_daemon.api.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        conn.putrequest("PUT", "/v1/contexts")
        conn.putheader("Authorization", f"Bearer {ctx_daemon.api.key}")
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        for i in range(0, len(body), 3000):
            part = body[i:i + 3000]
            conn.send(b"%x\r\n%s\r\n" % (len(part), part))
        conn.send(b"0\r\n\r\n")
        r = conn.getresponse()
        data = r.read()
    finally:
        conn.close()
    assert r.status == 201, data
    assert b"sha256:" + hashlib.sha256(body).hexdigest().encode() in data


@pytest.mark.parametrize("entries, why", [
    ([("a/../../etc/passwd", b"x")], "'..'"),
    ([("/etc/passwd", b"x")], "absolute"),
    ([("dev/null", ("chr",))], "only files, directories and links"),
], ids=["dotdot", "absolute", "device"])
def test_hostile_tars_are_refused(ctx_daemon, entries, why):
    before = stored(ctx_daemon)
    err = ctx_daemon.api.expect_error("PUT", "/v1/contexts", 400, make_tar(entries))
    assert why in err["message"], err
    assert stored(ctx_daemon) == before


def test_bad_bodies(ctx_daemon):
    before = stored(ctx_daemon)
    err = ctx_daemon.api.expect_error("PUT", "/v1/contexts", 400, b"this is not a tar, not at all " * 40)
    assert "tar" in err["message"], err
    err = ctx_daemon.api.expect_error("PUT", "/v1/contexts", 400, b"")
    assert "empty" in err["message"], err
    # over --context-max 4 (MiB): refused from its Content-Length
    r = put(ctx_daemon, make_tar([("big", os.urandom(5 << 20))]))
    assert r.status == 413, r.body
    assert "over its limit of 4 MiB" in r.json["error"]["message"]
    # no key, no upload
    r = put(ctx_daemon, make_tar([("a", b"1")]), key=None)
    assert r.status == 401
    assert stored(ctx_daemon) == before
    assert not [n for n in os.listdir(os.path.join(ctx_daemon.state_dir, "contexts")) if n.startswith(".")]
    # the daemon still serves
    assert ctx_daemon.api.call("GET", "/v1/info", None).status == 200
