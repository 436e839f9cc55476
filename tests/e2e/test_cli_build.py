"""spacectl template build -f Dockerfile against the real daemon: the Dockerfile made a build,
the directory sent as its context (.dockerignore honoured), the result started as a template
whose sandboxes see what it made; a failing RUN exits non-zero with why; an instruction the
builds cannot take is refused with its line before anything is sent; tags are the daemon's
(127 characters taken by both, 128 refused by both); what the daemon refuses is said with the
Dockerfile's line (a step, a FROM naming no template, an image archive as the base)."""

import json
import os
import re
import tarfile

import pytest

import space

DOCKERFILE = """\
# a comment
FROM minimal
ARG GREETING=hello
COPY app/ /opt/app/
COPY --chown=nobody:nogroup secret.txt /opt/owned/
ENV MODE=prod
WORKDIR /opt/app
RUN echo built > /var/tmp/built && cat /opt/app/hello.txt && echo "$GREETING from arg"
USER nobody
EXPOSE 8000
"""


@pytest.fixture(scope="module")
def cd():
    d = space.Daemon("spaced-clibuild")
    try:
        d.start()
        yield d
    finally:
        d.cleanup()


def write_dir(root, dockerfile, files):
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "Dockerfile"), "w") as f:
        f.write(dockerfile)
    for name, data in files.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(data)


def contexts(d):
    path = os.path.join(d.state_dir, "contexts")
    return set(os.listdir(path)) if os.path.isdir(path) else set()


def build_names(d):
    return [b["name"] for b in d.api.raw("GET", "/v1/templates/builds").json["builds"]]


def run_in(d, sb_id, script, **fields):
    r = d.api.run(sb_id, ["/bin/sh", "-c", script], **fields)
    assert r.exit_code == 0, (script, r.stdout, r.stderr)
    return r.stdout.decode()


def test_dockerfile_build_and_start_its_template(cd, tmp_path):
    root = str(tmp_path / "proj")
    write_dir(root, DOCKERFILE, {"app/hello.txt": "hello-from-context\n", "app/skip.log": "ignored\n",
                                 "secret.txt": "s3\n", ".dockerignore": "**/*.log\n"})
    long_tag = "L" + "x" * 125 + "9"  # 127: the longest tag the daemon takes
    p = space.spacectl(cd, "template", "build", "-f", os.path.join(root, "Dockerfile"), "-t", "clib:v1",
                       "-t", f"clib:{long_tag}", root, timeout=600)
    assert p.returncode == 0, p
    m = re.search(r"^clib:v1 (sha256:[0-9a-f]{64})$", p.stdout, re.M)
    assert m, p.stdout
    digest = m.group(1)
    assert f"clib:{long_tag} {digest}" in p.stdout, p.stdout
    assert "hello-from-context" in p.stdout and "hello from arg" in p.stdout, p.stdout  # the steps' output
    assert cd.api.template("clib:v1")["digest"] == digest
    assert cd.api.template(f"clib:{long_tag}")["digest"] == digest
    # The request's tags were the tag parts: the daemon named them clib:<tag>.
    build = [b for b in cd.api.raw("GET", "/v1/templates/builds").json["builds"] if b["name"] == "clib"][-1]
    assert sorted(build["tags"]) == sorted(["clib:v1", f"clib:{long_tag}"]), build
    sb = cd.api.new_sandbox("clib:v1")
    out = run_in(cd, sb["id"], "ls /opt/app; stat -c '%u:%g' /opt/owned/secret.txt; cat /var/tmp/built", user="root")
    assert out == "hello.txt\n65534:65534\nbuilt\n", out  # skip.log left out by .dockerignore
    assert run_in(cd, sb["id"], "id -u; echo $MODE; pwd") == "65534\nprod\n/opt/app\n"
    cd.api.remove_sandbox(sb["id"])
    # Again: every step cached, the same digest.
    p = space.spacectl(cd, "template", "build", "-t", "clib:v1", root, timeout=600)
    assert p.returncode == 0 and f"clib:v1 {digest}" in p.stdout, p


