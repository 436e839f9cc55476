"""spacectl template build -f Dockerfile against the real daemon: the Dockerfile made a build,
the directory sent as its context (.dockerignore honoured), the result started as a template
whose sandboxes see what it made; a failing RUN exits non-zero with why; an instruction the
builds cannot take is refused with its line before anything is sent."""

import os
import re

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


def run_in(d, sb_id, script, **fields):
    r = d.api.run(sb_id, ["/bin/sh", "-c", script], **fields)
    assert r.exit_code == 0, (script, r.stdout, r.stderr)
    return r.stdout.decode()


def test_dockerfile_build_and_start_its_template(cd, tmp_path):
    root = str(tmp_path / "proj")
    write_dir(root, DOCKERFILE, {"app/hello.txt": "hello-from-context\n", "app/skip.log": "ignored\n",
                                 "secret.txt": "s3\n", ".dockerignore": "**/*.log\n"})
    p = space.spacectl(cd, "template", "build", "-f", os.path.join(root, "Dockerfile"), "-t", "clib:v1", root,
                       timeout=600)
    assert p.returncode == 0, p
    m = re.search(r"^clib:v1 (sha256:[0-9a-f]{64})$", p.stdout, re.M)
    assert m, p.stdout
    digest = m.group(1)
    assert "hello-from-context" in p.stdout and "hello from arg" in p.stdout, p.stdout  # the steps' output
    assert cd.api.template("clib:v1")["digest"] == digest
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
    before = set(os.listdir(os.path.join(cd.state_dir, "contexts"))) \
        if os.path.isdir(os.path.join(cd.state_dir, "contexts")) else set()
    p = space.spacectl(cd, "template", "build", "-t", "clihc", root)
    assert p.returncode == 2, p
    assert "Dockerfile:3" in p.stderr and "HEALTHCHECK" in p.stderr, p.stderr
    after = set(os.listdir(os.path.join(cd.state_dir, "contexts"))) \
        if os.path.isdir(os.path.join(cd.state_dir, "contexts")) else set()
    assert after == before  # nothing was sent
    builds = cd.api.raw("GET", "/v1/templates/builds").json["builds"]
    assert "clihc" not in [b["name"] for b in builds]
