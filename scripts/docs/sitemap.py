"""sitemap.py -- which repository files the docs site publishes, where each lands, and links.

The site's map (repository path -> site path):
  README.md                  -> index.html (the front page; overview.html when docs/index.md exists)
  docs/index.md              -> index.html
  docs/<dir>/<name>.md       -> <dir>/<name>.html, in the nav section of <dir>
  docs/<name>.md             -> <name>.html
  SPECIFICATION.md           -> specification.html (with the design notes)
  docs/api/openapi.yaml      -> api/openapi.yaml (the file itself) and api/openapi.html (generated)
  docs/<dir>/                -> <dir>/index.html (generated: the section's pages and summaries)
  sdk/<lang>/                -> sdk/<lang>/index.html, written by sdk/<lang>/docs.sh when it exists
"""

import os
import posixpath

import pages

# Nav sections, in order: (docs/ folder, title). Other folders follow, titled by their name.
SECTIONS = [("guides", "Guides"), ("api", "API reference"), ("design", "Design notes")]
SDKS = [("python", "Python"), ("typescript", "TypeScript")]
OPENAPI_SOURCE = "docs/api/openapi.yaml"
OPENAPI_PAGE = "api/openapi.html"


class Site:
    def __init__(self, root, sdk_root):
        self.root = root
        self.sdk_root = sdk_root
        self.pages = []            # markdown pages (pages.Page)
        self.targets = {}          # repository path -> site path
        self.dir_targets = {}      # repository folder -> its index page on the site
        self.sections = []         # (key, title, index target)
        self.sdk_status = {}       # sdk name -> site path of its index, or None when absent
        self.generated = {}        # site path -> (title, section key): pages made from no .md
        self._collect()

    # ---- what the site holds
    def _collect(self):
        docs = os.path.join(self.root, "docs")
        sources = []
        for dirpath, dirnames, filenames in os.walk(docs):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(".md"):
                    sources.append(posixpath.relpath(os.path.join(dirpath, name), self.root)
                                   .replace(os.sep, "/"))
        has_index = "docs/index.md" in sources
        folders = []
        for src in sources:
            rel = src[len("docs/"):]
            folder = rel.split("/")[0] if "/" in rel else ""
            if folder and folder not in folders:
                folders.append(folder)
            self._add(src, rel[:-3] + ".html", folder or "home")
        self._add("README.md", "overview.html" if has_index else "index.html", "home")
        if os.path.exists(os.path.join(self.root, "SPECIFICATION.md")):
            self._add("SPECIFICATION.md", "specification.html", "design")
        if "design" not in folders:
            folders.append("design")
        known = [key for key, _ in SECTIONS]
        ordered = [k for k in known if k in folders] + [f for f in folders if f not in known]
        titles = dict(SECTIONS)
        for key in ordered:
            target = f"{key}/index.html"
            title = titles.get(key, key.replace("-", " ").capitalize())
            self.sections.append((key, title, target))
            self.dir_targets[f"docs/{key}"] = target
            if f"docs/{key}/index.md" not in sources:
                self.generated[target] = (title, key)
        self.dir_targets["docs"] = "index.html"
        self.dir_targets["."] = "index.html"
        if os.path.exists(os.path.join(self.root, OPENAPI_SOURCE)):
            self.targets[OPENAPI_SOURCE] = "api/openapi.yaml"
            self.generated[OPENAPI_PAGE] = ("OpenAPI: every operation", "api")
        self.generated["sdk/index.html"] = ("SDKs", "sdk")
        self.dir_targets["sdk"] = "sdk/index.html"

    def _add(self, source, target, section):
        if source in self.targets:
            return
        page = pages.Page(self, source, target, section)
        self.pages.append(page)
        self.targets[source] = target

    def sdk_scripts(self):
        """(name, title, docs.sh path or None) for each SDK."""
        out = []
        for name, title in SDKS:
            script = os.path.join(self.sdk_root, name, "docs.sh")
            out.append((name, title, script if os.path.isfile(script) else None))
        return out

    def sdk_built(self, name):
        target = f"sdk/{name}/index.html"
        self.sdk_status[name] = target
        self.dir_targets[f"sdk/{name}"] = target

    def section_pages(self, key):
        found = [p for p in self.pages if p.section == key and not p.target.endswith("/index.html")]
        return sorted(found, key=lambda p: (p.title or p.target).lower())

    def target_of(self, source):
        return self.targets.get(source)

    # ---- links
    def rewrite(self, source, url):
        """A link written in the repository file source -> the link on its site page; None
        when it names a repository file the site does not publish."""
        if pages.is_external(url) or url.startswith("#") or url.startswith("/"):
            return url
        page_target = self.targets.get(source, OPENAPI_PAGE)
        path, hashmark, frag = url.partition("#")
        path = path.split("?", 1)[0]
        repo_path = posixpath.normpath(posixpath.join(posixpath.dirname(source), path))
        suffix = hashmark + frag
        if repo_path in self.targets:
            return pages.relative(page_target, self.targets[repo_path]) + suffix
        if repo_path in self.dir_targets:
            return pages.relative(page_target, self.dir_targets[repo_path]) + suffix
        full = os.path.join(self.root, repo_path)
        if not repo_path.startswith("..") and os.path.exists(full):
            return None
        # Missing: keep it (as .html when it was .md) so that the link check reports it.
        if path.endswith(".md"):
            path = path[:-3] + ".html"
        return path + suffix