def test_failing_run_exits_non_zero(cd, tmp_path):
    root = str(tmp_path / "bad")
    write_dir(root, "FROM minimal\nRUN echo about-to-fail; exit 3\n", {})
    p = space.spacectl(cd, "template", "build", "-t", "clibad", root, timeout=600)
    assert p.returncode == 1, p
    assert "exited with code 3" in p.stderr, p
    assert "clibad" not in [t["name"] for t in cd.api.templates()]


def test_unsupported_instruction_refused_with_its_line(cd, tmp_path):
    root = str(tmp_path / "hc")
    write_dir(root, "FROM minimal\nRUN true\nHEALTHCHECK CMD true\n", {})
    before = contexts(cd)
    p = space.spacectl(cd, "template", "build", "-t", "clihc", root)
    assert p.returncode == 2, p
    assert "Dockerfile:3" in p.stderr and "HEALTHCHECK" in p.stderr, p.stderr
    assert contexts(cd) == before  # nothing was sent
    assert "clihc" not in build_names(cd)


def test_tag_over_127_refused_by_both(cd, tmp_path):
    root = str(tmp_path / "longtag")
    write_dir(root, "FROM minimal\nCOPY a.txt /a.txt\n", {"a.txt": "a\n"})
    before = contexts(cd)
    p = space.spacectl(cd, "template", "build", "-t", "clilong:" + "x" * 128, root)
    assert p.returncode == 2, p
    assert "a tag is 1 to 127" in p.stderr, p.stderr
    assert contexts(cd) == before and "clilong" not in build_names(cd)  # nothing was sent
    # The daemon draws the line at the same place.
    r = cd.api.raw("POST", "/v1/templates/builds", {"name": "clilong", "tags": ["x" * 128], "from": "minimal"})
    assert r.status == 400, (r.status, r.json)


def test_step_the_daemon_refuses_named_by_its_line(cd, tmp_path):
    root = str(tmp_path / "badchown")
    write_dir(root, "FROM minimal\nRUN true\nCOPY --chown=no!body a.txt /opt/\n", {"a.txt": "a\n"})
    p = space.spacectl(cd, "template", "build", "-t", "clichown", root)
    assert p.returncode == 1, p
    assert re.search(r"Dockerfile:3: COPY --chown=no!body a\.txt /opt/: the daemon refused it: "
                     r"steps\[1\]\.copy\.chown: .*HTTP 400", p.stderr), p.stderr
    assert "clichown" not in build_names(cd)


def test_from_no_template(cd, tmp_path):
    root = str(tmp_path / "nofrom")
    write_dir(root, "# base\nFROM python:3.12-slim\nRUN true\n", {})
    p = space.spacectl(cd, "template", "build", "-t", "clinofrom", root)
    assert p.returncode == 1, p
    assert "Dockerfile:2: FROM python:3.12-slim: " in p.stderr, p.stderr
    assert "FROM names a SPACE template" in p.stderr, p.stderr
    assert "clinofrom" not in build_names(cd)


def test_image_archive_base_not_supported_yet(cd, tmp_path):
    root = str(tmp_path / "archive")
    write_dir(root, "FROM oci-archive:img.tar\nRUN true\n", {"layer.txt": "x\n"})
    with tarfile.open(os.path.join(root, "img.tar"), "w") as t:
        t.add(os.path.join(root, "layer.txt"), arcname="layer.txt")
        t.addfile(tarfile.TarInfo("oci-layout"))
    p = space.spacectl(cd, "template", "build", "-t", "cliarch", root, cwd=root)
    assert p.returncode == 1, p
    assert "Dockerfile:1: FROM an image archive (img.tar): the daemon does not build from image archives yet" \
        in p.stderr, p.stderr
    assert "FROM a template instead" in p.stderr, p.stderr
    assert "cliarch" not in build_names(cd)
