"""The docs site (make docs, scripts/docs/build.py): every markdown file of docs/ and README.md
becomes a page, the OpenAPI file a page with every operation and schema, the SDKs' references
are linked when their docs.sh exists (and said to be missing when not), and no internal link
is broken. Built into temporary folders; needs no daemon. External links are listed, never
fetched. Skipped where python3-markdown or python3-yaml is missing (make deps installs them)."""

import glob
import html.parser
import importlib.util
import os
import re
import subprocess
import sys
import threading
import urllib.request
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

import space

pytest.importorskip("markdown")
yaml = pytest.importorskip("yaml")

DOCS_SCRIPTS = os.path.join(space.REPO, "scripts", "docs")
BUILD = os.path.join(DOCS_SCRIPTS, "build.py")
# The link checker, loaded from its file (scripts/docs is not put on every test's sys.path).
_spec = importlib.util.spec_from_file_location("space_docs_linkcheck",
                                               os.path.join(DOCS_SCRIPTS, "linkcheck.py"))
linkcheck = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = linkcheck      # dataclasses look their module up
_spec.loader.exec_module(linkcheck)

SDKS = ["python", "typescript"]


def build(out, *args, root=None, check=True):
    """Run build.py as make docs does; the finished process (output kept for messages)."""
    cmd = ["/usr/bin/python3", BUILD, "--out", str(out), *args]
    if root:
        cmd += ["--root", str(root)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    if check:
        assert r.returncode == 0, f"build.py failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return r


def read(out, target):
    with open(os.path.join(str(out), *target.split("/")), encoding="utf-8") as f:
        return f.read()


class Links(html.parser.HTMLParser):
    """The hrefs of a page, and the text of its navigation column."""

    def __init__(self):
        super().__init__()
        self.hrefs = []
        self.nav_text = []
        self._nav = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "nav":
            self._nav += 1
        if tag == "a" and "href" in a:
            self.hrefs.append(a["href"])

    def handle_endtag(self, tag):
        if tag == "nav":
            self._nav -= 1

    def handle_data(self, data):
        if self._nav:
            self.nav_text.append(data)


def links_of(text):
    p = Links()
    p.feed(text)
    return p


def markdown_sources():
    return sorted(os.path.relpath(p, space.REPO) for p in
                  glob.glob(os.path.join(space.REPO, "docs", "**", "*.md"), recursive=True))


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site as make docs builds it (the checkout's SDK docs.sh scripts, where present)."""
    out = tmp_path_factory.mktemp("docs") / "site"
    r = build(out)
    assert "pages in" in r.stdout
    return out


def test_every_markdown_file_has_a_page(site):
    sources = markdown_sources()
    assert len(sources) >= 20, sources
    for src in sources:
        page = src[len("docs/"):-3] + ".html"
        text = read(site, page)
        assert '<nav class="site-nav"' in text, page
        assert f"<code>{src}</code>" in text, f"{page} does not name its source {src}"
    index = read(site, "index.html")
    assert "<code>README.md</code>" in index and "Quick start" in index
    for section in ("guides", "api", "design", "sdk"):
        assert "<main" in read(site, f"{section}/index.html")
    with open(os.path.join(space.REPO, "docs", "api", "openapi.yaml"), "rb") as f:
        assert read(site, "api/openapi.yaml").encode() == f.read()


def test_no_broken_internal_link(site):
    report = linkcheck.check(str(site))
    # Listed, not fetched (pytest shows this with -rP or on a failure).
    print(f"{len(report.external)} external links:")
    for page, url in sorted(set(report.external)):
        print(f"  {page}: {url}")
    assert report.broken == [], "broken links:\n" + "\n".join(report.broken)
    assert report.pages >= len(markdown_sources()) and report.internal > 500, report


def test_markdown_links_point_at_pages(site):
    """Links between .md files became links between .html pages; none is absolute."""
    seen = 0
    for path in glob.glob(os.path.join(str(site), "**", "*.html"), recursive=True):
        rel = os.path.relpath(path, str(site))
        if rel.startswith("sdk" + os.sep) and rel != os.path.join("sdk", "index.html"):
            continue   # written by the SDKs' own docs.sh
        for href in links_of(open(path, encoding="utf-8").read()).hrefs:
            if re.match(r"^[a-z]+:", href):
                continue
            seen += 1
            assert not re.search(r"\.md($|#)", href), f"{rel}: {href}"
            assert not href.startswith("/"), f"{rel}: {href}"
    assert seen > 500
    # A known one: the reference's link to the lifecycle design note, fragment links kept.
    assert 'href="../design/lifecycle.html"' in read(site, "api/reference.html")
    assert 'href="e2b-control-plane.html#network"' in read(site, "design/e2b.html")


def test_openapi_page_has_every_operation_and_schema(site):
    with open(os.path.join(space.REPO, "docs", "api", "openapi.yaml")) as f:
        spec = yaml.safe_load(f)
    page = read(site, "api/openapi.html")
    sections = dict(re.findall(r'<section class="operation" id="([^"]+)">(.*?)</section>', page, re.S))
    count = 0
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if method not in ("get", "put", "post", "delete", "patch", "head", "options"):
                continue
            count += 1
            anchor = "op-" + op["operationId"]
            assert anchor in sections, f"{method} {path}: no #{anchor}"
            body = sections[anchor]
            assert f">{method.upper()}</span>" in body and f">{path}</code>" in body, anchor
            for p in item.get("parameters", []) + op.get("parameters", []):
                if "$ref" in p:   # resolved in place: the component's name must be shown
                    p = spec["components"]["parameters"][p["$ref"].rsplit("/", 1)[1]]
                assert f"<code>{p['name']}</code>" in body, f"{anchor}: parameter {p['name']}"
            for code in op.get("responses", {}):
                assert f"<td><code>{code}</code>" in body, f"{anchor}: response {code}"
            if "requestBody" in op:
                assert "<h4>Request body" in body, anchor
            assert f'href="#{anchor}"' in page, f"{anchor} is not in the contents"
    assert count == len(sections) and count >= 50
    for name in spec["components"]["schemas"]:
        assert f'<section class="schema" id="schema-{name}">' in page, name
    # A $ref to a schema is a link to it (the link check proves each one lands).
    assert page.count('href="#schema-') > 100


def test_nav_says_which_sdk_references_exist(site):
    index = links_of(read(site, "index.html"))
    nav = "".join(index.nav_text)
    for name in SDKS:
        script = os.path.join(space.REPO, "sdk", name, "docs.sh")
        if os.path.isfile(script):
            assert f"sdk/{name}/index.html" in index.hrefs
        else:
            assert f"no sdk/{name}/docs.sh" in nav
            assert not any(h.startswith(f"sdk/{name}") for h in index.hrefs)


FAKE_SDK = """#!/bin/bash
# a stand-in for sdk/<lang>/docs.sh: an index and one page, from "source"
set -euo pipefail
out=$1
mkdir -p "$out"
cat >"$out/index.html" <<'EOF'
<!doctype html><title>Fake SDK</title><h1 id="top">Fake SDK</h1>
<a href="client.html#Client">Client</a> <a href="../../index.html">docs home</a>
EOF
cat >"$out/client.html" <<'EOF'
<!doctype html><title>Client</title><h2 id="Client">class Client</h2><a href="index.html#top">back</a>
EOF
"""


def test_fake_sdk_docs_are_run_and_linked(tmp_path):
    sdk_root = tmp_path / "sdk"
    (sdk_root / "python").mkdir(parents=True)
    (sdk_root / "python" / "docs.sh").write_text(FAKE_SDK)
    out = tmp_path / "site"
    r = build(out, "--sdk-root", str(sdk_root), "--check")
    assert "SDK references: python" in r.stdout and "0 broken" in r.stdout, r.stdout
    assert "Fake SDK" in read(out, "sdk/python/index.html")
    assert 'id="Client"' in read(out, "sdk/python/client.html")
    for page in ("index.html", "design/vm.html", "api/openapi.html"):
        p = links_of(read(out, page))
        depth = page.count("/")
        assert "../" * depth + "sdk/python/index.html" in p.hrefs, page
        assert "no sdk/typescript/docs.sh" in "".join(p.nav_text), page
        assert not any("sdk/typescript" in h for h in p.hrefs), page
    sdk_index = links_of(read(out, "sdk/index.html"))
    assert "python/index.html" in sdk_index.hrefs


def test_failing_sdk_docs_fail_the_build(tmp_path):
    sdk_root = tmp_path / "sdk"
    (sdk_root / "typescript").mkdir(parents=True)
    (sdk_root / "typescript" / "docs.sh").write_text("echo 'tsc: no such thing' >&2; exit 3\n")
    r = build(tmp_path / "site", "--sdk-root", str(sdk_root), check=False)
    assert r.returncode == 1
    assert "TypeScript SDK" in r.stderr and "exited 3" in r.stderr and "tsc: no such thing" in r.stderr
    (sdk_root / "typescript" / "docs.sh").write_text("mkdir -p \"$1\"\n")
    r = build(tmp_path / "site", "--sdk-root", str(sdk_root), check=False)
    assert r.returncode == 1 and "wrote no" in r.stderr and "index.html" in r.stderr, r.stderr


def test_broken_links_in_the_docs_fail_the_check(tmp_path):
    """A small repository of its own: a link to a missing page or anchor fails --check, a link to a
    source file becomes its path as text, a link to a section folder its index."""
    root = tmp_path / "repo"
    (root / "docs" / "guides").mkdir(parents=True)
    (root / "src").mkdir()
    (root / "src" / "main.c").write_text("int main(void) { return 0; }\n")
    (root / "README.md").write_text("# Demo\n\nSee [the guide](docs/guides/a.md#usage) and "
                                    "[the code](src/main.c) and [all guides](docs/guides/).\n")
    (root / "docs" / "guides" / "a.md").write_text(
        "# A guide\n\n## Usage\n\nRead [b](b.md), [home](../../README.md#demo), [gone](missing.md) "
        "and [a bad anchor](b.md#nowhere).\n")
    (root / "docs" / "guides" / "b.md").write_text("# B\n\nBack to [a](a.md#usage).\n")
    out = tmp_path / "site"
    r = build(out, "--check", root=root, check=False)
    assert r.returncode == 1, r.stdout + r.stderr
    broken = [line for line in r.stderr.splitlines() if "broken link" in line]
    assert len(broken) == 2, r.stderr
    assert any("missing.html: no such file" in b for b in broken), broken
    assert any("b.html#nowhere: no #nowhere in guides/b.html" in b for b in broken), broken
    index = read(out, "index.html")
    assert 'href="guides/a.html#usage"' in index and 'href="guides/index.html"' in index
    assert '<code class="repo-path" title="a file of the repository">the code</code>' in index
    guide = read(out, "guides/a.html")
    assert 'href="../index.html#demo"' in guide and 'id="usage"' in guide


def test_checker_reports_each_kind_of_broken_link(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "index.html").write_text(
        '<h1 id="top">x</h1><a href="sub/">folder</a> <a href="sub/p.html#here">ok</a> '
        '<a href="#top">self</a> <a href="nope.html">missing</a> <a href="sub/p.html#gone">anchor</a> '
        '<a href="/abs.html">absolute</a> <a href="../out.html">outside</a> '
        '<img src="pic.png"> <a href="https://example.org/x">ext</a> <a href="mailto:a@b">mail</a>')
    (tmp_path / "sub" / "index.html").write_text('<a href="../index.html#top">up</a>')
    (tmp_path / "sub" / "p.html").write_text('<p id="here">p</p><p id="here">again</p>')
    report = linkcheck.check(str(tmp_path))
    whys = sorted(b.split(": ", 2)[-1] for b in report.broken)
    assert whys == sorted([
        "no such file", "no #gone in sub/p.html", "absolute path (the site's links must be relative)",
        "points outside the site", "no such file", "id 'here' appears more than once"]), report.broken
    assert sorted(u for _p, u in report.external) == ["https://example.org/x", "mailto:a@b"]
    assert report.internal == 9


def test_build_refuses_to_empty_a_folder_it_did_not_make(tmp_path):
    out = tmp_path / "precious"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    r = build(out, check=False)
    assert r.returncode == 1 and "not removing it" in r.stderr
    assert (out / "keep.txt").read_text() == "mine"


def test_site_is_browsable_over_http(site):
    """As python3 -m http.server --directory build/docs serves it, on loopback."""
    handler = partial(SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *a: None
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy
        for path, want in [("", "Quick start"), ("api/openapi.html", 'id="op-createSandbox"'),
                           ("design/", "Design notes"), ("guides/cli.html", "spacectl"),
                           ("style.css", ".site-nav")]:
            with opener.open(base + path, timeout=10) as resp:
                assert resp.status == 200, path
                assert want in resp.read().decode(), path
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert not thread.is_alive()
