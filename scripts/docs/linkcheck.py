#!/usr/bin/python3
"""linkcheck.py -- every internal link of a static site resolves; external ones are listed.

  scripts/docs/linkcheck.py DIR [--external]

Reads every .html file under DIR. An internal link (href or src without a scheme) must name
a file under DIR (a folder means its index.html), and its #fragment an id (or <a name>) in
that page. A link starting with '/' is broken too: the site's links are relative, so that
it works under any prefix and from file://. External links (http:, https:, mailto: ...) are
collected and never fetched. Exit status 1 when any link is broken.
"""

import html.parser
import os
import posixpath
import re
import sys
import urllib.parse
from dataclasses import dataclass, field

LINK_ATTRS = {"a": "href", "link": "href", "img": "src", "script": "src", "iframe": "src",
              "source": "src", "area": "href"}
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


class _Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids = set()
        self.links = []            # (line, url)
        self.duplicate_ids = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id",) + (("name",) if tag == "a" else ()):
            value = attrs.get(key)
            if value:
                if key == "id" and value in self.ids:
                    self.duplicate_ids.append(value)
                self.ids.add(value)
        attr = LINK_ATTRS.get(tag)
        if attr and attrs.get(attr) is not None:
            self.links.append((self.getpos()[0], attrs[attr]))

    handle_startendtag = handle_starttag


@dataclass
class Report:
    pages: int = 0
    internal: int = 0
    broken: list = field(default_factory=list)      # "page:line: url: why"
    external: list = field(default_factory=list)    # (page, url)


def _parse(path):
    p = _Page()
    with open(path, encoding="utf-8", errors="replace") as f:
        p.feed(f.read())
    p.close()
    return p


def check(root):
    """Report on every link of the .html files under root."""
    root = os.path.abspath(root)
    parsed = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            if name.endswith((".html", ".htm")):
                full = os.path.join(dirpath, name)
                parsed[os.path.relpath(full, root).replace(os.sep, "/")] = _parse(full)
    report = Report(pages=len(parsed))
    for page, p in sorted(parsed.items()):
        for dup in p.duplicate_ids:
            report.broken.append(f"{page}: id {dup!r} appears more than once")
        for line, url in p.links:
            where = f"{page}:{line}: {url}"
            url = url.strip()
            if SCHEME.match(url) or url.startswith("//"):
                if not url.lower().startswith(("javascript:", "data:")):
                    report.external.append((page, url))
                continue
            report.internal += 1
            why = _resolve(root, parsed, page, url)
            if why:
                report.broken.append(f"{where}: {why}")
    return report


def _resolve(root, parsed, page, url):
    """None when url, written in page, resolves; else why not."""
    if url.startswith("/"):
        return "absolute path (the site's links must be relative)"
    parts = urllib.parse.urlsplit(url)
    path = urllib.parse.unquote(parts.path)
    frag = urllib.parse.unquote(parts.fragment)
    if path:
        target = posixpath.normpath(posixpath.join(posixpath.dirname(page), path))
        if target == ".." or target.startswith("../"):
            return "points outside the site"
        full = os.path.join(root, *target.split("/"))
        if os.path.isdir(full):
            target = posixpath.join(target, "index.html") if target != "." else "index.html"
            full = os.path.join(full, "index.html")
        if not os.path.isfile(full):
            return "no such file"
    else:
        target = page
    if frag:
        if target not in parsed:
            return f"#{frag} in a file that is not HTML"
        if frag not in parsed[target].ids:
            return f"no #{frag} in {target}"
    return None


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        print(__doc__.strip().split("\n")[2], file=sys.stderr)
        return 2
    report = check(args[0])
    for line in report.broken:
        print(f"broken: {line}")
    if "--external" in sys.argv:
        for page, url in sorted(set(report.external)):
            print(f"external: {page}: {url}")
    print(f"{report.pages} pages, {report.internal} internal links, {len(report.broken)} broken, "
          f"{len(report.external)} external (not fetched)")
    return 1 if report.broken else 0


if __name__ == "__main__":
    sys.exit(main())
