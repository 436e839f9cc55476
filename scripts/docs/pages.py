"""pages.py -- markdown to HTML for the docs site: heading anchors, links rewritten to the site.

Every page comes from a file of the repository (README.md, docs/**/*.md, SPECIFICATION.md).
A link in it names another repository file relative to it; the site knows where each file it
publishes lands (Site.href_for), so a link becomes a relative link between site pages, with
.md turned into .html. A link to a repository file the site does not publish (a source file)
becomes its path as text: there is nothing to link to. A link to a file that does not exist
is kept, so that the link check finds it.
"""

import html
import os
import posixpath
import re
import unicodedata
import xml.etree.ElementTree as etree

import markdown
from markdown.extensions import Extension
from markdown.treeprocessors import Treeprocessor

import gfm

try:
    import pygments  # noqa: F401  (python3-pygments: highlighting is optional)
    HAVE_PYGMENTS = True
except ImportError:
    HAVE_PYGMENTS = False

EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def slugify(text, used):
    """GitHub's heading anchor: lower case, punctuation dropped, each space a '-';
    a repeated anchor gets -1, -2 ... (the same anchors links written for GitHub use)."""
    text = unicodedata.normalize("NFKC", text).strip().lower()
    slug = "".join(c for c in text if c.isalnum() or c in "-_ ").replace(" ", "-")
    slug = slug or "section"
    base, n = slug, 0
    while slug in used:
        n += 1
        slug = f"{base}-{n}"
    used.add(slug)
    return slug


def text_of(el):
    return "".join(el.itertext())


class _SiteTree(Treeprocessor):
    """Heading ids, link rewriting and the page's title, once inline markup is parsed."""

    def __init__(self, md, page):
        super().__init__(md)
        self.page = page

    def run(self, root):
        used = set()
        for el in root.iter():
            if el.tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
                el.set("id", slugify(self._heading_text(el), used))
                if el.tag == "h1" and self.page.title is None:
                    self.page.title = self._heading_text(el)
            elif el.tag == "table":
                el.set("class", "doc-table")
        for parent in root.iter():
            for i, el in enumerate(list(parent)):
                if el.tag == "a" and el.get("href"):
                    self._rewrite(parent, i, el, "href")
                elif el.tag == "img" and el.get("src"):
                    self._rewrite(parent, i, el, "src")

    def _heading_text(self, el):
        # Raw HTML inside a heading is still a placeholder (\x02...\x03) here: left out.
        return re.sub("\x02[^\x03]*\x03", "", text_of(el)).strip()

    def _rewrite(self, parent, index, el, attr):
        url = el.get(attr)
        new = self.page.site.rewrite(self.page.source, url)
        if new is None:
            # A repository file the site does not publish: its path, as code, no link.
            code = etree.Element("code", {"class": "repo-path", "title": "a file of the repository"})
            code.text = text_of(el) or url
            code.tail = el.tail
            parent.remove(el)
            parent.insert(index, code)
        else:
            el.set(attr, new)


class _SiteExtension(Extension):
    def __init__(self, page):
        super().__init__()
        self.page = page

    def extendMarkdown(self, md):
        # After 'inline' (20), which makes the <a> elements; before 'prettify' (10).
        md.treeprocessors.register(_SiteTree(md, self.page), "space-site", 15)
        # No raw HTML: the docs write placeholders such as <token> or <id> in plain text,
        # which are meant to be read, not to be tags. Escaped, they show as written.
        md.preprocessors.deregister("html_block")
        md.inlinePatterns.deregister("html")


def _converter(page):
    exts = ["tables", "fenced_code", "sane_lists", _SiteExtension(page)]
    configs = {}
    if HAVE_PYGMENTS:
        exts.append("codehilite")
        configs["codehilite"] = {"guess_lang": False, "css_class": "codehilite"}
    return markdown.Markdown(extensions=exts, extension_configs=configs, output_format="html")


class Page:
    """One page of the site: its repository source, where it lands, its title and body."""

    def __init__(self, site, source, target, section):
        self.site = site
        self.source = source      # repository path, e.g. docs/design/vm.md
        self.target = target      # site path, e.g. design/vm.html
        self.section = section    # nav section name
        self.title = None
        self.body = None
        self.summary = ""

    def render(self):
        with open(os.path.join(self.site.root, self.source), encoding="utf-8") as f:
            text = f.read()
        self.body = _converter(self).convert(gfm.normalize(text))
        if self.title is None:
            self.title = posixpath.splitext(posixpath.basename(self.source))[0]
        self.summary = _first_paragraph(self.body)
        return self


def _first_paragraph(body):
    m = re.search(r"<p>(.*?)</p>", body, re.S)
    if not m:
        return ""
    text = html.unescape(re.sub(r"<[^>]+>", "", m.group(1))).strip()
    return text if len(text) <= 240 else text[:237].rsplit(" ", 1)[0] + " ..."


def render_markdown(site, text, source):
    """Markdown text from the repository file source (an OpenAPI description) -> HTML."""
    page = Page(site, source, site.target_of(source) or "api/openapi.html", None)
    return _converter(page).convert(gfm.normalize(text))


def relative(from_target, to_target):
    """The relative URL from one site page to another site path."""
    rel = posixpath.relpath(to_target, posixpath.dirname(from_target) or ".")
    return rel


def is_external(url):
    return EXTERNAL.match(url) is not None or url.startswith("//")
