#!/usr/bin/python3
"""build.py -- the docs site (make docs): docs/**/*.md, README.md, the OpenAPI file and the
SDKs' references, as static HTML with one layout and relative links only.

  scripts/docs/build.py [--out build/docs] [--sdk-root sdk] [--check]

Needs Debian's python3-markdown and python3-yaml (python3-pygments, when present, highlights
code). sdk/<lang>/docs.sh OUTDIR, where it exists, writes that SDK's reference into
OUT/sdk/<lang>/. --check runs the link check (scripts/docs/linkcheck.py) on the result.
Why this and not pandoc, Sphinx or MkDocs: docs/design/docs-site.md.
"""

import argparse
import html
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True      # no __pycache__ left in scripts/docs
sys.path.insert(0, HERE)

import layout  # noqa: E402
import linkcheck  # noqa: E402
import openapi_page  # noqa: E402
import pages  # noqa: E402
import sitemap as docsite  # noqa: E402

MARKER = ".space-docs"          # marks a folder this script made (and may empty again)
SDK_TIMEOUT_S = 300


class BuildError(Exception):
    pass


def prepare_out(out):
    """An empty output folder; refuses to empty one that this script did not make."""
    if os.path.exists(out):
        if not os.path.isdir(out):
            raise BuildError(f"{out}: exists and is not a folder")
        if os.listdir(out) and not os.path.exists(os.path.join(out, MARKER)):
            raise BuildError(f"{out}: not empty and not a docs build (no {MARKER}); not removing it")
        shutil.rmtree(out)
    os.makedirs(out)
    with open(os.path.join(out, MARKER), "w") as f:
        f.write("made by scripts/docs/build.py; emptied on each build\n")


def write(out, target, text):
    path = os.path.join(out, *target.split("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def run_sdk_docs(site, out):
    """Each SDK's docs.sh into OUT/sdk/<name>/; its index.html must be there afterwards."""
    for name, title, script in site.sdk_scripts():
        if script is None:
            continue
        dest = os.path.join(out, "sdk", name)
        os.makedirs(dest, exist_ok=True)
        try:
            r = subprocess.run(["bash", script, dest], cwd=site.root, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=SDK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise BuildError(f"{title} SDK: {script} ran over {SDK_TIMEOUT_S} s") from None
        if r.returncode != 0:
            raise BuildError(f"{title} SDK: {script} {dest} exited {r.returncode}:\n"
                             f"{(r.stderr or r.stdout).strip()[-2000:]}")
        if not os.path.isfile(os.path.join(dest, "index.html")):
            raise BuildError(f"{title} SDK: {script} wrote no {dest}/index.html")
        site.sdk_built(name)


def section_index(site, key, title):
    items = [(p.target, p.title, p.summary) for p in site.section_pages(key)]
    if key == "api" and "api/openapi.html" in site.generated:
        items.append(("api/openapi.html", "OpenAPI: every operation",
                      "Every path and method, with parameters, bodies, responses and schemas, "
                      "generated from openapi.yaml."))
    rows = "".join(
        f'<li><a href="{html.escape(pages.relative(f"{key}/index.html", t))}">{html.escape(n)}</a>'
        f'{f"<p>{html.escape(s)}</p>" if s else ""}</li>' for t, n, s in items)
    return f'<h1 id="top">{html.escape(title)}</h1><ul class="page-list">{rows}</ul>'


def sdk_index(site):
    items = []
    for name, title, _script in site.sdk_scripts():
        target = site.sdk_status.get(name)
        if target:
            link = f'<a href="{html.escape(pages.relative("sdk/index.html", target))}">{title} SDK</a>'
            items.append(f"<li>{link}: generated from <code>sdk/{name}</code>'s source.</li>")
        else:
            items.append(f"<li>{title} SDK: not built (this checkout has no "
                         f"<code>sdk/{name}/docs.sh</code>).</li>")
    return ('<h1 id="top">SDKs</h1><p>Each SDK\'s reference is generated from its source by '
            "<code>sdk/&lt;language&gt;/docs.sh</code> when <code>make docs</code> runs.</p>"
            f'<ul class="page-list">{"".join(items)}</ul>')


def build(root, out, sdk_root):
    started = time.monotonic()
    prepare_out(out)
    site = docsite.Site(root, sdk_root)
    run_sdk_docs(site, out)
    for page in site.pages:
        page.render()
    highlight = pages.HAVE_PYGMENTS
    for page in site.pages:
        write(out, page.target, layout.page(site, page.target, page.title, page.body,
                                            page.source, highlight))
    for target, (title, key) in site.generated.items():
        if target == "api/openapi.html":
            src = os.path.join(root, docsite.OPENAPI_SOURCE)
            title, body = openapi_page.render(
                src, lambda text: pages.render_markdown(site, text, docsite.OPENAPI_SOURCE))
            source = docsite.OPENAPI_SOURCE
        elif key == "sdk":
            body, source = sdk_index(site), None
        else:
            body, source = section_index(site, key, title), None
        write(out, target, layout.page(site, target, title, body, source, highlight))
    if docsite.OPENAPI_SOURCE in site.targets:
        shutil.copyfile(os.path.join(root, docsite.OPENAPI_SOURCE), os.path.join(out, "api", "openapi.yaml"))
    shutil.copyfile(os.path.join(HERE, "style.css"), os.path.join(out, "style.css"))
    if highlight:
        from pygments.formatters import HtmlFormatter
        write(out, "pygments.css", HtmlFormatter(style="default").get_style_defs(".codehilite"))
    count = len(site.pages) + len(site.generated)
    built = [n for n, _t, _s in site.sdk_scripts() if site.sdk_status.get(n)]
    return count, built, time.monotonic() - started


def main():
    root_default = os.path.dirname(os.path.dirname(HERE))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=root_default, help="the repository (default: this script's)")
    ap.add_argument("--out", default=None, help="output folder (default ROOT/build/docs)")
    ap.add_argument("--sdk-root", default=None, help="where <lang>/docs.sh are (default ROOT/sdk)")
    ap.add_argument("--check", action="store_true", help="check every internal link afterwards")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    out = os.path.abspath(args.out or os.path.join(root, "build", "docs"))
    sdk_root = os.path.abspath(args.sdk_root or os.path.join(root, "sdk"))
    try:
        count, built, secs = build(root, out, sdk_root)
    except (BuildError, ValueError, OSError) as e:
        print(f"docs: error: {e}", file=sys.stderr)
        return 1
    sdks = ", ".join(built) if built else "none"
    print(f"docs: {count} pages in {out} ({secs:.1f} s; SDK references: {sdks})")
    if args.check:
        report = linkcheck.check(out)
        for line in report.broken:
            print(f"docs: broken link: {line}", file=sys.stderr)
        print(f"docs: links: {report.internal} internal checked, {len(report.broken)} broken, "
              f"{len(report.external)} external (not fetched)")
        if report.broken:
            return 1
    print(f"docs: browse with: python3 -m http.server --bind 127.0.0.1 --directory {os.path.relpath(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
